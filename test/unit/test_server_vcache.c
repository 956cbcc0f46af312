/*
 * Unit tests of the decoded volume cache (src/server/server_vcache.c):
 * a version read twice is decoded once and both reads get equal,
 * independent copies with the store's indexes; another modify_index or
 * create_index (a deleted and recreated volume) is decoded afresh; two
 * IDs of one slot replace each other; a damaged record gives the
 * decoder's error and stays out; without a cache every read decodes; a
 * peek shows the version held and no other.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/server_vcache.h"

/* A stored volume record of id with the given name (to tell versions apart). */
static const char *t_record(char *buf, size_t len, const char *id, const char *name)
{
	snprintf(buf, len,
		 "{\"id\": \"%s\", \"name\": \"%s\", \"plugin_id\": \"p1\", \"capabilities\":"
		 " [{\"access_mode\": \"single-node-writer\", \"attachment_mode\": "
		 "\"file-system\"}], \"secrets\": {\"k\": \"v\"}, \"state\": \"ready\"}",
		 id, name);
	return buf;
}

/* Reads id's record text at (create, modify) through c into a fresh arena; the name read. */
static const char *t_read(struct server_vcache *c, struct arena *a, const char *id,
			  const char *text, uint64_t create, uint64_t modify)
{
	struct model_volume *v = NULL;
	struct err e;

	assert_int_equal(server_vcache_decode(c, id, text, strlen(text), create, modify, a, &v, &e),
			 0);
	assert_string_equal(v->id, id);
	assert_int_equal(v->create_index, create);
	assert_int_equal(v->modify_index, modify);
	assert_int_equal(v->secrets.n, 1);
	return v->name;
}

static void test_same_version_from_cache(void **state)
{
	struct server_vcache *c = server_vcache_new();
	struct arena *a = arena_new();
	struct model_volume *v = NULL;
	char r1[512], r2[512];
	struct err e;

	(void)state;
	assert_non_null(c);
	assert_non_null(a);
	t_record(r1, sizeof(r1), "vol-a", "first");
	t_record(r2, sizeof(r2), "vol-a", "second");
	assert_string_equal(t_read(c, a, "vol-a", r1, 3, 7), "first");
	/* Same version: the kept decoding, whatever the text says. */
	assert_string_equal(t_read(c, a, "vol-a", r2, 3, 7), "first");
	/* A copy: changing it leaves the cache as it was. */
	assert_int_equal(server_vcache_decode(c, "vol-a", r1, strlen(r1), 3, 7, a, &v, &e), 0);
	v->name[0] = 'X';
	v->secrets.n = 0;
	assert_string_equal(t_read(c, a, "vol-a", r1, 3, 7), "first");
	/* A newer version, and a recreated volume (other create_index), decode afresh. */
	assert_string_equal(t_read(c, a, "vol-a", r2, 3, 9), "second");
	assert_string_equal(t_read(c, a, "vol-a", r1, 10, 9), "first");
	arena_free(a);
	server_vcache_free(c);
}

/*
 * A version its writer put is read without parsing (the text given is
 * ignored) and without the writer's API-view fields; an older put does
 * not replace a newer version.
 */
static void test_put_by_writer(void **state)
{
	struct server_vcache *c = server_vcache_new();
	struct arena *a = arena_new();
	struct model_volume *v = NULL;
	char r1[512], r2[512];
	struct err e;

	(void)state;
	assert_non_null(c);
	assert_non_null(a);
	t_record(r1, sizeof(r1), "vol-a", "first");
	t_record(r2, sizeof(r2), "vol-a", "written");
	assert_int_equal(server_vcache_decode(c, "vol-a", r1, strlen(r1), 3, 7, a, &v, &e), 0);
	v->name = "written";
	v->plugin_health = "healthy";
	v->schedulable = true;
	v->status.attempts = 4;
	server_vcache_put(c, v, 8, NULL);
	assert_string_equal(t_read(c, a, "vol-a", "not json", 3, 8), "written");
	assert_int_equal(server_vcache_decode(c, "vol-a", "not json", 8, 3, 8, a, &v, &e), 0);
	assert_null(v->plugin_health);
	assert_false(v->schedulable);
	assert_int_equal(v->status.attempts, 0);
	/* A stale writer (version 7 again) leaves version 8 in place. */
	v->modify_index = 6;
	v->name = "stale";
	server_vcache_put(c, v, 7, NULL);
	assert_string_equal(t_read(c, a, "vol-a", "not json", 3, 8), "written");
	server_vcache_put(NULL, v, 9, NULL);
	arena_free(a);
	server_vcache_free(c);
}

