/*
 * Transactions of the etcd store (store_etcd_int.h): a store transaction
 * is one etcd Txn. Each op with a condition adds a Compare on its key's
 * mod_revision (0: the key does not exist) and, to the failure branch, a
 * keys-only read of the key, so a conflict names the condition that
 * failed and what the key holds. A fenced transaction adds a Compare that
 * the election key's create_revision is still the fence (the leader's
 * term) and a read of it as the failure branch's last op.
 *
 * The request is built in one struct etcd_txn of arrays sized for its ops
 * (the generated protobuf-c types point at each other; nothing is copied)
 * and sized exactly before it is sent: a transaction over etcd's request
 * limit is refused here with CSID_ETOOBIG, since splitting it would break
 * its atomicity.
 */
#include "store/store_etcd_int.h"

#include <stdlib.h>
#include <string.h>

#include "store/etcd_cache.h"
#include "util/log.h"

/* A Txn request being built, and the keys it points at. */
struct etcd_txn {
	Etcdserverpb__TxnRequest req;
	Etcdserverpb__Compare *cmp, **cmpp;
	Etcdserverpb__RequestOp *ok, **okp, *fail, **failp;
	Etcdserverpb__PutRequest *put;
	Etcdserverpb__DeleteRangeRequest *del;
	Etcdserverpb__RangeRequest *rd;
	char **keys;
	size_t nkeys;
};

static void etcd_txn_free(struct etcd_txn *t)
{
	for (size_t i = 0; i < t->nkeys; i++)
		free(t->keys[i]);
	free(t->keys);
	free(t->cmp);
	free(t->cmpp);
	free(t->ok);
	free(t->okp);
	free(t->fail);
	free(t->failp);
	free(t->put);
	free(t->del);
	free(t->rd);
}

ProtobufCBinaryData etcd_bytes(const char *p, size_t len)
{
	return (ProtobufCBinaryData){.len = len, .data = (uint8_t *)(uintptr_t)p};
}

/* Adds a compare of key k (target, value v) and a read of k to the failure branch. */
static void etcd_txn_guard(struct etcd_txn *t, const char *k, size_t klen, bool create, uint64_t v)
{
	size_t i = t->req.n_compare;
	Etcdserverpb__Compare *c = &t->cmp[i];
	Etcdserverpb__RangeRequest *r = &t->rd[i];
	Etcdserverpb__RequestOp *f = &t->fail[i];

	*c = (Etcdserverpb__Compare)ETCDSERVERPB__COMPARE__INIT;
	c->result = ETCDSERVERPB__COMPARE__COMPARE_RESULT__EQUAL;
	c->key = etcd_bytes(k, klen);
	if (create) {
		c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
		c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
		c->create_revision = (int64_t)v;
	} else {
		c->target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__MOD;
		c->target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_MOD_REVISION;
		c->mod_revision = (int64_t)v;
	}
	*r = (Etcdserverpb__RangeRequest)ETCDSERVERPB__RANGE_REQUEST__INIT;
	r->key = etcd_bytes(k, klen);
	r->keys_only = !create;
	*f = (Etcdserverpb__RequestOp)ETCDSERVERPB__REQUEST_OP__INIT;
	f->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
	f->request_range = r;
	t->cmpp[i] = c;
	t->failp[i] = f;
	t->req.n_compare = t->req.n_failure = i + 1;
}

/* Keeps key k (malloc'd) until the Txn is freed; false (k freed) when out of memory. */
static bool etcd_txn_key(struct etcd_txn *t, char *k)
{
	if (k == NULL)
		return false;
	t->keys[t->nkeys++] = k;
	return true;
}

/*
 * Builds the Txn of ops in t, with fence (nonzero) conditioned on the
 * election key too. Returns 0 or CSID_ENOMEM (t freed either way by the
 * caller).
 */
