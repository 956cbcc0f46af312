/*
 * Plugin manager (see plugin_manager.h). State: a list of entries, one per
 * managed plugin (type, name) with the instance manager of the instance
 * that was active when it was started; a set of names marked by events
 * (pending); the resync timer; and a graveyard of stopped instance
 * managers whose thread may still be finishing an RPC, freed once done.
 *
 * A step takes the pending names (all registered and managed names when
 * the resync is due), asks the registry for each one's active instance
 * without holding the manager's lock, then applies the differences under
 * the lock. Without threads it then steps every instance manager, whose
 * RPCs run with no lock held.
 *
 * Lock order: the registry's change lock (its event callbacks) -> mu ->
 * the registry's state lock or an instance manager's lock. Nothing holds
 * an instance manager's lock while taking mu.
 */
#include "plugins/plugin_manager.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/array.h"
#include "util/log.h"

/* While stopped instance managers wait to be freed, look at them this often. */
#define PM_REAP_MS 50

struct pm_key {
	enum registry_type type;
	char name[REGISTRY_NAME_MAX];
};

struct pm_entry {
	struct pm_key key;
	struct instance_manager *im;
	struct registry_instance inst; /* the instance im manages */
};

struct plugin_manager {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct plugin_manager_config cfg;
	struct clock *clock;

	/* Guarded by mu. */
	struct pm_entry *entries;
	size_t nentries, centries;
	struct pm_key *pending;
	size_t npending, cpending;
	struct instance_manager **grave;
	size_t ngrave, cgrave;
	int64_t next_resync;
	bool threaded;
	bool stopping; /* the manager's thread must exit */
	bool shutdown;
	bool thread_started;
	pthread_t thread;

	uint64_t subs[REGISTRY_TYPE_COUNT];
	bool subscribed;
};

static bool pm_key_eq(const struct pm_key *k, enum registry_type type, const char *name)
{
	return k->type == type && strcmp(k->name, name) == 0;
}

static struct pm_entry *pm_find(struct plugin_manager *pm, enum registry_type type,
				const char *name)
{
	for (size_t i = 0; i < pm->nentries; i++)
		if (pm_key_eq(&pm->entries[i].key, type, name))
			return &pm->entries[i];
	return NULL;
}

/* Adds (type, name) to the pending set; with mu held. */
static void pm_mark(struct plugin_manager *pm, enum registry_type type, const char *name)
{
	struct pm_key *k;

	if (strlen(name) >= REGISTRY_NAME_MAX)
		return;
	for (size_t i = 0; i < pm->npending; i++)
		if (pm_key_eq(&pm->pending[i], type, name))
			return;
	if (array_grow((void **)&pm->pending, &pm->cpending, pm->npending + 1,
		       sizeof(*pm->pending)) < 0) {
		/* The next resync repairs what this loses. */
		log_warn("msg=\"plugin manager: out of memory, event deferred to resync\"");
		return;
	}
	k = &pm->pending[pm->npending++];
	k->type = type;
	snprintf(k->name, sizeof(k->name), "%s", name);
}

void plugin_manager_notify(struct plugin_manager *pm, enum registry_type type, const char *name)
{
	if (name == NULL || (int)type < 0 || type >= REGISTRY_TYPE_COUNT)
		return;
	pthread_mutex_lock(&pm->mu);
	pm_mark(pm, type, name);
	pthread_cond_broadcast(&pm->cond);
	pthread_mutex_unlock(&pm->mu);
}

static void pm_on_registry_event(void *ctx, const struct registry_event *ev)
{
	plugin_manager_notify(ctx, ev->type, ev->name);
}

int plugin_manager_connect_grpc(void *ctx, const char *endpoint, struct csi_client **out,
				struct err *e)
{
	return csi_client_grpc_new(endpoint, out, e);
}

