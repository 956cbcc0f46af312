/*
 * Node service of csi-hostpath. Mount volumes: NodeStageVolume
 * bind-mounts <data>/volumes/<id> onto the staging directory the CO
 * created; NodePublishVolume creates the target directory (the CO only
 * created its parent) and bind-mounts the staging path onto it, then
 * remounts it read-only when asked (readonly, a read-only access mode, or
 * the controller's publish_context). Block volumes: staging creates the
 * file <staging>/block and bind-mounts the volume's backing file onto it;
 * publishing creates the target as a file and bind-mounts <staging>/block
 * onto it. Unpublish and unstage unmount and remove what the plugin
 * created; both are OK when there is nothing left to do.
 *
 * Every stage and target is recorded (node, volume, path, arguments), so
 * repeated calls are answered from the record: the same arguments are OK,
 * others ALREADY_EXISTS, and a second target for a volume whose access
 * mode allows one workload only is FAILED_PRECONDITION (the table of
 * spec §NodePublishVolume; SINGLE_NODE_MULTI_WRITER and MULTI_NODE_*
 * allow several targets). The mount comes before its record: after a
 * crash between the two, the retried call finds a mount but no record,
 * unmounts it and starts again.
 */
#include "hp_node.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "hp_store.h"
#include "hp_valid.h"
#include "util/log.h"

#define HP_OOM(msg) hp_fail(msg, CSI_RESOURCE_EXHAUSTED, "out of memory")
#define HP_BLOCK_NAME "block"

/* Where the volume is mounted for a stage: the staging dir, or <staging>/block. */
static void hp_node_stage_point(const char *staging, bool block, char *buf, size_t len)
{
	if (block)
		snprintf(buf, len, "%s/" HP_BLOCK_NAME, staging);
	else
		snprintf(buf, len, "%s", staging);
}

static bool hp_node_key_block(const char *key)
{
	return strncmp(key, "block:", 6) == 0;
}

/* Unmounts a mount point; not mounted or missing is fine. */
static int hp_node_umount(struct hp_plugin *p, const char *path, char *msg)
{
	int rc = p->ops->umount(p->ops_ctx, path);

	if (rc == 0 || rc == -EINVAL || rc == -ENOENT)
		return 0;
	return hp_fail(msg, CSI_INTERNAL, "unmount: %s", strerror(-rc));
}

/*
 * Whether path is a mount of volume vol's backing store (its mount root
 * ends in /volumes/<vol>): a mount the plugin made but may not have
 * recorded. Anything else mounted there is never touched.
 */
static bool hp_node_ours(struct hp_plugin *p, const char *path, const char *vol)
{
	char root[HP_PATH_MAX], suffix[HP_ID_MAX + 16];
	size_t rl, sl;

	if (!p->ops->is_mount(p->ops_ctx, path) ||
	    p->ops->mount_root(p->ops_ctx, path, root, sizeof(root)) != 0)
		return false;
	snprintf(suffix, sizeof(suffix), "/volumes/%s", vol);
	rl = strlen(root);
	sl = strlen(suffix);
	return rl >= sl && strcmp(root + rl - sl, suffix) == 0;
}

/* Unmounts path when it is an unrecorded mount of vol left by a crash. */
static int hp_node_clear(struct hp_plugin *p, const char *path, const char *vol, char *msg)
{
	if (!p->ops->is_mount(p->ops_ctx, path))
		return 0;
	if (!hp_node_ours(p, path, vol))
		return hp_fail(msg, CSI_FAILED_PRECONDITION,
			       "something else is mounted at the path given for volume %s", vol);
	return hp_node_umount(p, path, msg);
}

/* Bind-mounts src on point, first clearing a mount of vol left by a crash. */
static int hp_node_bind(struct hp_plugin *p, const char *vol, const char *src, const char *point,
			unsigned long flags, char *msg)
{
	int rc;

	if ((rc = hp_node_clear(p, point, vol, msg)))
		return rc;
	rc = p->ops->bind(p->ops_ctx, src, point, flags);
	if (rc)
		return hp_fail(msg, CSI_INTERNAL, "bind mount: %s", strerror(-rc));
	return 0;
}

