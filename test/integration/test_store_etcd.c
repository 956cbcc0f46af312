/*
 * The etcd store backend against a real etcd (test/lib/etcd_proc.c, one
 * member on free loopback ports): the store contract
 * (test/lib/store_conformance.c), each test on a fresh key prefix of one
 * etcd, then what only this backend does: two stores on one prefix see
 * each other's writes; a watch that resumes behind etcd's compaction gives
 * CSID_ERANGE and the reader resynchronises; etcd's request limit is
 * refused clearly; keys under the prefix that are not objects are
 * ignored; an etcd that does not answer in time or is down gives a clear
 * error, and a store that lost its etcd recovers when it returns; in a
 * three-member cluster the store rides out the loss of its member and
 * of the quorum.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "etcd_proc.h"
#include "hostpath_proc.h"
#include "proc_guard.h"
#include "server_proc.h"
#include "store/etcd_client.h"
#include "store/store.h"
#include "store_conformance.h"
#include "test_pki.h"

/* etcd's default request limit less room for the request's own framing. */
#define TE_VALUE_MAX (ETCD_REQUEST_MAX_DEFAULT - 4096)

static struct etcd_proc te_etcd;
static unsigned te_prefixes;

/* Opens a store on a prefix no other test used. */
static int te_open_prefix(struct store **out, char *prefix, size_t len, struct err *e)
{
	const char *ep[] = {te_etcd.url};
	struct store_etcd_config cfg = {.endpoints = ep, .nendpoints = 1, .prefix = prefix};

	snprintf(prefix, len, "/test-%d-%u/", (int)getpid(), ++te_prefixes);
	return store_etcd_open(&cfg, out, e);
}

static int te_open(void *arg, struct store **out, void **ctx, struct err *e)
{
	char prefix[64];

	*ctx = NULL;
	return te_open_prefix(out, prefix, sizeof(prefix), e);
}

static void te_close(void *arg, void *ctx)
{
}

/* A second store on prefix (the same keys). */
static struct store *te_open_at(const char *prefix)
{
	const char *ep[] = {te_etcd.url};
	struct store_etcd_config cfg = {.endpoints = ep, .nendpoints = 1, .prefix = prefix};
	struct store *s = NULL;
	struct err e;

	assert_int_equal(store_etcd_open(&cfg, &s, &e), 0);
	return s;
}

static int te_put(struct store *s, const char *id, const char *value, uint64_t *index,
		  struct err *e)
{
	struct store_op op = {STORE_OP_PUT, STORE_VOLUME, id, value, strlen(value), STORE_ANY};

	return store_txn(s, &op, 1, index, e);
}

/* PUTs a raw key (its bytes as given) with a value through the gateway. */
static void te_raw_put(const char *key, const char *value)
{
	assert_int_equal(etcd_proc_put(&te_etcd, key, value), 200);
}

/* Two stores on one prefix: a write through one wakes a waiter on the other. */
static void test_etcd_two_stores(void **state)
{
	char prefix[64];
	struct store *a, *b;
	struct store_changes c;
	uint64_t index, seen;
	struct err e;

	assert_int_equal(te_open_prefix(&a, prefix, sizeof(prefix), &e), 0);
	b = te_open_at(prefix);
	seen = store_index(b);
	assert_int_equal(te_put(a, "v1", "one", &index, &e), 0);
	assert_true(store_wait(b, seen, 30000) >= index);
	assert_int_equal(store_changes(b, seen, 0, &c, &e), 0);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.changes[0].index, index);
	assert_string_equal(c.changes[0].obj.value, "one");
	store_changes_free(&c);
	/* A conflict between them names the object and the index it has. */
	{
		struct store_op op = {STORE_OP_PUT, STORE_VOLUME, "v1", "two", 3, 0};
		char want[64];

		assert_int_equal(store_txn(b, &op, 1, NULL, &e), CSID_ECONFLICT);
		snprintf(want, sizeof(want), "volume v1: already exists (modify index %llu)",
			 (unsigned long long)index);
		assert_non_null(strstr(e.msg, want));
	}
	store_close(b);
	store_close(a);
}

