/*
 * Plugin processes and their files, for the supervisor: the directory and
 * socket path of an instance, spawning with uv_spawn (never fork without
 * exec), the capped log fed from the process's stdout and stderr, the
 * state file that lets the next agent find and kill a process left over
 * by a crash, and pruning of old instance directories.
 *
 * Files of an instance, in <data_dir>/plugins/<id>/<instance>/:
 *   supervisor.state  pid, start time (from /proc), type, id, socket; removed when it stops
 *   plugin.log        stdout+stderr, renamed to plugin.log.1 at the cap
 *   csi.sock          the socket, unless it lives in <data_dir>/p/<hash>/
 */
#include "plugins/supervisor_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/mkdir_p.h"
#include "util/log.h"
#include "util/procstat.h"

extern char **environ;

#define SUPERVISOR_STATE_FILE "supervisor.state"
#define SUPERVISOR_LOG_FILE "plugin.log"
/* Dead instance directories kept per plugin, for their logs. */
#define SUPERVISOR_KEEP_DEAD 3

static uint64_t supervisor_fnv1a(const char *a, const char *b)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (const char *p = a; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	h = (h ^ 0xff) * 0x100000001b3ULL;
	for (const char *p = b; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	return h;
}

void supervisor_proc_instance_id(struct supervisor_instance *inst)
{
	char key[SUPERVISOR_SOCK_MAX + 32];

	/* The type is part of the name: an update never reuses the old instance's ID. */
	if (inst->external) {
		snprintf(key, sizeof(key), "%s:%s", config_plugin_type_name(inst->def.type),
			 inst->def.socket);
		snprintf(
		    inst->id, sizeof(inst->id), "ext-%012llx",
		    (unsigned long long)(supervisor_fnv1a(inst->def.id, key) & 0xffffffffffffULL));
	} else {
		snprintf(inst->id, sizeof(inst->id), "%012llx",
			 (unsigned long long)(supervisor_rand(inst->sv) & 0xffffffffffffULL));
	}
}

int supervisor_socket_path(const char *data_dir, const char *id, const char *instance, char *sock,
			   char *dir, struct err *e)
{
	char buf[PATH_MAX];
	int n;

	n = snprintf(buf, sizeof(buf), "%s/plugins/%s/%s/csi.sock", data_dir, id, instance);
	if (n > 0 && n < SUPERVISOR_SOCK_MAX) {
		memcpy(sock, buf, (size_t)n + 1);
		snprintf(dir, SUPERVISOR_SOCK_MAX, "%s/plugins/%s/%s", data_dir, id, instance);
		return 0;
	}
	n = snprintf(buf, sizeof(buf), "%s/p/%016llx/csi.sock", data_dir,
		     (unsigned long long)supervisor_fnv1a(id, instance));
	if (n > 0 && n < SUPERVISOR_SOCK_MAX) {
		memcpy(sock, buf, (size_t)n + 1);
		snprintf(dir, SUPERVISOR_SOCK_MAX, "%s/p/%016llx", data_dir,
			 (unsigned long long)supervisor_fnv1a(id, instance));
		return 0;
	}
	return err_set(e, CSID_EINVAL,
		       "plugin %s: data_dir %s is too long for a plugin socket (a unix socket "
		       "path holds at most 107 bytes; data_dir may have at most %d)",
		       id, data_dir,
		       SUPERVISOR_SOCK_MAX - 1 - (int)strlen("/p/0123456789abcdef/csi.sock"));
}

int supervisor_proc_prepare(struct supervisor_instance *inst, struct err *e)
{
	struct supervisor *sv = inst->sv;
	char path[PATH_MAX + 32];
	int rc;

	if (inst->external) {
		snprintf(inst->sock, sizeof(inst->sock), "%s", inst->def.socket);
		snprintf(inst->endpoint, sizeof(inst->endpoint), "unix://%s", inst->sock);
		return 0;
	}
	snprintf(inst->dir, sizeof(inst->dir), "%s/plugins/%s/%s", sv->data_dir, inst->def.id,
		 inst->id);
	rc = supervisor_socket_path(sv->data_dir, inst->def.id, inst->id, inst->sock,
				    inst->sock_dir, e);
	if (!rc)
		rc = mkdir_p(inst->dir, e);
	if (!rc)
		rc = mkdir_p(inst->sock_dir, e);
	if (rc)
		return rc;
	unlink(inst->sock);
	snprintf(inst->endpoint, sizeof(inst->endpoint), "unix://%s", inst->sock);
	snprintf(path, sizeof(path), "%s/%s", inst->dir, SUPERVISOR_LOG_FILE);
	inst->log_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
	if (inst->log_fd < 0)
		return err_errno(e, errno, "open %s", path);
	inst->log_size = lseek(inst->log_fd, 0, SEEK_END);
	return 0;
}

/* Renames plugin.log to plugin.log.1 (replacing it) and starts an empty plugin.log. */
static void supervisor_log_rotate(struct supervisor_instance *inst)
{
	char cur[PATH_MAX + 32], old[PATH_MAX + 32];

	snprintf(cur, sizeof(cur), "%s/%s", inst->dir, SUPERVISOR_LOG_FILE);
	snprintf(old, sizeof(old), "%s/%s.1", inst->dir, SUPERVISOR_LOG_FILE);
	close(inst->log_fd);
	rename(cur, old);
	inst->log_fd = open(cur, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640);
	inst->log_size = 0;
}

void supervisor_proc_log(struct supervisor_instance *inst, const char *buf, size_t n)
{
	int64_t cap = inst->sv->cfg.log_max_bytes;

	/* Fill the log up to the cap, rotate, go on: at most two caps on disk. */
	while (n > 0 && inst->log_fd >= 0) {
		size_t room;
		ssize_t w;

		if (inst->log_size >= cap) {
			supervisor_log_rotate(inst);
			continue;
		}
		room = (size_t)(cap - inst->log_size);
		w = write(inst->log_fd, buf, n < room ? n : room);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		buf += w;
		n -= (size_t)w;
		inst->log_size += w;
	}
}

static _Thread_local char supervisor_read_buf[65536];

static void supervisor_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	buf->base = supervisor_read_buf;
	buf->len = sizeof(supervisor_read_buf);
}

