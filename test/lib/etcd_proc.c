/* The etcd test helper (etcd_proc.h). */
#include "etcd_proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "http_client.h"
#include "proc_guard.h"
#include "server_proc.h"
#include "util/base64.h"

#define ETCD_PROC_READY_MS 30000

static int64_t etcd_proc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * Polls etcd's log until it serves clients over TLS (GET /health would
 * need a client certificate).
 */
static bool etcd_proc_ready_tls(struct etcd_proc *p)
{
	int64_t deadline = etcd_proc_now_ms() + ETCD_PROC_READY_MS;
	struct timespec pause = {0, 20 * 1000 * 1000};

	while (etcd_proc_now_ms() < deadline) {
		FILE *f = fopen(p->log, "re");
		char line[4096];
		bool ok = false;
		int st;

		while (f && !ok && fgets(line, sizeof(line), f))
			ok = strstr(line, "serving client traffic securely") != NULL;
		if (f)
			fclose(f);
		if (ok)
			return true;
		if (waitpid(p->pid, &st, WNOHANG) == p->pid) {
			proc_guard_untrack(p->pid);
			p->pid = 0;
			return false;
		}
		nanosleep(&pause, NULL);
	}
	return false;
}

/* Polls GET /health until etcd says it is healthy. */
static bool etcd_proc_ready(struct etcd_proc *p)
{
	struct http_client *h = http_client_new(p->url);
	int64_t deadline = etcd_proc_now_ms() + ETCD_PROC_READY_MS;
	struct timespec pause = {0, 20 * 1000 * 1000};
	bool ok = false;

	while (h && !ok && etcd_proc_now_ms() < deadline) {
		char *out = NULL;
		int st;

		ok = http_client_do(h, "GET", "/health", NULL, &out, NULL, 2000) == 200 && out &&
		     strstr(out, "\"true\"");
		free(out);
		if (!ok && waitpid(p->pid, &st, WNOHANG) == p->pid) {
			proc_guard_untrack(p->pid);
			p->pid = 0;
			break;
		}
		if (!ok)
			nanosleep(&pause, NULL);
	}
	http_client_free(h);
	return ok;
}

/* Makes the directory and picks the ports of a member never started. */
static int etcd_proc_init(struct etcd_proc *p)
{
	int cport = server_proc_free_port(), pport = server_proc_free_port();

	snprintf(p->dir, sizeof(p->dir), "%s/cse-XXXXXX", p->base ? p->base : "/dev/shm");
	if (cport < 0 || pport < 0 || cport == pport || !mkdtemp(p->dir))
		return -1;
	proc_guard_track_dir(p->dir);
	snprintf(p->log, sizeof(p->log), "%s/etcd.log", p->dir);
	snprintf(p->url, sizeof(p->url), "%s://127.0.0.1:%d", p->pki ? "https" : "http", cport);
	snprintf(p->peer, sizeof(p->peer), "http://127.0.0.1:%d", pport);
	return 0;
}

