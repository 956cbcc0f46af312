/*
 * Unit tests of the agent's held allocations (src/agent/held_allocs.c):
 * no report before a mounter is attached; claim flows counted per pair
 * and reported until their last end; the mounter's records merged in,
 * sorted and each pair once; only the attach tells on_change; a released
 * allocation passed on only when no flow of it runs and none began since
 * the report. On the mounter test fixture (fake node plugin and mount
 * table).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent/held_allocs.h"
#include "mounter_test.h"

static int t_changes;

static void t_on_change(void *ctx)
{
	(void)ctx;
	t_changes++;
}

/* The report as "vol/alloc vol/alloc ..." in buf; "-" when there is none. */
static const char *t_report(struct held_allocs *h, char *buf, size_t len)
{
	struct arena *a = arena_new();
	struct model_node_alloc *v = NULL;
	size_t n = 0, used = 0;
	bool ready = true;
	struct err e;

	assert_non_null(a);
	assert_int_equal(held_allocs_list(h, a, &ready, &v, &n, &e), 0);
	buf[0] = '\0';
	if (!ready)
		snprintf(buf, len, "-");
	for (size_t i = 0; ready && i < n; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s/%s", i ? " " : "",
					 v[i].volume_id, v[i].alloc_id);
	arena_free(a);
	return buf;
}

static void test_flows_and_records(void **state)
{
	struct mt_env *env = *state;
	struct held_allocs *h = NULL;
	struct mounter_request req;
	struct mounter_result res;
	char buf[512];
	struct err e;

	t_changes = 0;
	assert_int_equal(held_allocs_new(t_on_change, NULL, &h, &e), 0);
	/* Before the mounter is attached: no report at all, not an empty one. */
	assert_int_equal(held_allocs_begin(h, "v2", "web-9", &e), 0);
	assert_string_equal(t_report(h, buf, sizeof(buf)), "-");
	held_allocs_attach(h, env->m);
	assert_string_equal(t_report(h, buf, sizeof(buf)), "v2/web-9");

	/* Two flows of one pair: reported until both end. */
	assert_int_equal(held_allocs_begin(h, "vol-1", "a", &e), 0);
	assert_int_equal(held_allocs_begin(h, "vol-1", "a", &e), 0);
	held_allocs_end(h, "vol-1", "a");
	assert_string_equal(t_report(h, buf, sizeof(buf)), "v2/web-9 vol-1/a");

	/* A mount record of the same pair is listed once; another one too, sorted. */
	mt_request(&req, "vol-1", "a");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	mt_request(&req, "vol-1", "0-b");
	assert_int_equal(mounter_mount(env->m, &env->plugin, &req, &res, &e), 0);
	assert_string_equal(t_report(h, buf, sizeof(buf)), "v2/web-9 vol-1/0-b vol-1/a");
	held_allocs_end(h, "vol-1", "a");
	held_allocs_end(h, "v2", "web-9");
	/* An end without a begin changes nothing. */
	held_allocs_end(h, "v2", "web-9");
	assert_string_equal(t_report(h, buf, sizeof(buf)), "vol-1/0-b vol-1/a");

	/* Unmounted: gone from the report. */
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol-1", "a", &e), 0);
	assert_int_equal(mounter_unmount(env->m, &env->plugin, "vol-1", "0-b", &e), 0);
	assert_string_equal(t_report(h, buf, sizeof(buf)), "");
	/* The attach only: the flows and the mounter's changes ride the next heartbeat. */
	assert_int_equal(t_changes, 1);
	held_allocs_free(h);
	/* NULL is a no-op everywhere a caller without servers passes it. */
	assert_int_equal(held_allocs_begin(NULL, "v", "a", &e), 0);
	held_allocs_end(NULL, "v", "a");
	held_allocs_attach(NULL, env->m);
	held_allocs_free(NULL);
}

static char t_released[256];

static void t_on_released(void *ctx, uint64_t seq, const char *volume_id, const char *alloc_id,
			  const char *note)
{
	(void)seq;
	size_t len = strlen(t_released);

	assert_ptr_equal(ctx, &t_released);
	snprintf(t_released + len, sizeof(t_released) - len, "%s/%s:%s ", volume_id, alloc_id,
		 note);
}

