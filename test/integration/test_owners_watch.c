/*
 * Integration tests of the claim owners' shell (src/agent/owners_watch.c)
 * on the real system, without an agent: a child process is the owner;
 * its exit is seen through the pidfd and the release callback runs once
 * with the reason; a failing release is retried; owners recorded in a
 * database file survive a stop and start of the watch, an owner that
 * exited meanwhile is released at start and a live one stays watched;
 * the mount-time checks refuse a pid that does not exist and cgroup
 * paths that are not live cgroup v2 directories (a plain directory, a
 * symbolic link, the path of a file). Waits poll with a deadline.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/owners_watch.h"
#include "agent_proc.h"
#include "child_proc.h"
#include "proc_guard.h"

#define T_WAIT_MS 20000

struct t_env {
	char dir[64];
	char db[96];
	pthread_mutex_t mu;
	int calls;
	int fail; /* releases to fail before one succeeds */
	char last[OWNERS_REASON_MAX];
	char last_alloc[MOUNT_NAME_MAX + 1];
	pid_t kids[2];
};

static int t_release(void *ctx, const char *vol, const char *alloc, const char *reason)
{
	struct t_env *t = ctx;
	int rc = 0;

	(void)vol;
	pthread_mutex_lock(&t->mu);
	t->calls++;
	snprintf(t->last, sizeof(t->last), "%s", reason);
	snprintf(t->last_alloc, sizeof(t->last_alloc), "%s", alloc);
	if (t->fail > 0) {
		t->fail--;
		rc = CSID_EIO;
	}
	pthread_mutex_unlock(&t->mu);
	return rc;
}

static int t_calls(struct t_env *t)
{
	int n;

	pthread_mutex_lock(&t->mu);
	n = t->calls;
	pthread_mutex_unlock(&t->mu);
	return n;
}

struct t_want {
	struct t_env *t;
	int n;
};

static bool t_enough(void *ctx)
{
	struct t_want *w = ctx;

	return t_calls(w->t) >= w->n;
}

/* Polls until the callback ran at least n times; whether it did. */
static bool t_wait_calls(struct t_env *t, int n)
{
	struct t_want w = {t, n};

	return agent_proc_poll(t_enough, &w, T_WAIT_MS);
}

static int t_setup(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));

	*state = t;
	if (!t)
		return -1;
	snprintf(t->dir, sizeof(t->dir), "/tmp/cow-XXXXXX");
	if (!mkdtemp(t->dir))
		return -1;
	proc_guard_track_dir(t->dir);
	snprintf(t->db, sizeof(t->db), "%s/agent.db", t->dir);
	pthread_mutex_init(&t->mu, NULL);
	return 0;
}

/* Starts kid i, an idle child. */
static pid_t t_kid(struct t_env *t, int i)
{
	t->kids[i] = child_proc_idle();
	assert_true(t->kids[i] > 0);
	return t->kids[i];
}

static int t_teardown(void **state)
{
	struct t_env *t = *state;

	child_proc_kill(&t->kids[0]);
	child_proc_kill(&t->kids[1]);
	proc_guard_clear_dir(t->dir);
	proc_guard_untrack_dir(t->dir);
	pthread_mutex_destroy(&t->mu);
	free(t);
	return 0;
}

static struct owners_watch *t_start(struct t_env *t)
{
	struct owners_watch_config cfg = {.db_path = t->db, .release = t_release, .ctx = t};
	struct owners_watch *w = NULL;
	struct err e;

	err_clear(&e);
	if (owners_watch_start(&cfg, &w, &e))
		fail_msg("start: %s", e.msg);
	return w;
}

static void t_put_pid(struct owners_watch *w, const char *alloc, pid_t pid)
{
	struct owners_spec s = {.kind = OWNERS_PID, .pid = (int)pid};
	struct err e;

	assert_int_equal(owners_watch_pid_check(s.pid, &s.start_time, &e), 0);
	assert_true(s.start_time > 0);
	assert_int_equal(owners_watch_put(w, "data", alloc, &s, &e), 0);
}

