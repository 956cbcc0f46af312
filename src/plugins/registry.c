/*
 * Dynamic plugin registry (see registry.h for the rules). In memory it is
 * a sorted array of plugins (type, name), each with an array of instances
 * ordered by sequence number, oldest first, so the active instance is the
 * last one. Sequence numbers only grow, so a registration appends.
 *
 * Two locks: mu guards the state and the database connection; change_mu
 * serializes whole changes together with the delivery of their events and
 * guards the subscriber list. A change takes change_mu, then mu; it
 * reserves memory, writes the database, applies the change (which can no
 * longer fail), copies the event, releases mu and calls the subscribers
 * with change_mu still held, so events arrive in the order of the changes
 * and never while the state is half-updated, and readers are not blocked
 * by slow callbacks.
 */
#include "plugins/registry.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/agent_db.h"
#include "util/array.h"
#include "util/log.h"

struct registry_entry {
	enum registry_type type;
	char name[REGISTRY_NAME_MAX];
	struct registry_instance *instances; /* ascending seq */
	size_t ninstances;
	size_t cap;
};

struct registry_sub {
	uint64_t id;
	enum registry_type type;
	registry_event_cb cb;
	void *ctx;
};

struct registry {
	pthread_mutex_t mu;
	pthread_mutex_t change_mu;
	struct clock *clock;
	sqlite3 *db;
	struct registry_entry *entries; /* sorted by (type, name) */
	size_t nentries;
	size_t cap;
	uint64_t next_seq;
	struct registry_sub *subs; /* guarded by change_mu */
	size_t nsubs, csubs;
	uint64_t next_sub;
};

static const char *const registry_schema[] = {
    "CREATE TABLE registry_instances ("
    " type TEXT NOT NULL,"
    " name TEXT NOT NULL,"
    " instance_id TEXT NOT NULL,"
    " endpoint TEXT NOT NULL,"
    " registered_ms INTEGER NOT NULL,"
    " seq INTEGER NOT NULL,"
    " PRIMARY KEY (type, name, instance_id))",
};

const char *registry_type_name(enum registry_type type)
{
	switch (type) {
	case REGISTRY_CONTROLLER:
		return "controller";
	case REGISTRY_NODE:
		return "node";
	default:
		return "unknown";
	}
}

int registry_type_parse(const char *s)
{
	if (s == NULL)
		return -1;
	if (strcmp(s, "controller") == 0)
		return REGISTRY_CONTROLLER;
	if (strcmp(s, "node") == 0)
		return REGISTRY_NODE;
	return -1;
}

static int registry_check_str(const char *what, const char *s, size_t max, struct err *e)
{
	size_t n;

	if (s == NULL || s[0] == '\0')
		return err_set(e, CSID_EINVAL, "%s is empty", what);
	n = strnlen(s, max);
	if (n >= max)
		return err_set(e, CSID_EINVAL, "%s is longer than %zu bytes", what, max - 1);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f)
			return err_set(e, CSID_EINVAL, "%s has a control character", what);
	}
	return 0;
}

static int registry_check(enum registry_type type, const char *name, const char *instance_id,
			  const char *endpoint, struct err *e)
{
	int rc;

	if ((int)type < 0 || type >= REGISTRY_TYPE_COUNT)
		return err_set(e, CSID_EINVAL, "invalid plugin type %d", (int)type);
	rc = registry_check_str("plugin name", name, REGISTRY_NAME_MAX, e);
	if (rc == 0)
		rc = registry_check_str("instance id", instance_id, REGISTRY_INSTANCE_MAX, e);
	if (rc == 0 && endpoint != NULL)
		rc = registry_check_str("endpoint", endpoint, REGISTRY_ENDPOINT_MAX, e);
	return rc;
}

static int registry_cmp(enum registry_type ta, const char *na, enum registry_type tb,
			const char *nb)
{
	if (ta != tb)
		return ta < tb ? -1 : 1;
	return strcmp(na, nb);
}

