/*
 * Private structures and helpers of the volume mounter, shared by
 * mounter.c (open/close, mount, unmount, directory parking),
 * mounter_recover.c (start-up recovery and the sweep) and
 * mounter_force.c (the forced unmount). Not part of the library
 * contract: only those files include it.
 *
 * Ownership: the mounter owns its store, its volume locks and its parked
 * directory names; the mount table is borrowed (from the options, or the
 * process-wide mountinfo table). A volume lock lives while some call holds
 * or waits for it and is freed by the last mounter_unlock.
 */
#ifndef CSID_AGENT_MOUNTER_INT_H
#define CSID_AGENT_MOUNTER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/mounter.h"
#include "util/log.h"

/* A lock per volume, alive while some call holds or waits for it. */
struct mounter_vlock {
	struct mounter_vlock *next;
	char *volume_id;
	int refs;
	pthread_mutex_t mu;
};

struct mounter {
	char data_dir[MOUNTER_PATH_MAX];
	char mounts_dir[MOUNTER_PATH_MAX];
	struct mount_store *store;
	struct mount_table *table;
	int64_t timeout_ms;
	pthread_mutex_t mu; /* guards vlocks and swept */
	struct mounter_vlock *vlocks;
	bool swept; /* the orphan sweep ran */
	pthread_mutex_t dir_mu; /* serializes creating and pruning directories, guards parked */
	char *parked[MOUNTER_PARK_MAX]; /* empty directories kept for reuse, oldest first */
	int n_parked;
};

/*
 * Locks volume_id for the caller (*out, to give to mounter_unlock), waiting
 * while another call holds it. Fails only when out of memory.
 */
int mounter_lock(struct mounter *m, const char *volume_id, struct mounter_vlock **out,
		 struct err *e);
/* Releases a lock from mounter_lock; NULL is a no-op. */
void mounter_unlock(struct mounter *m, struct mounter_vlock *v);

/*
 * Checks the names, locks volume_id (*v) and loads the record of the pair
 * (*r, to free). Returns 0, CSID_EINVAL for a bad name, CSID_ENOTFOUND,
 * or another code; *v may be set even on failure (unlock it).
 */
int mounter_lock_record(struct mounter *m, const char *volume_id, const char *alloc_id,
			struct mounter_vlock **v, struct mount_record **r, struct err *e);
/* Checks that p is a plugin and the one r was mounted through (CSID_EINVAL if not). */
int mounter_check_owner(const struct mount_record *r, const struct mounter_plugin *p,
			struct err *e);

/*
 * Removes the agent-made directory dir (forgetting it if parked) and its
 * empty parents below <mounts>/staging or <mounts>/per-alloc; rmdir only,
 * so content and mount points stay.
 */
void mounter_dir_remove(struct mounter *m, const char *dir);
/* mounter_dir_remove of the directory that holds path (a target's parent). */
void mounter_dir_remove_parent(struct mounter *m, const char *path);

/* Forgets parked directory i without removing it. The caller holds dir_mu. */
void mounter_parked_drop(struct mounter *m, int i);

/*
 * Takes r (held under its volume lock) from any state down to gone through
 * plugin p; on failure r keeps the state it reached, see mounter.c.
 */
int mounter_down(struct mounter *m, const struct mounter_plugin *p, struct mount_record *r,
		 struct err *e);

/* Whether path is p or lies under p. */
bool mounter_under(const char *path, const char *p);

/* Logs msg with r's volume/alloc and state, and error when not NULL. */
void mounter_log(enum log_level level, const char *msg, const struct mount_record *r,
		 const char *error);

#endif
