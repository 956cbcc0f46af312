/*
 * Coalesced transactions of the etcd store (store_etcd_txn.c) against a
 * real etcd (one member on free loopback ports). Each test holds the
 * store's transactions (store_etcd_hold_txns), lets several threads queue
 * theirs, and releases them, so what goes together is known: concurrent
 * transactions share one etcd Txn and one index; one caller's failed
 * condition or lost fence fails no other; transactions that write the
 * same key, or that together pass etcd's op count or request size, are
 * split into several Txns, and each still commits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcd_proc.h"
#include "store/etcd_client.h"
#include "store/store.h"

#define TB_OPS_MAX STORE_TXN_OPS_MAX
#define TB_WAIT_MS 20000

static struct etcd_proc tb_etcd;
static unsigned tb_prefixes;

/* One caller's transaction, run on a thread of its own. */
struct tb_job {
	struct store *s;
	struct store_op ops[TB_OPS_MAX];
	char ids[TB_OPS_MAX][32];
	size_t n;
	uint64_t fence; /* nonzero: store_txn_fenced */
	pthread_t thread;
	int rc;
	uint64_t index;
	struct err e;
};

static struct store *tb_open(void)
{
	const char *ep[] = {tb_etcd.url};
	char prefix[64];
	struct store_etcd_config cfg = {.endpoints = ep, .nendpoints = 1, .prefix = prefix};
	struct store *s = NULL;
	struct err e;

	snprintf(prefix, sizeof(prefix), "/batch-%d-%u/", (int)getpid(), ++tb_prefixes);
	assert_int_equal(store_etcd_open(&cfg, &s, &e), 0);
	return s;
}

/* Adds to j a put of volume <name><i> for each i < n, value v (len bytes), condition expect. */
static void tb_puts(struct tb_job *j, const char *name, size_t n, const char *v, size_t len,
		    uint64_t expect)
{
	for (size_t i = 0; i < n; i++) {
		struct store_op *op = &j->ops[j->n];

		assert_true(j->n < TB_OPS_MAX);
		snprintf(j->ids[j->n], sizeof(j->ids[j->n]), n == 1 ? "%s" : "%s%zu", name, i);
		*op = (struct store_op){STORE_OP_PUT, STORE_VOLUME, j->ids[j->n], v, len, expect};
		j->n++;
	}
}

static void *tb_run(void *arg)
{
	struct tb_job *j = arg;

	j->rc = j->fence ? store_txn_fenced(j->s, j->fence, j->ops, j->n, &j->index, &j->e)
			 : store_txn(j->s, j->ops, j->n, &j->index, &j->e);
	return NULL;
}

/*
 * Holds s's transactions, starts the jobs, waits until all are queued,
 * releases them and joins them; returns how many etcd Txns they took.
 */
static uint64_t tb_together(struct store *s, struct tb_job *jobs, size_t n)
{
	uint64_t txns0, calls0, txns, calls;
	struct timespec pause = {0, 2 * 1000 * 1000};
	int waited = 0;

	store_etcd_txn_stats(s, &txns0, &calls0);
	store_etcd_hold_txns(s, true);
	for (size_t i = 0; i < n; i++) {
		jobs[i].s = s;
		assert_int_equal(pthread_create(&jobs[i].thread, NULL, tb_run, &jobs[i]), 0);
	}
	for (;;) {
		store_etcd_txn_stats(s, &txns, &calls);
		if (txns - txns0 == n)
			break;
		assert_true(waited++ < TB_WAIT_MS / 2);
		nanosleep(&pause, NULL);
	}
	assert_int_equal(calls, calls0); /* held: nothing sent */
	store_etcd_hold_txns(s, false);
	for (size_t i = 0; i < n; i++)
		pthread_join(jobs[i].thread, NULL);
	store_etcd_txn_stats(s, &txns, &calls);
	return calls - calls0;
}

/* Asserts that volume id has value v (NULL: missing) and, when index is nonzero, that index. */
static void tb_expect(struct store *s, const char *id, const char *v, uint64_t index)
{
	struct store_obj o;
	struct err e;

	if (v == NULL) {
		assert_int_equal(store_get(s, STORE_VOLUME, id, &o, &e), CSID_ENOTFOUND);
		return;
	}
	assert_int_equal(store_get(s, STORE_VOLUME, id, &o, &e), 0);
	assert_string_equal(o.value, v);
	if (index)
		assert_int_equal(o.modify_index, index);
	store_obj_free(&o);
}

