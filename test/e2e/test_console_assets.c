/*
 * End to end: the web console's files as a real `csid server` with ACL
 * tokens serves them (src/api/server_api_ui.c), read with the test HTTP
 * client and no token:
 *
 * - /ui/ (index.html), console.js, console.css and icon.svg answer 200
 *   without a token, each with its content type, a strong ETag,
 *   "Cache-Control: no-cache", nosniff, no framing and the strict
 *   Content-Security-Policy (no inline script or style, nothing from
 *   another origin); If-None-Match with the ETag gets 304 and no body;
 *   HEAD gets the headers; /ui redirects to /ui/; an unknown file, a
 *   "/ui/../" path and a non-GET get our JSON errors.
 * - The page has no inline script or style (the policy would block it),
 *   and the script never turns a string into markup (no innerHTML,
 *   outerHTML, insertAdjacentHTML, document.write or eval).
 * - The API stays closed without a token; GET /v1/status/reconciler
 *   (the chart's samples) needs one and answers period_ms and samples
 *   with age_ms, queued and failing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server_proc.h"

#define T_TOKEN "console-assets-token-5e1"
#define T_WAIT_MS 60000
#define T_CSP                                                                       \
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " \
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/* An answer of the anonymous client (no token). */
struct t_answer {
	long status;
	char *body;
	size_t len;
	struct http_client *c; /* its headers: http_client_last_header */
};

struct t_env {
	struct server_proc s;
	struct http_client *anon;
};

/* One request without a token; header is one more request header line or NULL. */
static void t_do(struct t_env *t, const char *method, const char *path, const char *header,
		 struct t_answer *a)
{
	memset(a, 0, sizeof(*a));
	a->c = t->anon;
	http_client_extra_header(t->anon, header);
	a->status = http_client_do(t->anon, method, path, NULL, &a->body, NULL, 0);
	a->len = a->body ? strlen(a->body) : 0;
	if (!a->body)
		a->body = strdup("");
	assert_non_null(a->body);
	assert_true(a->status > 0);
}

static void t_free(struct t_answer *a)
{
	free(a->body);
	a->body = NULL;
}

static bool t_header(const struct t_answer *a, const char *name, char *buf, size_t cap)
{
	return http_client_last_header(a->c, name, buf, cap);
}

static void t_expect_header(const struct t_answer *a, const char *name, const char *want)
{
	char v[1024];

	if (!t_header(a, name, v, sizeof(v)))
		fprintf(stderr, "no %s in the answer\n", name);
	assert_true(t_header(a, name, v, sizeof(v)));
	if (strcmp(v, want) != 0)
		fprintf(stderr, "%s: %s, want %s\n", name, v, want);
	assert_string_equal(v, want);
}

static int t_setup(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));
	struct server_proc *s = t ? &t->s : NULL;

	*state = t;
	if (!t || server_proc_init(s) != 0 || !(t->anon = http_client_new(s->base)) ||
	    server_proc_write_config(
		s, NULL, "\"acl_tokens\": [{\"secret\": \"" T_TOKEN "\", \"write\": true}]") != 0 ||
	    server_proc_start(s) != 0 || !server_proc_wait_ready(s, T_WAIT_MS)) {
		if (s)
			server_proc_dump_log(s, "server setup failed");
		return -1;
	}
	return 0;
}

static int t_teardown(void **state)
{
	struct t_env *t = *state;

	if (t) {
		http_client_free(t->anon);
		server_proc_cleanup(&t->s);
		free(t);
	}
	return 0;
}

/* A file of the console: 200 with its type, the security headers and an ETag into etag. */
static void t_expect_file(struct t_env *s, const char *path, const char *type, char *etag,
			  size_t cap, struct t_answer *a)
{
	t_do(s, "GET", path, NULL, a);
	assert_int_equal(a->status, 200);
	assert_true(a->len > 100);
	t_expect_header(a, "Content-Type", type);
	t_expect_header(a, "Content-Security-Policy", T_CSP);
	t_expect_header(a, "X-Content-Type-Options", "nosniff");
	t_expect_header(a, "X-Frame-Options", "DENY");
	t_expect_header(a, "Referrer-Policy", "no-referrer");
	t_expect_header(a, "Cache-Control", "no-cache");
	assert_true(t_header(a, "ETag", etag, cap));
	assert_true(etag[0] == '"' && etag[strlen(etag) - 1] == '"' && strlen(etag) > 10);
}

