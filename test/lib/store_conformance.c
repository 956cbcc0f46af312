/*
 * The store contract (src/store/store.h), one suite for every backend
 * (store_conformance.h): each test runs on a fresh, empty store of the
 * backend under test, and says what every backend must do alike. What
 * one backend alone promises (SQLite's files, etcd's limits and watch)
 * lives in that backend's own test file beside its run of this suite.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store_conformance.h"

#include "store/store.h"

/* The backend under test (store_conformance_run) and the test's store. */
static const struct store_conformance *ts_backend;

struct ts {
	struct store *s;
	void *ctx; /* the backend's, for its close */
};

static int ts_setup(void **state)
{
	struct ts *t = calloc(1, sizeof(*t));
	struct err e;

	assert_non_null(t);
	if (ts_backend->open(ts_backend->arg, &t->s, &t->ctx, &e) != 0) {
		fprintf(stderr, "open %s store: %s\n", ts_backend->name, e.msg);
		ts_backend->close(ts_backend->arg, t->ctx);
		free(t);
		return -1;
	}
	*state = t;
	return 0;
}

static int ts_teardown(void **state)
{
	struct ts *t = *state;

	store_close(t->s);
	ts_backend->close(ts_backend->arg, t->ctx);
	free(t);
	return 0;
}

static struct store *ts_store(void **state)
{
	return ((struct ts *)*state)->s;
}

/*
 * Indexes relative to the store's index when the test began: a fresh
 * memory or SQLite store starts at 0, an etcd store at etcd's revision.
 * Each test writes alone, so its transactions take b + 1, b + 2, ...
 */
#define I(n) (b + (uint64_t)(n))

/* One PUT with a condition; returns store_txn's result. */
static int ts_put(struct store *s, enum store_kind kind, const char *id, const char *value,
		  uint64_t expect, uint64_t *index, struct err *e)
{
	struct store_op op = {STORE_OP_PUT, kind, id, value, strlen(value), expect};

	return store_txn(s, &op, 1, index, e);
}

static int ts_del(struct store *s, enum store_kind kind, const char *id, uint64_t expect,
		  uint64_t *index, struct err *e)
{
	struct store_op op = {STORE_OP_DELETE, kind, id, NULL, 0, expect};

	return store_txn(s, &op, 1, index, e);
}

static void ts_expect_value(struct store *s, enum store_kind kind, const char *id,
			    const char *value, uint64_t ci, uint64_t mi)
{
	struct store_obj o;
	struct err e;

	assert_int_equal(store_get(s, kind, id, &o, &e), 0);
	assert_int_equal(o.kind, kind);
	assert_string_equal(o.id, id);
	assert_int_equal(o.len, strlen(value));
	assert_string_equal(o.value, value);
	assert_int_equal(o.create_index, ci);
	assert_int_equal(o.modify_index, mi);
	store_obj_free(&o);
}

static void test_store_get_put_delete(void **state)
{
	struct store *s = ts_store(state);
	struct store_obj o;
	uint64_t index = 99;
	struct err e;
	uint64_t b = store_index(s);

	assert_int_equal(store_get(s, STORE_VOLUME, "v1", &o, &e), CSID_ENOTFOUND);
	assert_non_null(strstr(e.msg, "volume v1"));
	assert_int_equal(ts_put(s, STORE_VOLUME, "v1", "{\"a\":1}", STORE_ANY, &index, &e), 0);
	assert_int_equal(index, I(1));
	ts_expect_value(s, STORE_VOLUME, "v1", "{\"a\":1}", I(1), I(1));
	/* Kinds are separate name spaces. */
	assert_int_equal(store_get(s, STORE_NODE, "v1", &o, &e), CSID_ENOTFOUND);
	assert_int_equal(ts_put(s, STORE_NODE, "v1", "node", STORE_ANY, &index, &e), 0);
	assert_int_equal(index, I(2));
	assert_int_equal(ts_put(s, STORE_VOLUME, "v1", "{\"a\":2}", STORE_ANY, &index, &e), 0);
	assert_int_equal(index, I(3));
	ts_expect_value(s, STORE_VOLUME, "v1", "{\"a\":2}", I(1), I(3));
	ts_expect_value(s, STORE_NODE, "v1", "node", I(2), I(2));
	assert_int_equal(ts_del(s, STORE_VOLUME, "v1", STORE_ANY, &index, &e), 0);
	assert_int_equal(index, I(4));
	assert_int_equal(store_get(s, STORE_VOLUME, "v1", &o, &e), CSID_ENOTFOUND);
	/* Deleting a missing object succeeds and records nothing. */
	assert_int_equal(ts_del(s, STORE_VOLUME, "v1", STORE_ANY, &index, &e), 0);
	assert_int_equal(index, I(4));
	assert_int_equal(store_index(s), I(4));
	/* No ops: the current index. */
	assert_int_equal(store_txn(s, NULL, 0, &index, &e), 0);
	assert_int_equal(index, I(4));
	/* Recreated: a new create index. */
	assert_int_equal(ts_put(s, STORE_VOLUME, "v1", "", 0, &index, &e), 0);
	ts_expect_value(s, STORE_VOLUME, "v1", "", I(5), I(5));
	assert_int_equal(store_index(s), I(5));
}