static void test_released(void **state)
{
	struct held_allocs *h = NULL;
	uint64_t seq;
	struct err e;

	(void)state;
	assert_int_equal(held_allocs_new(NULL, NULL, &h, &e), 0);
	seq = held_allocs_seq(h);
	/* Nobody to tell yet. */
	assert_false(held_allocs_released(h, seq, "v", "a1", "gone"));
	held_allocs_on_released(h, t_on_released, &t_released);
	t_released[0] = '\0';
	assert_true(held_allocs_released(h, seq, "v", "a1", "gone"));
	assert_string_equal(t_released, "v/a1:gone ");

	/* In flight: a flow of the pair runs; another pair still passes (no begin since). */
	assert_int_equal(held_allocs_begin(h, "v", "a2", &e), 0);
	seq = held_allocs_seq(h);
	assert_false(held_allocs_released(h, seq, "v", "a2", "no claim"));
	assert_true(held_allocs_released(h, seq, "v", "a1", "gone"));

	/* A flow that began (and even ended) after the report: stale for its pair only. */
	assert_int_equal(held_allocs_begin(h, "w", "a3", &e), 0);
	held_allocs_end(h, "w", "a3");
	assert_true(held_allocs_released(h, seq, "v", "a1", "gone"));
	assert_false(held_allocs_released(h, seq, "w", "a3", "gone"));
	/* The flow of v/a2 ran when the report was built and ended since: still stale. */
	held_allocs_end(h, "v", "a2");
	assert_false(held_allocs_released(h, seq, "v", "a2", "no claim"));
	seq = held_allocs_seq(h);
	assert_true(held_allocs_released(h, seq, "v", "a2", "freed"));
	assert_string_equal(t_released, "v/a1:gone v/a1:gone v/a1:gone v/a2:freed ");

	/* Cleared: never called again. */
	held_allocs_on_released(h, NULL, NULL);
	assert_false(held_allocs_released(h, seq, "v", "a1", "gone"));
	held_allocs_free(h);

	assert_int_equal(held_allocs_seq(NULL), 0);
	assert_false(held_allocs_released(NULL, 0, "v", "a1", "gone"));
	held_allocs_on_released(NULL, t_on_released, NULL);
}

/*
 * The race seen under load: the report is built while the claim flow
 * runs (its claim not yet at the server, which answers "no claim"); the
 * flow claims, mounts and ends before the answer comes back. The answer
 * must not release the fresh mount; the stamps go once answered.
 */
static void test_released_flow_ended_since_report(void **state)
{
	struct held_allocs *h = NULL;
	uint64_t seq, later;
	struct err e;

	(void)state;
	assert_int_equal(held_allocs_new(NULL, NULL, &h, &e), 0);
	held_allocs_on_released(h, t_on_released, &t_released);
	t_released[0] = '\0';
	assert_int_equal(held_allocs_begin(h, "v", "a1", &e), 0);
	seq = held_allocs_seq(h);
	held_allocs_end(h, "v", "a1");
	assert_false(held_allocs_settled(h, seq, "v", "a1"));
	assert_false(held_allocs_released(h, seq, "v", "a1", "no claim of allocation a1"));
	assert_string_equal(t_released, "");

	/* An answer to a report built after the end counts; the answer to it drops the stamp. */
	later = held_allocs_seq(h);
	held_allocs_answered(h, seq);
	assert_false(held_allocs_released(h, seq, "v", "a1", "no claim"));
	held_allocs_answered(h, later);
	assert_true(held_allocs_settled(h, later, "v", "a1"));
	/* Forgotten: a check at an older generation cannot tell any more. */
	assert_false(held_allocs_settled(h, seq, "v", "a1"));
	assert_true(held_allocs_released(h, later, "v", "a1", "freed"));
	assert_string_equal(t_released, "v/a1:freed ");

	/* A flow after the answer: its pair is stamped again. */
	assert_int_equal(held_allocs_begin(h, "v", "a1", &e), 0);
	held_allocs_end(h, "v", "a1");
	assert_false(held_allocs_settled(h, later, "v", "a1"));
	assert_false(held_allocs_settled(NULL, 0, "v", "a1"));
	held_allocs_answered(NULL, 0);
	held_allocs_free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_flows_and_records, mt_setup, mt_teardown),
	    cmocka_unit_test(test_released),
	    cmocka_unit_test(test_released_flow_ended_since_report),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
