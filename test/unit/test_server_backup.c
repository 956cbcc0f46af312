/*
 * Snapshot save and restore of the catalogue (src/server/server_backup.c)
 * on memory stores: a save holds every object at one index and restores
 * into an empty store byte for byte; a store that is not empty, a batch
 * naming an object that exists, a foreign document, an unknown kind, a
 * record that does not decode as its kind or names another ID, and a
 * batch over the limit are each refused with a clear error and write
 * nothing.
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
#include "store/store.h"

/* A record of the model's store encoding, from the fuzz corpus. */
static char *tb_record(const char *name, size_t *len)
{
	char path[512];
	FILE *f;
	char *buf = malloc(65536);

	snprintf(path, sizeof(path), "%s/test/fuzz/corpus/model_store/%s.json", CSID_SOURCE_DIR,
		 name);
	f = fopen(path, "rb");
	assert_non_null(f);
	assert_non_null(buf);
	*len = fread(buf, 1, 65535, f);
	fclose(f);
	while (*len > 0 && (buf[*len - 1] == '\n' || buf[*len - 1] == ' '))
		(*len)--;
	buf[*len] = '\0';
	return buf;
}

/* A store with volume "data", node "n1" and snapshot "snap-1". */
static struct store *tb_full(void)
{
	size_t vl, nl, sl;
	char *v = tb_record("volume", &vl), *n = tb_record("node", &nl),
	     *sn = tb_record("snapshot", &sl);
	struct store_op ops[3] = {{STORE_OP_PUT, STORE_VOLUME, "data", v, vl, 0},
				  {STORE_OP_PUT, STORE_NODE, "n1", n, nl, 0},
				  {STORE_OP_PUT, STORE_SNAPSHOT, "snap-1", sn, sl, 0}};
	struct store *s;
	struct err e;

	assert_int_equal(store_mem_new(&s, &e), 0);
	assert_int_equal(store_txn(s, ops, 3, NULL, &e), 0);
	free(v);
	free(n);
	free(sn);
	return s;
}

/* The save's document as a restore batch ("first" set). */
static char *tb_batch(const char *saved, bool first)
{
	json_t *doc = json_loads(saved, 0, NULL);
	char *text;

	assert_non_null(doc);
	json_object_del(doc, "index");
	json_object_set_new(doc, "first", json_boolean(first));
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	return text;
}

static void tb_expect_same(struct store *a, struct store *b)
{
	for (int k = 0; k < STORE_KIND_COUNT_; k++) {
		struct store_list la, lb;
		struct err e;

		assert_int_equal(store_list(a, (enum store_kind)k, NULL, NULL, 0, &la, &e), 0);
		assert_int_equal(store_list(b, (enum store_kind)k, NULL, NULL, 0, &lb, &e), 0);
		assert_int_equal(la.n, lb.n);
		for (size_t i = 0; i < la.n; i++) {
			assert_string_equal(la.objs[i].id, lb.objs[i].id);
			assert_int_equal(la.objs[i].len, lb.objs[i].len);
			assert_memory_equal(la.objs[i].value, lb.objs[i].value, la.objs[i].len);
		}
		store_list_free(&la);
		store_list_free(&lb);
	}
}

