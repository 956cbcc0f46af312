/*
 * The claim owners' shell (contract in owners_watch.h): the real probe
 * (/proc/PID/stat, cgroup.events), the mount-time checks, the owners
 * table in the agent database, and the watch thread.
 *
 * The thread sleeps in poll(2) on an eventfd (puts, renewals, stop), one
 * inotify descriptor (a watch on the cgroup.events file of every live
 * cgroup owner) and a pidfd per live pid owner, with a timeout of the
 * next lease expiry, retry or periodic recheck. On every wake it drops
 * and re-arms all watches, then checks every owner through the core,
 * then releases what is due. Rebuilding costs a few system calls per
 * owner, and an agent holds few owned mounts; in exchange no watch ever
 * outlives its owner and no event is lost between arming and checking.
 *
 * The table (module "owners"): owners(volume_id, alloc_id, kind, pid,
 * start_time, cgroup, lease_ms, expires_ms). Statements run under mu.
 */
#include "agent/owners_watch.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store/agent_db.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/procstat.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif
/* Watched owners at most (the rest are found by the periodic recheck). */
#define OWNERS_WATCH_FDS 1024
/* Mounts released per pass at most. */
#define OWNERS_WATCH_BATCH 16

static const char *const owners_watch_schema[] = {
    "CREATE TABLE owners ("
    " volume_id TEXT NOT NULL, alloc_id TEXT NOT NULL, kind TEXT NOT NULL,"
    " pid INTEGER NOT NULL, start_time INTEGER NOT NULL, cgroup TEXT NOT NULL,"
    " lease_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL,"
    " PRIMARY KEY (volume_id, alloc_id))",
};

struct owners_watch {
	struct owners_watch_config cfg;
	pthread_mutex_t mu;
	struct owners *core;
	sqlite3 *db; /* NULL: not persisted */
	int wake_fd;
	pthread_t thread;
	bool started, stop;
	struct pollfd fds[OWNERS_WATCH_FDS];
	size_t nfds;
};

/* Reads at most len - 1 bytes of path into buf (NUL-terminated); bytes read or -errno. */
static ssize_t owners_watch_read(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0)
		n = -errno;
	close(fd);
	if (n >= 0)
		buf[n] = '\0';
	return n;
}

static int owners_watch_pid_start(void *ctx, int pid, uint64_t *start)
{
	char state = 0;
	int rc;

	(void)ctx;
	rc = procstat_read(pid, &state, start);
	if (rc)
		return rc;
	return state == 'Z' || state == 'X' ? CSID_ENOTFOUND : 0;
}

static int owners_watch_cgroup_populated(void *ctx, const char *dir, bool *populated)
{
	char path[OWNERS_PATH_MAX + 32], buf[512];
	ssize_t n;

	(void)ctx;
	snprintf(path, sizeof(path), "%s/cgroup.events", dir);
	n = owners_watch_read(path, buf, sizeof(buf));
	if (n == -ENOENT || n == -ENODEV)
		return CSID_ENOTFOUND;
	if (n < 0)
		return err_from_errno((int)-n);
	return owners_events_parse(buf, (size_t)n, populated) ? CSID_EIO : 0;
}

int owners_watch_pid_check(int pid, uint64_t *start, struct err *e)
{
	int rc;

	if (pid <= 0)
		return err_set(e, CSID_EINVAL, "owner pid %d: must be positive", pid);
	rc = owners_watch_pid_start(NULL, pid, start);
	if (rc == CSID_ENOTFOUND)
		return err_set(e, CSID_EINVAL, "owner pid %d: no such process", pid);
	if (rc)
		return err_set(e, CSID_EINVAL, "owner pid %d: cannot read its start time: %s", pid,
			       csid_strerror(rc));
	return 0;
}