bool plugin_manager_probe_grpc(void *ctx, enum registry_type type, const char *name,
			       const struct registry_instance *inst)
{
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	const int64_t *timeout = ctx;
	struct csi_client *c = NULL;
	struct csi_status st;
	int rc;

	memset(&st, 0, sizeof(st));
	if (plugin_manager_connect_grpc(NULL, inst->endpoint, &c, NULL) < 0)
		return false;
	rc = csi_probe(c, &req, NULL, timeout && *timeout > 0 ? *timeout : PLUGIN_MANAGER_PROBE_MS,
		       &st);
	csi_client_free(c);
	/* Any answer, even "not ready" or an error status, means a process is there. */
	return rc == 0 || (st.code != CSI_UNAVAILABLE && st.code != CSI_DEADLINE_EXCEEDED &&
			   st.code != CSI_CANCELLED);
}

int plugin_manager_new(const struct plugin_manager_config *cfg, struct plugin_manager **out,
		       struct err *e)
{
	struct plugin_manager *pm;
	int rc;

	*out = NULL;
	if (cfg == NULL || cfg->registry == NULL)
		return err_set(e, CSID_EINVAL, "plugin manager: no registry");
	pm = calloc(1, sizeof(*pm));
	if (pm == NULL)
		return err_set(e, CSID_ENOMEM, "plugin manager: out of memory");
	if (clock_cond_init(&pm->cond) < 0) {
		free(pm);
		return err_set(e, CSID_ENOMEM, "plugin manager: out of memory");
	}
	pthread_mutex_init(&pm->mu, NULL);
	pm->cfg = *cfg;
	if (pm->cfg.connect == NULL)
		pm->cfg.connect = plugin_manager_connect_grpc;
	if (pm->cfg.resync_ms <= 0)
		pm->cfg.resync_ms = PLUGIN_MANAGER_RESYNC_MS;
	pm->clock = cfg->clock ? cfg->clock : clock_real();
	pm->cfg.clock = pm->clock;
	pm->next_resync = clock_now_ms(pm->clock);
	if (!cfg->manual_events) {
		for (int t = 0; t < REGISTRY_TYPE_COUNT; t++) {
			rc = registry_subscribe(cfg->registry, (enum registry_type)t,
						pm_on_registry_event, pm, &pm->subs[t], e);
			if (rc < 0) {
				for (int u = 0; u < t; u++)
					registry_unsubscribe(cfg->registry, pm->subs[u]);
				pthread_cond_destroy(&pm->cond);
				pthread_mutex_destroy(&pm->mu);
				free(pm);
				return err_wrap(e, "plugin manager");
			}
		}
		pm->subscribed = true;
	}
	*out = pm;
	return 0;
}

/* An instance manager changed: wake waiters, tell the owner. */
static void pm_on_im_change(void *ctx, struct instance_manager *im,
			    const struct instance_manager_status *old,
			    const struct instance_manager_status *cur)
{
	struct plugin_manager *pm = ctx;

	pthread_mutex_lock(&pm->mu);
	pthread_cond_broadcast(&pm->cond);
	pthread_mutex_unlock(&pm->mu);
	if (pm->cfg.on_health != NULL)
		pm->cfg.on_health(pm->cfg.on_health_ctx, old, cur);
}

/* Stops an entry's manager and moves it to the graveyard; with mu held. */
static void pm_retire(struct plugin_manager *pm, struct pm_entry *en)
{
	instance_manager_stop(en->im);
	if (array_grow((void **)&pm->grave, &pm->cgrave, pm->ngrave + 1, sizeof(*pm->grave)) < 0) {
		/* Cannot defer it: wait for it here (at most one RPC deadline). */
		pthread_mutex_unlock(&pm->mu);
		instance_manager_free(en->im);
		pthread_mutex_lock(&pm->mu);
	} else {
		pm->grave[pm->ngrave++] = en->im;
	}
	en->im = NULL;
}

