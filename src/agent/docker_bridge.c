/*
 * The volume bridge's core (docker_bridge.h): each engine call turned
 * into requests to the servers and calls of the node's claim flow,
 * through the ops seam. State kept here: only the set of volume names a
 * call is running on (so calls on one volume never interleave); the
 * truth is the catalogue and the node's mount records.
 */
#include "agent/docker_bridge.h"

#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/docker_opts.h"
#include "agent/docker_owner.h"
#include "util/clock.h"
#include "util/log.h"

#define DOCKER_BRIDGE_WAIT_MS 120000
#define DOCKER_BRIDGE_BLOCK "5s"
/* Volumes listed (one page of the servers' list). */
#define DOCKER_BRIDGE_LIST_MAX 1000

struct docker_bridge_busy {
	char name[129];
	struct docker_bridge_busy *next;
};

struct docker_bridge {
	struct docker_bridge_config cfg;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct docker_bridge_busy *busy; /* names a call is running on, under mu */
	struct docker_owner *owners; /* NULL: mounts get no owner */
};

static void docker_bridge_lock(struct docker_bridge *b, const char *name,
			       struct docker_bridge_busy *self);
static void docker_bridge_unlock(struct docker_bridge *b, struct docker_bridge_busy *self);

/* A mount no container uses any more (docker_owner.h): unmounted and released, with why. */
static void docker_bridge_release(void *ctx, const char *vol, const char *alloc, const char *reason)
{
	struct docker_bridge *b = ctx;
	struct docker_bridge_busy self;
	char q[600];
	struct err e;

	err_clear(&e);
	docker_bridge_lock(b, vol, &self);
	if (b->cfg.ops.unmount(b->cfg.ops.ctx, vol, alloc, reason, &e) != 0)
		log_warn("msg=\"unused mount not released\" volume=%s alloc=%s error=%s", vol,
			 alloc, log_q(q, sizeof(q), e.msg));
	docker_bridge_unlock(b, &self);
}

int docker_bridge_new(const struct docker_bridge_config *cfg, struct docker_bridge **out,
		      struct err *e)
{
	struct docker_bridge *b = calloc(1, sizeof(*b));

	*out = NULL;
	if (!b)
		return err_set(e, CSID_ENOMEM, "out of memory");
	b->cfg = *cfg;
	if (b->cfg.wait_ms <= 0)
		b->cfg.wait_ms = DOCKER_BRIDGE_WAIT_MS;
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->cond, NULL);
	if (cfg->ops.owner) {
		struct docker_owner_config oc = {
		    .engine_socket = cfg->engine_socket,
		    .mounts_dir = cfg->mounts_dir,
		    .record = cfg->ops.owner,
		    .ctx = cfg->ops.ctx,
		    .release = docker_bridge_release,
		    .release_ctx = b,
		};
		int rc = docker_owner_new(&oc, &b->owners, e);

		if (rc) {
			pthread_cond_destroy(&b->cond);
			pthread_mutex_destroy(&b->mu);
			free(b);
			return rc;
		}
	}
	*out = b;
	return 0;
}

void docker_bridge_free(struct docker_bridge *b)
{
	if (!b)
		return;
	docker_owner_free(b->owners);
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->mu);
	free(b);
}

int docker_bridge_id_check(const char *id, struct err *e)
{
	size_t n = strlen(id);
	bool ok = n >= 1 && n <= 128 && strcmp(id, ".") != 0 && strcmp(id, "..") != 0;

	for (size_t i = 0; ok && i < n; i++)
		ok = isalnum((unsigned char)id[i]) || id[i] == '.' || id[i] == '_' || id[i] == '-';
	return ok ? 0
		  : err_set(
			e, CSID_EINVAL,
			"mount ID: must be 1 to 128 bytes of letters, digits, '.', '_' and '-'");
}

/* Waits until no call runs on name, then marks it busy (name is checked: it fits). */
static void docker_bridge_lock(struct docker_bridge *b, const char *name,
			       struct docker_bridge_busy *self)
{
	snprintf(self->name, sizeof(self->name), "%s", name);
	pthread_mutex_lock(&b->mu);
	for (;;) {
		struct docker_bridge_busy *p = b->busy;

		while (p && strcmp(p->name, name) != 0)
			p = p->next;
		if (!p)
			break;
		pthread_cond_wait(&b->cond, &b->mu);
	}
	self->next = b->busy;
	b->busy = self;
	pthread_mutex_unlock(&b->mu);
}

static void docker_bridge_unlock(struct docker_bridge *b, struct docker_bridge_busy *self)
{
	struct docker_bridge_busy **pp;

	pthread_mutex_lock(&b->mu);
	for (pp = &b->busy; *pp && *pp != self; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = self->next;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->mu);
}

