/* The etcd test helper (etcd_proc.h). */
#include "etcd_proc.h"

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

extern char **environ;

#define ETCD_PROC_READY_MS 30000

static int64_t etcd_proc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

int etcd_proc_start(struct etcd_proc *p)
{
	char data[160], cluster[96];
	posix_spawn_file_actions_t fa;
	int rc;

	if (p->dir[0] == '\0') {
		int cport = server_proc_free_port(), pport = server_proc_free_port();

		snprintf(p->dir, sizeof(p->dir), "%s/cse-XXXXXX", p->base ? p->base : "/dev/shm");
		if (cport < 0 || pport < 0 || cport == pport || !mkdtemp(p->dir))
			return -1;
		proc_guard_track_dir(p->dir);
		snprintf(p->log, sizeof(p->log), "%s/etcd.log", p->dir);
		snprintf(p->url, sizeof(p->url), "http://127.0.0.1:%d", cport);
		snprintf(p->peer, sizeof(p->peer), "http://127.0.0.1:%d", pport);
	}
	snprintf(data, sizeof(data), "%s/data", p->dir);
	snprintf(cluster, sizeof(cluster), "default=%s", p->peer);
	{
		const char *argv[] = {ETCD_PROC_BIN, "--name",
				      "default",     "--data-dir",
				      data,          "--listen-client-urls",
				      p->url,        "--advertise-client-urls",
				      p->url,        "--listen-peer-urls",
				      p->peer,       "--initial-advertise-peer-urls",
				      p->peer,       "--initial-cluster",
				      cluster,       "--logger",
				      "zap",         "--log-outputs",
				      "stderr",      NULL};

		posix_spawn_file_actions_init(&fa);
		posix_spawn_file_actions_addopen(&fa, 2, p->log, O_WRONLY | O_CREAT | O_APPEND,
						 0644);
		posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
		posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
		rc = posix_spawn(&p->pid, ETCD_PROC_BIN, &fa, NULL, (char *const *)argv, environ);
		posix_spawn_file_actions_destroy(&fa);
	}
	if (rc != 0) {
		p->pid = 0;
		return -1;
	}
	proc_guard_track(p->pid);
	if (!etcd_proc_ready(p)) {
		fprintf(stderr, "etcd did not become healthy; its log is %s\n", p->log);
		etcd_proc_stop(p, SIGKILL);
		return -1;
	}
	return 0;
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
