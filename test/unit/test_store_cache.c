/*
 * The etcd store's read cache (src/store/store_cache.h): a change applies
 * only when newer than what the entry knows, so an older read or a
 * replayed event cannot roll an entry back; tombstones answer "not found";
 * forgetting and emptying send the next get to etcd (a miss); many
 * entries grow the table without losing any.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_cache.h"

/* A change of volume id at index: a PUT of value, or (value NULL) a DELETE. */
static void tc_apply(struct store_cache *c, const char *id, const char *value, uint64_t index)
{
	struct store_change ch = {
	    .index = index,
	    .type = value ? STORE_OP_PUT : STORE_OP_DELETE,
	    .obj = {STORE_VOLUME, (char *)id, (char *)value, value ? strlen(value) : 0, 1, index}};

	store_cache_apply(c, &ch);
}

/* Asserts the cached state of volume id: value at index, NULL: known missing. */
static void tc_expect(struct store_cache *c, const char *id, const char *value, uint64_t index)
{
	struct store_obj o = {0};
	struct err e;
	int rc = store_cache_get(c, STORE_VOLUME, id, &o, &e);

	if (value == NULL) {
		assert_int_equal(rc, CSID_ENOTFOUND);
		assert_non_null(strstr(e.msg, id));
		return;
	}
	assert_int_equal(rc, 0);
	assert_string_equal(o.value, value);
	assert_int_equal(o.modify_index, index);
	store_obj_free(&o);
}

static void tc_expect_miss(struct store_cache *c, enum store_kind kind, const char *id)
{
	struct store_obj o = {0};
	struct err e;

	assert_int_equal(store_cache_get(c, kind, id, &o, &e), 1);
}

/* Newer wins, whichever way it came; the same revision twice changes nothing. */
static void test_cache_revision_order(void **state)
{
	struct store_cache *c = store_cache_new(STORE_CACHE_BYTES);
	struct store_obj read = {STORE_VOLUME, "v", "from-read", 9, 1, 5};

	assert_non_null(c);
	tc_expect_miss(c, STORE_VOLUME, "v");
	tc_apply(c, "v", "one", 5);
	tc_expect(c, "v", "one", 5);
	/* A read answered at revision 4 came back late: older, ignored. */
	store_cache_fill(c, STORE_VOLUME, "v", &read, 4);
	tc_expect(c, "v", "one", 5);
	tc_apply(c, "v", "two", 7);
	/* The watch resumed and replays revision 5: ignored. */
	tc_apply(c, "v", "one", 5);
	tc_expect(c, "v", "two", 7);
	/* A read at revision 9 saw it unchanged since 7. */
	read.modify_index = 7;
	read.value = "two";
	read.len = 3;
	store_cache_fill(c, STORE_VOLUME, "v", &read, 9);
	tc_expect(c, "v", "two", 7);
	/* An event at 8 is older than what the read knew (9): ignored. */
	tc_apply(c, "v", "stale", 8);
	tc_expect(c, "v", "two", 7);
	tc_apply(c, "v", "three", 10);
	tc_expect(c, "v", "three", 10);
	assert_int_equal(store_cache_count(c), 1);
	store_cache_free(c);
}

/* Deletes and reads of missing objects leave tombstones; a later put revives. */
static void test_cache_tombstones(void **state)
{
	struct store_cache *c = store_cache_new(STORE_CACHE_BYTES);

	assert_non_null(c);
	store_cache_fill(c, STORE_VOLUME, "gone", NULL, 3);
	tc_expect(c, "gone", NULL, 0);
	tc_apply(c, "gone", "back", 2); /* older than the read: ignored */
	tc_expect(c, "gone", NULL, 0);
	tc_apply(c, "gone", "back", 4);
	tc_expect(c, "gone", "back", 4);
	tc_apply(c, "gone", NULL, 6);
	tc_expect(c, "gone", NULL, 0);
	/* Kinds are apart: a node "gone" is not the volume's tombstone. */
	tc_expect_miss(c, STORE_NODE, "gone");
	store_cache_free(c);
}

/*
 * Forgetting one (a failed compare saw revision 6), emptying all: the next
 * get is a miss, and what the watch still brings up to the compare's
 * revision does not put an old state back.
 */
static void test_cache_forget(void **state)
{
	struct store_cache *c = store_cache_new(STORE_CACHE_BYTES);
	struct store_obj read = {STORE_VOLUME, "a", "4", 1, 1, 4};

	assert_non_null(c);
	tc_apply(c, "a", "1", 1);
	tc_apply(c, "b", "2", 2);
	store_cache_drop(c, STORE_VOLUME, "a", 6);
	store_cache_drop(c, STORE_VOLUME, "never", 0);
	tc_expect_miss(c, STORE_VOLUME, "a");
	tc_expect_miss(c, STORE_VOLUME, "never");
	tc_expect(c, "b", "2", 2);
	/* The lagging watch delivers revision 4: still older than the compare saw. */
	tc_apply(c, "a", "4", 4);
	tc_expect_miss(c, STORE_VOLUME, "a");
	/* The read after the conflict, at revision 6, is the truth there. */
	store_cache_fill(c, STORE_VOLUME, "a", &read, 6);
	tc_expect(c, "a", "4", 4);
	/* Forgetting without a revision keeps only the guard of what was known. */
	store_cache_drop(c, STORE_VOLUME, "b", 0);
	tc_expect_miss(c, STORE_VOLUME, "b");
	tc_apply(c, "b", "1", 1);
	tc_expect_miss(c, STORE_VOLUME, "b");
	tc_apply(c, "b", "3", 3);
	tc_expect(c, "b", "3", 3);
	store_cache_clear(c);
	assert_int_equal(store_cache_count(c), 0);
	tc_expect_miss(c, STORE_VOLUME, "b");
	store_cache_free(c);
}

