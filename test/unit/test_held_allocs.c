/*
 * Unit tests of the agent's held allocations (src/agent/held_allocs.c):
 * no report before a mounter is attached; claim flows counted per pair
 * and reported until their last end; the mounter's records merged in,
 * sorted and each pair once; every change tells on_change. On the
 * mounter test fixture (fake node plugin and mount table).
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
	held_allocs_changed(h);
	assert_string_equal(t_report(h, buf, sizeof(buf)), "");
	/* attach, 3 begins, 4 ends (the one without a begin too) and one changed. */
	assert_int_equal(t_changes, 9);
	held_allocs_free(h);
	/* NULL is a no-op everywhere a caller without servers passes it. */
	assert_int_equal(held_allocs_begin(NULL, "v", "a", &e), 0);
	held_allocs_end(NULL, "v", "a");
	held_allocs_changed(NULL);
	held_allocs_attach(NULL, env->m);
	held_allocs_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_flows_and_records, mt_setup, mt_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
