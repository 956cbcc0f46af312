/*
 * The store seam: the store_* calls check their arguments once, here, for
 * every backend, then dispatch to the backend's struct store_ops. Also the
 * pieces every backend shares (store_int.h): the condition check and its
 * conflict message, copying objects out, the index notifier behind
 * store_wait, and the _free functions of what the calls return.
 */
#include "store/store_int.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/clock.h"
#include "util/metrics.h"

static struct metrics_family store_txn_seconds = METRICS_FAMILY(
    "csid_store_transaction_seconds",
    "Write transactions of the state store, by backend and outcome (ok, conflict, error).",
    METRICS_HISTOGRAM, metrics_latency_buckets, METRICS_LATENCY_NBUCKETS, "backend", "outcome");
static struct metrics_family store_conflicts =
    METRICS_FAMILY("csid_store_conflicts_total",
		   "Write transactions of the state store refused because a condition failed.",
		   METRICS_COUNTER, NULL, 0, "backend");

static const char *const store_kind_names[STORE_KIND_COUNT_] = {
    [STORE_VOLUME] = "volume",
    [STORE_NODE] = "node",
    [STORE_SNAPSHOT] = "snapshot",
    [STORE_CLAIM] = "claim",
    [STORE_CLAIM_HISTORY] = "claim-history",
    [STORE_INSTALLATION] = "installation",
};

const char *store_kind_name(enum store_kind k)
{
	if ((unsigned)k >= STORE_KIND_COUNT_)
		return NULL;
	return store_kind_names[k];
}

static bool store_kind_ok(enum store_kind k)
{
	return (unsigned)k < STORE_KIND_COUNT_;
}

/* Checks an ID: not NULL, not empty, at most STORE_ID_MAX bytes. */
static int store_check_id(const char *id, struct err *e)
{
	if (id == NULL || id[0] == '\0')
		return err_set(e, CSID_EINVAL, "store: empty object ID");
	if (strnlen(id, STORE_ID_MAX + 1) > STORE_ID_MAX)
		return err_set(e, CSID_EINVAL, "store: object ID longer than %d bytes",
			       STORE_ID_MAX);
	return 0;
}

int store_get(struct store *s, enum store_kind kind, const char *id, struct store_obj *out,
	      struct err *e)
{
	int rc;

	err_clear(e);
	if (out != NULL)
		memset(out, 0, sizeof(*out));
	if (s == NULL || out == NULL)
		return err_set(e, CSID_EINVAL, "store get: no store or no result");
	if (!store_kind_ok(kind))
		return err_set(e, CSID_EINVAL, "store get: unknown kind %d", (int)kind);
	rc = store_check_id(id, e);
	if (rc < 0)
		return rc;
	return s->ops->get(s, kind, id, out, e);
}

int store_list(struct store *s, enum store_kind kind, const char *prefix, const char *after_id,
	       size_t limit, struct store_list *out, struct err *e)
{
	err_clear(e);
	if (out != NULL)
		memset(out, 0, sizeof(*out));
	if (s == NULL || out == NULL)
		return err_set(e, CSID_EINVAL, "store list: no store or no result");
	if (!store_kind_ok(kind))
		return err_set(e, CSID_EINVAL, "store list: unknown kind %d", (int)kind);
	if ((prefix && strnlen(prefix, STORE_ID_MAX + 1) > STORE_ID_MAX) ||
	    (after_id && strnlen(after_id, STORE_ID_MAX + 1) > STORE_ID_MAX))
		return err_set(e, CSID_EINVAL, "store list: prefix or start longer than %d bytes",
			       STORE_ID_MAX);
	return s->ops->list(s, kind, prefix ? prefix : "", after_id ? after_id : "", limit, out, e);
}

/* Orders ops by (kind, id), to find the same object twice. */
static int store_op_cmp(const void *a, const void *b)
{
	const struct store_op *x = *(const struct store_op *const *)a;
	const struct store_op *y = *(const struct store_op *const *)b;

	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	return strcmp(x->id, y->id);
}

