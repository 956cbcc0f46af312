/*
 * The installation record (src/server/server_install.c) on memory stores:
 * the first start writes it (a random ID, or the configured cluster_id);
 * a later start with another cluster_id is refused naming both IDs, one
 * whose node_ttl, node_grace or leader_ttl differ is refused naming each
 * key with both values, one whose backoffs differ adopts the stored ones;
 * -update-settings rewrites the record; a catalogue older than the record
 * gets one; an undecodable record is refused; a snapshot's record
 * restored keeps the target's settings and takes the snapshot's ID.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "server/server_backup.h"
#include "server/server_install.h"
#include "store/store.h"

static const struct server_install_settings ti_set = {
    .node_ttl_ms = 30000,
    .node_grace_ms = 300000,
    .leader_ttl_ms = 10000,
    .backoff_min_ms = 100,
    .backoff_max_ms = 600000,
};

static struct store *ti_store(void)
{
	struct store *s;
	struct err e;

	assert_int_equal(store_mem_new(&s, &e), 0);
	return s;
}

static void ti_expect_msg(const struct err *e, const char *needle)
{
	if (!strstr(e->msg, needle))
		fail_msg("message \"%s\" lacks \"%s\"", e->msg, needle);
}

static void test_install_first_and_later(void **state)
{
	struct server_install_opts o = {.set = ti_set};
	struct server_install a, b;
	struct store *s = ti_store();
	struct store_obj rec;
	struct err e;
	uint64_t index;

	(void)state;
	assert_int_equal(server_install_check(s, &o, &a, &e), 0);
	assert_int_equal(strlen(a.id), 32);
	assert_int_equal(a.set.node_ttl_ms, 30000);
	assert_int_equal(store_get(s, STORE_INSTALLATION, SERVER_INSTALL_RECORD, &rec, &e), 0);
	assert_non_null(strstr(rec.value, a.id));
	store_obj_free(&rec);
	index = store_index(s);
	/* Same settings, no cluster_id: the stored installation, nothing written. */
	assert_int_equal(server_install_check(s, &o, &b, &e), 0);
	assert_string_equal(a.id, b.id);
	assert_int_equal(store_index(s), index);
	/* Its own ID configured: the same. */
	o.want_id = a.id;
	assert_int_equal(server_install_check(s, &o, &b, &e), 0);
	/* Another installation's. */
	o.want_id = "prod-eu";
	assert_int_equal(server_install_check(s, &o, &b, &e), CSID_EPRECOND);
	ti_expect_msg(&e, "prod-eu");
	ti_expect_msg(&e, a.id);
	ti_expect_msg(&e, "another installation");
	/* A bad cluster_id. */
	o.want_id = "a b";
	assert_int_equal(server_install_check(s, &o, &b, &e), CSID_EINVAL);
	assert_int_equal(store_index(s), index);
	store_close(s);
	/* A configured ID names a new installation. */
	s = ti_store();
	o.want_id = "prod-eu";
	assert_int_equal(server_install_check(s, &o, &a, &e), 0);
	assert_string_equal(a.id, "prod-eu");
	store_close(s);
}

static void test_install_settings(void **state)
{
	struct server_install_opts o = {.set = ti_set};
	struct server_install a, b;
	struct store *s = ti_store();
	struct err e;
	uint64_t index;

	(void)state;
	assert_int_equal(server_install_check(s, &o, &a, &e), 0);
	index = store_index(s);
	/* Keys that must agree: refused, each named with both values. */
	o.set.node_ttl_ms = 20000;
	o.set.leader_ttl_ms = 2000;
	assert_int_equal(server_install_check(s, &o, &b, &e), CSID_EPRECOND);
	ti_expect_msg(&e, "node_ttl: this server 20s, the installation 30s");
	ti_expect_msg(&e, "leader_ttl: this server 2s, the installation 10s");
	ti_expect_msg(&e, a.id);
	assert_null(strstr(e.msg, "node_grace"));
	assert_int_equal(store_index(s), index);
	/* Backoffs: adopted from the record. */
	o.set = ti_set;
	o.set.backoff_min_ms = 10;
	o.set.backoff_max_ms = 200;
	assert_int_equal(server_install_check(s, &o, &b, &e), 0);
	assert_int_equal(b.set.backoff_min_ms, 100);
	assert_int_equal(b.set.backoff_max_ms, 600000);
	assert_int_equal(store_index(s), index);
	/* On purpose: the record takes this server's settings, the next start agrees. */
	o.set.node_grace_ms = 60000;
	o.update_settings = true;
	assert_int_equal(server_install_check(s, &o, &b, &e), 0);
	assert_string_equal(b.id, a.id);
	assert_int_equal(b.set.node_grace_ms, 60000);
	assert_int_equal(b.set.backoff_min_ms, 10);
	assert_int_equal(store_index(s), index + 1);
	o.update_settings = false;
	assert_int_equal(server_install_check(s, &o, &b, &e), 0);
	o.set = ti_set;
	assert_int_equal(server_install_check(s, &o, &b, &e), CSID_EPRECOND);
	ti_expect_msg(&e, "node_grace: this server 5m0s, the installation 1m0s");
	store_close(s);
}