/* Starts a manager for inst in en (en->im is NULL); with mu held. */
static int pm_launch(struct plugin_manager *pm, struct pm_entry *en,
		     const struct registry_instance *inst)
{
	struct instance_manager_config c = {
	    .type = en->key.type,
	    .name = en->key.name,
	    .instance = inst,
	    .clock = pm->clock,
	    .connect = pm->cfg.connect,
	    .connect_ctx = pm->cfg.connect_ctx,
	    .on_change = pm_on_im_change,
	    .on_change_ctx = pm,
	    .probe_interval_ms = pm->cfg.probe_interval_ms,
	    .fingerprint_interval_ms = pm->cfg.fingerprint_interval_ms,
	    .rpc_timeout_ms = pm->cfg.rpc_timeout_ms,
	    .retry_max_ms = pm->cfg.retry_max_ms,
	    .random = pm->cfg.random,
	    .random_ctx = pm->cfg.random_ctx,
	};
	struct instance_manager *im;
	struct err e;
	int rc;

	err_clear(&e);
	rc = instance_manager_new(&c, &im, &e);
	if (rc == 0 && pm->threaded)
		rc = instance_manager_start(im, &e);
	if (rc < 0) {
		instance_manager_free(im);
		log_error("msg=\"plugin manager: cannot start instance manager\" type=%s "
			  "error=\"%s\"",
			  registry_type_name(en->key.type), e.msg);
		return rc;
	}
	en->im = im;
	en->inst = *inst;
	return 0;
}

/* Applies the registry's answer for one name; with mu held. */
static void pm_reconcile(struct plugin_manager *pm, const struct pm_key *k, bool has_active,
			 const struct registry_instance *active)
{
	struct pm_entry *en = pm_find(pm, k->type, k->name);

	if (en != NULL && has_active && en->inst.seq == active->seq &&
	    strcmp(en->inst.instance_id, active->instance_id) == 0)
		return;
	if (en != NULL)
		pm_retire(pm, en);
	if (!has_active) {
		if (en != NULL) {
			*en = pm->entries[pm->nentries - 1];
			pm->nentries--;
		}
		return;
	}
	if (en == NULL) {
		if (array_grow((void **)&pm->entries, &pm->centries, pm->nentries + 1,
			       sizeof(*pm->entries)) < 0) {
			pm_mark(pm, k->type, k->name);
			return;
		}
		en = &pm->entries[pm->nentries++];
		memset(en, 0, sizeof(*en));
		en->key = *k;
	}
	if (pm_launch(pm, en, active) < 0) {
		*en = pm->entries[pm->nentries - 1];
		pm->nentries--;
	}
}

/*
 * The names to look at: the pending ones, plus on a resync every name the
 * registry or the manager knows. Takes the pending set. *keys is owned by
 * the caller.
 */
static int pm_collect(struct plugin_manager *pm, bool resync, struct pm_key **keys, size_t *n)
{
	struct registry_snapshot snap = {0};
	struct pm_key *all;
	size_t cap, m = 0;

	if (resync && registry_snapshot(pm->cfg.registry, &snap, NULL) < 0)
		return CSID_ENOMEM;
	pthread_mutex_lock(&pm->mu);
	cap = pm->npending + (resync ? snap.nplugins + pm->nentries : 0);
	all = malloc((cap ? cap : 1) * sizeof(*all));
	if (all == NULL) {
		pthread_mutex_unlock(&pm->mu);
		registry_snapshot_free(&snap);
		return CSID_ENOMEM;
	}
	if (pm->npending > 0)
		memcpy(all, pm->pending, pm->npending * sizeof(*all));
	m = pm->npending;
	pm->npending = 0;
	for (size_t i = 0; resync && i < pm->nentries; i++)
		all[m++] = pm->entries[i].key;
	pthread_mutex_unlock(&pm->mu);
	for (size_t i = 0; i < snap.nplugins; i++) {
		all[m].type = snap.plugins[i].type;
		memcpy(all[m].name, snap.plugins[i].name, sizeof(all[m].name));
		m++;
	}
	registry_snapshot_free(&snap);
	*keys = all;
	*n = m;
	return 0;
}

