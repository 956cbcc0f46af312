/*
 * The coordination seam of store.h (leases, the election key, fenced
 * transactions, member records) on a real one-member etcd
 * (test/lib/etcd_proc.c), with two stores on one prefix standing for two
 * servers: the first campaign wins and the second sees it; a fenced write
 * goes through while the term holds and is refused with CSID_EPRECOND,
 * writing nothing, once the term's lease is gone and another server
 * leads (the fenced view then calls its lost callback); a failed object
 * condition under a holding fence is still a conflict; member records go
 * with their lease; a waiter on the election key wakes when it is
 * created or goes; keys under the prefix that are not the store's are
 * counted. And the same calls on the memory store, which one
 * server holds alone.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "etcd_proc.h"
#include "store/store.h"

static struct etcd_proc tl_etcd;

static int group_setup(void **state)
{
	(void)state;
	return etcd_proc_start(&tl_etcd);
}

static int group_teardown(void **state)
{
	(void)state;
	etcd_proc_cleanup(&tl_etcd);
	return 0;
}

static struct store *open_store(const char *prefix)
{
	const char *eps[] = {tl_etcd.url};
	struct store_etcd_config cfg = {.endpoints = eps, .nendpoints = 1, .prefix = prefix};
	struct store *s = NULL;
	struct err e;

	assert_int_equal(store_etcd_open(&cfg, &s, &e), 0);
	return s;
}

static struct store_op put(const char *id, uint64_t expect)
{
	return (struct store_op){STORE_OP_PUT, STORE_VOLUME, id, "{}", 2, expect};
}

static void lost_cb(void *arg)
{
	(*(int *)arg)++;
}

static void test_election_and_fence(void **state)
{
	struct store *a = open_store("/lease-1/"), *b = open_store("/lease-1/"), *view = NULL;
	struct store_fence fence = {.lost = lost_cb};
	struct store_obj h = {0}, got = {0};
	struct store_op op;
	uint64_t la = 0, lb = 0, term_a, idx = 0;
	int lost = 0;
	struct err e;

	(void)state;
	fence.arg = &lost;
	assert_true(store_shared(a));
	assert_int_equal(store_lease_grant(a, 2000, &la, &e), 0);
	assert_int_equal(store_lease_grant(b, 2000, &lb, &e), 0);
	assert_true(la != 0 && lb != 0 && la != lb);
	assert_int_equal(store_campaign(a, la, "A", 1, &h, &e), 0);
	assert_string_equal(h.value, "A");
	term_a = h.create_index;
	assert_true(term_a > 0);
	store_obj_free(&h);
	/* The second campaign finds the first one's key. */
	assert_int_equal(store_campaign(b, lb, "B", 1, &h, &e), 0);
	assert_string_equal(h.value, "A");
	assert_int_equal(h.create_index, term_a);
	store_obj_free(&h);

	/* While the term holds, fenced writes go through, directly and through the view. */
	op = put("v1", 0);
	assert_int_equal(store_txn_fenced(a, term_a, &op, 1, &idx, &e), 0);
	assert_true(idx > term_a);
	atomic_store(&fence.index, term_a);
	assert_int_equal(store_fenced_new(a, &fence, &view, &e), 0);
	op = put("v2", 0);
	assert_int_equal(store_txn(view, &op, 1, NULL, &e), 0);
	assert_int_equal(store_get(view, STORE_VOLUME, "v2", &got, &e), 0);
	store_obj_free(&got);
	/* A failed condition under a holding fence is a conflict, not a lost term. */
	op = put("v1", 0);
	assert_int_equal(store_txn(view, &op, 1, NULL, &e), CSID_ECONFLICT);
	assert_int_equal(lost, 0);
	assert_int_equal(store_lease_keepalive(a, la, &e), 0);

	/* A's lease ends (its key goes); B leads; A's old term writes nothing. */
	assert_int_equal(store_lease_revoke(a, la, &e), 0);
	assert_int_equal(store_lease_keepalive(a, la, &e), CSID_ENOTFOUND);
	assert_int_equal(store_lease_revoke(a, la, &e), 0);
	assert_int_equal(store_campaign(b, lb, "B", 1, &h, &e), 0);
	assert_string_equal(h.value, "B");
	assert_true(h.create_index > term_a);
	store_obj_free(&h);
	op = put("v3", 0);
	assert_int_equal(store_txn_fenced(a, term_a, &op, 1, NULL, &e), CSID_EPRECOND);
	assert_non_null(strstr(e.msg, "fenced"));
	assert_int_equal(store_txn(view, &op, 1, NULL, &e), CSID_EPRECOND);
	assert_int_equal(lost, 1);
	assert_int_equal(store_get(b, STORE_VOLUME, "v3", &got, &e), CSID_ENOTFOUND);
	/* A view whose fence is 0 (not leading) refuses before asking the store. */
	atomic_store(&fence.index, 0);
	assert_int_equal(store_txn(view, &op, 1, NULL, &e), CSID_EPRECOND);
	assert_int_equal(lost, 1);
	/* A campaign on an expired lease reads the holder, and cannot take a free key. */
	assert_int_equal(store_campaign(a, la, "A", 1, &h, &e), 0);
	assert_string_equal(h.value, "B");
	store_obj_free(&h);
	assert_int_equal(store_lease_revoke(b, lb, &e), 0);
	assert_int_equal(store_campaign(a, la, "A", 1, &h, &e), CSID_ENOTFOUND);

	store_close(view);
	store_close(a);
	store_close(b);
}