static void test_install_old_and_foreign(void **state)
{
	struct server_install_opts o = {.set = ti_set};
	struct store_op node = {STORE_OP_PUT, STORE_NODE, "n1", "{}", 2, 0};
	struct store_op bad = {
	    STORE_OP_PUT, STORE_INSTALLATION, SERVER_INSTALL_RECORD, "{\"x\":1}", 7, 0};
	struct server_install a;
	struct store *s = ti_store();
	struct err e;

	(void)state;
	/* A catalogue from before the record: it gets one. */
	assert_int_equal(store_txn(s, &node, 1, NULL, &e), 0);
	assert_int_equal(server_install_check(s, &o, &a, &e), 0);
	assert_int_equal(strlen(a.id), 32);
	store_close(s);
	/* A record csid cannot read: refused, never replaced. */
	s = ti_store();
	assert_int_equal(store_txn(s, &bad, 1, NULL, &e), 0);
	assert_int_equal(server_install_check(s, &o, &a, &e), CSID_EPRECOND);
	ti_expect_msg(&e, "cannot be read");
	ti_expect_msg(&e, "not a csid installation");
	assert_int_equal(store_index(s), 1);
	store_close(s);
}

static void test_install_decode(void **state)
{
	struct server_install in = {.id = "abc", .created_ms = 5, .set = ti_set}, out;
	static const char *const bad[] = {
	    "",
	    "[]",
	    "{\"format\":\"csid-installation\",\"version\":2}",
	    "{\"format\":\"csid-installation\",\"version\":1,\"id\":\"a/b\",\"created_ms\":1,"
	    "\"settings\":{}}",
	    "{\"format\":\"csid-installation\",\"version\":1,\"id\":\"a\",\"created_ms\":1,"
	    "\"settings\":{\"node_ttl\":0}}",
	};
	struct err e;
	size_t len;
	char *text;

	(void)state;
	assert_int_equal(server_install_encode(&in, &text, &len, &e), 0);
	assert_int_equal(server_install_decode(text, len, &out, &e), 0);
	assert_string_equal(out.id, "abc");
	assert_int_equal(out.created_ms, 5);
	assert_memory_equal(&out.set, &ti_set, sizeof(ti_set));
	free(text);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(server_install_decode(bad[i], strlen(bad[i]), &out, &e),
				 CSID_EPROTO);
}

/* A snapshot of a store with a record, restored where another record is. */
static void test_install_restore(void **state)
{
	struct server_install_opts o = {.set = ti_set};
	struct server_install src_in, dst_in, now;
	struct store *src = ti_store(), *dst = ti_store();
	struct store_obj rec;
	struct err e;
	json_t *doc;
	char *text, *batch;
	size_t len, n;
	uint64_t index;

	(void)state;
	assert_int_equal(server_install_check(src, &o, &src_in, &e), 0);
	o.set.node_ttl_ms = 5000;
	assert_int_equal(server_install_check(dst, &o, &dst_in, &e), 0);
	assert_string_not_equal(src_in.id, dst_in.id);
	assert_int_equal(server_backup_save(src, &text, &len, &index, &e), 0);
	doc = json_loads(text, 0, NULL);
	assert_int_equal(json_array_size(json_object_get(doc, "objects")), 1);
	json_object_del(doc, "index");
	json_object_set_new(doc, "first", json_true());
	batch = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	/* The target holds only its record: empty enough. */
	assert_int_equal(server_backup_restore(dst, batch, strlen(batch), &n, &e), 0);
	assert_int_equal(n, 1);
	assert_int_equal(store_get(dst, STORE_INSTALLATION, SERVER_INSTALL_RECORD, &rec, &e), 0);
	assert_int_equal(server_install_decode(rec.value, rec.len, &now, &e), 0);
	store_obj_free(&rec);
	assert_string_equal(now.id, src_in.id);
	assert_int_equal(now.set.node_ttl_ms, 5000);
	/* The target's servers start again with their config: they agree. */
	assert_int_equal(server_install_check(dst, &o, &now, &e), 0);
	assert_string_equal(now.id, src_in.id);
	free(batch);
	free(text);
	store_close(src);
	store_close(dst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_install_first_and_later), cmocka_unit_test(test_install_settings),
	    cmocka_unit_test(test_install_old_and_foreign), cmocka_unit_test(test_install_decode),
	    cmocka_unit_test(test_install_restore),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
