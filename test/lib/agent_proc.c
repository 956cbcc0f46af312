/*
 * End-to-end helpers around a real `csid agent` process (see
 * agent_proc.h): directory, config, start and stop, HTTP over the unix
 * socket with libcurl, polling with deadlines, and a cleanup that leaves
 * no process, mount or file behind whatever state a failed test left.
 */
#include "agent_proc.h"

#include "hostpath_proc.h"
#include "log_tail.h"
#include "child_proc.h"
#include "proc_guard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#ifndef CSID_BIN
#define CSID_BIN "csid"
#endif

int64_t agent_proc_now_ms(void)
{
	return hpp_now_ms();
}

static void agent_proc_nap(void)
{
	struct timespec ts = {0, 5 * 1000 * 1000};

	nanosleep(&ts, NULL);
}

bool agent_proc_poll(bool (*cond)(void *ctx), void *ctx, int64_t timeout_ms)
{
	int64_t deadline = agent_proc_now_ms() + timeout_ms;

	for (;;) {
		if (cond(ctx))
			return true;
		if (agent_proc_now_ms() >= deadline)
			return false;
		agent_proc_nap();
	}
}

int agent_proc_init(struct agent_proc *a)
{
	return agent_proc_init_at(a, "/tmp");
}

int agent_proc_init_at(struct agent_proc *a, const char *base)
{
	memset(a, 0, sizeof(*a));
	if (strlen(base) > 40)
		return -1;
	snprintf(a->dir, sizeof(a->dir), "%s/cae-XXXXXX", base);
	if (!mkdtemp(a->dir))
		return -1;
	proc_guard_track_dir(a->dir);
	snprintf(a->data_dir, sizeof(a->data_dir), "%s/d", a->dir);
	snprintf(a->sock, sizeof(a->sock), "%s/d/agent.sock", a->dir);
	snprintf(a->config, sizeof(a->config), "%s/agent.json", a->dir);
	snprintf(a->log, sizeof(a->log), "%s/agent.log", a->dir);
	snprintf(a->faults, sizeof(a->faults), "%s/faults", a->dir);
	snprintf(a->hp_dir, sizeof(a->hp_dir), "%s/hp", a->dir);
	return 0;
}

int agent_proc_write_config(struct agent_proc *a, const char *json)
{
	size_t n = 0, dlen = strlen(a->dir);
	char *out = malloc(strlen(json) * 2 + 64 * dlen + 1);
	const char *p = json;
	int rc;

	if (!out)
		return -1;
	while (*p) {
		if (strncmp(p, "@DIR@", 5) == 0) {
			memcpy(out + n, a->dir, dlen);
			n += dlen;
			p += 5;
		} else {
			out[n++] = *p++;
		}
	}
	out[n] = '\0';
	rc = hpp_write_file(a->config, out);
	free(out);
	return rc;
}

int agent_proc_write_faults(struct agent_proc *a, const char *text)
{
	return hpp_write_file(a->faults, text);
}

int agent_proc_start(struct agent_proc *a)
{
	posix_spawn_file_actions_t fa;
	char *argv[] = {(char *)CSID_BIN, (char *)"agent", (char *)"-config", a->config, NULL};
	int rc;

	/* Nothing of ctest's stdio reaches the agent or the plugins it starts. */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, a->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	rc = proc_guard_spawn(&a->pid, CSID_BIN, &fa, argv, NULL);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		a->pid = 0;
		return -1;
	}
	proc_guard_track(a->pid);
	return 0;
}

int agent_proc_run_csid(const char *const *args, char *out, size_t len)
{
	char path[] = "/tmp/cae-out-XXXXXX", *argv[16];
	int fd = mkstemp(path), n = 1, status;
	ssize_t r;

	if (fd < 0)
		return -1;
	argv[0] = (char *)CSID_BIN;
	for (; args[n - 1] && n < 15; n++)
		argv[n] = (char *)args[n - 1];
	argv[n] = NULL;
	status = child_proc_run(argv, NULL, fd, 30000);
	r = pread(fd, out, len - 1, 0);
	out[r > 0 ? r : 0] = '\0';
	close(fd);
	unlink(path);
	return status;
}

struct agent_proc_buf {
	char *data;
	size_t len;
};