static void test_store_cas(void **state)
{
	struct store *s = ts_store(state);
	struct store_changes c;
	uint64_t index;
	struct err e;
	uint64_t b = store_index(s);

	assert_int_equal(ts_put(s, STORE_VOLUME, "vol-7", "one", 0, &index, &e), 0);
	assert_int_equal(index, I(1));
	/* Create only when missing. */
	assert_int_equal(ts_put(s, STORE_VOLUME, "vol-7", "two", 0, &index, &e), CSID_ECONFLICT);
	assert_non_null(strstr(e.msg, "volume vol-7"));
	assert_non_null(strstr(e.msg, "exists"));
	/* Update on a stale index. */
	assert_int_equal(ts_put(s, STORE_VOLUME, "vol-7", "two", I(5), &index, &e), CSID_ECONFLICT);
	assert_non_null(strstr(e.msg, "volume vol-7"));
	ts_expect_value(s, STORE_VOLUME, "vol-7", "one", I(1), I(1));
	assert_int_equal(store_index(s), I(1));
	/* Update on the current index. */
	assert_int_equal(ts_put(s, STORE_VOLUME, "vol-7", "two", I(1), &index, &e), 0);
	assert_int_equal(index, I(2));
	ts_expect_value(s, STORE_VOLUME, "vol-7", "two", I(1), I(2));
	/* Update of a missing object. */
	assert_int_equal(ts_put(s, STORE_SNAPSHOT, "snap", "x", I(2), &index, &e), CSID_ECONFLICT);
	assert_non_null(strstr(e.msg, "snapshot snap"));
	/* Deletes. */
	assert_int_equal(ts_del(s, STORE_VOLUME, "vol-7", I(1), &index, &e), CSID_ECONFLICT);
	assert_non_null(strstr(e.msg, "volume vol-7"));
	ts_expect_value(s, STORE_VOLUME, "vol-7", "two", I(1), I(2));
	assert_int_equal(ts_del(s, STORE_VOLUME, "gone", I(3), &index, &e), CSID_ECONFLICT);
	assert_int_equal(ts_del(s, STORE_VOLUME, "gone", 0, &index, &e), 0);
	assert_int_equal(index, I(2));
	assert_int_equal(ts_del(s, STORE_VOLUME, "vol-7", I(2), &index, &e), 0);
	assert_int_equal(index, I(3));
	/* Only the three successful writes were recorded. */
	assert_int_equal(store_changes(s, b, 0, &c, &e), 0);
	assert_int_equal(c.n, 3);
	assert_int_equal(c.index, I(3));
	store_changes_free(&c);
}

