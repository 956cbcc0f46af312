/*
 * TLS and authentication at the network edge, with the real `csid server`
 * and `csid agent`, and certificates made with `openssl` at test time (a
 * CA, a server certificate for 127.0.0.1, a client certificate, an expired
 * one, and one of another CA):
 *   - the server's API over HTTPS requiring client certificates: a client
 *     with the right CA and certificate is served; one that trusts another
 *     CA refuses the server; no certificate, an unknown one or an expired
 *     one gets 401 with what is wrong, and nothing is served (not even a
 *     404); a read-only token may not write (403); nothing secret in the
 *     log; a TLS handshake that never finishes is cut at the header
 *     timeout while others are served; a client certificate chain of
 *     10,000 entries is refused in the handshake, quickly and without
 *     the server holding it, and others are served after;
 *   - the agent's own HTTPS listener with client certificates: a
 *     certificate of the CA logs in without a token, none or a stranger's
 *     gets 401;
 *   - node-stage secrets over plaintext TCP from a non-loopback address
 *     are refused with how to fix it (when the host has such an address);
 *   - the agent's TCP API serves nothing without its token (403 saying
 *     what is needed), an unknown token gets 403, the token gets 200; its
 *     unix socket is as before.
 */
#include <setjmp.h>
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_proc.h"
#include "http_client.h"
#include "proc_stat.h"
#include "server_proc.h"
#include "test_pki.h"

#define T_READ_TOKEN "read-token-3f9a1c"
#define T_WRITE_TOKEN "write-token-8d2e7b"
#define T_AGENT_TOKEN "agent-token-5c1b9e"

struct fixture {
	struct server_proc srv;
	char pki[SERVER_PROC_PATH + 16];
	char base[96];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char extra[1024];

	if (!f || server_proc_init(&f->srv) != 0)
		return -1;
	snprintf(f->pki, sizeof(f->pki), "%s/pki", f->srv.dir);
	if (test_pki_make(f->pki) != 0)
		goto fail;
	snprintf(extra, sizeof(extra),
		 "\"acl_tokens\": [{\"secret\": \"" T_READ_TOKEN "\", \"write\": false}, "
		 "{\"secret\": \"" T_WRITE_TOKEN "\", \"write\": true}], "
		 "\"http\": {\"tls_cert_file\": \"%s/server.pem\", \"tls_key_file\": "
		 "\"%s/server.key\", \"tls_client_ca_file\": \"%s/ca.pem\", "
		 "\"header_timeout\": \"1s\"}",
		 f->pki, f->pki, f->pki);
	if (server_proc_write_config(&f->srv, NULL, extra) != 0 || server_proc_start(&f->srv) != 0)
		goto fail;
	snprintf(f->base, sizeof(f->base), "https://%s", f->srv.addr);
	*state = f;
	return 0;
fail:
	server_proc_cleanup(&f->srv);
	free(f);
	return -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	server_proc_stop(&f->srv, SIGTERM, 10000);
	server_proc_cleanup(&f->srv);
	free(f);
	return 0;
}

/* One request over HTTPS with the given CA and client certificate name (NULL: none). */
static long tls_req(struct fixture *f, const char *ca, const char *cert, const char *token,
		    const char *method, const char *path, const char *body, char **out)
{
	struct http_client *c = http_client_new(f->base);
	char cap[300], certp[300], keyp[300];
	long st;

	assert_non_null(c);
	snprintf(cap, sizeof(cap), "%s/%s.pem", f->pki, ca);
	if (cert) {
		snprintf(certp, sizeof(certp), "%s/%s.pem", f->pki, cert);
		snprintf(keyp, sizeof(keyp), "%s/%s.key", f->pki, cert);
	}
	http_client_tls(c, cap, cert ? certp : NULL, cert ? keyp : NULL);
	http_client_token(c, token);
	st = http_client_do(c, method, path, body, out, NULL, 10000);
	http_client_free(c);
	return st;
}