static int docker_bridge_server(struct docker_bridge *b, const char *method, const char *path,
				json_t *body, json_t **doc, struct err *e)
{
	return b->cfg.ops.server(b->cfg.ops.ctx, method, path, body, doc, e);
}

/* GET /v1/volume/<name>[rest]: 0 and *v, CSID_ENOTFOUND, or another error. */
static int docker_bridge_volume(struct docker_bridge *b, const char *name, const char *rest,
				json_t **v, struct err *e)
{
	char path[320];

	snprintf(path, sizeof(path), "/v1/volume/%s%s", name, rest ? rest : "");
	return docker_bridge_server(b, "GET", path, NULL, v, e);
}

static const char *docker_bridge_str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

/*
 * Follows volume *v (replaced as it changes) until done(state) or the
 * deadline; gone: the record went (404), *v NULL then.
 */
static int docker_bridge_follow(struct docker_bridge *b, const char *name, json_t **v,
				const char *const *until, bool *gone, struct err *e)
{
	int64_t deadline = clock_now_ms(clock_real()) + b->cfg.wait_ms;
	char rest[96];
	int rc;

	*gone = false;
	for (;;) {
		const char *st = docker_bridge_str(*v, "state");
		json_t *next = NULL;

		for (size_t i = 0; until[i]; i++)
			if (strcmp(st, until[i]) == 0)
				return 0;
		if (clock_now_ms(clock_real()) >= deadline) {
			const char *last =
			    docker_bridge_str(json_object_get(*v, "status"), "last_error");

			return err_set(e, CSID_ETIMEDOUT,
				       "still %s after %llds (last error: %.300s)", st,
				       (long long)(b->cfg.wait_ms / 1000), *last ? last : "none");
		}
		snprintf(rest, sizeof(rest), "?index=%lld&wait=" DOCKER_BRIDGE_BLOCK,
			 (long long)json_integer_value(json_object_get(*v, "modify_index")));
		rc = docker_bridge_volume(b, name, rest, &next, e);
		if (rc == CSID_ENOTFOUND) {
			json_decref(*v);
			*v = NULL;
			*gone = true;
			return 0;
		}
		if (rc)
			return rc;
		json_decref(*v);
		*v = next;
	}
}

/* Drops the record of a volume whose create failed (nothing was made). */
static void docker_bridge_drop(struct docker_bridge *b, const char *name)
{
	char path[320], q[600];
	json_t *doc = NULL;
	struct err e;

	err_clear(&e);
	snprintf(path, sizeof(path), "/v1/volume/%s?force=true", name);
	if (docker_bridge_server(b, "DELETE", path, NULL, &doc, &e))
		log_warn("msg=\"failed volume not dropped\" volume=%s error=%s", name,
			 log_q(q, sizeof(q), e.msg));
	json_decref(doc);
}

static int docker_bridge_create_locked(struct docker_bridge *b, const char *name, json_t *opts,
				       struct err *e)
{
	static const char *const done[] = {"ready", "failed", NULL};
	json_t *plugins = NULL, *spec = NULL, *v = NULL;
	const char **ids = NULL;
	bool reg = false, gone = false;
	char path[320];
	size_t n = 0;
	int rc;

	if ((rc = b->cfg.ops.plugins(b->cfg.ops.ctx, &plugins, e)))
		return rc;
	n = json_array_size(plugins);
	ids = calloc(n + 1, sizeof(*ids));
	if (!ids) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		ids[i] = json_string_value(json_array_get(plugins, i));
	if ((rc = docker_opts_spec(name, opts, ids, n, &spec, &reg, e)))
		goto out;
	/* A volume the catalogue has already (made elsewhere, or before) is used as it is. */
	rc = docker_bridge_volume(b, name, NULL, &v, e);
	if (rc == 0 && strcmp(docker_bridge_str(v, "state"), "failed") != 0)
		goto out;
	if (rc == 0) {
		rc = err_set(e, CSID_EPRECOND,
			     "exists in the catalogue and failed (%.300s): remove it first",
			     docker_bridge_str(v, "failure"));
		goto out;
	}
	if (rc != CSID_ENOTFOUND)
		goto out;
	json_decref(v);
	v = NULL;
	snprintf(path, sizeof(path), "/v1/volume/%s%s", name, reg ? "" : "/create");
	if ((rc = docker_bridge_server(b, "PUT", path, spec, &v, e)))
		goto out;
	log_info("msg=\"docker volume %s\" volume=%s plugin=%s", reg ? "registering" : "creating",
		 name, docker_bridge_str(spec, "plugin_id"));
	if ((rc = docker_bridge_follow(b, name, &v, done, &gone, e)))
		goto out;
	if (gone) {
		rc = err_set(e, CSID_ENOTFOUND, "removed while it was being created");
		goto out;
	}
	if (strcmp(docker_bridge_str(v, "state"), "failed") == 0) {
		rc = err_set(e, CSID_EINVAL, "%s failed: %.400s", reg ? "register" : "create",
			     docker_bridge_str(v, "failure"));
		docker_bridge_drop(b, name);
	}
out:
	free(ids);
	json_decref(plugins);
	json_decref(spec);
	json_decref(v);
	return rc;
}