/* Asserts that s reads id at index with value (NULL: missing). */
static void te_expect(struct store *s, const char *id, const char *value, uint64_t index)
{
	struct store_obj o;
	struct err e;

	if (value == NULL) {
		assert_int_equal(store_get(s, STORE_VOLUME, id, &o, &e), CSID_ENOTFOUND);
		return;
	}
	assert_int_equal(store_get(s, STORE_VOLUME, id, &o, &e), 0);
	assert_string_equal(o.value, value);
	assert_int_equal(o.modify_index, index);
	store_obj_free(&o);
}

/*
 * The read cache follows another writer: B reads an object (missing,
 * then each version), A changes it, and B's next read once its index
 * passed A's write sees the change, deletes included.
 */
static void test_store_cache_follows_writer(void **state)
{
	char prefix[64];
	struct store *a, *b;
	struct store_op del = {STORE_OP_DELETE, STORE_VOLUME, "v", NULL, 0, STORE_ANY};
	uint64_t i1, i2, i3;
	struct err e;

	assert_int_equal(te_open_prefix(&a, prefix, sizeof(prefix), &e), 0);
	b = te_open_at(prefix);
	te_expect(b, "v", NULL, 0);
	assert_int_equal(te_put(a, "v", "one", &i1, &e), 0);
	assert_true(store_wait(b, i1 - 1, 30000) >= i1);
	te_expect(b, "v", "one", i1);
	assert_int_equal(te_put(a, "v", "two", &i2, &e), 0);
	assert_true(store_wait(b, i2 - 1, 30000) >= i2);
	te_expect(b, "v", "two", i2);
	te_expect(a, "v", "two", i2);
	assert_int_equal(store_txn(a, &del, 1, &i3, &e), 0);
	assert_true(store_wait(b, i3 - 1, 30000) >= i3);
	te_expect(b, "v", NULL, 0);
	te_expect(a, "v", NULL, 0);
	store_close(b);
	store_close(a);
}

/*
 * B's watch misses A's write for a while (paused, then resumed): a
 * compare-and-set loop on B, read then write on the index read, may
 * conflict once on what B had, and then reads A's write and succeeds;
 * it never loops on a stale read.
 */
static void test_store_cache_stale_compare(void **state)
{
	char prefix[64];
	struct store *a, *b;
	uint64_t i1, i2, i3 = 0;
	struct err e;
	int conflicts = 0;

	assert_int_equal(te_open_prefix(&a, prefix, sizeof(prefix), &e), 0);
	b = te_open_at(prefix);
	assert_int_equal(te_put(a, "v", "one", &i1, &e), 0);
	assert_true(store_wait(b, i1 - 1, 30000) >= i1);
	te_expect(b, "v", "one", i1);
	store_etcd_pause_watch(b, true);
	assert_int_equal(te_put(a, "v", "two", &i2, &e), 0);
	store_etcd_pause_watch(b, false);
	for (int attempt = 0; attempt < 3 && i3 == 0; attempt++) {
		struct store_obj o;
		struct store_op op = {STORE_OP_PUT, STORE_VOLUME, "v", "three", 5, 0};
		int rc;

		assert_int_equal(store_get(b, STORE_VOLUME, "v", &o, &e), 0);
		op.expect_index = o.modify_index;
		store_obj_free(&o);
		rc = store_txn(b, &op, 1, &i3, &e);
		if (rc == CSID_ECONFLICT) {
			conflicts++;
			continue;
		}
		assert_int_equal(rc, 0);
	}
	assert_true(conflicts <= 1);
	assert_true(i3 > i2);
	te_expect(b, "v", "three", i3);
	assert_true(store_wait(a, i3 - 1, 30000) >= i3);
	te_expect(a, "v", "three", i3);
	store_close(b);
	store_close(a);
}

/*
 * A watch that resumes from a revision etcd has compacted away: the
 * reader behind it gets CSID_ERANGE, lists again and follows on from the
 * list's index without missing a write.
 */
