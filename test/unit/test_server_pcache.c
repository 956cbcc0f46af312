/*
 * Unit tests of the node-derived view cache (src/server/server_pcache.c)
 * on a memory store, with a builder that counts the nodes: the view is
 * built once and reused while only volumes change; a node written or
 * deleted makes the next use rebuild it, with the change seen; more
 * changes than a use reads rebuild it too; a damaged node record fails the
 * use (the builder is not trusted with it) and the cache recovers once it
 * is fixed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/server_pcache.h"

static int t_build(void *ctx, struct model_node *const *nodes, size_t n, struct arena *a,
		   void **view, struct err *e)
{
	size_t *count = arena_alloc(a, sizeof(*count));

	(void)ctx;
	(void)nodes;
	if (!count)
		return err_set(e, CSID_ENOMEM, "out of memory");
	*count = n;
	*view = count;
	return 0;
}

static void t_count(void *arg, const void *view)
{
	*(size_t *)arg = *(const size_t *)view;
}

static void t_put(struct store *st, enum store_kind kind, const char *id, const char *value)
{
	struct store_op op = {STORE_OP_PUT, kind, id, value, strlen(value), STORE_ANY};
	struct err e;

	assert_int_equal(store_txn(st, &op, 1, NULL, &e), 0);
}

static void t_node(struct store *st, const char *id)
{
	struct model_node n = {.id = (char *)id};
	char *json = NULL;
	size_t len = 0;
	struct err e;

	assert_int_equal(model_node_encode(&n, &json, &len, &e), 0);
	t_put(st, STORE_NODE, id, json);
	free(json);
}

/* The node count the cache shows now. */
static size_t t_use(struct server_pcache *c)
{
	size_t n = 99;
	struct err e;

	assert_int_equal(server_pcache_use(c, t_count, &n, &e), 0);
	return n;
}

static void test_rebuilt_on_node_changes_only(void **state)
{
	struct server_pcache *c;
	struct store *st;
	struct store_op del = {STORE_OP_DELETE, STORE_NODE, "n1", NULL, 0, STORE_ANY};
	char id[32];
	struct err e;

	(void)state;
	assert_int_equal(store_mem_new(&st, &e), 0);
	c = server_pcache_new(st, t_build, NULL);
	assert_non_null(c);
	assert_int_equal(server_pcache_builds(c), 0);
	assert_int_equal(t_use(c), 0);
	t_node(st, "n1");
	assert_int_equal(t_use(c), 1);
	assert_int_equal(server_pcache_builds(c), 2);
	/* Volume writes leave the view as it is. */
	for (int i = 0; i < 50; i++) {
		snprintf(id, sizeof(id), "v%d", i);
		t_put(st, STORE_VOLUME, id, "{}");
		assert_int_equal(t_use(c), 1);
	}
	assert_int_equal(server_pcache_builds(c), 2);
	/* A node written among other writes, or deleted: rebuilt and seen. */
	t_put(st, STORE_VOLUME, "v0", "{\"x\": 1}");
	t_node(st, "n2");
	t_put(st, STORE_VOLUME, "v1", "{\"x\": 1}");
	assert_int_equal(t_use(c), 2);
	assert_int_equal(server_pcache_builds(c), 3);
	assert_int_equal(store_txn(st, &del, 1, NULL, &e), 0);
	assert_int_equal(t_use(c), 1);
	assert_int_equal(t_use(c), 1);
	assert_int_equal(server_pcache_builds(c), 4);
	/* More changes than a use reads: rebuilt rather than read. */
	for (int i = 0; i < 1100; i++)
		t_put(st, STORE_VOLUME, "v0", i % 2 ? "{}" : "{\"x\": 2}");
	assert_int_equal(t_use(c), 1);
	assert_int_equal(server_pcache_builds(c), 5);
	assert_int_equal(t_use(c), 1);
	assert_int_equal(server_pcache_builds(c), 5);
	server_pcache_free(c);
	store_close(st);
}

/* Marks that it ran (it must not, after a failed rebuild). */
static void t_fail_use(void *arg, const void *view)
{
	(void)view;
	*(int *)arg = 1;
}

static void test_damaged_node(void **state)
{
	struct server_pcache *c;
	struct store *st;
	int used = 0;
	struct err e;

	(void)state;
	assert_int_equal(store_mem_new(&st, &e), 0);
	c = server_pcache_new(st, t_build, NULL);
	assert_non_null(c);
	t_node(st, "n1");
	assert_int_equal(t_use(c), 1);
	t_put(st, STORE_NODE, "n2", "{not json");
	assert_int_not_equal(server_pcache_use(c, t_fail_use, &used, &e), 0);
	assert_int_equal(used, 0);
	assert_non_null(strstr(e.msg, "n2"));
	t_node(st, "n2");
	assert_int_equal(t_use(c), 2);
	server_pcache_free(c);
	store_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_rebuilt_on_node_changes_only),
	    cmocka_unit_test(test_damaged_node),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
