/*
 * Leadership on a store one server holds alone (the memory store): the
 * server leads from server_leader_new on (on_change says so once), its
 * fenced view writes, the status names it, and it is its own only member;
 * a config out of bounds is refused. (Elections on etcd:
 * test/integration/test_store_lease.c and test/e2e/test_server_cluster.c;
 * the reconciler's gate: test_reconciler.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "server/server_leader.h"

static void on_change(void *arg, bool leading)
{
	int *calls = arg;

	assert_true(leading);
	(*calls)++;
}

static void test_alone_leads(void **state)
{
	struct server_leader_config cfg = {.id = "srv-1", .address = "127.0.0.1:4646"};
	struct server_leader_status st;
	struct server_leader *l = NULL;
	struct server_member *m = NULL;
	struct store *s = NULL;
	struct store_op op = {STORE_OP_PUT, STORE_VOLUME, "v1", "{}", 2, 0};
	struct arena *a = arena_new();
	size_t n = 0;
	int calls = 0;
	struct err e;

	(void)state;
	assert_int_equal(store_mem_new(&s, &e), 0);
	cfg.store = s;
	cfg.on_change = on_change;
	cfg.arg = &calls;
	assert_int_equal(server_leader_new(&cfg, &l, &e), 0);
	assert_int_equal(calls, 1);
	assert_int_equal(server_leader_start(l, &e), 0);
	assert_true(server_leader_leading(l));
	assert_int_equal(store_txn(server_leader_store(l), &op, 1, NULL, &e), 0);
	server_leader_status(l, &st);
	assert_string_equal(st.server_id, "srv-1");
	assert_string_equal(st.leader_id, "srv-1");
	assert_string_equal(st.leader_address, "127.0.0.1:4646");
	assert_true(st.leading);
	assert_int_equal(st.ttl_ms, SERVER_LEADER_TTL_MS);
	assert_int_equal(server_leader_publish(l, &(struct server_member_news){0}, &e), 0);
	assert_int_equal(server_leader_members(l, a, &m, &n, &e), 0);
	assert_int_equal(n, 1);
	assert_string_equal(m[0].id, "srv-1");
	assert_true(m[0].leader);
	server_leader_free(l);
	assert_int_equal(calls, 1);
	arena_free(a);
	store_close(s);
}

static void test_config_refused(void **state)
{
	struct server_leader_config cfg = {0};
	struct server_leader *l = NULL;
	struct store *s = NULL;
	char long_id[SERVER_LEADER_ID_MAX + 2];
	struct err e;

	(void)state;
	assert_int_equal(server_leader_new(&cfg, &l, &e), CSID_EINVAL);
	assert_int_equal(store_mem_new(&s, &e), 0);
	cfg.store = s;
	cfg.ttl_ms = SERVER_LEADER_TTL_MIN_MS - 1;
	assert_int_equal(server_leader_new(&cfg, &l, &e), CSID_EINVAL);
	cfg.ttl_ms = SERVER_LEADER_TTL_MAX_MS + 1;
	assert_int_equal(server_leader_new(&cfg, &l, &e), CSID_EINVAL);
	cfg.ttl_ms = 0;
	memset(long_id, 'x', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	cfg.id = long_id;
	assert_int_equal(server_leader_new(&cfg, &l, &e), CSID_EINVAL);
	/* Without an ID one is made: "<hostname>-<8 hex digits>". */
	cfg.id = NULL;
	assert_int_equal(server_leader_new(&cfg, &l, &e), 0);
	{
		struct server_leader_status st;

		server_leader_status(l, &st);
		assert_true(strlen(st.server_id) > 9);
		assert_int_equal(st.server_id[strlen(st.server_id) - 9], '-');
	}
	server_leader_free(l);
	server_leader_free(NULL);
	store_close(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_alone_leads),
	    cmocka_unit_test(test_config_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
