/*
 * Transactions of the etcd store (store_etcd_int.h). Each op with a
 * condition adds a Compare on its key's mod_revision (0: the key does not
 * exist) and, to the failure branch, a keys-only read of the key, so a
 * conflict names the condition that failed and what the key holds. A
 * fenced transaction adds a Compare that the election key's
 * create_revision is still the fence (the leader's term) and a read of it
 * as the failure branch's last op.
 *
 * The request is built in one struct etcd_txn of arrays sized for its ops
 * (the generated protobuf-c types point at each other; nothing is copied)
 * and sized exactly before it is sent: a transaction over etcd's request
 * limit is refused here with CSID_ETOOBIG, since splitting it would break
 * its atomicity.
 *
 * Coalescing. etcd's CPU per Txn is mostly its fixed price (a raft entry,
 * a WAL write, a backend commit, a watch event batch), so concurrent
 * transactions share Txns: at most ETCD_TXN_INFLIGHT (one) are in
 * flight, and the transactions that come meanwhile wait in a queue and go
 * together in the next one, each a nested Txn of an outer Txn without compares (etcd
 * 3.3 on). Each nested Txn's compares decide its own branch, evaluated on
 * the state before the outer Txn, so one caller's failed condition fails
 * no other; every change of the batch gets one revision, which each
 * caller gets as its index (store.h allows that: only the order counts).
 * A batch never holds two transactions that write the same key (etcd
 * refuses that, and the second's conditions would be checked against the
 * state before the first), and it stays within etcd's limits: the
 * request size, and the op count, which etcd checks on the outer Txn and
 * on each nested one against what its parent leaves. A lone caller sends
 * its Txn as it is, at once.
 */
#include "store/store_etcd_int.h"

#include <stdlib.h>
#include <string.h>

#include "store/store_cache.h"
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

void store_cache_forget(struct store_etcd *s, const struct store_op *ops, size_t n, uint64_t rev)
{
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < n; i++)
		store_cache_drop(s->cache, ops[i].kind, ops[i].id, rev);
	pthread_mutex_unlock(&s->mu);
}

