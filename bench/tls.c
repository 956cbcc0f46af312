/*
 * Benchmark of what TLS costs (not a test: it prints figures, and fails
 * only when a run breaks). Twice, once with the server's API in
 * plaintext and once over HTTPS (certificates made with `openssl` at run
 * time), it runs a real `csid server` and a real `csid agent` joined to
 * it (csi-hostpath supervised by the agent as a monolith, controller
 * publish on), every HTTP connection kept alive, and measures:
 *   1. claim + release cycles per second from one API client: PUT
 *      /v1/volume/data/claim for the agent's node, PUT .../release, then
 *      blocking queries until the reconciler has unpublished and freed
 *      the volume; and the server's CPU per cycle;
 *   2. mount latency through the agent: PUT /v1/agent/volumes/data/mount
 *      on the agent's unix socket (the agent claims on the server and
 *      follows the publication there, over HTTPS in the second run), the
 *      median and p90 of the timed mounts; between them, untimed, the
 *      unmount and a wait until the server freed the volume.
 *
 *   bench_tls [cycles [mounts]]      defaults 100, 30
 *
 * Needs root (bind mounts). CSID_BENCH_KEEP=1 keeps the directories.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "agent_proc.h"
#include "bench_stat.h"
#include "proc_stat.h"
#include "server_proc.h"
#include "test_pki.h"

#define TLS_TOKEN "bench-tls-token-4c7e"
#define TLS_NODE "node-bench"
#define TLS_WAIT_MS 60000
#define TLS_WARMUP 3

struct tls_run {
	bool tls;
	struct server_proc s;
	void *a; /* struct agent_proc * (agent_proc_setup_hostpath) */
	char ca[SERVER_PROC_PATH + 16];
	double cycles_s, cpu_us, mount_p50, mount_p90;
};

/* Follows the volume with blocking queries until no claim nor publication is left. */
static bool tls_wait_freed(struct tls_run *r)
{
	double deadline = bench_stat_now_ms() + TLS_WAIT_MS;
	uint64_t index = 0;

	while (bench_stat_now_ms() < deadline) {
		char path[96], *text = NULL;
		json_t *doc;
		bool freed;

		snprintf(path, sizeof(path), "/v1/volume/data?index=%llu&wait=10s",
			 (unsigned long long)index);
		if (http_client_do(r->s.http, "GET", path, NULL, &text, &index, 15000) != 200) {
			free(text);
			return false;
		}
		doc = json_loads(text ? text : "", 0, NULL);
		free(text);
		freed = doc && json_array_size(json_object_get(doc, "claims")) == 0 &&
			json_array_size(json_object_get(doc, "publications")) == 0;
		json_decref(doc);
		if (freed)
			return true;
	}
	return false;
}

static int tls_start(struct tls_run *r)
{
	char cfg[2048], tlscfg[1024] = "", servers[512], listener[160], pki[SERVER_PROC_PATH + 8];
	const char *edits[] = {"\"--no-controller-publish\", ",
			       "",
			       "\"plugin_log_max_bytes\": 65536,",
			       servers,
			       "\"node_name\": \"node-e2e\",",
			       listener,
			       NULL};
	int port = server_proc_free_port();

	if (port < 0 || server_proc_init(&r->s) != 0)
		return -1;
	snprintf(pki, sizeof(pki), "%s/pki", r->s.dir);
	snprintf(r->ca, sizeof(r->ca), "%s/ca.pem", pki);
	if (r->tls) {
		if (test_pki_make(pki) != 0)
			return -1;
		snprintf(tlscfg, sizeof(tlscfg),
			 ", \"http\": {\"tls_cert_file\": \"%s/server.pem\", \"tls_key_file\": "
			 "\"%s/server.key\"}",
			 pki, pki);
	}
	snprintf(cfg, sizeof(cfg),
		 "{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"node_ttl\": \"30s\","
		 " \"acl_tokens\": [{\"secret\": \"" TLS_TOKEN "\", \"write\": true}],"
		 " \"agent_token\": \"" TLS_TOKEN "\", \"backoff_min\": \"20ms\","
		 " \"backoff_max\": \"300ms\"%s}",
		 tlscfg);
	if (server_proc_write_config(&r->s, cfg, NULL) != 0 || server_proc_start(&r->s) != 0)
		return -1;
	if (r->tls) {
		/* Every request of this process and of the agent goes to https:// and checks the
		 * CA. */
		http_client_free(r->s.http);
		snprintf(r->s.base, sizeof(r->s.base), "https://%s", r->s.addr);
		r->s.http = http_client_new(r->s.base);
		if (!r->s.http)
			return -1;
		http_client_tls(r->s.http, r->ca, NULL, NULL);
		setenv("CSID_CACERT", r->ca, 1);
	} else {
		unsetenv("CSID_CACERT");
	}
	http_client_token(r->s.http, TLS_TOKEN);
	if (!server_proc_wait_ready(&r->s, TLS_WAIT_MS))
		return -1;
	snprintf(listener, sizeof(listener),
		 "\"node_name\": \"" TLS_NODE "\", \"listener\": {\"addr\": \"127.0.0.1:%d\"},",
		 server_proc_free_port());
	snprintf(servers, sizeof(servers),
		 "\"plugin_log_max_bytes\": 65536, \"servers\": [\"%s\"],"
		 " \"server_token\": \"" TLS_TOKEN "\",",
		 r->s.base);
	if (agent_proc_setup_hostpath(&r->a, edits) != 0 ||
	    !server_proc_wait_plugin(&r->s, AGENT_PROC_HP_ID, TLS_WAIT_MS))
		return -1;
	((struct agent_proc *)r->a)->keepalive = true;
	if (server_proc_http(&r->s, "PUT", "/v1/volume/data/create",
			     "{\"plugin_id\": \"" AGENT_PROC_HP_ID
			     "\", \"capacity_min\": \"1MiB\", "
			     "\"capabilities\": [{\"access_mode\": \"single-node-writer\", "
			     "\"attachment_mode\": \"file-system\"}]}",
			     NULL) != 200 ||
	    !server_proc_wait_doc(&r->s, "/v1/volume/data", server_proc_volume_ready, TLS_WAIT_MS))
		return -1;
	return 0;
}

