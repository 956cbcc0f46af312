/*
 * The volume mounter: drives NodeStage/NodePublish and NodeUnpublish/
 * NodeUnstage for allocations, one durable record per (volume, alloc).
 *
 * Going up, a record is inserted before the first RPC (mounting, or
 * publishing when the staging path is already staged by another
 * allocation or the plugin has no STAGE_UNSTAGE), so the staging
 * reference exists before staging, and becomes published after the last
 * RPC: a mount is two commits, an intent and a result (mount_store.h says
 * what recovery makes of mounting). A failed stage or publish goes on
 * from what this call saw (unstaging-unconfirmed after a failed stage,
 * unpublishing after a failed publish), so a rollback sends the RPCs the
 * three-commit mount sent.
 * Going down (unmount, rollback, recovery) one function, mounter_down(),
 * takes a record from any state to gone: unpublishing before
 * NodeUnpublish, then unstaging before NodeUnstage only when no other
 * record still holds the staging path staged, then the row is deleted.
 * NOT_FOUND from NodeUnpublish/NodeUnstage counts as done (csi_rules.h).
 * A stage that was never confirmed is rolled back through
 * unstaging-unconfirmed: there, a plugin that refuses the NodeUnstage for
 * good while nothing is mounted at the staging path does not hold the
 * record (the plugin rejected the volume; nothing was staged).
 *
 * One volume is one plugin volume: a mount naming another plugin or
 * external ID than the other allocations' records of the volume is
 * refused (CSID_ECONFLICT), so a stage is never shared between two
 * plugin volumes nor unstaged with the wrong ID.
 *
 * A failed mount is rolled back at once (the target and the stage may be
 * half made when an RPC times out, and the next attempt starts clean). If
 * the rollback fails too, the record keeps the state it reached and the
 * next mount or unmount of that (volume, alloc), or mounter_recover,
 * finishes it before doing anything else; when the plugin never will,
 * the operator forces it (mounter_force.c). A rollback that is done
 * removes the target's parent directory at once. A failed unmount keeps its
 * record in unpublishing/unstaging; a retry continues from there.
 *
 * Recovery after a restart (mounter_recover: what each recorded state
 * becomes, the sweep of mounts and directories nobody owns) is in
 * mounter_recover.c; mounter_int.h holds what the two files share.
 *
 * Directories: the agent creates the staging path and the target's
 * parent (the plugin creates and removes the target). When an unmount is
 * done with one, it is parked rather than removed: kept, empty, for the
 * next mount of the same path (a restarted task mounts the same volume
 * for the same allocation again), up to MOUNTER_PARK_MAX of them, the
 * oldest removed beyond that (with its empty parents). A parked directory
 * holds nothing and no record names it; a mount that needs it takes it
 * back under the directory lock first, so an eviction never removes a
 * directory in use. mounter_close removes them all. After a crash, the
 * first recovery's sweep removes every empty directory under
 * <data_dir>/mounts that no record names (parked ones, and those of a
 * crash between an RPC and its clean-up), reading only the agent-made
 * levels, never a staging path or a target. Like the mount sweep, it
 * expects the first recovery to run before mounts are served (csid
 * does); a mount racing with it could at worst fail and be rolled back.
 *
 * Known limit: when a publish times out and the plugin still completes it
 * after the rollback's NodeUnpublish has returned, the late mount has no
 * record. CSI expects the plugin to answer ABORTED while an operation on
 * the volume is in flight (then the rollback is retried and nothing is
 * lost); for a plugin that does not, the next start's sweep detaches it.
 */
#include "agent/mounter_int.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/mount_rpc.h"
#include "util/log.h"
#include "util/mkdir_p.h"

/* Bounds on what a request may carry (CSI: maps up to 4 KiB). */
#define MOUNTER_MAP_MAX_BYTES 4096
#define MOUNTER_EXTERNAL_ID_MAX 1024
#define MOUNTER_FLAGS_MAX 64

int mounter_open(const char *data_dir, const char *db_path, const struct mounter_options *opts,
		 struct mounter **out, struct err *e)
{
	struct mounter *m;
	char real[PATH_MAX];
	char sub[MOUNTER_PATH_MAX];
	int rc;

