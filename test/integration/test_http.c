/*
 * The shared HTTP layer (src/api/http.c) over a real unix socket: every
 * answer and every error is our JSON, including 404, 405 (with Allow),
 * 413 (a body over the cap), 414 (a URL over HTTP_URL_MAX) and a
 * handler's error; a 100 kB URL gets libmicrohttpd's own 414; query
 * helpers; streamed answers; at_once sees a request's query and body, and
 * the requests it picks run on the I/O thread, the others on a worker.
 * A threaded listener (a thread per connection) gives the same answers
 * and errors; its requests run on their connection's thread (the same
 * for the requests of one keep-alive connection, another for another
 * connection), and a stream, which it cannot suspend, is a 500. A
 * handler on a worker answers before it returns (http_answer_now): the
 * client has the answer while the handler still runs, what it returns
 * after is dropped, and the connection serves on; elsewhere (a threaded
 * listener) it cannot, and answers as usual.
 */
#include <setjmp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "api/http.h"
#include "http_client.h"

struct fixture {
	char dir[64];
	char sock[128];
	struct http_server *srv;
	struct http_client *cli;
};

struct stream_ctx {
	int left;
};

static long stream_next(void *ctx, char *buf, size_t cap)
{
	struct stream_ctx *s = ctx;

	if (s->left == 0)
		return -1;
	s->left--;
	return snprintf(buf, cap, "{\"n\":%d}\n", s->left);
}

static void stream_done(void *ctx)
{
	free(ctx);
}

/*
 * GET /early (http_answer_now): once answered, the handler waits for the
 * test to have read the answer (early_go) before it returns.
 */
static pthread_mutex_t early_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t early_cond = PTHREAD_COND_INITIALIZER;
static bool early_go, early_returned;

static void early_set(bool *flag)
{
	pthread_mutex_lock(&early_mu);
	*flag = true;
	pthread_cond_broadcast(&early_cond);
	pthread_mutex_unlock(&early_mu);
}

/* Waits up to 10 s for *flag; returns it. */
static bool early_wait(bool *flag)
{
	struct timespec until;
	bool v;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&early_mu);
	while (!*flag && pthread_cond_timedwait(&early_cond, &early_mu, &until) == 0)
		;
	v = *flag;
	pthread_mutex_unlock(&early_mu);
	return v;
}

static bool early_get(const bool *flag)
{
	bool v;

	pthread_mutex_lock(&early_mu);
	v = *flag;
	pthread_mutex_unlock(&early_mu);
	return v;
}

static int early_handler(const struct http_request *req, struct http_reply *rep, struct err *e)
{
	rep->doc = json_pack("{s:b}", "early", 1);
	if (!rep->doc)
		return err_set(e, CSID_ENOMEM, "out of memory");
	if (!http_answer_now(req)) {
		json_object_set_new(rep->doc, "early", json_false());
		return 0;
	}
	/* Answered: rep and e are no longer ours; what is returned is dropped. */
	early_wait(&early_go);
	early_set(&early_returned);
	return CSID_EIO;
}

/* The thread at_once was last called on: the I/O thread. */
static pthread_t io_thread;

/* On the I/O thread: /where with ?inline and a body. */
static bool at_once(void *ctx, const struct http_request *req)
{
	(void)ctx;
	io_thread = pthread_self();
	return strcmp(req->url, "/where") == 0 && http_query(req, "inline") && req->len > 0;
}

