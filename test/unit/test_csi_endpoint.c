/*
 * Endpoint validation (csi_endpoint_parse): the accepted spellings, the
 * unix socket length limit at its exact boundary, and every malformed form
 * rejected with a message; plus client creation refusing bad endpoints
 * without touching gRPC state that would leak.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "csi/csi_client.h"

struct te_case {
	const char *endpoint;
	const char *path; /* NULL: rejected */
};

static const struct te_case te_cases[] = {
    {"unix:///run/csi/csi.sock", "/run/csi/csi.sock"},
    {"unix:/run/csi/csi.sock", "/run/csi/csi.sock"},
    {"/run/csi/csi.sock", "/run/csi/csi.sock"},
    {"/a", "/a"},
    {"/dir with space/%41?#.sock", "/dir with space/%41?#.sock"},
    {"/x:y.sock", "/x:y.sock"},
    {"", NULL},
    {"unix:", NULL},
    {"unix://", NULL},
    {"unix:///", "/"},
    {"csi.sock", NULL},
    {"./csi.sock", NULL},
    {"unix:csi.sock", NULL},
    {"unix://csi.sock", NULL},
    {"unix://host/csi.sock", NULL},
    {"tcp://127.0.0.1:10000", NULL},
    {"127.0.0.1:10000", NULL},
    {"dns:///plugin:443", NULL},
    {"unix-abstract:csi", NULL},
    {"/tmp/tab\there", NULL},
    {"/tmp/del\x7f", NULL},
};

static void test_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(te_cases) / sizeof(te_cases[0]); i++) {
		const struct te_case *c = &te_cases[i];
		char path[108];
		struct err e;
		int rc;

		err_clear(&e);
		memset(path, 0, sizeof(path));
		rc = csi_endpoint_parse(c->endpoint, path, &e);
		if (c->path) {
			if (rc != 0)
				fail_msg("%s: rejected: %s", c->endpoint, e.msg);
			assert_string_equal(path, c->path);
		} else {
			if (rc != CSID_EINVAL)
				fail_msg("%s: accepted as %s", c->endpoint, path);
			assert_int_equal(e.code, CSID_EINVAL);
			assert_non_null(strstr(e.msg, "endpoint"));
		}
	}
}

static void test_length_limit(void **state)
{
	char ep[256], path[108];
	struct err e;

	(void)state;
	/* A unix socket path holds 107 bytes plus the NUL. */
	memset(ep, 'p', sizeof(ep));
	ep[0] = '/';
	ep[107] = '\0';
	assert_int_equal(csi_endpoint_parse(ep, path, &e), 0);
	assert_int_equal(strlen(path), 107);
	ep[107] = 'p';
	ep[108] = '\0';
	assert_int_equal(csi_endpoint_parse(ep, path, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "108 bytes"));
	/* The prefix does not count against the limit. */
	memmove(ep + 7, ep, 108);
	memcpy(ep, "unix://", 7);
	ep[7 + 107] = '\0';
	assert_int_equal(csi_endpoint_parse(ep, path, &e), 0);
	ep[7 + 107] = 'p';
	ep[7 + 200] = '\0';
	assert_int_equal(csi_endpoint_parse(ep, path, &e), CSID_EINVAL);
	assert_int_equal(csi_endpoint_parse(NULL, path, &e), CSID_EINVAL);
	/* A NULL err is allowed. */
	assert_int_equal(csi_endpoint_parse("rel", path, NULL), CSID_EINVAL);
}

static void test_client_refuses(void **state)
{
	struct csi_client *c = (struct csi_client *)&c;
	struct err e;

	(void)state;
	assert_int_equal(csi_client_grpc_new("relative.sock", &c, &e), CSID_EINVAL);
	assert_null(c);
	assert_int_equal(csi_client_grpc_new("tcp://h:1", &c, &e), CSID_EINVAL);
	assert_null(c);
	csi_client_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cases),
	    cmocka_unit_test(test_length_limit),
	    cmocka_unit_test(test_client_refuses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
