/*
 * Leases and member records on etcd (store_etcd_int.h): a lease is etcd's
 * (LeaseGrant, LeaseKeepAlive, LeaseRevoke); the campaign (in
 * store_etcd_txn.c) creates "<prefix>leader" with the candidate's lease
 * unless the key exists, so the fence of a term is the key's
 * create_revision; member records are "<prefix>members/<id>", each on its
 * server's lease, so a server that dies leaves the list when its lease
 * runs out.
 */
#include "store/store_etcd_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
