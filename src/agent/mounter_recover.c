/*
 * Start-up recovery of the volume mounter (mounter_recover): brings every
 * recorded mount to a settled state after a restart, then, on the first
 * recovery only, sweeps the mounts and directories under <data_dir>/mounts
 * that no record owns. The mount and unmount sequence itself, and the
 * parking of directories, are in mounter.c.
 *
 * Recovery after a restart (kill -9 at any point), per recorded state:
 *   published     target is a mount point: adopted, no RPC. Otherwise the
 *                 mount was lost (reboot, someone unmounted it): taken down
 *                 (unpublish, unstage if last) and the record removed.
 *   mounting,
 *   publishing    target is a mount point: the publish completed (and so
 *                 did the stage before it), adopted as published.
 *                 Otherwise rolled back like a failed mount: mounting
 *                 through unpublishing-unconfirmed (NodeUnpublish, then
 *                 NodeUnstage unless another record holds the stage, as
 *                 for a stage never confirmed), publishing through
 *                 unpublishing.
 *   staging       (an older agent's mount) the stage may or may not have
 *                 happened: rolled back with
 *                 NodeUnstage (idempotent) unless another record holds it.
 *   staged        publish never started: rolled back (unstage if last).
 *   unstaging-unconfirmed, unpublishing-unconfirmed
 *                 a rollback of a stage was under way: finished (a plugin
 *                 refusing the unstage for good is not needed when
 *                 nothing is mounted at the staging path, see mounter_down).
 *   unpublishing, unstaging
 *                 the unmount was under way: finished.
 * NodeStage is never sent during recovery, so what is staged is never
 * staged again, and an interrupted mount is never completed behind the
 * caller's back: the caller, who got no answer, asks again. A record whose
 * plugin cannot be found (or whose RPC fails) stays as it is and is
 * counted as pending. Finally, on the first recovery only, mounts under
 * <data_dir>/mounts that no record owns are detached: they can only come
 * from a lost database or a plugin that reported an unmount it did not do.
 * Only target paths are checked against the mount table: a stage need not
 * create a mount (block volumes, some drivers).
 */
#include "agent/mounter_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

/* A plugin looked up during one recovery, so each is looked up once. */
struct mounter_rplugin {
	char *plugin_id;
	struct mounter_plugin plugin;
	int rc; /* 0 when found */
	struct err err;
};

struct mounter_rctx {
	mounter_lookup_fn lookup;
	mounter_release_fn release;
	void *ctx;
	struct mounter_rplugin *plugins;
	size_t n;
};

static struct mounter_rplugin *mounter_rplugin(struct mounter_rctx *rc, const char *plugin_id)
{
	struct mounter_rplugin *grown;
	struct mounter_rplugin *rp;

	for (size_t i = 0; i < rc->n; i++)
		if (strcmp(rc->plugins[i].plugin_id, plugin_id) == 0)
			return &rc->plugins[i];
	grown = realloc(rc->plugins, (rc->n + 1) * sizeof(*grown));
	if (grown == NULL)
		return NULL;
	rc->plugins = grown;
	rp = &rc->plugins[rc->n];
	memset(rp, 0, sizeof(*rp));
	rp->plugin_id = strdup(plugin_id);
	if (rp->plugin_id == NULL)
		return NULL;
	rc->n++;
	if (rc->lookup == NULL)
		rp->rc = err_set(&rp->err, CSID_EUNAVAIL, "no plugin lookup");
	else
		rp->rc = rc->lookup(rc->ctx, plugin_id, &rp->plugin, &rp->err);
	if (rp->rc == 0 && rp->plugin.client == NULL)
		rp->rc = err_set(&rp->err, CSID_EUNAVAIL, "lookup gave no client");
	if (rp->rc != 0)
		err_wrap(&rp->err, "plugin %s", plugin_id);
	return rp;
}

static void mounter_rctx_free(struct mounter_rctx *rc)
{
	for (size_t i = 0; i < rc->n; i++) {
		if (rc->plugins[i].rc == 0 && rc->release != NULL)
			rc->release(rc->ctx, &rc->plugins[i].plugin);
		free(rc->plugins[i].plugin_id);
	}
	free(rc->plugins);
}

/*
 * Recovers one record (reloaded under its volume lock, since mounter_recover
 * may run while requests are served). mounted: whether the target was in
 * the snapshot of the mount table. Returns 0, or the error that leaves the
 * record pending.
 */
static int mounter_recover_one(struct mounter *m, struct mounter_rctx *rc,
			       const struct mount_record *old, bool mounted,
			       struct mounter_recovery *rep, struct err *e)
{
	struct mounter_vlock *v = NULL;
	struct mount_record *r = NULL;
	struct mounter_rplugin *rp;
	enum mount_state was;
	int ret;