/* Reconciles the collected names and returns the managers to step (inline mode). */
static void pm_apply(struct plugin_manager *pm, const struct pm_key *keys, size_t n)
{
	struct registry_instance *act = malloc((n ? n : 1) * sizeof(*act));
	bool *has = malloc((n ? n : 1) * sizeof(*has));

	if (act == NULL || has == NULL) {
		/* Put them back; the next step tries again. */
		pthread_mutex_lock(&pm->mu);
		for (size_t i = 0; i < n; i++)
			pm_mark(pm, keys[i].type, keys[i].name);
		pthread_mutex_unlock(&pm->mu);
		free(act);
		free(has);
		return;
	}
	for (size_t i = 0; i < n; i++)
		has[i] =
		    registry_active(pm->cfg.registry, keys[i].type, keys[i].name, &act[i]) == 0;
	pthread_mutex_lock(&pm->mu);
	for (size_t i = 0; i < n && !pm->shutdown; i++)
		pm_reconcile(pm, &keys[i], has[i], &act[i]);
	pthread_cond_broadcast(&pm->cond);
	pthread_mutex_unlock(&pm->mu);
	free(act);
	free(has);
}

/* Frees the stopped managers that are done; the others wait. */
static void pm_reap(struct plugin_manager *pm)
{
	struct instance_manager *done[16];
	size_t ndone = 0;

	pthread_mutex_lock(&pm->mu);
	for (size_t i = 0; i < pm->ngrave && ndone < 16;) {
		if (instance_manager_done(pm->grave[i])) {
			done[ndone++] = pm->grave[i];
			pm->grave[i] = pm->grave[--pm->ngrave];
		} else {
			i++;
		}
	}
	pthread_mutex_unlock(&pm->mu);
	for (size_t i = 0; i < ndone; i++)
		instance_manager_free(done[i]);
}

int64_t plugin_manager_step(struct plugin_manager *pm)
{
	struct instance_manager **ims = NULL;
	struct pm_key *keys = NULL;
	int64_t now = clock_now_ms(pm->clock);
	int64_t next, t;
	size_t nkeys = 0, nims = 0;
	bool resync;

	pthread_mutex_lock(&pm->mu);
	if (pm->shutdown) {
		pthread_mutex_unlock(&pm->mu);
		return CLOCK_NEVER;
	}
	resync = now >= pm->next_resync;
	if (resync)
		pm->next_resync = now + pm->cfg.resync_ms;
	pthread_mutex_unlock(&pm->mu);

	if (pm_collect(pm, resync, &keys, &nkeys) == 0) {
		pm_apply(pm, keys, nkeys);
		free(keys);
	} else if (resync) {
		pthread_mutex_lock(&pm->mu);
		pm->next_resync = now; /* out of memory: resync at the next step */
		pthread_mutex_unlock(&pm->mu);
	}
	pm_reap(pm);

	pthread_mutex_lock(&pm->mu);
	next = pm->next_resync;
	if (pm->npending > 0)
		next = now;
	if (pm->ngrave > 0 && now + PM_REAP_MS < next)
		next = now + PM_REAP_MS;
	if (!pm->threaded && pm->nentries > 0) {
		ims = malloc(pm->nentries * sizeof(*ims));
		for (size_t i = 0; ims != NULL && i < pm->nentries; i++)
			ims[nims++] = pm->entries[i].im;
	}
	pthread_mutex_unlock(&pm->mu);
	/*
	 * Inline mode: only this thread frees managers (in steps and in
	 * shutdown, which must not run concurrently), so the pointers stay
	 * valid without the lock while their RPCs run.
	 */
	for (size_t i = 0; i < nims; i++) {
		t = instance_manager_step(ims[i]);
		if (t < next)
			next = t;
	}
	free(ims);
	return next;
}