static void test_store_txn_atomic(void **state)
{
	struct store *s = ts_store(state);
	struct store_op ops[3] = {
	    {STORE_OP_PUT, STORE_VOLUME, "a", "A", 1, 0},
	    {STORE_OP_PUT, STORE_NODE, "n", "N", 1, STORE_ANY},
	    {STORE_OP_DELETE, STORE_VOLUME, "b", NULL, 0, 0},
	};
	struct store_changes c;
	struct store_obj o;
	uint64_t index;
	struct err e;
	uint64_t b = store_index(s);

	ops[2].expect_index = I(4);
	assert_int_equal(ts_put(s, STORE_VOLUME, "b", "B", 0, &index, &e), 0);
	/* The last condition fails: nothing is written. */
	assert_int_equal(store_txn(s, ops, 3, &index, &e), CSID_ECONFLICT);
	assert_non_null(strstr(e.msg, "volume b"));
	assert_int_equal(store_get(s, STORE_VOLUME, "a", &o, &e), CSID_ENOTFOUND);
	assert_int_equal(store_get(s, STORE_NODE, "n", &o, &e), CSID_ENOTFOUND);
	ts_expect_value(s, STORE_VOLUME, "b", "B", I(1), I(1));
	assert_int_equal(store_index(s), I(1));
	/* All conditions hold: one index for all three. */
	ops[2].expect_index = I(1);
	assert_int_equal(store_txn(s, ops, 3, &index, &e), 0);
	assert_int_equal(index, I(2));
	ts_expect_value(s, STORE_VOLUME, "a", "A", I(2), I(2));
	ts_expect_value(s, STORE_NODE, "n", "N", I(2), I(2));
	assert_int_equal(store_get(s, STORE_VOLUME, "b", &o, &e), CSID_ENOTFOUND);
	assert_int_equal(store_changes(s, I(1), 0, &c, &e), 0);
	assert_int_equal(c.n, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(c.changes[i].index, I(2));
		assert_int_equal(c.changes[i].type, ops[i].type);
		assert_int_equal(c.changes[i].obj.kind, ops[i].kind);
		assert_string_equal(c.changes[i].obj.id, ops[i].id);
	}
	assert_string_equal(c.changes[0].obj.value, "A");
	assert_null(c.changes[2].obj.value);
	assert_int_equal(c.changes[2].obj.len, 0);
	assert_int_equal(c.changes[2].obj.create_index, I(1));
	store_changes_free(&c);
}

/* Lists kind with (prefix, after, limit) and compares the IDs with want. */
static void ts_expect_list(struct store *s, enum store_kind kind, const char *prefix,
			   const char *after, size_t limit, bool more, const char *const *want,
			   size_t n)
{
	struct store_list l;
	struct err e;

	assert_int_equal(store_list(s, kind, prefix, after, limit, &l, &e), 0);
	assert_int_equal(l.n, n);
	assert_int_equal(l.more, more);
	assert_int_equal(l.index, store_index(s));
	for (size_t i = 0; i < n; i++) {
		assert_string_equal(l.objs[i].id, want[i]);
		assert_int_equal(l.objs[i].kind, kind);
		assert_string_equal(l.objs[i].value, want[i]);
		assert_true(l.objs[i].modify_index > 0);
	}
	store_list_free(&l);
}

/*
 * Every kind keeps its own objects under the same IDs (a backend may keep
 * kinds in different tables: SQLite's claim index), one transaction
 * across all of them is atomic, and a kind's list holds its objects only.
 */
static void test_store_kinds(void **state)
{
	static const char *const one[] = {"x/1"};
	struct store *s = ts_store(state);
	struct store_op ops[STORE_KIND_COUNT_ + 1];
	struct store_obj o;
	uint64_t index;
	struct err e;
	uint64_t b = store_index(s);

	for (int k = 0; k < STORE_KIND_COUNT_; k++)
		ops[k] = (struct store_op){STORE_OP_PUT, (enum store_kind)k, "x/1", "x/1", 3, 0};
	/* A last condition that fails: no kind is written. */
	ops[STORE_KIND_COUNT_] =
	    (struct store_op){STORE_OP_DELETE, STORE_CLAIM, "x/2", NULL, 0, I(5)};
	assert_int_equal(store_txn(s, ops, STORE_KIND_COUNT_ + 1, &index, &e), CSID_ECONFLICT);
	for (int k = 0; k < STORE_KIND_COUNT_; k++)
		assert_int_equal(store_get(s, (enum store_kind)k, "x/1", &o, &e), CSID_ENOTFOUND);
	assert_int_equal(store_txn(s, ops, STORE_KIND_COUNT_, &index, &e), 0);
	assert_int_equal(index, I(1));
	for (int k = 0; k < STORE_KIND_COUNT_; k++) {
		ts_expect_value(s, (enum store_kind)k, "x/1", "x/1", I(1), I(1));
		ts_expect_list(s, (enum store_kind)k, "x/", NULL, 0, false, one, 1);
	}
	/* A conditional delete of one kind leaves the others. */
	assert_int_equal(ts_del(s, STORE_CLAIM, "x/1", I(1), &index, &e), 0);
	assert_int_equal(store_get(s, STORE_CLAIM, "x/1", &o, &e), CSID_ENOTFOUND);
	ts_expect_list(s, STORE_CLAIM, "x/", NULL, 0, false, NULL, 0);
	ts_expect_value(s, STORE_VOLUME, "x/1", "x/1", I(1), I(1));
	ts_expect_value(s, STORE_CLAIM_HISTORY, "x/1", "x/1", I(1), I(1));
}