	if (data_dir == NULL || data_dir[0] == '\0' || db_path == NULL)
		return err_set(e, CSID_EINVAL, "mounter: data dir and database path are required");
	m = calloc(1, sizeof(*m));
	if (m == NULL)
		return err_set(e, CSID_ENOMEM, "mounter: out of memory");
	rc = mkdir_p(data_dir, e);
	if (rc != 0)
		goto fail;
	if (realpath(data_dir, real) == NULL) {
		rc = err_errno(e, errno, "realpath %s", data_dir);
		goto fail;
	}
	/* Leave room for three names, a usage segment and the fixed parts. */
	if (strlen(real) + 3 * (MOUNT_NAME_MAX + 1) + 96 >= MOUNTER_PATH_MAX) {
		rc = err_set(e, CSID_EINVAL, "data dir %s is too long for mount paths", real);
		goto fail;
	}
	snprintf(m->data_dir, sizeof(m->data_dir), "%s", real);
	snprintf(m->mounts_dir, sizeof(m->mounts_dir), "%s/mounts", real);
	snprintf(sub, sizeof(sub), "%s/staging", m->mounts_dir);
	rc = mkdir_p(sub, e);
	snprintf(sub, sizeof(sub), "%s/per-alloc", m->mounts_dir);
	if (rc == 0)
		rc = mkdir_p(sub, e);
	if (rc == 0)
		rc = mount_store_open(db_path, &m->store, e);
	if (rc != 0)
		goto fail;
	m->table = (opts && opts->table) ? opts->table : mountinfo_table();
	m->timeout_ms =
	    (opts && opts->rpc_timeout_ms > 0) ? opts->rpc_timeout_ms : CSI_DEFAULT_TIMEOUT_MS;
	pthread_mutex_init(&m->mu, NULL);
	pthread_mutex_init(&m->dir_mu, NULL);
	*out = m;
	return 0;
fail:
	free(m);
	return err_wrap(e, "mounter");
}

/* Takes the lock of volume_id (creating it), blocking while another call holds it. */
int mounter_lock(struct mounter *m, const char *volume_id, struct mounter_vlock **out,
		 struct err *e)
{
	struct mounter_vlock *v;

	pthread_mutex_lock(&m->mu);
	for (v = m->vlocks; v != NULL; v = v->next)
		if (strcmp(v->volume_id, volume_id) == 0)
			break;
	if (v == NULL) {
		v = calloc(1, sizeof(*v));
		if (v != NULL)
			v->volume_id = strdup(volume_id);
		if (v == NULL || v->volume_id == NULL) {
			pthread_mutex_unlock(&m->mu);
			free(v);
			return err_set(e, CSID_ENOMEM, "mounter: out of memory");
		}
		pthread_mutex_init(&v->mu, NULL);
		v->next = m->vlocks;
		m->vlocks = v;
	}
	v->refs++;
	pthread_mutex_unlock(&m->mu);
	pthread_mutex_lock(&v->mu);
	*out = v;
	return 0;
}

void mounter_unlock(struct mounter *m, struct mounter_vlock *v)
{
	if (v == NULL)
		return;
	pthread_mutex_unlock(&v->mu);
	pthread_mutex_lock(&m->mu);
	if (--v->refs == 0) {
		for (struct mounter_vlock **pp = &m->vlocks; *pp != NULL; pp = &(*pp)->next) {
			if (*pp == v) {
				*pp = v->next;
				break;
			}
		}
		pthread_mutex_destroy(&v->mu);
		free(v->volume_id);
		free(v);
	}
	pthread_mutex_unlock(&m->mu);
}

/*
 * Removes dir and then its parents while they are empty directories,
 * stopping at <mounts>/staging or <mounts>/per-alloc (exclusive), or at
 * the first one that cannot go (rmdir never removes content or a mount
 * point). The caller holds dir_mu.
 */
static void mounter_prune_locked(struct mounter *m, const char *dir)
{
	char path[MOUNTER_PATH_MAX];
	size_t stop_len = strlen(m->mounts_dir);
	const char *rest;

	snprintf(path, sizeof(path), "%s", dir);
	if (strncmp(path, m->mounts_dir, stop_len) != 0 || path[stop_len] != '/')
		return;
	rest = path + stop_len + 1;
	if (strncmp(rest, "staging/", 8) == 0)
		stop_len += 8;
	else if (strncmp(rest, "per-alloc/", 10) == 0)
		stop_len += 10;
	else
		return;
	/* stop_len now covers "<mounts>/staging" or "<mounts>/per-alloc". */
	while (strlen(path) > stop_len) {
		char *slash;

		if (rmdir(path) != 0 && errno != ENOENT)
			break;
		slash = strrchr(path, '/');
		if (slash == NULL)
			break;
		*slash = '\0';
	}
}

/* Index of dir among the parked directories, or -1. The caller holds dir_mu. */
static int mounter_parked_find(const struct mounter *m, const char *dir)
{
	for (int i = 0; i < m->n_parked; i++)
		if (strcmp(m->parked[i], dir) == 0)
			return i;
	return -1;
}

void mounter_parked_drop(struct mounter *m, int i)
{
	free(m->parked[i]);
	memmove(&m->parked[i], &m->parked[i + 1], (size_t)(m->n_parked - i - 1) * sizeof(char *));
	m->n_parked--;
}

