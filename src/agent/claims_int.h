/*
 * Private parts of the claim flow (agent/claims.h) shared by its files:
 * the module object, the durable release queue (claims_release.c), the
 * orphans (claims_orphans.c) and the owners (claims_owners.c).
 */
#ifndef CSID_AGENT_CLAIMS_INT_H
#define CSID_AGENT_CLAIMS_INT_H

#include <pthread.h>
#include <stdbool.h>

#include "agent/claims.h"
#include "agent/claims_answer.h"
#include "agent/claims_state.h"
#include "agent/owners_watch.h"
#include "agent/server_link.h"

/* Node expansions that failed finally, remembered (the oldest forgotten first). */
#define CLAIMS_EXPAND_FINAL_MAX 32

/* A node expansion the plugin refused finally: not retried for this capacity. */
struct claims_expand_final {
	char vol[MOUNT_NAME_MAX + 1];
	int64_t capacity;
};

/* A volume the last server answer wants grown here (claims_expand.c). */
struct claims_expand_want {
	char vol[MOUNT_NAME_MAX + 1];
	char plugin[MOUNT_NAME_MAX + 1];
	int64_t capacity;
};

/* A node expansion done and reported at done_ms: answers sent before then are stale for it. */
struct claims_expand_done {
	char vol[MOUNT_NAME_MAX + 1];
	int64_t capacity;
	int64_t done_ms;
};

/* Releases retried per pass at most (the rest in the next pass). */
#define CLAIMS_RELEASE_BATCH 64

/* An allocation a server released while the node was away, to unmount. */
struct claims_orphan {
	char vol[MOUNT_NAME_MAX + 1];
	char alloc[MOUNT_NAME_MAX + 1];
	char note[SERVER_LINK_NOTE_MAX + 1];
	uint64_t seq; /* the generation of the report answered (held_allocs.h) */
};

struct claims {
	struct claims_config cfg; /* node_name points to node */
	char *node;
	struct clock *clock;
	struct claims_state *state; /* NULL: nothing durable */
	struct owners_watch *owners; /* NULL: owners refused */
	bool stop; /* atomic: requests and waits give up */
	/* atomic: a server answered like one that does not wait on claims (claims_mount). */
	bool old_server;
	/* Under mu: the background work and the pauses of the flow wait on cond. */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool poke; /* a release is pending: pass at once */
	bool rel_unanswered; /* a release found no server: the next answer of one pokes */
	struct claims_orphan *orphans;
	size_t norphans, orphans_cap;
	bool orphans_on; /* held_allocs tells of released allocations */
	pthread_t thread;
	bool started;
	/* The release passes (claims_step's thread only). */
	int64_t rel_due, rel_delay;
	struct claims_state_release *rows;
	/* The node expansion passes (claims_step's thread only; claims_expand.c). */
	int64_t exp_due, exp_delay;
	/* Under mu: final refusals of NodeExpandVolume, a ring (claims_expand.c). */
	struct claims_expand_final exp_final[CLAIMS_EXPAND_FINAL_MAX];
	size_t exp_nfinal;
	/* Under mu: the last answer's volumes to grow, and the expansions done, a ring. */
	struct claims_expand_want *exp_want;
	size_t exp_nwant;
	struct claims_expand_done exp_done[CLAIMS_EXPAND_FINAL_MAX];
	size_t exp_ndone;
	bool exp_poke; /* an answer named a volume to grow anew: pass at once */
	bool exp_on; /* held_allocs tells of volumes to expand */
};

/* Whether the module is stopping (requests and waits give up). */
bool claims_stopping(struct claims *c);
/* Waits on the clock until until (ms) or the module stops. */
void claims_pause_until(struct claims *c, int64_t until);

/*
 * The request of claims_server_request; patient false: each server tried
 * once, no retry. doc NULL: the answer of a success is not wanted (nor
 * parsed).
 */
int claims_server_try(struct claims *c, const char *method, const char *path, json_t *body,
		      bool patient, json_t **doc, struct err *e);
/*
 * The same with the answer's bytes: 0 and *text (*len bytes; NULL when
 * none or not wanted), which the caller frees with wipe_free; an error
 * answer is parsed for its code and message as claims_server_try does.
 */
int claims_server_text(struct claims *c, const char *method, const char *path, json_t *body,
		       bool patient, bool want, char **text, size_t *len, struct err *e);

/* claims_release.c */
/*
 * PUT /v1/volume/<vol>/release {"alloc_id", "reason" (omitted when
 * NULL)}; patient as claims_server_try. CSID_EUNAVAIL: no server answered.
 */
int claims_release_send(struct claims *c, const char *vol, const char *alloc, const char *reason,
			bool patient, struct err *e);
/* Wakes the release passes (an unmount left a release pending). */
void claims_release_poke(struct claims *c);
/*
 * A server answered a request of the agent: if a release found no
 * server before, the release passes run at once instead of after their
 * backoff (up to CLAIMS_RELEASE_MAX_MS), so a release left by an outage
 * goes as soon as a server is back.
 */
void claims_release_answered(struct claims *c);
/* Forgets the pending release of vol for alloc, and the claim mark with it. */
int claims_release_done(struct claims *c, const char *vol, const char *alloc, struct err *e);
/* Starts the thread (not in manual mode); claims_release_stop joins it. */
int claims_release_start(struct claims *c, struct err *e);
void claims_release_stop(struct claims *c);

/* claims_expand.c */
/*
 * NodeExpandVolume for volume vol (as a server answered it, v) when it
 * wants it on this node (node_expansion_required, and a claim here not
 * node_expanded), then the report to the server. 0 when done or nothing
 * was wanted, else a code with e set (retried by the passes).
 */
int claims_expand_volume(struct claims *c, const char *vol, const struct claims_answer *v,
			 struct err *e);
/* Runs the node expansion pass when due; returns when it is next due (clock ms). */
int64_t claims_expand_step(struct claims *c);
/* Starts taking the volumes to expand from held_allocs; claims_expand_close stops it. */
void claims_expand_open(struct claims *c);
void claims_expand_close(struct claims *c);

/* claims_orphans.c */
/* Starts taking released allocations from held_allocs; claims_orphans_close stops it. */
void claims_orphans_open(struct claims *c);
void claims_orphans_close(struct claims *c);
/* Unmounts the queued orphans the claim flow mounted. */
void claims_orphans_run(struct claims *c);

/* claims_owners.c */
/* Starts the owner watch (with a client); db_path NULL: owners are not persisted. */
int claims_owners_open(struct claims *c, const char *db_path, struct err *e);
void claims_owners_close(struct claims *c);
/* Checks an owner on the system (pid start time filled in) before the claim. */
int claims_owner_check(struct claims *c, struct owners_spec *s, struct err *e);
/* Records s (a lease starts now) as the owner of the mount of vol for alloc. */
int claims_owner_record(struct claims *c, const char *vol, const char *alloc, struct owners_spec *s,
			struct err *e);
/* Forgets the owner of the mount of vol for alloc (it was unmounted). */
void claims_owner_forget(struct claims *c, const char *vol, const char *alloc);

#endif