static int hp_node_check_common(struct hp_plugin *p, const char *vol, const char *path,
				const char *what, char *msg)
{
	int rc = hp_valid_id(vol, "volume_id", msg);

	return rc ? rc : hp_valid_path(path, what, p->data_dir, msg);
}

/*
 * Checks the three maps NodeStage and NodePublish requests share
 * (publish_context, secrets, volume_context); r is either request type.
 */
#define hp_node_check_maps(r, msg)                                                \
	hp_node_maps((void *const *)(r)->publish_context, (r)->n_publish_context, \
		     (void *const *)(r)->volume_context, (r)->n_volume_context,   \
		     (void *const *)(r)->secrets, (r)->n_secrets, msg)

static int hp_node_maps(void *const *pc, size_t npc, void *const *vc, size_t nvc, void *const *sec,
			size_t nsec, char *msg)
{
	int rc = hp_valid_map(pc, npc, "publish_context", msg);

	if (!rc)
		rc = hp_valid_map(vc, nvc, "volume_context", msg);
	if (!rc)
		rc = hp_valid_map(sec, nsec, "secrets", msg);
	return rc;
}

/*
 * With --require-stage-secret: whether NodeStageVolume's secrets hold that
 * key with a value, so a test can tell the CO passed the volume's secrets.
 * A missing one is a required field missing: INVALID_ARGUMENT, naming the
 * key, never a value.
 */
static int hp_node_stage_secret(const struct hp_plugin *p, const Csi__V1__NodeStageVolumeRequest *r,
				char *msg)
{
	if (!p->require_stage_secret[0])
		return 0;
	for (size_t i = 0; i < r->n_secrets; i++)
		if (r->secrets[i]->key &&
		    strcmp(r->secrets[i]->key, p->require_stage_secret) == 0 &&
		    r->secrets[i]->value && r->secrets[i]->value[0])
			return 0;
	return hp_fail(msg, CSI_INVALID_ARGUMENT, "secrets: the key %s is required to stage",
		       p->require_stage_secret);
}