int owners_watch_cgroup_check(const char *path, struct err *e)
{
	char real[PATH_MAX];
	struct statfs fs;
	struct stat st;
	bool populated = false;
	int rc;

	if ((rc = owners_cgroup_path_check(path, e)))
		return err_wrap(e, "owner cgroup");
	/* Every failure is the caller's mistake (400), never a missing volume (404). */
	if (!realpath(path, real))
		return err_set(e, CSID_EINVAL, "owner cgroup %s: %s", path, strerror(errno));
	if (strcmp(real, path) != 0)
		return err_set(e, CSID_EINVAL,
			       "owner cgroup %s: the path goes through a symbolic link", path);
	if (statfs(path, &fs) != 0 || stat(path, &st) != 0)
		return err_set(e, CSID_EINVAL, "owner cgroup %s: %s", path, strerror(errno));
	if (fs.f_type != CGROUP2_SUPER_MAGIC || !S_ISDIR(st.st_mode))
		return err_set(e, CSID_EINVAL, "owner cgroup %s: not a cgroup v2 directory", path);
	rc = owners_watch_cgroup_populated(NULL, path, &populated);
	if (rc == CSID_ENOTFOUND)
		return err_set(e, CSID_EINVAL,
			       "owner cgroup %s: no cgroup.events (the root cgroup cannot own "
			       "a mount)",
			       path);
	if (rc)
		return err_set(e, CSID_EINVAL, "owner cgroup %s: cannot read cgroup.events: %s",
			       path, csid_strerror(rc));
	if (!populated)
		return err_set(e, CSID_EINVAL,
			       "owner cgroup %s is empty: start the workload in it first", path);
	return 0;
}

/* Runs one statement on the table (under mu); 0 or a code with e set. */
static int owners_watch_sql(struct owners_watch *w, const char *sql, const char *vol,
			    const char *alloc, const struct owners_spec *s, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int src;

	if (!w->db)
		return 0;
	src = sqlite3_prepare_v2(w->db, sql, -1, &st, NULL);
	if (src == SQLITE_OK) {
		sqlite3_bind_text(st, 1, vol, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, alloc, -1, SQLITE_STATIC);
		if (s) {
			sqlite3_bind_text(st, 3, owners_kind_name(s->kind), -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 4, s->pid);
			sqlite3_bind_int64(st, 5, (sqlite3_int64)s->start_time);
			sqlite3_bind_text(st, 6, s->cgroup, -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 7, s->lease_ms);
			sqlite3_bind_int64(st, 8, s->expires_ms);
		}
		src = sqlite3_step(st);
	}
	sqlite3_finalize(st);
	if (src != SQLITE_OK && src != SQLITE_DONE)
		return err_set(e, agent_db_err(src), "owner of %s for %s: %s", vol, alloc,
			       sqlite3_errmsg(w->db));
	return 0;
}

static const char owners_watch_upsert[] =
    "INSERT OR REPLACE INTO owners VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
static const char owners_watch_delete[] = "DELETE FROM owners WHERE volume_id = ? AND alloc_id = ?";

/* Loads the recorded owners into the core (a row that does not decode is dropped). */
static int owners_watch_load(struct owners_watch *w, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int src = sqlite3_prepare_v2(w->db, "SELECT * FROM owners", -1, &st, NULL);

	while (src == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
		const char *vol = (const char *)sqlite3_column_text(st, 0);
		const char *alloc = (const char *)sqlite3_column_text(st, 1);
		const char *kind = (const char *)sqlite3_column_text(st, 2);
		const char *cg = (const char *)sqlite3_column_text(st, 5);
		struct owners_spec s = {0};
		struct err ignored;
		char q[600];

		for (int k = OWNERS_PID; k <= OWNERS_LEASE; k++)
			if (kind && strcmp(kind, owners_kind_name((enum owners_kind)k)) == 0)
				s.kind = (enum owners_kind)k;
		s.pid = (int)sqlite3_column_int64(st, 3);
		s.start_time = (uint64_t)sqlite3_column_int64(st, 4);
		snprintf(s.cgroup, sizeof(s.cgroup), "%s", cg ? cg : "");
		s.lease_ms = sqlite3_column_int64(st, 6);
		s.expires_ms = sqlite3_column_int64(st, 7);
		err_clear(&ignored);
		if (!vol || !alloc || owners_put(w->core, vol, alloc, &s, &ignored)) {
			log_warn("msg=\"recorded claim owner dropped\" volume=%s alloc=%s error=%s",
				 vol ? vol : "", alloc ? alloc : "",
				 log_q(q, sizeof(q), ignored.msg));
			continue;
		}
		log_info("msg=\"claim owner loaded\" volume=%s alloc=%s kind=%s", vol, alloc, kind);
	}
	sqlite3_finalize(st);
	if (src != SQLITE_OK)
		return err_set(e, agent_db_err(src), "owners: %s", sqlite3_errmsg(w->db));
	return 0;
}