	ret = mounter_lock(m, old->volume_id, &v, e);
	if (ret == 0)
		ret = mount_store_get(m->store, old->volume_id, old->alloc_id, &r, e);
	if (ret == CSID_ENOTFOUND) {
		err_clear(e);
		ret = 0;
		goto out;
	}
	if (ret != 0)
		goto out;
	was = r->state;
	/* Not in the snapshot: look again, a concurrent mount may have finished since. */
	if (!mounted && (was == MOUNT_STATE_PUBLISHED || was == MOUNT_STATE_PUBLISHING ||
			 was == MOUNT_STATE_MOUNTING)) {
		ret = mount_table_is_mounted(m->table, r->target_path, &mounted, e);
		if (ret != 0)
			goto out;
	}
	if (mounted && was == MOUNT_STATE_PUBLISHED) {
		rep->adopted++;
		goto out;
	}
	if (mounted && (was == MOUNT_STATE_PUBLISHING || was == MOUNT_STATE_MOUNTING)) {
		mounter_log(LOG_INFO, "interrupted publish had completed, adopted", r, NULL);
		ret = mount_store_transition(m->store, r, MOUNT_STATE_PUBLISHED, e);
		if (ret == 0)
			rep->adopted++;
		goto out;
	}
	rp = mounter_rplugin(rc, r->plugin_id);
	if (rp == NULL) {
		ret = err_set(e, CSID_ENOMEM, "mounter: out of memory");
		goto out;
	}
	if (rp->rc != 0) {
		ret = rp->rc;
		if (e != NULL)
			*e = rp->err;
		goto out;
	}
	if (was == MOUNT_STATE_PUBLISHED)
		mounter_log(LOG_WARN, "recorded mount is not mounted any more, cleaning up", r,
			    NULL);
	else if (was == MOUNT_STATE_UNPUBLISHING || was == MOUNT_STATE_UNSTAGING)
		mounter_log(LOG_INFO, "finishing interrupted unmount", r, NULL);
	else
		mounter_log(LOG_INFO, "rolling back interrupted mount", r, NULL);
	ret = mounter_down(m, &rp->plugin, r, e);
	if (ret != 0)
		goto out;
	if (was == MOUNT_STATE_PUBLISHED)
		rep->lost++;
	else if (was == MOUNT_STATE_UNPUBLISHING || was == MOUNT_STATE_UNSTAGING)
		rep->finished++;
	else
		rep->rolled_back++;
out:
	if (ret != 0)
		err_wrap(e, "recover mount %s/%s", old->volume_id, old->alloc_id);
	mount_record_free(r);
	mounter_unlock(m, v);
	return ret;
}

