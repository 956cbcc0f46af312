/*
 * Claim owners: who keeps a mount of the agent alive. A mount made
 * through the claim flow (agent/claims.h) may name an owner:
 *
 *   pid     a process, recorded with its start time (field 22 of
 *           /proc/PID/stat), so a PID the kernel reused for another
 *           process is not mistaken for the owner;
 *   cgroup  a cgroup v2 directory: gone once "populated 0" (no process
 *           left in it or below) or once the directory is removed;
 *   lease   a duration the caller renews; gone when it lapses.
 *
 * When the owner is gone the mount is due: the shell (agent/owners_watch.h)
 * unmounts and releases the claim through the same path as an unmount,
 * with the reason this core wrote ("owner pid 1234 exited"). A release
 * that fails is due again after a backoff (1 s doubling to 30 s).
 *
 * This is the I/O-free core: it never reads /proc or a cgroup itself but
 * asks a probe (struct owners_probe: real in owners_watch.c, scripted in
 * tests), and takes every time as an argument (lease expiry is wall
 * clock milliseconds, so it means the same after an agent restart). It
 * is not thread-safe: the shell holds one lock around every call.
 *
 * Stepping: owners_put() adds or replaces; owners_check() asks the probe
 * about every live owner and marks the gone ones (the shell calls it when
 * a pidfd or a cgroup.events file signals, periodically, and at start);
 * owners_next_ms() says when to step again; owners_take() hands out what
 * is due and marks it busy; owners_done() forgets it or schedules a retry.
 */
#ifndef CSID_AGENT_OWNERS_H
#define CSID_AGENT_OWNERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/mount_paths.h"
#include "util/clock.h"
#include "util/err.h"

/* The lease range: at least 1 s, at most 24 h (renew more often than that). */
#define OWNERS_LEASE_MIN_MS 1000
#define OWNERS_LEASE_MAX_MS (24LL * 3600 * 1000)
/* Longest cgroup path, and longest reason. */
#define OWNERS_PATH_MAX 300
#define OWNERS_REASON_MAX 400
/* Backoff of a release that failed. */
#define OWNERS_RETRY_MIN_MS 1000
#define OWNERS_RETRY_MAX_MS 30000

enum owners_kind {
	OWNERS_PID = 1,
	OWNERS_CGROUP,
	OWNERS_LEASE,
};

/* What owns a mount. */
struct owners_spec {
	enum owners_kind kind;
	int pid; /* OWNERS_PID */
	uint64_t start_time; /* OWNERS_PID: clock ticks after boot, /proc/PID/stat field 22 */
	char cgroup[OWNERS_PATH_MAX + 1]; /* OWNERS_CGROUP: absolute path of the directory */
	int64_t lease_ms; /* OWNERS_LEASE: the duration a renewal grants */
	int64_t expires_ms; /* OWNERS_LEASE: wall clock ms when it lapses */
};

/* One owned mount as the core holds it. */
struct owners_entry {
	char vol[MOUNT_NAME_MAX + 1];
	char alloc[MOUNT_NAME_MAX + 1];
	struct owners_spec spec;
	bool gone; /* the owner is gone: the mount is due for release */
	bool busy; /* handed out by owners_take, not done yet */
	char reason[OWNERS_REASON_MAX]; /* why it is gone */
	int64_t retry_ms; /* wall ms before which a failed release is not due again */
	int64_t backoff_ms;
};

/*
 * What the core asks the system. Each returns 0 with the answer,
 * CSID_ENOTFOUND when the object is gone, or another code when it could
 * not tell (the owner is then kept and asked again later).
 */
struct owners_probe {
	/* The start time of pid, a live process (a zombie counts as gone). */
	int (*pid_start)(void *ctx, int pid, uint64_t *start);
	/* Whether the cgroup at path holds a process. */
	int (*cgroup_populated)(void *ctx, const char *path, bool *populated);
	void *ctx;
};

/* A mount handed out by owners_take. */
struct owners_due {
	char vol[MOUNT_NAME_MAX + 1];
	char alloc[MOUNT_NAME_MAX + 1];
	char reason[OWNERS_REASON_MAX];
};

struct owners;

/* A new, empty table asking probe (copied). Returns 0 or CSID_ENOMEM. */
int owners_new(const struct owners_probe *probe, struct owners **out);
/* Frees o; NULL is a no-op. */
void owners_free(struct owners *o);

/*
 * Adds the owner of (vol, alloc), or replaces the one it had (a replaced
 * owner that was gone is live again, unless it is busy being released:
 * then CSID_ECONFLICT). Returns 0, CSID_EINVAL (bad spec), CSID_ENOMEM.
 */
int owners_put(struct owners *o, const char *vol, const char *alloc, const struct owners_spec *s,
	       struct err *e);
/* Forgets the owner of (vol, alloc); whether there was one. */
bool owners_forget(struct owners *o, const char *vol, const char *alloc);

/*
 * Renews the lease of (vol, alloc) at wall time now for lease_ms (0: the
 * duration it had). Returns 0 with *out (the renewed spec, may be NULL),
 * CSID_ENOTFOUND (no owner), CSID_EPRECOND (not a lease, or lapsed
 * already: the release is under way), CSID_EINVAL (out of range).
 */
int owners_renew(struct owners *o, const char *vol, const char *alloc, int64_t lease_ms,
		 int64_t now, struct owners_spec *out, struct err *e);

/*
 * Checks every live owner at wall time now: asks the probe about each
 * pid and cgroup owner (a pid gone or with another start time, a cgroup
 * empty or removed: gone) and marks lapsed leases gone. Returns how many
 * became gone.
 */
size_t owners_check(struct owners *o, int64_t now);

/*
 * Hands out at most max mounts due at now (gone, not busy, retry time
 * passed; leases that lapsed count), marks them busy. Returns how many.
 */
size_t owners_take(struct owners *o, int64_t now, struct owners_due *out, size_t max);
/*
 * The release of (vol, alloc) ended: released forgets it, else it is due
 * again after the backoff. Unknown keys are ignored (forgotten meanwhile).
 */
void owners_done(struct owners *o, const char *vol, const char *alloc, bool released, int64_t now);

/* The next wall time something becomes due (a lease lapses, a retry); CLOCK_NEVER: none. */
int64_t owners_next_ms(const struct owners *o);

/* The entries, for the shell's watches and listings; valid until the next change. */
size_t owners_count(const struct owners *o);
const struct owners_entry *owners_at(const struct owners *o, size_t i);

/*
 * Checks a lease duration: OWNERS_LEASE_MIN_MS .. OWNERS_LEASE_MAX_MS.
 * Returns 0 or CSID_EINVAL with e naming the allowed range.
 */
int owners_lease_check(int64_t lease_ms, struct err *e);
/*
 * Checks a cgroup path as text: absolute, at most OWNERS_PATH_MAX bytes,
 * no empty, "." or ".." component, no trailing '/', only letters, digits
 * and ._-@:+=,~\ in names. Returns 0 or CSID_EINVAL with e set (the
 * message never echoes a hostile path).
 */
int owners_cgroup_path_check(const char *path, struct err *e);

/* Parses a cgroup.events file's "populated 0|1" line. Returns 0 or CSID_EINVAL. */
int owners_events_parse(const char *text, size_t len, bool *populated);

/* "pid", "cgroup", "lease". */
const char *owners_kind_name(enum owners_kind k);

#endif