static int etcd_txn_build(struct store_etcd *s, const struct store_op *ops, size_t n,
			  uint64_t fence, struct etcd_txn *t)
{
	size_t m = n + 1, klen;

	*t = (struct etcd_txn){.req = ETCDSERVERPB__TXN_REQUEST__INIT};
	t->cmp = calloc(m, sizeof(*t->cmp));
	t->cmpp = calloc(m, sizeof(*t->cmpp));
	t->ok = calloc(m, sizeof(*t->ok));
	t->okp = calloc(m, sizeof(*t->okp));
	t->fail = calloc(m, sizeof(*t->fail));
	t->failp = calloc(m, sizeof(*t->failp));
	t->put = calloc(m, sizeof(*t->put));
	t->del = calloc(m, sizeof(*t->del));
	t->rd = calloc(m, sizeof(*t->rd));
	t->keys = calloc(m, sizeof(*t->keys));
	if (!t->cmp || !t->cmpp || !t->ok || !t->okp || !t->fail || !t->failp || !t->put ||
	    !t->del || !t->rd || !t->keys)
		return CSID_ENOMEM;
	t->req.compare = t->cmpp;
	t->req.success = t->okp;
	t->req.failure = t->failp;
	for (size_t i = 0; i < n; i++) {
		Etcdserverpb__RequestOp *w = &t->ok[i];
		char *k = etcd_key(s, ops[i].kind, ops[i].id, strlen(ops[i].id), &klen);

		if (!etcd_txn_key(t, k))
			return CSID_ENOMEM;
		*w = (Etcdserverpb__RequestOp)ETCDSERVERPB__REQUEST_OP__INIT;
		if (ops[i].type == STORE_OP_PUT) {
			t->put[i] = (Etcdserverpb__PutRequest)ETCDSERVERPB__PUT_REQUEST__INIT;
			t->put[i].key = etcd_bytes(k, klen);
			t->put[i].value = etcd_bytes(ops[i].value, ops[i].len);
			w->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
			w->request_put = &t->put[i];
		} else {
			t->del[i] = (Etcdserverpb__DeleteRangeRequest)
			    ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
			t->del[i].key = etcd_bytes(k, klen);
			w->request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
			w->request_delete_range = &t->del[i];
		}
		t->okp[i] = w;
		t->req.n_success = i + 1;
		if (ops[i].expect_index != STORE_ANY)
			etcd_txn_guard(t, k, klen, false, ops[i].expect_index);
	}
	if (fence != 0) {
		char *k = etcd_election_key(s, &klen);

		if (!etcd_txn_key(t, k))
			return CSID_ENOMEM;
		etcd_txn_guard(t, k, klen, true, fence);
	}
	return 0;
}

/* The range answer of response op i of r; NULL when it is not one. */
static const Etcdserverpb__RangeResponse *etcd_txn_range(const Etcdserverpb__TxnResponse *r,
							 size_t i)
{
	if (i >= r->n_responses || r->responses[i] == NULL ||
	    r->responses[i]->response_case != ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_RANGE)
		return NULL;
	return r->responses[i]->response_range;
}

/* The first key of a range answer; NULL when none. */
const Mvccpb__KeyValue *etcd_first_kv(const Etcdserverpb__RangeResponse *r)
{
	return r && r->n_kvs > 0 ? r->kvs[0] : NULL;
}

/* Names the first failed condition from the failure branch's reads. */
static int etcd_txn_conflict(const struct store_op *ops, size_t n,
			     const Etcdserverpb__TxnResponse *resp, struct err *e)
{
	size_t j = 0;

	for (size_t i = 0; i < n; i++) {
		const Mvccpb__KeyValue *kv;
		uint64_t have;

		if (ops[i].expect_index == STORE_ANY)
			continue;
		kv = etcd_first_kv(etcd_txn_range(resp, j++));
		have = kv ? etcd_rev(kv->mod_revision) : 0;
		if (!store_cond_holds(ops[i].expect_index, have))
			return store_conflict(e, &ops[i], have);
	}
	return err_set(e, CSID_ECONFLICT, "store txn: a condition failed and then held again");
}

/* Whether a successful Txn changed anything (a delete of a missing key does not). */
static bool etcd_txn_changed(const struct store_op *ops, size_t n,
			     const Etcdserverpb__TxnResponse *resp)
{
	for (size_t i = 0; i < n; i++) {
		const Etcdserverpb__ResponseOp *r =
		    i < resp->n_responses ? resp->responses[i] : NULL;

		if (ops[i].type == STORE_OP_PUT ||
		    (r &&
		     r->response_case ==
			 ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_DELETE_RANGE &&
		     r->response_delete_range && r->response_delete_range->deleted > 0))
			return true;
	}
	return false;
}

void etcd_cache_forget(struct store_etcd *s, const struct store_op *ops, size_t n, uint64_t rev)
{
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < n; i++)
		etcd_cache_drop(s->cache, ops[i].kind, ops[i].id, rev);
	pthread_mutex_unlock(&s->mu);
}

int etcd_txn_outcome(const struct store_op *ops, size_t n, const Etcdserverpb__TxnResponse *resp,
		     uint64_t *rev, struct err *e)
{
	*rev = 0;
	if (!resp->succeeded)
		return etcd_txn_conflict(ops, n, resp, e);
	if (!etcd_txn_changed(ops, n, resp))
		return 0;
	*rev = resp->header ? etcd_rev(resp->header->revision) : 0;
	if (*rev == 0)
		return err_set(e, CSID_EPROTO, "store txn: etcd's answer carries no revision");
	return 0;
}

/* Whether the fence of a failed Txn (its last failure response) no longer holds. */
static bool etcd_txn_fenced_off(const Etcdserverpb__TxnResponse *resp, uint64_t fence)
{
	const Mvccpb__KeyValue *kv =
	    resp->n_responses ? etcd_first_kv(etcd_txn_range(resp, resp->n_responses - 1)) : NULL;

	return (kv ? etcd_rev(kv->create_revision) : 0) != fence;
}

