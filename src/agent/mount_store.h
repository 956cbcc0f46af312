/*
 * Durable mount records of the volume mounter, one row per (volume,
 * allocation) in the agent's SQLite file, and the state machine every
 * record follows. A record is written before and after each node RPC, so
 * after a crash the row says which RPC may have been in flight.
 *
 *   from          allowed next states
 *   new           mounting (stage needed), publishing (no stage, or already
 *                 staged); staging, staged (written by older agents)
 *   mounting      published (OK, or adopted), unstaging-unconfirmed (stage
 *                 failed), unpublishing (stage OK, publish failed),
 *                 unpublishing-unconfirmed (rollback, stage unknown)
 *   staging       publishing (stage OK, publish about to be sent), staged
 *                 (stage OK), unstaging-unconfirmed (stage failed or rolled
 *                 back)
 *   staged        publishing, unstaging (rollback, last user), gone (rollback)
 *   publishing    published (OK, or adopted), unpublishing (failed, rollback)
 *   published     unpublishing (unmount, or target found unmounted)
 *   unpublishing  unstaging (last user of the staging path), gone
 *   unstaging     gone
 *   unstaging-unconfirmed
 *                 gone
 *   unpublishing-unconfirmed
 *                 unstaging-unconfirmed (last user), gone
 *
 * A mount is two commits: the row is inserted as mounting (or publishing)
 * before the first RPC, and becomes published after the last. mounting
 * says "the staging reference is taken; NodeStage, then NodePublish, may
 * be in flight": recovery adopts it when its target is mounted (the
 * publish, and so the stage, completed) and otherwise rolls it back
 * through unpublishing-unconfirmed (NodeUnpublish, then NodeUnstage as for
 * a stage never confirmed). A mount that fails in flight knows which RPC
 * failed and goes on from what it knows: unstaging-unconfirmed when the
 * stage failed, unpublishing when the publish did. staging and staged
 * (with staging -> publishing) are the older agents' three-commit mount,
 * still recovered and rolled back as before.
 *
 * unstaging-unconfirmed is the rollback of a stage that was never
 * confirmed: like unstaging, but when nothing is mounted at the staging
 * path a plugin that refuses the NodeUnstage (a final error, such as
 * INVALID_ARGUMENT for a volume ID it rejected) does not keep the record
 * for ever (see mounter_down).
 *
 * "gone" deletes the row. The staging reference count is not a counter
 * that could drift: it is the number of rows that name the same staging
 * path, and a row exists from before the first RPC of its mount (so the
 * reference is taken before staging) until after the last RPC of its
 * unmount. Secrets and mount flags are never stored (only a hash of the
 * mount options is).
 *
 * Thread-safety: a store may be used from several threads; each call
 * holds the store's lock for its statements.
 */
#ifndef CSID_AGENT_MOUNT_STORE_H
#define CSID_AGENT_MOUNT_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/mount_paths.h"
#include "util/err.h"

enum mount_state {
	MOUNT_STATE_NEW, /* not yet recorded */
	MOUNT_STATE_STAGING, /* NodeStageVolume may be in flight */
	MOUNT_STATE_STAGED, /* staged (or no staging needed); publish not started */
	MOUNT_STATE_PUBLISHING, /* NodePublishVolume may be in flight */
	MOUNT_STATE_PUBLISHED, /* mounted at the target */
	MOUNT_STATE_UNPUBLISHING, /* NodeUnpublishVolume may be in flight */
	MOUNT_STATE_UNSTAGING, /* NodeUnstageVolume may be in flight (last user) */
	MOUNT_STATE_UNSTAGING_UNCONFIRMED, /* the same, for a stage never confirmed */
	MOUNT_STATE_MOUNTING, /* NodeStage, then NodePublish, may be in flight */
	MOUNT_STATE_UNPUBLISHING_UNCONFIRMED, /* NodeUnpublish in flight, stage never confirmed */
	MOUNT_STATE_GONE, /* row deleted */
	MOUNT_STATE_COUNT_
};

