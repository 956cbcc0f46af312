/*
 * Benchmark of claims from the node, end to end (not a test: it prints
 * figures and targets, and fails only when a run breaks). It runs the real
 * `csid dev` (a server, an agent joined to it and a supervised
 * csi-hostpath with controller publish on, in one process) on a private
 * directory under /tmp and the real csictl, and measures:
 *   1. claim to mounted path: through the agent API alone (PUT
 *      /v1/agent/volumes/<vol>/mount on a keep-alive connection) and as
 *      the same work in bare CSI RPCs to the same csi-hostpath socket
 *      (ControllerPublishVolume, NodeStageVolume, NodePublishVolume),
 *      one of each in turns (bench_pairs): medians, p99, ratio of the
 *      medians, target <= 2x; then the CPU time csid dev and its plugin
 *      spent per agent API cycle (from /proc, load-independent enough to
 *      compare builds on a busy machine); then `csictl volume mount VOL
 *      -alloc A` from spawn to exit. Between cycles, untimed: the unmount
 *      (or the matching unpublish/unstage RPCs), and for the claims a
 *      wait until the server has freed the volume;
 *   2. mounts per second: 8 csictl processes (then 8 agent API clients on
 *      threads) mounting 8 volumes for 8 allocations at once, per round
 *      from the first start to the last path; untimed unmounts between
 *      rounds;
 *   3. the README's tour without its file write: `csictl volume create
 *      vol.json -wait`, `volume mount data -alloc web-1`, `volume unmount`,
 *      `volume delete data -wait`: wall time (median, target < 50 ms) of
 *      the tours whose delete the server took; a delete refused because
 *      the unmount's release is still in flight is counted and, untimed,
 *      repeated once the volume is freed.
 *
 *   bench_e2e [cycles [rounds [tours]]]    defaults 200, 25, 20
 *
 * Needs root (bind mounts). A failed run prints the end of the csid dev
 * log; csictl's stderr goes to <dir>/csictl.err.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "agent_proc.h"
#include "bench_stat.h"
#include "hostpath_proc.h"
#include "server_proc.h"

#define BENCH_HP SERVER_PROC_HP_ID
#define BENCH_WARMUP 5
#define BENCH_CLIENTS 8
#define BENCH_WAIT_MS 60000
#define BENCH_ENV_MAX 256
#define BENCH_OUT 4096

extern char **environ;

struct bench {
	struct server_proc s;
	struct agent_proc a; /* only its socket: the agent of csid dev */
	char dev_dir[SERVER_PROC_PATH + 8];
	char env_addr[128];
	char env_agent[AGENT_PROC_PATH + 32];
	char *envp[BENCH_ENV_MAX + 3];
	char err_log[SERVER_PROC_PATH + 16];
};

static const char bench_spec[] = "{\"plugin_id\": \"" BENCH_HP "\", \"capacity_min\": 1048576,"
				 " \"capabilities\": [{\"access_mode\": \"single-node-writer\","
				 " \"attachment_mode\": \"file-system\"}]}";

/* The q-quantile (0.5: median) of v[0..n); sorts v. */
static double bench_quantile(double *v, int n, double q)
{
	int i = (int)(q * (n - 1) + 0.5);

	bench_stat_sort(v, n);
	return v[i < n ? i : n - 1];
}

static void bench_die(struct bench *b, const char *what)
{
	char text[8192];
	FILE *f = fopen(b->err_log, "r");
	size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;

	text[n] = '\0';
	if (f)
		fclose(f);
	fprintf(stderr, "bench e2e: %s; csictl said:\n%s\n", what, text);
	server_proc_dump_log(&b->s, what);
	server_proc_cleanup(&b->s);
	exit(1);
}