static void test_etcd_compacted_watch(void **state)
{
	char prefix[64], id[16];
	struct store *a, *b;
	struct store_changes c;
	struct store_list l;
	uint64_t reader, index = 0, changed;
	struct err e;

	assert_int_equal(te_open_prefix(&a, prefix, sizeof(prefix), &e), 0);
	b = te_open_at(prefix);
	assert_int_equal(te_put(a, "before", "x", &index, &e), 0);
	reader = index;
	te_expect(a, "before", "x", index); /* now in a's read cache */
	store_etcd_pause_watch(a, true);
	assert_int_equal(te_put(b, "before", "changed", &changed, &e), 0);
	for (int i = 0; i < 5; i++) {
		snprintf(id, sizeof(id), "gap-%d", i);
		assert_int_equal(te_put(b, id, "y", &index, &e), 0);
	}
	/* A revision etcd has not reached is refused; compacting twice is no error. */
	assert_int_equal(store_compact(b, index + 1000, &e), CSID_ERANGE);
	assert_int_equal(store_compact(b, index, &e), 0);
	assert_int_equal(store_compact(b, index - 1, &e), 0);
	store_etcd_pause_watch(a, false);
	/* The resumed watch finds the gap compacted: the log starts again there. */
	assert_true(store_wait(a, reader, 30000) >= index);
	assert_int_equal(store_changes(a, reader, 0, &c, &e), CSID_ERANGE);
	assert_non_null(strstr(e.msg, "compacted"));
	/* Resynchronise: the list has every object, then the log follows on. */
	assert_int_equal(store_list(a, STORE_VOLUME, NULL, NULL, 0, &l, &e), 0);
	assert_int_equal(l.n, 6);
	reader = l.index;
	store_list_free(&l);
	/* Reads after the compaction see the writes the watch never delivered. */
	te_expect(a, "gap-4", "y", index);
	te_expect(a, "before", "changed", changed);
	assert_int_equal(te_put(b, "after", "z", &index, &e), 0);
	assert_true(store_wait(a, reader, 30000) >= index);
	assert_int_equal(store_changes(a, reader, 0, &c, &e), 0);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.changes[0].obj.id, "after");
	store_changes_free(&c);
	store_close(b);
	store_close(a);
}

/* A transaction over etcd's request limit is refused, naming the limit; nothing lands. */
static void test_etcd_request_limit(void **state)
{
	struct store *s;
	char prefix[64];
	char *big = malloc(ETCD_REQUEST_MAX_DEFAULT);
	struct store_op ops[2] = {{STORE_OP_PUT, STORE_VOLUME, "a", big, 0, STORE_ANY},
				  {STORE_OP_PUT, STORE_VOLUME, "b", big, 0, STORE_ANY}};
	struct store_obj o;
	struct err e;

	assert_non_null(big);
	memset(big, 'v', ETCD_REQUEST_MAX_DEFAULT);
	assert_int_equal(te_open_prefix(&s, prefix, sizeof(prefix), &e), 0);
	ops[0].len = ETCD_REQUEST_MAX_DEFAULT;
	assert_int_equal(store_txn(s, ops, 1, NULL, &e), CSID_ETOOBIG);
	assert_non_null(strstr(e.msg, "request limit of 1572864 bytes"));
	/* Two values that each fit but not together. */
	ops[0].len = ops[1].len = TE_VALUE_MAX / 2 + 4096;
	assert_int_equal(store_txn(s, ops, 2, NULL, &e), CSID_ETOOBIG);
	assert_int_equal(store_get(s, STORE_VOLUME, "a", &o, &e), CSID_ENOTFOUND);
	ops[0].len = ops[1].len = TE_VALUE_MAX / 2;
	assert_int_equal(store_txn(s, ops, 2, NULL, &e), 0);
	store_close(s);
	free(big);
}