static void *pm_thread(void *arg)
{
	struct plugin_manager *pm = arg;
	int64_t next;

	pthread_mutex_lock(&pm->mu);
	while (!pm->stopping) {
		pthread_mutex_unlock(&pm->mu);
		next = plugin_manager_step(pm);
		pthread_mutex_lock(&pm->mu);
		if (!pm->stopping && pm->npending == 0)
			clock_wait(pm->clock, &pm->cond, &pm->mu, next);
	}
	pthread_mutex_unlock(&pm->mu);
	return NULL;
}

int plugin_manager_start(struct plugin_manager *pm, struct err *e)
{
	int rc = 0;

	pthread_mutex_lock(&pm->mu);
	if (pm->shutdown || pm->thread_started) {
		rc = err_set(e, CSID_EPRECOND, "plugin manager: %s",
			     pm->shutdown ? "shut down" : "already started");
		goto unlock;
	}
	pm->threaded = true;
	for (size_t i = 0; i < pm->nentries; i++) {
		rc = instance_manager_start(pm->entries[i].im, e);
		if (rc < 0)
			goto unlock;
	}
	if (pthread_create(&pm->thread, NULL, pm_thread, pm) != 0) {
		rc = err_set(e, CSID_ENOMEM, "plugin manager: cannot start a thread");
		goto unlock;
	}
	pm->thread_started = true;
unlock:
	pthread_mutex_unlock(&pm->mu);
	return rc;
}

void plugin_manager_shutdown(struct plugin_manager *pm)
{
	struct instance_manager **all;
	size_t n = 0;
	bool join;

	if (pm->subscribed) {
		for (int t = 0; t < REGISTRY_TYPE_COUNT; t++)
			registry_unsubscribe(pm->cfg.registry, pm->subs[t]);
		pm->subscribed = false;
	}
	pthread_mutex_lock(&pm->mu);
	pm->stopping = true;
	join = pm->thread_started;
	pm->thread_started = false;
	pthread_cond_broadcast(&pm->cond);
	pthread_mutex_unlock(&pm->mu);
	if (join)
		pthread_join(pm->thread, NULL);

	pthread_mutex_lock(&pm->mu);
	pm->shutdown = true;
	all = malloc((pm->nentries + pm->ngrave + 1) * sizeof(*all));
	for (size_t i = 0; i < pm->nentries; i++) {
		instance_manager_stop(pm->entries[i].im);
		if (all != NULL)
			all[n++] = pm->entries[i].im;
	}
	for (size_t i = 0; i < pm->ngrave; i++)
		if (all != NULL)
			all[n++] = pm->grave[i];
	if (all != NULL) {
		pm->nentries = 0;
		pm->ngrave = 0;
	}
	pthread_cond_broadcast(&pm->cond);
	pthread_mutex_unlock(&pm->mu);
	if (all == NULL) {
		/* Out of memory: stop them one by one instead. */
		pthread_mutex_lock(&pm->mu);
		while (pm->nentries > 0 || pm->ngrave > 0) {
			struct instance_manager *im = pm->nentries > 0
							  ? pm->entries[--pm->nentries].im
							  : pm->grave[--pm->ngrave];

			pthread_mutex_unlock(&pm->mu);
			instance_manager_free(im);
			pthread_mutex_lock(&pm->mu);
		}
		pthread_mutex_unlock(&pm->mu);
		return;
	}
	/* Every manager was told to stop above, so they wind down in parallel. */
	for (size_t i = 0; i < n; i++)
		instance_manager_join(all[i]);
	for (size_t i = 0; i < n; i++)
		instance_manager_free(all[i]);
	free(all);
}

void plugin_manager_free(struct plugin_manager *pm)
{
	if (pm == NULL)
		return;
	plugin_manager_shutdown(pm);
	free(pm->entries);
	free(pm->pending);
	free(pm->grave);
	pthread_cond_destroy(&pm->cond);
	pthread_mutex_destroy(&pm->mu);
	free(pm);
}