int docker_bridge_create(struct docker_bridge *b, const char *name, json_t *opts, struct err *e)
{
	struct docker_bridge_busy self;
	int rc;

	if ((rc = docker_opts_name_check(name, e)))
		return rc;
	docker_bridge_lock(b, name, &self);
	rc = docker_bridge_create_locked(b, name, opts, e);
	docker_bridge_unlock(b, &self);
	return rc ? err_wrap(e, "volume %s", name) : 0;
}

static int docker_bridge_remove_locked(struct docker_bridge *b, const char *name, struct err *e)
{
	static const char *const never[] = {NULL};
	json_t *v = NULL, *doc = NULL;
	bool reg, gone = false;
	char path[320];
	int rc;

	rc = docker_bridge_volume(b, name, NULL, &v, e);
	if (rc == CSID_ENOTFOUND) {
		/* Nothing to remove: an engine that retries a Remove gets its answer. */
		err_clear(e);
		return 0;
	}
	if (rc)
		return rc;
	reg = strcmp(docker_bridge_str(v, "name"), DOCKER_OPTS_REGISTERED_NAME) == 0;
	snprintf(path, sizeof(path), "/v1/volume/%s%s", name, reg ? "" : "/delete");
	if ((rc = docker_bridge_server(b, "DELETE", path, NULL, &doc, e)))
		goto out;
	log_info("msg=\"docker volume %s\" volume=%s", reg ? "deregistered" : "deleting", name);
	if (!reg) {
		/* Deleted once the record is gone (DeleteVolume, then the record). */
		rc = docker_bridge_follow(b, name, &v, never, &gone, e);
		if (rc == 0 && !gone)
			rc = err_set(e, CSID_EINTERNAL, "not deleted");
	}
out:
	json_decref(doc);
	json_decref(v);
	return rc;
}

int docker_bridge_remove(struct docker_bridge *b, const char *name, struct err *e)
{
	struct docker_bridge_busy self;
	int rc;

	if ((rc = docker_opts_name_check(name, e)))
		return rc;
	docker_bridge_lock(b, name, &self);
	rc = docker_bridge_remove_locked(b, name, e);
	docker_bridge_unlock(b, &self);
	return rc ? err_wrap(e, "remove volume %s", name) : 0;
}

/* This node's mount of name for id (NULL: any): its target into path, or "" when none. */
static int docker_bridge_find(struct docker_bridge *b, const char *name, const char *id, char *path,
			      struct err *e)
{
	json_t *all = NULL, *m;
	size_t i;
	int rc = b->cfg.ops.mounts(b->cfg.ops.ctx, &all, e);

	path[0] = '\0';
	if (rc)
		return rc;
	json_array_foreach(all, i, m)
	{
		if (strcmp(docker_bridge_str(m, "volume_id"), name) != 0 ||
		    (id && strcmp(docker_bridge_str(m, "alloc_id"), id) != 0))
			continue;
		snprintf(path, DOCKER_BRIDGE_PATH_MAX, "%s", docker_bridge_str(m, "target"));
		break;
	}
	json_decref(all);
	return 0;
}

int docker_bridge_mount(struct docker_bridge *b, const char *name, const char *id, char *path,
			struct err *e)
{
	struct docker_bridge_busy self;
	int rc;

	path[0] = '\0';
	if ((rc = docker_opts_name_check(name, e)) || (rc = docker_bridge_id_check(id, e)))
		return rc;
	docker_bridge_lock(b, name, &self);
	/* The engine asks again for a mount it has: the same path. */
	rc = docker_bridge_find(b, name, id, path, e);
	if (rc == 0 && !path[0]) {
		rc = b->cfg.ops.mount(b->cfg.ops.ctx, name, id, path, DOCKER_BRIDGE_PATH_MAX, e);
		if (rc == 0 && b->owners)
			docker_owner_watch(b->owners, name, id, path);
	}
	docker_bridge_unlock(b, &self);
	if (rc)
		return err_wrap(e, "mount volume %s", name);
	log_info("msg=\"docker volume mounted\" volume=%s alloc=%s", name, id);
	return 0;
}

