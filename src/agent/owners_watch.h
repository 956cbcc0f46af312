/*
 * The shell around the claim owners core (agent/owners.h): it watches the
 * owners on the real system and runs the release of a mount whose owner
 * is gone, on a thread of its own.
 *
 * A pid owner is watched with a pidfd (pidfd_open), which turns readable
 * when the process exits; a cgroup owner through inotify on its
 * cgroup.events file (modified when "populated" changes, ignored when the
 * directory is removed); a lease by its expiry time. Whatever wakes the
 * thread (an event, a put, a renewal, every OWNERS_WATCH_RECHECK_MS), it
 * re-arms the watches of the live owners and then asks the core to check
 * every owner, so an event lost between two checks is never missed.
 *
 * Owners are persisted in the agent database (module "owners", table
 * owners) before a put returns, and loaded and checked again at start:
 * a pid that is gone, or whose start time differs (the pid was reused),
 * is gone; a lease that lapsed while the agent was down is gone.
 *
 * The release callback runs on the watch thread without the lock held,
 * one mount at a time. It returns 0 when nothing is left to do for the
 * mount (unmounted and released, the release recorded for a retry, or
 * refused for good), else the mount is released again after a backoff.
 * Every function is thread-safe.
 */
#ifndef CSID_AGENT_OWNERS_WATCH_H
#define CSID_AGENT_OWNERS_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "agent/owners.h"
#include "util/err.h"

/* How often every owner is checked even without an event (ms). */
#define OWNERS_WATCH_RECHECK_MS 30000

typedef int (*owners_watch_release_fn)(void *ctx, const char *vol, const char *alloc,
				       const char *reason);

struct owners_watch_config {
	const char *db_path; /* the agent database; NULL: owners are not persisted */
	owners_watch_release_fn release; /* required */
	void *ctx;
};

struct owners_watch;

/*
 * Opens the table, loads the owners recorded there and starts the
 * thread (which checks them all first). Returns 0 and *out, or a code
 * with e set.
 */
int owners_watch_start(const struct owners_watch_config *cfg, struct owners_watch **out,
		       struct err *e);
/* Stops the thread (waiting for a release in progress) and frees; NULL is a no-op. */
void owners_watch_stop(struct owners_watch *w);

/* Records s as the owner of (vol, alloc), durably, and watches it. 0 or a code with e set. */
int owners_watch_put(struct owners_watch *w, const char *vol, const char *alloc,
		     const struct owners_spec *s, struct err *e);
/* Forgets the owner of (vol, alloc), if any (an unmount). */
void owners_watch_forget(struct owners_watch *w, const char *vol, const char *alloc);
/* owners_renew on the wall clock, persisted. 0 with *out, or a code with e set. */
int owners_watch_renew(struct owners_watch *w, const char *vol, const char *alloc, int64_t lease_ms,
		       struct owners_spec *out, struct err *e);
/* A copy of every entry (free *out). Returns 0 or CSID_ENOMEM. */
int owners_watch_list(struct owners_watch *w, struct owners_entry **out, size_t *n);

/*
 * Mount-time checks on the real system. owners_watch_pid_check: pid is a
 * live process; gives its start time. owners_watch_cgroup_check: path
 * passes owners_cgroup_path_check, is a directory of a cgroup v2 file
 * system reached without a symbolic link, not the root cgroup, and holds
 * a process now. Both return 0 or CSID_EINVAL with a clear message.
 */
int owners_watch_pid_check(int pid, uint64_t *start, struct err *e);
int owners_watch_cgroup_check(const char *path, struct err *e);

#endif