/*
 * Whether en manages the instance the registry has active for its name
 * now; with mu held. Not while a replacement (or a removal) is still on
 * its way to the manager: the supervisor stops a replaced instance as
 * soon as its successor is registered and healthy, so a call sent to it
 * then may meet a process that is shutting down.
 */
static bool pm_current(struct plugin_manager *pm, const struct pm_entry *en,
		       struct registry_instance *active)
{
	memset(active, 0, sizeof(*active));
	return registry_active(pm->cfg.registry, en->key.type, en->key.name, active) == 0 &&
	       active->seq == en->inst.seq &&
	       strcmp(active->instance_id, en->inst.instance_id) == 0;
}

/* Why (type, name) is not ready, into e; with mu held. */
static int pm_not_ready(struct plugin_manager *pm, enum registry_type type, const char *name,
			int code, struct err *e)
{
	struct pm_entry *en = pm_find(pm, type, name);
	struct instance_manager_status *st;
	struct registry_instance inst;
	int rc;

	if (en != NULL && !pm_current(pm, en, &inst))
		return err_set(e, code, "plugin %s/%s: instance %s is being replaced%s%s",
			       registry_type_name(type), name, en->inst.instance_id,
			       inst.instance_id[0] ? " by " : "", inst.instance_id);
	if (en == NULL) {
		if (registry_active(pm->cfg.registry, type, name, &inst) == 0)
			return err_set(e, code,
				       "plugin %s/%s: instance %s registered, not yet "
				       "managed",
				       registry_type_name(type), name, inst.instance_id);
		return err_set(e, code, "plugin %s/%s: not registered", registry_type_name(type),
			       name);
	}
	st = malloc(sizeof(*st));
	if (st == NULL)
		return err_set(e, code, "plugin %s/%s: not ready", registry_type_name(type), name);
	instance_manager_status(en->im, st);
	rc = err_set(e, code, "plugin %s/%s: instance %s %s: %s", registry_type_name(type), name,
		     st->instance.instance_id,
		     st->state == INSTANCE_MANAGER_RUNNING ? "unhealthy"
							   : instance_manager_state_name(st->state),
		     st->health.description);
	free(st);
	return rc;
}

int plugin_manager_wait_for_plugin(struct plugin_manager *pm, enum registry_type type,
				   const char *name, int64_t timeout_ms,
				   struct instance_manager_status *out, struct err *e)
{
	struct instance_manager_status *st = malloc(sizeof(*st));
	struct registry_instance active;
	int64_t deadline;
	int rc;

	if (name == NULL || (int)type < 0 || type >= REGISTRY_TYPE_COUNT) {
		free(st);
		return err_set(e, CSID_EINVAL, "wait for plugin: invalid arguments");
	}
	if (st == NULL)
		return err_set(e, CSID_ENOMEM, "wait for plugin %s: out of memory", name);
	deadline = clock_now_ms(pm->clock);
	if (timeout_ms > CLOCK_NEVER - deadline)
		deadline = CLOCK_NEVER;
	else if (timeout_ms > 0)
		deadline += timeout_ms;
	pthread_mutex_lock(&pm->mu);
	for (;;) {
		struct pm_entry *en;

		if (pm->shutdown) {
			rc = err_set(e, CSID_ECANCELED, "plugin %s/%s: plugin manager shut down",
				     registry_type_name(type), name);
			break;
		}
		en = pm_find(pm, type, name);
		if (en != NULL && pm_current(pm, en, &active)) {
			instance_manager_status(en->im, st);
			if (st->state == INSTANCE_MANAGER_RUNNING && st->fingerprinted &&
			    st->health.healthy) {
				if (out != NULL)
					*out = *st;
				rc = 0;
				break;
			}
		}
		if (clock_now_ms(pm->clock) >= deadline) {
			rc = pm_not_ready(pm, type, name, CSID_ETIMEDOUT, e);
			break;
		}
		clock_wait(pm->clock, &pm->cond, &pm->mu, deadline);
	}
	pthread_mutex_unlock(&pm->mu);
	free(st);
	return rc;
}

