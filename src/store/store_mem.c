/*
 * The in-memory store backend: for tests, benchmarks and `csid dev`. One
 * mutex guards everything. Objects of each kind sit in an AVL tree ordered
 * by ID (bytewise, as strcmp), so get and the start of a list page are
 * O(log n); a list walks the tree in order with an explicit stack. Values
 * are immutable and reference-counted (struct store_val), shared by the
 * object and the changes that recorded them in the change log
 * (src/store/store_log.h).
 *
 * A transaction checks every condition, then allocates everything it
 * needs, and only then applies: nothing in the apply step can fail, so a
 * transaction is all or nothing even out of memory.
 */
#include "store/store_int.h"

#include <stdlib.h>
#include <string.h>

#include "store/store_log.h"
#include "util/array.h"

/* Deeper than any AVL tree that fits in memory (1.44 log2 n). */
#define MEM_STACK_MAX 96

struct mem_node {
	struct mem_node *l, *r;
	int h;
	struct store_val *val;
	uint64_t create_index, modify_index;
	size_t id_len;
	char id[];
};

struct store_mem {
	struct store base;
	pthread_mutex_t mu;
	struct mem_node *root[STORE_KIND_COUNT_];
	uint64_t index;
	struct store_log log;
	struct store_notify notify;
	int fail_code; /* store_mem_fail_txn */
	unsigned fail_count;
};

static int mem_h(const struct mem_node *n)
{
	return n ? n->h : 0;
}

static void mem_fix(struct mem_node *n)
{
	int l = mem_h(n->l), r = mem_h(n->r);

	n->h = (l > r ? l : r) + 1;
}

static struct mem_node *mem_rotate_right(struct mem_node *n)
{
	struct mem_node *l = n->l;

	n->l = l->r;
	l->r = n;
	mem_fix(n);
	mem_fix(l);
	return l;
}

static struct mem_node *mem_rotate_left(struct mem_node *n)
{
	struct mem_node *r = n->r;

	n->r = r->l;
	r->l = n;
	mem_fix(n);
	mem_fix(r);
	return r;
}

/* Restores the AVL balance of n, whose subtrees are balanced. */
static struct mem_node *mem_balance(struct mem_node *n)
{
	int d = mem_h(n->l) - mem_h(n->r);

	if (d > 1) {
		if (mem_h(n->l->l) < mem_h(n->l->r))
			n->l = mem_rotate_left(n->l);
		return mem_rotate_right(n);
	}
	if (d < -1) {
		if (mem_h(n->r->r) < mem_h(n->r->l))
			n->r = mem_rotate_right(n->r);
		return mem_rotate_left(n);
	}
	mem_fix(n);
	return n;
}

/* Inserts nn (its ID is not in the tree). */
static struct mem_node *mem_insert(struct mem_node *n, struct mem_node *nn)
{
	if (n == NULL) {
		nn->l = nn->r = NULL;
		nn->h = 1;
		return nn;
	}
	if (strcmp(nn->id, n->id) < 0)
		n->l = mem_insert(n->l, nn);
	else
		n->r = mem_insert(n->r, nn);
	return mem_balance(n);
}

/* Unlinks the smallest node of n into *min. */
static struct mem_node *mem_remove_min(struct mem_node *n, struct mem_node **min)
{
	if (n->l == NULL) {
		*min = n;
		return n->r;
	}
	n->l = mem_remove_min(n->l, min);
	return mem_balance(n);
}

/*
 * Unlinks the node with ID id (it is in the tree). Nodes are relinked,
 * never copied, so pointers to other nodes stay valid.
 */
static struct mem_node *mem_remove(struct mem_node *n, const char *id)
{
	int c = strcmp(id, n->id);
	struct mem_node *m;

	if (c < 0) {
		n->l = mem_remove(n->l, id);
	} else if (c > 0) {
		n->r = mem_remove(n->r, id);
	} else {
		if (n->l == NULL || n->r == NULL)
			return n->l ? n->l : n->r;
		n->r = mem_remove_min(n->r, &m);
		m->l = n->l;
		m->r = n->r;
		n = m;
	}
	return mem_balance(n);
}

static struct mem_node *mem_find(struct mem_node *n, const char *id)
{
	while (n != NULL) {
		int c = strcmp(id, n->id);

		if (c == 0)
			return n;
		n = c < 0 ? n->l : n->r;
	}
	return NULL;
}

static void mem_tree_free(struct mem_node *n)
{
	if (n == NULL)
		return;
	mem_tree_free(n->l);
	mem_tree_free(n->r);
	store_val_put(n->val);
	free(n);
}