static bool tls_ready(void *ctx)
{
	return tls_req(ctx, "ca", "client", NULL, "GET", "/v1/status/health", NULL, NULL) == 200;
}

/* Polls health over HTTPS with the client certificate until it answers 200. */
static bool wait_tls_ready(struct fixture *f)
{
	if (agent_proc_poll(tls_ready, f, 30000))
		return true;
	server_proc_dump_log(&f->srv, "https server never ready");
	return false;
}

static void expect_401(struct fixture *f, const char *cert, const char *path, const char *words)
{
	char *text = NULL;
	long st = tls_req(f, "ca", cert, T_WRITE_TOKEN, "GET", path, NULL, &text);

	assert_int_equal(st, 401);
	assert_non_null(text);
	if (!strstr(text, words))
		fail_msg("%s with %s: %s lacks \"%s\"", path, cert ? cert : "no certificate", text,
			 words);
	assert_non_null(strstr(text, "\"code\":\"unauthenticated\""));
	free(text);
}

static void test_https_client_certs(void **state)
{
	struct fixture *f = *state;
	char *text = NULL;

	assert_true(wait_tls_ready(f));
	/* The right CA and certificate, and a token: served. */
	assert_int_equal(tls_req(f, "ca", "client", T_READ_TOKEN, "GET", "/v1/volumes", NULL, NULL),
			 200);
	/* A client trusting another CA refuses the server: no answer at all. */
	assert_int_equal(
	    tls_req(f, "other", "client", T_READ_TOKEN, "GET", "/v1/volumes", NULL, NULL), -1);
	/* Without a certificate, with one of another CA or an expired one: 401, nothing served. */
	expect_401(f, NULL, "/v1/volumes", "none presented");
	expect_401(f, "stranger", "/v1/volumes", "not signed by the configured CA");
	expect_401(f, "expired", "/v1/volumes", "expired");
	expect_401(f, NULL, "/v1/no-such-thing", "client certificate");
	expect_401(f, NULL, "/v1/status/health", "client certificate");
	/* A read-only token may not write; a write token may. */
	assert_int_equal(tls_req(f, "ca", "client", T_READ_TOKEN, "PUT", "/v1/node/n1",
				 "{\"plugins\": []}", &text),
			 403);
	assert_non_null(strstr(text, "may only read"));
	free(text);
	assert_int_equal(tls_req(f, "ca", "client", T_WRITE_TOKEN, "PUT", "/v1/node/n1",
				 "{\"plugins\": []}", NULL),
			 200);
	/* Nothing secret in the log: neither the tokens nor the keys. */
	assert_false(server_proc_log_has(&f->srv, T_READ_TOKEN));
	assert_false(server_proc_log_has(&f->srv, T_WRITE_TOKEN));
	assert_false(server_proc_log_has(&f->srv, "PRIVATE KEY"));
	assert_true(server_proc_log_has(&f->srv, "tls=on client_certs=required"));
}

static void test_handshake_never_finishes(void **state)
{
	struct fixture *f = *state;
	struct sockaddr_in dst = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int64_t t0;
	char buf[64];
	ssize_t r = 1;

	assert_true(wait_tls_ready(f));
	assert_true(fd >= 0);
	dst.sin_addr.s_addr = htonl(0x7f000001u);
	dst.sin_port = htons((uint16_t)atoi(strrchr(f->srv.addr, ':') + 1));
	assert_int_equal(connect(fd, (struct sockaddr *)&dst, sizeof(dst)), 0);
	/* The first bytes of a ClientHello, then silence: closed after the 1 s header timeout. */
	assert_int_equal(send(fd, "\x16\x03\x01\x00", 4, MSG_NOSIGNAL), 4);
	t0 = agent_proc_now_ms();
	while (r > 0 && agent_proc_now_ms() - t0 < 10000) {
		struct pollfd p = {.fd = fd, .events = POLLIN};

		if (poll(&p, 1, 200) > 0)
			r = recv(fd, buf, sizeof(buf), 0);
	}
	assert_true(r <= 0);
	assert_true(agent_proc_now_ms() - t0 < 5000);
	close(fd);
	/* Meanwhile and after, a proper client is served. */
	assert_int_equal(tls_req(f, "ca", "client", T_READ_TOKEN, "GET", "/v1/volumes", NULL, NULL),
			 200);
}