/* Index of (type, name), or -1 with *pos set to where it would be inserted. */
static long registry_find(struct registry *r, enum registry_type type, const char *name,
			  size_t *pos)
{
	size_t lo = 0, hi = r->nentries;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = registry_cmp(r->entries[mid].type, r->entries[mid].name, type, name);

		if (c == 0)
			return (long)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (pos != NULL)
		*pos = lo;
	return -1;
}

static long registry_find_instance(const struct registry_entry *en, const char *instance_id)
{
	for (size_t i = 0; i < en->ninstances; i++)
		if (strcmp(en->instances[i].instance_id, instance_id) == 0)
			return (long)i;
	return -1;
}

static int registry_db_fail(struct registry *r, int rc, struct err *e, const char *what)
{
	int code = agent_db_err(rc);

	return err_set(e, code ? code : CSID_EIO, "registry db %s: %s", what,
		       sqlite3_errmsg(r->db));
}

static int registry_db_put(struct registry *r, enum registry_type type, const char *name,
			   const struct registry_instance *inst, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (r->db == NULL)
		return 0;
	rc = sqlite3_prepare_v2(r->db,
				"INSERT INTO registry_instances"
				"(type, name, instance_id, endpoint, registered_ms, seq)"
				" VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
				" ON CONFLICT(type, name, instance_id) DO UPDATE SET"
				" endpoint = excluded.endpoint,"
				" registered_ms = excluded.registered_ms, seq = excluded.seq",
				-1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, registry_type_name(type), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, inst->instance_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, inst->endpoint, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 5, inst->registered_ms);
		sqlite3_bind_int64(st, 6, (sqlite3_int64)inst->seq);
		rc = sqlite3_step(st);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return registry_db_fail(r, rc, e, "write");
	return 0;
}

static int registry_db_delete(struct registry *r, enum registry_type type, const char *name,
			      const char *instance_id, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (r->db == NULL)
		return 0;
	rc = sqlite3_prepare_v2(r->db,
				"DELETE FROM registry_instances"
				" WHERE type = ?1 AND name = ?2 AND instance_id = ?3",
				-1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, registry_type_name(type), -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 3, instance_id, -1, SQLITE_STATIC);
		rc = sqlite3_step(st);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return registry_db_fail(r, rc, e, "delete");
	return 0;
}

int registry_new(struct clock *clock, sqlite3 *db, struct registry **out, struct err *e)
{
	struct registry *r;
	int rc;

	*out = NULL;
	if (db != NULL) {
		rc = agent_db_migrate(db, "registry", registry_schema,
				      (int)(sizeof(registry_schema) / sizeof(registry_schema[0])),
				      e);
		if (rc < 0)
			return err_wrap(e, "registry");
	}
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return err_set(e, CSID_ENOMEM, "registry: out of memory");
	pthread_mutex_init(&r->mu, NULL);
	pthread_mutex_init(&r->change_mu, NULL);
	r->clock = clock ? clock : clock_real();
	r->db = db;
	r->next_seq = 1;
	r->next_sub = 1;
	*out = r;
	return 0;
}

static void registry_clear(struct registry *r)
{
	for (size_t i = 0; i < r->nentries; i++)
		free(r->entries[i].instances);
	free(r->entries);
	r->entries = NULL;
	r->nentries = 0;
	r->cap = 0;
}

void registry_free(struct registry *r)
{
	if (r == NULL)
		return;
	registry_clear(r);
	free(r->subs);
	pthread_mutex_destroy(&r->mu);
	pthread_mutex_destroy(&r->change_mu);
	free(r);
}

/*
 * Makes room for one more instance of (type, name), creating the entry if
 * needed (an entry with no instance is removed again by registry_prune_entry).
 * Returns the entry index or a negative code.
 */
