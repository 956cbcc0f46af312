/*
 * Benchmark of leader failover (not a test: it prints figures and the
 * target, and fails only when a run breaks). Three real `csid server`s
 * share a real one-member etcd (test/lib/etcd_proc.c) and drive one real
 * csi-hostpath. Each run kills the leader with SIGKILL, at once asks a
 * surviving server to create a volume, and measures the time from the
 * kill to the volume being ready: the first reconciler step of the new
 * leader (its election, then the CreateVolume and the write of its
 * result). The killed server is started again (it comes back as a
 * follower) before the next run. Prints each run, the median, and the
 * target: at most the lease TTL + 1 s.
 *
 *   bench_failover [runs [ttl_seconds]]    defaults 10, 2
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "bench_stat.h"
#include "etcd_proc.h"
#include "hostpath_proc.h"
#include "server_proc.h"

#define NSERVERS 3
#define RUNS_MAX 100
#define WAIT_MS 60000

static struct etcd_proc fo_etcd;
static struct hpp_proc fo_hp;
static struct server_proc fo_s[NSERVERS];

static void fo_cleanup(void)
{
	for (int i = 0; i < NSERVERS; i++)
		server_proc_cleanup(&fo_s[i]);
	hpp_proc_cleanup(&fo_hp);
	etcd_proc_cleanup(&fo_etcd);
}

static int fo_fail(const char *what, int server)
{
	fprintf(stderr, "bench_failover: %s\n", what);
	if (server >= 0)
		server_proc_dump_log(&fo_s[server], what);
	fo_cleanup();
	return 1;
}

/* The server that says it leads, or -1 within the deadline. */
static int fo_leader(int64_t timeout_ms)
{
	double deadline = bench_stat_now_ms() + (double)timeout_ms;

	while (bench_stat_now_ms() < deadline) {
		for (int i = 0; i < NSERVERS; i++) {
			json_t *st = NULL;
			bool leading;

			if (!fo_s[i].pid || server_proc_http(&fo_s[i], "GET", "/v1/status/leader",
							     NULL, &st) != 200) {
				json_decref(st);
				continue;
			}
			leading = json_is_true(json_object_get(st, "leading"));
			json_decref(st);
			if (leading)
				return i;
		}
		hpp_pause_ms(20);
	}
	return -1;
}

static bool fo_three_members(json_t *doc)
{
	return json_array_size(json_object_get(doc, "members")) == NSERVERS;
}

int main(int argc, char **argv)
{
	int runs = argc > 1 ? atoi(argv[1]) : 10, ttl = argc > 2 ? atoi(argv[2]) : 2;
	double took[RUNS_MAX], load[3] = {0};
	char cfg[1024];

	if (runs < 1 || runs > RUNS_MAX || ttl < 1 || ttl > 300) {
		fprintf(stderr, "usage: bench_failover [runs (1-%d) [ttl_seconds]]\n", RUNS_MAX);
		return 2;
	}
	if (etcd_proc_start(&fo_etcd) || hpp_proc_start(&fo_hp, NULL))
		return fo_fail("cannot start etcd or csi-hostpath", -1);
	snprintf(cfg, sizeof(cfg),
		 "{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"backoff_min\": \"10ms\","
		 " \"backoff_max\": \"200ms\", \"leader_ttl\": \"%ds\", \"store\": \"etcd\","
		 " \"etcd\": {\"endpoints\": [\"%s\"], \"prefix\": \"/bench-failover/\"},"
		 " \"controller_plugins\": [{\"id\": \"" SERVER_PROC_HP_ID
		 "\", \"socket\": \"%s\"}]}",
		 ttl, fo_etcd.url, fo_hp.endpoint + strlen("unix://"));
	for (int i = 0; i < NSERVERS; i++)
		if (server_proc_init(&fo_s[i]) || server_proc_write_config(&fo_s[i], cfg, NULL) ||
		    server_proc_start(&fo_s[i]))
			return fo_fail("cannot start a server", i);
	for (int r = 0; r < runs; r++) {
		int leader, other;
		double t0;
		char path[64];

		for (int i = 0; i < NSERVERS; i++)
			if (!server_proc_wait_ready(&fo_s[i], WAIT_MS) ||
			    !server_proc_wait_plugin(&fo_s[i], SERVER_PROC_HP_ID, WAIT_MS))
				return fo_fail("a server is not ready", i);
		if (!server_proc_wait_doc(&fo_s[0], "/v1/status/members", fo_three_members,
					  WAIT_MS))
			return fo_fail("three members never listed", 0);
		leader = fo_leader(WAIT_MS);
		if (leader < 0)
			return fo_fail("no leader", 0);
		other = (leader + 1) % NSERVERS;
		server_proc_stop(&fo_s[leader], SIGKILL, WAIT_MS);
		t0 = bench_stat_now_ms();
		snprintf(path, sizeof(path), "/v1/volume/fo-%d/create", r);
		if (server_proc_http(&fo_s[other], "PUT", path, SERVER_PROC_CREATE_BODY, NULL) !=
		    200)
			return fo_fail("create refused", other);
		snprintf(path, sizeof(path), "/v1/volume/fo-%d", r);
		for (;;) {
			json_t *v = NULL;
			bool ready = server_proc_http(&fo_s[other], "GET", path, NULL, &v) == 200 &&
				     server_proc_volume_ready(v);

			json_decref(v);
			if (ready)
				break;
			if (bench_stat_now_ms() - t0 > WAIT_MS)
				return fo_fail("the volume never became ready", other);
			hpp_pause_ms(5);
		}
		took[r] = bench_stat_now_ms() - t0;
		printf("run %d: kill -9 of server %d -> first reconciler step done on the new "
		       "leader: %.0f ms\n",
		       r, leader, took[r]);
		fflush(stdout);
		if (server_proc_start(&fo_s[leader]))
			return fo_fail("cannot restart the killed server", leader);
	}
	if (getloadavg(load, 3) < 0)
		load[0] = -1;
	printf("failover (kill -9 to the first reconciler step on the new leader), lease TTL "
	       "%d s: median %.0f ms of %d (target <= %d ms); load average %.1f\n",
	       ttl, bench_stat_median(took, runs), runs, ttl * 1000 + 1000, load[0]);
	fo_cleanup();
	return 0;
}