static int handler(void *ctx, const struct http_request *req, struct http_reply *rep, struct err *e)
{
	if (strcmp(req->url, "/where") == 0) {
		rep->doc = json_pack("{s:b}", "io", pthread_equal(pthread_self(), io_thread));
		return rep->doc ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
	}
	if (strcmp(req->url, "/early") == 0)
		return early_handler(req, rep, e);
	if (strcmp(req->url, "/tid") == 0) {
		rep->doc = json_pack("{s:I}", "tid", (json_int_t)syscall(SYS_gettid));
		return rep->doc ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
	}
	if (strcmp(req->url, "/ok") == 0) {
		bool force;
		uint64_t n;
		int64_t ms;
		int rc;

		if (strcmp(req->method, "GET") != 0) {
			rep->allow = "GET";
			return HTTP_METHOD_NOT_ALLOWED;
		}
		rc = http_query_bool(req, "force", &force, e);
		if (!rc)
			rc = http_query_u64(req, "n", 7, &n, e);
		if (!rc)
			rc = http_query_duration(req, "wait", 1000, &ms, e);
		if (rc)
			return rc;
		rep->doc = json_pack("{s:b, s:I, s:I}", "force", force, "n", (json_int_t)n, "ms",
				     (json_int_t)ms);
		snprintf(rep->index, sizeof(rep->index), "42");
		return 0;
	}
	if (strcmp(req->url, "/echo") == 0) {
		rep->doc = json_pack("{s:I}", "len", (json_int_t)req->len);
		return 0;
	}
	if (strcmp(req->url, "/stream") == 0) {
		struct stream_ctx *s = calloc(1, sizeof(*s));

		if (!s)
			return err_set(e, CSID_ENOMEM, "out of memory");
		s->left = 3;
		rep->stream.next = stream_next;
		rep->stream.done = stream_done;
		rep->stream.ctx = s;
		return 0;
	}
	if (strcmp(req->url, "/conflict") == 0)
		return err_set(e, CSID_ECONFLICT, "held by alloc a1");
	return err_set(e, CSID_ENOTFOUND, "no such endpoint: %.200s", req->url);
}

/* Starts the server of cfg on a unix socket in a new directory, with a client. */
static int setup_with(void **state, struct http_server_config cfg)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char base[160];
	struct err e;

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/csid-http-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	snprintf(f->sock, sizeof(f->sock), "%s/api.sock", f->dir);
	cfg.socket_path = f->sock;
	if (http_server_start(&cfg, &f->srv, &e) != 0) {
		fprintf(stderr, "start: %s\n", e.msg);
		rmdir(f->dir);
		free(f);
		return -1;
	}
	snprintf(base, sizeof(base), "unix:%s", f->sock);
	f->cli = http_client_new(base);
	*state = f;
	return f->cli ? 0 : -1;
}

static int setup(void **state)
{
	return setup_with(state, (struct http_server_config){.name = "test api",
							     .body_max = 1024,
							     .handler = handler,
							     .at_once = at_once});
}