/* Keys under the prefix that are no object of ours are skipped by list and changes. */
/*
 * The watch does not ask etcd for each event's previous state: a delete's
 * create_index comes from the cache, or, for an object this store never
 * saw (written before it opened, never read), from etcd at the revision
 * before the delete. Both give the object's create_index.
 */
static void test_etcd_delete_create_index(void **state)
{
	char prefix[64];
	struct store *a, *b;
	struct store_changes c;
	uint64_t old_ci, seen_ci, from, index;
	struct store_op del[] = {{STORE_OP_DELETE, STORE_VOLUME, "old", NULL, 0, STORE_ANY},
				 {STORE_OP_DELETE, STORE_VOLUME, "seen", NULL, 0, STORE_ANY}};
	struct err e;

	assert_int_equal(te_open_prefix(&b, prefix, sizeof(prefix), &e), 0);
	assert_int_equal(te_put(b, "old", "1", &old_ci, &e), 0);
	/* Changed before a opens: a never sees it until its delete. */
	assert_int_equal(te_put(b, "old", "3", &index, &e), 0);
	a = te_open_at(prefix);
	assert_int_equal(te_put(a, "seen", "2", &seen_ci, &e), 0);
	from = store_index(a);
	assert_int_equal(store_txn(a, del, 2, &index, &e), 0);
	assert_int_equal(store_changes(a, from, 0, &c, &e), 0);
	assert_int_equal(c.n, 2);
	for (size_t i = 0; i < c.n; i++) {
		assert_int_equal(c.changes[i].type, STORE_OP_DELETE);
		assert_int_equal(c.changes[i].index, index);
		assert_int_equal(c.changes[i].obj.create_index,
				 strcmp(c.changes[i].obj.id, "old") == 0 ? old_ci : seen_ci);
	}
	store_changes_free(&c);
	store_close(a);
	store_close(b);
}

/*
 * etcd over TLS with client certificates: the store speaks gRPC over TLS
 * with the configured CA, certificate and key (its writes and its watch);
 * without a client certificate, or with one of another CA, etcd refuses
 * it and the open fails, naming the endpoint.
 */
static void test_etcd_tls(void **state)
{
	char dir[] = "/tmp/cst-XXXXXX", pki[64], ca[96], cert[96], key[96], other[96],
	     other_key[96];
	struct etcd_proc m = {.base = NULL};
	const char *ep[1];
	struct store_etcd_config cfg = {.endpoints = ep, .nendpoints = 1, .prefix = "/tls/"};
	struct store *s;
	struct store_obj o;
	uint64_t index;
	struct err e;

	assert_non_null(mkdtemp(dir));
	proc_guard_track_dir(dir);
	snprintf(pki, sizeof(pki), "%s/pki", dir);
	assert_int_equal(test_pki_make(pki), 0);
	snprintf(ca, sizeof(ca), "%s/ca.pem", pki);
	snprintf(cert, sizeof(cert), "%s/client.pem", pki);
	snprintf(key, sizeof(key), "%s/client.key", pki);
	snprintf(other, sizeof(other), "%s/stranger.pem", pki);
	snprintf(other_key, sizeof(other_key), "%s/stranger.key", pki);
	m.pki = pki;
	assert_int_equal(etcd_proc_start(&m), 0);
	assert_int_equal(strncmp(m.url, "https://", 8), 0);
	ep[0] = m.url;
	cfg.ca_file = ca;
	cfg.cert_file = cert;
	cfg.key_file = key;
	assert_int_equal(store_etcd_open(&cfg, &s, &e), 0);
	assert_int_equal(te_put(s, "v", "over tls", &index, &e), 0);
	assert_true(store_index(s) >= index); /* the watch runs over TLS too */
	assert_int_equal(store_get(s, STORE_VOLUME, "v", &o, &e), 0);
	assert_string_equal(o.value, "over tls");
	store_obj_free(&o);
	store_close(s);
	/* No client certificate, or one etcd's CA did not sign: refused. */
	cfg.cert_file = cfg.key_file = NULL;
	assert_int_not_equal(store_etcd_open(&cfg, &s, &e), 0);
	assert_non_null(strstr(e.msg, m.url));
	cfg.cert_file = other;
	cfg.key_file = other_key;
	assert_int_not_equal(store_etcd_open(&cfg, &s, &e), 0);
	/* A key file that cannot be read is a config error, before any connection. */
	cfg.key_file = "/nonexistent/client.key";
	assert_int_equal(store_etcd_open(&cfg, &s, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "key_file"));
	etcd_proc_cleanup(&m);
	hpp_rmrf(dir);
}

