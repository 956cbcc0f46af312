/*
 * Unit tests of the JSON pull reader (src/util/jsonr.c): a walk over
 * every kind of value, strings decoded as jansson decodes them (escapes,
 * surrogate pairs, UTF-8, \u0000 kept), integers at their limits, and
 * the texts it refuses, each with its reason and place: bad grammar,
 * bad strings, trailing text, nesting past the limit. The random
 * comparison with jansson is the fuzz target's (fuzz_json_reader).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "util/jsonr.h"

/* Whether text walks whole; *err its error (NULL when it does). */
static bool walks(const char *text, const char **err)
{
	struct jsonr r;
	bool ok;

	jsonr_init(&r, text, strlen(text));
	ok = jsonr_skip(&r) == 0 && jsonr_end(&r) == 0;
	*err = r.err;
	return ok;
}

static void test_walk(void **state)
{
	const char *text = " {\"a\" : [1, -2, 3.5e-3, true, false, null, \"x\"], \"b\": {}, "
			   "\"c\": [], \"d\": {\"e\": [[{}]]}}\n";
	struct arena *a = arena_new();
	char key[8], *s;
	size_t n = 0, m = 0, klen, len;
	struct jsonr r;
	int64_t x;
	bool b;

	(void)state;
	jsonr_init(&r, text, strlen(text));
	assert_int_equal(jsonr_peek(&r), JSONR_OBJECT);
	assert_int_equal(jsonr_open(&r), 0);
	assert_int_equal(jsonr_key(&r, &n, key, sizeof(key), &klen), 1);
	assert_string_equal(key, "a");
	assert_int_equal(jsonr_peek(&r), JSONR_ARRAY);
	assert_int_equal(jsonr_open(&r), 0);
	assert_int_equal(jsonr_item(&r, &m), 1);
	assert_int_equal(jsonr_int(&r, &x), 0);
	assert_int_equal(x, 1);
	assert_int_equal(jsonr_item(&r, &m), 1);
	assert_int_equal(jsonr_int(&r, &x), 0);
	assert_int_equal(x, -2);
	assert_int_equal(jsonr_item(&r, &m), 1);
	assert_int_equal(jsonr_int(&r, &x), 1); /* a fraction: taken, not an integer */
	assert_int_equal(jsonr_item(&r, &m), 1);
	assert_int_equal(jsonr_peek(&r), JSONR_BOOL);
	assert_int_equal(jsonr_bool(&r, &b), 0);
	assert_true(b);
	assert_int_equal(jsonr_item(&r, &m), 1);
	assert_int_equal(jsonr_bool(&r, &b), 0);
	assert_false(b);
	assert_int_equal(jsonr_item(&r, &m), 1);
	assert_int_equal(jsonr_peek(&r), JSONR_NULL);
	assert_int_equal(jsonr_literal(&r), 0);
	assert_int_equal(jsonr_item(&r, &m), 1);
	assert_int_equal(jsonr_str(&r, a, &s, &len), 0);
	assert_string_equal(s, "x");
	assert_int_equal(jsonr_item(&r, &m), 0);
	assert_int_equal(m, 7);
	/* The rest is skipped whole. */
	while (jsonr_key(&r, &n, key, sizeof(key), &klen) == 1)
		assert_int_equal(jsonr_skip(&r), 0);
	assert_null(r.err);
	assert_int_equal(n, 4);
	assert_int_equal(jsonr_end(&r), 0);
	arena_free(a);
}

/* The string value of text decoded; its length in *len. */
static char *str_of(struct arena *a, const char *text, size_t *len)
{
	struct jsonr r;
	char *s = NULL;

	jsonr_init(&r, text, strlen(text));
	assert_int_equal(jsonr_peek(&r), JSONR_STRING);
	assert_int_equal(jsonr_str(&r, a, &s, len), 0);
	assert_int_equal(jsonr_end(&r), 0);
	return s;
}