static void test_store_list(void **state)
{
	static const char *const ids[] = {"b",    "a/2",  "a",        "ab",       "a/1",
					  "a/10", "\xff", "\xff\xff", "\xff\x01", "c"};
	static const char *const sorted[] = {"a", "a/1", "a/10", "a/2",      "ab",
					     "b", "c",   "\xff", "\xff\x01", "\xff\xff"};
	static const char *const slash[] = {"a/1", "a/10", "a/2"};
	struct store *s = ts_store(state);
	struct store_list l;
	char after[8] = "";
	size_t got = 0;
	struct err e;

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		assert_int_equal(ts_put(s, STORE_VOLUME, ids[i], ids[i], 0, NULL, &e), 0);
		assert_int_equal(
		    ts_put(s, i % 2 ? STORE_NODE : STORE_SNAPSHOT, ids[i], "other", 0, NULL, &e),
		    0);
	}
	ts_expect_list(s, STORE_VOLUME, NULL, NULL, 0, false, sorted, 10);
	ts_expect_list(s, STORE_VOLUME, "", "", 10, false, sorted, 10);
	ts_expect_list(s, STORE_VOLUME, "a/", NULL, 0, false, slash, 3);
	ts_expect_list(s, STORE_VOLUME, "a/", NULL, 2, true, slash, 2);
	ts_expect_list(s, STORE_VOLUME, "a/", "a/10", 1, false, slash + 2, 1);
	ts_expect_list(s, STORE_VOLUME, "a/", "a/2", 0, false, NULL, 0);
	/* A start before the prefix: the prefix decides. */
	ts_expect_list(s, STORE_VOLUME, "a/", "a", 0, false, slash, 3);
	ts_expect_list(s, STORE_VOLUME, "a", "a/10", 0, false, sorted + 3, 2);
	ts_expect_list(s, STORE_VOLUME, NULL, "b", 2, true, sorted + 6, 2);
	ts_expect_list(s, STORE_VOLUME, NULL, "bb", 0, false, sorted + 6, 4);
	ts_expect_list(s, STORE_VOLUME, "\xff", NULL, 0, false, sorted + 7, 3);
	ts_expect_list(s, STORE_VOLUME, "\xff\xff", NULL, 0, false, sorted + 9, 1);
	ts_expect_list(s, STORE_VOLUME, "zz", NULL, 0, false, NULL, 0);
	ts_expect_list(s, STORE_VOLUME, NULL, "\xff\xff", 0, false, NULL, 0);
	/* Paging through everything, three at a time. */
	for (;;) {
		assert_int_equal(store_list(s, STORE_VOLUME, NULL, after, 3, &l, &e), 0);
		for (size_t i = 0; i < l.n; i++)
			assert_string_equal(l.objs[i].id, sorted[got + i]);
		got += l.n;
		if (l.n > 0)
			snprintf(after, sizeof(after), "%s", l.objs[l.n - 1].id);
		assert_int_equal(l.more, got < 10);
		store_list_free(&l);
		if (got == 10)
			break;
	}
	assert_int_equal(store_list(s, STORE_NODE, NULL, NULL, 0, &l, &e), 0);
	assert_int_equal(l.n, 5);
	store_list_free(&l);
}