HP_CTL_HANDLER(hp_node_stage)
{
	const Csi__V1__NodeStageVolumeRequest *r = req;
	char src[HP_PATH_MAX + 64], point[HP_PATH_MAX + 16], key[128];
	struct hp_mnt *m = arena_alloc(a, sizeof(*m));
	struct hp_pub pub;
	struct hp_vol v;
	struct err e;
	bool block = false;
	int rc;

	if (!m)
		return HP_OOM(msg);
	if ((rc = hp_node_check_common(p, r->volume_id, r->staging_target_path,
				       "staging_target_path", msg)) ||
	    (rc = hp_valid_cap(r->volume_capability, "volume_capability", &block, msg)) ||
	    (rc = hp_node_check_maps(r, msg)) || (rc = hp_node_stage_secret(p, r, msg)) ||
	    (rc = hp_ctl_get_volume_row(p, r->volume_id, &v, msg)))
		return rc;
	if (block != v.block)
		return hp_fail(msg, CSI_FAILED_PRECONDITION, "volume %s is a %s volume", v.id,
			       v.block ? "block" : "mount");
	if (p->controller_publish) {
		rc = hp_store_pub_get(p->store, v.id, p->node_id, &pub, &e);
		if (rc == CSID_ENOTFOUND)
			return hp_fail(msg, CSI_FAILED_PRECONDITION,
				       "volume %s is not published to node %s; call"
				       " ControllerPublishVolume first",
				       v.id, p->node_id);
		if (rc)
			return hp_ctl_store_fail(&e, msg);
	}
	hp_volume_path(p, v.id, src, sizeof(src));
	hp_node_stage_point(r->staging_target_path, block, point, sizeof(point));
	hp_cap_key(r->volume_capability, key, sizeof(key));
	rc = hp_store_stage_get(p->store, p->node_id, v.id, m, &e);
	if (rc == 0) {
		if (strcmp(m->path, r->staging_target_path) != 0)
			return hp_fail(msg, CSI_FAILED_PRECONDITION,
				       "volume %s is already staged at another path", v.id);
		if (strcmp(m->cap, key) != 0)
			return hp_fail(msg, CSI_ALREADY_EXISTS,
				       "volume %s is staged here with another capability", v.id);
		/* Same stage: repair the mount if it vanished (e.g. after a reboot). */
		if (p->ops->is_mount(p->ops_ctx, point))
			return CSI_OK;
		if (block && p->ops->kind(p->ops_ctx, point) == HP_PATH_NONE &&
		    (rc = p->ops->mkfile(p->ops_ctx, point)))
			return hp_fail(msg, CSI_INTERNAL, "create %s: %s", HP_BLOCK_NAME,
				       strerror(-rc));
		return hp_node_bind(p, v.id, src, point, 0, msg);
	}
	if (rc != CSID_ENOTFOUND)
		return hp_ctl_store_fail(&e, msg);
	if (p->ops->kind(p->ops_ctx, r->staging_target_path) != HP_PATH_DIR)
		return hp_fail(msg, CSI_FAILED_PRECONDITION,
			       "staging_target_path is not an existing directory");
	if (block) {
		rc = p->ops->mkfile(p->ops_ctx, point);
		if (rc && !(rc == -EEXIST && p->ops->kind(p->ops_ctx, point) == HP_PATH_FILE))
			return hp_fail(msg, CSI_INTERNAL, "create %s: %s", HP_BLOCK_NAME,
				       strerror(-rc));
	}
	rc = hp_node_bind(p, v.id, src, point, 0, msg);
	if (rc) {
		if (block)
			p->ops->remove(p->ops_ctx, point);
		return rc;
	}
	snprintf(m->node_id, sizeof(m->node_id), "%s", p->node_id);
	snprintf(m->volume_id, sizeof(m->volume_id), "%s", v.id);
	snprintf(m->path, sizeof(m->path), "%s", r->staging_target_path);
	m->staging[0] = '\0';
	m->readonly = false;
	m->mode = (int)r->volume_capability->access_mode->mode;
	snprintf(m->cap, sizeof(m->cap), "%s", key);
	if (hp_store_stage_put(p->store, m, &e) != 0) {
		p->ops->umount(p->ops_ctx, point);
		if (block)
			p->ops->remove(p->ops_ctx, point);
		return hp_ctl_store_fail(&e, msg);
	}
	log_info("msg=\"volume staged\" volume=%s", v.id);
	return CSI_OK;
}

