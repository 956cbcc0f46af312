/*
 * Integration test of util/curl_pool against the project's HTTP server
 * on a unix socket: a handle given back and taken again keeps its
 * keep-alive connection (the second request opens no new one), its
 * options are cleared in between (a request without a URL fails), and a
 * pool without room, or no pool at all, cleans handles up (ASan's leak
 * check). Threads taking handles at once each get their own.
 */
#include <setjmp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/http.h"
#include "util/curl_pool.h"

#define T_THREADS 4
#define T_REQUESTS 20

struct fixture {
	char dir[64];
	char sock[128];
	struct http_server *srv;
	struct curl_pool *pool;
};

static int handler(void *ctx, const struct http_request *req, struct http_reply *rep, struct err *e)
{
	(void)ctx;
	if (strcmp(req->url, "/ok") != 0)
		return err_set(e, CSID_ENOTFOUND, "no such endpoint: %.200s", req->url);
	rep->doc = json_pack("{s:b}", "ok", 1);
	return rep->doc ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct http_server_config cfg = {.name = "test api", .body_max = 1024, .handler = handler};
	struct err e;

	if (!f)
		return -1;
	*state = f;
	snprintf(f->dir, sizeof(f->dir), "/tmp/csid-pool-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	snprintf(f->sock, sizeof(f->sock), "%s/api.sock", f->dir);
	cfg.socket_path = f->sock;
	if (http_server_start(&cfg, &f->srv, &e) != 0 || curl_pool_new(2, &f->pool, &e) != 0) {
		fprintf(stderr, "setup: %s\n", e.msg);
		return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	if (!f)
		return 0;
	curl_pool_free(f->pool);
	http_server_stop(f->srv);
	if (f->dir[0])
		rmdir(f->dir);
	free(f);
	return 0;
}

static size_t t_discard(char *data, size_t size, size_t n, void *ud)
{
	(void)data;
	(void)ud;
	return size * n;
}

/* GET /ok with c; returns the HTTP status (0: failed) and *fresh, the connections it opened. */
static long t_get(struct fixture *f, CURL *c, long *fresh)
{
	long status = 0;

	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, f->sock);
	curl_easy_setopt(c, CURLOPT_URL, "http://test/ok");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, t_discard);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (curl_easy_perform(c) != CURLE_OK)
		return 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, fresh);
	return status;
}

static void test_connection_kept(void **state)
{
	struct fixture *f = *state;
	CURL *c = curl_pool_get(f->pool), *again;
	long fresh = -1;

	assert_non_null(c);
	assert_int_equal(t_get(f, c, &fresh), 200);
	assert_int_equal(fresh, 1);
	curl_pool_put(f->pool, c);

	again = curl_pool_get(f->pool);
	assert_ptr_equal(again, c);
	/* The options of the last request are gone: no URL, no request. */
	assert_int_equal(curl_easy_perform(again), CURLE_URL_MALFORMAT);
	assert_int_equal(t_get(f, again, &fresh), 200);
	assert_int_equal(fresh, 0);
	curl_pool_put(f->pool, again);
}

static void test_no_room(void **state)
{
	struct fixture *f = *state;
	CURL *h[3];

	for (int i = 0; i < 3; i++) {
		h[i] = curl_pool_get(f->pool);
		assert_non_null(h[i]);
	}
	assert_ptr_not_equal(h[0], h[1]);
	assert_ptr_not_equal(h[1], h[2]);
	/* Two kept, the third cleaned up (a leak would fail the test). */
	for (int i = 0; i < 3; i++)
		curl_pool_put(f->pool, h[i]);
	curl_pool_put(f->pool, NULL);
	/* No pool: a new handle, cleaned up when given back. */
	h[0] = curl_pool_get(NULL);
	assert_non_null(h[0]);
	curl_pool_put(NULL, h[0]);
}

struct t_worker {
	struct fixture *f;
	int ok;
	pthread_t th;
};

static void *t_work(void *arg)
{
	struct t_worker *w = arg;

	for (int i = 0; i < T_REQUESTS; i++) {
		CURL *c = curl_pool_get(w->f->pool);
		long fresh;

		w->ok += c && t_get(w->f, c, &fresh) == 200;
		curl_pool_put(w->f->pool, c);
	}
	return NULL;
}

static void test_threads(void **state)
{
	struct fixture *f = *state;
	struct t_worker w[T_THREADS];

	memset(w, 0, sizeof(w));
	for (int i = 0; i < T_THREADS; i++) {
		w[i].f = f;
		assert_int_equal(pthread_create(&w[i].th, NULL, t_work, &w[i]), 0);
	}
	for (int i = 0; i < T_THREADS; i++) {
		pthread_join(w[i].th, NULL);
		assert_int_equal(w[i].ok, T_REQUESTS);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_connection_kept, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_room, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
	};

	int rc;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