/* Whether the server's controller plugin was probed healthy. */
static bool t_plugin_healthy(void *ctx)
{
	return server_proc_log_has(ctx, "msg=\"controller plugin health\"");
}

/* Copies file from to to, n times over; 0 or -1. */
static int copy_times(const char *from, const char *to, int n)
{
	char buf[16384];
	size_t len;
	FILE *in = fopen(from, "r"), *out = fopen(to, "w");
	int rc = in && out ? 0 : -1;

	if (!rc)
		len = fread(buf, 1, sizeof(buf), in);
	for (int i = 0; !rc && i < n; i++)
		if (fwrite(buf, 1, len, out) != len)
			rc = -1;
	if (in)
		fclose(in);
	if (out && fclose(out) != 0)
		rc = -1;
	return rc;
}

static void test_chain_of_10000(void **state)
{
	struct fixture *f = *state;
	char from[300], to[300];
	long rss0, rss1;
	double cpu0, cpu1;

	assert_true(wait_tls_ready(f));
	/* The client certificate, then 9,999 copies of it: a chain of 10,000 entries (~11 MB). */
	snprintf(from, sizeof(from), "%s/client.pem", f->pki);
	snprintf(to, sizeof(to), "%s/chain.pem", f->pki);
	assert_int_equal(copy_times(from, to, 10000), 0);
	snprintf(from, sizeof(from), "%s/client.key", f->pki);
	snprintf(to, sizeof(to), "%s/chain.key", f->pki);
	assert_int_equal(copy_times(from, to, 1), 0);
	/*
	 * Settled: the server's start (its plugin up, registered and probed)
	 * no longer allocates; then warm: what the first requests allocate
	 * is not counted either. (Under a parallel build, a measure taken
	 * while the start went on counted 9 MiB of it and 0.02 s of CPU.)
	 */
	assert_true(agent_proc_poll(t_plugin_healthy, &f->srv, 60000));
	for (int i = 0; i < 5; i++)
		assert_int_equal(
		    tls_req(f, "ca", "client", T_READ_TOKEN, "GET", "/v1/volumes", NULL, NULL),
		    200);
	rss0 = proc_stat_status(f->srv.pid, "VmRSS:");
	cpu0 = proc_stat_cpu_s(f->srv.pid);
	/*
	 * Refused in the handshake: no answer. The client takes seconds to
	 * load and send its chain; the server reads no more than the length
	 * of the handshake message before it refuses it.
	 */
	assert_int_equal(tls_req(f, "ca", "chain", T_READ_TOKEN, "GET", "/v1/volumes", NULL, NULL),
			 -1);
	rss1 = proc_stat_status(f->srv.pid, "VmRSS:");
	cpu1 = proc_stat_cpu_s(f->srv.pid);
	if (rss1 - rss0 > 4096 || cpu1 - cpu0 > 1.0) {
		server_proc_dump_log(&f->srv, "chain of 10,000");
		fail_msg("a 10,000-certificate chain cost the server %.2f s of CPU and %ld KiB",
			 cpu1 - cpu0, rss1 - rss0);
	}
	/* The service goes on. */
	assert_int_equal(tls_req(f, "ca", "client", T_READ_TOKEN, "GET", "/v1/volumes", NULL, NULL),
			 200);
}

/*
 * The agent's own HTTPS listener with client certificates: a client
 * certificate of the CA logs in without any token; none, or one of
 * another CA, gets 401 and nothing is served, token or not.
 */