/* Sends the Txn of ops; *out its answer. */
static int etcd_txn_send(struct store_etcd *s, uint64_t fence, const struct store_op *ops, size_t n,
			 Etcdserverpb__TxnResponse **out, struct err *e)
{
	struct etcd_txn t;
	size_t size;
	int rc = etcd_txn_build(s, ops, n, fence, &t);

	*out = NULL;
	if (rc) {
		etcd_txn_free(&t);
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	}
	size = protobuf_c_message_get_packed_size(&t.req.base);
	if (size > s->request_max) {
		etcd_txn_free(&t);
		return err_set(e, CSID_ETOOBIG,
			       "store txn: %zu bytes, over etcd's request limit of %zu bytes "
			       "(--max-request-bytes)",
			       size, s->request_max);
	}
	rc = etcd_client_call(s->c, ETCD_TXN, &t.req.base, (ProtobufCMessage **)out, e);
	etcd_txn_free(&t);
	return rc ? err_wrap(e, "store txn") : 0;
}

/* A transaction; with fence (nonzero) conditioned on the election key too. */
static int etcd_txn_run(struct store_etcd *s, uint64_t fence, const struct store_op *ops, size_t n,
			uint64_t *index, struct err *e)
{
	Etcdserverpb__TxnResponse *resp;
	uint64_t rev;
	int rc = etcd_txn_send(s, fence, ops, n, &resp, e);

	if (rc)
		return rc;
	if (fence != 0 && !resp->succeeded && etcd_txn_fenced_off(resp, fence)) {
		protobuf_c_message_free_unpacked(&resp->base, NULL);
		return err_set(
		    e, CSID_EPRECOND,
		    "fenced: the election term %llu is over; this server no longer leads",
		    (unsigned long long)fence);
	}
	rc = etcd_txn_outcome(ops, n, resp, &rev, e);
	/* After a conflict the caller reads again: from etcd, as the cache was behind. */
	if (rc == CSID_ECONFLICT)
		etcd_cache_forget(s, ops, n, resp->header ? etcd_rev(resp->header->revision) : 0);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	if (rc)
		return rc;
	if (rev == 0) {
		rev = store_notify_index(&s->notify);
	} else if (store_notify_wait(&s->notify, rev - 1, s->request_ms) < rev) {
		/* Read your writes: the watch delivers the revision to the log first. */
		log_warn("msg=\"etcd watch behind a write\" revision=%llu",
			 (unsigned long long)rev);
		etcd_cache_forget(s, ops, n, rev);
	}
	if (index != NULL)
		*index = rev;
	return 0;
}

int etcd_txn(struct store *st, const struct store_op *ops, size_t n, uint64_t *index, struct err *e)
{
	return etcd_txn_run((struct store_etcd *)st, 0, ops, n, index, e);
}

int etcd_txn_fenced(struct store *st, uint64_t fence, const struct store_op *ops, size_t n,
		    uint64_t *index, struct err *e)
{
	return etcd_txn_run((struct store_etcd *)st, fence, ops, n, index, e);
}

int etcd_campaign(struct store *st, uint64_t lease, const char *value, size_t len,
		  struct store_obj *holder, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	size_t klen;
	char *k = etcd_election_key(s, &klen);
	Etcdserverpb__Compare c = ETCDSERVERPB__COMPARE__INIT, *cp = &c;
	Etcdserverpb__PutRequest put = ETCDSERVERPB__PUT_REQUEST__INIT;
	Etcdserverpb__RangeRequest rd = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RequestOp ops[2] = {ETCDSERVERPB__REQUEST_OP__INIT,
					  ETCDSERVERPB__REQUEST_OP__INIT};
	Etcdserverpb__RequestOp *ok[2] = {&ops[0], &ops[1]}, *fail[1] = {&ops[1]};
	Etcdserverpb__TxnRequest req = ETCDSERVERPB__TXN_REQUEST__INIT;
	Etcdserverpb__TxnResponse *resp = NULL;
	const Mvccpb__KeyValue *kv;
	int rc;

	if (k == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	/* Create the key on our lease unless it exists; read its holder either way. */
	c.target = ETCDSERVERPB__COMPARE__COMPARE_TARGET__CREATE;
	c.key = etcd_bytes(k, klen);
	c.target_union_case = ETCDSERVERPB__COMPARE__TARGET_UNION_CREATE_REVISION;
	put.key = rd.key = etcd_bytes(k, klen);
	put.value = etcd_bytes(value, len);
	put.lease = (int64_t)lease;
	ops[0].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_PUT;
	ops[0].request_put = &put;
	ops[1].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_RANGE;
	ops[1].request_range = &rd;
	req.n_compare = 1;
	req.compare = &cp;
	req.n_success = 2;
	req.success = ok;
	req.n_failure = 1;
	req.failure = fail;
	rc = etcd_client_call(s->c, ETCD_TXN, &req.base, (ProtobufCMessage **)&resp, e);
	free(k);
	if (rc)
		return err_wrap(e, "campaign");
	kv = resp->n_responses ? etcd_first_kv(etcd_txn_range(resp, resp->n_responses - 1)) : NULL;
	if (kv == NULL)
		rc = err_set(e, CSID_ENOTFOUND, "campaign: election: no leader");
	else
		rc =
		    store_obj_set(holder, STORE_NODE, "leader", strlen("leader"),
				  kv->value.data ? (const char *)kv->value.data : "", kv->value.len,
				  etcd_rev(kv->create_revision), etcd_rev(kv->mod_revision), e);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rc;
}