/* "staging", "published", ...; "invalid" outside the enum. */
const char *mount_state_name(enum mount_state s);
/* Whether the state machine allows from -> to. */
bool mount_store_allowed(enum mount_state from, enum mount_state to);

/* One mount record. Every string is owned by the record. */
struct mount_record {
	char *volume_id;
	char *alloc_id;
	char *plugin_id;
	char *external_id;
	bool read_only;
	enum mount_attachment attachment;
	enum mount_access access;
	char *fs_type; /* "" for the plugin default */
	char options_hash[17]; /* mount_usage_options_hash */
	char *staging_path; /* NULL when the plugin has no STAGE_UNSTAGE */
	char *target_path;
	char *publish_context; /* JSON object text */
	char *volume_context; /* JSON object text */
	enum mount_state state;
	int64_t updated_ms; /* wall clock of the last transition */
	/*
	 * Mounted by the claim flow (agent/claims.h): unmounted for the
	 * servers once they released its claim. Written with the record's
	 * first row (the mount's intent), so a mount recovered after a crash
	 * keeps it; older agents' records read false (their marks are the
	 * claim flow's own rows, agent/claims_state.h).
	 */
	bool claimed;
};

/* Frees r and its strings; NULL is a no-op. */
void mount_record_free(struct mount_record *r);
/* Frees n records and the array; NULL is a no-op. */
void mount_records_free(struct mount_record **rs, size_t n);

struct mount_store;

/*
 * Opens its own connection to the agent database at db_path (see
 * store/agent_db.h) and creates the mounter's tables. Returns 0 and *out, or
 * a negative code with e set.
 */
int mount_store_open(const char *db_path, struct mount_store **out, struct err *e);
/* Closes the store; NULL is a no-op. */
void mount_store_close(struct mount_store *s);

/*
 * Loads the record of (volume_id, alloc_id) into a new *out. Returns 0,
 * CSID_ENOTFOUND when there is none, or another code with e set.
 */
int mount_store_get(struct mount_store *s, const char *volume_id, const char *alloc_id,
		    struct mount_record **out, struct err *e);

/*
 * Loads every record (volume_id NULL) or those of one volume, ordered by
 * volume then allocation, into a new array *out of *n records.
 */
int mount_store_list(struct mount_store *s, const char *volume_id, struct mount_record ***out,
		     size_t *n, struct err *e);

/*
 * Counts the other records (alloc != exclude_alloc) that name
 * staging_path: *users counts all of them, *staged those in a state where
 * the volume is known staged (staged, publishing, published,
 * unpublishing).
 */
int mount_store_stage_users(struct mount_store *s, const char *staging_path,
			    const char *exclude_alloc, int *users, int *staged, struct err *e);

/*
 * The one transition function: checks from -> to against the table, makes
 * it durable (insert from new, delete to gone, else update), logs
 * "mount <volume>/<alloc>: <from> -> <to>" at debug level (the mounter
 * logs each finished operation at info), then sets r->state. Returns 0,
 * CSID_EINTERNAL for a transition the table forbids, or a database error;
 * on error r->state is unchanged.
 */
int mount_store_transition(struct mount_store *s, struct mount_record *r, enum mount_state to,
			   struct err *e);

/*
 * Sets r's claimed mark (and r->claimed), for a mount repeated by
 * another front end. Returns 0, CSID_EIO when the row is gone, or a
 * database error.
 */
int mount_store_set_claimed(struct mount_store *s, struct mount_record *r, bool claimed,
			    struct err *e);

/*
 * The one way around the table, for the operator's force path: deletes
 * r's row from any state (r->state becomes gone) and logs
 * "mount <volume>/<alloc>: <from> -> gone (forced)" at warn level.
 * Returns 0, CSID_ENOTFOUND when the row is gone already, or a database
 * error.
 */
int mount_store_forget(struct mount_store *s, struct mount_record *r, struct err *e);

#endif