static void test_console_files(void **state)
{
	struct t_env *s = *state;
	struct t_answer a;
	char etag[128], etag_js[128], inm[160], loc[64];
	static const char *const banned[] = {"innerHTML",      "outerHTML", "insertAdjacentHTML",
					     "document.write", "eval(",     "new Function"};

	t_expect_file(s, "/ui/", "text/html; charset=utf-8", etag, sizeof(etag), &a);
	assert_non_null(strstr(a.body, "<script src=\"console.js\" defer></script>"));
	/* No inline script (every <script> has a src) and no inline style. */
	for (const char *p = strstr(a.body, "<script"); p; p = strstr(p + 1, "<script"))
		assert_true(strncmp(p, "<script src=", 12) == 0);
	assert_null(strstr(a.body, "style="));
	assert_null(strstr(a.body, "<style"));
	assert_null(strstr(a.body, "onclick="));
	t_free(&a);

	t_expect_file(s, "/ui/console.js", "text/javascript; charset=utf-8", etag_js,
		      sizeof(etag_js), &a);
	assert_string_not_equal(etag, etag_js);
	for (size_t i = 0; i < sizeof(banned) / sizeof(banned[0]); i++) {
		if (strstr(a.body, banned[i]))
			fprintf(stderr, "console.js uses %s\n", banned[i]);
		assert_null(strstr(a.body, banned[i]));
	}
	assert_non_null(strstr(a.body, "sessionStorage"));
	assert_null(strstr(a.body, "localStorage"));
	t_free(&a);
	t_expect_file(s, "/ui/console.css", "text/css; charset=utf-8", inm, sizeof(inm), &a);
	t_free(&a);
	t_expect_file(s, "/ui/icon.svg", "image/svg+xml", inm, sizeof(inm), &a);
	t_free(&a);
	/* index.html by its name too. */
	t_expect_file(s, "/ui/index.html", "text/html; charset=utf-8", inm, sizeof(inm), &a);
	assert_string_equal(inm, etag);
	t_free(&a);

	/* Revalidation: the ETag gets 304 without a body, another one the file. */
	snprintf(inm, sizeof(inm), "If-None-Match: \"x\", %s", etag);
	t_do(s, "GET", "/ui/", inm, &a);
	assert_int_equal(a.status, 304);
	assert_int_equal(a.len, 0);
	t_expect_header(&a, "ETag", etag);
	t_free(&a);
	snprintf(inm, sizeof(inm), "If-None-Match: %s", etag_js);
	t_do(s, "GET", "/ui/", inm, &a);
	assert_int_equal(a.status, 200);
	t_free(&a);

	t_do(s, "HEAD", "/ui/console.js", NULL, &a);
	assert_int_equal(a.status, 200);
	assert_int_equal(a.len, 0);
	t_expect_header(&a, "Content-Type", "text/javascript; charset=utf-8");
	t_expect_header(&a, "ETag", etag_js);
	t_free(&a);

	t_do(s, "GET", "/ui", NULL, &a);
	assert_int_equal(a.status, 301);
	assert_true(t_header(&a, "Location", loc, sizeof(loc)));
	assert_string_equal(loc, "/ui/");
	t_free(&a);
}

static void test_console_errors(void **state)
{
	struct t_env *s = *state;
	struct t_answer a;
	char allow[64];

	t_do(s, "GET", "/ui/nope.js", NULL, &a);
	assert_int_equal(a.status, 404);
	t_expect_header(&a, "Content-Type", "application/json");
	assert_non_null(strstr(a.body, "\"code\":\"not_found\""));
	t_free(&a);
	/* The console's files are its only files: no path leads out of them. */
	t_do(s, "GET", "/ui/../v1/volumes", NULL, &a);
	assert_true(a.status == 404 || a.status == 403);
	assert_null(strstr(a.body, "\"volumes\""));
	t_free(&a);
	t_do(s, "GET", "/ui/%2e%2e/v1/volumes", NULL, &a);
	assert_int_equal(a.status, 404);
	t_free(&a);
	t_do(s, "GET", "/uix", NULL, &a);
	assert_int_equal(a.status, 403); /* not the console: an API path, closed without a token */
	t_free(&a);
	t_do(s, "PUT", "/ui/", NULL, &a);
	assert_int_equal(a.status, 405);
	assert_true(t_header(&a, "Allow", allow, sizeof(allow)));
	assert_string_equal(allow, "GET, HEAD");
	t_free(&a);
}

/* Polls GET /v1/status/reconciler (with the token) until the ticker took a sample. */
static bool t_has_sample(json_t *doc)
{
	return json_array_size(json_object_get(doc, "samples")) > 0;
}

static void test_console_api_closed(void **state)
{
	struct t_env *t = *state;
	struct server_proc *s = &t->s;
	struct t_answer a;
	json_t *doc = NULL, *x;

	t_do(t, "GET", "/v1/volumes", NULL, &a);
	assert_int_equal(a.status, 403);
	t_free(&a);
	t_do(t, "GET", "/v1/status/reconciler", NULL, &a);
	assert_int_equal(a.status, 403);
	t_free(&a);
	t_do(t, "GET", "/v1/event/stream", NULL, &a);
	assert_int_equal(a.status, 403);
	t_free(&a);

	http_client_token(s->http, T_TOKEN);
	assert_true(server_proc_wait_doc(s, "/v1/status/reconciler", t_has_sample, T_WAIT_MS));
	assert_int_equal(server_proc_http(s, "GET", "/v1/status/reconciler", NULL, &doc), 200);
	assert_int_equal(json_integer_value(json_object_get(doc, "period_ms")), 5000);
	x = json_array_get(json_object_get(doc, "samples"), 0);
	assert_true(json_is_integer(json_object_get(x, "age_ms")));
	assert_true(json_integer_value(json_object_get(x, "age_ms")) >= 0);
	assert_true(json_integer_value(json_object_get(x, "age_ms")) <= 10 * 60 * 1000);
	assert_true(json_is_integer(json_object_get(x, "queued")));
	assert_true(json_is_integer(json_object_get(x, "failing")));
	json_decref(doc);
	assert_int_equal(server_proc_http(s, "PUT", "/v1/status/reconciler", "{}", NULL), 405);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_console_files),
	    cmocka_unit_test(test_console_errors),
	    cmocka_unit_test(test_console_api_closed),
	};

	return cmocka_run_group_tests(tests, t_setup, t_teardown);
}