int etcd_txn_outcome(const struct store_op *ops, size_t n, const Etcdserverpb__TxnResponse *resp,
		     uint64_t hdr, uint64_t *rev, struct err *e)
{
	*rev = 0;
	if (!resp->succeeded)
		return etcd_txn_conflict(ops, n, resp, e);
	if (!etcd_txn_changed(ops, n, resp))
		return 0;
	*rev = hdr;
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

/*
 * One caller's transaction on its way: its Txn (built by the caller), and
 * what the thread that sent it found (rc, err, rev). Lives on the
 * caller's stack; queued in s->queue until a sender takes it.
 */
struct etcd_pending {
	struct etcd_pending *next;
	const struct store_op *ops;
	size_t n;
	uint64_t fence;
	struct etcd_txn t;
	size_t size; /* t.req's packed size */
	size_t opc; /* etcd's count of it: the most of its compares, success and failure ops */
	pthread_cond_t cond; /* done, or it may send */
	bool done;
	int rc;
	uint64_t rev;
	struct err err;
};

/* A batch wraps each Txn in a RequestOp of the outer Txn's success: at most this much more. */
#define ETCD_BATCH_WRAP 12
/* Room left in a batch under etcd's request limit for what etcd adds to it (its raft header). */
#define ETCD_BATCH_SLACK 1024

/* Reads the answer r of p's Txn (revision hdr) into p: its outcome, the fence, the cache. */
static void etcd_pending_finish(struct store_etcd *s, struct etcd_pending *p,
				const Etcdserverpb__TxnResponse *r, uint64_t hdr)
{
	if (p->fence != 0 && !r->succeeded && etcd_txn_fenced_off(r, p->fence)) {
		p->rc =
		    err_set(&p->err, CSID_EPRECOND,
			    "fenced: the election term %llu is over; this server no longer leads",
			    (unsigned long long)p->fence);
		return;
	}
	p->rc = etcd_txn_outcome(p->ops, p->n, r, hdr, &p->rev, &p->err);
	/* After a conflict the caller reads again: from etcd, as the cache was behind. */
	if (p->rc == CSID_ECONFLICT)
		store_cache_forget(s, p->ops, p->n, hdr);
}

/* Whether p writes a key that one of b[0..k) writes too (etcd refuses that in one Txn). */
static bool etcd_batch_overlaps(struct etcd_pending *const *b, size_t k,
				const struct etcd_pending *p)
{
	for (size_t i = 0; i < k; i++)
		for (size_t x = 0; x < b[i]->n; x++)
			for (size_t y = 0; y < p->n; y++)
				if (strcmp(b[i]->t.keys[x], p->t.keys[y]) == 0)
					return true;
	return false;
}

/*
 * Takes from the queue (bmu held), oldest first, the transactions that go
 * together into one Txn within etcd's limits: its first always; then each
 * that writes no key another one does, while the outer Txn's op count
 * (one per transaction, plus the largest inner count: etcd checks a
 * nested Txn against what its parent leaves), the sum of their ops and
 * the request's size stay within STORE_TXN_OPS_MAX and the request limit.
 * The others stay queued for the next batch. Returns how many, in b.
 */
static size_t etcd_batch_take(struct store_etcd *s, struct etcd_pending **b)
{
	struct etcd_pending **pp = &s->queue;
	size_t k = 0, ops = 0, opc = 0, size = 0;

	while (*pp != NULL && k < STORE_TXN_OPS_MAX) {
		struct etcd_pending *p = *pp;
		size_t popc = p->opc > opc ? p->opc : opc;

		if (k > 0 &&
		    (k + 1 + popc > STORE_TXN_OPS_MAX || ops + p->n > STORE_TXN_OPS_MAX ||
		     size + p->size + ETCD_BATCH_WRAP + ETCD_BATCH_SLACK > s->request_max ||
		     etcd_batch_overlaps(b, k, p))) {
			pp = &p->next;
			continue;
		}
		*pp = p->next;
		p->next = NULL;
		b[k++] = p;
		ops += p->n;
		opc = popc;
		size += p->size + ETCD_BATCH_WRAP;
	}
	if (s->queue == NULL)
		s->queue_tail = &s->queue;
	else
		for (s->queue_tail = &s->queue; *s->queue_tail;
		     s->queue_tail = &(*s->queue_tail)->next)
			;
	return k;
}

/*
 * Sends b[0..k) as one Txn and finishes each: one transaction goes as it
 * is; several go as the success branch of an outer Txn without compares,
 * each its own nested Txn (its compares decide its branch alone), so they
 * share one raft entry and one revision and each gets its own outcome.
 */
static void etcd_batch_send(struct store_etcd *s, struct etcd_pending *const *b, size_t k)
{
	Etcdserverpb__TxnRequest outer = ETCDSERVERPB__TXN_REQUEST__INIT;
	Etcdserverpb__RequestOp *wrap = NULL, **wrapp = NULL;
	const ProtobufCMessage *req = &b[0]->t.req.base;
	Etcdserverpb__TxnResponse *resp = NULL;
	struct err e;
	uint64_t hdr;
	int rc = 0;

	if (k > 1) {
		wrap = calloc(k, sizeof(*wrap));
		wrapp = calloc(k, sizeof(*wrapp));
		if (!wrap || !wrapp)
			rc = err_set(&e, CSID_ENOMEM, "etcd: out of memory");
		for (size_t i = 0; !rc && i < k; i++) {
			wrap[i] = (Etcdserverpb__RequestOp)ETCDSERVERPB__REQUEST_OP__INIT;
			wrap[i].request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_TXN;
			wrap[i].request_txn = &b[i]->t.req;
			wrapp[i] = &wrap[i];
		}
		outer.n_success = k;
		outer.success = wrapp;
		req = &outer.base;
	}
	if (rc == 0)
		rc = etcd_client_call(s->c, ETCD_TXN, req, (ProtobufCMessage **)&resp, &e);
	if (rc)
		err_wrap(&e, "store txn");
	if (rc == 0 && k > 1 && resp->n_responses != k)
		rc = err_set(&e, CSID_EPROTO, "store txn: etcd answered %zu of %zu transactions",
			     resp->n_responses, k);
	for (size_t i = 0; rc == 0 && k > 1 && i < k; i++)
		if (resp->responses[i] == NULL ||
		    resp->responses[i]->response_case !=
			ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN ||
		    resp->responses[i]->response_txn == NULL)
			rc = err_set(
			    &e, CSID_EPROTO,
			    "store txn: etcd's answer to a batch is not one of transactions");
	hdr = resp && resp->header ? etcd_rev(resp->header->revision) : 0;
	for (size_t i = 0; i < k; i++) {
		if (rc) {
			b[i]->rc = rc;
			b[i]->err = e;
		} else {
			etcd_pending_finish(s, b[i],
					    k > 1 ? resp->responses[i]->response_txn : resp, hdr);
		}
	}
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	free(wrap);
	free(wrapp);
}

/*
 * Queues p and waits for its outcome. Up to ETCD_TXN_INFLIGHT Txns are in
 * flight at once; a caller that finds a free slot sends what is queued
 * (itself at least) at once, so a lone writer waits for nobody, and
 * callers that come while every slot is busy go together in the next,
 * sent by the oldest of them when a slot frees.
 */
static void etcd_pending_run(struct store_etcd *s, struct etcd_pending *p)
{
	struct etcd_pending *b[STORE_TXN_OPS_MAX];

	pthread_mutex_lock(&s->bmu);
	*s->queue_tail = p;
	s->queue_tail = &p->next;
	s->queued++;
	while (!p->done) {
		size_t k;

		if (s->inflight >= ETCD_TXN_INFLIGHT || s->held || s->queue == NULL) {
			pthread_cond_wait(&p->cond, &s->bmu);
			continue;
		}
		k = etcd_batch_take(s, b);
		s->inflight++;
		s->calls++;
		pthread_mutex_unlock(&s->bmu);
		etcd_batch_send(s, b, k);
		pthread_mutex_lock(&s->bmu);
		s->inflight--;
		for (size_t i = 0; i < k; i++) {
			b[i]->done = true;
			if (b[i] != p)
				pthread_cond_signal(&b[i]->cond);
		}
		/* The slot is free: the oldest queued one sends next (unless that is us). */
		if (s->queue && s->queue != p && !s->held)
			pthread_cond_signal(&s->queue->cond);
	}
	pthread_mutex_unlock(&s->bmu);
}

/* A transaction; with fence (nonzero) conditioned on the election key too. */
static int etcd_txn_run(struct store_etcd *s, uint64_t fence, const struct store_op *ops, size_t n,
			uint64_t *index, struct err *e)
{
	struct etcd_pending p = {.ops = ops, .n = n, .fence = fence};
	uint64_t rev;
	int rc = etcd_txn_build(s, ops, n, fence, &p.t);

	if (rc) {
		etcd_txn_free(&p.t);
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	}
	p.size = protobuf_c_message_get_packed_size(&p.t.req.base);
	if (p.size > s->request_max) {
		etcd_txn_free(&p.t);
		return err_set(e, CSID_ETOOBIG,
			       "store txn: %zu bytes, over etcd's request limit of %zu bytes "
			       "(--max-request-bytes)",
			       p.size, s->request_max);
	}
	p.opc = p.t.req.n_compare > n ? p.t.req.n_compare : n;
	pthread_cond_init(&p.cond, NULL);
	etcd_pending_run(s, &p);
	pthread_cond_destroy(&p.cond);
	etcd_txn_free(&p.t);
	if (p.rc) {
		*e = p.err;
		return p.rc;
	}
	rev = p.rev;
	if (rev == 0) {
		rev = store_notify_index(&s->notify);
	} else if (store_notify_wait(&s->notify, rev - 1, s->request_ms) < rev) {
		/* Read your writes: the watch delivers the revision to the log first. */
		log_warn("msg=\"etcd watch behind a write\" revision=%llu",
			 (unsigned long long)rev);
		store_cache_forget(s, ops, n, rev);
	}
	if (index != NULL)
		*index = rev;
	return 0;
}

void store_etcd_hold_txns(struct store *st, bool hold)
{
	struct store_etcd *s = (struct store_etcd *)st;

	pthread_mutex_lock(&s->bmu);
	s->held = hold;
	if (!hold && s->queue && s->inflight < ETCD_TXN_INFLIGHT)
		pthread_cond_signal(&s->queue->cond);
	pthread_mutex_unlock(&s->bmu);
}

void store_etcd_txn_stats(struct store *st, uint64_t *txns, uint64_t *calls)
{
	struct store_etcd *s = (struct store_etcd *)st;

	pthread_mutex_lock(&s->bmu);
	*txns = s->queued;
	*calls = s->calls;
	pthread_mutex_unlock(&s->bmu);
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