static void test_strings(void **state)
{
	struct arena *a = arena_new();
	char key[4];
	size_t len, n = 0;
	struct jsonr r;

	(void)state;
	assert_string_equal(str_of(a, "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", &len),
			    "a\"b\\c/d\b\f\n\r\t");
	assert_string_equal(str_of(a, "\"\\u00e9\\u20AC\\ud83d\\ude00\"", &len),
			    "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
	assert_string_equal(str_of(a, "\"caf\xc3\xa9\"", &len), "caf\xc3\xa9");
	assert_memory_equal(str_of(a, "\"a\\u0000b\"", &len), "a\0b", 4);
	assert_int_equal(len, 3);
	assert_string_equal(str_of(a, "\"\"", &len), "");
	/* A key longer than the caller's buffer: its length, no text. */
	jsonr_init(&r, "{\"long key\":1}", 14);
	assert_int_equal(jsonr_open(&r), 0);
	assert_int_equal(jsonr_key(&r, &n, key, sizeof(key), &len), 1);
	assert_int_equal(len, 8);
	arena_free(a);
}

static void test_integers(void **state)
{
	static const struct {
		const char *text;
		int rc;
		int64_t v;
	} cases[] = {
	    {"0", 0, 0},
	    {"-0", 0, 0},
	    {"9223372036854775807", 0, INT64_MAX},
	    {"-9223372036854775808", 0, INT64_MIN},
	    {"9223372036854775808", 1, 0},
	    {"-9223372036854775809", 1, 0},
	    {"184467440737095516160", 1, 0},
	    {"1e3", 1, 0},
	    {"1.0", 1, 0},
	};
	struct jsonr r;
	int64_t x;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		jsonr_init(&r, cases[i].text, strlen(cases[i].text));
		assert_int_equal(jsonr_peek(&r), JSONR_NUMBER);
		assert_int_equal(jsonr_int(&r, &x), cases[i].rc);
		if (!cases[i].rc)
			assert_true(x == cases[i].v);
		assert_int_equal(jsonr_end(&r), 0);
	}
}

static void test_refused(void **state)
{
	static const struct {
		const char *text, *why;
	} cases[] = {
	    {"", "unexpected end of text"},
	    {"{", "unexpected end of text"},
	    {"{\"a\" 1}", "expected ':'"},
	    {"{\"a\":1,}", "expected a string as key"},
	    {"{\"a\":1 \"b\":2}", "expected ',' or '}'"},
	    {"[1 2]", "expected ',' or ']'"},
	    {"[1,]", "invalid token"},
	    {"{a:1}", "expected a string as key"},
	    {"[01]", "invalid number: a leading zero"},
	    {"[1.]", "invalid number: no digit after '.'"},
	    {"[1e]", "invalid number: no digit in the exponent"},
	    {"[-]", "invalid number"},
	    {"[tru]", "invalid literal"},
	    {"[nul]", "invalid literal"},
	    {"\"abc", "unterminated string"},
	    {"\"a\tb\"", "control character in a string"},
	    {"\"\\x\"", "invalid escape in a string"},
	    {"\"\\u12g4\"", "invalid \\u escape"},
	    {"\"\\udc00\"", "invalid \\u escape: a lone low surrogate"},
	    {"\"\\ud800x\"", "invalid \\u escape: a high surrogate alone"},
	    {"\"\\ud800\\u0041\"", "invalid \\u escape: a high surrogate alone"},
	    {"\"\xc3\"", "invalid UTF-8 in a string"},
	    {"\"\xed\xa0\x80\"", "invalid UTF-8 in a string"},
	    {"{} x", "end of text expected"},
	};
	const char *err;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_false(walks(cases[i].text, &err));
		assert_non_null(err);
		if (strcmp(err, cases[i].why) != 0)
			fail_msg("%s: %s, expected %s", cases[i].text, err, cases[i].why);
	}
}

static void test_where(void **state)
{
	const char *text = "{\n  \"a\": [1,\n   2,, 3]}";
	struct jsonr r;
	int line, column;

	(void)state;
	jsonr_init(&r, text, strlen(text));
	assert_int_not_equal(jsonr_skip(&r), 0);
	jsonr_where(&r, &line, &column);
	assert_int_equal(line, 3);
	assert_int_equal(column, 6);
	/* Later calls keep failing with the first error. */
	assert_int_equal(jsonr_peek(&r), JSONR_BAD);
	assert_int_equal(jsonr_end(&r), -1);
	assert_string_equal(r.err, "invalid token");
}

static void test_depth(void **state)
{
	size_t n = 2 * JSONR_DEPTH_MAX + 4;
	char *deep = malloc(n + 1);
	const char *err;

	(void)state;
	assert_non_null(deep);
	memset(deep, '[', JSONR_DEPTH_MAX);
	memset(deep + JSONR_DEPTH_MAX, ']', JSONR_DEPTH_MAX);
	deep[2 * JSONR_DEPTH_MAX] = '\0';
	assert_true(walks(deep, &err));
	memset(deep, '[', JSONR_DEPTH_MAX + 1);
	memset(deep + JSONR_DEPTH_MAX + 1, ']', JSONR_DEPTH_MAX + 1);
	deep[2 * JSONR_DEPTH_MAX + 2] = '\0';
	assert_false(walks(deep, &err));
	assert_string_equal(err, "nested too deeply");
	free(deep);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_walk),     cmocka_unit_test(test_strings),
	    cmocka_unit_test(test_integers), cmocka_unit_test(test_refused),
	    cmocka_unit_test(test_where),    cmocka_unit_test(test_depth),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
