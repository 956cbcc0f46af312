/*
 * The base64 codec (src/util/base64.c): RFC 4648's test vectors both
 * ways, every byte value round-trips, and text that is not base64
 * (length, letters, padding in the middle) is refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "csid.h"
#include "util/base64.h"

static void test_base64_vectors(void **state)
{
	static const char *const plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
	static const char *const coded[] = {"",         "Zg==",     "Zm8=",    "Zm9v",
					    "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};

	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		size_t len, n;
		char *t = base64_encode(plain[i], strlen(plain[i]), &len), *back;

		assert_string_equal(t, coded[i]);
		assert_int_equal(len, strlen(coded[i]));
		assert_int_equal(base64_decode(t, len, &back, &n), 0);
		assert_int_equal(n, strlen(plain[i]));
		assert_string_equal(back, plain[i]);
		free(t);
		free(back);
	}
}

static void test_base64_bytes(void **state)
{
	unsigned char all[256];
	size_t len, n;
	char *t, *back;

	for (int i = 0; i < 256; i++)
		all[i] = (unsigned char)(255 - i);
	t = base64_encode(all, sizeof(all), &len);
	assert_int_equal(base64_decode(t, len, &back, &n), 0);
	assert_int_equal(n, sizeof(all));
	assert_memory_equal(back, all, sizeof(all));
	free(t);
	free(back);
}

static void test_base64_refused(void **state)
{
	static const char *const bad[] = {
	    "Zg=", "Zm9", "Z===", "Zg==Zg==", "Zm9v!A==", "Zm 9v", "=Zg="};
	char *out = (char *)1;
	size_t n = 7;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(base64_decode(bad[i], strlen(bad[i]), &out, &n), CSID_EPROTO);
		assert_null(out);
		assert_int_equal(n, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_base64_vectors),
	    cmocka_unit_test(test_base64_bytes),
	    cmocka_unit_test(test_base64_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