static void supervisor_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
	struct supervisor_instance *inst = s->data;

	if (nread > 0)
		supervisor_proc_log(inst, buf->base, (size_t)nread);
	else if (nread < 0)
		supervisor_close_handle(inst, (uv_handle_t *)s);
}

/* Start time of pid in clock ticks since boot (/proc/<pid>/stat field 22); 0 if unknown. */
static unsigned long long supervisor_start_time(int pid)
{
	uint64_t start = 0;
	char state;

	return procstat_read(pid, &state, &start) ? 0 : start;
}

static void supervisor_write_state(struct supervisor_instance *inst)
{
	char path[PATH_MAX + 32], tmp[PATH_MAX + 40];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", inst->dir, SUPERVISOR_STATE_FILE);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "pid=%d\nstart=%llu\ntype=%s\nid=%s\ninstance=%s\nsock=%s\n", inst->pid,
		supervisor_start_time(inst->pid), config_plugin_type_name(inst->def.type),
		inst->def.id, inst->id, inst->sock);
	fflush(f);
	fsync(fileno(f));
	fclose(f);
	rename(tmp, path);
}

/* Builds argv and envp for the plugin; returns 0 or CSID_ENOMEM. */
static int supervisor_build_exec(struct supervisor_instance *inst, char ***argv_out,
				 char ***env_out)
{
	const struct config_plugin *d = &inst->def;
	const char *node = inst->sv->node_name;
	size_t nenv = 0, k = 0;
	char **argv, **env;

	for (char **p = environ; *p; p++)
		nenv++;
	argv = calloc(d->nargs + 2, sizeof(*argv));
	env = calloc(nenv + d->nenv + 2, sizeof(*env));
	*argv_out = argv;
	*env_out = env;
	if (!argv || !env)
		return CSID_ENOMEM;
	argv[0] = strdup(d->command);
	if (!argv[0])
		return CSID_ENOMEM;
	for (size_t i = 0; i < d->nargs; i++)
		if (!(argv[i + 1] = config_plugin_expand(d->args[i], inst->endpoint, node)))
			return CSID_ENOMEM;
	for (char **p = environ; *p; p++) {
		bool skip = strncmp(*p, "CSI_ENDPOINT=", 13) == 0;

		for (size_t i = 0; i < d->nenv && !skip; i++) {
			size_t len = strlen(d->env[i].name);

			skip = strncmp(*p, d->env[i].name, len) == 0 && (*p)[len] == '=';
		}
		if (skip)
			continue;
		if (!(env[k++] = strdup(*p)))
			return CSID_ENOMEM;
	}
	if (asprintf(&env[k], "CSI_ENDPOINT=%s", inst->endpoint) < 0) {
		env[k] = NULL;
		return CSID_ENOMEM;
	}
	k++;
	for (size_t i = 0; i < d->nenv; i++) {
		char *v = config_plugin_expand(d->env[i].value, inst->endpoint, node);

		if (!v || asprintf(&env[k], "%s=%s", d->env[i].name, v) < 0) {
			free(v);
			env[k] = NULL;
			return CSID_ENOMEM;
		}
		free(v);
		k++;
	}
	return 0;
}

