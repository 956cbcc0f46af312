/*
 * Leases, the election and member records on etcd (store_etcd_int.h):
 * a lease is etcd's (/v3/lease/grant, keepalive, revoke); the campaign
 * creates "<prefix>leader" with the candidate's lease unless the key
 * exists, and answers its holder either way, so the fence of a term is
 * the key's create_revision; member records are "<prefix>members/<id>",
 * each on its server's lease, so a server that dies leaves the list when
 * its lease runs out.
 */
#include "store/store_etcd_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"

/* A lease ID as etcd's JSON has it (a decimal string). */
static json_t *etcd_lease_req(uint64_t lease)
{
	json_t *r = json_object();

	if (r && etcd_set_u64(r, "ID", lease))
		return r;
	json_decref(r);
	return NULL;
}

int etcd_lease_grant(struct store *st, int64_t ttl_ms, uint64_t *lease, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	json_t *req = json_object(), *resp = NULL;
	int rc;

	if (req == NULL || !etcd_set_u64(req, "TTL", (uint64_t)((ttl_ms + 999) / 1000))) {
		json_decref(req);
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	}
	rc = etcd_client_call(s->c, "/v3/lease/grant", req, &resp, e);
	json_decref(req);
	if (rc)
		return err_wrap(e, "grant a lease");
	*lease = etcd_json_u64(resp, "ID");
	json_decref(resp);
	if (*lease == 0)
		return err_set(e, CSID_EPROTO, "etcd %s: a lease grant without an ID",
			       etcd_client_endpoint(s->c));
	return 0;
}