/*
 * Keeps the empty directory dir (made by the agent, no longer used) for
 * the next mount of the same path instead of removing it now. When the
 * list is full, the oldest is removed (with its empty parents); when dir
 * cannot be kept (no memory), it is removed at once.
 */
static void mounter_park(struct mounter *m, const char *dir)
{
	char *copy;

	pthread_mutex_lock(&m->dir_mu);
	if (mounter_parked_find(m, dir) >= 0)
		goto out;
	copy = strdup(dir);
	if (copy == NULL) {
		mounter_prune_locked(m, dir);
		goto out;
	}
	if (m->n_parked == MOUNTER_PARK_MAX) {
		mounter_prune_locked(m, m->parked[0]);
		mounter_parked_drop(m, 0);
	}
	m->parked[m->n_parked++] = copy;
out:
	pthread_mutex_unlock(&m->dir_mu);
}

void mounter_dir_remove(struct mounter *m, const char *dir)
{
	int i;

	pthread_mutex_lock(&m->dir_mu);
	i = mounter_parked_find(m, dir);
	if (i >= 0)
		mounter_parked_drop(m, i);
	mounter_prune_locked(m, dir);
	pthread_mutex_unlock(&m->dir_mu);
}

void mounter_dir_remove_parent(struct mounter *m, const char *path)
{
	char parent[MOUNTER_PATH_MAX];
	char *slash;

	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (slash != NULL) {
		*slash = '\0';
		mounter_dir_remove(m, parent);
	}
}

/* Removes every parked directory (and its empty parents). */
static void mounter_unpark_all(struct mounter *m)
{
	pthread_mutex_lock(&m->dir_mu);
	while (m->n_parked > 0) {
		mounter_prune_locked(m, m->parked[m->n_parked - 1]);
		mounter_parked_drop(m, m->n_parked - 1);
	}
	pthread_mutex_unlock(&m->dir_mu);
}

void mounter_close(struct mounter *m)
{
	if (m == NULL)
		return;
	mounter_unpark_all(m);
	mount_store_close(m->store);
	pthread_mutex_destroy(&m->mu);
	pthread_mutex_destroy(&m->dir_mu);
	free(m);
}

/*
 * Creates dir and its parents, serialized with pruning. A parked dir is
 * taken back first, so no eviction removes it while a mount uses it.
 */
static int mounter_mkdir(struct mounter *m, const char *dir, struct err *e)
{
	int rc;
	int i;

	pthread_mutex_lock(&m->dir_mu);
	i = mounter_parked_find(m, dir);
	if (i >= 0)
		mounter_parked_drop(m, i);
	rc = mkdir_p(dir, e);
	pthread_mutex_unlock(&m->dir_mu);
	return rc;
}

/* Whether r's staging path must be unstaged when r goes: no other record holds it staged. */
static int mounter_last_user(struct mounter *m, const struct mount_record *r, bool *last,
			     struct err *e)
{
	int users = 0, staged = 0;
	int rc;

	*last = false;
	if (r->staging_path == NULL)
		return 0;
	rc = mount_store_stage_users(m->store, r->staging_path, r->alloc_id, &users, &staged, e);
	if (rc == 0)
		*last = staged == 0;
	return rc;
}

static int mounter_unpublish_rpc(struct mounter *m, const struct mounter_plugin *p,
				 const struct mount_record *r, struct err *e)
{
	char parent[MOUNTER_PATH_MAX];
	char *slash;
	int rc;

	rc = mount_rpc_unpublish(p, m->timeout_ms, r, e);
	if (rc != 0)
		return rc;
	/*
	 * The plugin removes the target itself; this also removes an empty
	 * directory a careless plugin left (rmdir never removes content or a
	 * mount point). The parent the agent made is parked for reuse.
	 */
	if (rmdir(r->target_path) != 0 && errno != ENOENT)
		return 0;
	snprintf(parent, sizeof(parent), "%s", r->target_path);
	slash = strrchr(parent, '/');
	if (slash != NULL) {
		*slash = '\0';
		mounter_park(m, parent);
	}
	return 0;
}

static int mounter_unstage_rpc(struct mounter *m, const struct mounter_plugin *p,
			       const struct mount_record *r, struct err *e)
{
	int rc;

	rc = mount_rpc_unstage(p, m->timeout_ms, r, e);
	if (rc == 0)
		mounter_park(m, r->staging_path);
	return rc;
}

