/*
 * Leases and member records on etcd (store_etcd_int.h): a lease is etcd's
 * (LeaseGrant, LeaseKeepAlive, LeaseRevoke); the campaign (in
 * store_etcd_txn.c) creates "<prefix>leader" with the candidate's lease
 * unless the key exists, so the fence of a term is the key's
 * create_revision; member records are "<prefix>members/<id>", each on its
 * server's lease, so a server that dies leaves the list when its lease
 * runs out. Also the count of keys under the prefix that are none of
 * these nor objects (store_foreign_keys), and the wait on the election
 * key's events, which the watch of store_etcd.c counts
 * (store_election_wait).
 */
#include "store/store_etcd_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/clock.h"

int etcd_lease_grant(struct store *st, int64_t ttl_ms, uint64_t *lease, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	Etcdserverpb__LeaseGrantRequest req = ETCDSERVERPB__LEASE_GRANT_REQUEST__INIT;
	Etcdserverpb__LeaseGrantResponse *resp = NULL;
	int rc;

	req.ttl = (ttl_ms + 999) / 1000;
	rc = etcd_client_call(s->c, ETCD_LEASE_GRANT, &req.base, (ProtobufCMessage **)&resp, e);
	if (rc)
		return err_wrap(e, "grant a lease");
	*lease = etcd_rev(resp->id);
	if (resp->error && resp->error[0])
		rc = err_set(e, CSID_EIO, "grant a lease: etcd %s: %.200s",
			     etcd_client_endpoint(s->c), resp->error);
	else if (*lease == 0)
		rc = err_set(e, CSID_EPROTO, "etcd %s: a lease grant without an ID",
			     etcd_client_endpoint(s->c));
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

int etcd_lease_keepalive(struct store *st, uint64_t lease, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	Etcdserverpb__LeaseKeepAliveRequest req = ETCDSERVERPB__LEASE_KEEP_ALIVE_REQUEST__INIT;
	Etcdserverpb__LeaseKeepAliveResponse *resp = NULL;
	int rc;

	req.id = (int64_t)lease;
	rc = etcd_client_call(s->c, ETCD_LEASE_KEEPALIVE, &req.base, (ProtobufCMessage **)&resp, e);
	if (rc)
		return err_wrap(e, "keep lease %llx alive", (unsigned long long)lease);
	/* An expired lease is answered with no TTL left. */
	if (resp->ttl <= 0)
		rc = err_set(e, CSID_ENOTFOUND, "lease %llx: expired", (unsigned long long)lease);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}

int etcd_lease_revoke(struct store *st, uint64_t lease, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	Etcdserverpb__LeaseRevokeRequest req = ETCDSERVERPB__LEASE_REVOKE_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	int rc;

	req.id = (int64_t)lease;
	rc = etcd_client_call(s->c, ETCD_LEASE_REVOKE, &req.base, &resp, e);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	if (rc == CSID_ENOTFOUND)
		return 0;
	return rc ? err_wrap(e, "revoke lease %llx", (unsigned long long)lease) : 0;
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
	Etcdserverpb__PutRequest req = ETCDSERVERPB__PUT_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	size_t klen;
	char *k = etcd_member_key(s, id, &klen);
	int rc;

	if (k == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	req.key = etcd_bytes(k, klen);
	req.value = etcd_bytes(value, len);
	req.lease = (int64_t)lease;
	rc = etcd_client_call(s->c, ETCD_PUT, &req.base, &resp, e);
	free(k);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	return rc ? err_wrap(e, "member %s", id) : 0;
}

int etcd_member_list(struct store *st, struct store_list *out, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	size_t klen, elen;
	char *k = etcd_member_key(s, NULL, &klen), *end = etcd_member_key(s, NULL, &elen);
	Etcdserverpb__RangeResponse *resp = NULL;
	int rc = 0;

	if (k == NULL || end == NULL) {
		rc = err_set(e, CSID_ENOMEM, "etcd: out of memory");
		goto out;
	}
	etcd_prefix_end(end, &elen);
	if ((rc = etcd_read(s, k, klen, end, elen, 0, &resp, e))) {
		err_wrap(e, "list members");
		goto out;
	}
	out->objs = calloc(resp->n_kvs + 1, sizeof(*out->objs));
	if (out->objs == NULL) {
		rc = err_set(e, CSID_ENOMEM, "etcd: out of memory");
		goto out;
	}
	for (size_t i = 0; !rc && i < resp->n_kvs; i++) {
		const Mvccpb__KeyValue *kv = resp->kvs[i];

		if (kv->key.len > klen)
			rc = store_obj_set(&out->objs[out->n++], STORE_NODE,
					   (const char *)kv->key.data + klen, kv->key.len - klen,
					   kv->value.data ? (const char *)kv->value.data : "",
					   kv->value.len, etcd_rev(kv->create_revision),
					   etcd_rev(kv->mod_revision), e);
	}
	out->index = resp->header ? etcd_rev(resp->header->revision) : 0;
out:
	if (rc)
		store_list_free(out);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	free(k);
	free(end);
	return rc;
}

/* Ranges counted by store_foreign_keys: the prefix, each kind, the members, the election key. */
#define ETCD_COUNTS (STORE_KIND_COUNT_ + 3)

/*
 * store_foreign_keys: one Txn (one revision) of count-only ranges: every
 * key under the prefix, then those of each kind, the member records and
 * the election key; the difference is someone else's.
 */
int etcd_foreign_keys(struct store *st, uint64_t *n, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	Etcdserverpb__RangeRequest rd[ETCD_COUNTS];
	Etcdserverpb__RequestOp ops[ETCD_COUNTS], *opp[ETCD_COUNTS];
	Etcdserverpb__TxnRequest req = ETCDSERVERPB__TXN_REQUEST__INIT;
	Etcdserverpb__TxnResponse *resp = NULL;
	char *keys[ETCD_COUNTS] = {0}, *ends[ETCD_COUNTS] = {0};
	size_t klen[ETCD_COUNTS] = {0}, elen[ETCD_COUNTS] = {0};
	uint64_t all = 0, ours = 0;
	bool ok = true;
	int rc;

	keys[0] = strndup(s->prefix, s->prefix_len);
	klen[0] = s->prefix_len;
	for (int i = 0; i < STORE_KIND_COUNT_; i++) {
		const char *kn = store_kind_name((enum store_kind)i);
		size_t cap = s->prefix_len + strlen(kn) + 2;

		if ((keys[1 + i] = malloc(cap)))
			klen[1 + i] = (size_t)snprintf(keys[1 + i], cap, "%.*s%s/",
						       (int)s->prefix_len, s->prefix, kn);
	}
	keys[ETCD_COUNTS - 2] = etcd_member_key(s, NULL, &klen[ETCD_COUNTS - 2]);
	keys[ETCD_COUNTS - 1] = etcd_election_key(s, &klen[ETCD_COUNTS - 1]);
	for (size_t i = 0; i < ETCD_COUNTS; i++) {
		ok = ok && keys[i];
		/* Every range but the election key's covers what starts with its key. */
		if (ok && i < ETCD_COUNTS - 1 && (ends[i] = malloc(klen[i] + 1))) {
			memcpy(ends[i], keys[i], klen[i]);
			elen[i] = klen[i];
			etcd_prefix_end(ends[i], &elen[i]);
		}
		ok = ok && (i == ETCD_COUNTS - 1 || ends[i]);
		etcdserverpb__range_request__init(&rd[i]);
		etcdserverpb__request_op__init(&ops[i]);
		if (!ok)
			continue;
		rd[i].key = etcd_bytes(keys[i], klen[i]);
		if (ends[i])
			rd[i].range_end = etcd_bytes(ends[i], elen[i]);
		rd[i].count_only = true;
		rd[i].serializable = true;
		ops[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
		ops[i].request_range = &rd[i];
		opp[i] = &ops[i];
	}
	rc = ok ? 0 : err_set(e, CSID_ENOMEM, "etcd: out of memory");
	if (!rc) {
		req.n_success = ETCD_COUNTS;
		req.success = opp;
		rc = etcd_client_call(s->c, ETCD_TXN, &req.base, (ProtobufCMessage **)&resp, e);
		if (rc)
			err_wrap(e, "count the keys under prefix %s", s->prefix);
	}
	for (size_t i = 0; !rc && i < resp->n_responses; i++) {
		const Etcdserverpb__ResponseOp *r = resp->responses[i];
		uint64_t c =
		    r && r->response_case == ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE &&
			    r->response_range
			? etcd_rev(r->response_range->count)
			: 0;

		if (i == 0)
			all = c;
		else
			ours += c;
	}
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	for (size_t i = 0; i < ETCD_COUNTS; i++) {
		free(keys[i]);
		free(ends[i]);
	}
	*n = all > ours ? all - ours : 0;
	return rc;
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