/* Claim + release cycles from this process, each until the volume is freed. */
static int tls_cycles(struct tls_run *r, int n)
{
	double t0 = 0, cpu0 = 0;

	for (int i = 0; i < n + TLS_WARMUP; i++) {
		char body[256];

		if (i == TLS_WARMUP) {
			t0 = bench_stat_now_ms();
			cpu0 = proc_stat_cpu_s(r->s.pid);
		}
		snprintf(body, sizeof(body),
			 "{\"alloc_id\": \"c-%d\", \"node_id\": \"" TLS_NODE
			 "\", \"mode\": \"write\", "
			 "\"access_mode\": \"single-node-writer\", \"attachment_mode\": "
			 "\"file-system\"}",
			 i);
		if (server_proc_http(&r->s, "PUT", "/v1/volume/data/claim", body, NULL) != 200)
			return -1;
		snprintf(body, sizeof(body), "{\"alloc_id\": \"c-%d\"}", i);
		if (server_proc_http(&r->s, "PUT", "/v1/volume/data/release", body, NULL) != 200 ||
		    !tls_wait_freed(r))
			return -1;
	}
	r->cycles_s = n / ((bench_stat_now_ms() - t0) / 1e3);
	r->cpu_us = (proc_stat_cpu_s(r->s.pid) - cpu0) * 1e6 / n;
	return 0;
}

/* Mounts through the agent (timed), each unmounted and freed between (untimed). */
static int tls_mounts(struct tls_run *r, int n)
{
	double *ms = calloc((size_t)n, sizeof(double));
	int rc = ms ? 0 : -1;

	for (int i = 0; !rc && i < n + TLS_WARMUP; i++) {
		char path[128], body[96];
		double t0 = bench_stat_now_ms();

		snprintf(body, sizeof(body), "{\"alloc_id\": \"m-%d\"}", i);
		if (agent_proc_http(r->a, "PUT", "/v1/agent/volumes/data/mount", body, NULL) !=
		    200) {
			rc = -1;
			break;
		}
		if (i >= TLS_WARMUP)
			ms[i - TLS_WARMUP] = bench_stat_now_ms() - t0;
		snprintf(path, sizeof(path), "/v1/agent/volumes/data/mount/m-%d", i);
		if (agent_proc_http(r->a, "DELETE", path, NULL, NULL) != 200 || !tls_wait_freed(r))
			rc = -1;
	}
	if (!rc) {
		r->mount_p50 = bench_stat_median(ms, n);
		r->mount_p90 = ms[n * 9 / 10];
	}
	free(ms);
	return rc;
}

static void tls_stop(struct tls_run *r)
{
	if (r->a)
		agent_proc_teardown(&r->a);
	server_proc_stop(&r->s, SIGTERM, 30000);
	if (getenv("CSID_BENCH_KEEP"))
		printf("kept %s\n", r->s.dir);
	else
		server_proc_cleanup(&r->s);
}

int main(int argc, char **argv)
{
	int cycles = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 100;
	int mounts = argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 30;
	struct tls_run runs[2] = {{.tls = false}, {.tls = true}};
	double load[3];
	int rc = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	for (int i = 0; i < 2 && !rc; i++) {
		struct tls_run *r = &runs[i];

		if (getloadavg(load, 1) != 1)
			load[0] = -1;
		printf("%s (load average %.2f)\n", r->tls ? "HTTPS" : "plaintext", load[0]);
		rc = tls_start(r);
		if (!rc)
			rc = tls_cycles(r, cycles);
		if (!rc)
			rc = tls_mounts(r, mounts);
		if (rc) {
			fprintf(stderr, "bench_tls: the %s run broke\n",
				r->tls ? "HTTPS" : "plaintext");
			server_proc_dump_log(&r->s, "bench_tls");
			if (r->a)
				agent_proc_dump_log(r->a, "bench_tls");
		}
		tls_stop(r);
	}
	if (rc)
		return 1;
	if (getloadavg(load, 1) != 1)
		load[0] = -1;
	printf("\n%-10s %14s %18s %14s %14s\n", "", "cycles/s", "server CPU/cycle", "mount p50",
	       "mount p90");
	for (int i = 0; i < 2; i++)
		printf("%-10s %14.1f %15.0f us %11.2f ms %11.2f ms\n",
		       runs[i].tls ? "HTTPS" : "plaintext", runs[i].cycles_s, runs[i].cpu_us,
		       runs[i].mount_p50, runs[i].mount_p90);
	printf("(%d claim+release cycles, %d mounts each; load average %.2f at the end)\n", cycles,
	       mounts, load[0]);
	return 0;
}