/* Checks one op; i is its position, for the message. */
static int store_check_op(const struct store_op *op, size_t i, struct err *e)
{
	int rc;

	if (op->type != STORE_OP_PUT && op->type != STORE_OP_DELETE)
		return err_set(e, CSID_EINVAL, "store txn: op %zu: unknown type %d", i,
			       (int)op->type);
	if (!store_kind_ok(op->kind))
		return err_set(e, CSID_EINVAL, "store txn: op %zu: unknown kind %d", i,
			       (int)op->kind);
	rc = store_check_id(op->id, e);
	if (rc < 0)
		return err_wrap(e, "store txn: op %zu", i);
	if (op->type == STORE_OP_PUT && op->value == NULL && op->len > 0)
		return err_set(e, CSID_EINVAL, "store txn: %s %s: no value",
			       store_kind_name(op->kind), op->id);
	if (op->type == STORE_OP_PUT && op->len > STORE_VALUE_MAX)
		return err_set(e, CSID_EINVAL, "store txn: %s %s: value of %zu bytes over %d",
			       store_kind_name(op->kind), op->id, op->len, STORE_VALUE_MAX);
	return 0;
}

/* Refuses the same object twice in ops[0..n). */
static int store_check_unique(const struct store_op *ops, size_t n, struct err *e)
{
	const struct store_op *sorted[STORE_TXN_OPS_MAX];

	for (size_t i = 0; i < n; i++)
		sorted[i] = &ops[i];
	qsort(sorted, n, sizeof(sorted[0]), store_op_cmp);
	for (size_t i = 1; i < n; i++) {
		if (store_op_cmp(&sorted[i - 1], &sorted[i]) == 0)
			return err_set(e, CSID_EINVAL, "store txn: %s %s written twice",
				       store_kind_name(sorted[i]->kind), sorted[i]->id);
	}
	return 0;
}

/* Counts a transaction the backend ran: its latency, and whether a condition failed. */
static void store_observe(const struct store *s, const struct timespec *start, int rc)
{
	const char *v[] = {s->backend, rc == 0                ? "ok"
				       : rc == CSID_ECONFLICT ? "conflict"
							      : "error"};
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	metrics_observe(&store_txn_seconds, v,
			(double)(now.tv_sec - start->tv_sec) +
			    (double)(now.tv_nsec - start->tv_nsec) / 1e9);
	if (rc == CSID_ECONFLICT)
		metrics_add(&store_conflicts, v, 1);
}

/* The argument checks of store_txn; 1 when there is nothing to write. */
static int store_txn_check(struct store *s, const struct store_op *ops, size_t n, uint64_t *index,
			   struct err *e)
{
	int rc;

	err_clear(e);
	if (s == NULL || (n > 0 && ops == NULL))
		return err_set(e, CSID_EINVAL, "store txn: no store or no ops");
	if (n > STORE_TXN_OPS_MAX)
		return err_set(e, CSID_EINVAL, "store txn: %zu ops, more than %d", n,
			       STORE_TXN_OPS_MAX);
	for (size_t i = 0; i < n; i++) {
		rc = store_check_op(&ops[i], i, e);
		if (rc < 0)
			return rc;
	}
	rc = store_check_unique(ops, n, e);
	if (rc < 0)
		return rc;
	if (n == 0) {
		if (index != NULL)
			*index = s->ops->index(s);
		return 1;
	}
	return 0;
}

int store_txn(struct store *s, const struct store_op *ops, size_t n, uint64_t *index, struct err *e)
{
	struct timespec start;
	int rc = store_txn_check(s, ops, n, index, e);

	if (rc)
		return rc < 0 ? rc : 0;
	clock_gettime(CLOCK_MONOTONIC, &start);
	rc = s->ops->txn(s, ops, n, index, e);
	store_observe(s, &start, rc);
	return rc;
}

bool store_shared(struct store *s)
{
	return s && s->ops->campaign != NULL;
}

int store_election_wait(struct store *s, uint64_t *seen, int64_t timeout_ms)
{
	if (s == NULL || seen == NULL || !s->ops->election_wait)
		return CSID_EUNIMPL;
	return s->ops->election_wait(s, seen, timeout_ms);
}

int store_foreign_keys(struct store *s, uint64_t *n, struct err *e)
{
	err_clear(e);
	*n = 0;
	if (s == NULL)
		return err_set(e, CSID_EINVAL, "store foreign keys: no store");
	return s->ops->foreign_keys ? s->ops->foreign_keys(s, n, e) : 0;
}

