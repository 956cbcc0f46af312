/*
 * The installation record (rules in server_install.h). The record is
 * written with the condition that it does not exist, so of two servers
 * starting on an empty store at once one writes it and the other reads
 * and checks it like any later start; a rewrite (-update-settings,
 * restore) is conditioned on the version it read.
 */
#include "server/server_install.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <jansson.h>

#include "util/clock.h"
#include "util/conf.h"
#include "util/log.h"

/* How often a start re-reads after losing the race to write the record. */
#define SERVER_INSTALL_TRIES 5

/* One cluster-wide key: its config name, where it is, whether it must agree. */
struct server_install_key {
	const char *name;
	size_t off;
	bool agree;
};

static const struct server_install_key server_install_keys[] = {
    {"node_ttl", offsetof(struct server_install_settings, node_ttl_ms), true},
    {"node_grace", offsetof(struct server_install_settings, node_grace_ms), true},
    {"leader_ttl", offsetof(struct server_install_settings, leader_ttl_ms), true},
    {"backoff_min", offsetof(struct server_install_settings, backoff_min_ms), false},
    {"backoff_max", offsetof(struct server_install_settings, backoff_max_ms), false},
};
#define SERVER_INSTALL_NKEYS (sizeof(server_install_keys) / sizeof(server_install_keys[0]))

static int64_t *server_install_at(struct server_install_settings *s, size_t i)
{
	return (int64_t *)((char *)s + server_install_keys[i].off);
}

static int64_t server_install_get(const struct server_install_settings *s, size_t i)
{
	return *(const int64_t *)((const char *)s + server_install_keys[i].off);
}

size_t server_install_nkeys(void)
{
	return SERVER_INSTALL_NKEYS;
}

const char *server_install_key(size_t i, bool *must_agree)
{
	*must_agree = server_install_keys[i].agree;
	return server_install_keys[i].name;
}

int64_t server_install_value(const struct server_install_settings *set, size_t i)
{
	return server_install_get(set, i);
}