/* Starts the process (its data dir may hold a member's data already). */
static int etcd_proc_spawn(struct etcd_proc *p)
{
	char data[160], token[32], cert[160], key[160], ca[160];
	posix_spawn_file_actions_t fa;
	int rc;

	if (p->name[0] == '\0')
		snprintf(p->name, sizeof(p->name), "default");
	if (p->cluster[0] == '\0')
		snprintf(p->cluster, sizeof(p->cluster), "%s=%s", p->name, p->peer);
	snprintf(data, sizeof(data), "%s/data", p->dir);
	snprintf(token, sizeof(token), "csid-test-%d", (int)getpid());
	{
		const char *argv[] = {ETCD_PROC_BIN, "--name",
				      p->name,       "--data-dir",
				      data,          "--listen-client-urls",
				      p->url,        "--advertise-client-urls",
				      p->url,        "--listen-peer-urls",
				      p->peer,       "--initial-advertise-peer-urls",
				      p->peer,       "--initial-cluster",
				      p->cluster,    "--initial-cluster-token",
				      token,         "--logger",
				      "zap",         "--log-outputs",
				      "stderr",      NULL,
				      NULL,          NULL,
				      NULL,          NULL,
				      NULL,          NULL,
				      NULL,          NULL};

		if (p->pki) {
			size_t n = 0;

			while (argv[n])
				n++;
			snprintf(cert, sizeof(cert), "%s/server.pem", p->pki);
			snprintf(key, sizeof(key), "%s/server.key", p->pki);
			snprintf(ca, sizeof(ca), "%s/ca.pem", p->pki);
			argv[n++] = "--cert-file";
			argv[n++] = cert;
			argv[n++] = "--key-file";
			argv[n++] = key;
			argv[n++] = "--trusted-ca-file";
			argv[n++] = ca;
			argv[n++] = "--client-cert-auth";
		}

		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, 2, p->log, O_WRONLY | O_CREAT | O_APPEND,
						 0644);
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
		rc = proc_guard_spawn(&p->pid, ETCD_PROC_BIN, &fa, (char *const *)argv, NULL);
		posix_spawn_file_actions_destroy(&fa);
	}
	if (rc != 0) {
		p->pid = 0;
		return -1;
	}
	proc_guard_track(p->pid);
	return 0;
}

/* Waits until p is healthy; stops it when it never is. */
static int etcd_proc_wait(struct etcd_proc *p)
{
	if (p->pki ? etcd_proc_ready_tls(p) : etcd_proc_ready(p))
		return 0;
	fprintf(stderr, "etcd %s did not become healthy; its log is %s\n", p->name, p->log);
	etcd_proc_stop(p, SIGKILL);
	return -1;
}

int etcd_proc_start(struct etcd_proc *p)
{
	if (p->dir[0] == '\0' && etcd_proc_init(p) != 0)
		return -1;
	if (etcd_proc_spawn(p) != 0)
		return -1;
	return etcd_proc_wait(p);
}

int etcd_cluster_start(struct etcd_proc *m, size_t n)
{
	char cluster[sizeof(m->cluster)];
	size_t o = 0;
	int rc = 0;

	for (size_t i = 0; i < n; i++) {
		if (etcd_proc_init(&m[i]) != 0)
			return -1;
		snprintf(m[i].name, sizeof(m[i].name), "m%zu", i);
		o += (size_t)snprintf(cluster + o, sizeof(cluster) - o, "%s%s=%s", i ? "," : "",
				      m[i].name, m[i].peer);
	}
	for (size_t i = 0; i < n; i++) {
		snprintf(m[i].cluster, sizeof(m[i].cluster), "%s", cluster);
		if (etcd_proc_spawn(&m[i]) != 0)
			rc = -1;
	}
	/* Every member must be up before any is healthy: a quorum elects a leader. */
	for (size_t i = 0; i < n && rc == 0; i++)
		rc = etcd_proc_wait(&m[i]);
	for (size_t i = 0; i < n && rc != 0; i++)
		etcd_proc_stop(&m[i], SIGKILL);
	return rc;
}

/* How many of pid's threads are stopped ('T' in their stat), and how many there are. */
static void etcd_proc_threads(pid_t pid, int *stopped, int *all)
{
	char path[64];
	DIR *d;
	struct dirent *de;

	*stopped = *all = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	while (d && (de = readdir(d))) {
		char stat[128], buf[512], *paren;
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(stat, sizeof(stat), "/proc/%d/task/%.32s/stat", (int)pid, de->d_name);
		f = fopen(stat, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) && (paren = strrchr(buf, ')')) && paren[1] == ' ') {
			(*all)++;
			*stopped += paren[2] == 'T' || paren[2] == 't';
		}
		fclose(f);
	}
	if (d)
		closedir(d);
}