static int setup_threaded(void **state)
{
	return setup_with(
	    state, (struct http_server_config){
		       .name = "test api", .body_max = 1024, .handler = handler, .threaded = true});
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	http_client_free(f->cli);
	http_server_stop(f->srv);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* Asserts a JSON error answer with status and code. */
static void expect_error(struct fixture *f, const char *method, const char *path, const char *body,
			 long status, const char *code)
{
	json_t *doc = NULL;
	long got = http_client_json(f->cli, method, path, body, &doc);

	assert_int_equal(got, status);
	assert_non_null(doc);
	assert_string_equal(json_string_value(json_object_get(doc, "code")), code);
	assert_non_null(json_string_value(json_object_get(doc, "error")));
	json_decref(doc);
}

static void test_errors_are_json(void **state)
{
	struct fixture *f = *state;

	expect_error(f, "GET", "/nope", NULL, 404, "not_found");
	expect_error(f, "POST", "/ok", "{}", 405, "method_not_allowed");
	expect_error(f, "GET", "/conflict", NULL, 409, "conflict");
	expect_error(f, "GET", "/ok?force=maybe", NULL, 400, "invalid_argument");
	expect_error(f, "GET", "/ok?n=-1", NULL, 400, "invalid_argument");
	expect_error(f, "GET", "/ok?wait=soon", NULL, 400, "invalid_argument");
}

static void test_body_cap(void **state)
{
	struct fixture *f = *state;
	char big[4096];
	json_t *doc = NULL;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	expect_error(f, "PUT", "/echo", big, 413, "too_large");
	assert_int_equal(http_client_json(f->cli, "PUT", "/echo", "{\"a\":1}", &doc), 200);
	assert_int_equal(json_integer_value(json_object_get(doc, "len")), 7);
	json_decref(doc);
}

static void test_long_url(void **state)
{
	struct fixture *f = *state;
	size_t n = HTTP_URL_MAX + 100, big = 100 * 1024;
	char *path = malloc(big + 8);

	assert_non_null(path);
	memcpy(path, "/ok?x=", 6);
	memset(path + 6, 'a', n);
	path[n + 6] = '\0';
	expect_error(f, "GET", path, NULL, 414, "too_large");
	path[0] = '/';
	memset(path + 1, 'b', n);
	path[n + 1] = '\0';
	expect_error(f, "GET", path, NULL, 414, "too_large");
	/* A head larger than a connection's memory is refused by libmicrohttpd itself. */
	memset(path + 1, 'c', big);
	path[big + 1] = '\0';
	assert_int_equal(http_client_do(f->cli, "GET", path, NULL, NULL, NULL, 0), 414);
	free(path);
}

static void test_query_and_index(void **state)
{
	struct fixture *f = *state;
	char *text = NULL;
	uint64_t index = 0;
	json_t *doc;

	assert_int_equal(
	    http_client_do(f->cli, "GET", "/ok?force&n=5&wait=250ms", NULL, &text, &index, 0), 200);
	assert_int_equal(index, 42);
	doc = json_loads(text, 0, NULL);
	assert_true(json_is_true(json_object_get(doc, "force")));
	assert_int_equal(json_integer_value(json_object_get(doc, "n")), 5);
	assert_int_equal(json_integer_value(json_object_get(doc, "ms")), 250);
	json_decref(doc);
	free(text);
	assert_int_equal(
	    http_client_do(f->cli, "GET", "/ok?force=false&wait=2m", NULL, &text, NULL, 0), 200);
	doc = json_loads(text, 0, NULL);
	assert_true(json_is_false(json_object_get(doc, "force")));
	assert_int_equal(json_integer_value(json_object_get(doc, "n")), 7);
	assert_int_equal(json_integer_value(json_object_get(doc, "ms")), 120000);
	json_decref(doc);
	free(text);
}

static void test_nul_not_decoded(void **state)
{
	struct fixture *f = *state;

	/* A decoded NUL would cut "/nope%00x" to "/nope"; it stays "%00". */
	expect_error(f, "GET", "/ok%00x", NULL, 404, "not_found");
	expect_error(f, "GET", "/ok?n=1%00", NULL, 400, "invalid_argument");
}

static void test_stream(void **state)
{
	struct fixture *f = *state;
	char *text = NULL;

	assert_int_equal(http_client_do(f->cli, "GET", "/stream", NULL, &text, NULL, 0), 200);
	assert_string_equal(text, "{\"n\":2}\n{\"n\":1}\n{\"n\":0}\n");
	free(text);
}

/* Where a PUT /where ran: on the I/O thread (1) or a worker (0). */
static int ran_on_io(struct fixture *f, const char *path, const char *body)
{
	json_t *doc = NULL;
	int io;

	assert_int_equal(http_client_json(f->cli, "PUT", path, body, &doc), 200);
	io = json_is_true(json_object_get(doc, "io"));
	json_decref(doc);
	return io;
}

static void test_at_once(void **state)
{
	struct fixture *f = *state;

	for (int i = 0; i < 3; i++) {
		assert_int_equal(ran_on_io(f, "/where?inline=1", "{\"a\": 1}"), 1);
		assert_int_equal(ran_on_io(f, "/where?inline=1", NULL), 0);
		assert_int_equal(ran_on_io(f, "/where", "{\"a\": 1}"), 0);
	}
}

/* The thread that ran GET /tid for client c. */
static json_int_t tid_of(struct http_client *c)
{
	json_t *doc = NULL;
	json_int_t tid;

	assert_int_equal(http_client_json(c, "GET", "/tid", NULL, &doc), 200);
	tid = json_integer_value(json_object_get(doc, "tid"));
	json_decref(doc);
	return tid;
}

static void test_threaded(void **state)
{
	struct fixture *f = *state;
	struct http_client *other;
	json_int_t first = tid_of(f->cli);
	char base[160];

	/* The requests of one keep-alive connection run on its thread, not the caller's... */
	assert_true(first > 0);
	assert_true(first != (json_int_t)syscall(SYS_gettid));
	for (int i = 0; i < 3; i++)
		assert_true(tid_of(f->cli) == first);
	/* ...and another connection's on another. */
	snprintf(base, sizeof(base), "unix:%s", f->sock);
	other = http_client_new(base);
	assert_non_null(other);
	assert_true(tid_of(other) != first);
	http_client_free(other);
	/* A stream cannot be suspended there: a 500, and the connection serves on. */
	expect_error(f, "GET", "/stream", NULL, 500, "internal");
	assert_true(tid_of(f->cli) > 0);
}

/* GET /early: whether the handler answered before it returned. */
static bool early_answered(struct fixture *f)
{
	json_t *doc = NULL;
	bool early;

	early_go = early_returned = false;
	assert_int_equal(http_client_json(f->cli, "GET", "/early", NULL, &doc), 200);
	early = json_is_true(json_object_get(doc, "early"));
	json_decref(doc);
	return early;
}

static void test_answer_now(void **state)
{
	struct fixture *f = *state;

	for (int i = 0; i < 3; i++) {
		assert_true(early_answered(f));
		/* The answer came while the handler still ran... */
		assert_false(early_get(&early_returned));
		early_set(&early_go);
		/* ...whose later error is dropped; the connection serves on. */
		assert_true(early_wait(&early_returned));
		assert_true(ran_on_io(f, "/where?inline=1", "{\"a\": 1}"));
	}
}

/* A threaded listener cannot answer early: the handler answers as usual. */
static void test_answer_now_threaded(void **state)
{
	struct fixture *f = *state;

	assert_false(early_answered(f));
	assert_false(early_get(&early_returned));
	assert_true(tid_of(f->cli) > 0);
}

static void test_path_segment(void **state)
{
	char buf[8];
	const char *rest;

	rest = http_path_segment("/v1/volume/data/claim", "/v1/volume/", buf, sizeof(buf));
	assert_non_null(rest);
	assert_string_equal(buf, "data");
	assert_string_equal(rest, "/claim");
	rest = http_path_segment("/v1/volume/data", "/v1/volume/", buf, sizeof(buf));
	assert_string_equal(rest, "");
	assert_null(http_path_segment("/v1/volume/", "/v1/volume/", buf, sizeof(buf)));
	assert_null(http_path_segment("/v1/volume/toolongname", "/v1/volume/", buf, sizeof(buf)));
	assert_null(http_path_segment("/v1/node/x", "/v1/volume/", buf, sizeof(buf)));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_errors_are_json, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_body_cap, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_long_url, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_query_and_index, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_stream, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_nul_not_decoded, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_at_once, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_answer_now, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_errors_are_json, setup_threaded, teardown),
	    cmocka_unit_test_setup_teardown(test_body_cap, setup_threaded, teardown),
	    cmocka_unit_test_setup_teardown(test_long_url, setup_threaded, teardown),
	    cmocka_unit_test_setup_teardown(test_query_and_index, setup_threaded, teardown),
	    cmocka_unit_test_setup_teardown(test_nul_not_decoded, setup_threaded, teardown),
	    cmocka_unit_test_setup_teardown(test_threaded, setup_threaded, teardown),
	    cmocka_unit_test_setup_teardown(test_answer_now_threaded, setup_threaded, teardown),
	    cmocka_unit_test(test_path_segment),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
