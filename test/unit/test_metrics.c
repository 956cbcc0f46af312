/*
 * Unit tests of the metrics module (src/util/metrics.c): the exact text of
 * counters, gauges and histograms (cumulative buckets, +Inf, sum, count),
 * escaping of label values and help text, number formatting, the cap on
 * label sets, collectors, concurrent updates, and the process metrics of
 * the default registry, and the route templates of the request metrics.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/http_route.h"
#include "util/metrics.h"

static const double test_buckets[] = {0.1, 1, 2.5};

static char *test_render(struct metrics_registry *r)
{
	struct strbuf b = {.max = 1 << 20};

	assert_int_equal(metrics_render(r, &b), 0);
	return b.p ? b.p : strdup("");
}

static void test_metrics_counter_gauge(void **state)
{
	static struct metrics_family c = METRICS_FAMILY("t_requests_total", "Requests.",
							METRICS_COUNTER, NULL, 0, "route", "code");
	static struct metrics_family g =
	    METRICS_FAMILY("t_depth", "Queue depth.", METRICS_GAUGE, NULL, 0);
	struct metrics_registry *r = metrics_registry_new();
	const char *a[] = {"/v1/volumes", "200"}, *b[] = {"/v1/volume/*", "404"};
	char *text;

	assert_non_null(r);
	metrics_register(r, &c);
	metrics_register(r, &g);
	metrics_add(&c, a, 1);
	metrics_add(&c, a, 2);
	metrics_add(&c, b, 1);
	metrics_set(&g, NULL, 7);
	metrics_add(&g, NULL, -2.5);
	text = test_render(r);
	/* Families render newest registration first, label sets in order of first use. */
	assert_string_equal(text, "# HELP t_depth Queue depth.\n"
				  "# TYPE t_depth gauge\n"
				  "t_depth 4.5\n"
				  "# HELP t_requests_total Requests.\n"
				  "# TYPE t_requests_total counter\n"
				  "t_requests_total{route=\"/v1/volumes\",code=\"200\"} 3\n"
				  "t_requests_total{route=\"/v1/volume/*\",code=\"404\"} 1\n");
	free(text);
	metrics_registry_free(r);
}

static void test_metrics_histogram(void **state)
{
	static struct metrics_family h = METRICS_FAMILY(
	    "t_op_seconds", "Op latency.", METRICS_HISTOGRAM, test_buckets, 3, "method");
	struct metrics_registry *r = metrics_registry_new();
	const char *m[] = {"Probe"};
	char *text;

	metrics_register(r, &h);
	metrics_observe(&h, m, 0.05);
	metrics_observe(&h, m, 0.1); /* on a bound: counted in that bucket (le) */
	metrics_observe(&h, m, 2);
	metrics_observe(&h, m, 100);
	text = test_render(r);
	assert_string_equal(text, "# HELP t_op_seconds Op latency.\n"
				  "# TYPE t_op_seconds histogram\n"
				  "t_op_seconds_bucket{method=\"Probe\",le=\"0.1\"} 2\n"
				  "t_op_seconds_bucket{method=\"Probe\",le=\"1\"} 2\n"
				  "t_op_seconds_bucket{method=\"Probe\",le=\"2.5\"} 3\n"
				  "t_op_seconds_bucket{method=\"Probe\",le=\"+Inf\"} 4\n"
				  "t_op_seconds_sum{method=\"Probe\"} 102.15\n"
				  "t_op_seconds_count{method=\"Probe\"} 4\n");
	free(text);
	metrics_registry_free(r);
}

static void test_metrics_escaping(void **state)
{
	static struct metrics_family g = METRICS_FAMILY(
	    "t_escaped", "Help with \\ and\nnewline \"quoted\".", METRICS_GAUGE, NULL, 0, "v");
	struct metrics_registry *r = metrics_registry_new();
	const char *v[] = {"a\"b\\c\nd"};
	char *text;

	metrics_register(r, &g);
	metrics_set(&g, v, 1);
	text = test_render(r);
	/* HELP escapes backslash and newline only; label values also the double quote. */
	assert_string_equal(text, "# HELP t_escaped Help with \\\\ and\\nnewline \"quoted\".\n"
				  "# TYPE t_escaped gauge\n"
				  "t_escaped{v=\"a\\\"b\\\\c\\nd\"} 1\n");
	free(text);
	metrics_registry_free(r);
}

