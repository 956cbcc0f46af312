/*
 * Unit tests of src/util: the error table, errors with context, the arena,
 * decimal text.
 */
#include <setjmp.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "csi/csi_rpc.h"
#include "util/arena.h"
#include "util/decimal.h"
#include "util/err.h"
#include "util/strbuf.h"

/* decimal_text at the edges of its range. */
static void test_decimal(void **state)
{
	char buf[DECIMAL_MAX];

	(void)state;
	assert_int_equal(decimal_text(buf, 0), 1);
	assert_string_equal(buf, "0");
	assert_int_equal(decimal_text(buf, -45), 3);
	assert_string_equal(buf, "-45");
	assert_int_equal(decimal_text(buf, 9223372036854775807LL), 19);
	assert_string_equal(buf, "9223372036854775807");
	assert_int_equal(decimal_text(buf, -9223372036854775807LL - 1), 20);
	assert_string_equal(buf, "-9223372036854775808");
}

static void test_error_table(void **state)
{
	assert_string_equal(csid_strerror(0), "ok");
	assert_string_equal(csid_err_code(CSID_ENOTFOUND), "not_found");
	assert_int_equal(csid_err_http_status(CSID_ENOTFOUND), 404);
	assert_int_equal(csid_err_http_status(CSID_EINVAL), 400);
	assert_true(csid_err_retryable(CSID_EABORTED));
	assert_false(csid_err_retryable(CSID_EUNIMPL));
	assert_string_equal(csid_strerror(-1), "unknown error");
	assert_string_equal(csid_strerror(CSID_ERROR_END_), "unknown error");
	assert_int_equal(csid_err_http_status(12345), 500);
	/* Every code in the table has a distinct short name. */
	for (int a = CSID_ERROR_BASE_ + 1; a < CSID_ERROR_END_; a++)
		for (int b = a + 1; b < CSID_ERROR_END_; b++)
			assert_string_not_equal(csid_err_code(a), csid_err_code(b));
}

static void test_err_wrap(void **state)
{
	struct err e;

	err_clear(&e);
	assert_int_equal(err_set(&e, CSID_ETIMEDOUT, "plugin %s", "ebs"), CSID_ETIMEDOUT);
	err_wrap(&e, "controller publish on node-%d", 2);
	err_wrap(&e, "claim vol-7");
	assert_string_equal(e.msg, "claim vol-7: controller publish on node-2: plugin ebs");
	assert_int_equal(e.code, CSID_ETIMEDOUT);
	assert_int_equal(err_errno(&e, ENOENT, "open %s", "/x"), CSID_ENOTFOUND);
	assert_string_equal(e.msg, "open /x: No such file or directory");
	assert_int_equal(err_set(NULL, CSID_EIO, "ignored"), CSID_EIO);
}

static void test_arena(void **state)
{
	struct arena *a = arena_new();
	char *big;

	assert_non_null(a);
	for (int i = 0; i < 1000; i++) {
		uint64_t *p = arena_alloc(a, sizeof(*p) * 3);

		assert_non_null(p);
		assert_int_equal((uintptr_t)p % 16, 0);
		assert_int_equal(p[0] | p[1] | p[2], 0);
		p[2] = (uint64_t)i;
	}
	big = arena_alloc(a, 100000);
	assert_non_null(big);
	memset(big, 'x', 100000);
	assert_string_equal(arena_strdup(a, "vol"), "vol");
	assert_null(arena_strdup(a, NULL));
	assert_string_equal(arena_printf(a, "%s-%d", "vol", 7), "vol-7");
	arena_free(a);
	arena_free(NULL);
}