/*
 * A NodeUnstage of a stage that was never confirmed failed with rc (e):
 * when the plugin refused it for good (a final, not a retryable error)
 * and nothing is mounted at the staging path, the stage never happened
 * as far as this node can see, and waiting for the plugin's cooperation
 * would keep the record (and the volume) stuck for ever: the step counts
 * as done. Returns 0 then, else rc with e unchanged.
 */
static int mounter_unstage_refused(struct mounter *m, const struct mount_record *r, int rc,
				   struct err *e)
{
	bool mounted = true;
	struct err me;

	err_clear(&me);
	if (csid_err_retryable(rc) || r->staging_path == NULL ||
	    mount_table_is_mounted(m->table, r->staging_path, &mounted, &me) != 0 || mounted)
		return rc;
	mounter_log(LOG_WARN,
		    "plugin refused to unstage a stage it never confirmed; nothing is mounted "
		    "there, counted as done",
		    r, e != NULL ? e->msg : NULL);
	mounter_park(m, r->staging_path);
	err_clear(e);
	return 0;
}

/*
 * Once r no longer uses the stage (publish undone or never started): on
 * to unstaging when r is the last holder of its staging path, else gone.
 */
static int mounter_drop_stage_ref(struct mounter *m, struct mount_record *r, bool *last_out,
				  struct err *e)
{
	bool last = false;
	int rc = mounter_last_user(m, r, &last, e);
	enum mount_state unstage = r->state == MOUNT_STATE_UNPUBLISHING_UNCONFIRMED
				       ? MOUNT_STATE_UNSTAGING_UNCONFIRMED
				       : MOUNT_STATE_UNSTAGING;

	*last_out = last;
	if (rc == 0)
		rc = mount_store_transition(m->store, r, last ? unstage : MOUNT_STATE_GONE, e);
	return rc;
}

/*
 * Takes r from whatever state it is in down to gone, sending only the RPCs
 * that state still needs. On failure r keeps the state it reached (durably)
 * and the error is returned; calling again continues from there.
 */
int mounter_down(struct mounter *m, const struct mounter_plugin *p, struct mount_record *r,
		 struct err *e)
{
	/*
	 * last: r holds the last reference on its stage, as decided in this
	 * call (under the volume lock, so nothing changed since). A record
	 * found in unstaging asks again: a retry may come after other
	 * allocations staged the same path.
	 */
	bool last = false, decided = false;
	int rc = 0;

	while (rc == 0 && r->state != MOUNT_STATE_GONE) {
		switch (r->state) {
		case MOUNT_STATE_STAGING:
			rc = mount_store_transition(m->store, r, MOUNT_STATE_UNSTAGING_UNCONFIRMED,
						    e);
			break;
		case MOUNT_STATE_STAGED:
			rc = mounter_drop_stage_ref(m, r, &last, e);
			decided = true;
			break;
		case MOUNT_STATE_MOUNTING:
			/* Neither RPC confirmed: the publish is undone first, the stage as
			 * unconfirmed. */
			rc = mount_store_transition(m->store, r,
						    MOUNT_STATE_UNPUBLISHING_UNCONFIRMED, e);
			break;
		case MOUNT_STATE_PUBLISHING:
		case MOUNT_STATE_PUBLISHED:
			rc = mount_store_transition(m->store, r, MOUNT_STATE_UNPUBLISHING, e);
			break;
		case MOUNT_STATE_UNPUBLISHING:
		case MOUNT_STATE_UNPUBLISHING_UNCONFIRMED:
			rc = mounter_unpublish_rpc(m, p, r, e);
			if (rc == 0)
				rc = mounter_drop_stage_ref(m, r, &last, e);
			decided = true;
			break;
		case MOUNT_STATE_UNSTAGING:
		case MOUNT_STATE_UNSTAGING_UNCONFIRMED:
			if (!decided)
				rc = mounter_last_user(m, r, &last, e);
			if (rc == 0 && last)
				rc = mounter_unstage_rpc(m, p, r, e);
			if (rc != 0 && r->state == MOUNT_STATE_UNSTAGING_UNCONFIRMED)
				rc = mounter_unstage_refused(m, r, rc, e);
			if (rc == 0)
				rc = mount_store_transition(m->store, r, MOUNT_STATE_GONE, e);
			break;
		default:
			rc = err_set(e, CSID_EINTERNAL, "mount %s/%s: unexpected state %s",
				     r->volume_id, r->alloc_id, mount_state_name(r->state));
			break;
		}
	}
	return rc;
}