static void test_backup_roundtrip(void **state)
{
	struct store *src = tb_full(), *dst;
	char *text, *batch;
	size_t len, n;
	uint64_t index;
	json_t *doc;
	struct err e;

	assert_int_equal(server_backup_save(src, &text, &len, &index, &e), 0);
	assert_int_equal(index, store_index(src));
	doc = json_loadb(text, len, 0, NULL);
	assert_string_equal(json_string_value(json_object_get(doc, "format")), "csid-snapshot");
	assert_int_equal(json_array_size(json_object_get(doc, "objects")), 3);
	json_decref(doc);
	assert_int_equal(store_mem_new(&dst, &e), 0);
	batch = tb_batch(text, true);
	assert_int_equal(server_backup_restore(dst, batch, strlen(batch), &n, &e), 0);
	assert_int_equal(n, 3);
	tb_expect_same(src, dst);
	/* Into a store that is not empty: refused, nothing written. */
	assert_int_equal(server_backup_restore(dst, batch, strlen(batch), &n, &e), CSID_EPRECOND);
	assert_non_null(strstr(e.msg, "not empty"));
	free(batch);
	/* A later batch naming an object that exists: a conflict. */
	batch = tb_batch(text, false);
	assert_int_equal(server_backup_restore(dst, batch, strlen(batch), &n, &e), CSID_ECONFLICT);
	assert_non_null(strstr(e.msg, "already exists"));
	free(batch);
	free(text);
	/* An empty store saves an empty snapshot, which restores as nothing. */
	store_close(dst);
	assert_int_equal(store_mem_new(&dst, &e), 0);
	assert_int_equal(server_backup_save(dst, &text, &len, &index, &e), 0);
	batch = tb_batch(text, true);
	assert_int_equal(server_backup_restore(dst, batch, strlen(batch), &n, &e), 0);
	assert_int_equal(n, 0);
	assert_int_equal(store_index(dst), 0);
	free(batch);
	free(text);
	store_close(dst);
	store_close(src);
}

/* Restores text into a fresh memory store; expects code and needle in the message. */
static void tb_bad(const char *text, int code, const char *needle)
{
	struct store *s;
	size_t n = 9;
	struct err e;

	assert_int_equal(store_mem_new(&s, &e), 0);
	assert_int_equal(server_backup_restore(s, text, strlen(text), &n, &e), code);
	if (strstr(e.msg, needle) == NULL)
		fail_msg("message \"%s\" lacks \"%s\"", e.msg, needle);
	assert_int_equal(n, 0);
	assert_int_equal(store_index(s), 0);
	store_close(s);
}

static void test_backup_bad_input(void **state)
{
	size_t vl;
	char *v = tb_record("volume", &vl);
	json_t *rec = json_stringn(v, vl), *doc;
	char *text;

	tb_bad("", CSID_EINVAL, "not a csid snapshot");
	tb_bad("{\"format\": \"other\", \"version\": 1, \"objects\": []}", CSID_EINVAL,
	       "not a csid snapshot");
	tb_bad("{\"format\": \"csid-snapshot\", \"version\": 2, \"objects\": []}", CSID_EINVAL,
	       "version");
	tb_bad("{\"format\": \"csid-snapshot\", \"version\": 1, \"objects\": {}}", CSID_EINVAL,
	       "objects");
	tb_bad("{\"format\": \"csid-snapshot\", \"version\": 1, \"objects\": [{\"kind\": \"disk\", "
	       "\"id\": \"x\", \"value\": \"{}\"}]}",
	       CSID_EINVAL, "objects[0]");
	tb_bad("{\"format\": \"csid-snapshot\", \"version\": 1, \"objects\": [{\"kind\": "
	       "\"volume\", \"id\": \"x\", \"value\": \"{not json\"}]}",
	       CSID_EINVAL, "volume x");
	/* A good record under another ID. */
	doc = json_pack("{s:s, s:i, s:[{s:s, s:s, s:O}]}", "format", "csid-snapshot", "version", 1,
			"objects", "kind", "volume", "id", "other", "value", rec);
	text = json_dumps(doc, JSON_COMPACT);
	tb_bad(text, CSID_EINVAL, "names another ID");
	free(text);
	json_decref(doc);
	/* One object over the batch limit. */
	doc = json_pack("{s:s, s:i, s:[]}", "format", "csid-snapshot", "version", 1, "objects");
	for (int i = 0; i <= SERVER_BACKUP_BATCH_OPS; i++)
		json_array_append_new(
		    json_object_get(doc, "objects"),
		    json_pack("{s:s, s:s, s:O}", "kind", "volume", "id", "data", "value", rec));
	text = json_dumps(doc, JSON_COMPACT);
	tb_bad(text, CSID_EINVAL, "at most");
	free(text);
	json_decref(doc);
	json_decref(rec);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_backup_roundtrip),
	    cmocka_unit_test(test_backup_bad_input),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