static void test_agent_https_client_cert(void **state)
{
	struct agent_proc a;
	char pki[300], cfg[1536], base[96], certp[320], keyp[320], cap[320], *text = NULL;
	struct http_client *c;
	int port = server_proc_free_port();
	long st;

	assert_int_equal(agent_proc_init(&a), 0);
	snprintf(pki, sizeof(pki), "%s/pki", a.dir);
	assert_int_equal(test_pki_make(pki), 0);
	snprintf(cfg, sizeof(cfg),
		 "{\"data_dir\": \"@DIR@/d\", \"node_name\": \"n1\", "
		 "\"listener\": {\"addr\": \"127.0.0.1:%d\"}, \"server_token\": \"" T_AGENT_TOKEN
		 "\", \"http\": {\"tls_cert_file\": \"%s/server.pem\", \"tls_key_file\": "
		 "\"%s/server.key\", \"tls_client_ca_file\": \"%s/ca.pem\"}}",
		 port, pki, pki, pki);
	assert_int_equal(agent_proc_write_config(&a, cfg), 0);
	assert_int_equal(agent_proc_start(&a), 0);
	if (agent_proc_wait_ready(&a, 30000) != 0) {
		agent_proc_dump_log(&a, "agent not ready");
		fail();
	}
	snprintf(base, sizeof(base), "https://127.0.0.1:%d", port);
	snprintf(cap, sizeof(cap), "%s/ca.pem", pki);
	c = http_client_new(base);
	assert_non_null(c);
	/* A client certificate of the CA, no token: served. */
	snprintf(certp, sizeof(certp), "%s/client.pem", pki);
	snprintf(keyp, sizeof(keyp), "%s/client.key", pki);
	http_client_tls(c, cap, certp, keyp);
	st = http_client_do(c, "GET", "/v1/agent/mounts", NULL, NULL, NULL, 10000);
	if (st != 200) {
		agent_proc_dump_log(&a, "client certificate refused");
		fail_msg("GET /v1/agent/mounts with a client certificate: HTTP %ld", st);
	}
	/* None, even with the token: 401, nothing served. */
	http_client_tls(c, cap, NULL, NULL);
	http_client_token(c, T_AGENT_TOKEN);
	assert_int_equal(http_client_do(c, "GET", "/v1/agent/mounts", NULL, &text, NULL, 10000),
			 401);
	assert_non_null(strstr(text, "none presented"));
	free(text);
	text = NULL;
	/* One of another CA: 401 saying so. */
	snprintf(certp, sizeof(certp), "%s/stranger.pem", pki);
	snprintf(keyp, sizeof(keyp), "%s/stranger.key", pki);
	http_client_tls(c, cap, certp, keyp);
	assert_int_equal(http_client_do(c, "GET", "/v1/agent/self", NULL, &text, NULL, 10000), 401);
	assert_non_null(strstr(text, "not signed by the configured CA"));
	free(text);
	http_client_free(c);
	assert_false(agent_proc_log_count(&a, T_AGENT_TOKEN, 1));
	assert_false(agent_proc_log_count(&a, "PRIVATE KEY", 1));
	agent_proc_stop(&a, SIGTERM, 10000);
	agent_proc_cleanup(&a);
}

/* An IPv4 address of this host that is not loopback, or false. */
static bool host_address(char *buf, size_t cap)
{
	struct ifaddrs *ifs, *i;
	bool found = false;

	if (getifaddrs(&ifs) != 0)
		return false;
	for (i = ifs; i && !found; i = i->ifa_next) {
		const struct sockaddr_in *sa = (const struct sockaddr_in *)i->ifa_addr;

		if (!sa || sa->sin_family != AF_INET || (ntohl(sa->sin_addr.s_addr) >> 24) == 127)
			continue;
		found = inet_ntop(AF_INET, &sa->sin_addr, buf, (socklen_t)cap) != NULL;
	}
	freeifaddrs(ifs);
	return found;
}

/* Whether the server logged its API listening on 0.0.0.0. */
static bool t_listening_any(void *ctx)
{
	return server_proc_log_has(ctx, "addr=0.0.0.0:");
}