static long registry_reserve(struct registry *r, enum registry_type type, const char *name)
{
	struct registry_entry *en;
	size_t pos = 0;
	long idx = registry_find(r, type, name, &pos);

	if (idx < 0) {
		if (array_grow((void **)&r->entries, &r->cap, r->nentries + 1,
			       sizeof(*r->entries)) < 0)
			return CSID_ENOMEM;
		memmove(&r->entries[pos + 1], &r->entries[pos],
			(r->nentries - pos) * sizeof(*r->entries));
		r->nentries++;
		en = &r->entries[pos];
		memset(en, 0, sizeof(*en));
		en->type = type;
		snprintf(en->name, sizeof(en->name), "%s", name);
		idx = (long)pos;
	}
	en = &r->entries[idx];
	if (array_grow((void **)&en->instances, &en->cap, en->ninstances + 1,
		       sizeof(*en->instances)) < 0)
		return CSID_ENOMEM;
	return idx;
}

static void registry_prune_entry(struct registry *r, long idx)
{
	if (idx < 0 || r->entries[idx].ninstances > 0)
		return;
	free(r->entries[idx].instances);
	memmove(&r->entries[idx], &r->entries[idx + 1],
		(r->nentries - (size_t)idx - 1) * sizeof(*r->entries));
	r->nentries--;
}

static void registry_remove_at(struct registry_entry *en, long i)
{
	memmove(&en->instances[i], &en->instances[i + 1],
		(en->ninstances - (size_t)i - 1) * sizeof(*en->instances));
	en->ninstances--;
}

/* Calls the subscribers of ev->type. Called with change_mu held, mu not held. */
static void registry_deliver(struct registry *r, const struct registry_event *ev)
{
	for (size_t i = 0; i < r->nsubs; i++)
		if (r->subs[i].type == ev->type)
			r->subs[i].cb(r->subs[i].ctx, ev);
}

static void registry_fill_active(const struct registry_entry *en, struct registry_event *ev)
{
	ev->has_active = en != NULL && en->ninstances > 0;
	if (ev->has_active)
		ev->active = en->instances[en->ninstances - 1];
}

/* registry_register with change_mu held. */
static int registry_register_locked(struct registry *r, enum registry_type type, const char *name,
				    const char *instance_id, const char *endpoint, struct err *e)
{
	struct registry_event ev = {.kind = REGISTRY_EVENT_REGISTERED, .type = type, .name = name};
	struct registry_instance inst;
	struct registry_entry *en;
	long idx, old;
	int rc;

	rc = registry_check(type, name, instance_id, endpoint, e);
	if (rc < 0)
		return rc;
	memset(&inst, 0, sizeof(inst));
	snprintf(inst.instance_id, sizeof(inst.instance_id), "%s", instance_id);
	snprintf(inst.endpoint, sizeof(inst.endpoint), "%s", endpoint);
	inst.registered_ms = clock_wall_ms(r->clock);

	pthread_mutex_lock(&r->mu);
	idx = registry_reserve(r, type, name);
	if (idx < 0) {
		rc = err_set(e, CSID_ENOMEM, "registry: out of memory");
		goto unlock;
	}
	inst.seq = r->next_seq;
	rc = registry_db_put(r, type, name, &inst, e);
	if (rc < 0) {
		registry_prune_entry(r, idx);
		goto unlock;
	}
	r->next_seq++;
	en = &r->entries[idx];
	old = registry_find_instance(en, instance_id);
	if (old >= 0)
		registry_remove_at(en, old);
	en->instances[en->ninstances++] = inst;
	ev.instance = inst;
	registry_fill_active(en, &ev);
unlock:
	pthread_mutex_unlock(&r->mu);
	if (rc == 0)
		registry_deliver(r, &ev);
	return rc;
}

int registry_register(struct registry *r, enum registry_type type, const char *name,
		      const char *instance_id, const char *endpoint, struct err *e)
{
	int rc;

	pthread_mutex_lock(&r->change_mu);
	rc = registry_register_locked(r, type, name, instance_id, endpoint, e);
	pthread_mutex_unlock(&r->change_mu);
	if (rc < 0)
		err_wrap(e, "register %s %s instance %s", registry_type_name(type),
			 name ? name : "", instance_id ? instance_id : "");
	return rc;
}

/*
 * Removes the instance, with change_mu held. want_seq: 0 for any, else
 * only if the instance still has that sequence number (not re-registered).
 */
