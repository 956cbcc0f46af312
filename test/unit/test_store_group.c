/*
 * The SQLite store's group commit (src/store/store_sqlite.c): transactions
 * that queue while one is written share one SQLite commit, and each
 * keeps its own outcome and index. store_sqlite_hold makes them queue
 * deterministically: each caller's thread is started only once the one
 * before it is queued, so the batch runs them in a known order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

#define TG_THREADS 8
#define TG_ROUNDS 150

struct tg {
	char dir[PATH_MAX];
	char path[PATH_MAX + 16];
	struct store *s;
};

static int tg_setup(void **state)
{
	struct tg *t = calloc(1, sizeof(*t));
	struct err e;

	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "/tmp/csid-test-group-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->path, sizeof(t->path), "%s/store.db", t->dir);
	assert_int_equal(store_sqlite_open(t->path, &t->s, &e), 0);
	*state = t;
	return 0;
}

static int tg_teardown(void **state)
{
	struct tg *t = *state;
	char path[PATH_MAX + 32];

	store_close(t->s);
	snprintf(path, sizeof(path), "%s-wal", t->path);
	unlink(path);
	unlink(t->path);
	rmdir(t->dir);
	free(t);
	return 0;
}

/* One caller: its ops, and what store_txn answered. */
struct tg_call {
	struct store *s;
	struct store_op ops[2];
	size_t n;
	pthread_t thread;
	uint64_t index;
	int rc;
	struct err e;
};

static void *tg_call_run(void *arg)
{
	struct tg_call *c = arg;

	c->rc = store_txn(c->s, c->ops, c->n, &c->index, &c->e);
	return NULL;
}

/* Polls until n transactions are queued on the held store (10 s at most). */
static void tg_wait_queued(struct store *s, size_t n)
{
	for (int i = 0; i < 10000 && store_sqlite_hold(s, true) < n; i++)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	assert_int_equal(store_sqlite_hold(s, true), n);
}

/* Holds t's store and starts the n callers, each once the one before it is queued. */
static void tg_queue_held(struct tg *t, struct tg_call *c, size_t n)
{
	store_sqlite_hold(t->s, true);
	for (size_t i = 0; i < n; i++) {
		c[i].s = t->s;
		assert_int_equal(pthread_create(&c[i].thread, NULL, tg_call_run, &c[i]), 0);
		tg_wait_queued(t->s, i + 1);
	}
}

/* Lets the held callers go, as one batch, and waits for them. */
static void tg_release(struct tg *t, struct tg_call *c, size_t n)
{
	store_sqlite_hold(t->s, false);
	for (size_t i = 0; i < n; i++)
		pthread_join(c[i].thread, NULL);
}

/*
 * Five callers queue behind a hold and go as one batch: a put, a put
 * whose condition fails, a put with a delete of a missing object, a put
 * of the first one's object expecting it absent (it was created earlier
 * in the same batch: fails), and a delete of a missing object (changes
 * nothing). One SQLite commit; the three that succeed get the indexes in
 * queue order (the last the index of the one before it), the two that
 * fail write nothing and say why, and the change log holds exactly the
 * two puts.
 */
static void test_group_independent(void **state)
{
	struct tg *t = *state;
	struct tg_call c[5] = {
	    {.ops = {{STORE_OP_PUT, STORE_VOLUME, "a", "1", 1, 0}}, .n = 1},
	    {.ops = {{STORE_OP_PUT, STORE_VOLUME, "b", "2", 1, 5}}, .n = 1},
	    {.ops = {{STORE_OP_PUT, STORE_VOLUME, "c", "3", 1, 0},
		     {STORE_OP_DELETE, STORE_VOLUME, "d", NULL, 0, STORE_ANY}},
	     .n = 2},
	    {.ops = {{STORE_OP_PUT, STORE_VOLUME, "a", "4", 1, 0}}, .n = 1},
	    {.ops = {{STORE_OP_DELETE, STORE_VOLUME, "e", NULL, 0, STORE_ANY}}, .n = 1},
	};
	struct store_op first = {STORE_OP_PUT, STORE_NODE, "n", "x", 1, 0};
	struct store_changes ch;
	struct store_obj o;
	uint64_t base, commits;
	struct err e;

	assert_int_equal(store_txn(t->s, &first, 1, &base, &e), 0);
	commits = store_sqlite_commits(t->s);
	tg_queue_held(t, c, 5);
	/* Held: nothing was written. */
	assert_int_equal(store_index(t->s), base);
	assert_int_equal(store_sqlite_commits(t->s), commits);
	tg_release(t, c, 5);

	assert_int_equal(store_sqlite_commits(t->s), commits + 1);
	assert_int_equal(c[0].rc, 0);
	assert_int_equal(c[0].index, base + 1);
	assert_int_equal(c[1].rc, CSID_ECONFLICT);
	assert_non_null(strstr(c[1].e.msg, "volume b: does not exist"));
	assert_int_equal(c[2].rc, 0);
	assert_int_equal(c[2].index, base + 2);
	assert_int_equal(c[3].rc, CSID_ECONFLICT);
	assert_non_null(strstr(c[3].e.msg, "volume a: already exists"));
	assert_int_equal(c[4].rc, 0);
	assert_int_equal(c[4].index, base + 2);
	assert_int_equal(store_index(t->s), base + 2);

	assert_int_equal(store_get(t->s, STORE_VOLUME, "a", &o, &e), 0);
	assert_string_equal(o.value, "1");
	assert_int_equal(o.modify_index, base + 1);
	store_obj_free(&o);
	assert_int_equal(store_get(t->s, STORE_VOLUME, "b", &o, &e), CSID_ENOTFOUND);
	assert_int_equal(store_changes(t->s, base, 0, &ch, &e), 0);
	assert_int_equal(ch.n, 2);
	assert_int_equal(ch.changes[0].index, base + 1);
	assert_string_equal(ch.changes[0].obj.id, "a");
	assert_int_equal(ch.changes[1].index, base + 2);
	assert_string_equal(ch.changes[1].obj.id, "c");
	assert_int_equal(ch.index, base + 2);
	store_changes_free(&ch);
}