static void test_store_changes_order(void **state)
{
	struct store *s = ts_store(state);
	struct store_changes c;
	uint64_t after;
	size_t got = 0;
	char id[32], val[32];
	struct err e;
	uint64_t b = store_index(s);

	/* Transactions 1..20; every fourth writes two objects. */
	for (int i = 1; i <= 20; i++) {
		struct store_op ops[2] = {{STORE_OP_PUT, STORE_VOLUME, id, val, 0, STORE_ANY},
					  {STORE_OP_PUT, STORE_NODE, id, val, 0, STORE_ANY}};

		snprintf(id, sizeof(id), "o%d", i);
		snprintf(val, sizeof(val), "value %d", i);
		ops[0].len = ops[1].len = strlen(val);
		assert_int_equal(store_txn(s, ops, i % 4 ? 1 : 2, NULL, &e), 0);
	}
	assert_int_equal(ts_del(s, STORE_VOLUME, "o3", STORE_ANY, NULL, &e), 0);
	after = b;
	assert_int_equal(store_changes(s, b, 0, &c, &e), 0);
	assert_int_equal(c.n, 26);
	assert_int_equal(c.index, I(21));
	assert_int_equal(c.changes[25].type, STORE_OP_DELETE);
	assert_string_equal(c.changes[25].obj.id, "o3");
	assert_int_equal(c.changes[25].obj.create_index, I(3));
	assert_int_equal(c.changes[25].obj.modify_index, I(21));
	assert_null(c.changes[25].obj.value);
	for (size_t i = 0; i < 25; i++) {
		uint64_t idx = c.changes[i].index;

		assert_int_equal(c.changes[i].type, STORE_OP_PUT);
		snprintf(val, sizeof(val), "value %d", (int)(idx - b));
		assert_string_equal(c.changes[i].obj.value, val);
		assert_int_equal(c.changes[i].obj.modify_index, idx);
		assert_int_equal(c.changes[i].obj.create_index, idx);
		if (i > 0)
			assert_true(idx >= c.changes[i - 1].index);
	}
	store_changes_free(&c);
	/* The same without values: keys, types and indexes only. */
	assert_int_equal(store_change_keys(s, b, 0, &c, &e), 0);
	assert_int_equal(c.n, 26);
	assert_int_equal(c.index, I(21));
	for (size_t i = 0; i < 26; i++) {
		assert_int_equal(c.changes[i].type, i < 25 ? STORE_OP_PUT : STORE_OP_DELETE);
		assert_null(c.changes[i].obj.value);
		assert_int_equal(c.changes[i].obj.len, 0);
		assert_int_equal(c.changes[i].obj.modify_index, c.changes[i].index);
	}
	assert_int_equal(c.changes[24].obj.kind, STORE_NODE);
	assert_string_equal(c.changes[24].obj.id, "o20");
	assert_int_equal(c.changes[24].index, I(20));
	assert_int_equal(c.changes[25].obj.create_index, I(3));
	store_changes_free(&c);
	assert_int_equal(store_change_keys(s, I(19), 1, &c, &e), 0);
	assert_int_equal(c.n, 2);
	assert_int_equal(c.changes[1].index, I(20));
	store_changes_free(&c);
	/* From an index in the middle. */
	assert_int_equal(store_changes(s, I(19), 0, &c, &e), 0);
	assert_int_equal(c.n, 3);
	assert_int_equal(c.changes[0].index, I(20));
	assert_int_equal(c.changes[2].index, I(21));
	store_changes_free(&c);
	assert_int_equal(store_changes(s, I(21), 0, &c, &e), 0);
	assert_int_equal(c.n, 0);
	store_changes_free(&c);
	assert_int_equal(store_changes(s, I(100), 0, &c, &e), 0);
	assert_int_equal(c.n, 0);
	store_changes_free(&c);
	/* Pages of 3 never split a transaction and miss nothing. */
	for (;;) {
		assert_int_equal(store_changes(s, after, 3, &c, &e), 0);
		if (c.n == 0) {
			store_changes_free(&c);
			break;
		}
		assert_true(c.n == 3 || c.n == 4 || after >= I(19));
		assert_int_equal(c.changes[0].index, after + 1);
		after = c.changes[c.n - 1].index;
		got += c.n;
		store_changes_free(&c);
	}
	assert_int_equal(got, 26);
	assert_int_equal(after, I(21));
}

static void test_store_compaction(void **state)
{
	struct store *s = ts_store(state);
	struct store_op ops[STORE_TXN_OPS_MAX];
	char ids[STORE_TXN_OPS_MAX][16];
	size_t total = 0;
	struct store_changes c;
	uint64_t index = 0;
	struct err e;
	uint64_t b = store_index(s);

	for (size_t i = 0; i < STORE_TXN_OPS_MAX; i++) {
		snprintf(ids[i], sizeof(ids[i]), "obj-%zu", i);
		ops[i] = (struct store_op){STORE_OP_PUT, STORE_VOLUME, ids[i], "v", 1, STORE_ANY};
	}
	/* Twice the log's minimum, in full transactions. */
	while (total < 2 * STORE_CHANGES_KEEP + 5000) {
		assert_int_equal(store_txn(s, ops, STORE_TXN_OPS_MAX, &index, &e), 0);
		total += STORE_TXN_OPS_MAX;
	}
	assert_int_equal(store_changes(s, b, 10, &c, &e), CSID_ERANGE);
	assert_non_null(strstr(e.msg, "compacted"));
	assert_int_equal(c.n, 0);
	/* The last STORE_CHANGES_KEEP changes are all there. */
	assert_int_equal(
	    store_changes(s, index - STORE_CHANGES_KEEP / STORE_TXN_OPS_MAX, 0, &c, &e), 0);
	assert_int_equal(c.n, STORE_CHANGES_KEEP / STORE_TXN_OPS_MAX * STORE_TXN_OPS_MAX);
	assert_int_equal(c.changes[c.n - 1].index, index);
	store_changes_free(&c);
	/* A page limit rounds up to whole transactions. */
	assert_int_equal(store_changes(s, index - 2, 5, &c, &e), 0);
	assert_int_equal(c.n, STORE_TXN_OPS_MAX);
	store_changes_free(&c);
}

