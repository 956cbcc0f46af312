/*
 * Snapshot save and restore (server_backup.h). A save lists each kind in
 * full and keeps the result only when every list saw the same store index
 * (no write landed between them); else it reads again. A restore batch is
 * checked whole (format, kinds, IDs, each record decoding as its kind)
 * before its one transaction, whose ops all ask that the object not exist.
 */
#include "server/server_backup.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "model/model.h"
#include "server/server_claimidx.h"
#include "server/server_install.h"
#include "util/arena.h"

#define BACKUP_SAVE_TRIES 20

static void backup_lists_free(struct store_list *l)
{
	for (int k = 0; k < STORE_KIND_COUNT_; k++)
		store_list_free(&l[k]);
}

/* Every object of every kind, read at one index. */
static int backup_read(struct store *s, struct store_list *l, struct err *e)
{
	for (int t = 0; t < BACKUP_SAVE_TRIES; t++) {
		bool same = true;
		int rc = 0;

		for (int k = 0; k < STORE_KIND_COUNT_ && !rc; k++) {
			rc = store_list(s, (enum store_kind)k, NULL, NULL, 0, &l[k], e);
			same = same && l[k].index == l[0].index;
		}
		if (rc) {
			backup_lists_free(l);
			return err_wrap(e, "snapshot save");
		}
		if (same)
			return 0;
		backup_lists_free(l);
	}
	return err_set(e, CSID_EABORTED,
		       "snapshot save: the store changed during each of %d reads; try again",
		       BACKUP_SAVE_TRIES);
}

int server_backup_save(struct store *s, char **text, size_t *len, uint64_t *index, struct err *e)
{
	struct store_list l[STORE_KIND_COUNT_];
	json_t *doc = NULL, *objs = json_array();
	int rc;

	*text = NULL;
	*len = 0;
	memset(l, 0, sizeof(l));
	if (!objs)
		return err_set(e, CSID_ENOMEM, "snapshot save: out of memory");
	rc = backup_read(s, l, e);
	if (rc) {
		json_decref(objs);
		return rc;
	}
	for (int k = 0; k < STORE_KIND_COUNT_; k++) {
		for (size_t i = 0; i < l[k].n; i++) {
			const struct store_obj *o = &l[k].objs[i];
			json_t *v = json_stringn(o->value, o->len), *j;

			j = v ? json_pack("{s:s, s:s, s:o}", "kind", store_kind_name(o->kind), "id",
					  o->id, "value", v)
			      : NULL;
			if (!j || json_array_append_new(objs, j)) {
				rc = err_set(e, v ? CSID_ENOMEM : CSID_EPROTO,
					     "snapshot save: %s %s: %s", store_kind_name(o->kind),
					     o->id,
					     v ? "out of memory" : "record is not UTF-8 text");
				goto out;
			}
		}
	}
	doc = json_pack("{s:s, s:i, s:I, s:O}", "format", SERVER_BACKUP_FORMAT, "version",
			SERVER_BACKUP_VERSION, "index", (json_int_t)l[0].index, "objects", objs);
	*text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	if (!*text) {
		rc = err_set(e, CSID_ENOMEM, "snapshot save: out of memory");
		goto out;
	}
	*len = strlen(*text);
	*index = l[0].index;
out:
	/* The records hold secrets: wipe every copy but the answer. */
	for (int k = 0; k < STORE_KIND_COUNT_; k++)
		for (size_t i = 0; i < l[k].n; i++)
			explicit_bzero(l[k].objs[i].value, l[k].objs[i].len);
	backup_lists_free(l);
	json_decref(doc);
	json_decref(objs);
	return rc;
}

/* The kind named name, or -1. */
static int backup_kind(const char *name)
{
	for (int k = 0; name && k < STORE_KIND_COUNT_; k++)
		if (strcmp(store_kind_name((enum store_kind)k), name) == 0)
			return k;
	return -1;
}

