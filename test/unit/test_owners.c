/*
 * Unit tests of the claim owners core (src/agent/owners.c) with a
 * scripted probe, in virtual time: a lease lapses exactly at its expiry
 * and a renewal moves it; a pid owner is gone when its process is, or
 * when its pid now belongs to a process with another start time (the
 * recheck after an agent restart); a cgroup owner when it is empty or
 * removed; a probe that cannot tell keeps the owner; a failed release is
 * due again after a doubling backoff; bad specs, leases out of range
 * and hostile cgroup paths are refused; the cgroup.events parser.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/owners.h"

#define T0 1700000000000LL

/* The scripted system: a process (and a second one), and one cgroup. */
struct fake_sys {
	int pid, pid2;
	uint64_t start, start2;
	int pid_rc; /* answer for pid (0: live with start) */
	const char *cgroup;
	int cg_rc;
	bool populated;
};

static int fake_pid_start(void *ctx, int pid, uint64_t *start)
{
	struct fake_sys *f = ctx;

	if (pid && pid == f->pid2) {
		*start = f->start2;
		return 0;
	}
	if (pid != f->pid)
		return CSID_ENOTFOUND;
	*start = f->start;
	return f->pid_rc;
}

static int fake_cgroup(void *ctx, const char *path, bool *populated)
{
	struct fake_sys *f = ctx;

	if (!f->cgroup || strcmp(path, f->cgroup) != 0)
		return CSID_ENOTFOUND;
	*populated = f->populated;
	return f->cg_rc;
}

struct t_env {
	struct fake_sys sys;
	struct owners *o;
};

static int t_setup(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));
	struct owners_probe p = {.pid_start = fake_pid_start, .cgroup_populated = fake_cgroup};

	if (!t)
		return -1;
	p.ctx = &t->sys;
	*state = t;
	return owners_new(&p, &t->o);
}

static int t_teardown(void **state)
{
	struct t_env *t = *state;

	owners_free(t->o);
	free(t);
	return 0;
}

static struct owners_spec t_lease(int64_t ms, int64_t now)
{
	struct owners_spec s = {.kind = OWNERS_LEASE, .lease_ms = ms, .expires_ms = now + ms};

	return s;
}

static struct owners_spec t_pid(int pid, uint64_t start)
{
	struct owners_spec s = {.kind = OWNERS_PID, .pid = pid, .start_time = start};

	return s;
}

static struct owners_spec t_cgroup(const char *path)
{
	struct owners_spec s = {.kind = OWNERS_CGROUP};

	snprintf(s.cgroup, sizeof(s.cgroup), "%s", path);
	return s;
}

static void test_lease_lapses_and_renews(void **state)
{
	struct t_env *t = *state;
	struct owners_spec s = t_lease(30000, T0), got;
	struct owners_due due[4];
	struct err e;

	assert_int_equal(owners_put(t->o, "data", "web-1", &s, &e), 0);
	assert_int_equal(owners_next_ms(t->o), T0 + 30000);
	assert_int_equal(owners_take(t->o, T0 + 29999, due, 4), 0);

	/* A renewal at +20 s for the same duration moves the expiry to +50 s. */
	assert_int_equal(owners_renew(t->o, "data", "web-1", 0, T0 + 20000, &got, &e), 0);
	assert_int_equal(got.expires_ms, T0 + 50000);
	assert_int_equal(owners_next_ms(t->o), T0 + 50000);
	assert_int_equal(owners_check(t->o, T0 + 49999), 0);
	assert_int_equal(owners_take(t->o, T0 + 49999, due, 4), 0);
	/* A renewal may change the duration, within range only. */
	assert_int_equal(owners_renew(t->o, "data", "web-1", 0, T0 + 40000, NULL, &e), 0);
	assert_int_equal(owners_renew(t->o, "data", "web-1", 999, T0 + 40000, NULL, &e),
			 CSID_EINVAL);
	assert_non_null(strstr(e.msg, "from 1s to 24h"));
	assert_int_equal(owners_renew(t->o, "data", "web-1", 5000, T0 + 40000, &got, &e), 0);
	assert_int_equal(got.expires_ms, T0 + 45000);

	/* It lapses exactly at its expiry: due once, with the reason. */
	assert_int_equal(owners_take(t->o, T0 + 45000, due, 4), 1);
	assert_string_equal(due[0].vol, "data");
	assert_string_equal(due[0].alloc, "web-1");
	assert_string_equal(due[0].reason, "lease of 5000 ms expired");
	assert_int_equal(owners_take(t->o, T0 + 45000, due, 4), 0);
	/* A lapsed lease cannot be renewed: the release is under way. */
	assert_int_equal(owners_renew(t->o, "data", "web-1", 0, T0 + 45001, NULL, &e),
			 CSID_EPRECOND);
	assert_non_null(strstr(e.msg, "expired"));
	owners_done(t->o, "data", "web-1", true, T0 + 45001);
	assert_int_equal(owners_count(t->o), 0);
	assert_int_equal(owners_next_ms(t->o), CLOCK_NEVER);
	assert_int_equal(owners_renew(t->o, "data", "web-1", 0, T0 + 45001, NULL, &e),
			 CSID_ENOTFOUND);
}