/* A writer thread and the index its commit returned. */
struct ts_writer {
	struct store *s;
	uint64_t got;
};

static void *ts_writer_main(void *arg)
{
	struct ts_writer *w = arg;
	struct err e;

	assert_int_equal(ts_put(w->s, STORE_NODE, "n1", "up", STORE_ANY, &w->got, &e), 0);
	return NULL;
}

static int64_t ts_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_store_wait(void **state)
{
	struct store *s = ts_store(state);
	struct ts_writer w = {s, 0};
	pthread_t th;
	int64_t t0;
	struct err e;
	uint64_t b = store_index(s);

	assert_int_equal(ts_put(s, STORE_NODE, "n0", "up", STORE_ANY, NULL, &e), 0);
	/* Already past: returns at once. */
	t0 = ts_now_ms();
	assert_int_equal(store_wait(s, b, 60000), I(1));
	assert_int_equal(store_wait(s, I(1), 0), I(1));
	assert_int_equal(store_wait(s, I(1), -5), I(1));
	assert_true(ts_now_ms() - t0 < 1000);
	/* Times out. */
	t0 = ts_now_ms();
	assert_int_equal(store_wait(s, I(1), 50), I(1));
	assert_true(ts_now_ms() - t0 >= 50);
	/* A commit wakes it long before the timeout. */
	t0 = ts_now_ms();
	assert_int_equal(pthread_create(&th, NULL, ts_writer_main, &w), 0);
	assert_int_equal(store_wait(s, I(1), 60000), I(2));
	assert_true(ts_now_ms() - t0 < 30000);
	pthread_join(th, NULL);
	assert_int_equal(w.got, I(2));
}

static void test_store_bad_args(void **state)
{
	struct store *s = ts_store(state);
	char *long_id = malloc(STORE_ID_MAX + 2);
	char *big = malloc(STORE_VALUE_MAX + 1);
	struct store_op op = {STORE_OP_PUT, STORE_VOLUME, "x", "v", 1, STORE_ANY};
	struct store_op two[2] = {op, op};
	struct store_op many[STORE_TXN_OPS_MAX + 1];
	struct store_list l;
	struct store_obj o;
	struct err e;
	uint64_t b = store_index(s);

	assert_non_null(long_id);
	assert_non_null(big);
	memset(long_id, 'i', STORE_ID_MAX + 1);
	long_id[STORE_ID_MAX + 1] = '\0';
	memset(big, 'b', STORE_VALUE_MAX + 1);
	assert_string_equal(store_kind_name(STORE_VOLUME), "volume");
	assert_string_equal(store_kind_name(STORE_NODE), "node");
	assert_string_equal(store_kind_name(STORE_SNAPSHOT), "snapshot");
	assert_null(store_kind_name(STORE_KIND_COUNT_));
	assert_null(store_kind_name((enum store_kind) - 1));

	op.id = "";
	assert_int_equal(store_txn(s, &op, 1, NULL, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "empty"));
	op.id = NULL;
	assert_int_equal(store_txn(s, &op, 1, NULL, &e), CSID_EINVAL);
	op.id = long_id;
	assert_int_equal(store_txn(s, &op, 1, NULL, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "longer"));
	long_id[STORE_ID_MAX] = '\0'; /* exactly the maximum: fine */
	assert_int_equal(store_txn(s, &op, 1, NULL, &e), 0);
	ts_expect_value(s, STORE_VOLUME, long_id, "v", I(1), I(1));
	op.id = "x";
	op.kind = STORE_KIND_COUNT_;
	assert_int_equal(store_txn(s, &op, 1, NULL, &e), CSID_EINVAL);
	op.kind = STORE_VOLUME;
	op.type = (enum store_op_type)7;
	assert_int_equal(store_txn(s, &op, 1, NULL, &e), CSID_EINVAL);
	op.type = STORE_OP_PUT;
	op.value = big;
	op.len = STORE_VALUE_MAX + 1;
	assert_int_equal(store_txn(s, &op, 1, NULL, &e), CSID_EINVAL);
	op.value = NULL;
	op.len = 3;
	assert_int_equal(store_txn(s, &op, 1, NULL, &e), CSID_EINVAL);
	assert_int_equal(store_txn(s, NULL, 1, NULL, &e), CSID_EINVAL);
	/* The same object twice, even a put and a delete. */
	two[1].type = STORE_OP_DELETE;
	assert_int_equal(store_txn(s, two, 2, NULL, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "volume x"));
	two[1].kind = STORE_NODE;
	assert_int_equal(store_txn(s, two, 2, NULL, &e), 0);
	for (size_t i = 0; i <= STORE_TXN_OPS_MAX; i++)
		many[i] = two[0];
	assert_int_equal(store_txn(s, many, STORE_TXN_OPS_MAX + 1, NULL, &e), CSID_EINVAL);
	assert_int_equal(store_get(s, STORE_VOLUME, "", &o, &e), CSID_EINVAL);
	assert_int_equal(store_get(s, STORE_VOLUME, NULL, &o, &e), CSID_EINVAL);
	assert_int_equal(store_get(s, (enum store_kind)9, "x", &o, &e), CSID_EINVAL);
	assert_int_equal(store_list(s, (enum store_kind)9, NULL, NULL, 0, &l, &e), CSID_EINVAL);
	long_id[STORE_ID_MAX] = 'i';
	assert_int_equal(store_list(s, STORE_VOLUME, long_id, NULL, 0, &l, &e), CSID_EINVAL);
	assert_int_equal(store_list(s, STORE_VOLUME, NULL, long_id, 0, &l, &e), CSID_EINVAL);
	/* Nothing of the refused writes landed. */
	assert_int_equal(store_index(s), I(2));
	free(long_id);
	free(big);
}