int store_compact(struct store *s, uint64_t index, struct err *e)
{
	err_clear(e);
	if (s == NULL || index == 0 || index > INT64_MAX)
		return err_set(e, CSID_EINVAL, "store compact: no store or a bad index");
	if (!s->ops->compact)
		return err_set(e, CSID_EUNIMPL,
			       "store compact: the %s store bounds its history itself", s->backend);
	return s->ops->compact(s, index, e);
}

int store_txn_fenced(struct store *s, uint64_t fence, const struct store_op *ops, size_t n,
		     uint64_t *index, struct err *e)
{
	struct timespec start;
	int rc = store_txn_check(s, ops, n, index, e);

	if (rc)
		return rc < 0 ? rc : 0;
	clock_gettime(CLOCK_MONOTONIC, &start);
	rc = s->ops->txn_fenced ? s->ops->txn_fenced(s, fence, ops, n, index, e)
				: s->ops->txn(s, ops, n, index, e);
	store_observe(s, &start, rc);
	return rc;
}

/* CSID_EUNIMPL for a coordination call on a store one process holds alone. */
static int store_unshared(struct store *s, const char *what, struct err *e)
{
	err_clear(e);
	if (s == NULL)
		return err_set(e, CSID_EINVAL, "store %s: no store", what);
	return err_set(e, CSID_EUNIMPL, "store %s: the %s store is one server's alone", what,
		       s->backend);
}

int store_lease_grant(struct store *s, int64_t ttl_ms, uint64_t *lease, struct err *e)
{
	if (!store_shared(s))
		return store_unshared(s, "lease", e);
	err_clear(e);
	if (ttl_ms <= 0)
		return err_set(e, CSID_EINVAL, "store lease: TTL of %lld ms", (long long)ttl_ms);
	return s->ops->lease_grant(s, ttl_ms, lease, e);
}

int store_lease_keepalive(struct store *s, uint64_t lease, struct err *e)
{
	if (!store_shared(s))
		return store_unshared(s, "lease", e);
	err_clear(e);
	return s->ops->lease_keepalive(s, lease, e);
}

int store_lease_revoke(struct store *s, uint64_t lease, struct err *e)
{
	if (!store_shared(s))
		return store_unshared(s, "lease", e);
	err_clear(e);
	return s->ops->lease_revoke(s, lease, e);
}

int store_campaign(struct store *s, uint64_t lease, const char *value, size_t len,
		   struct store_obj *holder, struct err *e)
{
	if (holder != NULL)
		memset(holder, 0, sizeof(*holder));
	if (!store_shared(s))
		return store_unshared(s, "campaign", e);
	err_clear(e);
	if (holder == NULL || value == NULL || len > STORE_VALUE_MAX)
		return err_set(e, CSID_EINVAL, "store campaign: no value or no result");
	return s->ops->campaign(s, lease, value, len, holder, e);
}

int store_member_put(struct store *s, uint64_t lease, const char *id, const char *value, size_t len,
		     struct err *e)
{
	int rc;

	if (!store_shared(s))
		return store_unshared(s, "member", e);
	err_clear(e);
	if ((rc = store_check_id(id, e)))
		return rc;
	if (value == NULL || len > STORE_VALUE_MAX)
		return err_set(e, CSID_EINVAL, "store member %s: no value or over %d bytes", id,
			       STORE_VALUE_MAX);
	return s->ops->member_put(s, lease, id, value, len, e);
}

int store_member_list(struct store *s, struct store_list *out, struct err *e)
{
	if (out != NULL)
		memset(out, 0, sizeof(*out));
	if (!store_shared(s))
		return store_unshared(s, "member", e);
	err_clear(e);
	if (out == NULL)
		return err_set(e, CSID_EINVAL, "store member list: no result");
	return s->ops->member_list(s, out, e);
}

/* ---- the fenced view ---- */

struct store_fenced {
	struct store base;
	struct store *inner;
	struct store_fence *f;
};

static struct store *store_inner(struct store *s)
{
	return ((struct store_fenced *)s)->inner;
}