/*
 * Six concurrent transactions (creates and a delete) go in one Txn: each
 * gets the same index, every object has it, and the change log holds all
 * of them at that index, after which a lone write gets the next one.
 */
static void test_batch_coalesced(void **state)
{
	struct store *s = tb_open();
	struct tb_job jobs[6];
	struct store_op seed = {STORE_OP_PUT, STORE_VOLUME, "gone", "x", 1, 0};
	struct store_changes c;
	uint64_t before, after;
	struct err e;

	memset(jobs, 0, sizeof(jobs));
	assert_int_equal(store_txn(s, &seed, 1, &before, &e), 0);
	for (int i = 0; i < 5; i++) {
		char name[16];

		snprintf(name, sizeof(name), "v%d-", i);
		tb_puts(&jobs[i], name, 2, "new", 3, 0);
	}
	jobs[5].ops[0] = (struct store_op){STORE_OP_DELETE, STORE_VOLUME, "gone", NULL, 0, before};
	jobs[5].n = 1;
	assert_int_equal(tb_together(s, jobs, 6), 1);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(jobs[i].rc, 0);
		assert_int_equal(jobs[i].index, jobs[0].index);
	}
	assert_true(jobs[0].index > before);
	tb_expect(s, "v0-0", "new", jobs[0].index);
	tb_expect(s, "v4-1", "new", jobs[0].index);
	tb_expect(s, "gone", NULL, 0);
	assert_int_equal(store_changes(s, before, 0, &c, &e), 0);
	assert_int_equal(c.n, 11);
	for (size_t i = 0; i < c.n; i++)
		assert_int_equal(c.changes[i].index, jobs[0].index);
	store_changes_free(&c);
	assert_int_equal(store_txn(s, jobs[0].ops, 1, &after, &e), CSID_ECONFLICT);
	jobs[0].ops[0].expect_index = jobs[0].index;
	assert_int_equal(store_txn(s, jobs[0].ops, 1, &after, &e), 0);
	assert_true(after > jobs[0].index);
	store_close(s);
}

/*
 * In one Txn, a transaction whose condition fails gets CSID_ECONFLICT
 * naming its object and writes nothing; the others commit.
 */
static void test_batch_one_conflict(void **state)
{
	struct store *s = tb_open();
	struct tb_job jobs[3];
	struct store_op seed = {STORE_OP_PUT, STORE_VOLUME, "taken", "old", 3, STORE_ANY};
	uint64_t seeded;
	char want[96];
	struct err e;

	memset(jobs, 0, sizeof(jobs));
	assert_int_equal(store_txn(s, &seed, 1, &seeded, &e), 0);
	tb_puts(&jobs[0], "a", 1, "A", 1, 0);
	/* Creates "taken" (exists) and "b": the whole transaction fails. */
	tb_puts(&jobs[1], "b", 1, "B", 1, 0);
	tb_puts(&jobs[1], "taken", 1, "B", 1, 0);
	tb_puts(&jobs[2], "c", 1, "C", 1, STORE_ANY);
	assert_int_equal(tb_together(s, jobs, 3), 1);
	assert_int_equal(jobs[0].rc, 0);
	assert_int_equal(jobs[2].rc, 0);
	assert_int_equal(jobs[0].index, jobs[2].index);
	assert_int_equal(jobs[1].rc, CSID_ECONFLICT);
	snprintf(want, sizeof(want), "volume taken: already exists (modify index %llu)",
		 (unsigned long long)seeded);
	assert_non_null(strstr(jobs[1].e.msg, want));
	tb_expect(s, "a", "A", jobs[0].index);
	tb_expect(s, "c", "C", jobs[0].index);
	tb_expect(s, "b", NULL, 0);
	tb_expect(s, "taken", "old", seeded);
	store_close(s);
}

/*
 * Fenced transactions in one Txn: the one on the election's term commits,
 * the one on a term that is over gets CSID_EPRECOND and writes nothing,
 * and a plain one beside them commits.
 */