static int registry_remove(struct registry *r, enum registry_type type, const char *name,
			   const char *instance_id, uint64_t want_seq, struct err *e)
{
	struct registry_event ev = {.kind = REGISTRY_EVENT_DEREGISTERED, .type = type};
	char namebuf[REGISTRY_NAME_MAX];
	struct registry_entry *en;
	long idx, i;
	int rc;

	rc = registry_check(type, name, instance_id, NULL, e);
	if (rc < 0)
		return rc;
	snprintf(namebuf, sizeof(namebuf), "%s", name);
	ev.name = namebuf;
	pthread_mutex_lock(&r->mu);
	idx = registry_find(r, type, name, NULL);
	i = idx >= 0 ? registry_find_instance(&r->entries[idx], instance_id) : -1;
	if (i < 0 || (want_seq != 0 && r->entries[idx].instances[i].seq != want_seq)) {
		rc = err_set(e, CSID_ENOTFOUND, "not registered");
		goto unlock;
	}
	rc = registry_db_delete(r, type, name, instance_id, e);
	if (rc < 0)
		goto unlock;
	en = &r->entries[idx];
	ev.instance = en->instances[i];
	registry_remove_at(en, i);
	registry_fill_active(en, &ev);
	registry_prune_entry(r, idx);
unlock:
	pthread_mutex_unlock(&r->mu);
	if (rc == 0)
		registry_deliver(r, &ev);
	return rc;
}

int registry_deregister(struct registry *r, enum registry_type type, const char *name,
			const char *instance_id, struct err *e)
{
	int rc;

	pthread_mutex_lock(&r->change_mu);
	rc = registry_remove(r, type, name, instance_id, 0, e);
	pthread_mutex_unlock(&r->change_mu);
	if (rc < 0)
		err_wrap(e, "deregister %s %s instance %s", registry_type_name(type),
			 name ? name : "", instance_id ? instance_id : "");
	return rc;
}

int registry_register_monolith(struct registry *r, const char *name, const char *instance_id,
			       const char *endpoint, struct err *e)
{
	int rc;

	pthread_mutex_lock(&r->change_mu);
	rc = registry_register_locked(r, REGISTRY_CONTROLLER, name, instance_id, endpoint, e);
	if (rc == 0) {
		rc = registry_register_locked(r, REGISTRY_NODE, name, instance_id, endpoint, e);
		if (rc < 0)
			registry_remove(r, REGISTRY_CONTROLLER, name, instance_id, 0, NULL);
	}
	pthread_mutex_unlock(&r->change_mu);
	if (rc < 0)
		err_wrap(e, "register monolith %s instance %s", name ? name : "",
			 instance_id ? instance_id : "");
	return rc;
}

int registry_deregister_monolith(struct registry *r, const char *name, const char *instance_id,
				 struct err *e)
{
	struct err e1, e2;
	int rc1, rc2, rc;

	err_clear(&e1);
	err_clear(&e2);
	pthread_mutex_lock(&r->change_mu);
	rc1 = registry_remove(r, REGISTRY_CONTROLLER, name, instance_id, 0, &e1);
	rc2 = registry_remove(r, REGISTRY_NODE, name, instance_id, 0, &e2);
	pthread_mutex_unlock(&r->change_mu);
	if (rc1 == 0 || rc2 == 0) {
		/* One side missing is fine; another failure is reported. */
		if (rc1 < 0 && rc1 != CSID_ENOTFOUND)
			rc = err_set(e, rc1, "controller: %s", e1.msg);
		else if (rc2 < 0 && rc2 != CSID_ENOTFOUND)
			rc = err_set(e, rc2, "node: %s", e2.msg);
		else
			return 0;
	} else if (rc1 != CSID_ENOTFOUND) {
		rc = err_set(e, rc1, "controller: %s", e1.msg);
	} else if (rc2 != CSID_ENOTFOUND) {
		rc = err_set(e, rc2, "node: %s", e2.msg);
	} else {
		rc = err_set(e, CSID_ENOTFOUND, "not registered");
	}
	err_wrap(e, "deregister monolith %s instance %s", name ? name : "",
		 instance_id ? instance_id : "");
	return rc;
}