static void test_renew_other_kinds_refused(void **state)
{
	struct t_env *t = *state;
	struct owners_spec s = t_pid(42, 7);
	struct err e;

	t->sys.pid = 42;
	t->sys.start = 7;
	assert_int_equal(owners_put(t->o, "data", "web-1", &s, &e), 0);
	assert_int_equal(owners_renew(t->o, "data", "web-1", 0, T0, NULL, &e), CSID_EPRECOND);
	assert_non_null(strstr(e.msg, "is a pid, not a lease"));
}

static void test_pid_exits(void **state)
{
	struct t_env *t = *state;
	struct owners_spec s = t_pid(1234, 555);
	struct owners_due due[2];
	struct err e;

	t->sys.pid = 1234;
	t->sys.start = 555;
	assert_int_equal(owners_put(t->o, "data", "web-1", &s, &e), 0);
	assert_int_equal(owners_check(t->o, T0), 0);
	assert_int_equal(owners_next_ms(t->o), CLOCK_NEVER);
	/* A probe that cannot tell keeps the owner. */
	t->sys.pid_rc = CSID_EIO;
	assert_int_equal(owners_check(t->o, T0), 0);
	t->sys.pid_rc = CSID_ENOTFOUND;
	assert_int_equal(owners_check(t->o, T0 + 1), 1);
	assert_int_equal(owners_check(t->o, T0 + 2), 0);
	assert_int_equal(owners_take(t->o, T0 + 2, due, 2), 1);
	assert_string_equal(due[0].reason, "owner pid 1234 exited");
	/* Busy: a new owner for the same mount waits for the release. */
	assert_int_equal(owners_put(t->o, "data", "web-1", &s, &e), CSID_ECONFLICT);
	owners_done(t->o, "data", "web-1", true, T0 + 3);
	assert_int_equal(owners_count(t->o), 0);
}

/*
 * After an agent restart the recorded owners are checked again: the pid
 * exists, but with another start time (the kernel reused it), so the
 * owner is gone.
 */
