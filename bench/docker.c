/*
 * Benchmark of Docker volumes through csid's volume plugin (not a test:
 * it prints figures and targets, and fails only when a run breaks). It
 * runs a sandboxed dockerd (test/lib/engine.h) and a real `csid server`
 * with one `csid agent` serving the plugin (test/lib/cluster.h, with
 * csi-hostpath), and measures, spawn to exit of the docker command:
 *   1. `docker run --rm -v data:/data IMAGE true` with a csid volume
 *      against the same with a volume of Docker's `local` driver, runs
 *      alternating; medians and their ratio, target <= 1.2x;
 *   2. `docker volume create -d <plugin> -o size=1M` (returns once the
 *      volume is ready) and `docker volume rm` (returns once it is
 *      deleted): medians.
 *
 *   bench_docker [runs [volumes]]    defaults 20, 10
 *
 * Skipped with a message (exit 0) where no engine can start. Needs root.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_stat.h"
#include "cluster.h"
#include "engine.h"

#define BENCH_OUT 8192

struct bench {
	struct engine en;
	struct cluster c;
	char plugin[40], socket[96], extra[512], out[BENCH_OUT];
};

/* Runs a docker command; its duration in ms, or -1 (the output printed). */
static double bench_run(struct bench *b, const char *const *args)
{
	double t0 = bench_stat_now_ms();
	int rc = engine_run(&b->en, b->out, sizeof(b->out), args);

	if (rc != 0) {
		fprintf(stderr, "bench docker: %s %s: exit %d: %s\n", args[0], args[1], rc, b->out);
		return -1;
	}
	return bench_stat_now_ms() - t0;
}

/* The median duration_ms of the agent's log lines for plugin call `call`; -1 when none. */
static double bench_call_ms(struct bench *b, const char *call)
{
	char line[2048], needle[64];
	double v[4096];
	int n = 0;
	FILE *f = fopen(b->c.a[0]->log, "r");

	snprintf(needle, sizeof(needle), "path=/VolumeDriver.%s ", call);
	while (f && n < 4096 && fgets(line, sizeof(line), f)) {
		const char *d = strstr(line, "duration_ms=");

		if (strstr(line, "api=docker plugin") && strstr(line, needle) && d)
			v[n++] = strtod(d + 12, NULL);
	}
	if (f)
		fclose(f);
	return n ? bench_stat_median(v, n) : -1;
}

static int bench_main(struct bench *b, int runs, int vols)
{
	const char *mk_csid[] = {"volume", "create", "-d", b->plugin, "csidvol", NULL};
	const char *mk_local[] = {"volume", "create", "localvol", NULL};
	const char *run_csid[] = {"run", "--rm", "-v", "csidvol:/data", ENGINE_IMAGE, "true", NULL};
	const char *run_local[] = {"run",        "--rm", "-v", "localvol:/data",
				   ENGINE_IMAGE, "true", NULL};
	double *tc = calloc((size_t)runs, sizeof(double)),
	       *tl = calloc((size_t)runs, sizeof(double));
	double *cr = calloc((size_t)vols, sizeof(double)),
	       *rm = calloc((size_t)vols, sizeof(double));
	double mc, ml;
	int rc = -1;

	if (!tc || !tl || !cr || !rm || bench_run(b, mk_csid) < 0 || bench_run(b, mk_local) < 0)
		goto out;
	/* One untimed run of each: the image and the plugin are warm. */
	if (bench_run(b, run_csid) < 0 || bench_run(b, run_local) < 0)
		goto out;
	for (int i = 0; i < runs; i++)
		if ((tc[i] = bench_run(b, run_csid)) < 0 || (tl[i] = bench_run(b, run_local)) < 0)
			goto out;
	for (int i = 0; i < vols; i++) {
		char name[32];
		const char *mk[] = {"volume", "create",  "-d", b->plugin,
				    "-o",     "size=1M", name, NULL};
		const char *del[] = {"volume", "rm", name, NULL};

		snprintf(name, sizeof(name), "lat-%d", i);
		if ((cr[i] = bench_run(b, mk)) < 0 || (rm[i] = bench_run(b, del)) < 0)
			goto out;
	}
	mc = bench_stat_median(tc, runs);
	ml = bench_stat_median(tl, runs);
	printf("docker run --rm -v VOL:/data true, median of %d: csid %.1f ms, local %.1f ms, "
	       "ratio %.2fx (target <= 1.2x)\n",
	       runs, mc, ml, mc / ml);
	printf("docker volume create -d csid -o size=1M (until ready), median of %d: %.1f ms\n",
	       vols, bench_stat_median(cr, vols));
	printf("docker volume rm (until deleted), median of %d: %.1f ms\n", vols,
	       bench_stat_median(rm, vols));
	printf("in the agent, median: Mount %.1f ms, Unmount %.1f ms, Create %.1f ms, Remove %.1f "
	       "ms\n",
	       bench_call_ms(b, "Mount"), bench_call_ms(b, "Unmount"), bench_call_ms(b, "Create"),
	       bench_call_ms(b, "Remove"));
	rc = 0;
out:
	free(tc);
	free(tl);
	free(cr);
	free(rm);
	return rc;
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 20, vols = argc > 2 ? atoi(argv[2]) : 10, rc;
	static struct bench b;
	char why[256];

	if (runs < 1 || vols < 1) {
		fprintf(stderr, "usage: bench_docker [runs [volumes]]\n");
		return 2;
	}
	rc = engine_docker_start(&b.en, why, sizeof(why));
	if (rc == 1) {
		printf("bench docker: skipped: no container engine here: %s\n", why);
		engine_stop(&b.en);
		return 0;
	}
	snprintf(b.plugin, sizeof(b.plugin), "csidbench%d", (int)getpid());
	snprintf(b.socket, sizeof(b.socket), "/run/docker/plugins/%s.sock", b.plugin);
	snprintf(b.extra, sizeof(b.extra),
		 "\"docker_plugin\": {\"name\": \"%s\", \"socket\": \"%s\", \"engine_socket\": "
		 "\"%s\"},",
		 b.plugin, b.socket, b.en.sock);
	b.c.agent_extra[0] = b.extra;
	if (rc == 0 && cluster_start(&b.c, 1) == 0)
		rc = bench_main(&b, runs, vols);
	else
		rc = -1;
	engine_stop(&b.en);
	cluster_cleanup(&b.c);
	unlink(b.socket);
	return rc == 0 ? 0 : 1;
}