/* An in-order walk from a starting bound. */
struct mem_iter {
	struct mem_node *stack[MEM_STACK_MAX];
	int n;
};

/* Positions it at the first node whose ID is > key (>= key when incl). */
static void mem_iter_start(struct mem_iter *it, struct mem_node *n, const char *key, bool incl)
{
	it->n = 0;
	while (n != NULL) {
		int c = strcmp(n->id, key);

		if (c > 0 || (incl && c == 0)) {
			it->stack[it->n++] = n;
			n = n->l;
		} else {
			n = n->r;
		}
	}
}

static struct mem_node *mem_iter_next(struct mem_iter *it)
{
	struct mem_node *n, *m;

	if (it->n == 0)
		return NULL;
	n = it->stack[--it->n];
	for (m = n->r; m != NULL; m = m->l)
		it->stack[it->n++] = m;
	return n;
}

static int mem_get(struct store *st, enum store_kind kind, const char *id, struct store_obj *out,
		   struct err *e)
{
	struct store_mem *s = (struct store_mem *)st;
	struct mem_node *n;
	int rc;

	pthread_mutex_lock(&s->mu);
	n = mem_find(s->root[kind], id);
	if (n == NULL)
		rc = err_set(e, CSID_ENOTFOUND, "%s %s: not found", store_kind_name(kind), id);
	else
		rc = store_obj_set(out, kind, n->id, n->id_len, n->val->data, n->val->len,
				   n->create_index, n->modify_index, e);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static int mem_list(struct store *st, enum store_kind kind, const char *prefix,
		    const char *after_id, size_t limit, struct store_list *out, struct err *e)
{
	struct store_mem *s = (struct store_mem *)st;
	size_t plen = strlen(prefix);
	size_t cap = 0;
	struct mem_iter it;
	struct mem_node *n;
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	out->index = s->index;
	if (after_id[0] != '\0' && strcmp(after_id, prefix) >= 0)
		mem_iter_start(&it, s->root[kind], after_id, false);
	else
		mem_iter_start(&it, s->root[kind], prefix, true);
	while ((n = mem_iter_next(&it)) != NULL && strncmp(n->id, prefix, plen) == 0) {
		if (limit > 0 && out->n == limit) {
			out->more = true;
			break;
		}
		rc = array_grow((void **)&out->objs, &cap, out->n + 1, sizeof(out->objs[0]));
		if (rc == 0)
			rc = store_obj_set(&out->objs[out->n], kind, n->id, n->id_len, n->val->data,
					   n->val->len, n->create_index, n->modify_index, e);
		if (rc < 0) {
			err_set(e, rc, "list %s: out of memory", store_kind_name(kind));
			store_list_free(out);
			break;
		}
		out->n++;
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* What a transaction prepared for each op before it applies them. */
struct mem_prep {
	struct mem_node *node; /* the object now, or NULL */
	struct mem_node *fresh; /* PUT of a new object: its node */
	struct store_val *val; /* PUT: the new value */
	char *change_id; /* the change's copy of the ID, NULL: nothing recorded */
};

static void mem_prep_free(struct mem_prep *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(p[i].fresh);
		store_val_put(p[i].val);
		free(p[i].change_id);
	}
}

/* Allocates what op needs into *p (p->node is set). */
static int mem_prepare(const struct store_op *op, struct mem_prep *p)
{
	size_t id_len = strlen(op->id);

	if (op->type == STORE_OP_DELETE && p->node == NULL)
		return 0;
	p->change_id = malloc(id_len + 1);
	if (p->change_id == NULL)
		return CSID_ENOMEM;
	memcpy(p->change_id, op->id, id_len + 1);
	if (op->type == STORE_OP_DELETE)
		return 0;
	p->val = store_val_new(op->value, op->len);
	if (p->val == NULL)
		return CSID_ENOMEM;
	if (p->node == NULL) {
		p->fresh = malloc(sizeof(*p->fresh) + id_len + 1);
		if (p->fresh == NULL)
			return CSID_ENOMEM;
		memset(p->fresh, 0, sizeof(*p->fresh));
		p->fresh->id_len = id_len;
		memcpy(p->fresh->id, op->id, id_len + 1);
	}
	return 0;
}

/* Applies one prepared op at index; cannot fail. Takes p's allocations. */
static void mem_apply(struct store_mem *s, const struct store_op *op, struct mem_prep *p,
		      uint64_t index)
{
	uint64_t created = p->node ? p->node->create_index : index;

	if (p->change_id == NULL)
		return;
	if (op->type == STORE_OP_DELETE) {
		store_log_append(&s->log, index, op->type, op->kind, p->change_id, NULL, created);
		p->change_id = NULL;
		s->root[op->kind] = mem_remove(s->root[op->kind], op->id);
		store_val_put(p->node->val);
		free(p->node);
		return;
	}
	if (p->fresh != NULL) {
		p->fresh->create_index = index;
		p->node = p->fresh;
		p->fresh = NULL;
		s->root[op->kind] = mem_insert(s->root[op->kind], p->node);
	} else {
		store_val_put(p->node->val);
	}
	p->node->val = p->val;
	p->node->modify_index = index;
	p->val->refs++;
	store_log_append(&s->log, index, op->type, op->kind, p->change_id, p->val, created);
	p->change_id = NULL;
	p->val = NULL;
}

static int mem_txn(struct store *st, const struct store_op *ops, size_t n, uint64_t *index,
		   struct err *e)
{
	struct store_mem *s = (struct store_mem *)st;
	struct mem_prep prep[STORE_TXN_OPS_MAX];
	size_t records = 0;
	uint64_t have;
	int rc = 0;

	memset(prep, 0, n * sizeof(prep[0]));
	pthread_mutex_lock(&s->mu);
	if (s->fail_count > 0) {
		s->fail_count--;
		rc = err_set(e, s->fail_code, "store txn: injected failure");
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		prep[i].node = mem_find(s->root[ops[i].kind], ops[i].id);
		have = prep[i].node ? prep[i].node->modify_index : 0;
		if (!store_cond_holds(ops[i].expect_index, have)) {
			rc = store_conflict(e, &ops[i], have);
			goto done;
		}
	}
	for (size_t i = 0; i < n; i++) {
		rc = mem_prepare(&ops[i], &prep[i]);
		if (rc < 0)
			goto nomem;
		records += prep[i].change_id != NULL;
	}
	if (records > 0) {
		rc = store_log_reserve(&s->log, records);
		if (rc < 0)
			goto nomem;
		s->index++;
		for (size_t i = 0; i < n; i++)
			mem_apply(s, &ops[i], &prep[i], s->index);
		store_log_commit(&s->log, s->index);
		store_notify_publish(&s->notify, s->index);
	}
	if (index != NULL)
		*index = s->index;
	goto done;
nomem:
	rc = err_set(e, CSID_ENOMEM, "store txn: out of memory");
done:
	mem_prep_free(prep, n);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static int mem_changes(struct store *st, uint64_t after, size_t limit, bool values,
		       struct store_changes *out, struct err *e)
{
	struct store_mem *s = (struct store_mem *)st;
	int rc;

	pthread_mutex_lock(&s->mu);
	rc = store_log_read(&s->log, after, limit, values, out, e);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

static uint64_t mem_index(struct store *st)
{
	return store_notify_index(&((struct store_mem *)st)->notify);
}

static uint64_t mem_wait(struct store *st, uint64_t after, int64_t timeout_ms)
{
	return store_notify_wait(&((struct store_mem *)st)->notify, after, timeout_ms);
}

static void mem_close(struct store *st)
{
	struct store_mem *s = (struct store_mem *)st;

	store_notify_fini(&s->notify);
	for (int k = 0; k < STORE_KIND_COUNT_; k++)
		mem_tree_free(s->root[k]);
	store_log_fini(&s->log);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

void store_mem_fail_txn(struct store *st, int code, unsigned count)
{
	struct store_mem *s = (struct store_mem *)st;

	pthread_mutex_lock(&s->mu);
	s->fail_code = code;
	s->fail_count = count;
	pthread_mutex_unlock(&s->mu);
}

static const struct store_ops mem_ops = {
    .get = mem_get,
    .list = mem_list,
    .txn = mem_txn,
    .changes = mem_changes,
    .index = mem_index,
    .wait = mem_wait,
    .close = mem_close,
};

int store_mem_new(struct store **out, struct err *e)
{
	struct store_mem *s;

	*out = NULL;
	s = calloc(1, sizeof(*s));
	if (s == NULL || store_notify_init(&s->notify, 0) != 0) {
		free(s);
		return err_set(e, CSID_ENOMEM, "memory store: out of memory");
	}
	pthread_mutex_init(&s->mu, NULL);
	store_log_init(&s->log, 0);
	s->base.ops = &mem_ops;
	s->base.backend = "memory";
	*out = &s->base;
	return 0;
}