static void test_restart_recheck_reused_pid(void **state)
{
	struct t_env *t = *state;
	struct owners_spec reused = t_pid(4321, 1000), live = t_pid(77, 9);
	struct owners_spec lapsed = t_lease(60000, T0 - 120000);
	struct owners_due due[4];
	struct err e;

	/* Recorded with start 1000; the kernel gave pid 4321 to a process started at 2000. */
	t->sys.pid = 4321;
	t->sys.start = 2000;
	t->sys.pid2 = 77;
	t->sys.start2 = 9;
	assert_int_equal(owners_put(t->o, "v1", "a1", &reused, &e), 0);
	assert_int_equal(owners_put(t->o, "v2", "a2", &lapsed, &e), 0);
	assert_int_equal(owners_put(t->o, "v3", "a3", &live, &e), 0);
	assert_int_equal(owners_check(t->o, T0), 2);
	assert_int_equal(owners_take(t->o, T0, due, 4), 2);
	assert_string_equal(due[0].vol, "v1");
	assert_string_equal(due[0].reason,
			    "owner pid 4321 exited (the pid is another process's now)");
	assert_string_equal(due[1].vol, "v2");
	assert_string_equal(due[1].reason, "lease of 60000 ms expired");
	/* The live one stays live. */
	assert_int_equal(owners_check(t->o, T0 + 1), 0);
	assert_int_equal(owners_take(t->o, T0 + 1, due, 4), 0);
	t->sys.pid2 = 0;
	assert_int_equal(owners_check(t->o, T0 + 2), 1);
	assert_int_equal(owners_take(t->o, T0 + 2, due, 4), 1);
	assert_string_equal(due[0].vol, "v3");
	assert_string_equal(due[0].reason, "owner pid 77 exited");
}

static void test_cgroup_empty_or_removed(void **state)
{
	struct t_env *t = *state;
	struct owners_spec a = t_cgroup("/sys/fs/cgroup/unified/job-1");
	struct owners_spec b = t_cgroup("/sys/fs/cgroup/unified/job-2");
	struct owners_due due[2];
	struct err e;

	t->sys.cgroup = "/sys/fs/cgroup/unified/job-1";
	t->sys.populated = true;
	assert_int_equal(owners_put(t->o, "v1", "a1", &a, &e), 0);
	assert_int_equal(owners_check(t->o, T0), 0);
	t->sys.populated = false;
	assert_int_equal(owners_check(t->o, T0), 1);
	assert_int_equal(owners_take(t->o, T0, due, 2), 1);
	assert_string_equal(due[0].reason, "owner cgroup /sys/fs/cgroup/unified/job-1 is empty");
	owners_done(t->o, "v1", "a1", true, T0);

	assert_int_equal(owners_put(t->o, "v2", "a2", &b, &e), 0);
	assert_int_equal(owners_check(t->o, T0), 1);
	assert_int_equal(owners_take(t->o, T0, due, 2), 1);
	assert_string_equal(due[0].reason, "owner cgroup /sys/fs/cgroup/unified/job-2 was removed");
}

static void test_failed_release_backs_off(void **state)
{
	struct t_env *t = *state;
	struct owners_spec s = t_lease(1000, T0);
	struct owners_due due[2];
	int64_t now = T0 + 1000, expect[] = {1000, 2000, 4000, 8000, 16000, 30000, 30000};
	struct err e;

	assert_int_equal(owners_put(t->o, "data", "web-1", &s, &e), 0);
	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
		assert_int_equal(owners_take(t->o, now, due, 2), 1);
		/* Busy: nothing is due while the release runs. */
		assert_int_equal(owners_next_ms(t->o), CLOCK_NEVER);
		owners_done(t->o, "data", "web-1", false, now);
		assert_int_equal(owners_next_ms(t->o), now + expect[i]);
		assert_int_equal(owners_take(t->o, now + expect[i] - 1, due, 2), 0);
		now += expect[i];
	}
	/* An unmount meanwhile forgets it; a late done is ignored. */
	assert_int_equal(owners_take(t->o, now, due, 2), 1);
	assert_true(owners_forget(t->o, "data", "web-1"));
	owners_done(t->o, "data", "web-1", false, now);
	assert_int_equal(owners_count(t->o), 0);
	assert_false(owners_forget(t->o, "data", "web-1"));
}

static void test_put_replaces(void **state)
{
	struct t_env *t = *state;
	struct owners_spec s = t_lease(1000, T0), longer = t_lease(60000, T0 + 2000);
	struct owners_due due[2];
	struct err e;

	assert_int_equal(owners_put(t->o, "data", "web-1", &s, &e), 0);
	assert_int_equal(owners_check(t->o, T0 + 1500), 1);
	/* A new owner for a gone (not busy) mount makes it live again. */
	assert_int_equal(owners_put(t->o, "data", "web-1", &longer, &e), 0);
	assert_int_equal(owners_count(t->o), 1);
	assert_false(owners_at(t->o, 0)->gone);
	assert_int_equal(owners_take(t->o, T0 + 2000, due, 2), 0);
	assert_int_equal(owners_next_ms(t->o), T0 + 62000);
	assert_null(owners_at(t->o, 1));
}