/* Checks that a record decodes as its kind and names id. */
static int backup_check_record(enum store_kind kind, const char *id, const char *value, size_t len,
			       struct err *e)
{
	struct arena *a = arena_new();
	const char *got = NULL;
	int rc;

	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	if (kind == STORE_VOLUME) {
		struct model_volume *v = NULL;

		rc = model_volume_decode(a, value, len, &v, e);
		got = rc ? NULL : v->id;
	} else if (kind == STORE_SNAPSHOT) {
		struct model_snapshot *sn = NULL;

		rc = model_snapshot_decode(a, value, len, &sn, e);
		got = rc ? NULL : sn->id;
	} else if (kind == STORE_CLAIM) {
		/* The claim index, saved at the same index as the volumes it follows. */
		struct store_obj o = {
		    .kind = kind, .id = (char *)id, .value = (char *)value, .len = len};
		struct server_claimidx_entry en;

		rc = server_claimidx_parse(&o, a, &en, e);
		got = id;
	} else if (kind == STORE_INSTALLATION) {
		struct server_install in;

		rc = server_install_decode(value, len, &in, e);
		got = strcmp(id, SERVER_INSTALL_RECORD) == 0 ? id : NULL;
	} else if (kind == STORE_CLAIM_HISTORY) {
		/* A volume's freed claims (server/server_pastclaims.h), keyed by the volume's ID.
		 */
		struct model_claim *past = NULL;
		size_t n = 0;

		rc = model_history_decode(a, value, len, &past, &n, e);
		got = id;
	} else {
		struct model_node *nd = NULL;

		rc = model_node_decode(a, value, len, &nd, e);
		got = rc ? NULL : nd->id;
	}
	if (!rc && (!got || strcmp(got, id) != 0))
		rc = err_set(e, CSID_EINVAL, "the record names another ID");
	arena_free(a);
	return rc ? CSID_EINVAL : 0;
}

/* Refuses a store that holds any object but the installation record its servers wrote. */
static int backup_check_empty(struct store *s, struct err *e)
{
	for (int k = 0; k < STORE_KIND_COUNT_; k++) {
		struct store_list l;
		int rc;
		size_t n;

		if (k == STORE_INSTALLATION)
			continue;
		rc = store_list(s, (enum store_kind)k, NULL, NULL, 1, &l, e);
		n = l.n;
		store_list_free(&l);
		if (rc)
			return err_wrap(e, "snapshot restore");
		if (n > 0)
			return err_set(e, CSID_EPRECOND,
				       "snapshot restore: the store is not empty (it holds %ss); a "
				       "snapshot is restored into an empty store only",
				       store_kind_name((enum store_kind)k));
	}
	return 0;
}

int server_backup_restore(struct store *s, const char *body, size_t len, size_t *n, struct err *e)
{
	struct store_op ops[SERVER_BACKUP_BATCH_OPS];
	json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL), *objs, *o, *first;
	char *inst_text = NULL;
	const char *format;
	size_t i;
	int rc = 0;

	*n = 0;
	format = json_string_value(json_object_get(doc, "format"));
	objs = json_object_get(doc, "objects");
	first = json_object_get(doc, "first");
	if (!json_is_object(doc) || !format || strcmp(format, SERVER_BACKUP_FORMAT) != 0) {
		rc = err_set(e, CSID_EINVAL, "snapshot restore: not a csid snapshot");
		goto out;
	}
	if (json_integer_value(json_object_get(doc, "version")) != SERVER_BACKUP_VERSION) {
		rc = err_set(e, CSID_EINVAL, "snapshot restore: version: expected %d",
			     SERVER_BACKUP_VERSION);
		goto out;
	}
	if (!json_is_array(objs) || json_array_size(objs) > SERVER_BACKUP_BATCH_OPS ||
	    (first && !json_is_boolean(first))) {
		rc = err_set(e, CSID_EINVAL,
			     "snapshot restore: expected \"objects\": an array of at most %d, and "
			     "\"first\": true or false",
			     SERVER_BACKUP_BATCH_OPS);
		goto out;
	}
	json_array_foreach(objs, i, o)
	{
		int kind = backup_kind(json_string_value(json_object_get(o, "kind")));
		json_t *v = json_object_get(o, "value");
		const char *id = json_string_value(json_object_get(o, "id"));

		if (kind < 0 || !id || !json_is_string(v) || json_object_size(o) != 3) {
			rc = err_set(e, CSID_EINVAL,
				     "snapshot restore: objects[%zu]: expected {\"kind\", \"id\", "
				     "\"value\"}",
				     i);
			goto out;
		}
		rc = backup_check_record((enum store_kind)kind, id, json_string_value(v),
					 json_string_length(v), e);
		if (rc) {
			err_wrap(e, "snapshot restore: %s %s",
				 store_kind_name((enum store_kind)kind), id);
			goto out;
		}
		ops[i] = (struct store_op){STORE_OP_PUT,         (enum store_kind)kind, id,
					   json_string_value(v), json_string_length(v), 0};
		/* The record: the snapshot's identity, the running servers' settings. */
		if (kind == STORE_INSTALLATION && !inst_text &&
		    (rc = server_install_restore_op(s, json_string_value(v), json_string_length(v),
						    &ops[i], &inst_text, e))) {
			err_wrap(e, "snapshot restore: installation record");
			goto out;
		}
	}
	if (json_is_true(first) && (rc = backup_check_empty(s, e)))
		goto out;
	if (i > 0 && (rc = store_txn(s, ops, i, NULL, e))) {
		err_wrap(e, "snapshot restore");
		goto out;
	}
	*n = i;
out:
	free(inst_text);
	json_decref(doc);
	return rc;
}