/* Starts csictl with args (NULL-terminated, no argv[0]), stdout into a pipe *fd. */
static pid_t bench_csictl_start(struct bench *b, const char *const *args, int *fd)
{
	char *argv[16] = {(char *)CSICTL_BIN};
	posix_spawn_file_actions_t fa;
	int p[2], rc;
	pid_t pid;

	for (int i = 0; args[i] && i < 14; i++)
		argv[i + 1] = (char *)args[i];
	if (pipe2(p, O_CLOEXEC) != 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	posix_spawn_file_actions_addopen(&fa, 2, b->err_log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	rc = posix_spawn(&pid, CSICTL_BIN, &fa, NULL, argv, b->envp);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc != 0) {
		close(p[0]);
		return -1;
	}
	*fd = p[0];
	return pid;
}

/* Reads fd to its end into out (size len), waits for pid: its exit status or -1. */
static int bench_csictl_finish(pid_t pid, int fd, char *out, size_t len)
{
	size_t n = 0;
	ssize_t got;
	int st;

	while ((got = read(fd, out + n, len - 1 - n)) > 0 || (got < 0 && errno == EINTR))
		if (got > 0 && (n += (size_t)got) == len - 1)
			break;
	out[n] = '\0';
	close(fd);
	if (waitpid(pid, &st, 0) != pid)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs csictl with args to its end; stdout into out (may be NULL). Exit status or -1. */
static int bench_csictl(struct bench *b, const char *const *args, char *out, size_t len)
{
	char buf[BENCH_OUT];
	int fd;
	pid_t pid = bench_csictl_start(b, args, &fd);

	if (pid < 0)
		return -1;
	return bench_csictl_finish(pid, fd, out ? out : buf, out ? len : sizeof(buf));
}

/* The environment of csictl: ours without CSID_ADDR/CSID_AGENT_ADDR, then theirs. */
static void bench_env(struct bench *b)
{
	int n = 0;

	snprintf(b->env_addr, sizeof(b->env_addr), "CSID_ADDR=%s", b->s.base);
	snprintf(b->env_agent, sizeof(b->env_agent), "CSID_AGENT_ADDR=unix:%s", b->a.sock);
	for (char **e = environ; *e && n < BENCH_ENV_MAX; e++)
		if (strncmp(*e, "CSID_ADDR=", 10) != 0 && strncmp(*e, "CSID_AGENT_ADDR=", 16) != 0)
			b->envp[n++] = *e;
	b->envp[n++] = b->env_addr;
	b->envp[n++] = b->env_agent;
	b->envp[n] = NULL;
}

/* hostpath with a healthy controller and node plugin. */
static bool bench_plugin_up(json_t *doc)
{
	json_t *p = json_object_get(doc, "controllers"), *n = json_object_get(doc, "nodes");

	return json_integer_value(json_object_get(p, "healthy")) == 1 &&
	       json_integer_value(json_object_get(n, "healthy")) == 1;
}

static void bench_start(struct bench *b)
{
	const char *args[] = {"dev", "-data-dir", b->dev_dir, "-listen", b->s.addr, NULL};

	if (server_proc_init(&b->s) != 0)
		exit(1);
	snprintf(b->dev_dir, sizeof(b->dev_dir), "%s/dev", b->s.dir);
	snprintf(b->err_log, sizeof(b->err_log), "%s/csictl.err", b->s.dir);
	snprintf(b->a.sock, sizeof(b->a.sock), "%s/agent/agent.sock", b->dev_dir);
	bench_env(b);
	if (server_proc_start_args(&b->s, args) != 0 ||
	    !server_proc_wait_ready(&b->s, BENCH_WAIT_MS))
		bench_die(b, "csid dev did not start");
	if (!server_proc_wait_doc(&b->s, "/v1/plugin/" BENCH_HP, bench_plugin_up, BENCH_WAIT_MS) ||
	    agent_proc_wait_ready(&b->a, BENCH_WAIT_MS) != 0)
		bench_die(b, "hostpath never healthy");
}

/* Creates volume id through the server and waits until it is ready. */
static void bench_create(struct bench *b, const char *id)
{
	char path[128];

	snprintf(path, sizeof(path), "/v1/volume/%s/create", id);
	if (server_proc_put(&b->s, path, bench_spec) != 200)
		bench_die(b, "volume create refused");
	snprintf(path, sizeof(path), "/v1/volume/%s", id);
	if (!server_proc_wait_doc(&b->s, path, server_proc_volume_ready, BENCH_WAIT_MS))
		bench_die(b, "volume never ready");
}

/* Nothing claimed or published any more. */
static bool bench_freed(json_t *doc)
{
	return json_is_array(json_object_get(doc, "claims")) &&
	       json_array_size(json_object_get(doc, "claims")) == 0 &&
	       json_array_size(json_object_get(doc, "publications")) == 0;
}

/* Follows volume id with blocking queries until the server has freed it. */
static void bench_wait_freed(struct bench *b, const char *id)
{
	double deadline = bench_stat_now_ms() + BENCH_WAIT_MS;
	long long index = 0;

	while (bench_stat_now_ms() < deadline) {
		char path[128];
		json_t *j = NULL;
		bool ok;

		snprintf(path, sizeof(path), "/v1/volume/%s?index=%lld&wait=5s", id, index);
		server_proc_http(&b->s, "GET", path, NULL, &j);
		ok = bench_freed(j);
		index = (long long)json_integer_value(json_object_get(j, "modify_index"));
		json_decref(j);
		if (ok)
			return;
	}
	bench_die(b, "volume never freed");
}

/* PUT /v1/agent/volumes/<vol>/mount for alloc on a; the HTTP status. */
static long bench_api_mount(struct agent_proc *a, const char *vol, const char *alloc)
{
	char path[128], body[128];

	snprintf(path, sizeof(path), "/v1/agent/volumes/%s/mount", vol);
	snprintf(body, sizeof(body), "{\"alloc_id\": \"%s\"}", alloc);
	return agent_proc_http(a, "PUT", path, body, NULL);
}

static long bench_api_unmount(struct agent_proc *a, const char *vol, const char *alloc)
{
	char path[128];

	snprintf(path, sizeof(path), "/v1/agent/volumes/%s/mount/%s", vol, alloc);
	return agent_proc_http(a, "DELETE", path, NULL, NULL);
}

static void bench_report(const char *what, double *v, int n)
{
	double p50 = bench_quantile(v, n, 0.5), p99 = bench_quantile(v, n, 0.99);

	printf("%s p50=%.2f p99=%.2f n=%d\n", what, p50, p99, n);
	fflush(stdout);
}

/* 1a. csictl volume mount, spawn to exit; returns the median. */
static double bench_csictl_mounts(struct bench *b, int cycles)
{
	const char *mount[] = {"volume", "mount", "lat", "-alloc", "a-1", NULL};
	double *v = calloc((size_t)cycles, sizeof(*v)), med;
	char out[BENCH_OUT];

	if (!v)
		bench_die(b, "out of memory");
	for (int i = 0; i < cycles + BENCH_WARMUP; i++) {
		double t0 = bench_stat_now_ms();

		if (bench_csictl(b, mount, out, sizeof(out)) != 0 || out[0] != '/')
			bench_die(b, "csictl volume mount failed");
		if (i >= BENCH_WARMUP)
			v[i - BENCH_WARMUP] = bench_stat_now_ms() - t0;
		if (bench_api_unmount(&b->a, "lat", "a-1") != 200)
			bench_die(b, "unmount failed");
		bench_wait_freed(b, "lat");
	}
	bench_report("claim_to_path_csictl_ms", v, cycles);
	med = bench_quantile(v, cycles, 0.5);
	free(v);
	return med;
}

/* CPU time (ms) of process pid and its children so far, from /proc; 0 when unreadable. */
static double bench_cpu_ms(pid_t pid)
{
	unsigned long long ticks = 0;
	char path[64], line[1024];
	struct dirent *d;
	DIR *dir = opendir("/proc");

	while (dir && (d = readdir(dir))) {
		unsigned long long ut, st;
		const char *p;
		int ppid, self;
		FILE *f;

		if (d->d_name[0] < '0' || d->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", d->d_name);
		if (!(f = fopen(path, "r")))
			continue;
		p = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
		fclose(f);
		self = atoi(d->d_name);
		/* After the name: state ppid ... (fields 3-4), utime stime (14-15). */
		if (p &&
		    sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ppid,
			   &ut, &st) == 3 &&
		    (self == pid || ppid == pid))
			ticks += ut + st;
	}
	if (dir)
		closedir(dir);
	return (double)ticks * 1e3 / (double)sysconf(_SC_CLK_TCK);
}

/* One agent API mount, timed (ms), then its unmount and the wait until the server freed it. */
static double bench_api_cycle(struct bench *b)
{
	double t0 = bench_stat_now_ms(), ms;

	if (bench_api_mount(&b->a, "lat", "a-1") != 200)
		bench_die(b, "agent API mount failed");
	ms = bench_stat_now_ms() - t0;
	if (bench_api_unmount(&b->a, "lat", "a-1") != 200)
		bench_die(b, "unmount failed");
	bench_wait_freed(b, "lat");
	return ms;
}

/*
 * 1b. The CPU time csid dev and its plugin spend per agent API cycle
 * (mount, unmount, release, and the bench's blocking queries), a figure
 * that the machine's load does not move much.
 */
static void bench_api_cpu(struct bench *b, int cycles)
{
	double cpu0;

	b->a.keepalive = true;
	for (int i = 0; i < BENCH_WARMUP; i++)
		bench_api_cycle(b);
	cpu0 = bench_cpu_ms(b->s.pid);
	for (int i = 0; i < cycles; i++)
		bench_api_cycle(b);
	printf("agent_api_cycle_cpu_ms=%.2f (csid dev and its plugin, per mount+unmount cycle)\n",
	       (bench_cpu_ms(b->s.pid) - cpu0) / cycles);
}

/* The bare RPCs of 1c: a client of the plugin's socket, a volume of its own, two directories. */
struct bench_direct {
	struct hpp_client cl;
	char node[128], vol[64];
	char stage[SERVER_PROC_PATH + 32], tdir[SERVER_PROC_PATH + 32];
	char target[SERVER_PROC_PATH + 48];
};

static void bench_direct_open(struct bench *b, struct bench_direct *d)
{
	Csi__V1__NodeGetInfoRequest ir = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	Csi__V1__NodeGetInfoResponse *info = NULL;
	struct agent_proc_plugin p;

	if (agent_proc_plugin(&b->a, BENCH_HP, "node", &p) != 0 ||
	    hpp_client_open(&d->cl, p.endpoint) != 0)
		bench_die(b, "no client for the plugin");
	if (hpp_client_call(&d->cl, CSI_RPC_NODE_GET_INFO, &ir, &info, 0) != 0 || !info)
		bench_die(b, "NodeGetInfo failed");
	snprintf(d->node, sizeof(d->node), "%s", info->node_id);
	if (hpp_create(&d->cl.caller, "bench-direct", 1 << 20, 0, false, d->vol) != 0)
		bench_die(b, "CreateVolume failed");
	snprintf(d->stage, sizeof(d->stage), "%s/direct-stage", b->s.dir);
	snprintf(d->tdir, sizeof(d->tdir), "%s/direct-pub", b->s.dir);
	snprintf(d->target, sizeof(d->target), "%s/target", d->tdir);
	mkdir(d->stage, 0750);
	mkdir(d->tdir, 0750);
}

/*
 * ControllerPublish + NodeStage + NodePublish to the plugin, timed (ms),
 * then their undoing.
 */
static double bench_direct_cycle(struct bench *b, struct bench_direct *d)
{
	const int mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	const struct hpp_caller *c = &d->cl.caller;
	double t0 = bench_stat_now_ms(), ms;

	if (hpp_ctl_publish(c, d->vol, d->node, false, mode, false) != 0 ||
	    hpp_stage(c, d->vol, d->stage, false, mode) != 0 ||
	    hpp_publish(c, d->vol, d->stage, d->target, false, mode, false) != 0)
		bench_die(b, "direct publish failed");
	ms = bench_stat_now_ms() - t0;
	if (hpp_unpublish(c, d->vol, d->target) != 0 || hpp_unstage(c, d->vol, d->stage) != 0 ||
	    hpp_ctl_unpublish(c, d->vol, d->node) != 0)
		bench_die(b, "direct unpublish failed");
	return ms;
}

/*
 * 1b, 1c. The agent API mount and the bare RPCs, measured in turns (one
 * of each per round, the first of the two alternating), so that both see
 * the machine as it is at that moment: measured one after the other,
 * each over a few tenths of a second, their ratio moved with the load
 * of the other guests of this machine by as much as a third from run to
 * run. Sets the medians (ms).
 */
static void bench_pairs(struct bench *b, int cycles, double *api_ms, double *direct_ms)
{
	double *api = calloc((size_t)cycles, sizeof(*api));
	double *direct = calloc((size_t)cycles, sizeof(*direct));
	struct bench_direct d;

	if (!api || !direct)
		bench_die(b, "out of memory");
	b->a.keepalive = true;
	bench_direct_open(b, &d);
	for (int i = 0; i < cycles + BENCH_WARMUP; i++) {
		double a, x;

		if (i % 2) {
			a = bench_api_cycle(b);
			x = bench_direct_cycle(b, &d);
		} else {
			x = bench_direct_cycle(b, &d);
			a = bench_api_cycle(b);
		}
		if (i >= BENCH_WARMUP) {
			api[i - BENCH_WARMUP] = a;
			direct[i - BENCH_WARMUP] = x;
		}
	}
	hpp_delete(&d.cl.caller, d.vol);
	hpp_client_close(&d.cl);
	bench_report("claim_to_path_direct_csi_ms", direct, cycles);
	bench_report("claim_to_path_agent_api_ms", api, cycles);
	*api_ms = bench_quantile(api, cycles, 0.5);
	*direct_ms = bench_quantile(direct, cycles, 0.5);
	free(api);
	free(direct);
}

/* 2a. rounds of 8 csictl mounts at once; returns mounts per second. */
static double bench_parallel_csictl(struct bench *b, int rounds)
{
	char vols[BENCH_CLIENTS][16], allocs[BENCH_CLIENTS][16], out[BENCH_OUT];
	double total = 0;

	for (int i = 0; i < BENCH_CLIENTS; i++) {
		snprintf(vols[i], sizeof(vols[i]), "par-%d", i);
		snprintf(allocs[i], sizeof(allocs[i]), "p-%d", i);
	}
	for (int r = 0; r < rounds + 1; r++) {
		pid_t pids[BENCH_CLIENTS];
		int fds[BENCH_CLIENTS];
		double t0 = bench_stat_now_ms();

		for (int i = 0; i < BENCH_CLIENTS; i++) {
			const char *args[] = {"volume", "mount",   vols[i],
					      "-alloc", allocs[i], NULL};

			pids[i] = bench_csictl_start(b, args, &fds[i]);
			if (pids[i] < 0)
				bench_die(b, "csictl did not start");
		}
		for (int i = 0; i < BENCH_CLIENTS; i++)
			if (bench_csictl_finish(pids[i], fds[i], out, sizeof(out)) != 0 ||
			    out[0] != '/')
				bench_die(b, "parallel csictl volume mount failed");
		if (r > 0)
			total += bench_stat_now_ms() - t0;
		for (int i = 0; i < BENCH_CLIENTS; i++)
			if (bench_api_unmount(&b->a, vols[i], allocs[i]) != 200)
				bench_die(b, "unmount failed");
		for (int i = 0; i < BENCH_CLIENTS; i++)
			bench_wait_freed(b, vols[i]);
	}
	return rounds * BENCH_CLIENTS / (total / 1e3);
}

struct bench_client {
	struct agent_proc a;
	char vol[16], alloc[16];
	long status;
	pthread_t th;
};

static void *bench_client_run(void *arg)
{
	struct bench_client *c = arg;

	c->status = bench_api_mount(&c->a, c->vol, c->alloc);
	return NULL;
}

/* 2b. rounds of 8 agent API mounts at once (one connection each); mounts per second. */
static double bench_parallel_api(struct bench *b, int rounds)
{
	struct bench_client cs[BENCH_CLIENTS];
	double total = 0;

	memset(cs, 0, sizeof(cs));
	for (int i = 0; i < BENCH_CLIENTS; i++) {
		snprintf(cs[i].a.sock, sizeof(cs[i].a.sock), "%s", b->a.sock);
		cs[i].a.keepalive = true;
		snprintf(cs[i].vol, sizeof(cs[i].vol), "par-%d", i);
		snprintf(cs[i].alloc, sizeof(cs[i].alloc), "q-%d", i);
	}
	for (int r = 0; r < rounds + 1; r++) {
		double t0 = bench_stat_now_ms();

		for (int i = 0; i < BENCH_CLIENTS; i++)
			if (pthread_create(&cs[i].th, NULL, bench_client_run, &cs[i]) != 0)
				bench_die(b, "no thread");
		for (int i = 0; i < BENCH_CLIENTS; i++)
			pthread_join(cs[i].th, NULL);
		if (r > 0)
			total += bench_stat_now_ms() - t0;
		for (int i = 0; i < BENCH_CLIENTS; i++)
			if (cs[i].status != 200 ||
			    bench_api_unmount(&b->a, cs[i].vol, cs[i].alloc) != 200)
				bench_die(b, "parallel agent API mount failed");
		for (int i = 0; i < BENCH_CLIENTS; i++)
			bench_wait_freed(b, cs[i].vol);
	}
	for (int i = 0; i < BENCH_CLIENTS; i++)
		agent_proc_cleanup(&cs[i].a);
	return rounds * BENCH_CLIENTS / (total / 1e3);
}

/*
 * The delete of a tour, after its unmount: the server refuses it
 * (conflict) while the release is still in flight; then, untimed, the
 * claim is waited for to be freed and the delete repeated. Returns whether
 * the first delete went through.
 */
static bool bench_tour_delete(struct bench *b, const char *const *del)
{
	char out[BENCH_OUT];

	if (bench_csictl(b, del, out, sizeof(out)) == 0)
		return true;
	bench_wait_freed(b, "data");
	if (bench_csictl(b, del, out, sizeof(out)) != 0)
		bench_die(b, "volume delete failed");
	return false;
}

/* 3. the tour, create -wait to delete -wait; returns the median in ms of the tours that passed. */
static double bench_tours(struct bench *b, int tours)
{
	char spec[SERVER_PROC_PATH + 16], out[BENCH_OUT];
	const char *init[] = {"volume", "init", NULL};
	const char *create[] = {"volume", "create", spec, "-wait", NULL};
	const char *mount[] = {"volume", "mount", "data", "-alloc", "web-1", NULL};
	const char *unmount[] = {"volume", "unmount", "data", "-alloc", "web-1", NULL};
	const char *del[] = {"volume", "delete", "data", "-wait", NULL};
	const char *const *cmds[] = {create, mount, unmount};
	double *v = calloc((size_t)tours * 5, sizeof(*v)), *steps = v + tours, med = 0;
	int n = 0, refused = 0;

	snprintf(spec, sizeof(spec), "%s/vol.json", b->s.dir);
	if (!v || bench_csictl(b, init, out, sizeof(out)) != 0 || hpp_write_file(spec, out) != 0)
		bench_die(b, "volume init failed");
	for (int i = 0; i < tours + 1; i++) {
		double t0 = bench_stat_now_ms(), t = t0, st[4];
		bool ok;

		for (int k = 0; k < 3; k++) {
			if (bench_csictl(b, cmds[k], out, sizeof(out)) != 0)
				bench_die(b, "a tour step failed");
			st[k] = bench_stat_now_ms() - t;
			t += st[k];
		}
		ok = bench_tour_delete(b, del);
		st[3] = bench_stat_now_ms() - t;
		refused += !ok;
		if (i == 0 || !ok)
			continue;
		v[n] = st[0] + st[1] + st[2] + st[3];
		for (int k = 0; k < 4; k++)
			steps[k * tours + n] = st[k];
		n++;
	}
	if (n) {
		med = bench_quantile(v, n, 0.5);
		printf("tour_ms p50=%.1f p99=%.1f n=%d (target < 50); step medians: create -wait "
		       "%.1f, mount %.1f, unmount %.1f, delete -wait %.1f\n",
		       med, bench_quantile(v, n, 0.99), n, bench_quantile(steps, n, 0.5),
		       bench_quantile(steps + tours, n, 0.5),
		       bench_quantile(steps + 2 * tours, n, 0.5),
		       bench_quantile(steps + 3 * tours, n, 0.5));
	}
	printf("tour_delete_refused=%d of %d (conflict: the release of the unmount still in "
	       "flight)\n",
	       refused, tours + 1);
	fflush(stdout);
	free(v);
	return med;
}

int main(int argc, char **argv)
{
	int cycles = argc > 1 ? atoi(argv[1]) : 200;
	int rounds = argc > 2 ? atoi(argv[2]) : 25;
	int tours = argc > 3 ? atoi(argv[3]) : 20;
	double csictl_ms, api_ms, direct_ms;
	struct bench b;

	if (cycles < 1 || rounds < 1 || tours < 1) {
		fprintf(stderr, "usage: bench_e2e [cycles [rounds [tours]]]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	memset(&b, 0, sizeof(b));
	bench_start(&b);
	bench_create(&b, "lat");
	for (int i = 0; i < BENCH_CLIENTS; i++) {
		char id[16];

		snprintf(id, sizeof(id), "par-%d", i);
		bench_create(&b, id);
	}
	bench_pairs(&b, cycles, &api_ms, &direct_ms);
	bench_api_cpu(&b, cycles);
	csictl_ms = bench_csictl_mounts(&b, cycles);
	printf("claim_to_path ratio csictl/direct=%.2f agent_api/direct=%.2f (target <= 2.0)\n",
	       csictl_ms / direct_ms, api_ms / direct_ms);
	printf("parallel_mounts_per_s csictl=%.0f agent_api=%.0f clients=%d rounds=%d\n",
	       bench_parallel_csictl(&b, rounds), bench_parallel_api(&b, rounds), BENCH_CLIENTS,
	       rounds);
	fflush(stdout);
	bench_tours(&b, tours);
	if (server_proc_stop(&b.s, SIGTERM, BENCH_WAIT_MS) != 0)
		fprintf(stderr, "bench e2e: csid dev did not stop cleanly (log %s)\n", b.s.log);
	agent_proc_cleanup(&b.a);
	server_proc_cleanup(&b.s);
	return 0;
}
