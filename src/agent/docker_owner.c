/*
 * Owners of Docker/Podman mounts (docker_owner.h). Data: a list of the
 * mounts this bridge made, each with the container found for it (or
 * none yet, and since when it is looked for). One thread polls for the
 * mounts that have none, outside the lock; the engine's API is asked
 * over its unix socket with libcurl, a bounded answer at a time.
 */
#include "agent/docker_owner.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "agent/owners.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/procstat.h"
#include "util/strbuf.h"

#define DOCKER_OWNER_POLL_MS 200
#define DOCKER_OWNER_ENGINE_AFTER_MS 3000
/* How often a shared mount is checked for users, and how long none may use it. */
#define DOCKER_OWNER_SHARED_POLL_MS 1000
#define DOCKER_OWNER_SHARED_GRACE_MS 2000
#define DOCKER_OWNER_ANSWER_MAX (1024 * 1024)
#define DOCKER_OWNER_NAME_MAX 128
#define DOCKER_OWNER_PATH_MAX 4096
#define DOCKER_OWNER_MOUNTINFO_MAX (512 * 1024)
/* Mounts looked for in one pass. */
#define DOCKER_OWNER_BATCH 64

struct docker_owner_entry {
	char vol[DOCKER_OWNER_NAME_MAX + 1];
	char alloc[DOCKER_OWNER_NAME_MAX + 1];
	char target[DOCKER_OWNER_PATH_MAX];
	char container[DOCKER_OWNER_NAME_MAX + 1]; /* "" until found */
	int pid;
	int64_t since_ms;
	/* Podman's one mount of a volume for all its containers: watched for users instead. */
	bool shared, seen;
	int64_t seen_ms, next_ms;
	struct docker_owner_entry *next;
};

struct docker_owner {
	struct docker_owner_config cfg;
	char *engine_socket; /* NULL: none */
	char *proc_root;
	char *mounts_dir; /* NULL: none */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	pthread_t thread;
	bool stop;
	struct docker_owner_entry *list;
};

/* ---- finding a container's process ---- */

/* Reads at most cap - 1 bytes of path, NUL-terminated; the length or -1. */
static ssize_t docker_owner_read(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, cap - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

/*
 * Whether pid is the first process of a pid namespace of its own (the
 * last NSpid of its status is 1): a container's init. The processes of
 * the runtime that set the container up (runc's or crun's stages) share
 * its cgroup and mount namespace for a moment, but not that.
 */
static bool docker_owner_ns_init(const char *proc_root, const char *pid)
{
	char path[512], text[4096];
	const char *ns, *last;

	snprintf(path, sizeof(path), "%s/%s/status", proc_root, pid);
	if (docker_owner_read(path, text, sizeof(text)) <= 0 || !(ns = strstr(text, "\nNSpid:")))
		return false;
	ns += 8;
	last = ns;
	for (const char *p = ns; *p && *p != '\n'; p++)
		if ((*p == '\t' || *p == ' ') && p[1] >= '0' && p[1] <= '9')
			last = p + 1;
	return last != ns && strtol(last, NULL, 10) == 1;
}

/* Whether one of the cgroup lines of text ends in a path component naming id. */
static bool docker_owner_cgroup_names(char *text, const char *id)
{
	char *save = NULL;

	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		const char *path = strchr(line, ':'), *last;

		path = path ? strchr(path + 1, ':') : NULL;
		if (!path)
			continue;
		last = strrchr(path, '/');
		if (last && strstr(last, id))
			return true;
	}
	return false;
}