static void test_bad_specs(void **state)
{
	struct t_env *t = *state;
	struct owners_spec s = t_lease(0, T0);
	struct err e;
	static const char *const hostile[] = {
	    "relative/path",
	    "/sys/fs/cgroup/unified/../../etc",
	    "/sys/fs/cgroup/unified/./x",
	    "/sys/fs/cgroup/unified//x",
	    "/sys/fs/cgroup/unified/x/",
	    "/sys/fs/cgroup/unified/x y",
	    "/sys/fs/cgroup/unified/x\ny",
	    "/sys/fs/cgroup/unified/$(reboot)",
	    "/sys/fs/cgroup/unified/..",
	    "",
	};
	char longp[OWNERS_PATH_MAX + 8];

	assert_int_equal(owners_put(t->o, "data", "web-1", &s, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "from 1s to 24h"));
	s = t_lease(10LL * 365 * 24 * 3600 * 1000, T0);
	assert_int_equal(owners_put(t->o, "data", "web-1", &s, &e), CSID_EINVAL);
	s = t_lease(-5, T0);
	assert_int_equal(owners_put(t->o, "data", "web-1", &s, &e), CSID_EINVAL);
	assert_int_equal(owners_lease_check(OWNERS_LEASE_MIN_MS, &e), 0);
	assert_int_equal(owners_lease_check(OWNERS_LEASE_MAX_MS, &e), 0);
	assert_int_equal(owners_lease_check(OWNERS_LEASE_MAX_MS + 1, &e), CSID_EINVAL);
	s = t_pid(0, 1);
	assert_int_equal(owners_put(t->o, "data", "web-1", &s, &e), CSID_EINVAL);
	s.kind = 0;
	assert_int_equal(owners_put(t->o, "data", "web-1", &s, &e), CSID_EINVAL);
	for (size_t i = 0; i < sizeof(hostile) / sizeof(hostile[0]); i++) {
		s = t_cgroup(hostile[i]);
		assert_int_equal(owners_put(t->o, "data", "web-1", &s, &e), CSID_EINVAL);
		assert_null(strchr(e.msg, '\n'));
	}
	memset(longp, 'a', sizeof(longp) - 1);
	longp[0] = '/';
	longp[sizeof(longp) - 1] = '\0';
	assert_int_equal(owners_cgroup_path_check(longp, &e), CSID_EINVAL);
	assert_int_equal(
	    owners_cgroup_path_check("/sys/fs/cgroup/system.slice/a@b\\x2dc.scope", &e), 0);
	assert_int_equal(owners_count(t->o), 0);
}

static void test_events_parse(void **state)
{
	static const char on[] = "populated 1\nfrozen 0\n";
	static const char off[] = "frozen 0\npopulated 0";
	bool p = false;

	(void)state;
	assert_int_equal(owners_events_parse(on, sizeof(on) - 1, &p), 0);
	assert_true(p);
	assert_int_equal(owners_events_parse(off, sizeof(off) - 1, &p), 0);
	assert_false(p);
	assert_int_equal(owners_events_parse("populated 2\n", 12, &p), CSID_EINVAL);
	assert_int_equal(owners_events_parse("populated 10\n", 13, &p), CSID_EINVAL);
	assert_int_equal(owners_events_parse("", 0, &p), CSID_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_lease_lapses_and_renews, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_renew_other_kinds_refused, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_pid_exits, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_restart_recheck_reused_pid, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_cgroup_empty_or_removed, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_failed_release_backs_off, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_put_replaces, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_bad_specs, t_setup, t_teardown),
	    cmocka_unit_test(test_events_parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