static void supervisor_free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

int supervisor_proc_spawn(struct supervisor_instance *inst, uv_exit_cb on_exit, struct err *e)
{
	struct supervisor *sv = inst->sv;
	uv_process_options_t opt;
	uv_stdio_container_t stdio[3];
	char **argv = NULL, **env = NULL;
	int rc;

	rc = supervisor_build_exec(inst, &argv, &env);
	if (rc) {
		err_set(e, rc, "spawn %s: out of memory", inst->def.command);
		goto out;
	}
	for (int i = 0; i < 2; i++) {
		uv_pipe_init(sv->cfg.loop, &inst->pipes[i], 0);
		inst->pipes[i].data = inst;
		inst->pipe_open[i] = true;
		inst->open_handles++;
	}
	memset(&opt, 0, sizeof(opt));
	memset(stdio, 0, sizeof(stdio));
	stdio[0].flags = UV_IGNORE;
	for (int i = 0; i < 2; i++) {
		stdio[i + 1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
		stdio[i + 1].data.stream = (uv_stream_t *)&inst->pipes[i];
	}
	opt.file = inst->def.command;
	opt.args = argv;
	opt.env = env;
	opt.cwd = inst->dir;
	opt.exit_cb = on_exit;
	opt.stdio = stdio;
	opt.stdio_count = 3;
	/* A session of its own: a terminal's ^C reaches the agent, which stops plugins in order. */
	opt.flags = UV_PROCESS_DETACHED;
	inst->proc.data = inst;
	rc = uv_spawn(sv->cfg.loop, &inst->proc, &opt);
	inst->proc_init = true;
	inst->open_handles++;
	if (rc) {
		rc = err_set(e, rc == UV_ENOENT ? CSID_ENOTFOUND : CSID_EIO, "spawn %s: %s",
			     inst->def.command, uv_strerror(rc));
		goto out;
	}
	inst->pid = inst->proc.pid;
	inst->proc_running = true;
	for (int i = 0; i < 2; i++)
		uv_read_start((uv_stream_t *)&inst->pipes[i], supervisor_alloc, supervisor_on_read);
	supervisor_write_state(inst);
out:
	supervisor_free_strv(argv);
	supervisor_free_strv(env);
	return rc;
}

void supervisor_proc_forget(struct supervisor_instance *inst)
{
	char path[PATH_MAX + 32];

	if (inst->log_fd >= 0)
		close(inst->log_fd);
	inst->log_fd = -1;
	if (inst->external || !inst->dir[0])
		return;
	snprintf(path, sizeof(path), "%s/%s", inst->dir, SUPERVISOR_STATE_FILE);
	unlink(path);
	if (inst->sock[0])
		unlink(inst->sock);
	if (inst->sock_dir[0] && strcmp(inst->sock_dir, inst->dir) != 0)
		rmdir(inst->sock_dir);
}

struct supervisor_dead_dir {
	char name[256];
	time_t mtime;
};

static int supervisor_cmp_dead(const void *a, const void *b)
{
	const struct supervisor_dead_dir *x = a, *y = b;

	return x->mtime < y->mtime ? 1 : x->mtime > y->mtime ? -1 : 0;
}

void supervisor_proc_prune(struct supervisor *sv, const char *plugin_id)
{
	struct supervisor_dead_dir dead[64];
	char base[PATH_MAX], path[PATH_MAX + 300];
	size_t n = 0;
	struct dirent *ent;
	DIR *d;

	snprintf(base, sizeof(base), "%s/plugins/%s", sv->data_dir, plugin_id);
	d = opendir(base);
	if (!d)
		return;
	while ((ent = readdir(d)) && n < 64) {
		struct stat st;

		if (ent->d_name[0] == '.' || strlen(ent->d_name) >= sizeof(dead[0].name))
			continue;
		snprintf(path, sizeof(path), "%s/%s/%s", base, ent->d_name, SUPERVISOR_STATE_FILE);
		if (access(path, F_OK) == 0)
			continue; /* still owned by a running (or stale) instance */
		snprintf(path, sizeof(path), "%s/%s", base, ent->d_name);
		if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
			continue;
		snprintf(dead[n].name, sizeof(dead[n].name), "%s", ent->d_name);
		dead[n++].mtime = st.st_mtime;
	}
	closedir(d);
	qsort(dead, n, sizeof(dead[0]), supervisor_cmp_dead);
	for (size_t i = SUPERVISOR_KEEP_DEAD; i < n; i++) {
		static const char *const files[] = {SUPERVISOR_LOG_FILE, SUPERVISOR_LOG_FILE ".1",
						    "csi.sock", SUPERVISOR_STATE_FILE ".tmp"};

		for (size_t f = 0; f < sizeof(files) / sizeof(files[0]); f++) {
			snprintf(path, sizeof(path), "%s/%s/%s", base, dead[i].name, files[f]);
			unlink(path);
		}
		snprintf(path, sizeof(path), "%s/%s", base, dead[i].name);
		rmdir(path);
	}
}

struct supervisor_stale {
	int pid;
	unsigned long long start;
	char type[32];
	char id[CONFIG_ID_MAX + 1];
	char instance[SUPERVISOR_INSTANCE_ID_MAX];
	char sock[SUPERVISOR_SOCK_MAX];
};

static bool supervisor_read_state(const char *path, struct supervisor_stale *s)
{
	char line[512];
	FILE *f = fopen(path, "r");

	memset(s, 0, sizeof(*s));
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		char *eq = strchr(line, '='), *nl = strchr(line, '\n');

		if (nl)
			*nl = '\0';
		if (!eq)
			continue;
		*eq++ = '\0';
		if (strcmp(line, "pid") == 0)
			s->pid = atoi(eq);
		else if (strcmp(line, "start") == 0)
			s->start = strtoull(eq, NULL, 10);
		else if (strcmp(line, "type") == 0)
			snprintf(s->type, sizeof(s->type), "%s", eq);
		else if (strcmp(line, "id") == 0)
			snprintf(s->id, sizeof(s->id), "%s", eq);
		else if (strcmp(line, "instance") == 0)
			snprintf(s->instance, sizeof(s->instance), "%s", eq);
		else if (strcmp(line, "sock") == 0)
			snprintf(s->sock, sizeof(s->sock), "%s", eq);
	}
	fclose(f);
	return s->id[0] && s->instance[0];
}