static void test_pid_exit_released_once(void **state)
{
	struct t_env *t = *state;
	struct owners_watch *w = t_start(t);
	char want[64];
	pid_t pid = t_kid(t, 0);
	struct owners_entry *v = NULL;
	size_t n = 0;

	t->fail = 1;
	t_put_pid(w, "web-1", pid);
	assert_int_equal(t_calls(t), 0);
	child_proc_kill(&t->kids[0]);
	/* The first release fails: it is tried again after the backoff (1 s). */
	assert_true(t_wait_calls(t, 2));
	snprintf(want, sizeof(want), "owner pid %d exited", (int)pid);
	pthread_mutex_lock(&t->mu);
	assert_string_equal(t->last, want);
	pthread_mutex_unlock(&t->mu);
	assert_int_equal(owners_watch_list(w, &v, &n), 0);
	free(v);
	assert_int_equal(n, 0);
	owners_watch_stop(w);
	assert_int_equal(t_calls(t), 2);
}

static void test_restart_recheck(void **state)
{
	struct t_env *t = *state;
	struct owners_watch *w = t_start(t);
	struct owners_spec lease = {.kind = OWNERS_LEASE, .lease_ms = 60000};
	struct owners_entry *v = NULL;
	char want[64];
	pid_t p1 = t_kid(t, 0);
	size_t n = 0;
	struct err e;

	t_put_pid(w, "web-1", p1);
	t_put_pid(w, "web-2", t_kid(t, 1));
	lease.expires_ms = INT64_MAX / 2;
	assert_int_equal(owners_watch_put(w, "data", "web-3", &lease, &e), 0);
	assert_int_equal(owners_watch_renew(w, "data", "web-3", 30000, &lease, &e), 0);
	assert_int_equal(lease.lease_ms, 30000);
	owners_watch_stop(w);

	/* web-1's owner exits while nobody watches: released at start. */
	child_proc_kill(&t->kids[0]);
	w = t_start(t);
	assert_true(t_wait_calls(t, 1));
	snprintf(want, sizeof(want), "owner pid %d exited", (int)p1);
	pthread_mutex_lock(&t->mu);
	assert_string_equal(t->last, want);
	assert_string_equal(t->last_alloc, "web-1");
	pthread_mutex_unlock(&t->mu);
	/* web-2 and the lease were loaded and stay; web-2's exit releases it. */
	assert_int_equal(owners_watch_list(w, &v, &n), 0);
	assert_int_equal(n, 2);
	for (size_t i = 0; i < n; i++)
		if (v[i].spec.kind == OWNERS_LEASE)
			assert_int_equal(v[i].spec.lease_ms, 30000);
	free(v);
	child_proc_kill(&t->kids[1]);
	assert_true(t_wait_calls(t, 2));
	pthread_mutex_lock(&t->mu);
	assert_string_equal(t->last_alloc, "web-2");
	pthread_mutex_unlock(&t->mu);
	/* Forgotten (an unmount): nothing left but the lease. */
	owners_watch_forget(w, "data", "web-3");
	assert_int_equal(owners_watch_list(w, &v, &n), 0);
	free(v);
	assert_int_equal(n, 0);
	owners_watch_stop(w);
	assert_int_equal(t_calls(t), 2);
}

static void test_mount_time_checks(void **state)
{
	struct t_env *t = *state;
	char plain[96], link[96], file[96];
	uint64_t start = 0;
	pid_t gone = 0;
	struct err e;
	FILE *f;

	gone = child_proc_gone();
	assert_true(gone > 0);
	assert_int_equal(owners_watch_pid_check((int)gone, &start, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "no such process"));
	assert_int_equal(owners_watch_pid_check(-1, &start, &e), CSID_EINVAL);
	assert_int_equal(owners_watch_pid_check((int)getpid(), &start, &e), 0);

	snprintf(plain, sizeof(plain), "%s/plain", t->dir);
	snprintf(link, sizeof(link), "%s/link", t->dir);
	snprintf(file, sizeof(file), "%s/file", t->dir);
	assert_int_equal(mkdir(plain, 0755), 0);
	assert_int_equal(symlink("/sys/fs/cgroup", link), 0);
	f = fopen(file, "w");
	assert_non_null(f);
	fclose(f);
	assert_int_equal(owners_watch_cgroup_check(plain, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "not a cgroup v2 directory"));
	assert_int_equal(owners_watch_cgroup_check(link, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "symbolic link"));
	assert_int_equal(owners_watch_cgroup_check(file, &e), CSID_EINVAL);
	assert_int_equal(owners_watch_cgroup_check("/nonexistent-cgroup-x", &e), CSID_EINVAL);
	assert_int_equal(owners_watch_cgroup_check("/tmp/../etc", &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "must be normal"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_pid_exit_released_once, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_restart_recheck, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_mount_time_checks, t_setup, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