/* Arenas made and freed over and over (the thread's spare chunks go round). */
static void *arena_churn(void *arg)
{
	for (int round = 0; round < 50; round++) {
		struct arena *a = arena_new();

		if (!a)
			return "arena_new";
		for (int i = 0; i < 40; i++) {
			unsigned char *p = arena_alloc(a, 300);

			/* A chunk given back before hands out zeroed memory again. */
			for (int j = 0; p && j < 300; j++)
				if (p[j] != 0)
					return "dirty memory from a spare chunk";
			if (!p)
				return "arena_alloc";
			memset(p, 0xab, 300);
		}
		if (round % 2)
			arena_wipe_free(a);
		else
			arena_free(a);
	}
	/* The thread ends holding spares: its key's destructor frees them (LeakSanitizer). */
	return NULL;
}

static void test_arena_spares(void **state)
{
	pthread_t t[3];
	void *why[3];
	struct arena *a = arena_new(), *b;
	char *s;

	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&t[i], NULL, arena_churn, NULL), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(pthread_join(t[i], &why[i]), 0);
		assert_null(why[i]);
	}
	assert_null(arena_churn(NULL));
	/* A chunk freed by this thread after another made it. */
	assert_non_null(a);
	assert_non_null(arena_alloc(a, 3000));
	b = arena_new();
	assert_non_null(b);
	/* printf: one that fits the head's room, one past it, one of a chunk's size. */
	assert_string_equal(arena_printf(b, "%s/%d", "vol", 12), "vol/12");
	s = arena_printf(b, "%05000d", 7);
	assert_non_null(s);
	assert_int_equal(strlen(s), 5000);
	assert_int_equal(s[4999], '7');
	assert_int_equal(s[0], '0');
	s = arena_printf(b, "%04095d", 1);
	assert_non_null(s);
	assert_int_equal(strlen(s), 4095);
	assert_string_equal(arena_printf(b, "%s", ""), "");
	arena_free(a);
	arena_free(b);
}

static void test_rpc_table(void **state)
{
	const struct csi_rpc_info *i = csi_rpc_info(CSI_RPC_NODE_GET_INFO);
	const char *p = "/csi.v1.Controller/CreateVolume";

	assert_string_equal(i->path, "/csi.v1.Node/NodeGetInfo");
	assert_string_equal(i->request->name, "csi.v1.NodeGetInfoRequest");
	assert_string_equal(i->response->name, "csi.v1.NodeGetInfoResponse");
	assert_int_equal(csi_rpc_by_path(p, strlen(p)), CSI_RPC_CREATE_VOLUME);
	assert_int_equal(csi_rpc_by_path(p, strlen(p) - 1), -1);
	assert_int_equal(csi_rpc_by_name("Probe"), CSI_RPC_PROBE);
	assert_int_equal(csi_rpc_by_name("Nope"), -1);
	assert_null(csi_rpc_info(CSI_RPC_COUNT));
}

static void test_strbuf(void **state)
{
	struct strbuf b = {.max = 8};
	char data[] = "abcdefghij";

	assert_int_equal(strbuf_write(data, 1, 3, &b), 3);
	assert_int_equal(strbuf_write(data + 3, 3, 1, &b), 3);
	assert_string_equal(b.p, "abcdef");
	assert_false(b.too_big);
	/* Past the cap: nothing appended, and it says so. */
	assert_int_equal(strbuf_write(data, 1, 3, &b), 0);
	assert_true(b.too_big);
	assert_int_equal(b.len, 6);
	assert_string_equal(b.p, "abcdef");
	/* A size * count that overflows is refused, not wrapped. */
	assert_int_equal(strbuf_write(data, SIZE_MAX / 2, 3, &b), 0);
	assert_int_equal(strbuf_write(data, 1, 2, &b), 2);
	assert_int_equal(b.len, 8);
	strbuf_free(&b);
	assert_null(b.p);
	assert_int_equal(b.len, 0);
	strbuf_free(&b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_error_table),  cmocka_unit_test(test_err_wrap),
	    cmocka_unit_test(test_decimal),      cmocka_unit_test(test_arena),
	    cmocka_unit_test(test_arena_spares), cmocka_unit_test(test_strbuf),
	    cmocka_unit_test(test_rpc_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