static size_t agent_proc_write_cb(char *ptr, size_t size, size_t n, void *ud)
{
	struct agent_proc_buf *b = ud;
	char *nd = realloc(b->data, b->len + size * n + 1);

	if (!nd)
		return 0;
	b->data = nd;
	memcpy(b->data + b->len, ptr, size * n);
	b->len += size * n;
	b->data[b->len] = '\0';
	return size * n;
}

long agent_proc_http(struct agent_proc *a, const char *method, const char *path, const char *body,
		     json_t **out)
{
	struct agent_proc_buf b = {0};
	struct curl_slist *hdr = NULL;
	char url[2048];
	long status = -1;
	CURL *c = a->keepalive && a->curl_ ? a->curl_ : curl_easy_init();

	if (out)
		*out = NULL;
	if (!c)
		return -1;
	if (a->keepalive && !a->curl_)
		a->curl_ = c;
	snprintf(url, sizeof(url), "http://agent%s", path);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, a->sock);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, agent_proc_write_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 120000L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (body) {
		hdr = curl_slist_append(hdr, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	if (curl_easy_perform(c) == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		if (out && b.data)
			*out = json_loads(b.data, 0, NULL);
	}
	curl_slist_free_all(hdr);
	if (a->keepalive) {
		/*
		 * Options stick to a reused handle. HTTPGET drops the body and the
		 * POST mode: clearing POSTFIELDS alone would leave the next DELETE
		 * a bodiless POST-style upload (chunked, Expect: 100-continue), one
		 * round trip more.
		 */
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	} else {
		curl_easy_cleanup(c);
	}
	free(b.data);
	return status;
}

static bool agent_proc_ready(void *ctx)
{
	return agent_proc_http(ctx, "GET", "/v1/agent/self", NULL, NULL) == 200;
}

int agent_proc_wait_ready(struct agent_proc *a, int64_t timeout_ms)
{
	return agent_proc_poll(agent_proc_ready, a, timeout_ms) ? 0 : -1;
}

int agent_proc_stop(struct agent_proc *a, int sig, int64_t timeout_ms)
{
	int64_t deadline = agent_proc_now_ms() + timeout_ms;
	int status;

	if (a->pid <= 0)
		return -1;
	kill(a->pid, sig);
	for (;;) {
		pid_t r = waitpid(a->pid, &status, WNOHANG);

		if (r == a->pid)
			break;
		if (r < 0 && errno != EINTR) {
			proc_guard_untrack(a->pid);
			a->pid = 0;
			return -1;
		}
		if (agent_proc_now_ms() >= deadline) {
			kill(a->pid, SIGKILL);
			waitpid(a->pid, &status, 0);
			proc_guard_untrack(a->pid);
			a->pid = 0;
			return -1;
		}
		agent_proc_nap();
	}
	proc_guard_untrack(a->pid);
	a->pid = 0;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

static int agent_proc_count_in(const char *path, const char *needle)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int n = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, needle))
			n++;
	fclose(f);
	return n;
}

void agent_proc_dump_log(struct agent_proc *a, const char *why)
{
	fprintf(stderr, "%s (%s); end of %s:\n", why, a->dir, a->log);
	log_tail_print(a->log);
}

bool agent_proc_log_count(struct agent_proc *a, const char *needle, int count)
{
	return agent_proc_count_in(a->log, needle) >= count;
}

struct agent_proc_log_wait {
	struct agent_proc *a;
	const char *needle;
	int count;
};

static bool agent_proc_log_has(void *ctx)
{
	struct agent_proc_log_wait *w = ctx;

	return agent_proc_log_count(w->a, w->needle, w->count);
}

bool agent_proc_wait_log(struct agent_proc *a, const char *needle, int count, int64_t timeout_ms)
{
	struct agent_proc_log_wait w = {a, needle, count};

	return agent_proc_poll(agent_proc_log_has, &w, timeout_ms);
}

int agent_proc_mounts_under(const char *prefix)
{
	char line[4096];
	size_t plen = strlen(prefix);
	int n = 0;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char mp[512];

		/* Field 5 is the mount point (spaces escaped as \040; ours have none). */
		if (sscanf(line, "%*s %*s %*s %*s %511s", mp) == 1 &&
		    strncmp(mp, prefix, plen) == 0 && (mp[plen] == '/' || mp[plen] == '\0'))
			n++;
	}
	fclose(f);
	return n;
}