int plugin_manager_ref(struct plugin_manager *pm, enum registry_type type, const char *name,
		       struct plugin_ref *out, struct err *e)
{
	const char *tn = registry_type_name(type);
	struct registry_instance inst;
	struct pm_entry *en;
	int rc;

	if (name == NULL) {
		memset(out, 0, sizeof(*out));
		return err_set(e, CSID_EINVAL, "plugin reference: no name");
	}
	pthread_mutex_lock(&pm->mu);
	en = pm->shutdown ? NULL : pm_find(pm, type, name);
	/* instance_manager_ref zeroes it first: one clear of its 14 KB, not two. */
	if (en == NULL)
		memset(out, 0, sizeof(*out));
	if (pm->shutdown)
		rc = err_set(e, CSID_EUNAVAIL, "plugin %s/%s: plugin manager shut down", tn, name);
	else if (en == NULL)
		rc = pm_not_ready(pm, type, name,
				  registry_active(pm->cfg.registry, type, name, &inst) == 0
				      ? CSID_EUNAVAIL
				      : CSID_ENOTFOUND,
				  e);
	else
		rc = instance_manager_ref(en->im, out, e);
	pthread_mutex_unlock(&pm->mu);
	return rc;
}

int plugin_manager_mounter_for_plugin(struct plugin_manager *pm, const char *name,
				      struct plugin_ref *out, struct err *e)
{
	return plugin_manager_ref(pm, REGISTRY_NODE, name, out, e);
}

void plugin_manager_snapshot_free(struct plugin_manager_snapshot *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->nplugins; i++)
		free(s->plugins[i].instances);
	free(s->plugins);
	s->plugins = NULL;
	s->nplugins = 0;
}

static int pm_plugin_cmp(const void *a, const void *b)
{
	const struct plugin_manager_plugin *x = a, *y = b;

	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	return strcmp(x->name, y->name);
}

int plugin_manager_snapshot(struct plugin_manager *pm, struct plugin_manager_snapshot *out,
			    struct err *e)
{
	struct registry_snapshot snap;
	struct plugin_manager_plugin *p;
	size_t n = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = registry_snapshot(pm->cfg.registry, &snap, e);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&pm->mu);
	if (pm->shutdown) {
		pthread_mutex_unlock(&pm->mu);
		registry_snapshot_free(&snap);
		return 0;
	}
	p = calloc(snap.nplugins + pm->nentries + 1, sizeof(*p));
	if (p == NULL) {
		pthread_mutex_unlock(&pm->mu);
		registry_snapshot_free(&snap);
		return err_set(e, CSID_ENOMEM, "plugin snapshot: out of memory");
	}
	for (size_t i = 0; i < snap.nplugins; i++, n++) {
		p[n].type = snap.plugins[i].type;
		memcpy(p[n].name, snap.plugins[i].name, sizeof(p[n].name));
		/* Move the instances over. */
		p[n].instances = snap.plugins[i].instances;
		p[n].ninstances = snap.plugins[i].ninstances;
		snap.plugins[i].instances = NULL;
		snap.plugins[i].ninstances = 0;
	}
	for (size_t i = 0; i < pm->nentries; i++) {
		const struct pm_entry *en = &pm->entries[i];
		size_t j;

		for (j = 0; j < n; j++)
			if (pm_key_eq(&en->key, p[j].type, p[j].name))
				break;
		if (j == n) {
			p[n].type = en->key.type;
			memcpy(p[n].name, en->key.name, sizeof(p[n].name));
			n++;
		}
		p[j].managed = true;
		instance_manager_status(en->im, &p[j].status);
	}
	pthread_mutex_unlock(&pm->mu);
	registry_snapshot_free(&snap);
	qsort(p, n, sizeof(*p), pm_plugin_cmp);
	out->plugins = p;
	out->nplugins = n;
	return 0;
}