static void test_etcd_foreign_keys(void **state)
{
	char prefix[64], key[128];
	struct store *s;
	struct store_changes c;
	struct store_list l;
	uint64_t from, index;
	struct err e;

	assert_int_equal(te_open_prefix(&s, prefix, sizeof(prefix), &e), 0);
	from = store_index(s);
	snprintf(key, sizeof(key), "%sbogus/x", prefix);
	te_raw_put(key, "junk");
	snprintf(key, sizeof(key), "%svolume", prefix);
	te_raw_put(key, "junk");
	snprintf(key, sizeof(key), "%svolume/", prefix);
	te_raw_put(key, "junk");
	assert_int_equal(te_put(s, "v", "ok", &index, &e), 0);
	assert_int_equal(store_list(s, STORE_VOLUME, NULL, NULL, 0, &l, &e), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.objs[0].id, "v");
	store_list_free(&l);
	/* A page of one is the object, not the bare "volume/" key before it. */
	assert_int_equal(store_list(s, STORE_VOLUME, NULL, NULL, 1, &l, &e), 0);
	assert_int_equal(l.n, 1);
	assert_string_equal(l.objs[0].id, "v");
	assert_false(l.more);
	store_list_free(&l);
	assert_int_equal(store_changes(s, from, 0, &c, &e), 0);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.changes[0].obj.id, "v");
	store_changes_free(&c);
	store_close(s);
}

/* An etcd nobody runs: open fails at once, naming the endpoint. */
static void test_etcd_not_running(void **state)
{
	char url[64];
	const char *ep[] = {url};
	struct store_etcd_config cfg = {.endpoints = ep, .nendpoints = 1, .dial_timeout_ms = 1000};
	const char *bad[] = {"127.0.0.1:2379"};
	struct store *s = NULL;
	struct err e;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", server_proc_free_port());
	assert_int_equal(store_etcd_open(&cfg, &s, &e), CSID_EUNAVAIL);
	assert_null(s);
	assert_non_null(strstr(e.msg, url));
	cfg.endpoints = bad;
	assert_int_equal(store_etcd_open(&cfg, &s, &e), CSID_EINVAL);
	cfg.nendpoints = 0;
	assert_int_equal(store_etcd_open(&cfg, &s, &e), CSID_EINVAL);
}

/*
 * etcd goes down under an open store: writes fail clearly; when it comes
 * back the store writes again and its watch resumes where it stopped.
 */
static void test_etcd_down_and_back(void **state)
{
	char prefix[64];
	const char *ep[] = {te_etcd.url};
	struct store_etcd_config cfg = {.endpoints = ep,
					.nendpoints = 1,
					.prefix = prefix,
					.dial_timeout_ms = 500,
					.request_timeout_ms = 2000};
	struct store *s;
	struct store_changes c;
	uint64_t from, index;
	struct err e;
	int rc;

	snprintf(prefix, sizeof(prefix), "/test-%d-down/", (int)getpid());
	assert_int_equal(store_etcd_open(&cfg, &s, &e), 0);
	assert_int_equal(te_put(s, "v", "1", &from, &e), 0);
	etcd_proc_stop(&te_etcd, SIGKILL);
	rc = te_put(s, "v", "2", NULL, &e);
	assert_true(rc == CSID_EUNAVAIL || rc == CSID_ETIMEDOUT);
	assert_non_null(strstr(e.msg, te_etcd.url));
	assert_int_equal(etcd_proc_start(&te_etcd), 0);
	assert_int_equal(te_put(s, "v", "3", &index, &e), 0);
	assert_true(store_index(s) >= index);
	assert_int_equal(store_changes(s, from, 0, &c, &e), 0);
	assert_int_equal(c.n, 1);
	assert_string_equal(c.changes[0].obj.value, "3");
	store_changes_free(&c);
	store_close(s);
}