static int store_fenced_get(struct store *s, enum store_kind kind, const char *id,
			    struct store_obj *out, struct err *e)
{
	return store_inner(s)->ops->get(store_inner(s), kind, id, out, e);
}

static int store_fenced_list(struct store *s, enum store_kind kind, const char *prefix,
			     const char *after_id, size_t limit, struct store_list *out,
			     struct err *e)
{
	return store_inner(s)->ops->list(store_inner(s), kind, prefix, after_id, limit, out, e);
}

/* Checked and observed by store_txn already: straight to the backend. */
static int store_fenced_txn(struct store *s, const struct store_op *ops, size_t n, uint64_t *index,
			    struct err *e)
{
	struct store_fenced *v = (struct store_fenced *)s;
	struct store *in = v->inner;
	uint64_t fence = atomic_load(&v->f->index);
	int rc;

	if (fence == 0)
		return err_set(e, CSID_EPRECOND, "fenced: this server is not the leader");
	rc = in->ops->txn_fenced ? in->ops->txn_fenced(in, fence, ops, n, index, e)
				 : in->ops->txn(in, ops, n, index, e);
	if (rc == CSID_EPRECOND && in->ops->txn_fenced && v->f->lost)
		v->f->lost(v->f->arg);
	return rc;
}

static int store_fenced_changes(struct store *s, uint64_t after, size_t limit, bool values,
				struct store_changes *out, struct err *e)
{
	return store_inner(s)->ops->changes(store_inner(s), after, limit, values, out, e);
}

static uint64_t store_fenced_index(struct store *s)
{
	return store_inner(s)->ops->index(store_inner(s));
}

static uint64_t store_fenced_wait(struct store *s, uint64_t after, int64_t timeout_ms)
{
	return store_inner(s)->ops->wait(store_inner(s), after, timeout_ms);
}

static void store_fenced_close(struct store *s)
{
	free(s);
}

static const struct store_ops store_fenced_ops = {
    .get = store_fenced_get,
    .list = store_fenced_list,
    .txn = store_fenced_txn,
    .changes = store_fenced_changes,
    .index = store_fenced_index,
    .wait = store_fenced_wait,
    .close = store_fenced_close,
};

int store_fenced_new(struct store *base, struct store_fence *f, struct store **out, struct err *e)
{
	struct store_fenced *v;

	*out = NULL;
	if (base == NULL || f == NULL)
		return err_set(e, CSID_EINVAL, "store fenced view: no store or no fence");
	v = calloc(1, sizeof(*v));
	if (v == NULL)
		return err_set(e, CSID_ENOMEM, "store fenced view: out of memory");
	v->base.ops = &store_fenced_ops;
	v->base.backend = base->backend;
	v->inner = base;
	v->f = f;
	*out = &v->base;
	return 0;
}

/* store_changes and store_change_keys. */
static int store_changes_read(struct store *s, uint64_t after, size_t limit, bool values,
			      struct store_changes *out, struct err *e)
{
	err_clear(e);
	if (out != NULL)
		memset(out, 0, sizeof(*out));
	if (s == NULL || out == NULL)
		return err_set(e, CSID_EINVAL, "store changes: no store or no result");
	return s->ops->changes(s, after, limit, values, out, e);
}

int store_changes(struct store *s, uint64_t after, size_t limit, struct store_changes *out,
		  struct err *e)
{
	return store_changes_read(s, after, limit, true, out, e);
}

int store_change_keys(struct store *s, uint64_t after, size_t limit, struct store_changes *out,
		      struct err *e)
{
	return store_changes_read(s, after, limit, false, out, e);
}

uint64_t store_index(struct store *s)
{
	return s ? s->ops->index(s) : 0;
}

uint64_t store_wait(struct store *s, uint64_t after, int64_t timeout_ms)
{
	return s ? s->ops->wait(s, after, timeout_ms) : 0;
}

void store_close(struct store *s)
{
	if (s != NULL)
		s->ops->close(s);
}

void store_obj_free(struct store_obj *o)
{
	if (o == NULL)
		return;
	free(o->id);
	free(o->value);
	memset(o, 0, sizeof(*o));
}

void store_list_free(struct store_list *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->n; i++)
		store_obj_free(&l->objs[i]);
	free(l->objs);
	memset(l, 0, sizeof(*l));
}