int docker_bridge_unmount(struct docker_bridge *b, const char *name, const char *id, struct err *e)
{
	struct docker_bridge_busy self;
	char path[DOCKER_BRIDGE_PATH_MAX];
	int rc;

	if ((rc = docker_opts_name_check(name, e)) || (rc = docker_bridge_id_check(id, e)))
		return rc;
	docker_bridge_lock(b, name, &self);
	/*
	 * No mount here for id: nothing to undo (a claim a failed mount left
	 * is released by the servers once the node no longer reports it).
	 */
	rc = docker_bridge_find(b, name, id, path, e);
	if (rc == 0 && path[0])
		rc = b->cfg.ops.unmount(b->cfg.ops.ctx, name, id, NULL, e);
	if (rc == 0 && b->owners)
		docker_owner_drop(b->owners, name, id);
	docker_bridge_unlock(b, &self);
	if (rc)
		return err_wrap(e, "unmount volume %s", name);
	if (path[0])
		log_info("msg=\"docker volume unmounted\" volume=%s alloc=%s", name, id);
	return 0;
}

int docker_bridge_path(struct docker_bridge *b, const char *name, char *path, struct err *e)
{
	int rc;

	path[0] = '\0';
	if ((rc = docker_opts_name_check(name, e)))
		return rc;
	return docker_bridge_find(b, name, NULL, path, e);
}

/* The Status of a volume: the catalogue's view and this node's mounts. */
static json_t *docker_bridge_status(json_t *v, json_t *mounts, const char *name)
{
	json_t *claims = json_array(), *here = json_array(), *c, *m;
	json_t *st = json_pack("{s:s, s:s, s:I}", "state", docker_bridge_str(v, "state"), "plugin",
			       docker_bridge_str(v, "plugin_id"), "capacity",
			       (json_int_t)json_integer_value(json_object_get(v, "capacity")));
	size_t i;

	json_array_foreach(json_object_get(v, "claims"), i, c)
	{
		json_array_append_new(claims,
				      json_pack("{s:s, s:s, s:s, s:s}", "alloc_id",
						docker_bridge_str(c, "alloc_id"), "node_id",
						docker_bridge_str(c, "node_id"), "state",
						docker_bridge_str(c, "state"), "access_mode",
						docker_bridge_str(c, "access_mode")));
	}
	json_array_foreach(mounts, i, m)
	{
		if (strcmp(docker_bridge_str(m, "volume_id"), name) == 0)
			json_array_append_new(here,
					      json_pack("{s:s, s:s}", "alloc_id",
							docker_bridge_str(m, "alloc_id"), "path",
							docker_bridge_str(m, "target")));
	}
	if (st && json_is_string(json_object_get(v, "failure")))
		json_object_set(st, "failure", json_object_get(v, "failure"));
	if (st) {
		json_object_set_new(st, "claims", claims);
		json_object_set_new(st, "mounts_here", here);
	} else {
		json_decref(claims);
		json_decref(here);
	}
	return st;
}

int docker_bridge_get(struct docker_bridge *b, const char *name, json_t **out, struct err *e)
{
	char path[DOCKER_BRIDGE_PATH_MAX];
	json_t *v = NULL, *mounts = NULL;
	int rc;

	*out = NULL;
	if ((rc = docker_opts_name_check(name, e)))
		return rc;
	if ((rc = docker_bridge_volume(b, name, NULL, &v, e)) ||
	    (rc = b->cfg.ops.mounts(b->cfg.ops.ctx, &mounts, e)) ||
	    (rc = docker_bridge_find(b, name, NULL, path, e)))
		goto out;
	*out = json_pack("{s:s, s:s, s:o*}", "Name", name, "Mountpoint", path, "Status",
			 docker_bridge_status(v, mounts, name));
	if (!*out)
		rc = err_set(e, CSID_ENOMEM, "out of memory");
out:
	json_decref(v);
	json_decref(mounts);
	return rc ? err_wrap(e, "volume %s", name) : 0;
}

int docker_bridge_list(struct docker_bridge *b, json_t **out, struct err *e)
{
	json_t *doc = NULL, *mounts = NULL, *v, *m;
	size_t i, j;
	int rc;

	*out = NULL;
	if ((rc = docker_bridge_server(b, "GET", "/v1/volumes?per_page=1000", NULL, &doc, e)) ||
	    (rc = b->cfg.ops.mounts(b->cfg.ops.ctx, &mounts, e)))
		goto out;
	*out = json_array();
	json_array_foreach(json_object_get(doc, "volumes"), i, v)
	{
		const char *id = docker_bridge_str(v, "id"), *mp = "";

		json_array_foreach(mounts, j, m)
		{
			if (strcmp(docker_bridge_str(m, "volume_id"), id) == 0) {
				mp = docker_bridge_str(m, "target");
				break;
			}
		}
		if (i < DOCKER_BRIDGE_LIST_MAX && *id)
			json_array_append_new(
			    *out, json_pack("{s:s, s:s}", "Name", id, "Mountpoint", mp));
	}
	if (!*out)
		rc = err_set(e, CSID_ENOMEM, "out of memory");
out:
	json_decref(doc);
	json_decref(mounts);
	return rc ? err_wrap(e, "list volumes") : 0;
}