static void test_plaintext_refusals(void **state)
{
	struct server_proc s;
	char ip[64], listen[64], base[128], *text = NULL;
	struct http_client *c;
	long st;

	assert_int_equal(server_proc_init(&s), 0);
	if (!host_address(ip, sizeof(ip))) {
		server_proc_cleanup(&s);
		skip();
	}
	/* Plaintext on every address: reached from this host's own address, not loopback. */
	snprintf(listen, sizeof(listen), "0.0.0.0:%s", strrchr(s.addr, ':') + 1);
	assert_int_equal(server_proc_write_config(&s, NULL, NULL), 0);
	assert_int_equal(
	    server_proc_start_args(
		&s, (const char *const[]){"server", "-config", s.config, "-listen", listen, NULL}),
	    0);
	if (!server_proc_wait_ready(&s, 30000)) {
		server_proc_dump_log(&s, "server on 0.0.0.0 not ready");
		fail();
	}
	/*
	 * Ours answers, on every address. The API answers as soon as it
	 * listens, before the server logs where: the line is waited for.
	 */
	if (!agent_proc_poll(t_listening_any, &s, 30000)) {
		server_proc_dump_log(&s, "server not on 0.0.0.0");
		fail();
	}
	snprintf(base, sizeof(base), "http://%s:%s", ip, strrchr(s.addr, ':') + 1);
	c = http_client_new(base);
	assert_non_null(c);
	st = http_client_do(c, "GET", "/v1/volume/v1/node-stage?alloc_id=a1", NULL, &text, NULL,
			    10000);
	if (st != 403 || !text || !strstr(text, "not sent over plaintext HTTP"))
		fail_msg("node-stage from %s: HTTP %ld: %s", ip, st, text ? text : "");
	assert_non_null(strstr(text, "http.tls_cert_file"));
	assert_non_null(strstr(text, "allow_plaintext_secrets"));
	free(text);
	http_client_free(c);
	server_proc_stop(&s, SIGTERM, 10000);
	server_proc_cleanup(&s);
}

static void test_agent_tcp_needs_auth(void **state)
{
	struct agent_proc a;
	char cfg[512], base[96], *text = NULL;
	struct http_client *c;
	int port = server_proc_free_port();

	assert_int_equal(agent_proc_init(&a), 0);
	snprintf(cfg, sizeof(cfg),
		 "{\"data_dir\": \"@DIR@/d\", \"node_name\": \"n1\", "
		 "\"listener\": {\"addr\": \"127.0.0.1:%d\"}, \"server_token\": \"" T_AGENT_TOKEN
		 "\"}",
		 port);
	assert_int_equal(agent_proc_write_config(&a, cfg), 0);
	assert_int_equal(agent_proc_start(&a), 0);
	if (agent_proc_wait_ready(&a, 30000) != 0) {
		agent_proc_dump_log(&a, "agent not ready");
		fail();
	}
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", port);
	c = http_client_new(base);
	assert_non_null(c);
	assert_int_equal(http_client_do(c, "GET", "/v1/agent/mounts", NULL, &text, NULL, 10000),
			 403);
	assert_non_null(strstr(text, "a token (X-Csid-Token"));
	free(text);
	http_client_token(c, "not-the-token");
	assert_int_equal(http_client_do(c, "GET", "/v1/agent/self", NULL, NULL, NULL, 10000), 403);
	http_client_token(c, T_AGENT_TOKEN);
	assert_int_equal(http_client_do(c, "GET", "/v1/agent/mounts", NULL, NULL, NULL, 10000),
			 200);
	http_client_free(c);
	/* The unix socket needs no token (its file mode guards it). */
	assert_int_equal(agent_proc_http(&a, "GET", "/v1/agent/mounts", NULL, NULL), 200);
	assert_false(agent_proc_log_count(&a, T_AGENT_TOKEN, 1));
	agent_proc_stop(&a, SIGTERM, 10000);
	agent_proc_cleanup(&a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_https_client_certs, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_handshake_never_finishes, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_chain_of_10000, setup, teardown),
	    cmocka_unit_test(test_agent_https_client_cert),
	    cmocka_unit_test(test_plaintext_refusals),
	    cmocka_unit_test(test_agent_tcp_needs_auth),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