int registry_active(struct registry *r, enum registry_type type, const char *name,
		    struct registry_instance *out)
{
	long idx;
	int rc = CSID_ENOTFOUND;

	if (name == NULL)
		return CSID_ENOTFOUND;
	pthread_mutex_lock(&r->mu);
	idx = registry_find(r, type, name, NULL);
	if (idx >= 0 && r->entries[idx].ninstances > 0) {
		*out = r->entries[idx].instances[r->entries[idx].ninstances - 1];
		rc = 0;
	}
	pthread_mutex_unlock(&r->mu);
	return rc;
}

void registry_snapshot_free(struct registry_snapshot *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->nplugins; i++)
		free(s->plugins[i].instances);
	free(s->plugins);
	s->plugins = NULL;
	s->nplugins = 0;
}

int registry_snapshot(struct registry *r, struct registry_snapshot *out, struct err *e)
{
	int rc = 0;

	memset(out, 0, sizeof(*out));
	pthread_mutex_lock(&r->mu);
	if (r->nentries > 0) {
		out->plugins = calloc(r->nentries, sizeof(*out->plugins));
		if (out->plugins == NULL)
			rc = CSID_ENOMEM;
	}
	for (size_t i = 0; rc == 0 && i < r->nentries; i++) {
		const struct registry_entry *en = &r->entries[i];
		struct registry_plugin *p = &out->plugins[i];

		p->type = en->type;
		memcpy(p->name, en->name, sizeof(p->name));
		p->instances = malloc(en->ninstances * sizeof(*p->instances));
		if (p->instances == NULL) {
			rc = CSID_ENOMEM;
			break;
		}
		memcpy(p->instances, en->instances, en->ninstances * sizeof(*p->instances));
		p->ninstances = en->ninstances;
		out->nplugins = i + 1;
	}
	pthread_mutex_unlock(&r->mu);
	if (rc < 0) {
		registry_snapshot_free(out);
		return err_set(e, rc, "registry snapshot: out of memory");
	}
	return 0;
}

int registry_subscribe(struct registry *r, enum registry_type type, registry_event_cb cb, void *ctx,
		       uint64_t *id, struct err *e)
{
	int rc = 0;

	if ((int)type < 0 || type >= REGISTRY_TYPE_COUNT || cb == NULL)
		return err_set(e, CSID_EINVAL, "registry subscribe: invalid arguments");
	pthread_mutex_lock(&r->change_mu);
	if (array_grow((void **)&r->subs, &r->csubs, r->nsubs + 1, sizeof(*r->subs)) < 0) {
		rc = err_set(e, CSID_ENOMEM, "registry subscribe: out of memory");
	} else {
		r->subs[r->nsubs].id = r->next_sub++;
		r->subs[r->nsubs].type = type;
		r->subs[r->nsubs].cb = cb;
		r->subs[r->nsubs].ctx = ctx;
		*id = r->subs[r->nsubs].id;
		r->nsubs++;
	}
	pthread_mutex_unlock(&r->change_mu);
	return rc;
}

void registry_unsubscribe(struct registry *r, uint64_t id)
{
	pthread_mutex_lock(&r->change_mu);
	for (size_t i = 0; i < r->nsubs; i++) {
		if (r->subs[i].id == id) {
			memmove(&r->subs[i], &r->subs[i + 1],
				(r->nsubs - i - 1) * sizeof(*r->subs));
			r->nsubs--;
			break;
		}
	}
	pthread_mutex_unlock(&r->change_mu);
}