static void supervisor_kill_stale(struct supervisor *sv, const char *dir,
				  const struct supervisor_stale *s)
{
	char path[PATH_MAX + 300], sockdir[SUPERVISOR_SOCK_MAX];
	enum config_plugin_type type = CONFIG_PLUGIN_NODE;
	char *slash;

	/* Only a process whose start time matches: the pid may have been reused. */
	if (s->pid > 1 && s->start && supervisor_start_time(s->pid) == s->start) {
		log_warn("msg=\"killing plugin left by a previous agent\" plugin=%s instance=%s "
			 "pid=%d",
			 s->id, s->instance, s->pid);
		kill(-s->pid, SIGKILL);
		kill(s->pid, SIGKILL);
	}
	if (strcmp(s->type, "monolith") == 0)
		type = CONFIG_PLUGIN_MONOLITH;
	else if (strcmp(s->type, "controller") == 0)
		type = CONFIG_PLUGIN_CONTROLLER;
	supervisor_deregister(sv, s->id, type, s->instance);
	if (s->sock[0]) {
		unlink(s->sock);
		snprintf(sockdir, sizeof(sockdir), "%s", s->sock);
		slash = strrchr(sockdir, '/');
		if (slash) {
			*slash = '\0';
			if (strcmp(sockdir, dir) != 0)
				rmdir(sockdir);
		}
	}
	snprintf(path, sizeof(path), "%s/%s", dir, SUPERVISOR_STATE_FILE);
	unlink(path);
}

int supervisor_cleanup_stale(struct supervisor *sv)
{
	char base[PATH_MAX], pdir[PATH_MAX + 300], idir[PATH_MAX + 600], path[PATH_MAX + 700];
	struct dirent *pe, *ie;
	int found = 0;
	DIR *d, *sub;

	snprintf(base, sizeof(base), "%s/plugins", sv->data_dir);
	d = opendir(base);
	if (!d)
		return 0;
	while ((pe = readdir(d))) {
		if (pe->d_name[0] == '.')
			continue;
		snprintf(pdir, sizeof(pdir), "%s/%s", base, pe->d_name);
		sub = opendir(pdir);
		if (!sub)
			continue;
		while ((ie = readdir(sub))) {
			struct supervisor_stale s;

			if (ie->d_name[0] == '.')
				continue;
			snprintf(idir, sizeof(idir), "%s/%s", pdir, ie->d_name);
			snprintf(path, sizeof(path), "%s/%s", idir, SUPERVISOR_STATE_FILE);
			if (!supervisor_read_state(path, &s)) {
				unlink(path);
				continue;
			}
			found++;
			supervisor_kill_stale(sv, idir, &s);
		}
		closedir(sub);
	}
	closedir(d);
	return found;
}
