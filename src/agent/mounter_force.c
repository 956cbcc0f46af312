/*
 * The forced unmount of the volume mounter (mounter_unmount_force): the
 * operator's way out of a mount that a plugin cannot or will not take
 * down (it refuses the volume ID, it is gone, it keeps failing). The
 * RPCs of an ordinary unmount are tried once; whatever they left, the
 * agent undoes itself, on its own paths only:
 *
 *   target        every mount at or under it is unmounted (lazily when
 *                 busy), the target is removed (rmdir, or unlink for the
 *                 file of a block volume), then its empty parents.
 *   staging path  the same, unless another allocation's record names it
 *                 (that one still needs the stage): then it is kept.
 *   record        deleted from whatever state it was in.
 *
 * The report lists every step the plugin did not do and why, every path
 * the agent unmounted itself, and every path it left in place, so the
 * operator knows what may still be attached on the provider's side.
 */
#include "agent/mounter_int.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

static void mounter_force_note(char (*list)[ERR_MSG_MAX], int *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Appends a formatted note to list (ERR_MSG_MAX bytes each) unless it is full. */
static void mounter_force_note(char (*list)[ERR_MSG_MAX], int *n, const char *fmt, ...)
{
	va_list ap;

	if (*n >= MOUNTER_FORCE_NOTES)
		return;
	va_start(ap, fmt);
	vsnprintf(list[*n], ERR_MSG_MAX, fmt, ap);
	va_end(ap);
	(*n)++;
}

/* Unmounts every mount of set at or under dir, deepest first, noting each in rep. */
static int mounter_force_detach(struct mounter *m, const struct mount_set *set, const char *dir,
				struct mounter_force_report *rep, struct err *e)
{
	for (size_t i = set->n; i-- > 0;) {
		const char *path = set->paths[i];
		char q[2 * MOUNTER_PATH_MAX];
		bool lazy = false;
		int rc;

		if (!mounter_under(path, dir))
			continue;
		rc = mount_table_detach(m->table, path, &lazy, e);
		if (rc != 0)
			return rc;
		log_warn("msg=\"forced unmount\" path=%s lazy=%s", log_q(q, sizeof(q), path),
			 lazy ? "yes" : "no");
		if (rep->n_detached < MOUNTER_FORCE_NOTES) {
			snprintf(rep->detached[rep->n_detached], MOUNTER_PATH_MAX, "%s", path);
			rep->lazy[rep->n_detached++] = lazy;
		}
	}
	return 0;
}

/* Takes down what is left at r's target: mounts, the target itself, its empty parents. */
static int mounter_force_target(struct mounter *m, const struct mount_set *set,
				const struct mount_record *r, struct mounter_force_report *rep,
				struct err *e)
{
	int rc;

	rc = mounter_force_detach(m, set, r->target_path, rep, e);
	if (rc != 0)
		return rc;
	/* The plugin made the target: a directory, or a file for a block volume. */
	if (rmdir(r->target_path) != 0 && errno == ENOTDIR)
		unlink(r->target_path);
	if (access(r->target_path, F_OK) == 0)
		mounter_force_note(rep->kept, &rep->n_kept, "target %s: not empty, left in place",
				   r->target_path);
	mounter_dir_remove_parent(m, r->target_path);
	return 0;
}

/* Takes down r's staging path unless another allocation's record still names it. */
static int mounter_force_staging(struct mounter *m, const struct mount_set *set,
				 const struct mount_record *r, struct mounter_force_report *rep,
				 struct err *e)
{
	int users = 0, staged = 0;
	int rc;

	rc = mount_store_stage_users(m->store, r->staging_path, r->alloc_id, &users, &staged, e);
	if (rc != 0)
		return rc;
	if (users > 0) {
		mounter_force_note(rep->kept, &rep->n_kept,
				   "staging path %s: still used by %d other allocation(s)",
				   r->staging_path, users);
		return 0;
	}
	rc = mounter_force_detach(m, set, r->staging_path, rep, e);
	if (rc != 0)
		return rc;
	mounter_dir_remove(m, r->staging_path);
	if (access(r->staging_path, F_OK) == 0)
		mounter_force_note(rep->kept, &rep->n_kept,
				   "staging path %s: not empty, left in place", r->staging_path);
	return 0;
}

int mounter_unmount_force(struct mounter *m, const struct mounter_plugin *p, const char *no_plugin,
			  const char *volume_id, const char *alloc_id,
			  struct mounter_force_report *rep, struct err *e)
{
	struct mounter_vlock *v = NULL;
	struct mount_record *r = NULL;
	struct mount_set set = {NULL, 0};
	struct err de;
	int rc;

	memset(rep, 0, sizeof(*rep));
	rc = mounter_lock_record(m, volume_id, alloc_id, &v, &r, e);
	if (rc == 0 && p != NULL)
		rc = mounter_check_owner(r, p, e);
	if (rc != 0)
		goto out;
	err_clear(&de);
	if (p == NULL) {
		mounter_force_note(rep->skipped, &rep->n_skipped, "node RPCs of %s: %s",
				   r->plugin_id, no_plugin ? no_plugin : "no node plugin");
	} else if (mounter_down(m, p, r, &de) == 0) {
		mounter_log(LOG_INFO, "unmounted", r, NULL);
		goto out;
	} else {
		mounter_force_note(rep->skipped, &rep->n_skipped, "%s", de.msg);
	}
	rep->forced = true;
	mounter_log(LOG_WARN, "forcing unmount without the plugin", r, rep->skipped[0]);
	rc = m->table->load(m->table, &set, e);
	if (rc == 0)
		rc = mounter_force_target(m, &set, r, rep, e);
	if (rc == 0 && r->staging_path != NULL)
		rc = mounter_force_staging(m, &set, r, rep, e);
	if (rc == 0)
		rc = mount_store_forget(m->store, r, e);
out:
	if (rc != 0)
		err_wrap(e, "force unmount %s for alloc %s", volume_id ? volume_id : "?",
			 alloc_id ? alloc_id : "?");
	mount_set_clear(&set);
	mount_record_free(r);
	mounter_unlock(m, v);
	return rc;
}