static void test_batch_fences(void **state)
{
	struct store *s = tb_open();
	struct tb_job jobs[3];
	struct store_obj holder;
	uint64_t lease;
	struct err e;

	memset(jobs, 0, sizeof(jobs));
	assert_int_equal(store_lease_grant(s, 10000, &lease, &e), 0);
	assert_int_equal(store_campaign(s, lease, "me", 2, &holder, &e), 0);
	assert_true(holder.create_index > 0);
	tb_puts(&jobs[0], "ours", 1, "1", 1, 0);
	jobs[0].fence = holder.create_index;
	tb_puts(&jobs[1], "stale", 1, "1", 1, 0);
	jobs[1].fence = holder.create_index - 1;
	tb_puts(&jobs[2], "plain", 1, "1", 1, 0);
	assert_int_equal(tb_together(s, jobs, 3), 1);
	assert_int_equal(jobs[0].rc, 0);
	assert_int_equal(jobs[1].rc, CSID_EPRECOND);
	assert_non_null(strstr(jobs[1].e.msg, "fenced"));
	assert_int_equal(jobs[2].rc, 0);
	tb_expect(s, "ours", "1", jobs[0].index);
	tb_expect(s, "stale", NULL, 0);
	tb_expect(s, "plain", "1", jobs[0].index);
	store_obj_free(&holder);
	assert_int_equal(store_lease_revoke(s, lease, &e), 0);
	store_close(s);
}

/*
 * Two transactions that write the same key go in two Txns, in the order
 * they came: both commit (no condition), the later one's value stays. A
 * third on another key goes with the first.
 */
static void test_batch_same_key_split(void **state)
{
	struct store *s = tb_open();
	struct tb_job jobs[3];

	memset(jobs, 0, sizeof(jobs));
	tb_puts(&jobs[0], "k", 1, "first", 5, STORE_ANY);
	tb_puts(&jobs[1], "k", 1, "second", 6, STORE_ANY);
	tb_puts(&jobs[2], "m", 1, "m", 1, STORE_ANY);
	/* Their threads queue in any order: the later of the two k writes wins. */
	assert_int_equal(tb_together(s, jobs, 3), 2);
	for (int i = 0; i < 3; i++)
		assert_int_equal(jobs[i].rc, 0);
	assert_true(jobs[0].index != jobs[1].index);
	tb_expect(s, "k", jobs[0].index > jobs[1].index ? "first" : "second", 0);
	assert_true(jobs[2].index == jobs[0].index || jobs[2].index == jobs[1].index);
	store_close(s);
}

/*
 * Over etcd's limits together, within them apart: two transactions of
 * 100 ops each (200 > STORE_TXN_OPS_MAX), and two whose values fill most
 * of etcd's request limit each, go in two Txns each pair, and all commit.
 */
static void test_batch_limits_split(void **state)
{
	struct store *s = tb_open();
	struct tb_job *jobs = calloc(2, sizeof(*jobs));
	size_t big_len = ETCD_REQUEST_MAX_DEFAULT * 2 / 3;
	char *big = malloc(big_len + 1);

	assert_non_null(jobs);
	assert_non_null(big);
	memset(big, 'v', big_len);
	big[big_len] = '\0';
	tb_puts(&jobs[0], "p", 100, "x", 1, 0);
	tb_puts(&jobs[1], "q", 100, "y", 1, 0);
	assert_int_equal(tb_together(s, jobs, 2), 2);
	assert_int_equal(jobs[0].rc, 0);
	assert_int_equal(jobs[1].rc, 0);
	assert_true(jobs[0].index != jobs[1].index);
	tb_expect(s, "p99", "x", jobs[0].index);
	tb_expect(s, "q0", "y", jobs[1].index);
	memset(jobs, 0, 2 * sizeof(*jobs));
	tb_puts(&jobs[0], "big1", 1, big, big_len, 0);
	tb_puts(&jobs[1], "big2", 1, big, big_len, 0);
	assert_int_equal(tb_together(s, jobs, 2), 2);
	assert_int_equal(jobs[0].rc, 0);
	assert_int_equal(jobs[1].rc, 0);
	tb_expect(s, "big1", big, jobs[0].index);
	tb_expect(s, "big2", big, jobs[1].index);
	free(big);
	free(jobs);
	store_close(s);
}

static int tb_setup(void **state)
{
	return etcd_proc_start(&tb_etcd);
}

static int tb_teardown(void **state)
{
	etcd_proc_cleanup(&tb_etcd);
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_batch_coalesced),    cmocka_unit_test(test_batch_one_conflict),
	    cmocka_unit_test(test_batch_fences),       cmocka_unit_test(test_batch_same_key_split),
	    cmocka_unit_test(test_batch_limits_split),
	};

	return cmocka_run_group_tests_name("store etcd batch", tests, tb_setup, tb_teardown);
}
