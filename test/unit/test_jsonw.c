/*
 * Unit tests of the JSON text writer (src/util/jsonw.c): its strings are
 * byte for byte what jansson's compact dump writes (every single byte,
 * random valid UTF-8, every escape, at every place of long strings), invalid UTF-8 is written with
 * '?' for its non-ASCII bytes (jansson refuses it), separators in nested objects and arrays, a
 * buffer that grows many times, and failures that hand nothing over (nesting too deep).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "util/jsonw.h"

/* What the writer writes for the one string s. */
static char *w_string(const char *s)
{
	struct jsonw w;
	char *out = NULL;
	size_t len = 0;

	jsonw_init(&w, 4);
	jsonw_str(&w, s);
	assert_int_equal(jsonw_finish(&w, &out, &len), 0);
	assert_int_equal(strlen(out), len);
	return out;
}

/* What jansson writes for the string s (NULL when it refuses s). */
static char *j_string(const char *s)
{
	json_t *j = json_string(s);
	char *out = j ? json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;

	json_decref(j);
	return out;
}

static void expect_same(const char *s)
{
	char *mine = w_string(s), *theirs = j_string(s);

	assert_non_null(theirs);
	assert_string_equal(mine, theirs);
	free(mine);
	free(theirs);
}

static void test_every_byte(void **state)
{
	char s[4];

	(void)state;
	for (int c = 1; c < 0x80; c++) {
		snprintf(s, sizeof(s), "a%cb", c);
		expect_same(s);
	}
	expect_same("");
	expect_same("\"quoted\\\" /slash/ \b\f\n\r\t \x01\x1f\x7f end");
}

