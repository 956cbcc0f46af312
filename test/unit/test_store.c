/*
 * The memory store: the store contract (test/lib/store_conformance.c) run
 * against it, its fault injection, and the notifier every backend's
 * store_wait shares (closing wakes waiters).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "store/store_int.h"
#include "store_conformance.h"

static int64_t tm_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One PUT of a volume with a condition. */
static int tm_put(struct store *s, const char *id, const char *value, uint64_t expect,
		  uint64_t *index, struct err *e)
{
	struct store_op op = {STORE_OP_PUT, STORE_VOLUME, id, value, strlen(value), expect};

	return store_txn(s, &op, 1, index, e);
}

static int tm_open(void *arg, struct store **out, void **ctx, struct err *e)
{
	*ctx = NULL;
	return store_mem_new(out, e);
}

static void tm_close(void *arg, void *ctx)
{
}

/* Closing wakes a waiter and waits until it has left (store_int.h). */
struct tm_notify_waiter {
	struct store_notify *n;
	uint64_t got;
};

static void *tm_notify_wait_main(void *arg)
{
	struct tm_notify_waiter *w = arg;

	w->got = store_notify_wait(w->n, 7, 600000);
	return NULL;
}

static void test_store_notify_close(void **state)
{
	struct store_notify n;
	struct tm_notify_waiter w = {&n, 0};
	int64_t deadline = tm_now_ms() + 30000;
	unsigned waiters = 0;
	pthread_t th;

	assert_int_equal(store_notify_init(&n, 7), 0);
	assert_int_equal(pthread_create(&th, NULL, tm_notify_wait_main, &w), 0);
	while (waiters == 0 && tm_now_ms() < deadline) {
		pthread_mutex_lock(&n.mu);
		waiters = n.waiters;
		pthread_mutex_unlock(&n.mu);
		sched_yield();
	}
	assert_int_equal(waiters, 1);
	store_notify_fini(&n);
	pthread_join(th, NULL);
	assert_int_equal(w.got, 7);
}

/* The memory store's injected failures write nothing. */
static void test_store_mem_faults(void **state)
{
	struct store *s;
	struct store_obj o;
	uint64_t index;
	struct err e;

	assert_int_equal(store_mem_new(&s, &e), 0);
	store_mem_fail_txn(s, CSID_EIO, 2);
	assert_int_equal(tm_put(s, "v", "x", 0, &index, &e), CSID_EIO);
	assert_non_null(strstr(e.msg, "injected"));
	assert_int_equal(tm_put(s, "", "x", 0, &index, &e), CSID_EINVAL);
	assert_int_equal(tm_put(s, "v", "x", 0, &index, &e), CSID_EIO);
	assert_int_equal(store_get(s, STORE_VOLUME, "v", &o, &e), CSID_ENOTFOUND);
	assert_int_equal(store_index(s), 0);
	assert_int_equal(tm_put(s, "v", "x", 0, &index, &e), 0);
	assert_int_equal(index, 1);
	store_mem_fail_txn(s, CSID_EUNAVAIL, 5);
	assert_int_equal(tm_put(s, "v", "y", 1, &index, &e), CSID_EUNAVAIL);
	store_mem_fail_txn(s, 0, 0);
	assert_int_equal(tm_put(s, "v", "y", 1, &index, &e), 0);
	assert_int_equal(index, 2);
	store_close(s);
}

int main(void)
{
	const struct store_conformance mem = {"memory", tm_open, tm_close, NULL, STORE_VALUE_MAX};
	const struct CMUnitTest internals[] = {
	    cmocka_unit_test(test_store_notify_close),
	    cmocka_unit_test(test_store_mem_faults),
	};
	int failed = store_conformance_run(&mem);

	failed += cmocka_run_group_tests_name("store internals", internals, NULL, NULL);
	return failed;
}
