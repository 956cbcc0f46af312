/*
 * Unit tests of the active-claims index (src/server/server_claimidx.c) on
 * a memory store: the diff of a volume's claimed claims (claimed added,
 * changed and moved on); entries parsed back, damaged ones refused; a
 * rebuild over a store without index puts every claimed claim's entry,
 * rewrites a changed one, drops those no claim backs, and is then a
 * no-op (it writes nothing).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/server_claimidx.h"

static struct model_claim t_claim(const char *alloc, const char *node, enum model_claim_state state,
				  int64_t updated)
{
	return (struct model_claim){.alloc_id = (char *)alloc,
				    .node_id = (char *)node,
				    .cap = {.access = MODEL_ACCESS_SINGLE_NODE_WRITER},
				    .state = state,
				    .updated_ms = updated,
				    .held_by_agent = true};
}

static void test_diff(void **state)
{
	struct arena *a = arena_new();
	struct model_claim c[3] = {t_claim("a1", "n1", MODEL_CLAIM_CLAIMED, 5),
				   t_claim("a2", "n2", MODEL_CLAIM_CLAIMED, 6),
				   t_claim("a3", "n1", MODEL_CLAIM_NODE_UNPUBLISHED, 7)};
	struct model_volume v = {.id = "vol", .claims = c, .nclaims = 3};
	struct server_claimidx_entry *old, *nw;
	struct store_op ops[4];
	size_t nold, nnew, n = 0;

	(void)state;
	assert_int_equal(server_claimidx_of(&v, a, &old, &nold), 0);
	assert_int_equal(nold, 2);
	/* a1 moves on, a2 is claimed again (fresh updated_ms), a3 is claimed. */
	c[0].state = MODEL_CLAIM_NODE_UNPUBLISHED;
	c[1].updated_ms = 9;
	c[2].state = MODEL_CLAIM_CLAIMED;
	assert_int_equal(server_claimidx_of(&v, a, &nw, &nnew), 0);
	assert_int_equal(server_claimidx_diff(old, nold, nw, nnew, a, ops, 4, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(ops[0].type, STORE_OP_DELETE);
	assert_string_equal(ops[0].id, "n1/vol/a1");
	assert_int_equal(ops[1].type, STORE_OP_PUT);
	assert_string_equal(ops[1].id, "n2/vol/a2");
	assert_non_null(strstr(ops[1].value, "\"updated_ms\":9"));
	assert_string_equal(ops[2].id, "n1/vol/a3");
	for (size_t i = 0; i < n; i++)
		assert_int_equal(ops[i].kind, STORE_CLAIM);
	/* Nothing changed: no op; too many changes: CSID_ERANGE. */
	n = 0;
	assert_int_equal(server_claimidx_diff(nw, nnew, nw, nnew, a, ops, 4, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(server_claimidx_diff(old, nold, nw, nnew, a, ops, 2, &n), CSID_ERANGE);
	arena_free(a);
}

static void test_parse(void **state)
{
	struct arena *a = arena_new();
	struct server_claimidx_entry x;
	struct store_obj o = {.kind = STORE_CLAIM,
			      .id = "node-1/vol-1/alloc-1",
			      .value = "{\"updated_ms\":42,\"held_by_agent\":true}"};
	static const char *bad_ids[] = {"node-1/vol-1", "/vol/alloc", "n//a", "n/v/", "n/v/a/b"};
	struct err e;

	(void)state;
	o.len = strlen(o.value);
	assert_int_equal(server_claimidx_parse(&o, a, &x, &e), 0);
	assert_string_equal(x.node_id, "node-1");
	assert_string_equal(x.volume_id, "vol-1");
	assert_string_equal(x.alloc_id, "alloc-1");
	assert_int_equal(x.updated_ms, 42);
	assert_true(x.held_by_agent);
	for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++) {
		o.id = (char *)bad_ids[i];
		assert_int_equal(server_claimidx_parse(&o, a, &x, &e), CSID_EPROTO);
	}
	o.id = "n/v/a";
	o.value = "{\"updated_ms\":\"x\"}";
	o.len = strlen(o.value);
	assert_int_equal(server_claimidx_parse(&o, a, &x, &e), CSID_EPROTO);
	arena_free(a);
}

static void t_put(struct store *st, enum store_kind kind, const char *id, const char *value)
{
	struct store_op op = {STORE_OP_PUT, kind, id, value, strlen(value), STORE_ANY};
	struct err e;

	assert_int_equal(store_txn(st, &op, 1, NULL, &e), 0);
}

static void t_volume(struct store *st, const char *id, struct model_claim *c, size_t n)
{
	struct model_capability cap = {.access = MODEL_ACCESS_SINGLE_NODE_WRITER};
	struct model_volume v = {.id = (char *)id,
				 .name = (char *)id,
				 .plugin_id = "p.csi",
				 .caps = &cap,
				 .ncaps = 1,
				 .claims = c,
				 .nclaims = n};
	char *json = NULL;
	size_t len = 0;
	struct err e;

	assert_int_equal(model_volume_encode(&v, MODEL_VIEW_STORE, &json, &len, &e), 0);
	t_put(st, STORE_VOLUME, id, json);
	free(json);
}

/* The IDs of the index, joined with spaces. */
static const char *t_index(struct store *st, char *buf, size_t cap)
{
	struct store_list l = {0};
	struct err e;
	size_t off = 0;

	buf[0] = '\0';
	assert_int_equal(store_list(st, STORE_CLAIM, NULL, NULL, 0, &l, &e), 0);
	for (size_t i = 0; i < l.n; i++)
		off += (size_t)snprintf(buf + off, cap - off, "%s%s", i ? " " : "", l.objs[i].id);
	store_list_free(&l);
	return buf;
}

static void test_rebuild(void **state)
{
	struct model_claim c1[2] = {t_claim("a1", "n1", MODEL_CLAIM_CLAIMED, 5),
				    t_claim("a2", "n2", MODEL_CLAIM_FREED, 6)};
	struct model_claim c2[1] = {t_claim("b1", "n1", MODEL_CLAIM_CLAIMED, 7)};
	struct store *st;
	struct store_obj o;
	char buf[512];
	uint64_t index;
	struct err e;

	(void)state;
	assert_int_equal(store_mem_new(&st, &e), 0);
	t_volume(st, "v1", c1, 2);
	t_volume(st, "v2", c2, 1);
	/* A stale entry, and one with another updated_ms. */
	t_put(st, STORE_CLAIM, "n9/v1/gone", "{\"updated_ms\":1,\"held_by_agent\":true}");
	t_put(st, STORE_CLAIM, "n1/v2/b1", "{\"updated_ms\":3,\"held_by_agent\":true}");
	assert_int_equal(server_claimidx_rebuild(st, &e), 0);
	assert_string_equal(t_index(st, buf, sizeof(buf)), "n1/v1/a1 n1/v2/b1");
	assert_int_equal(store_get(st, STORE_CLAIM, "n1/v2/b1", &o, &e), 0);
	assert_non_null(strstr(o.value, "\"updated_ms\":7"));
	store_obj_free(&o);
	index = store_index(st);
	assert_int_equal(server_claimidx_rebuild(st, &e), 0);
	assert_int_equal(store_index(st), index);
	store_close(st);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_diff),
	    cmocka_unit_test(test_parse),
	    cmocka_unit_test(test_rebuild),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
