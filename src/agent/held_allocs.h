/*
 * Held allocations: what the agent reports to the servers as the
 * allocations it holds (the "allocations" of its node fingerprint,
 * server_link.h), so a server can release a claim the agent lost
 * (server/server_gc.h). The report is the union of
 *   - every record of the mounter (a mount, or one half done or half
 *     undone: the node still holds something of it), and
 *   - every claim the agent's claim flow is in the middle of making: begun
 *     (held_allocs_begin) before the claim request goes out, ended once
 *     the mount record exists or the mount gave up; and every unmount of
 *     that flow until its release went.
 * The begun set is read before the mounter's records, and a flow ends
 * only after its record exists, so an allocation never drops out of a
 * report between the two. Until a mounter is attached (after its
 * recovery at start) there is no report at all: a restarting agent must
 * not report "nothing held" before it knows its mounts.
 *
 * The attach calls on_change, which tells the server link to rebuild
 * (and send, if it differs) the fingerprint: the first report. A claim
 * flow's begin and end, and the mounts and unmounts of the mounter, do
 * not: a report built after a begin holds the pair, which is all the
 * lost-claim rule asks (server/server_gc.h), and a change reaches the
 * servers with the next heartbeat. A mount or an unmount thus costs no
 * heartbeat of its own (there were two per mount and unmount cycle, a
 * third of the CPU that csid dev spent on the cycle, one of them on the
 * server beside the claim).
 *
 * Released allocations: a server answers a report with the allocations
 * that hold no active claim on the node any more (its claim was released
 * while the node was away). held_allocs_released passes such an answer on
 * to the agent API (held_allocs_on_released), which unmounts the
 * allocation if its claim flow mounted it, unless the answer may be
 * stale for that allocation: a claim flow of the pair runs now, or one
 * began or ended since the report was built. Each begin and end takes
 * the next generation (held_allocs_seq) and stamps it on its pair; the
 * server link takes the generation before it builds a report and hands
 * it back with the answer, which counts only for pairs stamped at or
 * before it. A flow running when the report was built is stamped by its
 * end after it: its claim may have reached the server only after the
 * server built its answer ("no claim"), so the answer is dropped even
 * when it comes back after the mount was made; the next report asks
 * again. A pair's stamp is kept after its flows ended until an answer
 * to a report built at or after it was handled (held_allocs_answered).
 * The agent API checks again before it unmounts (held_allocs_settled):
 * a claim flow of the pair that ran between the answer and the unmount
 * keeps the mount.
 *
 * Volumes to expand: a server's answer also names the reported volumes
 * that want NodeExpandVolume on this node (server/server_gc.h).
 * held_allocs_expand passes the whole list of each answer on to the
 * claim flow (held_allocs_on_expand), with the time its request was sent,
 * so the flow can tell an answer built before its own report of an
 * expansion reached the server.
 *
 * Thread-safety: every function may be called from any thread; on_change
 * is called without the module's lock held, on_released and on_expand
 * with it held.
 */
#ifndef CSID_AGENT_HELD_ALLOCS_H
#define CSID_AGENT_HELD_ALLOCS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/mounter.h"
#include "model/model.h"
#include "util/arena.h"
#include "util/err.h"

typedef void (*held_allocs_changed_fn)(void *ctx);
typedef void (*held_allocs_released_fn)(void *ctx, uint64_t seq, const char *volume_id,
					const char *alloc_id, const char *note);

/* One volume a server answered as wanting NodeExpandVolume on this node (strings borrowed). */
struct held_allocs_expand {
	const char *volume_id;
	const char *plugin_id;
	int64_t capacity; /* bytes: the volume's capacity the server holds */
};
typedef void (*held_allocs_expand_fn)(void *ctx, int64_t sent_ms,
				      const struct held_allocs_expand *v, size_t n);

struct held_allocs;

/* A new, empty set; on_change (may be NULL) with ctx. Returns 0 or CSID_ENOMEM. */
int held_allocs_new(held_allocs_changed_fn on_change, void *ctx, struct held_allocs **out,
		    struct err *e);
/* Frees h; NULL is a no-op. No call may be in progress. */
void held_allocs_free(struct held_allocs *h);

/* Reports m's records from now on (m borrowed; outlives h's use). Calls on_change. h NULL: no-op.
 */
void held_allocs_attach(struct held_allocs *h, struct mounter *m);

/*
 * A claim flow for (volume_id, alloc_id) begins: reported until the
 * matching held_allocs_end (flows of one pair are counted); on_change is
 * not called (above). Returns 0 or CSID_ENOMEM. h NULL: a no-op.
 */
int held_allocs_begin(struct held_allocs *h, const char *volume_id, const char *alloc_id,
		      struct err *e);
/* The flow ends (its mount record exists, or it gave up); no on_change. h NULL: a no-op. */
void held_allocs_end(struct held_allocs *h, const char *volume_id, const char *alloc_id);

/* The generation now (begins and ends so far): taken before a report is built. h NULL: 0. */
uint64_t held_allocs_seq(struct held_allocs *h);

/*
 * An answer to the report built at seq was handled: forgets the stamps
 * of pairs whose flows all ended at or before seq (answers come in the
 * order of their reports). A check at an older generation
 * (held_allocs_settled) of a pair without a stamp then says false. h
 * NULL: a no-op.
 */
void held_allocs_answered(struct held_allocs *h, uint64_t seq);

/*
 * Whether no claim flow of (volume_id, alloc_id) runs now or began or
 * ended after generation seq. h NULL: false.
 */
bool held_allocs_settled(struct held_allocs *h, uint64_t seq, const char *volume_id,
			 const char *alloc_id);

/*
 * Sets who is told of released allocations (fn NULL: nobody). fn runs
 * under h's lock: it must be quick and call nothing of h. Once a call
 * clearing it returned, fn runs no more. h NULL: a no-op.
 */
void held_allocs_on_released(struct held_allocs *h, held_allocs_released_fn fn, void *ctx);

/*
 * A server answered (volume_id, alloc_id) released (with note) to the
 * report built at seq: passes it on to on_released (with seq) when the
 * pair is settled since seq (held_allocs_settled). Returns whether it was
 * passed on. h NULL: false.
 */
bool held_allocs_released(struct held_allocs *h, uint64_t seq, const char *volume_id,
			  const char *alloc_id, const char *note);

/*
 * Sets who is told of the volumes to expand (fn NULL: nobody), as
 * held_allocs_on_released. h NULL: a no-op.
 */
void held_allocs_on_expand(struct held_allocs *h, held_allocs_expand_fn fn, void *ctx);
/*
 * A server's answer, to a request sent at sent_ms (on the claim flow's
 * clock), named v[0..n) to expand (the whole list: none when n is 0):
 * passed on to on_expand. h NULL: a no-op.
 */
void held_allocs_expand(struct held_allocs *h, int64_t sent_ms, const struct held_allocs_expand *v,
			size_t n);
/*
 * The report: *ready false (and nothing else set) while no mounter is
 * attached; else *out (in a) the allocations, sorted by volume then
 * allocation, each once, *n of them. Returns 0 or a code with e set (the
 * mounter could not list its records).
 */
int held_allocs_list(struct held_allocs *h, struct arena *a, bool *ready,
		     struct model_node_alloc **out, size_t *n, struct err *e);

#endif