/* Adds one restored row; skips (with a warning) rows that do not validate. */
static int registry_restore_row(struct registry *r, sqlite3_stmt *st)
{
	const char *tname = (const char *)sqlite3_column_text(st, 0);
	const char *name = (const char *)sqlite3_column_text(st, 1);
	const char *iid = (const char *)sqlite3_column_text(st, 2);
	const char *ep = (const char *)sqlite3_column_text(st, 3);
	int type = registry_type_parse(tname);
	struct registry_instance inst;
	struct registry_entry *en;
	struct err e;
	long idx;

	err_clear(&e);
	if (type < 0 || registry_check((enum registry_type)type, name, iid, ep, &e) < 0 ||
	    sqlite3_column_int64(st, 5) <= 0) {
		log_warn("msg=\"registry: skipping invalid persisted instance\" error=\"%s\"",
			 type < 0   ? "bad type"
			 : e.msg[0] ? e.msg
				    : "bad seq");
		return 0;
	}
	idx = registry_reserve(r, (enum registry_type)type, name);
	if (idx < 0)
		return CSID_ENOMEM;
	memset(&inst, 0, sizeof(inst));
	snprintf(inst.instance_id, sizeof(inst.instance_id), "%s", iid);
	snprintf(inst.endpoint, sizeof(inst.endpoint), "%s", ep);
	inst.registered_ms = sqlite3_column_int64(st, 4);
	inst.seq = (uint64_t)sqlite3_column_int64(st, 5);
	en = &r->entries[idx];
	/* Rows come in ascending seq order, so appending keeps the order. */
	en->instances[en->ninstances++] = inst;
	if (inst.seq >= r->next_seq)
		r->next_seq = inst.seq + 1;
	return 1;
}

int registry_restore(struct registry *r, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int n = 0;
	int rc;

	pthread_mutex_lock(&r->change_mu);
	pthread_mutex_lock(&r->mu);
	if (r->db == NULL || r->nentries > 0) {
		rc = err_set(e, CSID_EPRECOND, "registry restore: %s",
			     r->db == NULL ? "no database" : "registry is not empty");
		goto unlock;
	}
	rc = sqlite3_prepare_v2(r->db,
				"SELECT type, name, instance_id, endpoint, registered_ms, seq"
				" FROM registry_instances ORDER BY seq",
				-1, &st, NULL);
	if (rc != SQLITE_OK) {
		rc = registry_db_fail(r, rc, e, "read");
		goto unlock;
	}
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int added = registry_restore_row(r, st);

		if (added < 0) {
			rc = err_set(e, added, "registry restore: out of memory");
			goto fail;
		}
		n += added;
	}
	if (rc != SQLITE_DONE) {
		rc = registry_db_fail(r, rc, e, "read");
		goto fail;
	}
	rc = n;
	goto unlock;
fail:
	registry_clear(r);
unlock:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&r->mu);
	pthread_mutex_unlock(&r->change_mu);
	return rc;
}

int registry_prune(struct registry *r, registry_probe_cb probe, void *ctx, struct err *e)
{
	struct registry_snapshot snap;
	int dropped = 0;
	int rc;

	rc = registry_snapshot(r, &snap, e);
	if (rc < 0)
		return rc;
	for (size_t i = 0; i < snap.nplugins; i++) {
		const struct registry_plugin *p = &snap.plugins[i];

		for (size_t j = 0; j < p->ninstances; j++) {
			const struct registry_instance *inst = &p->instances[j];
			struct err pe;

			if (probe(ctx, p->type, p->name, inst))
				continue;
			err_clear(&pe);
			pthread_mutex_lock(&r->change_mu);
			rc =
			    registry_remove(r, p->type, p->name, inst->instance_id, inst->seq, &pe);
			pthread_mutex_unlock(&r->change_mu);
			if (rc == 0) {
				char qn[2 * REGISTRY_NAME_MAX], qi[2 * REGISTRY_INSTANCE_MAX];

				dropped++;
				log_info("msg=\"registry: dropped dead instance\" type=%s "
					 "plugin=%s instance=%s",
					 registry_type_name(p->type),
					 log_q(qn, sizeof(qn), p->name),
					 log_q(qi, sizeof(qi), inst->instance_id));
			} else if (rc != CSID_ENOTFOUND) {
				err_set(e, rc, "registry prune: %s", pe.msg);
				registry_snapshot_free(&snap);
				return rc;
			}
		}
	}
	registry_snapshot_free(&snap);
	return dropped;
}