static void test_members(void **state)
{
	struct store *a = open_store("/lease-2/"), *b = open_store("/lease-2/");
	struct store_list l = {0};
	uint64_t la = 0, lb = 0;
	struct err e;

	(void)state;
	assert_int_equal(store_lease_grant(a, 5000, &la, &e), 0);
	assert_int_equal(store_lease_grant(b, 5000, &lb, &e), 0);
	assert_int_equal(store_member_put(a, la, "srv-a", "{\"id\":\"srv-a\"}", 14, &e), 0);
	assert_int_equal(store_member_put(b, lb, "srv-b", "{\"id\":\"srv-b\"}", 14, &e), 0);
	assert_int_equal(store_member_put(b, lb, "srv-b", "{\"id\":\"srv-b\",\"x\":1}", 20, &e), 0);
	assert_int_equal(store_member_list(a, &l, &e), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.objs[0].id, "srv-a");
	assert_string_equal(l.objs[1].id, "srv-b");
	assert_int_equal(l.objs[1].len, 20);
	assert_true(l.objs[1].modify_index > l.objs[0].modify_index);
	store_list_free(&l);
	/* Member records are no objects: no list, no change log sees them. */
	assert_int_equal(store_list(a, STORE_NODE, NULL, NULL, 0, &l, &e), 0);
	assert_int_equal(l.n, 0);
	store_list_free(&l);
	/* A record goes with its lease. */
	assert_int_equal(store_lease_revoke(b, lb, &e), 0);
	assert_int_equal(store_member_list(a, &l, &e), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.objs[0].id, "srv-a");
	store_list_free(&l);
	store_close(a);
	store_close(b);
}

/*
 * The watch on the election key: a wait with no change times out; the
 * key's creation and its deletion (its lease revoked) each wake a waiter.
 * And the count of keys under the prefix that are not the store's own.
 */
static void test_election_wait_and_foreign(void **state)
{
	struct store *a = open_store("/lease-3/"), *b = open_store("/lease-3/");
	struct store *other = open_store("/lease-3/x");
	struct store_obj h = {0};
	struct store_op op = put("v1", 0);
	uint64_t la = 0, seen = 0, n = 9;
	struct err e;

	(void)state;
	assert_int_equal(store_election_wait(b, &seen, 100), 0);
	assert_int_equal(store_lease_grant(a, 5000, &la, &e), 0);
	assert_int_equal(store_campaign(a, la, "A", 1, &h, &e), 0);
	store_obj_free(&h);
	assert_int_equal(store_election_wait(b, &seen, 5000), 1);
	assert_int_equal(store_election_wait(b, &seen, 100), 0);
	assert_int_equal(store_member_put(a, la, "srv-a", "{}", 2, &e), 0);
	assert_int_equal(store_txn(a, &op, 1, NULL, &e), 0);
	assert_int_equal(store_lease_revoke(a, la, &e), 0);
	assert_int_equal(store_election_wait(b, &seen, 5000), 1);
	/* Objects, the election key and member records are the store's own. */
	assert_int_equal(store_foreign_keys(b, &n, &e), 0);
	assert_int_equal(n, 0);
	/* A key of another prefix under this one ("/lease-3/x..."): someone else's. */
	op = put("v2", 0);
	assert_int_equal(store_txn(other, &op, 1, NULL, &e), 0);
	assert_int_equal(store_foreign_keys(b, &n, &e), 0);
	assert_int_equal(n, 1);
	store_close(other);
	store_close(a);
	store_close(b);
}

static void test_memory_store_alone(void **state)
{
	struct store *m = NULL;
	struct store_obj h = {0};
	struct store_list l = {0};
	struct store_op op = put("v1", 0);
	uint64_t lease = 0;
	struct err e;

	(void)state;
	assert_int_equal(store_mem_new(&m, &e), 0);
	assert_false(store_shared(m));
	/* One server alone: a fenced write is a plain one, whatever the fence. */
	assert_int_equal(store_txn_fenced(m, 12345, &op, 1, NULL, &e), 0);
	assert_int_equal(store_txn_fenced(m, 1, &op, 1, NULL, &e), CSID_ECONFLICT);
	assert_int_equal(store_lease_grant(m, 1000, &lease, &e), CSID_EUNIMPL);
	assert_int_equal(store_campaign(m, 1, "A", 1, &h, &e), CSID_EUNIMPL);
	assert_int_equal(store_member_list(m, &l, &e), CSID_EUNIMPL);
	assert_int_equal(store_election_wait(m, &lease, 10), CSID_EUNIMPL);
	/* Its history is bounded by itself: nothing for a leader to compact. */
	assert_int_equal(store_compact(m, 1, &e), CSID_EUNIMPL);
	assert_int_equal(store_compact(m, 0, &e), CSID_EINVAL);
	assert_int_equal(store_foreign_keys(m, &lease, &e), 0);
	assert_int_equal(lease, 0);
	store_close(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_election_and_fence),
	    cmocka_unit_test(test_members),
	    cmocka_unit_test(test_election_wait_and_foreign),
	    cmocka_unit_test(test_memory_store_alone),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
