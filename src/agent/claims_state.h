/*
 * The claim flow's durable rows (agent/claims.h) in the agent's local
 * state (store/agent_db.h, module "claims" of the agent database):
 *
 *   claims_pending_release(volume_id, alloc_id, reason)
 *       a release recorded after its unmount and before it is sent, kept
 *       until a server took it (or refused it for good); reason is NULL
 *       unless a claim owner was gone or the server released the claim
 *       while the node was away;
 *   claims_mounted(volume_id, alloc_id)
 *       an allocation the claim flow of an older agent mounted: only such
 *       mounts are ever unmounted for the servers (claims_orphans.c). The
 *       claim flow now marks its mounts in their mount records instead,
 *       with the mount's intent (agent/mount_store.h); these rows are only
 *       read and removed.
 *
 * The claim owners are persisted beside them by the owner watch
 * (agent/owners_watch.h, module "owners"). One connection, used under the
 * object's own lock: every function is thread-safe.
 */
#ifndef CSID_AGENT_CLAIMS_STATE_H
#define CSID_AGENT_CLAIMS_STATE_H

#include <stdbool.h>
#include <stddef.h>

#include "agent/mount_paths.h"
#include "agent/owners.h"
#include "util/err.h"

/* One recorded release. */
struct claims_state_release {
	char vol[MOUNT_NAME_MAX + 1];
	char alloc[MOUNT_NAME_MAX + 1];
	char reason[OWNERS_REASON_MAX]; /* "" when none */
};

struct claims_state;

/*
 * Opens the agent database at db_path and brings the "claims" tables up
 * to date. Returns 0 and *out (close with claims_state_close), or a code
 * with e set.
 */
int claims_state_open(const char *db_path, struct claims_state **out, struct err *e);
/* Closes; NULL is a no-op. */
void claims_state_close(struct claims_state *s);

/*
 * Records the pending release of vol for alloc (reason NULL: none); a
 * release already recorded keeps its first reason. 0 or a code with e set.
 */
int claims_state_release_put(struct claims_state *s, const char *vol, const char *alloc,
			     const char *reason, struct err *e);
/* Forgets the pending release of vol for alloc (absent is fine). 0 or a code with e set. */
int claims_state_release_drop(struct claims_state *s, const char *vol, const char *alloc,
			      struct err *e);
/*
 * Copies at most max recorded releases, ordered by volume then
 * allocation, into rows; returns how many (0 when the table cannot be
 * read: the next pass tries again).
 */
size_t claims_state_release_list(struct claims_state *s, struct claims_state_release *rows,
				 size_t max);

/* How many releases are recorded (0 when the table cannot be read). */
size_t claims_state_release_count(struct claims_state *s);

/* Forgets that an older agent's claim flow mounted vol for alloc. 0 or a code with e set. */
int claims_state_unmark(struct claims_state *s, const char *vol, const char *alloc, struct err *e);
/* Whether the claim flow mounted vol for alloc: 0 with *out, or a code with e set. */
int claims_state_marked(struct claims_state *s, const char *vol, const char *alloc, bool *out,
			struct err *e);

#endif