int docker_owner_pid_by_cgroup(const char *proc_root, const char *id)
{
	DIR *d = opendir(proc_root);
	struct dirent *de;
	uint64_t best_start = UINT64_MAX;
	int best = 0;

	if (!d)
		return CSID_EIO;
	/* An ID too short to be unique names no container. */
	if (strlen(id) < 12) {
		closedir(d);
		return 0;
	}
	while ((de = readdir(d))) {
		char path[512], text[8192];
		uint64_t start;
		char state;
		int pid = atoi(de->d_name);

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s/cgroup", proc_root, de->d_name);
		if (docker_owner_read(path, text, sizeof(text)) <= 0 ||
		    !docker_owner_cgroup_names(text, id) ||
		    !docker_owner_ns_init(proc_root, de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s/stat", proc_root, de->d_name);
		if (docker_owner_read(path, text, sizeof(text)) <= 0 ||
		    procstat_parse(text, strlen(text), &state, &start) != 0 || state == 'Z')
			continue;
		if (start < best_start || (start == best_start && pid < best)) {
			best_start = start;
			best = pid;
		}
	}
	closedir(d);
	return best;
}

int docker_owner_parse_list(const char *body, size_t len, json_t **out, struct err *e)
{
	json_t *doc = json_loadb(body, len, 0, NULL), *c;
	size_t i;

	*out = NULL;
	if (!json_is_array(doc)) {
		json_decref(doc);
		return err_set(e, CSID_EPROTO, "docker engine: container list: not a JSON array");
	}
	*out = json_array();
	json_array_foreach(doc, i, c)
	{
		const char *id = json_string_value(json_object_get(c, "Id"));
		const char *st = json_string_value(json_object_get(c, "State"));

		if (id && strlen(id) <= DOCKER_OWNER_NAME_MAX &&
		    (!st || strcmp(st, "running") == 0))
			json_array_append_new(*out, json_string(id));
	}
	json_decref(doc);
	return *out ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

/* GET path of the engine: 0 and the answer's JSON in *doc, or a code. */
static int docker_owner_engine_get(struct docker_owner *o, const char *path, json_t **doc,
				   struct err *e)
{
	struct strbuf ans = {.max = DOCKER_OWNER_ANSWER_MAX};
	char url[600];
	CURL *c = curl_easy_init();
	long status = 0;
	CURLcode cc;
	int rc = 0;

	*doc = NULL;
	if (!c)
		return err_set(e, CSID_ENOMEM, "out of memory");
	snprintf(url, sizeof(url), "http://docker%s", path);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, o->engine_socket);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 3000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, strbuf_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &ans);
	cc = curl_easy_perform(c);
	if (cc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (cc != CURLE_OK || status != 200)
		rc = err_set(e, CSID_EUNAVAIL, "docker engine %s: %s", o->engine_socket,
			     cc != CURLE_OK ? curl_easy_strerror(cc) : "refused");
	else if (!(*doc = json_loadb(ans.p ? ans.p : "", ans.len, 0, NULL)))
		rc = err_set(e, CSID_EPROTO, "docker engine: answer is not JSON");
	curl_easy_cleanup(c);
	strbuf_free(&ans);
	return rc;
}

/*
 * The "major:minor root" of the mount at target in the mountinfo text
 * (fields 3 and 4), into out; 0 or -1 when target is no mount point.
 */
static int docker_owner_devroot(char *text, const char *target, char *out, size_t cap)
{
	char *save = NULL;

	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char dev[32], root[DOCKER_OWNER_PATH_MAX], mp[DOCKER_OWNER_PATH_MAX];

		if (sscanf(line, "%*s %*s %31s %4095s %4095s", dev, root, mp) == 3 &&
		    strcmp(mp, target) == 0) {
			snprintf(out, cap, "%s %s ", dev, root);
			return 0;
		}
	}
	return -1;
}

/*
 * Whether a mountinfo text has a mount of devroot ("major:minor root ")
 * at a mount point not under skip_under (NULL: anywhere).
 */
static bool docker_owner_has_devroot(const char *text, const char *devroot, const char *skip_under)
{
	size_t dl = strlen(devroot), sl = skip_under ? strlen(skip_under) : 0;

	for (const char *line = text; line && *line;) {
		const char *sp = strchr(line, ' '), *mp;

		/* Skip the mount ID and the parent ID: fields 3 and 4 follow, then the point. */
		sp = sp ? strchr(sp + 1, ' ') : NULL;
		if (sp && strncmp(sp + 1, devroot, dl) == 0) {
			mp = sp + 1 + dl;
			if (!sl || strncmp(mp, skip_under, sl) != 0 ||
			    (mp[sl] != '/' && mp[sl] != ' '))
				return true;
		}
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
	return false;
}

int docker_owner_pid_by_mount(const char *proc_root, const char *target, const char *skip_under,
			      const char *const *taken, size_t ntaken, char *ns_out, size_t cap,
			      int *users)
{
	char path[512], self_ns[64] = "", devroot[2 * DOCKER_OWNER_PATH_MAX], *text;
	uint64_t best_start = UINT64_MAX;
	DIR *d;
	struct dirent *de;
	ssize_t n;
	int best = 0;

	if (users)
		*users = 0;
	text = malloc(DOCKER_OWNER_MOUNTINFO_MAX);
	if (!text)
		return CSID_ENOMEM;
	snprintf(path, sizeof(path), "%s/self/ns/mnt", proc_root);
	n = readlink(path, self_ns, sizeof(self_ns) - 1);
	self_ns[n > 0 ? n : 0] = '\0';
	snprintf(path, sizeof(path), "%s/self/mountinfo", proc_root);
	if (docker_owner_read(path, text, DOCKER_OWNER_MOUNTINFO_MAX) <= 0 ||
	    docker_owner_devroot(text, target, devroot, sizeof(devroot)) != 0 ||
	    !(d = opendir(proc_root))) {
		free(text);
		return 0;
	}
	while ((de = readdir(d))) {
		char ns[64], stat[1024], state;
		uint64_t start;
		bool skip = false;
		int pid = atoi(de->d_name);

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s/ns/mnt", proc_root, de->d_name);
		n = readlink(path, ns, sizeof(ns) - 1);
		if (n <= 0)
			continue;
		ns[n] = '\0';
		for (size_t i = 0; i < ntaken && !skip; i++)
			skip = strcmp(taken[i], ns) == 0;
		if (skip || strcmp(ns, self_ns) == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s/stat", proc_root, de->d_name);
		if (docker_owner_read(path, stat, sizeof(stat)) <= 0 ||
		    procstat_parse(stat, strlen(stat), &state, &start) != 0 || state == 'Z' ||
		    (!users && start > best_start) || !docker_owner_ns_init(proc_root, de->d_name))
			continue;
		snprintf(path, sizeof(path), "%s/%s/mountinfo", proc_root, de->d_name);
		if (docker_owner_read(path, text, DOCKER_OWNER_MOUNTINFO_MAX) <= 0 ||
		    !docker_owner_has_devroot(text, devroot, skip_under))
			continue;
		if (users)
			(*users)++;
		if (start > best_start)
			continue;
		if (start < best_start || pid < best) {
			best_start = start;
			best = pid;
			snprintf(ns_out, cap, "%s", ns);
		}
	}
	closedir(d);
	free(text);
	return best;
}

/* Whether container id is taken by another mount of vol (called under mu). */
static bool docker_owner_taken(struct docker_owner *o, const char *vol, const char *id)
{
	for (struct docker_owner_entry *p = o->list; p; p = p->next)
		if (strcmp(p->vol, vol) == 0 && strcmp(p->container, id) == 0)
			return true;
	return false;
}

/* Through the engine: a running container using vol that no other mount took. */
static int docker_owner_by_engine(struct docker_owner *o, const char *vol, char *container,
				  struct err *e)
{
	char path[400];
	json_t *doc = NULL, *ids = NULL, *id;
	size_t i;
	int rc, pid = 0;

	/* filters={"volume":["<vol>"]}: the name is of [A-Za-z0-9._-] only. */
	snprintf(path, sizeof(path),
		 "/containers/json?filters=%%7B%%22volume%%22%%3A%%5B%%22%s%%22%%5D%%7D", vol);
	if ((rc = docker_owner_engine_get(o, path, &doc, e)))
		return rc;
	{
		char *text = json_dumps(doc, JSON_COMPACT);

		rc = text ? docker_owner_parse_list(text, strlen(text), &ids, e)
			  : err_set(e, CSID_ENOMEM, "out of memory");
		free(text);
	}
	json_decref(doc);
	json_array_foreach(ids, i, id)
	{
		const char *cid = json_string_value(id);
		bool taken;
		json_t *info = NULL;

		pthread_mutex_lock(&o->mu);
		taken = docker_owner_taken(o, vol, cid);
		pthread_mutex_unlock(&o->mu);
		snprintf(path, sizeof(path), "/containers/%s/json", cid);
		if (taken || strspn(cid, "0123456789abcdef") != strlen(cid) ||
		    docker_owner_engine_get(o, path, &info, e) != 0) {
			err_clear(e);
			continue;
		}
		pid =
		    (int)json_integer_value(json_object_get(json_object_get(info, "State"), "Pid"));
		json_decref(info);
		if (pid > 0) {
			snprintf(container, DOCKER_OWNER_NAME_MAX + 1, "%s", cid);
			break;
		}
	}
	json_decref(ids);
	return rc ? rc : pid;
}

/* Through the mounts: a process of another mount namespace no other mount of vol took. */
static int docker_owner_by_mount(struct docker_owner *o, const char *vol, const char *target,
				 char *container)
{
	const char *taken[DOCKER_OWNER_BATCH];
	size_t n = 0;
	int pid;

	pthread_mutex_lock(&o->mu);
	for (struct docker_owner_entry *p = o->list; p && n < DOCKER_OWNER_BATCH; p = p->next)
		if (strcmp(p->vol, vol) == 0 && p->container[0])
			taken[n++] = strdup(p->container);
	pthread_mutex_unlock(&o->mu);
	pid = docker_owner_pid_by_mount(o->proc_root, target, o->mounts_dir, taken, n, container,
					DOCKER_OWNER_NAME_MAX + 1, NULL);
	for (size_t i = 0; i < n; i++)
		free((char *)taken[i]);
	return pid > 0 ? pid : 0;
}

/*
 * Looks for the container of one mount (looked for since age_ms): its
 * pid (container filled), 0 when not yet. The system first, which costs
 * the engine nothing; the engine's API only for a mount the system has
 * not explained within DOCKER_OWNER_ENGINE_AFTER_MS (asking it while it
 * starts the container slows the start down).
 */
static int docker_owner_find(struct docker_owner *o, const char *vol, const char *alloc,
			     const char *target, int64_t age_ms, char *container)
{
	struct err e;
	int pid = docker_owner_pid_by_cgroup(o->proc_root, alloc);

	if (pid > 0) {
		snprintf(container, DOCKER_OWNER_NAME_MAX + 1, "%s", alloc);
		return pid;
	}
	pid = docker_owner_by_mount(o, vol, target, container);
	if (pid > 0 || !o->engine_socket || age_ms < DOCKER_OWNER_ENGINE_AFTER_MS)
		return pid;
	err_clear(&e);
	pid = docker_owner_by_engine(o, vol, container, &e);
	return pid > 0 ? pid : 0;
}

/* ---- the thread ---- */

struct docker_owner_job {
	char vol[DOCKER_OWNER_NAME_MAX + 1];
	char alloc[DOCKER_OWNER_NAME_MAX + 1];
	char target[DOCKER_OWNER_PATH_MAX];
	bool expired, shared;
	int64_t age_ms;
};

/*
 * A shared mount (Podman's): counts the containers that use it; once one
 * was seen and none has for DOCKER_OWNER_SHARED_GRACE_MS, the mount is
 * dropped here and released through cfg.release.
 */
static void docker_owner_shared(struct docker_owner *o, const struct docker_owner_job *j)
{
	char ns[DOCKER_OWNER_NAME_MAX + 1];
	int64_t now = clock_now_ms(clock_real());
	bool release = false;
	int users = 0;

	if (docker_owner_pid_by_mount(o->proc_root, j->target, o->mounts_dir, NULL, 0, ns,
				      sizeof(ns), &users) < 0)
		return;
	pthread_mutex_lock(&o->mu);
	for (struct docker_owner_entry **pp = &o->list; *pp; pp = &(*pp)->next) {
		struct docker_owner_entry *p = *pp;

		if (strcmp(p->vol, j->vol) != 0 || strcmp(p->alloc, j->alloc) != 0)
			continue;
		if (users > 0) {
			if (!p->seen)
				log_info("msg=\"shared mount in use\" volume=%s alloc=%s users=%d",
					 p->vol, p->alloc, users);
			p->seen = true;
			p->seen_ms = now;
		} else if ((p->seen && now - p->seen_ms >= DOCKER_OWNER_SHARED_GRACE_MS) ||
			   (!p->seen && now - p->since_ms >= o->cfg.wait_ms)) {
			*pp = p->next;
			free(p);
			release = true;
		}
		break;
	}
	pthread_mutex_unlock(&o->mu);
	if (release && o->cfg.release) {
		log_info("msg=\"no container uses the shared mount any more: releasing\" volume=%s "
			 "alloc=%s",
			 j->vol, j->alloc);
		o->cfg.release(o->cfg.release_ctx, j->vol, j->alloc,
			       "no container uses the mount any more");
	}
}

/* One pass: the mounts with no container yet, looked for; expired ones given up. */
static void docker_owner_pass(struct docker_owner *o)
{
	struct docker_owner_job jobs[DOCKER_OWNER_BATCH];
	int64_t now = clock_now_ms(clock_real());
	size_t n = 0;

	pthread_mutex_lock(&o->mu);
	for (struct docker_owner_entry *p = o->list; p && n < DOCKER_OWNER_BATCH; p = p->next) {
		if (p->shared && p->next_ms > now)
			continue;
		if (!p->shared && (p->container[0] || p->pid < 0))
			continue;
		jobs[n].shared = p->shared;
		if (p->shared)
			p->next_ms = now + DOCKER_OWNER_SHARED_POLL_MS;
		memcpy(jobs[n].vol, p->vol, sizeof(p->vol));
		memcpy(jobs[n].alloc, p->alloc, sizeof(p->alloc));
		memcpy(jobs[n].target, p->target, sizeof(p->target));
		jobs[n].expired = !p->shared && now - p->since_ms > o->cfg.wait_ms;
		jobs[n].age_ms = now - p->since_ms;
		if (jobs[n].expired)
			p->pid = -1;
		n++;
	}
	pthread_mutex_unlock(&o->mu);
	for (size_t i = 0; i < n; i++) {
		char container[DOCKER_OWNER_NAME_MAX + 1] = "", q[600];
		struct err e;
		bool found;
		int pid;

		if (jobs[i].shared) {
			docker_owner_shared(o, &jobs[i]);
			continue;
		}
		if (jobs[i].expired) {
			log_warn("msg=\"no container found for the mount: its claim is held until "
				 "the engine unmounts\" volume=%s alloc=%s",
				 jobs[i].vol, jobs[i].alloc);
			continue;
		}
		pid = docker_owner_find(o, jobs[i].vol, jobs[i].alloc, jobs[i].target,
					jobs[i].age_ms, container);
		if (pid <= 0)
			continue;
		found = false;
		pthread_mutex_lock(&o->mu);
		for (struct docker_owner_entry *p = o->list; p; p = p->next) {
			if (strcmp(p->vol, jobs[i].vol) == 0 &&
			    strcmp(p->alloc, jobs[i].alloc) == 0 && !p->container[0]) {
				memcpy(p->container, container, sizeof(container));
				p->pid = pid;
				found = true;
			}
		}
		pthread_mutex_unlock(&o->mu);
		/* Unmounted (dropped) while it was looked for: it has no claim to own any more. */
		if (!found)
			continue;
		err_clear(&e);
		if (o->cfg.record(o->cfg.ctx, jobs[i].vol, jobs[i].alloc, pid, &e) != 0)
			log_warn("msg=\"container not made the owner of its mount\" volume=%s "
				 "alloc=%s pid=%d error=%s",
				 jobs[i].vol, jobs[i].alloc, pid, log_q(q, sizeof(q), e.msg));
		else
			log_info("msg=\"container owns its mount\" volume=%s alloc=%s pid=%d",
				 jobs[i].vol, jobs[i].alloc, pid);
	}
}

static bool docker_owner_pending(struct docker_owner *o)
{
	for (struct docker_owner_entry *p = o->list; p; p = p->next)
		if (p->shared || (!p->container[0] && p->pid >= 0))
			return true;
	return false;
}

static void *docker_owner_main(void *arg)
{
	struct docker_owner *o = arg;

	pthread_mutex_lock(&o->mu);
	while (!o->stop) {
		if (!docker_owner_pending(o)) {
			pthread_cond_wait(&o->cond, &o->mu);
			continue;
		}
		pthread_mutex_unlock(&o->mu);
		docker_owner_pass(o);
		pthread_mutex_lock(&o->mu);
		if (!o->stop)
			clock_wait(clock_real(), &o->cond, &o->mu,
				   clock_now_ms(clock_real()) + o->cfg.poll_ms);
	}
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

int docker_owner_new(const struct docker_owner_config *cfg, struct docker_owner **out,
		     struct err *e)
{
	struct docker_owner *o = calloc(1, sizeof(*o));

	*out = NULL;
	if (!o)
		return err_set(e, CSID_ENOMEM, "out of memory");
	o->cfg = *cfg;
	if (o->cfg.wait_ms <= 0)
		o->cfg.wait_ms = DOCKER_OWNER_WAIT_MS;
	if (o->cfg.poll_ms <= 0)
		o->cfg.poll_ms = DOCKER_OWNER_POLL_MS;
	o->proc_root = strdup(cfg->proc_root ? cfg->proc_root : "/proc");
	if (cfg->engine_socket && cfg->engine_socket[0])
		o->engine_socket = strdup(cfg->engine_socket);
	if (cfg->mounts_dir && cfg->mounts_dir[0])
		o->mounts_dir = strdup(cfg->mounts_dir);
	if (!o->proc_root || (cfg->engine_socket && cfg->engine_socket[0] && !o->engine_socket) ||
	    (cfg->mounts_dir && cfg->mounts_dir[0] && !o->mounts_dir)) {
		free(o->proc_root);
		free(o->engine_socket);
		free(o->mounts_dir);
		free(o);
		return err_set(e, CSID_ENOMEM, "out of memory");
	}
	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cond, NULL);
	if (pthread_create(&o->thread, NULL, docker_owner_main, o) != 0) {
		pthread_cond_destroy(&o->cond);
		pthread_mutex_destroy(&o->mu);
		free(o->proc_root);
		free(o->engine_socket);
		free(o->mounts_dir);
		free(o);
		return err_set(e, CSID_ENOMEM, "docker owners: cannot start a thread");
	}
	*out = o;
	return 0;
}

void docker_owner_free(struct docker_owner *o)
{
	if (!o)
		return;
	pthread_mutex_lock(&o->mu);
	o->stop = true;
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->mu);
	pthread_join(o->thread, NULL);
	while (o->list) {
		struct docker_owner_entry *p = o->list;

		o->list = p->next;
		free(p);
	}
	pthread_cond_destroy(&o->cond);
	pthread_mutex_destroy(&o->mu);
	free(o->proc_root);
	free(o->engine_socket);
	free(o->mounts_dir);
	free(o);
}

void docker_owner_watch(struct docker_owner *o, const char *vol, const char *alloc,
			const char *target)
{
	struct docker_owner_entry *p = calloc(1, sizeof(*p));

	if (!p || strlen(vol) > DOCKER_OWNER_NAME_MAX || strlen(alloc) > DOCKER_OWNER_NAME_MAX ||
	    strlen(target) >= DOCKER_OWNER_PATH_MAX) {
		free(p);
		return;
	}
	snprintf(p->target, sizeof(p->target), "%s", target);
	p->shared = strcmp(alloc, DOCKER_OWNER_PODMAN_ID) == 0;
	snprintf(p->vol, sizeof(p->vol), "%s", vol);
	snprintf(p->alloc, sizeof(p->alloc), "%s", alloc);
	p->since_ms = clock_now_ms(clock_real());
	docker_owner_drop(o, vol, alloc);
	pthread_mutex_lock(&o->mu);
	p->next = o->list;
	o->list = p;
	pthread_cond_broadcast(&o->cond);
	pthread_mutex_unlock(&o->mu);
}

void docker_owner_drop(struct docker_owner *o, const char *vol, const char *alloc)
{
	struct docker_owner_entry **pp;

	pthread_mutex_lock(&o->mu);
	for (pp = &o->list; *pp;) {
		struct docker_owner_entry *p = *pp;

		if (strcmp(p->vol, vol) == 0 && strcmp(p->alloc, alloc) == 0) {
			*pp = p->next;
			free(p);
		} else {
			pp = &p->next;
		}
	}
	pthread_mutex_unlock(&o->mu);
}