bool agent_proc_is_mount(const char *path)
{
	char line[4096];
	bool found = false;
	FILE *f = fopen("/proc/self/mountinfo", "r");

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		char mp[512];

		if (sscanf(line, "%*s %*s %*s %*s %511s", mp) == 1 && strcmp(mp, path) == 0)
			found = true;
	}
	fclose(f);
	return found;
}

/* Calls fn(dir, ctx) for every <data_dir>/plugins/<id>/<instance> directory. */
static void agent_proc_each_instance(struct agent_proc *a, void (*fn)(const char *dir, void *ctx),
				     void *ctx)
{
	char base[AGENT_PROC_PATH + 16], sub[AGENT_PROC_PATH + 300], dir[AGENT_PROC_PATH + 600];
	struct dirent *pe, *ie;
	DIR *d, *sd;

	snprintf(base, sizeof(base), "%s/plugins", a->data_dir);
	d = opendir(base);
	if (!d)
		return;
	while ((pe = readdir(d))) {
		if (pe->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", base, pe->d_name);
		sd = opendir(sub);
		if (!sd)
			continue;
		while ((ie = readdir(sd))) {
			if (ie->d_name[0] == '.')
				continue;
			snprintf(dir, sizeof(dir), "%s/%s", sub, ie->d_name);
			fn(dir, ctx);
		}
		closedir(sd);
	}
	closedir(d);
}

struct agent_proc_pids {
	pid_t *pids;
	int n;
	int max;
};

static void agent_proc_add_pid(const char *dir, void *ctx)
{
	struct agent_proc_pids *p = ctx;
	char path[AGENT_PROC_PATH + 640];
	int pid = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/supervisor.state", dir);
	f = fopen(path, "r");
	if (!f)
		return;
	if (fscanf(f, "pid=%d", &pid) == 1 && pid > 1 && kill(pid, 0) == 0 && p->n < p->max)
		p->pids[p->n++] = pid;
	fclose(f);
}

int agent_proc_plugin_pids(struct agent_proc *a, pid_t *pids, int max)
{
	struct agent_proc_pids p = {pids, 0, max};

	agent_proc_each_instance(a, agent_proc_add_pid, &p);
	return p.n;
}

void agent_proc_cleanup(struct agent_proc *a)
{
	pid_t pids[64];
	int n;

	if (a->curl_) {
		curl_easy_cleanup(a->curl_);
		a->curl_ = NULL;
	}
	if (!a->dir[0])
		return;
	if (a->pid > 0) {
		kill(a->pid, SIGKILL);
		waitpid(a->pid, NULL, 0);
		proc_guard_untrack(a->pid);
		a->pid = 0;
	}
	n = agent_proc_plugin_pids(a, pids, 64);
	for (int i = 0; i < n; i++) {
		kill(-pids[i], SIGKILL);
		kill(pids[i], SIGKILL);
	}
	/* For debugging a failure: CSID_E2E_KEEP=1 keeps the logs and state. */
	if (getenv("CSID_E2E_KEEP")) {
		hpp_umount_under(a->dir);
		fprintf(stderr, "kept %s\n", a->dir);
	} else {
		hpp_rmrf(a->dir);
	}
	proc_guard_untrack_dir(a->dir);
	a->dir[0] = '\0';
}

struct agent_proc_grep {
	const char *needle;
	int n;
};

static void agent_proc_grep_log(const char *dir, void *ctx)
{
	struct agent_proc_grep *g = ctx;
	char path[AGENT_PROC_PATH + 640];

	snprintf(path, sizeof(path), "%s/plugin.log", dir);
	g->n += agent_proc_count_in(path, g->needle);
}

static void agent_proc_dump_instance(const char *dir, void *ctx)
{
	char path[AGENT_PROC_PATH + 640];

	(void)ctx;
	snprintf(path, sizeof(path), "%s/plugin.log", dir);
	fprintf(stderr, "end of %s:\n", path);
	log_tail_print(path);
}

void agent_proc_dump_plugin_logs(struct agent_proc *a)
{
	agent_proc_each_instance(a, agent_proc_dump_instance, NULL);
}

bool agent_proc_plugin_log_count(struct agent_proc *a, const char *needle, int count)
{
	struct agent_proc_grep g = {needle, 0};

	agent_proc_each_instance(a, agent_proc_grep_log, &g);
	return g.n >= count;
}