/* Checks a string map: non-NULL keys and values, at most 4 KiB in all. */
static int mounter_check_map(const char *what, const struct mount_kv *kv, size_t n, struct err *e)
{
	size_t total = 0;

	if (n > 0 && kv == NULL)
		return err_set(e, CSID_EINVAL, "%s: entries missing", what);
	for (size_t i = 0; i < n; i++) {
		if (kv[i].key == NULL || kv[i].key[0] == '\0' || kv[i].value == NULL)
			return err_set(e, CSID_EINVAL, "%s: entry %zu has no key or no value", what,
				       i);
		total += strnlen(kv[i].key, MOUNTER_MAP_MAX_BYTES + 1) +
			 strnlen(kv[i].value, MOUNTER_MAP_MAX_BYTES + 1);
		if (total > MOUNTER_MAP_MAX_BYTES)
			return err_set(e, CSID_EINVAL, "%s is larger than %d bytes", what,
				       MOUNTER_MAP_MAX_BYTES);
	}
	return 0;
}

static int mounter_check_request(const struct mounter_plugin *p, const struct mounter_request *req,
				 struct err *e)
{
	const struct mount_usage *u = &req->usage;
	size_t xlen;
	int rc;

	if (p == NULL || p->client == NULL || p->plugin_id == NULL)
		return err_set(e, CSID_EINVAL, "no node plugin given");
	rc = mount_name_check("volume id", req->volume_id, e);
	if (rc == 0)
		rc = mount_name_check("alloc id", req->alloc_id, e);
	if (rc == 0)
		rc = mount_name_check("plugin id", req->plugin_id, e);
	if (rc != 0)
		return rc;
	if (strcmp(req->plugin_id, p->plugin_id) != 0)
		return err_set(e, CSID_EINVAL, "request names plugin %s but plugin %s was given",
			       req->plugin_id, p->plugin_id);
	xlen = req->external_id ? strnlen(req->external_id, MOUNTER_EXTERNAL_ID_MAX + 1) : 0;
	if (xlen == 0 || xlen > MOUNTER_EXTERNAL_ID_MAX)
		return err_set(e, CSID_EINVAL, "external id must have 1 to %d bytes",
			       MOUNTER_EXTERNAL_ID_MAX);
	for (size_t i = 0; i < xlen; i++)
		if ((unsigned char)req->external_id[i] < 0x20 || req->external_id[i] == 0x7f)
			return err_set(e, CSID_EINVAL, "external id contains a control character");
	if (mount_attachment_name(u->attachment) == NULL || mount_access_name(u->access) == NULL)
		return err_set(e, CSID_EINVAL, "unknown attachment or access mode");
	if (u->fs_type != NULL && strnlen(u->fs_type, MOUNT_NAME_MAX + 1) > MOUNT_NAME_MAX)
		return err_set(e, CSID_EINVAL, "fs type is longer than %d bytes", MOUNT_NAME_MAX);
	if (u->n_mount_flags > MOUNTER_FLAGS_MAX || (u->n_mount_flags > 0 && !u->mount_flags))
		return err_set(e, CSID_EINVAL, "mount flags: at most %d", MOUNTER_FLAGS_MAX);
	for (size_t i = 0, total = 0; i < u->n_mount_flags; i++) {
		if (u->mount_flags[i] == NULL)
			return err_set(e, CSID_EINVAL, "mount flag %zu is missing", i);
		total += strnlen(u->mount_flags[i], MOUNTER_MAP_MAX_BYTES + 1);
		if (total > MOUNTER_MAP_MAX_BYTES)
			return err_set(e, CSID_EINVAL, "mount flags are longer than %d bytes",
				       MOUNTER_MAP_MAX_BYTES);
	}
	if (u->attachment == MOUNT_ATTACH_BLOCK_DEVICE &&
	    ((u->fs_type && u->fs_type[0]) || u->n_mount_flags > 0))
		return err_set(e, CSID_EINVAL,
			       "a block-device attachment takes no fs type or "
			       "mount flags");
	rc = mounter_check_map("volume context", req->volume_context, req->n_volume_context, e);
	if (rc == 0)
		rc = mounter_check_map("publish context", req->publish_context,
				       req->n_publish_context, e);
	if (rc == 0)
		rc = mounter_check_map("secrets", req->secrets, req->n_secrets, e);
	return rc;
}

/* JSON text of a map (for the record), or NULL when out of memory or not UTF-8. */
static char *mounter_map_json(const struct mount_kv *kv, size_t n)
{
	json_t *o = json_object();
	char *s = NULL;

	if (o == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++)
		if (json_object_set_new(o, kv[i].key, json_string(kv[i].value)) != 0)
			goto out;
	s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
out:
	json_decref(o);
	return s;
}

/* The record (state new) that req would create, with its paths. */
static int mounter_record_new(struct mounter *m, const struct mounter_plugin *p,
			      const struct mounter_request *req, struct mount_record **out,
			      struct err *e)
{
	struct mount_record *r = calloc(1, sizeof(*r));
	char path[MOUNTER_PATH_MAX];
	int rc;