static void test_store_values(void **state)
{
	struct store *s = ts_store(state);
	char bin[255 * 4 + 1];
	size_t max = ts_backend->value_max;
	char *big = malloc(max + 1);
	struct store_op op = {STORE_OP_PUT, STORE_VOLUME, "bin", bin, sizeof(bin) - 1, 0};
	struct store_changes c;
	struct store_obj o;
	struct err e;
	uint64_t b = store_index(s);

	assert_non_null(big);
	/* Every byte but NUL, quotes, backslashes and newlines included. */
	for (size_t i = 0; i < sizeof(bin) - 1; i++)
		bin[i] = (char)(1 + i % 255);
	bin[sizeof(bin) - 1] = '\0';
	assert_int_equal(store_txn(s, &op, 1, NULL, &e), 0);
	assert_int_equal(store_get(s, STORE_VOLUME, "bin", &o, &e), 0);
	assert_int_equal(o.len, sizeof(bin) - 1);
	assert_memory_equal(o.value, bin, sizeof(bin));
	store_obj_free(&o);
	/* The largest value the backend takes, NUL-terminated on the way out. */
	for (size_t i = 0; i < max; i++)
		big[i] = (char)('a' + i % 26);
	big[max] = 'X';
	op = (struct store_op){STORE_OP_PUT, STORE_VOLUME, "big", big, max, 0};
	assert_int_equal(store_txn(s, &op, 1, NULL, &e), 0);
	assert_int_equal(store_get(s, STORE_VOLUME, "big", &o, &e), 0);
	assert_int_equal(o.len, max);
	assert_memory_equal(o.value, big, max);
	assert_int_equal(o.value[max], '\0');
	store_obj_free(&o);
	assert_int_equal(store_changes(s, I(1), 0, &c, &e), 0);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.changes[0].obj.len, max);
	assert_memory_equal(c.changes[0].obj.value, big, max);
	store_changes_free(&c);
	/* IDs may hold any byte but NUL too. */
	assert_int_equal(ts_put(s, STORE_NODE, bin, "x", 0, NULL, &e), 0);
	ts_expect_value(s, STORE_NODE, bin, "x", I(3), I(3));
	free(big);
}

#define TS_MANY 3000