HP_CTL_HANDLER(hp_node_unstage)
{
	const Csi__V1__NodeUnstageVolumeRequest *r = req;
	char point[HP_PATH_MAX + 16];
	struct hp_mnt *m = arena_alloc(a, sizeof(*m));
	struct hp_vol v;
	struct err e;
	int rc;

	if (!m)
		return HP_OOM(msg);
	if ((rc = hp_node_check_common(p, r->volume_id, r->staging_target_path,
				       "staging_target_path", msg)))
		return rc;
	rc = hp_store_stage_get(p->store, p->node_id, r->volume_id, m, &e);
	if (rc && rc != CSID_ENOTFOUND)
		return hp_ctl_store_fail(&e, msg);
	if (rc == CSID_ENOTFOUND) {
		if ((rc = hp_ctl_get_volume_row(p, r->volume_id, &v, msg)))
			return rc;
		/* Not staged; clear a mount a crash may have left behind. */
		for (int b = 0; b < 2; b++) {
			hp_node_stage_point(r->staging_target_path, b, point, sizeof(point));
			if ((rc = hp_node_clear(p, point, v.id, msg)))
				return rc;
			if (b)
				p->ops->remove(p->ops_ctx, point); /* only if an empty file */
		}
		return CSI_OK;
	}
	if (strcmp(m->path, r->staging_target_path) != 0)
		return CSI_OK; /* staged elsewhere, not at this path */
	hp_node_stage_point(m->path, hp_node_key_block(m->cap), point, sizeof(point));
	if ((rc = hp_node_umount(p, point, msg)))
		return rc;
	if (hp_node_key_block(m->cap)) {
		rc = p->ops->remove(p->ops_ctx, point);
		if (rc && rc != -ENOENT)
			log_warn("msg=\"cannot remove block staging file\" volume=%s error=%d",
				 m->volume_id, -rc);
	}
	if (hp_store_stage_delete(p->store, p->node_id, m->volume_id, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	log_info("msg=\"volume unstaged\" volume=%s", m->volume_id);
	return CSI_OK;
}

struct hp_node_others {
	const char *target;
	int mode;
	char other[HP_PATH_MAX];
};

/* Modes under which one node may publish a volume at several targets. */
static bool hp_node_multi_target(int mode)
{
	return hp_mode_multi_node(mode) ||
	       mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER;
}

static int hp_node_others_check(void *ctx, const struct hp_mnt *m)
{
	struct hp_node_others *o = ctx;

	if (strcmp(m->path, o->target) == 0)
		return 0;
	if (!hp_node_multi_target(o->mode) || !hp_node_multi_target(m->mode)) {
		snprintf(o->other, sizeof(o->other), "%s", m->path);
		return 1;
	}
	return 0;
}

/* Whether the parent directory of path exists. */
static bool hp_node_parent_exists(struct hp_plugin *p, const char *path)
{
	char parent[HP_PATH_MAX];
	char *slash;

	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (!slash)
		return false;
	if (slash == parent)
		return true;
	*slash = '\0';
	return p->ops->kind(p->ops_ctx, parent) == HP_PATH_DIR;
}

/* Creates the publish target; *created tells whether the plugin made it. */
static int hp_node_make_target(struct hp_plugin *p, const char *target, bool block, bool *created,
			       char *msg)
{
	enum hp_path_kind want = block ? HP_PATH_FILE : HP_PATH_DIR;
	int rc;

	*created = false;
	if (!hp_node_parent_exists(p, target))
		return hp_fail(msg, CSI_FAILED_PRECONDITION,
			       "the parent directory of target_path does not exist");
	rc = block ? p->ops->mkfile(p->ops_ctx, target) : p->ops->mkdir(p->ops_ctx, target);
	if (rc == 0) {
		*created = true;
		return 0;
	}
	if (rc == -EEXIST && p->ops->kind(p->ops_ctx, target) == want)
		return 0;
	if (rc == -EEXIST)
		return hp_fail(msg, CSI_FAILED_PRECONDITION, "target_path exists and is not a %s",
			       block ? "file" : "directory");
	return hp_fail(msg, CSI_INTERNAL, "create target_path: %s", strerror(-rc));
}

HP_CTL_HANDLER(hp_node_publish)
{
	const Csi__V1__NodePublishVolumeRequest *r = req;
	char src[HP_PATH_MAX + 16];
	struct hp_mnt *m = arena_alloc(a, sizeof(*m)), *st = arena_alloc(a, sizeof(*st));
	struct hp_node_others *o = arena_alloc(a, sizeof(*o));
	const char *ctx_ro;
	unsigned long flags;
	bool block, created, staged;
	struct hp_vol v;
	struct err e;
	int rc;

	if (!m || !st || !o)
		return HP_OOM(msg);
	/* Every INVALID_ARGUMENT first, then NOT_FOUND, then FAILED_PRECONDITION. */
	staged = r->staging_target_path && *r->staging_target_path;
	if ((rc = hp_node_check_common(p, r->volume_id, r->target_path, "target_path", msg)) ||
	    (staged && (rc = hp_valid_path(r->staging_target_path, "staging_target_path",
					   p->data_dir, msg))) ||
	    (rc = hp_valid_cap(r->volume_capability, "volume_capability", &block, msg)) ||
	    (rc = hp_node_check_maps(r, msg)))
		return rc;
	if (staged && strcmp(r->staging_target_path, r->target_path) == 0)
		return hp_fail(msg, CSI_INVALID_ARGUMENT,
			       "target_path must differ from staging_target_path");
	if ((rc = hp_ctl_get_volume_row(p, r->volume_id, &v, msg)))
		return rc;
	/* Spec: FAILED_PRECONDITION when STAGE_UNSTAGE_VOLUME is set and no staging path. */
	if (!staged)
		return hp_fail(
		    msg, CSI_FAILED_PRECONDITION,
		    "staging_target_path is required: the plugin has STAGE_UNSTAGE_VOLUME");
	if (block != v.block)
		return hp_fail(msg, CSI_FAILED_PRECONDITION, "volume %s is a %s volume", v.id,
			       v.block ? "block" : "mount");
	rc = hp_store_stage_get(p->store, p->node_id, v.id, st, &e);
	if (rc && rc != CSID_ENOTFOUND)
		return hp_ctl_store_fail(&e, msg);
	if (rc || strcmp(st->path, r->staging_target_path) != 0)
		return hp_fail(msg, CSI_FAILED_PRECONDITION,
			       "volume %s is not staged at staging_target_path", v.id);
	ctx_ro =
	    hp_map_get((void *const *)r->publish_context, r->n_publish_context, HP_CTX_READONLY);
	memset(m, 0, sizeof(*m));
	m->readonly = r->readonly || (ctx_ro && strcmp(ctx_ro, "true") == 0) ||
		      hp_mode_read_only((int)r->volume_capability->access_mode->mode);
	m->mode = (int)r->volume_capability->access_mode->mode;
	hp_cap_key(r->volume_capability, m->cap, sizeof(m->cap));
	flags = hp_cap_mount_flags(r->volume_capability) | (m->readonly ? MS_RDONLY : 0);
	hp_node_stage_point(r->staging_target_path, block, src, sizeof(src));

	rc = hp_store_mount_get(p->store, r->target_path, st, &e);
	if (rc == 0) {
		if (strcmp(st->volume_id, v.id) != 0)
			return hp_fail(msg, CSI_ALREADY_EXISTS,
				       "target_path is in use by volume %s", st->volume_id);
		if (strcmp(st->staging, r->staging_target_path) != 0 ||
		    st->readonly != m->readonly || strcmp(st->cap, m->cap) != 0)
			return hp_fail(msg, CSI_ALREADY_EXISTS,
				       "volume %s is published at target_path with other arguments",
				       v.id);
		if (p->ops->is_mount(p->ops_ctx, r->target_path))
			return CSI_OK;
		if ((rc = hp_node_make_target(p, r->target_path, block, &created, msg)))
			return rc;
		return hp_node_bind(p, v.id, src, r->target_path, flags, msg);
	}
	if (rc != CSID_ENOTFOUND)
		return hp_ctl_store_fail(&e, msg);
	o->target = r->target_path;
	o->mode = m->mode;
	o->other[0] = '\0';
	rc = hp_store_mount_list(p->store, p->node_id, v.id, hp_node_others_check, o, &e);
	if (rc < 0)
		return hp_ctl_store_fail(&e, msg);
	if (o->other[0])
		return hp_fail(msg, CSI_FAILED_PRECONDITION,
			       "volume %s is already published at another target and its access"
			       " mode allows only one",
			       v.id);
	if ((rc = hp_node_make_target(p, r->target_path, block, &created, msg)))
		return rc;
	if ((rc = hp_node_bind(p, v.id, src, r->target_path, flags, msg))) {
		if (created)
			p->ops->remove(p->ops_ctx, r->target_path);
		return rc;
	}
	snprintf(m->node_id, sizeof(m->node_id), "%s", p->node_id);
	snprintf(m->volume_id, sizeof(m->volume_id), "%s", v.id);
	snprintf(m->path, sizeof(m->path), "%s", r->target_path);
	snprintf(m->staging, sizeof(m->staging), "%s", r->staging_target_path);
	if (hp_store_mount_put(p->store, m, &e) != 0) {
		p->ops->umount(p->ops_ctx, r->target_path);
		if (created)
			p->ops->remove(p->ops_ctx, r->target_path);
		return hp_ctl_store_fail(&e, msg);
	}
	log_info("msg=\"volume published\" volume=%s readonly=%d", v.id, m->readonly);
	return CSI_OK;
}

HP_CTL_HANDLER(hp_node_unpublish)
{
	const Csi__V1__NodeUnpublishVolumeRequest *r = req;
	struct hp_mnt *m = arena_alloc(a, sizeof(*m));
	struct hp_vol v;
	struct err e;
	int rc;

	if (!m)
		return HP_OOM(msg);
	if ((rc = hp_node_check_common(p, r->volume_id, r->target_path, "target_path", msg)))
		return rc;
	rc = hp_store_mount_get(p->store, r->target_path, m, &e);
	if (rc && rc != CSID_ENOTFOUND)
		return hp_ctl_store_fail(&e, msg);
	if (rc == 0 && strcmp(m->volume_id, r->volume_id) != 0)
		return CSI_OK; /* another volume's target: this one is not published there */
	if (rc == CSID_ENOTFOUND) {
		if ((rc = hp_ctl_get_volume_row(p, r->volume_id, &v, msg)))
			return rc;
		/* Not recorded: clear what a crash may have left, only if it is ours. */
		if ((rc = hp_node_clear(p, r->target_path, v.id, msg)))
			return rc;
	} else if ((rc = hp_node_umount(p, r->target_path, msg))) {
		return rc;
	}
	rc = p->ops->remove(p->ops_ctx, r->target_path);
	if (rc && rc != -ENOENT)
		log_warn("msg=\"cannot remove target\" volume=%s error=%d", r->volume_id, -rc);
	if (hp_store_mount_delete(p->store, r->target_path, &e) != 0)
		return hp_ctl_store_fail(&e, msg);
	log_info("msg=\"volume unpublished\" volume=%s", r->volume_id);
	return CSI_OK;
}

/*
 * Checks that path is a live stage or publish target of volume v; *point
 * gets the mount point to look at. NOT_FOUND otherwise.
 */
static int hp_node_owned(struct hp_plugin *p, const struct hp_vol *v, const char *path,
			 struct hp_mnt *m, char *point, size_t plen, char *msg)
{
	struct err e;
	int rc;

	snprintf(point, plen, "%s", path);
	rc = hp_store_mount_get(p->store, path, m, &e);
	if (rc == 0 && strcmp(m->volume_id, v->id) == 0 && strcmp(m->node_id, p->node_id) == 0)
		goto check;
	if (rc && rc != CSID_ENOTFOUND)
		return hp_ctl_store_fail(&e, msg);
	rc = hp_store_stage_get(p->store, p->node_id, v->id, m, &e);
	if (rc && rc != CSID_ENOTFOUND)
		return hp_ctl_store_fail(&e, msg);
	if (rc == 0 && strcmp(m->path, path) == 0) {
		hp_node_stage_point(path, v->block, point, plen);
		goto check;
	}
	return hp_fail(msg, CSI_NOT_FOUND, "volume %s is not staged or published at that path",
		       v->id);
check:
	if (!p->ops->is_mount(p->ops_ctx, point))
		return hp_fail(msg, CSI_NOT_FOUND, "volume %s is no longer mounted at that path",
			       v->id);
	return 0;
}

/*
 * The required fields of NodeGetVolumeStats and NodeExpandVolume: an empty
 * volume_id or volume_path is INVALID_ARGUMENT; nothing else is checked.
 */
static int hp_node_path_required(const char *vol, const char *path, char *msg)
{
	if (!vol || !*vol)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "volume_id is required");
	if (!path || !*path)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "volume_path is required");
	return 0;
}