int etcd_proc_pause(struct etcd_proc *p, bool pause)
{
	int64_t deadline = etcd_proc_now_ms() + ETCD_PROC_READY_MS;
	struct timespec tick = {0, 2 * 1000 * 1000};

	if (p->pid <= 0 || kill(p->pid, pause ? SIGSTOP : SIGCONT) != 0)
		return -1;
	while (etcd_proc_now_ms() < deadline) {
		int stopped, all;

		etcd_proc_threads(p->pid, &stopped, &all);
		if (all > 0 && (pause ? stopped == all : stopped == 0))
			return 0;
		nanosleep(&tick, NULL);
	}
	return -1;
}

void etcd_proc_stop(struct etcd_proc *p, int sig)
{
	if (p->pid <= 0)
		return;
	kill(p->pid, sig);
	waitpid(p->pid, NULL, 0);
	proc_guard_untrack(p->pid);
	p->pid = 0;
}

void etcd_proc_cleanup(struct etcd_proc *p)
{
	etcd_proc_stop(p, SIGKILL);
	if (p->dir[0] != '\0') {
		proc_guard_clear_dir(p->dir);
		proc_guard_untrack_dir(p->dir);
	}
	memset(p->dir, 0, sizeof(p->dir));
	memset(p->name, 0, sizeof(p->name));
	memset(p->cluster, 0, sizeof(p->cluster));
	p->pid = 0;
}

long etcd_proc_post(struct etcd_proc *p, const char *path, const char *body)
{
	struct http_client *h = http_client_new(p->url);
	char *out = NULL;
	long status;

	if (h == NULL)
		return -1;
	status = http_client_do(h, "POST", path, body, &out, NULL, 10000);
	free(out);
	http_client_free(h);
	return status;
}

long etcd_proc_put(struct etcd_proc *p, const char *key, const char *value)
{
	char *k = base64_encode(key, strlen(key), NULL),
	     *v = base64_encode(value, strlen(value), NULL);
	size_t n = k && v ? strlen(k) + strlen(v) + 32 : 0;
	char *body = n ? malloc(n) : NULL;
	long status = -1;

	if (body) {
		snprintf(body, n, "{\"key\":\"%s\",\"value\":\"%s\"}", k, v);
		status = etcd_proc_post(p, "/v3/kv/put", body);
	}
	free(k);
	free(v);
	free(body);
	return status;
}

/* Sums the grpc_server_handled_total lines of method (every code) in /metrics text. */
static double etcd_proc_calls(const char *text, const char *method)
{
	char pat[64];
	double sum = 0;

	snprintf(pat, sizeof(pat), "grpc_method=\"%s\",grpc_service=\"etcdserverpb.KV\"", method);
	for (const char *p = text; (p = strstr(p, "grpc_server_handled_total{")); p++) {
		const char *eol = strchr(p, '\n'), *m = strstr(p, pat), *sp;

		if (m && (!eol || m < eol) && (sp = strchr(m, ' ')) && (!eol || sp < eol))
			sum += strtod(sp + 1, NULL);
	}
	return sum;
}

void etcd_proc_usage(struct etcd_proc *p, struct etcd_proc_usage *u)
{
	struct http_client *h = http_client_new(p->url);
	char path[64], buf[1024], *text = NULL, *paren;
	FILE *f;

	*u = (struct etcd_proc_usage){0};
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)p->pid);
	f = fopen(path, "r");
	if (f && fgets(buf, sizeof(buf), f) && (paren = strrchr(buf, ')'))) {
		unsigned long ut = 0, st = 0;

		/* Fields 14 and 15 (utime, stime) are the 12th and 13th after the state. */
		if (sscanf(paren + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			   &st) == 2)
			u->cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	}
	if (f)
		fclose(f);
	if (h && http_client_do(h, "GET", "/metrics", NULL, &text, NULL, 10000) == 200 && text) {
		u->range = etcd_proc_calls(text, "Range");
		u->txn = etcd_proc_calls(text, "Txn");
	}
	free(text);
	http_client_free(h);
}