static void test_metrics_numbers(void **state)
{
	struct strbuf b = {.max = 4096};
	struct metrics_writer w = {.out = &b};
	const char *l[] = {"k"}, *v[] = {""};

	metrics_write_header(&w, "t_n", "Numbers.", METRICS_GAUGE);
	metrics_write_sample(&w, "t_n", l, v, 1, 0.1);
	metrics_write_sample(&w, "t_n", NULL, NULL, 0, 1.0 / 3.0);
	metrics_write_sample(&w, "t_n", NULL, NULL, 0, 1e300 * 1e300);
	metrics_write_sample(&w, "t_n", NULL, NULL, 0, -1e300 * 1e300);
	metrics_write_sample(&w, "t_n", NULL, NULL, 0, 1234567890123.0);
	assert_false(w.failed);
	assert_string_equal(b.p, "# HELP t_n Numbers.\n# TYPE t_n gauge\n"
				 "t_n{k=\"\"} 0.1\n"
				 "t_n 0.33333333333333331\n"
				 "t_n +Inf\n"
				 "t_n -Inf\n"
				 "t_n 1234567890123\n");
	strbuf_free(&b);
}

static void test_metrics_cap(void **state)
{
	static struct metrics_family g =
	    METRICS_FAMILY("t_many", "Many.", METRICS_GAUGE, NULL, 0, "id");
	struct metrics_registry *r = metrics_registry_new();
	char id[32], *text, *p;
	const char *v[] = {id};
	size_t n = 0;

	metrics_register(r, &g);
	for (int i = 0; i < METRICS_CHILDREN_MAX + 50; i++) {
		snprintf(id, sizeof(id), "x%d", i);
		metrics_set(&g, v, 1);
	}
	text = test_render(r);
	for (p = strstr(text, "\nt_many{"); p; p = strstr(p + 1, "\nt_many{"))
		n++;
	assert_int_equal(n, METRICS_CHILDREN_MAX);
	assert_null(strstr(text, "id=\"x1024\""));
	free(text);
	metrics_registry_free(r);
}

static void test_collect(void *ctx, struct metrics_writer *w)
{
	const char *l[] = {"state"}, *v[] = {"ready"};

	(*(int *)ctx)++;
	metrics_write_header(w, "t_volumes", "Volumes.", METRICS_GAUGE);
	metrics_write_sample(w, "t_volumes", l, v, 1, 3);
}

static void test_metrics_collector(void **state)
{
	struct metrics_registry *r = metrics_registry_new();
	int calls = 0;
	struct metrics_collector c = {.collect = test_collect, .ctx = &calls};
	char *text;

	metrics_collector_add(r, &c);
	text = test_render(r);
	assert_string_equal(text, "# HELP t_volumes Volumes.\n# TYPE t_volumes gauge\n"
				  "t_volumes{state=\"ready\"} 3\n");
	free(text);
	metrics_collector_remove(r, &c);
	text = test_render(r);
	assert_string_equal(text, "");
	free(text);
	assert_int_equal(calls, 1);
	metrics_registry_free(r);
}

static void test_metrics_too_big(void **state)
{
	static struct metrics_family g = METRICS_FAMILY("t_big", "Big.", METRICS_GAUGE, NULL, 0);
	struct metrics_registry *r = metrics_registry_new();
	struct strbuf b = {.max = 16};

	metrics_register(r, &g);
	metrics_set(&g, NULL, 1);
	assert_int_equal(metrics_render(r, &b), -1);
	strbuf_free(&b);
	metrics_registry_free(r);
}