	if (r == NULL)
		return err_set(e, CSID_ENOMEM, "mounter: out of memory");
	r->state = MOUNT_STATE_NEW;
	r->read_only = req->usage.read_only;
	r->claimed = req->claimed;
	r->attachment = req->usage.attachment;
	r->access = req->usage.access;
	mount_usage_options_hash(&req->usage, r->options_hash);
	r->volume_id = strdup(req->volume_id);
	r->alloc_id = strdup(req->alloc_id);
	r->plugin_id = strdup(req->plugin_id);
	r->external_id = strdup(req->external_id);
	r->fs_type = strdup(req->usage.fs_type ? req->usage.fs_type : "");
	rc = mount_target_path(m->data_dir, req->alloc_id, req->volume_id, &req->usage, path,
			       sizeof(path), e);
	if (rc == 0)
		r->target_path = strdup(path);
	if (rc == 0 && p->has_stage_unstage) {
		rc = mount_staging_path(m->data_dir, req->plugin_id, req->volume_id, &req->usage,
					path, sizeof(path), e);
		if (rc == 0 && (r->staging_path = strdup(path)) == NULL)
			rc = CSID_ENOMEM;
	}
	if (rc != 0)
		goto fail;
	r->publish_context = mounter_map_json(req->publish_context, req->n_publish_context);
	r->volume_context = mounter_map_json(req->volume_context, req->n_volume_context);
	if (!r->publish_context || !r->volume_context) {
		rc = err_set(e, CSID_EINVAL, "volume or publish context is not valid UTF-8");
		goto fail;
	}
	if (!r->volume_id || !r->alloc_id || !r->plugin_id || !r->external_id || !r->fs_type ||
	    !r->target_path) {
		rc = err_set(e, CSID_ENOMEM, "mounter: out of memory");
		goto fail;
	}
	*out = r;
	return 0;
fail:
	if (rc == CSID_ENOMEM && e != NULL && e->code != CSID_ENOMEM)
		err_set(e, CSID_ENOMEM, "mounter: out of memory");
	mount_record_free(r);
	return rc;
}

/* Logs msg about record r ("mount=<volume>/<alloc> state=..."), with error when not NULL. */
void mounter_log(enum log_level level, const char *msg, const struct mount_record *r,
		 const char *error)
{
	char id[2 * MOUNT_NAME_MAX + 2];
	char qid[4 * MOUNT_NAME_MAX + 8];
	char qerr[2 * ERR_MSG_MAX];

	snprintf(id, sizeof(id), "%s/%s", r->volume_id, r->alloc_id);
	log_msg(level, "msg=\"%s\" mount=%s state=%s%s%s", msg, log_q(qid, sizeof(qid), id),
		mount_state_name(r->state), error ? " error=" : "",
		error ? log_q(qerr, sizeof(qerr), error) : "");
}

/*
 * Rolls back a failed mount, a mounting record first to from (the state
 * that what failed says it is in); the original error in e is kept, a
 * rollback failure logged. A rollback that is done also removes the target's
 * parent (per-alloc/<alloc>/<volume>) and, when empty, the allocation's
 * directory: nothing of a mount that failed stays on the node.
 */
static void mounter_rollback(struct mounter *m, const struct mounter_plugin *p,
			     struct mount_record *r, enum mount_state from)
{
	struct err re;

	err_clear(&re);
	/* What this call saw first; when that write fails, mounter_down goes the long way. */
	if (r->state == MOUNT_STATE_MOUNTING)
		mount_store_transition(m->store, r, from, &re);
	err_clear(&re);
	if (mounter_down(m, p, r, &re) != 0) {
		mounter_log(LOG_WARN, "mount rollback incomplete, left for retry", r, re.msg);
		return;
	}
	mounter_dir_remove_parent(m, r->target_path);
}

