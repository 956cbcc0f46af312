/*
 * Benchmark of the node agent (not a test: it prints figures and targets).
 * It runs the real `csid agent` with the real csi-hostpath plugin in a
 * private directory under /tmp and measures:
 *   1. from a plugin socket appearing to the plugin being healthy and
 *      fingerprinted in the agent (median over restarts; target <= 50 ms);
 *   2. a mount+unmount cycle through the agent API against the same RPC
 *      sequence (NodeStage, NodePublish, NodeUnpublish, NodeUnstage) sent
 *      directly with the CSI client (ratio of medians; target <= 2x);
 *   3. the agent's peak RSS with 100 mounts (VmHWM; target <= 24 MiB);
 *   4. an agent restart with 1,000 recorded mounts until its API answers
 *      (median of 3; target <= 1 s).
 * Needs root (bind mounts). Everything is cleaned up at the end. The
 * directory is under /tmp, or $CSID_BENCH_DIR (e.g. /dev/shm to leave
 * out the file system's cost of creating and removing directories).
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent_proc.h"
#include "bench_stat.h"
#include "csi/csi_client.h"
#include "hostpath_proc.h"

#define BENCH_RESTARTS 15
#define BENCH_CYCLES 40

static void bench_die(struct agent_proc *a, const char *what)
{
	fprintf(stderr, "bench agent: %s (agent log: %s)\n", what, a->log);
	setenv("CSID_E2E_KEEP", "1", 1);
	agent_proc_cleanup(a);
	exit(1);
}

/* A socket of an instance other than `old`: its directory name into inst. */
static bool bench_new_socket(struct agent_proc *a, const char *old, char *inst, size_t len)
{
	char dir[AGENT_PROC_PATH + 64], path[AGENT_PROC_PATH + 400];
	struct dirent *ent;
	bool found = false;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/plugins/%s", a->data_dir, AGENT_PROC_HP_ID);
	d = opendir(dir);
	while (d && !found && (ent = readdir(d))) {
		struct stat st;

		if (ent->d_name[0] == '.' || strcmp(ent->d_name, old) == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s/csi.sock", dir, ent->d_name);
		if (stat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
			snprintf(inst, len, "%s", ent->d_name);
			found = true;
		}
	}
	if (d)
		closedir(d);
	return found;
}

static double bench_socket_to_healthy(struct agent_proc *a)
{
	double v[BENCH_RESTARTS];

	for (int i = 0; i < BENCH_RESTARTS; i++) {
		struct agent_proc_plugin p;
		char inst[64];
		double t0, deadline;

		if (agent_proc_plugin(a, AGENT_PROC_HP_ID, "node", &p) != 0 || !p.pid)
			bench_die(a, "no plugin pid");
		kill(p.pid, SIGKILL);
		deadline = bench_stat_now_ms() + 20000;
		while (!bench_new_socket(a, p.active, inst, sizeof(inst)))
			if (bench_stat_now_ms() > deadline)
				bench_die(a, "no new plugin socket");
		t0 = bench_stat_now_ms();
		for (;;) {
			struct agent_proc_plugin c;

			if (agent_proc_plugin(a, AGENT_PROC_HP_ID, "node", &c) == 0 && c.healthy &&
			    strcmp(c.active, inst) == 0)
				break;
			if (bench_stat_now_ms() > deadline)
				bench_die(a, "plugin never healthy");
		}
		v[i] = bench_stat_now_ms() - t0;
	}
	return bench_stat_median(v, BENCH_RESTARTS);
}

static void bench_cap(Csi__V1__VolumeCapability *cap, Csi__V1__VolumeCapability__MountVolume *mv,
		      Csi__V1__VolumeCapability__AccessMode *am)
{
	am->mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
	cap->access_mode = am;
	cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap->mount = mv;
}

/* One NodeStage/NodePublish/NodeUnpublish/NodeUnstage sequence; 0 or -1. */
static int bench_direct_cycle(struct csi_client *c, const char *vol, const char *stage,
			      const char *target)
{
	Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability__MountVolume mv = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	Csi__V1__VolumeCapability__AccessMode am = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	Csi__V1__NodeStageVolumeRequest sr = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	Csi__V1__NodePublishVolumeRequest pr = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnpublishVolumeRequest ur = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__NodeUnstageVolumeRequest usr = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;
	Csi__V1__NodeStageVolumeResponse *s1 = NULL;
	Csi__V1__NodePublishVolumeResponse *s2 = NULL;
	Csi__V1__NodeUnpublishVolumeResponse *s3 = NULL;
	Csi__V1__NodeUnstageVolumeResponse *s4 = NULL;
	struct csi_status st;
	int rc = 0;

	bench_cap(&cap, &mv, &am);
	sr.volume_id = pr.volume_id = ur.volume_id = usr.volume_id = (char *)vol;
	sr.staging_target_path = pr.staging_target_path = usr.staging_target_path = (char *)stage;
	pr.target_path = ur.target_path = (char *)target;
	sr.volume_capability = pr.volume_capability = &cap;
	if (csi_node_stage_volume(c, &sr, &s1, 15000, &st) ||
	    csi_node_publish_volume(c, &pr, &s2, 15000, &st) ||
	    csi_node_unpublish_volume(c, &ur, &s3, 15000, &st) ||
	    csi_node_unstage_volume(c, &usr, &s4, 15000, &st)) {
		fprintf(stderr, "direct cycle: %s: %s\n", csi_code_name(st.code), st.message);
		rc = -1;
	}
	csi_msg_free(s1 ? &s1->base : NULL);
	csi_msg_free(s2 ? &s2->base : NULL);
	csi_msg_free(s3 ? &s3->base : NULL);
	csi_msg_free(s4 ? &s4->base : NULL);
	return rc;
}

static void bench_cycles(struct agent_proc *a, const char *vol, double *agent_ms, double *direct_ms)
{
	double va[BENCH_CYCLES], vd[BENCH_CYCLES];
	char stage[AGENT_PROC_PATH + 32], tdir[AGENT_PROC_PATH + 32], target[AGENT_PROC_PATH + 48];
	struct agent_proc_plugin p;
	struct csi_client *c = NULL;
	struct err e;

	/* One HTTP connection for the cycles, as the CSI client keeps one channel. */
	a->keepalive = true;
	for (int i = 0; i < BENCH_CYCLES + 5; i++) {
		double t0 = bench_stat_now_ms();

		if (agent_proc_mount(a, vol, "bench-cycle", NULL) != 200 ||
		    agent_proc_unmount(a, vol, "bench-cycle") != 200)
			bench_die(a, "mount cycle through the agent failed");
		/* The first cycles warm up (connections, threads, caches). */
		if (i >= 5)
			va[i - 5] = bench_stat_now_ms() - t0;
	}
	a->keepalive = false;
	if (agent_proc_plugin(a, AGENT_PROC_HP_ID, "node", &p) != 0 ||
	    csi_client_grpc_new(p.endpoint, &c, &e) != 0)
		bench_die(a, "no client for the plugin");
	snprintf(stage, sizeof(stage), "%s/direct-stage", a->dir);
	snprintf(tdir, sizeof(tdir), "%s/direct-pub", a->dir);
	snprintf(target, sizeof(target), "%s/target", tdir);
	mkdir(stage, 0750);
	mkdir(tdir, 0750);
	for (int i = 0; i < BENCH_CYCLES + 5; i++) {
		double t0 = bench_stat_now_ms();

		if (bench_direct_cycle(c, vol, stage, target) != 0)
			bench_die(a, "direct cycle failed");
		if (i >= 5)
			vd[i - 5] = bench_stat_now_ms() - t0;
	}
	csi_client_free(c);
	*agent_ms = bench_stat_median(va, BENCH_CYCLES);
	*direct_ms = bench_stat_median(vd, BENCH_CYCLES);
}

static void bench_restart(struct agent_proc *a)
{
	if (agent_proc_stop(a, SIGTERM, 60000) != 0 || agent_proc_start(a) != 0 ||
	    agent_proc_wait_ready(a, 60000) != 0 ||
	    !agent_proc_wait_healthy(a, AGENT_PROC_HP_ID, 20000))
		bench_die(a, "agent restart failed");
}

static void bench_mount_range(struct agent_proc *a, const char *vol, int from, int to)
{
	for (int i = from; i < to; i++) {
		char alloc[32];

		snprintf(alloc, sizeof(alloc), "alloc-%04d", i);
		if (agent_proc_mount(a, vol, alloc, NULL) != 200)
			bench_die(a, "mount failed");
	}
}

int main(void)
{
	struct agent_proc a;
	char cfg[4096], vol[64], *p;
	double healthy_ms, agent_ms, direct_ms, restarts[3];
	const char *base;
	long rss_kib;

	/* CSID_BENCH_DIR: where the agent's data_dir lives (default /tmp). */
	base = getenv("CSID_BENCH_DIR") ? getenv("CSID_BENCH_DIR") : "/tmp";
	if (agent_proc_init_at(&a, base) != 0 ||
	    agent_proc_hostpath_config(&a, "{}", cfg, sizeof(cfg)))
		return 1;
	printf("data_dir under %s\n", base);
	/* Restart plugins at once: the benchmark measures start-up, not the backoff. */
	p = strstr(cfg, "\"backoff_base\": \"100ms\", \"backoff_max\": \"800ms\"");
	if (!p)
		return 1;
	memcpy(p, "\"backoff_base\": \"1ms\",   \"backoff_max\": \"2ms\"    ", 47);
	if (agent_proc_write_config(&a, cfg) != 0 || agent_proc_write_faults(&a, "") != 0 ||
	    agent_proc_start(&a) != 0 || agent_proc_wait_ready(&a, 20000) != 0 ||
	    !agent_proc_wait_healthy(&a, AGENT_PROC_HP_ID, 20000))
		bench_die(&a, "agent did not start");

	healthy_ms = bench_socket_to_healthy(&a);
	printf("socket_to_healthy_ms median=%.1f n=%d (target <= 50)\n", healthy_ms,
	       BENCH_RESTARTS);
	fflush(stdout);

	if (agent_proc_create_volume(&a, "bench", vol) != 0)
		bench_die(&a, "CreateVolume failed");
	bench_cycles(&a, vol, &agent_ms, &direct_ms);
	printf("mount_cycle agent_ms=%.2f direct_ms=%.2f ratio=%.2f n=%d (target <= 2.0)\n",
	       agent_ms, direct_ms, agent_ms / direct_ms, BENCH_CYCLES);
	fflush(stdout);

	/* A fresh agent, so the peak is the one of serving 100 mounts. */
	bench_restart(&a);
	bench_mount_range(&a, vol, 0, 100);
	rss_kib = hpp_vmhwm_kb(a.pid);
	printf("peak_rss_100_mounts_mib=%.1f (target <= 24)\n", (double)rss_kib / 1024.0);
	fflush(stdout);

	bench_mount_range(&a, vol, 100, 1000);
	for (int i = 0; i < 3; i++) {
		double t0;

		if (agent_proc_stop(&a, SIGTERM, 60000) != 0)
			bench_die(&a, "agent stop failed");
		t0 = bench_stat_now_ms();
		if (agent_proc_start(&a) != 0 || agent_proc_wait_ready(&a, 60000) != 0)
			bench_die(&a, "agent restart failed");
		restarts[i] = bench_stat_now_ms() - t0;
		if (agent_proc_mount_count(&a) != 1000)
			bench_die(&a, "mounts lost across the restart");
	}
	printf("restart_1000_mounts_ms median=%.0f n=3 (target <= 1000)\n",
	       bench_stat_median(restarts, 3));
	agent_proc_cleanup(&a);
	csi_grpc_shutdown();
	return 0;
}