void store_changes_free(struct store_changes *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->n; i++)
		store_obj_free(&c->changes[i].obj);
	free(c->changes);
	memset(c, 0, sizeof(*c));
}

bool store_cond_holds(uint64_t expect, uint64_t have)
{
	return expect == STORE_ANY || expect == have;
}

int store_conflict(struct err *e, const struct store_op *op, uint64_t have)
{
	const char *kind = store_kind_name(op->kind);

	if (have == 0)
		return err_set(e, CSID_ECONFLICT,
			       "%s %s: does not exist (expected modify index %llu)", kind, op->id,
			       (unsigned long long)op->expect_index);
	if (op->expect_index == 0)
		return err_set(e, CSID_ECONFLICT, "%s %s: already exists (modify index %llu)", kind,
			       op->id, (unsigned long long)have);
	return err_set(e, CSID_ECONFLICT, "%s %s: modify index is %llu, expected %llu", kind,
		       op->id, (unsigned long long)have, (unsigned long long)op->expect_index);
}

int store_obj_set(struct store_obj *o, enum store_kind kind, const char *id, size_t id_len,
		  const char *value, size_t len, uint64_t create_index, uint64_t modify_index,
		  struct err *e)
{
	memset(o, 0, sizeof(*o));
	o->id = malloc(id_len + 1);
	if (o->id == NULL)
		goto nomem;
	memcpy(o->id, id, id_len);
	o->id[id_len] = '\0';
	if (value != NULL) {
		o->value = malloc(len + 1);
		if (o->value == NULL)
			goto nomem;
		if (len > 0)
			memcpy(o->value, value, len);
		o->value[len] = '\0';
		o->len = len;
	}
	o->kind = kind;
	o->create_index = create_index;
	o->modify_index = modify_index;
	return 0;
nomem:
	store_obj_free(o);
	return err_set(e, CSID_ENOMEM, "store: copy %s: out of memory", store_kind_name(kind));
}

int store_notify_init(struct store_notify *n, uint64_t index)
{
	memset(n, 0, sizeof(*n));
	if (clock_cond_init(&n->cond) != 0)
		return CSID_ENOMEM;
	if (pthread_cond_init(&n->left, NULL) != 0) {
		pthread_cond_destroy(&n->cond);
		return CSID_ENOMEM;
	}
	pthread_mutex_init(&n->mu, NULL);
	n->index = index;
	return 0;
}

void store_notify_publish(struct store_notify *n, uint64_t index)
{
	bool moved;

	pthread_mutex_lock(&n->mu);
	moved = index > n->index;
	if (moved)
		n->index = index;
	pthread_mutex_unlock(&n->mu);
	/* After the unlock: a waiter woken under it would block on mu at once. */
	if (moved)
		pthread_cond_broadcast(&n->cond);
}

uint64_t store_notify_index(struct store_notify *n)
{
	uint64_t index;

	pthread_mutex_lock(&n->mu);
	index = n->index;
	pthread_mutex_unlock(&n->mu);
	return index;
}

uint64_t store_notify_wait(struct store_notify *n, uint64_t after, int64_t timeout_ms)
{
	struct clock *c = clock_real();
	int64_t now = clock_now_ms(c);
	int64_t until = timeout_ms > CLOCK_NEVER - now ? CLOCK_NEVER : now + timeout_ms;
	uint64_t index;

	pthread_mutex_lock(&n->mu);
	n->waiters++;
	while (n->index <= after && !n->closing && timeout_ms > 0 && clock_now_ms(c) < until)
		clock_wait(c, &n->cond, &n->mu, until);
	index = n->index;
	n->waiters--;
	if (n->closing && n->waiters == 0)
		pthread_cond_broadcast(&n->left);
	pthread_mutex_unlock(&n->mu);
	return index;
}

void store_notify_fini(struct store_notify *n)
{
	pthread_mutex_lock(&n->mu);
	n->closing = true;
	pthread_cond_broadcast(&n->cond);
	while (n->waiters > 0)
		pthread_cond_wait(&n->left, &n->mu);
	pthread_mutex_unlock(&n->mu);
	pthread_cond_destroy(&n->left);
	pthread_cond_destroy(&n->cond);
	pthread_mutex_destroy(&n->mu);
}