/* One random code point as UTF-8 into out; returns its length. */
static size_t rand_utf8(unsigned *seed, char *out)
{
	uint32_t cp;

	do {
		switch (rand_r(seed) % 4) {
		case 0:
			cp = (uint32_t)(rand_r(seed) % 0x80);
			break;
		case 1:
			cp = 0x80 + (uint32_t)(rand_r(seed) % (0x800 - 0x80));
			break;
		case 2:
			cp = 0x800 + (uint32_t)(rand_r(seed) % (0x10000 - 0x800));
			break;
		default:
			cp = 0x10000 + (uint32_t)(rand_r(seed) % (0x110000 - 0x10000));
		}
	} while (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff));
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xc0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xe0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		out[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	out[0] = (char)(0xf0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	out[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * Every byte that needs an escape, and a UTF-8 sequence, at every place
 * of strings of every length up to 41 (the eight-at-a-time copy and the
 * last bytes checked at once, whatever their number), alone and twice.
 */
static void test_long_strings(void **state)
{
	static const char *const special[] = {
	    "\"", "\\", "\n", "\x01", "\x1f", "\xc3\xa9", "\xf0\x9f\x98\x80"};
	char s[64];

	(void)state;
	for (size_t k = 0; k < sizeof(special) / sizeof(special[0]); k++) {
		size_t sl = strlen(special[k]);

		for (size_t n = sl; n <= 41; n++)
			for (size_t at = 0; at + sl <= n; at++) {
				memset(s, 'x', n);
				memcpy(s + at, special[k], sl);
				s[n] = '\0';
				expect_same(s);
				/* Twice when both fit apart (a cut sequence is not UTF-8). */
				if (at + 2 * sl <= n) {
					memcpy(s + n - sl, special[k], sl);
					expect_same(s);
				}
			}
	}
	/* 0x20 after a byte whose subtraction borrows, and 0x7f: plain. */
	expect_same("\x20\x20\x20\x20\x20\x20\x20\x20\x7f\x7f\x7f\x7f\x7f\x7f\x7f\x7f!");
}

/* Literal keys write what jsonw_key and the members write. */
static void test_literal_keys(void **state)
{
	struct jsonw a, b;
	char *ta = NULL, *tb = NULL;
	size_t la = 0, lb = 0;

	(void)state;
	jsonw_init(&a, 0);
	jsonw_init(&b, 0);
	jsonw_object_open(&a);
	jsonw_object_open(&b);
	jsonw_member_str(&a, "id", "v1");
	jsonw_lmember_str(&b, JSONW_KEY("id"), "v1");
	jsonw_member_str(&a, "gone", NULL);
	jsonw_lmember_str(&b, JSONW_KEY("gone"), NULL);
	jsonw_member_int(&a, "n", -42);
	jsonw_lmember_int(&b, JSONW_KEY("n"), -42);
	jsonw_member_bool(&a, "ok", true);
	jsonw_lmember_bool(&b, JSONW_KEY("ok"), true);
	jsonw_key(&a, "list");
	jsonw_lkey(&b, JSONW_KEY("list"));
	jsonw_array_open(&a);
	jsonw_array_open(&b);
	jsonw_array_close(&a);
	jsonw_array_close(&b);
	jsonw_object_close(&a);
	jsonw_object_close(&b);
	assert_int_equal(jsonw_finish(&a, &ta, &la), 0);
	assert_int_equal(jsonw_finish(&b, &tb, &lb), 0);
	assert_string_equal(ta, "{\"id\":\"v1\",\"n\":-42,\"ok\":true,\"list\":[]}");
	assert_string_equal(tb, ta);
	assert_int_equal(lb, la);
	free(ta);
	free(tb);
}

static void test_random_utf8(void **state)
{
	unsigned seed = 7;
	char s[256];

	(void)state;
	for (int round = 0; round < 2000; round++) {
		size_t n = 0, want = (size_t)(rand_r(&seed) % 40);

		for (size_t i = 0; i < want; i++)
			n += rand_utf8(&seed, s + n);
		s[n] = '\0';
		expect_same(s);
	}
}

static void test_invalid_utf8(void **state)
{
	/* Cut, overlong, surrogate, above U+10FFFF, lone continuation, 0xff. */
	static const char *const bad[] = {
	    "x\xc3",  "\xc0\xaf", "\xe0\x80\xaf",         "\xed\xa0\x80", "\xf4\x90\x80\x80",
	    "a\x80z", "\xff\xfe", "ok \xc3\xa9 then \xff"};
	static const char *const want[] = {"\"x?\"",   "\"??\"",  "\"???\"", "\"???\"",
					   "\"????\"", "\"a?z\"", "\"??\"",  "\"ok ?? then ?\""};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *mine = w_string(bad[i]), *theirs = j_string(bad[i]);

		assert_null(theirs);
		assert_string_equal(mine, want[i]);
		free(mine);
	}
}

static void test_structure(void **state)
{
	struct jsonw w;
	char *out = NULL, *again;
	size_t len = 0;
	json_t *j;

	(void)state;
	jsonw_init(&w, 1);
	jsonw_object_open(&w);
	jsonw_member_str(&w, "a", "x");
	jsonw_member_str(&w, "skipped", NULL);
	jsonw_member_int(&w, "n", -9223372036854775807LL - 1);
	jsonw_member_bool(&w, "t", true);
	jsonw_key(&w, "empty");
	jsonw_object_open(&w);
	jsonw_object_close(&w);
	jsonw_key(&w, "list");
	jsonw_array_open(&w);
	jsonw_int(&w, 1);
	jsonw_array_open(&w);
	jsonw_array_close(&w);
	jsonw_object_open(&w);
	jsonw_member_bool(&w, "f", false);
	jsonw_key(&w, "k\xff");
	jsonw_str(&w, NULL);
	jsonw_object_close(&w);
	jsonw_raw_value(&w, "{\"r\":[]}", 8);
	jsonw_str(&w, "s");
	jsonw_array_close(&w);
	jsonw_member_int(&w, "last", 0);
	jsonw_object_close(&w);
	assert_int_equal(jsonw_finish(&w, &out, &len), 0);
	assert_string_equal(out, "{\"a\":\"x\",\"n\":-9223372036854775808,\"t\":true,\"empty\":{},"
				 "\"list\":[1,[],{\"f\":false,\"k?\":null},{\"r\":[]},\"s\"],"
				 "\"last\":0}");
	/* jansson reads it, and writes the same bytes back. */
	j = json_loadb(out, len, 0, NULL);
	assert_non_null(j);
	again = json_dumps(j, JSON_COMPACT);
	assert_string_equal(again, out);
	free(again);
	json_decref(j);
	free(out);
	/* finish empties the writer: freeing it after is harmless. */
	jsonw_free(&w);
}

static void test_growth(void **state)
{
	struct jsonw w;
	char key[32], *out = NULL;
	size_t len = 0;
	json_t *j;

	(void)state;
	jsonw_init(&w, 1);
	jsonw_object_open(&w);
	for (int i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "key-%d", i);
		jsonw_member_str(&w, key, "value with \"quotes\" and \xc3\xa9");
	}
	jsonw_object_close(&w);
	assert_int_equal(jsonw_finish(&w, &out, &len), 0);
	j = json_loadb(out, len, 0, NULL);
	assert_non_null(j);
	assert_int_equal(json_object_size(j), 5000);
	assert_string_equal(json_string_value(json_object_get(j, "key-4999")),
			    "value with \"quotes\" and \xc3\xa9");
	json_decref(j);
	free(out);
}

static void test_too_deep(void **state)
{
	struct jsonw w;
	char *out = NULL;
	size_t len = 0;

	(void)state;
	jsonw_init(&w, 0);
	for (int i = 0; i < JSONW_DEPTH_MAX; i++)
		jsonw_array_open(&w);
	assert_false(w.failed);
	jsonw_array_open(&w);
	assert_true(w.failed);
	jsonw_int(&w, 1);
	assert_int_equal(jsonw_finish(&w, &out, &len), -1);
	assert_null(out);
	assert_null(w.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_byte),   cmocka_unit_test(test_random_utf8),
	    cmocka_unit_test(test_invalid_utf8), cmocka_unit_test(test_structure),
	    cmocka_unit_test(test_growth),       cmocka_unit_test(test_too_deep),
	    cmocka_unit_test(test_long_strings), cmocka_unit_test(test_literal_keys),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
