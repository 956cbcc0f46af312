/*
 * What every reconciler pass shares: holding the plugin's controller for
 * the pass, one controller RPC under the plugin's concurrency slot with
 * the deadline and its outcome by the CSI rules (csi_rules.c), building
 * request maps from the model's maps, and the compare-and-set writes.
 */
#include "server/reconcile_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "csi/csi_rules.h"

int reconcile_fail(struct reconcile_result *res, enum reconcile_outcome outcome, int code,
		   const char *fmt, ...)
{
	va_list ap;

	res->outcome = outcome;
	res->e.code = code;
	va_start(ap, fmt);
	vsnprintf(res->e.msg, sizeof(res->e.msg), fmt, ap);
	va_end(ap);
	return -1;
}

void reconcile_pass_begin(struct reconcile_pass *p, const struct reconcile_env *env,
			  struct arena *a, const char *plugin_id)
{
	int rc;

	memset(p, 0, sizeof(*p));
	p->env = env;
	p->a = a;
	p->plugin_id = plugin_id;
	rc = env->controllers.acquire(env->controllers.ctx, plugin_id, &p->client, &p->caps,
				      &p->ctrl_err);
	if (rc == 0 && p->client != NULL) {
		p->ctrl = RECONCILE_CTRL_UP;
		return;
	}
	p->client = NULL;
	p->caps = 0;
	if (rc == 0)
		rc = CSID_EUNAVAIL;
	if (p->ctrl_err.msg[0] == '\0')
		err_set(&p->ctrl_err, rc, "no controller for plugin %s", plugin_id);
	p->ctrl_err.code = rc;
	/* ENOTFOUND: the plugin has no controller service; anything else may pass. */
	p->ctrl = rc == CSID_ENOTFOUND ? RECONCILE_CTRL_NONE : RECONCILE_CTRL_DOWN;
}

void reconcile_pass_end(struct reconcile_pass *p)
{
	if (p->client != NULL)
		p->env->controllers.release(p->env->controllers.ctx, p->plugin_id, p->client);
	p->client = NULL;
}

int reconcile_rpc(struct reconcile_pass *p, const char *what, enum csi_rpc rpc,
		  const ProtobufCMessage *req, ProtobufCMessage **resp,
		  struct reconcile_result *res)
{
	const char *name = csi_rpc_info(rpc)->name;
	enum csi_outcome o;
	struct csi_status st;
	int rc;

	*resp = NULL;
	if (p->ctrl != RECONCILE_CTRL_UP)
		return reconcile_fail(res, RECONCILE_RETRY, p->ctrl_err.code, "%s: %s: %s", what,
				      name, p->ctrl_err.msg);
	if (!reconciler_plugin_enter(p->env->r, p->plugin_id)) {
		res->outcome = RECONCILE_BUSY;
		snprintf(res->plugin_id, sizeof(res->plugin_id), "%s", p->plugin_id);
		return -1;
	}
	memset(&st, 0, sizeof(st));
	rc = p->client->call(p->client, rpc, req, resp, p->env->rpc_timeout_ms, &st);
	reconciler_plugin_leave(p->env->r, p->plugin_id);
	if (rc == 0)
		return 0;
	csi_msg_free(*resp);
	*resp = NULL;
	o = csi_rules_outcome(rpc, st.code);
	if (o == CSI_OUTCOME_DONE)
		return 0;
	return reconcile_fail(res, o == CSI_OUTCOME_RETRY ? RECONCILE_RETRY : RECONCILE_FINAL,
			      rc < 0 ? rc : csi_status_to_err(st.code), "%s: %s: plugin %s: %s%s%s",
			      what, name, p->plugin_id, csi_code_name(st.code),
			      st.message[0] ? ": " : "", st.message);
}

/* Every protobuf-c map entry has this layout. */
struct reconcile_kv {
	ProtobufCMessage base;
	char *key;
	char *value;
};

int reconcile_map_set(struct arena *a, ProtobufCMessage *m, const char *field,
		      const struct model_map *map)
{
	const ProtobufCFieldDescriptor *f =
	    protobuf_c_message_descriptor_get_field_by_name(m->descriptor, field);
	const ProtobufCMessageDescriptor *d;
	struct reconcile_kv **kv;

	if (f == NULL || f->label != PROTOBUF_C_LABEL_REPEATED ||
	    f->type != PROTOBUF_C_TYPE_MESSAGE)
		return CSID_EINVAL;
	if (map == NULL || map->n == 0)
		return 0;
	d = f->descriptor;
	kv = arena_alloc(a, map->n * sizeof(*kv));
	if (kv == NULL)
		return CSID_ENOMEM;
	for (size_t i = 0; i < map->n; i++) {
		kv[i] = arena_alloc(a, d->sizeof_message);
		if (kv[i] == NULL)
			return CSID_ENOMEM;
		protobuf_c_message_init(d, kv[i]);
		kv[i]->key = map->kv[i].key;
		kv[i]->value = map->kv[i].value;
	}
	*(size_t *)((char *)m + f->quantifier_offset) = map->n;
	*(void **)((char *)m + f->offset) = kv;
	return 0;
}

int reconcile_read(const struct reconcile_env *env, enum store_kind kind, const char *id,
		   const char *what, struct store_obj *o, struct reconcile_result *res)
{
	struct err e;
	int rc;

	err_clear(&e);
	rc = store_get(env->store, kind, id, o, &e);
	if (rc == CSID_ENOTFOUND) {
		res->outcome = RECONCILE_IDLE;
		return -1;
	}
	if (rc < 0)
		return reconcile_fail(res, RECONCILE_RETRY, rc, "%s: store: %s", what, e.msg);
	return 0;
}

int reconcile_txn(const struct reconcile_env *env, const struct store_op *op, size_t n,
		  struct reconcile_result *res)
{
	struct err e;
	int rc;

	err_clear(&e);
	rc = store_txn(env->store, op, n, &res->wrote_index, &e);
	if (rc == CSID_ECONFLICT) {
		/* Someone else changed it: read it again and decide again. */
		res->outcome = RECONCILE_AGAIN;
		return -1;
	}
	if (rc < 0)
		return reconcile_fail(res, RECONCILE_RETRY, rc, "%s %s: store: %s",
				      store_kind_name(op->kind), op->id, e.msg);
	return 0;
}

int reconcile_put(const struct reconcile_env *env, enum store_kind kind, const char *id,
		  const char *value, size_t len, uint64_t expect, struct reconcile_result *res)
{
	struct store_op op = {STORE_OP_PUT, kind, id, value, len, expect};

	return reconcile_txn(env, &op, 1, res);
}

int reconcile_remove(const struct reconcile_env *env, enum store_kind kind, const char *id,
		     uint64_t expect, struct reconcile_result *res)
{
	struct store_op op = {STORE_OP_DELETE, kind, id, NULL, 0, expect};

	return reconcile_txn(env, &op, 1, res);
}