/* Creates the directories, records the mount and sends stage and publish. */
static int mounter_up(struct mounter *m, const struct mounter_plugin *p,
		      const struct mounter_request *req, struct mount_record *r, struct err *e)
{
	char parent[MOUNTER_PATH_MAX];
	char *slash;
	int users = 0, staged = 0;
	int rc = 0;

	/* CSI: the CO creates the staging directory and only the target's parent. */
	if (r->staging_path != NULL)
		rc = mounter_mkdir(m, r->staging_path, e);
	snprintf(parent, sizeof(parent), "%s", r->target_path);
	slash = strrchr(parent, '/');
	if (slash != NULL)
		*slash = '\0';
	if (rc == 0)
		rc = mounter_mkdir(m, parent, e);
	if (rc == 0 && r->staging_path != NULL)
		rc = mount_store_stage_users(m->store, r->staging_path, r->alloc_id, &users,
					     &staged, e);
	if (rc != 0)
		return rc;
	/* The intent: the reference on the staging path (this row) is taken before staging. */
	rc = mount_store_transition(m->store, r,
				    (r->staging_path != NULL && staged == 0)
					? MOUNT_STATE_MOUNTING
					: MOUNT_STATE_PUBLISHING,
				    e);
	if (rc != 0)
		return rc;
	if (r->state == MOUNT_STATE_MOUNTING) {
		rc = mount_rpc_stage(p, m->timeout_ms, r, req, e);
		if (rc != 0) {
			mounter_rollback(m, p, r, MOUNT_STATE_UNSTAGING_UNCONFIRMED);
			return rc;
		}
	}
	rc = mount_rpc_publish(p, m->timeout_ms, r, req, e);
	if (rc != 0) {
		mounter_rollback(m, p, r, MOUNT_STATE_UNPUBLISHING);
		return rc;
	}
	/* The result. */
	return mount_store_transition(m->store, r, MOUNT_STATE_PUBLISHED, e);
}

static bool mounter_same_usage(const struct mount_record *r, const struct mounter_request *req)
{
	char hash[17];

	mount_usage_options_hash(&req->usage, hash);
	return r->read_only == req->usage.read_only && r->attachment == req->usage.attachment &&
	       r->access == req->usage.access && strcmp(r->options_hash, hash) == 0 &&
	       strcmp(r->external_id, req->external_id) == 0 &&
	       strcmp(r->plugin_id, req->plugin_id) == 0;
}

static void mounter_fill_result(const struct mount_record *r, struct mounter_result *res)
{
	snprintf(res->source, sizeof(res->source), "%s",
		 r->staging_path ? r->staging_path : r->target_path);
	snprintf(res->target, sizeof(res->target), "%s", r->target_path);
	res->is_device = r->attachment == MOUNT_ATTACH_BLOCK_DEVICE;
}

int mounter_lock_record(struct mounter *m, const char *volume_id, const char *alloc_id,
			struct mounter_vlock **v, struct mount_record **r, struct err *e)
{
	int rc;

	*v = NULL;
	*r = NULL;
	rc = mount_name_check("volume id", volume_id, e);
	if (rc == 0)
		rc = mount_name_check("alloc id", alloc_id, e);
	if (rc == 0)
		rc = mounter_lock(m, volume_id, v, e);
	if (rc == 0)
		rc = mount_store_get(m->store, volume_id, alloc_id, r, e);
	return rc;
}

/* Checks that p is the plugin r was mounted through. */
int mounter_check_owner(const struct mount_record *r, const struct mounter_plugin *p, struct err *e)
{
	if (p == NULL || p->client == NULL || p->plugin_id == NULL)
		return err_set(e, CSID_EINVAL, "no node plugin given");
	if (strcmp(r->plugin_id, p->plugin_id) != 0)
		return err_set(e, CSID_EINVAL, "volume %s was mounted through plugin %s, not %s",
			       r->volume_id, r->plugin_id, p->plugin_id);
	return 0;
}

/*
 * One volume, one plugin volume: every other allocation's record of
 * req's volume (staged, published, or on its way down) must name the
 * same plugin and external ID, else the last unmount would unstage one
 * plugin volume with the ID of another. Returns 0 with *own, the
 * allocation's own record taken from the same read (NULL: none), or
 * CSID_ECONFLICT naming both IDs.
 */
static int mounter_check_same_volume(struct mounter *m, const struct mounter_request *req,
				     struct mount_record **own, struct err *e)
{
	struct mount_record **rs = NULL;
	size_t n = 0;
	int rc;

	*own = NULL;
	rc = mount_store_list(m->store, req->volume_id, &rs, &n, e);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		const struct mount_record *o = rs[i];

		if (strcmp(o->alloc_id, req->alloc_id) == 0) {
			*own = rs[i];
			rs[i] = NULL;
			continue;
		}
		if (strcmp(o->plugin_id, req->plugin_id) == 0 &&
		    strcmp(o->external_id, req->external_id) == 0)
			continue;
		rc = err_set(e, CSID_ECONFLICT,
			     "volume %s is mounted through plugin %s as external id \"%.128s\" "
			     "(alloc %s), not plugin %s external id \"%.128s\"",
			     req->volume_id, o->plugin_id, o->external_id, o->alloc_id,
			     req->plugin_id, req->external_id);
	}
	mount_records_free(rs, n);
	if (rc) {
		mount_record_free(*own);
		*own = NULL;
	}
	return rc;
}