static struct metrics_family test_hot =
    METRICS_FAMILY("t_hot_total", "Hot.", METRICS_COUNTER, NULL, 0, "t");

static void *test_hammer(void *arg)
{
	const char *v[] = {(const char *)arg};

	for (int i = 0; i < 20000; i++)
		metrics_add(&test_hot, v, 1);
	return NULL;
}

static void test_metrics_threads(void **state)
{
	struct metrics_registry *r = metrics_registry_new();
	pthread_t t[4];
	const char *names[] = {"a", "b", "a", "b"};
	char *text;

	metrics_register(r, &test_hot);
	for (int i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, test_hammer, (void *)names[i]), 0);
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	text = test_render(r);
	assert_non_null(strstr(text, "t_hot_total{t=\"a\"} 40000\n"));
	assert_non_null(strstr(text, "t_hot_total{t=\"b\"} 40000\n"));
	free(text);
	metrics_registry_free(r);
}

static void test_metrics_default_process(void **state)
{
	static struct metrics_family g = METRICS_FAMILY(
	    "t_default_gauge", "Joins the default registry.", METRICS_GAUGE, NULL, 0);
	char *text, *p;
	double rss = 0, start = 0, fds = 0;

	metrics_set(&g, NULL, 5); /* never registered: joins metrics_default() */
	text = test_render(metrics_default());
	assert_non_null(strstr(text, "\nt_default_gauge 5\n"));
	assert_non_null(strstr(text, "# TYPE csid_metrics_dropped_total counter\n"));
	p = strstr(text, "\nprocess_resident_memory_bytes ");
	assert_non_null(p);
	rss = strtod(p + strlen("\nprocess_resident_memory_bytes "), NULL);
	p = strstr(text, "\nprocess_open_fds ");
	assert_non_null(p);
	fds = strtod(p + strlen("\nprocess_open_fds "), NULL);
	p = strstr(text, "\nprocess_start_time_seconds ");
	assert_non_null(p);
	start = strtod(p + strlen("\nprocess_start_time_seconds "), NULL);
	assert_true(rss > 1e6);
	assert_true(fds >= 3);
	/* After 2020-01-01 and not in the future. */
	assert_true(start > 1577836800.0);
	assert_true(start < 1e10);
	free(text);
}

static void test_metrics_routes(void **state)
{
	static const char *const routes[] = {"/v1/volumes", "/v1/volume/{id}",
					     "/v1/volume/{id}/claim", "/v1/a/{x}/{y}", NULL};

	assert_string_equal(http_route_match(routes, "/v1/volumes"), "/v1/volumes");
	assert_string_equal(http_route_match(routes, "/v1/volume/data"), "/v1/volume/{id}");
	assert_string_equal(http_route_match(routes, "/v1/volume/data/claim"),
			    "/v1/volume/{id}/claim");
	assert_string_equal(http_route_match(routes, "/v1/a/b/c"), "/v1/a/{x}/{y}");
	/* An empty segment, an extra one, a longer name, a prefix: none match. */
	assert_string_equal(http_route_match(routes, "/v1/volume/"), "other");
	assert_string_equal(http_route_match(routes, "/v1/volume/data/claim/x"), "other");
	assert_string_equal(http_route_match(routes, "/v1/volumesx"), "other");
	assert_string_equal(http_route_match(routes, "/v1/volume/data/claimx"), "other");
	assert_string_equal(http_route_match(routes, "/v1/a/b"), "other");
	assert_string_equal(http_route_match(NULL, "/v1/volumes"), "other");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_metrics_counter_gauge),
	    cmocka_unit_test(test_metrics_histogram),
	    cmocka_unit_test(test_metrics_escaping),
	    cmocka_unit_test(test_metrics_numbers),
	    cmocka_unit_test(test_metrics_cap),
	    cmocka_unit_test(test_metrics_collector),
	    cmocka_unit_test(test_metrics_too_big),
	    cmocka_unit_test(test_metrics_threads),
	    cmocka_unit_test(test_metrics_default_process),
	    cmocka_unit_test(test_metrics_routes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