/* Where the claims of a volume's history are, as the write that appended to it left them. */
static void test_history_map(void **state)
{
	struct server_vcache *c = server_vcache_new();
	struct arena *a = arena_new();
	struct model_history_map map = {.len = 90, .n = 2, .start = {20, 50}, .end = {40, 88}}, got;
	struct model_volume *v = NULL;
	char r[512], id[32];
	struct err e;

	(void)state;
	assert_non_null(c);
	assert_non_null(a);
	t_record(r, sizeof(r), "vol-h", "h");
	assert_int_equal(server_vcache_decode(c, "vol-h", r, strlen(r), 3, 7, a, &v, &e), 0);
	/* Written with the volume at 8: known at 8 and that length only. */
	server_vcache_put(c, v, 8, &map);
	assert_true(server_vcache_history(c, "vol-h", 8, 90, &got));
	assert_memory_equal(&got, &map, sizeof(map));
	assert_false(server_vcache_history(c, "vol-h", 7, 90, &got));
	assert_false(server_vcache_history(c, "vol-h", 8, 91, &got));
	assert_false(server_vcache_history(c, "vol-x", 8, 90, &got));
	assert_false(server_vcache_history(NULL, "vol-h", 8, 90, &got));
	/* A later write of the volume alone keeps it; an older one with a map does not replace it.
	 */
	server_vcache_put(c, v, 9, NULL);
	assert_true(server_vcache_history(c, "vol-h", 8, 90, &got));
	map.len = 95;
	server_vcache_put(c, v, 8, &map);
	assert_false(server_vcache_history(c, "vol-h", 8, 95, &got));
	/* The volume history written again elsewhere (another index): not known. */
	assert_false(server_vcache_history(c, "vol-h", 12, 90, &got));
	/* Another volume taking the slot drops it. */
	for (int i = 0; i < 600; i++) {
		snprintf(id, sizeof(id), "vol-%d", i);
		t_record(r, sizeof(r), id, id);
		t_read(c, a, id, r, 1, 20);
	}
	assert_false(server_vcache_history(c, "vol-h", 8, 90, &got));
	arena_free(a);
	server_vcache_free(c);
}

/* server_vcache_peek's callback: copies the name it was shown. */
static void t_peek_name(const struct model_volume *v, void *ctx)
{
	snprintf(ctx, 32, "%s", v->name);
}

/* A peek shows the version held (no copy) and nothing else. */
static void test_peek(void **state)
{
	struct server_vcache *c = server_vcache_new();
	struct arena *a = arena_new();
	char r1[512], name[32] = "";

	(void)state;
	assert_non_null(c);
	assert_non_null(a);
	t_record(r1, sizeof(r1), "vol-a", "first");
	assert_false(server_vcache_peek(c, "vol-a", 3, 7, t_peek_name, name));
	assert_string_equal(t_read(c, a, "vol-a", r1, 3, 7), "first");
	assert_true(server_vcache_peek(c, "vol-a", 3, 7, t_peek_name, name));
	assert_string_equal(name, "first");
	/* Another version, another create_index, another ID, no cache: not shown. */
	name[0] = '\0';
	assert_false(server_vcache_peek(c, "vol-a", 3, 8, t_peek_name, name));
	assert_false(server_vcache_peek(c, "vol-a", 4, 7, t_peek_name, name));
	assert_false(server_vcache_peek(c, "vol-b", 3, 7, t_peek_name, name));
	assert_false(server_vcache_peek(NULL, "vol-a", 3, 7, t_peek_name, name));
	assert_string_equal(name, "");
	server_vcache_free(c);
	arena_free(a);
}

static void test_slots_and_errors(void **state)
{
	struct server_vcache *c = server_vcache_new();
	struct arena *a = arena_new();
	struct model_volume *v = NULL;
	char id[32], r[512], other[512];
	struct err e;

	(void)state;
	assert_non_null(c);
	assert_non_null(a);
	/* More IDs than slots: every read still gives its own volume. */
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < 200; i++) {
			snprintf(id, sizeof(id), "vol-%d", i);
			t_record(r, sizeof(r), id, id);
			assert_string_equal(t_read(c, a, id, r, 1, (uint64_t)i + 1), id);
		}
	/* A record that names another ID is decoded but not kept under id. */
	t_record(other, sizeof(other), "vol-b", "b");
	t_read(c, a, "vol-b", other, 1, 2);
	assert_int_equal(server_vcache_decode(c, "vol-c", other, strlen(other), 1, 4, a, &v, &e),
			 0);
	assert_string_equal(v->id, "vol-b");
	t_record(r, sizeof(r), "vol-c", "c");
	assert_string_equal(t_read(c, a, "vol-c", r, 1, 4), "c");
	/* A damaged record: the decoder's error, nothing kept. */
	assert_int_not_equal(server_vcache_decode(c, "vol-d", "{", 1, 1, 5, a, &v, &e), 0);
	t_record(r, sizeof(r), "vol-d", "d");
	assert_string_equal(t_read(c, a, "vol-d", r, 1, 5), "d");
	/* No cache: every read decodes. */
	t_record(other, sizeof(other), "vol-d", "again");
	assert_string_equal(t_read(NULL, a, "vol-d", r, 1, 5), "d");
	assert_string_equal(t_read(NULL, a, "vol-d", other, 1, 5), "again");
	arena_free(a);
	server_vcache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_same_version_from_cache),
	    cmocka_unit_test(test_slots_and_errors),
	    cmocka_unit_test(test_put_by_writer),
	    cmocka_unit_test(test_history_map),
	    cmocka_unit_test(test_peek),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
