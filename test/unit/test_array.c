/*
 * Unit tests of the growable array helper (src/util/array.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "csid.h"
#include "util/array.h"

static void test_array_grow(void **state)
{
	int *a = NULL;
	size_t cap = 0;

	assert_int_equal(array_grow((void **)&a, &cap, 0, sizeof(*a)), 0);
	assert_null(a);
	assert_int_equal(array_grow((void **)&a, &cap, 1, sizeof(*a)), 0);
	assert_int_equal(cap, 4);
	for (int i = 0; i < 4; i++)
		a[i] = i;
	assert_int_equal(array_grow((void **)&a, &cap, 5, sizeof(*a)), 0);
	assert_int_equal(cap, 8);
	assert_int_equal(a[3], 3); /* contents kept */
	assert_int_equal(array_grow((void **)&a, &cap, 100, sizeof(*a)), 0);
	assert_int_equal(cap, 128);
	/* Overflow is refused and leaves the array alone. */
	assert_int_equal(array_grow((void **)&a, &cap, SIZE_MAX / 2, sizeof(*a)), CSID_ENOMEM);
	assert_int_equal(cap, 128);
	assert_int_equal(array_grow((void **)&a, &cap, SIZE_MAX, 1), CSID_ENOMEM);
	assert_int_equal(array_grow((void **)&a, &cap, 200, 0), CSID_EINVAL);
	free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_array_grow),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