/*
 * Finds the volume of NodeGetVolumeStats or NodeExpandVolume and where it
 * is mounted. The spec's error tables of both RPCs answer NOT_FOUND for
 * "volume not found at volume_path", so a malformed volume ID (it cannot
 * exist) and a volume_path or staging_target_path at which the volume
 * cannot be staged or published (relative, inside the data dir, not
 * clean, missing, another volume's) are all NOT_FOUND, never
 * INVALID_ARGUMENT. Call hp_node_path_required first.
 */
static int hp_node_locate(struct hp_plugin *p, const char *vol, const char *path,
			  const char *staging, struct hp_vol *v, struct hp_mnt *m, char *point,
			  size_t plen, char *msg)
{
	char why[CSI_STATUS_MSG_MAX];
	int rc;

	if (hp_valid_id(vol, "volume_id", why) != 0)
		return hp_fail(msg, CSI_NOT_FOUND, "no such volume: %s", why);
	if ((rc = hp_ctl_get_volume_row(p, vol, v, msg)))
		return rc;
	if (hp_valid_path(path, "volume_path", p->data_dir, why) != 0 ||
	    (staging && *staging &&
	     hp_valid_path(staging, "staging_target_path", p->data_dir, why) != 0))
		return hp_fail(msg, CSI_NOT_FOUND, "volume %s is not staged or published there: %s",
			       v->id, why);
	return hp_node_owned(p, v, path, m, point, plen, msg);
}