/*
 * Past its bound the cache frees a part of itself, not everything: most
 * entries stay, the newest is there, and a mark still keeps a lagging
 * watch's older change out.
 */
static void test_cache_bound(void **state)
{
	struct store_cache *c = store_cache_new(STORE_CACHE_BYTES);
	const size_t big = 256 * 1024, fit = STORE_CACHE_BYTES / big;
	char *value = malloc(big + 1), id[32];
	struct store_obj got = {0};
	struct err e;

	assert_non_null(c);
	assert_non_null(value);
	memset(value, 'x', big);
	value[big] = '\0';
	store_cache_drop(c, STORE_VOLUME, "guarded", 1000000);
	for (size_t i = 0; i < 2 * fit; i++) {
		snprintf(id, sizeof(id), "vol-%zu", i);
		tc_apply(c, id, value, (uint64_t)i + 1);
		assert_true(store_cache_count(c) <= fit + 1);
	}
	/* An eighth went at each eviction: far more than half stays. */
	assert_true(store_cache_count(c) > fit / 2);
	snprintf(id, sizeof(id), "vol-%zu", 2 * fit - 1);
	assert_int_equal(store_cache_get(c, STORE_VOLUME, id, &got, &e), 0);
	store_obj_free(&got);
	tc_apply(c, "guarded", "old", 999999);
	tc_expect_miss(c, STORE_VOLUME, "guarded");
	free(value);
	store_cache_free(c);
}

/*
 * A read older than the watch's position may enter for a key the cache
 * has forgotten nothing of (store_cache_fillable): from the revision the
 * watch started after, and after an eviction or a clear only from what
 * they forgot; a key with an entry always may (the newer state stays).
 */
static void test_cache_floor(void **state)
{
	struct store_cache *c = store_cache_new(STORE_CACHE_BYTES);
	const size_t big = 256 * 1024, fit = STORE_CACHE_BYTES / big;
	char *value = malloc(big + 1), id[32];
	uint64_t gone = 0, top = 0;

	assert_non_null(c);
	assert_non_null(value);
	/* The watch starts after revision 100: a read at 99 saw a state it may have replaced. */
	store_cache_raise_floor(c, 100);
	assert_false(store_cache_fillable(c, STORE_VOLUME, "cold", 99));
	assert_true(store_cache_fillable(c, STORE_VOLUME, "cold", 100));
	/* Lowering is refused. */
	store_cache_raise_floor(c, 50);
	assert_false(store_cache_fillable(c, STORE_VOLUME, "cold", 99));
	/* With an entry, store_cache_fill itself keeps the newer: always fillable. */
	tc_apply(c, "warm", "w", 120);
	assert_true(store_cache_fillable(c, STORE_VOLUME, "warm", 1));
	/* A forgotten key's guard (a mark) is an entry too. */
	store_cache_drop(c, STORE_VOLUME, "warm", 130);
	assert_true(store_cache_fillable(c, STORE_VOLUME, "warm", 1));

	/* Evictions raise the floor to the newest revision they forgot. */
	memset(value, 'x', big);
	value[big] = '\0';
	for (size_t i = 0; i < 2 * fit; i++) {
		snprintf(id, sizeof(id), "vol-%zu", i);
		tc_apply(c, id, value, 200 + (uint64_t)i);
	}
	for (size_t i = 0; i < 2 * fit; i++) {
		struct store_obj o = {0};
		struct err e;

		snprintf(id, sizeof(id), "vol-%zu", i);
		if (store_cache_get(c, STORE_VOLUME, id, &o, &e) == 1)
			gone = 200 + (uint64_t)i;
		store_obj_free(&o);
	}
	assert_true(gone > 0);
	snprintf(id, sizeof(id), "vol-%llu", (unsigned long long)(gone - 200));
	/* The evicted key's newest state was at gone: an older read must not come back. */
	assert_false(store_cache_fillable(c, STORE_VOLUME, id, gone - 1));
	assert_true(store_cache_fillable(c, STORE_VOLUME, id, gone));
	assert_false(store_cache_fillable(c, STORE_VOLUME, "cold", gone - 1));

	/* A clear forgets everything: the floor goes to the newest revision known. */
	top = 200 + 2 * (uint64_t)fit - 1;
	store_cache_clear(c);
	assert_false(store_cache_fillable(c, STORE_VOLUME, "cold", top - 1));
	assert_true(store_cache_fillable(c, STORE_VOLUME, "cold", top));
	free(value);
	store_cache_free(c);
}

/* Past its first buckets the table grows and keeps every entry. */
static void test_cache_many(void **state)
{
	struct store_cache *c = store_cache_new(STORE_CACHE_BYTES);
	char id[32], value[32];

	assert_non_null(c);
	for (int i = 0; i < 5000; i++) {
		snprintf(id, sizeof(id), "vol-%d", i);
		snprintf(value, sizeof(value), "v%d", i);
		tc_apply(c, id, value, (uint64_t)i + 1);
	}
	assert_int_equal(store_cache_count(c), 5000);
	for (int i = 0; i < 5000; i += 7) {
		snprintf(id, sizeof(id), "vol-%d", i);
		snprintf(value, sizeof(value), "v%d", i);
		tc_expect(c, id, value, (uint64_t)i + 1);
	}
	store_cache_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cache_revision_order), cmocka_unit_test(test_cache_tombstones),
	    cmocka_unit_test(test_cache_forget),         cmocka_unit_test(test_cache_many),
	    cmocka_unit_test(test_cache_bound),          cmocka_unit_test(test_cache_floor),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