/*
 * Callers of one batch on one object see each other's writes: a put, an
 * update expecting the put's index, a delete expecting the update's, a
 * put expecting it absent again; then the object is the last put, created
 * by it, and every caller succeeded with the next index.
 */
static void test_group_same_object(void **state)
{
	struct tg *t = *state;
	struct tg_call c[4] = {
	    {.ops = {{STORE_OP_PUT, STORE_VOLUME, "x", "1", 1, 0}}, .n = 1},
	    {.ops = {{STORE_OP_PUT, STORE_VOLUME, "x", "2", 1, 0}}, .n = 1},
	    {.ops = {{STORE_OP_DELETE, STORE_VOLUME, "x", NULL, 0, 0}}, .n = 1},
	    {.ops = {{STORE_OP_PUT, STORE_VOLUME, "x", "4", 1, 0}}, .n = 1},
	};
	struct store_op first = {STORE_OP_PUT, STORE_NODE, "n", "x", 1, 0};
	struct store_obj o;
	uint64_t base, commits;
	struct err e;

	assert_int_equal(store_txn(t->s, &first, 1, &base, &e), 0);
	/* Known missing before the batch (the read cache's tombstone). */
	assert_int_equal(store_get(t->s, STORE_VOLUME, "x", &o, &e), CSID_ENOTFOUND);
	c[1].ops[0].expect_index = base + 1;
	c[2].ops[0].expect_index = base + 2;
	commits = store_sqlite_commits(t->s);
	tg_queue_held(t, c, 4);
	tg_release(t, c, 4);
	assert_int_equal(store_sqlite_commits(t->s), commits + 1);
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(c[i].rc, 0);
		assert_int_equal(c[i].index, base + 1 + i);
	}
	assert_int_equal(store_get(t->s, STORE_VOLUME, "x", &o, &e), 0);
	assert_string_equal(o.value, "4");
	assert_int_equal(o.create_index, base + 4);
	assert_int_equal(o.modify_index, base + 4);
	store_obj_free(&o);
}

/* A writer of the stress test: its own object, and a shared counter by compare-and-set. */
struct tg_writer {
	struct store *s;
	pthread_t thread;
	int id;
	uint64_t last; /* its own last index: they must grow */
	int conflicts;
	const char *failed;
};

static void *tg_writer_run(void *arg)
{
	struct tg_writer *w = arg;
	char own[32], val[32];
	struct store_obj o;
	struct err e;

	snprintf(own, sizeof(own), "w%d", w->id);
	for (int i = 0; i < TG_ROUNDS && !w->failed; i++) {
		uint64_t index, have = 0;
		int rc;

		rc = store_get(w->s, STORE_NODE, "counter", &o, &e);
		if (rc == 0)
			have = o.modify_index;
		snprintf(val, sizeof(val), "%d", rc == 0 ? atoi(o.value) + 1 : 1);
		store_obj_free(&o);
		{
			struct store_op ops[2] = {
			    {STORE_OP_PUT, STORE_NODE, "counter", val, strlen(val), have},
			    {STORE_OP_PUT, STORE_VOLUME, own, val, strlen(val), STORE_ANY},
			};

			rc = store_txn(w->s, ops, 2, &index, &e);
		}
		if (rc == CSID_ECONFLICT) {
			w->conflicts++;
			i--;
			continue;
		}
		if (rc != 0 || index <= w->last)
			w->failed = rc != 0 ? "txn failed" : "index did not grow";
		w->last = index;
	}
	return NULL;
}

/*
 * Eight threads increment one counter by compare-and-set: whatever the
 * batches, no increment is lost, each caller's indexes grow, and the
 * change log holds one transaction per increment, each of two changes.
 */
static void test_group_concurrent(void **state)
{
	struct tg *t = *state;
	struct tg_writer w[TG_THREADS];
	struct store_changes ch;
	struct store_obj o;
	uint64_t base = store_index(t->s), prev;
	struct err e;

	for (int i = 0; i < TG_THREADS; i++) {
		w[i] = (struct tg_writer){.s = t->s, .id = i};
		assert_int_equal(pthread_create(&w[i].thread, NULL, tg_writer_run, &w[i]), 0);
	}
	for (int i = 0; i < TG_THREADS; i++) {
		pthread_join(w[i].thread, NULL);
		if (w[i].failed)
			fail_msg("writer %d: %s", i, w[i].failed);
	}
	assert_int_equal(store_get(t->s, STORE_NODE, "counter", &o, &e), 0);
	assert_int_equal(atoi(o.value), TG_THREADS * TG_ROUNDS);
	store_obj_free(&o);
	assert_int_equal(store_index(t->s), base + TG_THREADS * TG_ROUNDS);
	assert_true(store_sqlite_commits(t->s) <= base + TG_THREADS * TG_ROUNDS);
	assert_int_equal(store_changes(t->s, base, 0, &ch, &e), 0);
	assert_int_equal(ch.n, 2 * TG_THREADS * TG_ROUNDS);
	prev = base;
	for (size_t i = 0; i < ch.n; i += 2) {
		assert_int_equal(ch.changes[i].index, prev + 1);
		assert_int_equal(ch.changes[i + 1].index, prev + 1);
		assert_string_equal(ch.changes[i].obj.id, "counter");
		prev++;
	}
	store_changes_free(&ch);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_group_independent, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_group_same_object, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_group_concurrent, tg_setup, tg_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