static Csi__V1__VolumeUsage *hp_node_usage(struct arena *a, int unit, int64_t total, int64_t avail,
					   int64_t used)
{
	Csi__V1__VolumeUsage *u = arena_alloc(a, sizeof(*u));

	if (!u)
		return NULL;
	csi__v1__volume_usage__init(u);
	u->unit = unit;
	u->total = total;
	u->available = avail;
	u->used = used;
	return u;
}

HP_CTL_HANDLER(hp_node_stats)
{
	const Csi__V1__NodeGetVolumeStatsRequest *r = req;
	Csi__V1__NodeGetVolumeStatsResponse *out = arena_alloc(a, sizeof(*out));
	Csi__V1__VolumeCondition *cond = arena_alloc(a, sizeof(*cond));
	Csi__V1__VolumeUsage **usage = arena_alloc(a, 2 * sizeof(*usage));
	struct hp_mnt *m = arena_alloc(a, sizeof(*m));
	char point[HP_PATH_MAX + 16], backing[HP_PATH_MAX + 64];
	struct hp_fsstats fs;
	struct hp_vol v;
	struct stat sb;
	int rc;

	if (!out || !cond || !usage || !m)
		return HP_OOM(msg);
	if ((rc = hp_node_path_required(r->volume_id, r->volume_path, msg)) ||
	    (rc = hp_node_locate(p, r->volume_id, r->volume_path, r->staging_target_path, &v, m,
				 point, sizeof(point), msg)))
		return rc;
	csi__v1__node_get_volume_stats_response__init(out);
	csi__v1__volume_condition__init(cond);
	if (v.block) {
		usage[0] = hp_node_usage(a, CSI__V1__VOLUME_USAGE__UNIT__BYTES, v.capacity, 0, 0);
		out->n_usage = 1;
	} else {
		rc = p->ops->statfs(p->ops_ctx, point, &fs);
		if (rc)
			return hp_fail(msg, CSI_INTERNAL, "statvfs: %s", strerror(-rc));
		usage[0] = hp_node_usage(a, CSI__V1__VOLUME_USAGE__UNIT__BYTES, fs.bytes_total,
					 fs.bytes_avail, fs.bytes_used);
		usage[1] = hp_node_usage(a, CSI__V1__VOLUME_USAGE__UNIT__INODES, fs.inodes_total,
					 fs.inodes_free, fs.inodes_used);
		out->n_usage = 2;
	}
	for (size_t i = 0; i < out->n_usage; i++)
		if (!usage[i])
			return HP_OOM(msg);
	out->usage = usage;
	/* volume_condition is an alpha_field: only with VOLUME_CONDITION advertised. */
	if (p->enable_alpha) {
		hp_volume_path(p, v.id, backing, sizeof(backing));
		cond->abnormal = lstat(backing, &sb) != 0;
		cond->message =
		    cond->abnormal ? "the volume's backing store is missing" : "healthy";
		out->volume_condition = cond;
	}
	*resp = &out->base;
	return CSI_OK;
}