bool server_install_id_ok(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (n == 0 || n > SERVER_INSTALL_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

int server_install_encode(const struct server_install *in, char **text, size_t *len, struct err *e)
{
	json_t *set = json_object(), *doc = NULL;

	*text = NULL;
	for (size_t i = 0; set && i < SERVER_INSTALL_NKEYS; i++)
		if (json_object_set_new(set, server_install_keys[i].name,
					json_integer(server_install_get(&in->set, i)))) {
			json_decref(set);
			set = NULL;
		}
	if (set)
		doc = json_pack("{s:s, s:i, s:s, s:I, s:o}", "format", SERVER_INSTALL_FORMAT,
				"version", SERVER_INSTALL_VERSION, "id", in->id, "created_ms",
				(json_int_t)in->created_ms, "settings", set);
	*text = doc ? json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(doc);
	if (!*text)
		return err_set(e, CSID_ENOMEM, "installation record: out of memory");
	*len = strlen(*text);
	return 0;
}

int server_install_decode(const char *text, size_t len, struct server_install *out, struct err *e)
{
	json_t *doc = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES, NULL), *set;
	const char *format = json_string_value(json_object_get(doc, "format"));
	const char *id = json_string_value(json_object_get(doc, "id"));
	json_t *created = json_object_get(doc, "created_ms");
	int rc = 0;

	memset(out, 0, sizeof(*out));
	set = json_object_get(doc, "settings");
	if (!json_is_object(doc) || !format || strcmp(format, SERVER_INSTALL_FORMAT) != 0)
		rc = err_set(e, CSID_EPROTO, "not a csid installation record");
	else if (json_integer_value(json_object_get(doc, "version")) != SERVER_INSTALL_VERSION)
		rc = err_set(e, CSID_EPROTO, "installation record version %lld, expected %d",
			     (long long)json_integer_value(json_object_get(doc, "version")),
			     SERVER_INSTALL_VERSION);
	else if (!server_install_id_ok(id))
		rc = err_set(e, CSID_EPROTO, "installation record: no valid \"id\"");
	else if (!json_is_integer(created) || !json_is_object(set))
		rc = err_set(e, CSID_EPROTO,
			     "installation record: \"created_ms\" or \"settings\" missing");
	for (size_t i = 0; !rc && i < SERVER_INSTALL_NKEYS; i++) {
		json_t *v = json_object_get(set, server_install_keys[i].name);

		if (!json_is_integer(v) || json_integer_value(v) <= 0)
			rc = err_set(e, CSID_EPROTO,
				     "installation record: settings.%s: expected a positive "
				     "integer (ms)",
				     server_install_keys[i].name);
		else
			*server_install_at(&out->set, i) = json_integer_value(v);
	}
	if (!rc) {
		snprintf(out->id, sizeof(out->id), "%s", id);
		out->created_ms = json_integer_value(created);
	}
	json_decref(doc);
	return rc;
}

int server_install_compare(const struct server_install_settings *stored,
			   struct server_install_settings *ours, struct err *e)
{
	char diff[ERR_MSG_MAX] = "";
	size_t used = 0, ndiff = 0;

	for (size_t i = 0; i < SERVER_INSTALL_NKEYS; i++) {
		int64_t have = server_install_get(stored, i), mine = server_install_get(ours, i);
		char a[32], b[32];

		if (have == mine)
			continue;
		conf_format_duration(mine, a, sizeof(a));
		conf_format_duration(have, b, sizeof(b));
		if (!server_install_keys[i].agree) {
			log_warn("msg=\"a cluster-wide setting differs from the installation's; "
				 "the installation's is used\" key=%s this_server=%s "
				 "installation=%s",
				 server_install_keys[i].name, a, b);
			*server_install_at(ours, i) = have;
			continue;
		}
		if (used < sizeof(diff))
			used +=
			    (size_t)snprintf(diff + used, sizeof(diff) - used,
					     "%s%s: this server %s, the installation %s",
					     ndiff ? "; " : "", server_install_keys[i].name, a, b);
		ndiff++;
	}
	if (!ndiff)
		return 0;
	return err_set(e, CSID_EPRECOND,
		       "cluster-wide settings differ from the installation's (%s); every server "
		       "of an installation must run with the same ones: fix this server's "
		       "config, or change them for all on purpose with -update-settings",
		       diff);
}

/* 32 random hex digits. */
static int server_install_new_id(char *out, size_t cap, struct err *e)
{
	unsigned char raw[16];

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return err_errno(e, errno, "installation ID: getrandom");
	for (size_t i = 0; i < sizeof(raw) && 2 * i + 2 < cap; i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

/* Writes *in on the condition expect (0: must not exist). */
static int server_install_put(struct store *s, const struct server_install *in, uint64_t expect,
			      struct err *e)
{
	struct store_op op = {STORE_OP_PUT, STORE_INSTALLATION, SERVER_INSTALL_RECORD, NULL, 0,
			      expect};
	size_t len = 0;
	char *text = NULL;
	int rc = server_install_encode(in, &text, &len, e);

	if (rc)
		return rc;
	op.value = text;
	op.len = len;
	rc = store_txn(s, &op, 1, NULL, e);
	free(text);
	return rc;
}

/* Whether the store holds any csid object (an installation from before the record). */
static int server_install_catalogue(struct store *s, bool *any, struct err *e)
{
	*any = false;
	for (int k = 0; k < STORE_KIND_COUNT_ && !*any; k++) {
		struct store_list l = {0};
		int rc = store_list(s, (enum store_kind)k, NULL, NULL, 1, &l, e);

		*any = l.n > 0;
		store_list_free(&l);
		if (rc)
			return rc;
	}
	return 0;
}

/* No record: makes one, unless the namespace holds others' keys. */
static int server_install_create(struct store *s, const struct server_install_opts *o,
				 struct server_install *out, struct err *e)
{
	uint64_t foreign = 0;
	bool old = false;
	int rc;

	if ((rc = store_foreign_keys(s, &foreign, e)))
		return rc;
	if (foreign)
		return err_set(e, CSID_EPRECOND,
			       "the %s store holds %llu keys that are not csid's and no "
			       "installation record: it is not a csid installation, and a server "
			       "does not adopt it (give csid a prefix of its own)",
			       s->backend, (unsigned long long)foreign);
	if ((rc = server_install_catalogue(s, &old, e)))
		return rc;
	memset(out, 0, sizeof(*out));
	if (o->want_id)
		snprintf(out->id, sizeof(out->id), "%s", o->want_id);
	else if ((rc = server_install_new_id(out->id, sizeof(out->id), e)))
		return rc;
	out->created_ms = clock_wall_ms(clock_real());
	out->set = o->set;
	if ((rc = server_install_put(s, out, 0, e)))
		return rc;
	if (old)
		log_warn("msg=\"installation record written for a catalogue older than it; this "
			 "server's cluster-wide settings are now the installation's\" "
			 "installation=%s",
			 out->id);
	else
		log_info("msg=\"new installation\" installation=%s", out->id);
	return 0;
}

/* A record exists: the ID and the settings must agree (or are rewritten on purpose). */
static int server_install_agree(struct store *s, const struct server_install_opts *o,
				const struct store_obj *rec, struct server_install *out,
				struct err *e)
{
	struct server_install_settings ours = o->set;
	int rc = server_install_decode(rec->value, rec->len, out, e);

	if (rc)
		return err_set(e, CSID_EPRECOND,
			       "the %s store's installation record cannot be read (%s): this is "
			       "not a csid installation, or its record is damaged; refusing to "
			       "start",
			       s->backend, e->msg);
	if (o->want_id && strcmp(o->want_id, out->id) != 0)
		return err_set(e, CSID_EPRECOND,
			       "this server's cluster_id is %s, but the store holds installation "
			       "%s: it is pointed at another installation's store (check "
			       "etcd.prefix and the endpoints)",
			       o->want_id, out->id);
	if (o->update_settings) {
		bool changed = false;

		for (size_t i = 0; i < SERVER_INSTALL_NKEYS; i++) {
			char a[32], b[32];

			if (server_install_get(&out->set, i) == server_install_get(&ours, i))
				continue;
			conf_format_duration(server_install_get(&out->set, i), a, sizeof(a));
			conf_format_duration(server_install_get(&ours, i), b, sizeof(b));
			log_warn("msg=\"cluster-wide setting changed (-update-settings)\" key=%s "
				 "from=%s to=%s installation=%s",
				 server_install_keys[i].name, a, b, out->id);
			changed = true;
		}
		out->set = ours;
		return changed ? server_install_put(s, out, rec->modify_index, e) : 0;
	}
	if ((rc = server_install_compare(&out->set, &ours, e)))
		return err_wrap(e, "installation %s", out->id);
	log_info("msg=\"joined installation\" installation=%s", out->id);
	return 0;
}

int server_install_check(struct store *s, const struct server_install_opts *o,
			 struct server_install *out, struct err *e)
{
	int rc = CSID_ECONFLICT;

	if (o->want_id && !server_install_id_ok(o->want_id))
		return err_set(e, CSID_EINVAL, "cluster_id: expected 1 to %d of [A-Za-z0-9._-]",
			       SERVER_INSTALL_ID_MAX);
	for (int t = 0; t < SERVER_INSTALL_TRIES && rc == CSID_ECONFLICT; t++) {
		struct store_obj rec = {0};

		rc = store_get(s, STORE_INSTALLATION, SERVER_INSTALL_RECORD, &rec, e);
		if (rc == CSID_ENOTFOUND)
			rc = server_install_create(s, o, out, e);
		else if (!rc)
			rc = server_install_agree(s, o, &rec, out, e);
		store_obj_free(&rec);
	}
	if (rc == CSID_ECONFLICT)
		return err_set(e, CSID_EABORTED, "installation record: %d writers raced; try again",
			       SERVER_INSTALL_TRIES);
	return rc ? err_wrap(e, "installation") : 0;
}

int server_install_restore_op(struct store *s, const char *value, size_t len, struct store_op *op,
			      char **text, struct err *e)
{
	struct server_install snap, cur;
	struct store_obj rec = {0};
	size_t tlen = 0;
	int rc;

	*text = NULL;
	if (server_install_decode(value, len, &snap, e))
		return CSID_EINVAL;
	rc = store_get(s, STORE_INSTALLATION, SERVER_INSTALL_RECORD, &rec, e);
	if (rc && rc != CSID_ENOTFOUND)
		return rc;
	if (!rc && server_install_decode(rec.value, rec.len, &cur, e) == 0)
		snap.set = cur.set;
	if (!rc && strcmp(snap.id, cur.id) != 0)
		log_warn("msg=\"snapshot restore: the installation takes the snapshot's ID\" "
			 "installation=%s was=%s",
			 snap.id, cur.id);
	*op = (struct store_op){STORE_OP_PUT,
				STORE_INSTALLATION,
				SERVER_INSTALL_RECORD,
				NULL,
				0,
				rc ? 0 : rec.modify_index};
	store_obj_free(&rec);
	err_clear(e);
	if ((rc = server_install_encode(&snap, text, &tlen, e)))
		return rc;
	op->value = *text;
	op->len = tlen;
	return 0;
}