/*
 * An etcd that does not answer in time (stopped with SIGSTOP): a write
 * fails with CSID_ETIMEDOUT naming the endpoint after the request
 * timeout; once etcd runs again the store writes again. The timed-out
 * write may still land when etcd resumes (it was sent): a timeout says
 * "unknown", never "not written". It may even land after a write sent
 * later (etcd serves the two connections concurrently once it runs), so
 * it goes to a key of its own: there it is either absent or its value.
 */
static void test_etcd_slow(void **state)
{
	char prefix[64];
	const char *ep[] = {te_etcd.url};
	struct store_etcd_config cfg = {
	    .endpoints = ep, .nendpoints = 1, .prefix = prefix, .request_timeout_ms = 1000};
	struct store *s;
	struct store_obj o;
	uint64_t index;
	struct err e;
	int rc;

	snprintf(prefix, sizeof(prefix), "/test-%d-slow/", (int)getpid());
	assert_int_equal(store_etcd_open(&cfg, &s, &e), 0);
	assert_int_equal(etcd_proc_pause(&te_etcd, true), 0);
	assert_int_equal(te_put(s, "late", "late", NULL, &e), CSID_ETIMEDOUT);
	assert_non_null(strstr(e.msg, te_etcd.url));
	assert_int_equal(etcd_proc_pause(&te_etcd, false), 0);
	assert_int_equal(te_put(s, "v", "now", &index, &e), 0);
	assert_int_equal(store_get(s, STORE_VOLUME, "v", &o, &e), 0);
	assert_string_equal(o.value, "now");
	assert_int_equal(o.modify_index, index);
	store_obj_free(&o);
	rc = store_get(s, STORE_VOLUME, "late", &o, &e);
	if (rc == 0) {
		assert_string_equal(o.value, "late");
		store_obj_free(&o);
	} else {
		assert_int_equal(rc, CSID_ENOTFOUND);
	}
	store_close(s);
}

/* Waits (at most 60 s) until a write of id goes through; returns its result. */
static int te_put_until(struct store *s, const char *id, const char *value, uint64_t *index)
{
	struct timespec pause = {0, 50 * 1000 * 1000};
	time_t deadline = time(NULL) + 60;
	struct err e;
	int rc;

	while ((rc = te_put(s, id, value, index, &e)) != 0 && time(NULL) < deadline)
		nanosleep(&pause, NULL);
	if (rc)
		fprintf(stderr, "put %s: %s\n", id, e.msg);
	return rc;
}

/*
 * Writes until one is refused for the lost quorum (at most 60 s): returns
 * 0 then, or -1. Each write that times out meanwhile may still land.
 */