HP_CTL_HANDLER(hp_node_expand)
{
	const Csi__V1__NodeExpandVolumeRequest *r = req;
	Csi__V1__NodeExpandVolumeResponse *out = arena_alloc(a, sizeof(*out));
	struct hp_mnt *m = arena_alloc(a, sizeof(*m));
	char point[HP_PATH_MAX + 16];
	int64_t rq = 0, lim = 0;
	struct hp_vol v;
	bool block = false;
	int rc;

	if (!out || !m)
		return HP_OOM(msg);
	if ((rc = hp_node_path_required(r->volume_id, r->volume_path, msg)) ||
	    (r->volume_capability &&
	     (rc = hp_valid_cap(r->volume_capability, "volume_capability", &block, msg))) ||
	    (rc = hp_valid_map((void *const *)r->secrets, r->n_secrets, "secrets", msg)) ||
	    (rc = hp_ctl_range(r->capacity_range, &rq, &lim, msg)) ||
	    (rc = hp_node_locate(p, r->volume_id, r->volume_path, r->staging_target_path, &v, m,
				 point, sizeof(point), msg)))
		return rc;
	if ((rq ? rq : lim) > v.capacity)
		return hp_fail(msg, CSI_OUT_OF_RANGE,
			       "volume %s has %lld bytes; expand it on the controller first", v.id,
			       (long long)v.capacity);
	csi__v1__node_expand_volume_response__init(out);
	out->capacity_bytes = v.capacity;
	*resp = &out->base;
	return CSI_OK;
}