static int ts_strcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_store_many(void **state)
{
	struct store *s = ts_store(state);
	char *ids[TS_MANY];
	char *kept[TS_MANY];
	size_t nkept = 0, got = 0;
	unsigned seed = 7;
	struct store_list l;
	const char *after = NULL;
	char *last = NULL;
	struct store_obj o;
	struct err e;
	uint64_t b = store_index(s);

	/* Inserted in a shuffled order, one in three deleted again. */
	for (size_t i = 0; i < TS_MANY; i++) {
		ids[i] = malloc(24);
		assert_non_null(ids[i]);
		snprintf(ids[i], 24, "vol-%zu", i * 7919 % TS_MANY);
	}
	for (size_t i = TS_MANY - 1; i > 0; i--) {
		size_t j = (size_t)rand_r(&seed) % (i + 1);
		char *t = ids[i];

		ids[i] = ids[j];
		ids[j] = t;
	}
	for (size_t i = 0; i < TS_MANY; i++)
		assert_int_equal(ts_put(s, STORE_VOLUME, ids[i], ids[i], 0, NULL, &e), 0);
	for (size_t i = 0; i < TS_MANY; i++) {
		if (i % 3 == 1)
			assert_int_equal(ts_del(s, STORE_VOLUME, ids[i], I(i + 1), NULL, &e), 0);
		else
			kept[nkept++] = ids[i];
	}
	qsort(kept, nkept, sizeof(kept[0]), ts_strcmp);
	for (size_t i = 0; i < TS_MANY; i++) {
		assert_int_equal(store_get(s, STORE_VOLUME, ids[i], &o, &e),
				 i % 3 == 1 ? CSID_ENOTFOUND : 0);
		store_obj_free(&o);
	}
	/* Pages of 100 give every object left, in order. */
	do {
		assert_int_equal(store_list(s, STORE_VOLUME, NULL, after, 100, &l, &e), 0);
		assert_true(l.n <= 100);
		for (size_t i = 0; i < l.n; i++)
			assert_string_equal(l.objs[i].id, kept[got + i]);
		got += l.n;
		free(last);
		last = l.n > 0 ? strdup(l.objs[l.n - 1].id) : NULL;
		after = last;
		assert_int_equal(l.more, got < nkept);
		store_list_free(&l);
	} while (got < nkept);
	assert_int_equal(got, nkept);
	free(last);
	for (size_t i = 0; i < TS_MANY; i++)
		free(ids[i]);
}

#define TS_THREADS 4
#define TS_INCREMENTS 150

static void *ts_incr_main(void *arg)
{
	struct store *s = arg;
	char val[32];
	struct store_obj o;
	struct err e;
	int rc;

	for (int i = 0; i < TS_INCREMENTS; i++) {
		do {
			assert_int_equal(store_get(s, STORE_VOLUME, "counter", &o, &e), 0);
			snprintf(val, sizeof(val), "%ld", strtol(o.value, NULL, 10) + 1);
			rc = ts_put(s, STORE_VOLUME, "counter", val, o.modify_index, NULL, &e);
			store_obj_free(&o);
			assert_true(rc == 0 || rc == CSID_ECONFLICT);
		} while (rc == CSID_ECONFLICT);
	}
	return NULL;
}

static void test_store_concurrent_cas(void **state)
{
	struct store *s = ts_store(state);
	pthread_t th[TS_THREADS];
	char want[32];
	struct store_changes c;
	struct err e;
	uint64_t b = store_index(s);

	assert_int_equal(ts_put(s, STORE_VOLUME, "counter", "0", 0, NULL, &e), 0);
	for (int i = 0; i < TS_THREADS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, ts_incr_main, s), 0);
	for (int i = 0; i < TS_THREADS; i++)
		pthread_join(th[i], NULL);
	/* No lost update: one index per increment, in order, each one more. */
	snprintf(want, sizeof(want), "%d", TS_THREADS * TS_INCREMENTS);
	ts_expect_value(s, STORE_VOLUME, "counter", want, I(1), I(1 + TS_THREADS * TS_INCREMENTS));
	assert_int_equal(store_changes(s, b, 0, &c, &e), 0);
	assert_int_equal(c.n, 1 + TS_THREADS * TS_INCREMENTS);
	for (size_t i = 0; i < c.n; i++) {
		assert_int_equal(c.changes[i].index, I(i + 1));
		assert_int_equal(strtol(c.changes[i].obj.value, NULL, 10), (long)i);
	}
	store_changes_free(&c);
}

/* Every contract test. */
static const struct CMUnitTest ts_tests[] = {
    cmocka_unit_test_setup_teardown(test_store_get_put_delete, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_store_cas, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_store_txn_atomic, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_store_list, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_store_kinds, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_store_many, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_store_changes_order, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_store_compaction, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_store_wait, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_store_bad_args, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_store_values, ts_setup, ts_teardown),
    cmocka_unit_test_setup_teardown(test_store_concurrent_cas, ts_setup, ts_teardown),
};

int store_conformance_run(const struct store_conformance *backend)
{
	char name[64];

	ts_backend = backend;
	snprintf(name, sizeof(name), "store contract: %s", backend->name);
	return _cmocka_run_group_tests(name, ts_tests, sizeof(ts_tests) / sizeof(ts_tests[0]), NULL,
				       NULL);
}
