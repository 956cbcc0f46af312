/*
 * The "http" config section (util/conf_http.c), through the agent's
 * config parser: every key read into its field, defaults left at zero,
 * and each bad value refused with a message naming its key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "agent/config.h"
#include "api/http.h"

static struct config *parse(const char *text, struct err *e)
{
	struct config *cfg = NULL;

	err_clear(e);
	if (config_parse(text, strlen(text), &cfg, e) != 0)
		return NULL;
	return cfg;
}

static void test_all_keys(void **state)
{
	struct err e;
	struct http_limits l;
	struct config *cfg =
	    parse("{\"http\": {\"max_conns_per_client\": 7, \"max_conns\": 900, \"workers\": 3,"
		  " \"header_timeout\": \"2s\", \"idle_timeout\": \"1m\","
		  " \"tls_cert_file\": \"/c.pem\", \"tls_key_file\": \"/k.pem\","
		  " \"tls_client_ca_file\": \"/ca.pem\", \"ca_file\": \"/ca2.pem\","
		  " \"client_cert_file\": \"/cc.pem\", \"client_key_file\": \"/ck.pem\","
		  " \"allow_plaintext_secrets\": true}}",
		  &e);

	assert_non_null(cfg);
	assert_int_equal(cfg->http.max_conns_per_client, 7);
	assert_int_equal(cfg->http.header_timeout_s, 2);
	assert_int_equal(cfg->http.idle_timeout_s, 60);
	assert_string_equal(cfg->http.tls_client_ca_file, "/ca.pem");
	assert_string_equal(cfg->http.client_key_file, "/ck.pem");
	assert_true(cfg->http.allow_plaintext_secrets);
	http_limits_from_config(&cfg->http, &l);
	assert_int_equal(l.per_client, 7);
	assert_int_equal(l.max_conns, 900);
	assert_int_equal(l.workers, 3);
	config_free(cfg);
	cfg = parse("{}", &e);
	assert_non_null(cfg);
	assert_int_equal(cfg->http.max_conns_per_client, 0);
	assert_null(cfg->http.tls_cert_file);
	assert_false(cfg->http.allow_plaintext_secrets);
	config_free(cfg);
}

static void expect_refused(const char *text, const char *words)
{
	struct err e;
	struct config *cfg = parse(text, &e);

	assert_null(cfg);
	if (!strstr(e.msg, words))
		fail_msg("%s: message \"%s\" lacks \"%s\"", text, e.msg, words);
}

static void test_refused(void **state)
{
	expect_refused("{\"http\": 3}", "http: expected an object");
	expect_refused("{\"http\": {\"max_conn\": 3}}", "http: unknown key");
	expect_refused("{\"http\": {\"max_conns_per_client\": 0}}", "http.max_conns_per_client");
	expect_refused("{\"http\": {\"workers\": \"4\"}}", "http.workers");
	expect_refused("{\"http\": {\"header_timeout\": \"10ms\"}}", "http.header_timeout");
	expect_refused("{\"http\": {\"idle_timeout\": 5}}", "http.idle_timeout");
	expect_refused("{\"http\": {\"tls_cert_file\": \"/c.pem\"}}", "go together");
	expect_refused("{\"http\": {\"client_key_file\": \"/k.pem\"}}", "go together");
	expect_refused("{\"http\": {\"tls_client_ca_file\": \"/ca.pem\"}}",
		       "needs http.tls_cert_file");
	expect_refused("{\"http\": {\"ca_file\": \"\"}}", "http.ca_file");
	expect_refused("{\"http\": {\"allow_plaintext_secrets\": 1}}", "allow_plaintext_secrets");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_all_keys),
	    cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