HP_CTL_HANDLER(hp_node_caps)
{
	/* The last two are alpha_enum_values of spec v1.12: only with --enable-alpha. */
	static const int types[] = {
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__STAGE_UNSTAGE_VOLUME,
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__GET_VOLUME_STATS,
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__EXPAND_VOLUME,
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__VOLUME_CONDITION,
	    CSI__V1__NODE_SERVICE_CAPABILITY__RPC__TYPE__SINGLE_NODE_MULTI_WRITER,
	};
	size_t n = sizeof(types) / sizeof(types[0]) - (p->enable_alpha ? 0 : 2);
	Csi__V1__NodeGetCapabilitiesResponse *out = arena_alloc(a, sizeof(*out));
	Csi__V1__NodeServiceCapability **caps = arena_alloc(a, n * sizeof(*caps));

	if (!out || !caps)
		return HP_OOM(msg);
	csi__v1__node_get_capabilities_response__init(out);
	for (size_t i = 0; i < n; i++) {
		Csi__V1__NodeServiceCapability *c = arena_alloc(a, sizeof(*c));
		Csi__V1__NodeServiceCapability__RPC *rpc = arena_alloc(a, sizeof(*rpc));

		if (!c || !rpc)
			return HP_OOM(msg);
		csi__v1__node_service_capability__init(c);
		csi__v1__node_service_capability__rpc__init(rpc);
		rpc->type = types[i];
		c->type_case = CSI__V1__NODE_SERVICE_CAPABILITY__TYPE_RPC;
		c->rpc = rpc;
		caps[i] = c;
	}
	out->capabilities = caps;
	out->n_capabilities = n;
	*resp = &out->base;
	return CSI_OK;
}

HP_CTL_HANDLER(hp_node_info)
{
	Csi__V1__NodeGetInfoResponse *out = arena_alloc(a, sizeof(*out));

	if (!out)
		return HP_OOM(msg);
	csi__v1__node_get_info_response__init(out);
	out->node_id = p->node_id;
	out->max_volumes_per_node = p->max_volumes_per_node;
	out->accessible_topology = hp_topology(a, p->node_id);
	if (!out->accessible_topology)
		return HP_OOM(msg);
	*resp = &out->base;
	return CSI_OK;
}