static void owners_watch_poke(struct owners_watch *w)
{
	uint64_t one = 1;

	if (write(w->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_warn("msg=\"claim owners: cannot wake the watch thread\" errno=%d", errno);
}

/* Closes every watch but the wake fd (under mu). */
static void owners_watch_disarm(struct owners_watch *w)
{
	for (size_t i = 1; i < w->nfds; i++)
		close(w->fds[i].fd);
	w->nfds = 1;
}

/* Opens a watch on every live owner (under mu): the inotify fd at [1], then pidfds. */
static void owners_watch_arm(struct owners_watch *w)
{
	int in = -1;

	owners_watch_disarm(w);
	for (size_t i = 0; i < owners_count(w->core) && w->nfds < OWNERS_WATCH_FDS; i++) {
		const struct owners_entry *x = owners_at(w->core, i);
		char path[OWNERS_PATH_MAX + 32];
		int fd;

		if (x->gone || x->spec.kind == OWNERS_LEASE)
			continue;
		if (x->spec.kind == OWNERS_PID) {
			fd = (int)syscall(SYS_pidfd_open, x->spec.pid, 0);
			if (fd >= 0)
				w->fds[w->nfds++] = (struct pollfd){.fd = fd, .events = POLLIN};
			continue;
		}
		if (in < 0) {
			in = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
			if (in < 0)
				continue;
			w->fds[w->nfds++] = (struct pollfd){.fd = in, .events = POLLIN};
		}
		snprintf(path, sizeof(path), "%s/cgroup.events", x->spec.cgroup);
		inotify_add_watch(in, path, IN_MODIFY | IN_DELETE_SELF);
	}
}

/* Releases the mounts due now, one at a time without mu; whether the batch was full. */
static bool owners_watch_release(struct owners_watch *w)
{
	struct owners_due due[OWNERS_WATCH_BATCH];
	size_t n;

	pthread_mutex_lock(&w->mu);
	n = owners_take(w->core, clock_wall_ms(clock_real()), due, OWNERS_WATCH_BATCH);
	pthread_mutex_unlock(&w->mu);
	for (size_t i = 0; i < n; i++) {
		struct err ignored;
		char q[OWNERS_REASON_MAX + 64];
		int rc;

		log_info("msg=\"claim owner gone: unmounting and releasing\" volume=%s alloc=%s "
			 "reason=%s",
			 due[i].vol, due[i].alloc, log_q(q, sizeof(q), due[i].reason));
		rc = w->cfg.release(w->cfg.ctx, due[i].vol, due[i].alloc, due[i].reason);
		pthread_mutex_lock(&w->mu);
		owners_done(w->core, due[i].vol, due[i].alloc, rc == 0,
			    clock_wall_ms(clock_real()));
		if (rc == 0)
			owners_watch_sql(w, owners_watch_delete, due[i].vol, due[i].alloc, NULL,
					 &ignored);
		pthread_mutex_unlock(&w->mu);
	}
	return n == OWNERS_WATCH_BATCH;
}

static void *owners_watch_main(void *arg)
{
	struct owners_watch *w = arg;
	int64_t recheck = clock_now_ms(clock_real()) + OWNERS_WATCH_RECHECK_MS;

	for (;;) {
		int64_t now, next, timeout;
		char drain[4096];

		pthread_mutex_lock(&w->mu);
		if (w->stop) {
			pthread_mutex_unlock(&w->mu);
			break;
		}
		owners_watch_arm(w);
		owners_check(w->core, clock_wall_ms(clock_real()));
		pthread_mutex_unlock(&w->mu);
		if (owners_watch_release(w))
			continue;
		pthread_mutex_lock(&w->mu);
		next = owners_next_ms(w->core);
		pthread_mutex_unlock(&w->mu);
		now = clock_wall_ms(clock_real());
		timeout = recheck - clock_now_ms(clock_real());
		if (next != CLOCK_NEVER && next - now < timeout)
			timeout = next - now;
		if (timeout < 0)
			timeout = 0;
		if (poll(w->fds, w->nfds, (int)timeout) < 0 && errno != EINTR)
			log_warn("msg=\"claim owners: poll failed\" errno=%d", errno);
		if (w->fds[0].revents & POLLIN)
			(void)!read(w->wake_fd, drain, sizeof(uint64_t));
		if (clock_now_ms(clock_real()) >= recheck)
			recheck = clock_now_ms(clock_real()) + OWNERS_WATCH_RECHECK_MS;
	}
	pthread_mutex_lock(&w->mu);
	owners_watch_disarm(w);
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int owners_watch_start(const struct owners_watch_config *cfg, struct owners_watch **out,
		       struct err *e)
{
	struct owners_probe probe = {
	    .pid_start = owners_watch_pid_start,
	    .cgroup_populated = owners_watch_cgroup_populated,
	};
	struct owners_watch *w = calloc(1, sizeof(*w));
	int rc = 0;

	*out = NULL;
	if (!w)
		return err_set(e, CSID_ENOMEM, "out of memory");
	w->cfg = *cfg;
	w->cfg.db_path = NULL;
	w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	pthread_mutex_init(&w->mu, NULL);
	if (w->wake_fd < 0) {
		rc = err_errno(e, errno, "claim owners: eventfd");
		goto fail;
	}
	w->fds[0] = (struct pollfd){.fd = w->wake_fd, .events = POLLIN};
	w->nfds = 1;
	if (owners_new(&probe, &w->core)) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto fail;
	}
	if (cfg->db_path &&
	    ((rc = agent_db_open(cfg->db_path, &w->db, e)) ||
	     (rc = agent_db_migrate(
		  w->db, "owners", owners_watch_schema,
		  (int)(sizeof(owners_watch_schema) / sizeof(owners_watch_schema[0])), e)) ||
	     (rc = owners_watch_load(w, e)))) {
		err_wrap(e, "claim owners");
		goto fail;
	}
	if (pthread_create(&w->thread, NULL, owners_watch_main, w) != 0) {
		rc = err_set(e, CSID_ENOMEM, "claim owners: cannot start a thread");
		goto fail;
	}
	w->started = true;
	*out = w;
	return 0;
fail:
	owners_watch_stop(w);
	return rc;
}

void owners_watch_stop(struct owners_watch *w)
{
	if (!w)
		return;
	if (w->started) {
		pthread_mutex_lock(&w->mu);
		w->stop = true;
		pthread_mutex_unlock(&w->mu);
		owners_watch_poke(w);
		pthread_join(w->thread, NULL);
	}
	if (w->wake_fd >= 0)
		close(w->wake_fd);
	agent_db_close(w->db);
	owners_free(w->core);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

int owners_watch_put(struct owners_watch *w, const char *vol, const char *alloc,
		     const struct owners_spec *s, struct err *e)
{
	int rc;

	pthread_mutex_lock(&w->mu);
	rc = owners_put(w->core, vol, alloc, s, e);
	if (rc == 0 && (rc = owners_watch_sql(w, owners_watch_upsert, vol, alloc, s, e)))
		owners_forget(w->core, vol, alloc);
	pthread_mutex_unlock(&w->mu);
	if (rc == 0) {
		log_info("msg=\"claim owner recorded\" volume=%s alloc=%s kind=%s", vol, alloc,
			 owners_kind_name(s->kind));
		owners_watch_poke(w);
	}
	return rc;
}

void owners_watch_forget(struct owners_watch *w, const char *vol, const char *alloc)
{
	struct err ignored;
	bool had;

	pthread_mutex_lock(&w->mu);
	had = owners_forget(w->core, vol, alloc);
	owners_watch_sql(w, owners_watch_delete, vol, alloc, NULL, &ignored);
	pthread_mutex_unlock(&w->mu);
	if (had)
		owners_watch_poke(w);
}

int owners_watch_renew(struct owners_watch *w, const char *vol, const char *alloc, int64_t lease_ms,
		       struct owners_spec *out, struct err *e)
{
	struct owners_spec s;
	int rc;

	pthread_mutex_lock(&w->mu);
	rc = owners_renew(w->core, vol, alloc, lease_ms, clock_wall_ms(clock_real()), &s, e);
	if (rc == 0)
		rc = owners_watch_sql(w, owners_watch_upsert, vol, alloc, &s, e);
	pthread_mutex_unlock(&w->mu);
	if (rc == 0) {
		owners_watch_poke(w);
		if (out)
			*out = s;
	}
	return rc;
}

int owners_watch_list(struct owners_watch *w, struct owners_entry **out, size_t *n)
{
	pthread_mutex_lock(&w->mu);
	*n = owners_count(w->core);
	*out = calloc(*n ? *n : 1, sizeof(**out));
	for (size_t i = 0; *out && i < *n; i++)
		(*out)[i] = *owners_at(w->core, i);
	pthread_mutex_unlock(&w->mu);
	return *out ? 0 : CSID_ENOMEM;
}