bool mounter_under(const char *path, const char *p)
{
	size_t n = strlen(p);

	return strncmp(path, p, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/*
 * Detaches mounts under <data_dir>/mounts that no record owns, deepest
 * first. set was loaded before the records were listed: a record is
 * written before its mount is made, so no mount in set can belong to a
 * record missing from rs.
 */
static int mounter_sweep(struct mounter *m, const struct mount_set *set, struct mount_record **rs,
			 size_t n, struct mounter_recovery *rep, struct err *e)
{
	int ret = 0;

	for (size_t i = set->n; i-- > 0;) {
		const char *path = set->paths[i];
		char q[2 * MOUNTER_PATH_MAX];
		bool owned = false;
		struct err ue;

		if (!mounter_under(path, m->mounts_dir) || strcmp(path, m->mounts_dir) == 0)
			continue;
		for (size_t k = 0; k < n && !owned; k++)
			owned = mounter_under(path, rs[k]->target_path) ||
				(rs[k]->staging_path && mounter_under(path, rs[k]->staging_path));
		if (owned)
			continue;
		log_warn("msg=\"detaching a mount nobody owns\" path=%s",
			 log_q(q, sizeof(q), path));
		err_clear(&ue);
		if (m->table->unmount(m->table, path, &ue) != 0) {
			if (ret == 0 && e != NULL)
				*e = ue;
			ret = ret ? ret : ue.code;
			continue;
		}
		rep->orphans++;
	}
	return ret;
}

static int mounter_strcmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void mounter_strv_free(char **v, size_t n)
{
	for (size_t i = 0; v != NULL && i < n; i++)
		free(v[i]);
	free(v);
}

/*
 * The paths the directory sweep must keep, sorted, as new strings: every
 * record's staging path, target and target parent. NULL when out of memory.
 */
static char **mounter_keep_list(struct mount_record **rs, size_t n, size_t *nk)
{
	char **keep = calloc(3 * n + 1, sizeof(*keep));
	size_t k = 0;
	char *slash;

	*nk = 0;
	for (size_t i = 0; keep != NULL && i < n; i++) {
		if ((keep[k++] = strdup(rs[i]->target_path)) == NULL ||
		    (keep[k++] = strdup(rs[i]->target_path)) == NULL ||
		    (rs[i]->staging_path && (keep[k++] = strdup(rs[i]->staging_path)) == NULL)) {
			mounter_strv_free(keep, k);
			return NULL;
		}
		slash = strrchr(keep[k - (rs[i]->staging_path ? 2 : 1)], '/');
		if (slash != NULL)
			*slash = '\0';
	}
	if (keep != NULL)
		qsort(keep, k, sizeof(*keep), mounter_strcmp);
	*nk = k;
	return keep;
}

/*
 * Removes the empty directories under dir (at depth 0: <mounts>/staging
 * or <mounts>/per-alloc, whose entries are <name>/<volume>/<leaf>) that
 * no path in keep names, deepest first. Leaves (staging paths and
 * targets, possibly mounts of a volume) are never read, only rmdir'ed,
 * which removes neither content nor a mount point nor a file.
 */
static void mounter_sweep_dir(const char *dir, int depth, char *const *keep, size_t nk)
{
	char path[MOUNTER_PATH_MAX];
	struct dirent *de;
	DIR *d;

	if (depth < 3) {
		/* Never through a symbolic link (a file system without d_type). */
		int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		d = fd >= 0 ? fdopendir(fd) : NULL;
		if (d == NULL) {
			if (fd >= 0)
				close(fd);
			return;
		}
		while ((de = readdir(d)) != NULL) {
			int n;

			if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
			    (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN))
				continue;
			n = snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
			if (n > 0 && (size_t)n < sizeof(path))
				mounter_sweep_dir(path, depth + 1, keep, nk);
		}
		closedir(d);
	}
	if (depth > 0) {
		const char *key = dir;

		if (bsearch(&key, keep, nk, sizeof(*keep), mounter_strcmp) == NULL)
			rmdir(dir);
	}
}

/*
 * The directory half of the first recovery's sweep: empty directories an
 * earlier process made and did not remove (parked ones, or those of a
 * crash between an RPC and the pruning) go, except those of a record.
 */
static int mounter_sweep_dirs(struct mounter *m, struct mount_record **rs, size_t n, struct err *e)
{
	char path[MOUNTER_PATH_MAX];
	size_t nk = 0;
	char **keep = mounter_keep_list(rs, n, &nk);

	if (keep == NULL)
		return err_set(e, CSID_ENOMEM, "mounter: out of memory");
	pthread_mutex_lock(&m->dir_mu);
	snprintf(path, sizeof(path), "%s/staging", m->mounts_dir);
	mounter_sweep_dir(path, 0, keep, nk);
	snprintf(path, sizeof(path), "%s/per-alloc", m->mounts_dir);
	mounter_sweep_dir(path, 0, keep, nk);
	/* What recovery parked was swept with the rest. */
	while (m->n_parked > 0)
		mounter_parked_drop(m, m->n_parked - 1);
	pthread_mutex_unlock(&m->dir_mu);
	mounter_strv_free(keep, nk);
	return 0;
}

int mounter_recover(struct mounter *m, mounter_lookup_fn lookup, mounter_release_fn release,
		    void *ctx, struct mounter_recovery *report, struct err *e)
{
	struct mounter_rctx rc = {.lookup = lookup, .release = release, .ctx = ctx};
	struct mounter_recovery rep;
	struct mount_set set = {NULL, 0};
	struct mount_record **rs = NULL;
	size_t n = 0;
	struct err first;
	bool sweep;
	int ret;

	memset(&rep, 0, sizeof(rep));
	err_clear(&first);
	ret = m->table->load(m->table, &set, e);
	if (ret == 0)
		ret = mount_store_list(m->store, NULL, &rs, &n, e);
	if (ret != 0)
		goto out;
	for (size_t i = 0; i < n; i++) {
		struct err one;

		err_clear(&one);
		if (mounter_recover_one(m, &rc, rs[i], mount_set_has(&set, rs[i]->target_path),
					&rep, &one) != 0) {
			char q[ERR_MSG_MAX * 2];

			log_warn("msg=\"mount left pending\" error=%s",
				 log_q(q, sizeof(q), one.msg));
			if (rep.pending++ == 0)
				first = one;
		}
	}
	pthread_mutex_lock(&m->mu);
	sweep = !m->swept;
	m->swept = true;
	pthread_mutex_unlock(&m->mu);
	if (sweep) {
		/* The table again (recovery unmounted things), then the records. */
		mount_records_free(rs, n);
		rs = NULL;
		n = 0;
		mount_set_clear(&set);
		ret = m->table->load(m->table, &set, e);
		if (ret == 0)
			ret = mount_store_list(m->store, NULL, &rs, &n, e);
		if (ret == 0)
			ret = mounter_sweep(m, &set, rs, n, &rep, e);
		if (ret == 0)
			ret = mounter_sweep_dirs(m, rs, n, e);
		if (ret != 0)
			goto out;
	}
	log_info("msg=\"mounts recovered\" adopted=%d rolled_back=%d finished=%d lost=%d "
		 "pending=%d orphans=%d",
		 rep.adopted, rep.rolled_back, rep.finished, rep.lost, rep.pending, rep.orphans);
	if (rep.pending > 0) {
		ret = err_set(e, CSID_EUNAVAIL, "%d mount(s) pending, first: %s", rep.pending,
			      first.msg);
	}
out:
	if (report != NULL)
		*report = rep;
	mount_records_free(rs, n);
	mount_set_clear(&set);
	mounter_rctx_free(&rc);
	return ret;
}
