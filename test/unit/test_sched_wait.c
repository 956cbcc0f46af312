/*
 * util/sched_wait.h on real threads: a SCHED_BATCH thread waits as
 * SCHED_OTHER and is a batch thread again afterwards, nested waits change
 * nothing, and a thread of another class is left alone (SCHED_IDLE here,
 * which may not become SCHED_OTHER without privileges anyway).
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "util/sched_wait.h"

static void sw_set(int policy)
{
	struct sched_param sp = {.sched_priority = 0};

	assert_int_equal(pthread_setschedparam(pthread_self(), policy, &sp), 0);
}

static void test_batch_waits_as_other(void **state)
{
	struct sched_wait outer, inner;

	sw_set(SCHED_BATCH);
	sched_wait_begin(&outer);
	assert_true(outer.was_batch);
	assert_int_equal(sched_getscheduler(0), SCHED_OTHER);
	/* Nested: nothing to change, nothing to put back. */
	sched_wait_begin(&inner);
	assert_false(inner.was_batch);
	assert_int_equal(sched_getscheduler(0), SCHED_OTHER);
	sched_wait_end(&inner);
	assert_int_equal(sched_getscheduler(0), SCHED_OTHER);
	sched_wait_end(&outer);
	assert_int_equal(sched_getscheduler(0), SCHED_BATCH);
	sw_set(SCHED_OTHER);
	(void)state;
}

static void test_other_classes_left_alone(void **state)
{
	struct sched_wait w;

	sw_set(SCHED_OTHER);
	sched_wait_begin(&w);
	assert_false(w.was_batch);
	sched_wait_end(&w);
	assert_int_equal(sched_getscheduler(0), SCHED_OTHER);
	(void)state;
}

static void *sw_idle_thread(void *arg)
{
	struct sched_param sp = {.sched_priority = 0};
	struct sched_wait w;
	int *out = arg;

	if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0)
		return NULL;
	sched_wait_begin(&w);
	out[0] = sched_getscheduler(0);
	sched_wait_end(&w);
	out[1] = sched_getscheduler(0);
	return NULL;
}

/* On its own thread: a thread that is SCHED_IDLE may not leave it unprivileged. */
static void test_idle_left_alone(void **state)
{
	int seen[2] = {-1, -1};
	pthread_t th;

	assert_int_equal(pthread_create(&th, NULL, sw_idle_thread, seen), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(seen[0], SCHED_IDLE);
	assert_int_equal(seen[1], SCHED_IDLE);
	(void)state;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_batch_waits_as_other),
	    cmocka_unit_test(test_other_classes_left_alone),
	    cmocka_unit_test(test_idle_left_alone),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
