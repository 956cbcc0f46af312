/*
 * The reconciler's queue history (src/server/server_history.c) on
 * virtual time: one sample per period however often it is asked, the
 * oldest dropped when the ring is full, only the last span listed, oldest
 * first.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "server/server_history.h"

#define P SERVER_HISTORY_PERIOD_MS
#define SPAN ((int64_t)SERVER_HISTORY_PERIOD_MS * SERVER_HISTORY_SAMPLES)

static void test_history_one_per_period(void **state)
{
	struct server_history h;
	struct server_history_sample out[SERVER_HISTORY_SAMPLES];

	server_history_init(&h);
	assert_int_equal(server_history_list(&h, 0, out), 0);
	/* The first sample is taken at once. */
	assert_int_equal(server_history_record(&h, 1000, 3, 1), 1000 + P);
	/* Asked again before the period ends: nothing kept, same due time. */
	assert_int_equal(server_history_record(&h, 1000 + P - 1, 9, 9), 1000 + P);
	assert_int_equal(server_history_record(&h, 1000 + P, 4, 0), 1000 + 2 * P);
	/* A late tick: the next period counts from the late sample. */
	assert_int_equal(server_history_record(&h, 1000 + 3 * P + 7, 5, 2), 1000 + 4 * P + 7);

	assert_int_equal(server_history_list(&h, 1000 + 3 * P + 7, out), 3);
	assert_int_equal(out[0].time_ms, 1000);
	assert_int_equal(out[0].queued, 3);
	assert_int_equal(out[0].failing, 1);
	assert_int_equal(out[1].time_ms, 1000 + P);
	assert_int_equal(out[1].queued, 4);
	assert_int_equal(out[2].time_ms, 1000 + 3 * P + 7);
	assert_int_equal(out[2].failing, 2);
}

static void test_history_ring_full(void **state)
{
	struct server_history h;
	struct server_history_sample out[SERVER_HISTORY_SAMPLES];
	int64_t t = 0;
	int i;

	server_history_init(&h);
	for (i = 0; i < SERVER_HISTORY_SAMPLES + 10; i++, t += P)
		server_history_record(&h, t, i, 0);
	t -= P;
	/* 130 taken, the last 120 kept, oldest first. */
	assert_int_equal(server_history_list(&h, t, out), SERVER_HISTORY_SAMPLES);
	assert_int_equal(out[0].queued, 10);
	assert_int_equal(out[SERVER_HISTORY_SAMPLES - 1].queued, SERVER_HISTORY_SAMPLES + 9);
	for (i = 1; i < SERVER_HISTORY_SAMPLES; i++)
		assert_true(out[i].time_ms == out[i - 1].time_ms + P);
}

static void test_history_only_the_span(void **state)
{
	struct server_history h;
	struct server_history_sample out[SERVER_HISTORY_SAMPLES];

	server_history_init(&h);
	server_history_record(&h, 0, 1, 0);
	server_history_record(&h, P, 2, 0);
	/* The ticker stalled (a suspended machine): old samples fall out of the span. */
	assert_int_equal(server_history_list(&h, SPAN - 1, out), 2);
	assert_int_equal(server_history_list(&h, SPAN, out), 1);
	assert_int_equal(out[0].queued, 2);
	assert_int_equal(server_history_list(&h, SPAN + P, out), 0);
	server_history_record(&h, SPAN + P, 7, 3);
	assert_int_equal(server_history_list(&h, SPAN + P, out), 1);
	assert_int_equal(out[0].queued, 7);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_history_one_per_period),
	    cmocka_unit_test(test_history_ring_full),
	    cmocka_unit_test(test_history_only_the_span),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