int etcd_lease_keepalive(struct store *st, uint64_t lease, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	json_t *req = etcd_lease_req(lease), *resp = NULL;
	int rc;

	if (req == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	rc = etcd_client_call(s->c, "/v3/lease/keepalive", req, &resp, e);
	json_decref(req);
	if (rc)
		return err_wrap(e, "keep lease %llx alive", (unsigned long long)lease);
	/* An expired lease is answered without a TTL. */
	if (etcd_json_u64(json_object_get(resp, "result"), "TTL") == 0)
		rc = err_set(e, CSID_ENOTFOUND, "lease %llx: expired", (unsigned long long)lease);
	json_decref(resp);
	return rc;
}

int etcd_lease_revoke(struct store *st, uint64_t lease, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	json_t *req = etcd_lease_req(lease), *resp = NULL;
	int rc;

	if (req == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	rc = etcd_client_call(s->c, "/v3/lease/revoke", req, &resp, e);
	json_decref(req);
	json_decref(resp);
	if (rc == CSID_ENOTFOUND)
		return 0;
	return rc ? err_wrap(e, "revoke lease %llx", (unsigned long long)lease) : 0;
}

/* A request_put of key k with value and lease, as a Txn op. */
static json_t *etcd_put_op(const char *k, size_t klen, const char *value, size_t len,
			   uint64_t lease)
{
	json_t *p = etcd_range_req(k, klen, NULL, 0);

	if (p && etcd_set_b64(p, "value", value, len) && etcd_set_u64(p, "lease", lease))
		return p;
	json_decref(p);
	return NULL;
}

/* Copies the first kv of a range answer r into *o (id "leader"); CSID_ENOTFOUND when none. */
static int etcd_holder(json_t *r, struct store_obj *o, struct err *e)
{
	json_t *kv = json_array_get(json_object_get(r, "kvs"), 0);
	char *val = NULL;
	size_t vlen = 0;
	int rc;

	if (kv == NULL)
		return err_set(e, CSID_ENOTFOUND, "election: no leader");
	if (etcd_b64_decode(json_string_value(json_object_get(kv, "value")), &val, &vlen))
		return err_set(e, CSID_EPROTO, "election: a value that is not base64");
	rc = store_obj_set(o, STORE_NODE, "leader", strlen("leader"), val, vlen,
			   etcd_json_u64(kv, "create_revision"), etcd_json_u64(kv, "mod_revision"),
			   e);
	free(val);
	return rc;
}

int etcd_campaign(struct store *st, uint64_t lease, const char *value, size_t len,
		  struct store_obj *holder, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	size_t klen;
	char *k = etcd_election_key(s, &klen);
	json_t *c = k ? etcd_range_req(k, klen, NULL, 0) : NULL;
	json_t *put = k ? etcd_put_op(k, klen, value, len, lease) : NULL;
	json_t *rd = k ? etcd_range_req(k, klen, NULL, 0) : NULL, *req = NULL, *resp = NULL, *rs;
	int rc;

	free(k);
	if (c && put && rd && json_object_set_new(c, "target", json_string("CREATE")) == 0 &&
	    json_object_set_new(c, "result", json_string("EQUAL")) == 0 &&
	    etcd_set_u64(c, "create_revision", 0))
		req = json_pack("{s:[O],s:[{s:O},{s:O}],s:[{s:O}]}", "compare", c, "success",
				"request_put", put, "request_range", rd, "failure", "request_range",
				rd);
	json_decref(c);
	json_decref(put);
	json_decref(rd);
	if (req == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	rc = etcd_client_call(s->c, "/v3/kv/txn", req, &resp, e);
	json_decref(req);
	if (rc)
		return err_wrap(e, "campaign");
	rs = json_object_get(resp, "responses");
	rc = etcd_holder(
	    json_object_get(json_array_get(rs, json_array_size(rs) - 1), "response_range"), holder,
	    e);
	json_decref(resp);
	return rc ? err_wrap(e, "campaign") : 0;
}

/* The key of member id, "<prefix>members/<id>" (id NULL: the prefix of all). */
static char *etcd_member_key(struct store_etcd *s, const char *id, size_t *len)
{
	size_t il = id ? strlen(id) : 0, ml = strlen("members/");
	char *k = malloc(s->prefix_len + ml + il + 1);

	if (k == NULL)
		return NULL;
	memcpy(k, s->prefix, s->prefix_len);
	memcpy(k + s->prefix_len, "members/", ml);
	memcpy(k + s->prefix_len + ml, id ? id : "", il + 1);
	*len = s->prefix_len + ml + il;
	return k;
}

int etcd_member_put(struct store *st, uint64_t lease, const char *id, const char *value, size_t len,
		    struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	size_t klen;
	char *k = etcd_member_key(s, id, &klen);
	json_t *req = k ? etcd_put_op(k, klen, value, len, lease) : NULL, *resp = NULL;
	int rc;

	free(k);
	if (req == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	rc = etcd_client_call(s->c, "/v3/kv/put", req, &resp, e);
	json_decref(req);
	json_decref(resp);
	return rc ? err_wrap(e, "member %s", id) : 0;
}

int etcd_member_list(struct store *st, struct store_list *out, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	size_t klen, elen;
	char *k = etcd_member_key(s, NULL, &klen), *end = etcd_member_key(s, NULL, &elen);
	json_t *req = NULL, *resp = NULL, *kvs;
	int rc = 0;

	if (k && end) {
		etcd_prefix_end(end, &elen);
		req = etcd_read_req(k, klen, end, elen);
	}
	if (req == NULL) {
		rc = err_set(e, CSID_ENOMEM, "etcd: out of memory");
		goto out;
	}
	if ((rc = etcd_client_call(s->c, "/v3/kv/range", req, &resp, e))) {
		err_wrap(e, "list members");
		goto out;
	}
	kvs = json_object_get(resp, "kvs");
	out->objs = calloc(json_array_size(kvs) + 1, sizeof(*out->objs));
	if (out->objs == NULL) {
		rc = err_set(e, CSID_ENOMEM, "etcd: out of memory");
		goto out;
	}
	for (size_t i = 0; !rc && i < json_array_size(kvs); i++) {
		json_t *kv = json_array_get(kvs, i);
		char *key = NULL, *val = NULL;
		size_t kl = 0, vl = 0;

		rc = etcd_b64_decode(json_string_value(json_object_get(kv, "key")), &key, &kl) ||
			     etcd_b64_decode(json_string_value(json_object_get(kv, "value")), &val,
					     &vl)
			 ? err_set(e, CSID_EPROTO, "member list: a key or value that is not base64")
			 : 0;
		if (!rc && kl > klen)
			rc = store_obj_set(&out->objs[out->n++], STORE_NODE, key + klen, kl - klen,
					   val, vl, etcd_json_u64(kv, "create_revision"),
					   etcd_json_u64(kv, "mod_revision"), e);
		free(key);
		free(val);
	}
	out->index = etcd_json_u64(json_object_get(resp, "header"), "revision");
out:
	if (rc)
		store_list_free(out);
	json_decref(req);
	json_decref(resp);
	free(k);
	free(end);
	return rc;
}

/* A count-only range of [k, k + prefix end) (whole: every key under k) as a Txn op. */
static bool etcd_count_op(json_t *ops, const char *k, size_t klen, bool whole)
{
	char *end = whole ? malloc(klen ? klen : 1) : NULL;
	size_t elen = klen;
	json_t *r;

	if (whole && end == NULL)
		return false;
	if (end) {
		memcpy(end, k, klen);
		etcd_prefix_end(end, &elen);
	}
	r = etcd_read_req(k, klen, end, elen);
	free(end);
	if (r == NULL || json_object_set_new(r, "count_only", json_true()) != 0) {
		json_decref(r);
		return false;
	}
	return json_array_append_new(ops, json_pack("{s:o}", "request_range", r)) == 0;
}

/*
 * store_foreign_keys: one Txn (one revision) counting every key under
 * the prefix, then those of each kind, the member records and the
 * election key; the difference is someone else's.
 */
int etcd_foreign_keys(struct store *st, uint64_t *n, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	json_t *ops = json_array(), *req = NULL, *resp = NULL, *rs;
	uint64_t all, ours = 0;
	bool ok = ops != NULL;
	size_t klen;
	char *k;
	int rc;

	ok = ok && etcd_count_op(ops, s->prefix, s->prefix_len, true);
	for (int i = 0; ok && i < STORE_KIND_COUNT_; i++) {
		const char *kn = store_kind_name((enum store_kind)i);
		size_t kl = strlen(kn);

		k = malloc(s->prefix_len + kl + 2);
		ok = k != NULL;
		if (ok) {
			memcpy(k, s->prefix, s->prefix_len);
			memcpy(k + s->prefix_len, kn, kl);
			k[s->prefix_len + kl] = '/';
			ok = etcd_count_op(ops, k, s->prefix_len + kl + 1, true);
		}
		free(k);
	}
	if (ok && (k = etcd_member_key(s, NULL, &klen))) {
		ok = etcd_count_op(ops, k, klen, true);
		free(k);
	} else {
		ok = false;
	}
	if (ok && (k = etcd_election_key(s, &klen))) {
		ok = etcd_count_op(ops, k, klen, false);
		free(k);
	} else {
		ok = false;
	}
	req = ok ? json_pack("{s:O}", "success", ops) : NULL;
	json_decref(ops);
	if (req == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	rc = etcd_client_call(s->c, "/v3/kv/txn", req, &resp, e);
	json_decref(req);
	if (rc)
		return err_wrap(e, "count the keys under prefix %s", s->prefix);
	rs = json_object_get(resp, "responses");
	all = etcd_json_u64(json_object_get(json_array_get(rs, 0), "response_range"), "count");
	for (size_t i = 1; i < json_array_size(rs); i++)
		ours += etcd_json_u64(json_object_get(json_array_get(rs, i), "response_range"),
				      "count");
	json_decref(resp);
	*n = all > ours ? all - ours : 0;
	return 0;
}

void etcd_election_event(struct store_etcd *s, const char *key, size_t len)
{
	size_t klen;
	char *k = key ? etcd_election_key(s, &klen) : NULL;

	/* No key: the watch lost events (a compaction); a waiter looks again. */
	if (!key || (k && len == klen && memcmp(key, k, klen) == 0)) {
		s->election_gen++;
		pthread_cond_broadcast(&s->cond);
	}
	free(k);
}

/* store_election_wait: on the generation the watch counts. */
int etcd_election_wait(struct store *st, uint64_t *seen, int64_t timeout_ms)
{
	struct store_etcd *s = (struct store_etcd *)st;
	struct clock *clk = clock_real();
	int64_t until = clock_now_ms(clk) + timeout_ms;
	int changed;

	pthread_mutex_lock(&s->mu);
	while (s->election_gen == *seen && !s->closing && clock_now_ms(clk) < until)
		clock_wait(clk, &s->cond, &s->mu, until);
	changed = s->election_gen != *seen;
	*seen = s->election_gen;
	pthread_mutex_unlock(&s->mu);
	return changed;
}