int mounter_mount(struct mounter *m, const struct mounter_plugin *p,
		  const struct mounter_request *req, struct mounter_result *result, struct err *e)
{
	struct mounter_vlock *v = NULL;
	struct mount_record *r = NULL;
	bool mounted = false;
	int rc;

	rc = mounter_check_request(p, req, e);
	if (rc == 0)
		rc = mounter_lock(m, req->volume_id, &v, e);
	/* The volume's records in one read, this allocation's among them. */
	if (rc == 0)
		rc = mounter_check_same_volume(m, req, &r, e);
	if (rc != 0)
		goto out;
	if (req->had_record != NULL)
		*req->had_record = r != NULL;
	if (r != NULL && r->state == MOUNT_STATE_PUBLISHED) {
		if (!mounter_same_usage(r, req)) {
			rc = err_set(e, CSID_ECONFLICT,
				     "alloc %s already has volume %s mounted with another usage "
				     "(%s-%s-%s)",
				     req->alloc_id, req->volume_id, r->read_only ? "ro" : "rw",
				     mount_attachment_name(r->attachment),
				     mount_access_name(r->access));
			goto out;
		}
		rc = mount_table_is_mounted(m->table, r->target_path, &mounted, e);
		/* Mounted already: the mark follows the front end that asked last. */
		if (rc == 0 && mounted && r->claimed != req->claimed)
			rc = mount_store_set_claimed(m->store, r, req->claimed, e);
		if (rc != 0 || mounted)
			goto out;
		mounter_log(LOG_WARN, "recorded mount is not mounted any more, mounting again", r,
			    NULL);
	}
	if (rc == 0 && r != NULL) {
		/* Finish whatever an earlier call left half done, then start clean. */
		rc = mounter_check_owner(r, p, e);
		if (rc == 0)
			rc = mounter_down(m, p, r, e);
		if (rc != 0) {
			err_wrap(e, "finishing earlier operation on %s/%s", req->volume_id,
				 req->alloc_id);
			goto out;
		}
		mount_record_free(r);
		r = NULL;
	}
	if (rc != 0)
		goto out;
	rc = mounter_record_new(m, p, req, &r, e);
	if (rc == 0)
		rc = mounter_up(m, p, req, r, e);
out:
	if (rc == 0) {
		mounter_fill_result(r, result);
		mounter_log(LOG_INFO, "mounted", r, NULL);
	} else
		err_wrap(e, "mount %s for alloc %s", req->volume_id ? req->volume_id : "?",
			 req->alloc_id ? req->alloc_id : "?");
	mount_record_free(r);
	mounter_unlock(m, v);
	return rc;
}

int mounter_unmount(struct mounter *m, const struct mounter_plugin *p, const char *volume_id,
		    const char *alloc_id, struct err *e)
{
	struct mounter_vlock *v = NULL;
	struct mount_record *r = NULL;
	int rc;

	rc = mounter_lock_record(m, volume_id, alloc_id, &v, &r, e);
	if (rc == 0)
		rc = mounter_check_owner(r, p, e);
	if (rc == 0)
		rc = mounter_down(m, p, r, e);
	if (rc == 0)
		mounter_log(LOG_INFO, "unmounted", r, NULL);
	else
		err_wrap(e, "unmount %s for alloc %s", volume_id ? volume_id : "?",
			 alloc_id ? alloc_id : "?");
	mount_record_free(r);
	mounter_unlock(m, v);
	return rc;
}

int mounter_has_mount(struct mounter *m, const char *volume_id, const char *alloc_id, bool *out,
		      struct err *e)
{
	struct mount_record *r = NULL;
	int rc;

	*out = false;
	rc = mount_name_check("volume id", volume_id, e);
	if (rc == 0)
		rc = mount_name_check("alloc id", alloc_id, e);
	if (rc == 0)
		rc = mount_store_get(m->store, volume_id, alloc_id, &r, e);
	if (rc == CSID_ENOTFOUND) {
		err_clear(e);
		return 0;
	}
	if (rc == 0 && r->state == MOUNT_STATE_PUBLISHED)
		rc = mount_table_is_mounted(m->table, r->target_path, out, e);
	mount_record_free(r);
	return rc;
}

int mounter_get(struct mounter *m, const char *volume_id, const char *alloc_id,
		struct mount_record **out, struct err *e)
{
	int rc;

	*out = NULL;
	rc = mount_name_check("volume id", volume_id, e);
	if (rc == 0)
		rc = mount_name_check("alloc id", alloc_id, e);
	if (rc == 0)
		rc = mount_store_get(m->store, volume_id, alloc_id, out, e);
	return rc;
}

int mounter_list(struct mounter *m, struct mount_record ***out, size_t *n, struct err *e)
{
	return mount_store_list(m->store, NULL, out, n, e);
}

const char *mounter_mounts_dir(const struct mounter *m)
{
	return m->mounts_dir;
}