static int te_until_no_quorum(struct store *s)
{
	struct timespec pause = {0, 50 * 1000 * 1000};
	time_t deadline = time(NULL) + 60;
	int64_t t0;
	struct err e;
	int rc;

	for (;;) {
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		t0 = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
		rc = te_put(s, "v3", "3", NULL, &e);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		if (rc == CSID_EUNAVAIL && strstr(e.msg, "no quorum")) {
			/* Refused by the member itself: well within the request timeout. */
			assert_true((int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 - t0 < 2500);
			return 0;
		}
		assert_true(rc != 0);
		if (time(NULL) >= deadline) {
			fprintf(stderr, "put v3 without quorum: %s\n", e.msg);
			return -1;
		}
		nanosleep(&pause, NULL);
	}
}

/*
 * A three-member cluster: kill -9 of the member the store talks to, and
 * the store goes on through another (its writes and its watch); two
 * members down, no quorum: writes are refused at once, saying so; both back, writes go
 * through again and nothing acknowledged was lost.
 */
static void test_etcd_cluster_members_down(void **state)
{
	struct etcd_proc m[3];
	const char *ep[3];
	struct store_etcd_config cfg = {.endpoints = ep,
					.nendpoints = 3,
					.prefix = "/cluster/",
					.dial_timeout_ms = 500,
					.request_timeout_ms = 5000};
	struct store *s;
	struct store_changes c;
	struct store_obj o;
	uint64_t from, i2, i4;
	struct err e;

	memset(m, 0, sizeof(m));
	assert_int_equal(etcd_cluster_start(m, 3), 0);
	for (int i = 0; i < 3; i++)
		ep[i] = m[i].url;
	assert_int_equal(store_etcd_open(&cfg, &s, &e), 0);
	assert_int_equal(te_put(s, "v1", "1", &from, &e), 0);
	/*
	 * The member in use goes: the next endpoint takes the write and the
	 * watch (after a new leader is elected when it led: a write may time
	 * out meanwhile, and land; it is written again until acknowledged).
	 */
	etcd_proc_stop(&m[0], SIGKILL);
	assert_int_equal(te_put_until(s, "v2", "2", &i2), 0);
	assert_true(store_index(s) >= i2);
	assert_int_equal(store_changes(s, from, 0, &c, &e), 0);
	assert_true(c.n >= 1);
	for (size_t i = 0; i < c.n; i++)
		assert_string_equal(c.changes[i].obj.id, "v2");
	assert_int_equal(c.changes[c.n - 1].index, i2);
	store_changes_free(&c);
	/*
	 * No quorum: a clear error, not a hang. Once the last member sees
	 * that it has no leader (an election timeout after the loss; until
	 * then a write may time out), a write is refused at once, saying so.
	 */
	etcd_proc_stop(&m[1], SIGKILL);
	assert_int_equal(te_until_no_quorum(s), 0);
	/* The members come back: writes go through again, nothing acknowledged lost. */
	assert_int_equal(etcd_proc_start(&m[0]), 0);
	assert_int_equal(etcd_proc_start(&m[1]), 0);
	assert_int_equal(te_put_until(s, "v4", "4", &i4), 0);
	assert_true(i4 > i2);
	assert_int_equal(store_get(s, STORE_VOLUME, "v1", &o, &e), 0);
	store_obj_free(&o);
	assert_int_equal(store_get(s, STORE_VOLUME, "v2", &o, &e), 0);
	store_obj_free(&o);
	store_close(s);
	for (int i = 0; i < 3; i++)
		etcd_proc_cleanup(&m[i]);
}

static int te_group_setup(void **state)
{
	return etcd_proc_start(&te_etcd);
}

static int te_group_teardown(void **state)
{
	etcd_proc_cleanup(&te_etcd);
	return 0;
}

int main(void)
{
	const struct store_conformance etcd = {"etcd", te_open, te_close, NULL, TE_VALUE_MAX};
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_etcd_two_stores),
	    cmocka_unit_test(test_store_cache_follows_writer),
	    cmocka_unit_test(test_store_cache_stale_compare),
	    cmocka_unit_test(test_etcd_compacted_watch),
	    cmocka_unit_test(test_etcd_request_limit),
	    cmocka_unit_test(test_etcd_delete_create_index),
	    cmocka_unit_test(test_etcd_tls),
	    cmocka_unit_test(test_etcd_foreign_keys),
	    cmocka_unit_test(test_etcd_not_running),
	    cmocka_unit_test(test_etcd_slow),
	    cmocka_unit_test(test_etcd_down_and_back),
	    cmocka_unit_test(test_etcd_cluster_members_down),
	};
	int failed;

	if (etcd_proc_start(&te_etcd) != 0) {
		fprintf(stderr, "cannot start etcd\n");
		etcd_proc_cleanup(&te_etcd);
		return 1;
	}
	failed = store_conformance_run(&etcd);
	etcd_proc_cleanup(&te_etcd);
	return failed +
	       cmocka_run_group_tests_name("store etcd", tests, te_group_setup, te_group_teardown);
}
