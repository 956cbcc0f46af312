/*
 * Lost claims (DESIGN "Claim lifecycle", lessons 1 and 3): the rules by
 * which the server releases a claim nobody will release, as one pure
 * function of the claim and of what the server knows of its node, so
 * tests check them in virtual time. server_gc.c applies them on every
 * pass of server_tick (level-triggered: a pass looks at every claim, not
 * at events), moving each lost claim claimed -> node-unpublished with a
 * note; the reconciler then drives it through ControllerUnpublishVolume
 * to freed, as for any release.
 *
 *   rule      the claim (state claimed)      its node                    note
 *   report    made by the node's agent       live, its agent reports     "released: allocation A no
 *             (held_by_agent), last changed  allocations, A missing      longer held by the agent
 * of before the report before the   from the last report        node N" last one was received down
 * any                            down for longer than        "released: node N down for node_grace
 * (since the       more than 5m0s" record went down)
 *
 * Why "before the report before the last one": the agent adds an
 * allocation to its report before it sends the claim request (and keeps
 * it until the mount record exists, which the report lists from then on),
 * and it sends one report at a time, building each after the previous one
 * was answered. A report built before the claim was made may still reach
 * the server after the claim was recorded, so the last report alone
 * proves nothing; but if the claim was recorded before the server
 * received report k-1, the agent had registered the allocation before
 * that too, hence before it built report k: an allocation missing from
 * report k is one the agent really dropped. The claim's updated_ms is
 * its last change (a claim the agent makes again refreshes it), stamped by
 * the server's wall clock, as are the reports' receive times. A report
 * the server got before it restarted or before the node went down is
 * forgotten, so two reports are needed again.
 *
 * Several servers (server_leader.h): a report stays on the server that
 * took it. A server that does not lead applies rule "report" to its own
 * reports and lists what it finds in its member record; the leader
 * releases such a claim only after deciding again on what it knows: the
 * node live by its count, no report it took holding the allocation, and
 * the claim as read unchanged since the follower's report before the last.
 *
 * A down node counts as node-unpublished (lesson 3): the claim keeps the
 * plugin node ID of claim time, so ControllerUnpublishVolume still works
 * without the node. The down time is the node record's updated_ms, so a
 * restarted server keeps counting.
 */
#ifndef CSID_SERVER_SERVER_GC_H
#define CSID_SERVER_SERVER_GC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "util/arena.h"
#include "util/err.h"

/* What the server knows of one node at the time of a pass. All borrowed. */
struct server_gc_node {
	const char *id;
	bool down; /* its record is down, and no heartbeat came since */
	int64_t down_since_ms; /* wall: when the record went down */
	bool live; /* a heartbeat within the TTL */
	bool reported; /* its agent's last PUT carried an allocations report */
	/* The last report, sorted by volume then allocation. */
	const struct model_node_alloc *allocs;
	size_t nallocs;
	int64_t prev_report_ms; /* wall: the report before the last one was received; 0: none */
};

/*
 * Whether claim c of volume volume_id is lost, under the rules above, at
 * wall time now_ms with grace_ms: true with the note (the reason, bounded
 * by cap) in note. node is the claim's node (NULL: the server has no
 * record of it, and nothing is decided).
 */
bool server_gc_verdict(const char *volume_id, const struct model_claim *c,
		       const struct server_gc_node *node, int64_t now_ms, int64_t grace_ms,
		       char *note, size_t cap);

/* Whether (volume_id, alloc_id) is in allocs[0..n), sorted as a report. */
bool server_gc_has(const struct model_node_alloc *allocs, size_t n, const char *volume_id,
		   const char *alloc_id);

/*
 * A node back after its claims were released (DESIGN "Claim lifecycle"):
 * whether allocation alloc_id, which the agent of node node_id reports on
 * volume volume_id, holds no active claim on that node any more, so the
 * agent is to unmount it (an orphan: its volume may be claimed elsewhere
 * now). v is the volume as read (NULL: there is none). Released (true,
 * the reason in note, bounded by cap):
 *   - a claim of the allocation on the node past claimed (node-unpublished,
 *     controller-unpublished, freed) that the node's agent made
 *     (held_by_agent): its note, else "claim <state>";
 *   - no active claim of the allocation on the node: freed, the note of
 *     its newest past claim there ("<note> (claim freed)", or "claim
 *     freed"); else (forgotten, made on another node, or never made) "no
 *     claim of allocation A on node N";
 *   - no volume: "volume V is gone".
 * Kept (false): a claimed claim (one being published too: in flight),
 * and a released one an external scheduler made (held_by_agent false:
 * the agent's claim flow did not mount it). The agent itself acts only on
 * mounts its claim flow made and is not making right now.
 */
bool server_gc_orphan(const struct model_volume *v, const char *volume_id, const char *node_id,
		      const char *alloc_id, char *note, size_t cap);

/* One allocation answered released to a node's agent (strings in the caller's arena). */
struct server_gc_released {
	const char *volume_id;
	const char *alloc_id;
	const char *note;
};

/*
 * One volume answered to a node's agent as wanting NodeExpandVolume there
 * (strings in the caller's arena): flagged node_expansion_required, and a
 * claimed claim of the node on it not yet marked node_expanded
 * (server_volume_node_expanded).
 */
struct server_gc_expand {
	const char *volume_id;
	const char *plugin_id;
	int64_t capacity;
};

/* Whether volume v wants NodeExpandVolume on node node_id (the rule above). */
bool server_gc_expand_wanted(const struct model_volume *v, const char *node_id);

/* The heartbeat answer to a node's allocations report (in the caller's arena). */
struct server_gc_answer {
	struct server_gc_released *released; /* NULL when none */
	size_t nreleased;
	struct server_gc_expand *expand; /* each volume once; NULL when none */
	size_t nexpand;
};

struct server;

/*
 * The answer to node_id's report (allocs[0..n), sorted as a report),
 * reading each reported volume now: the allocations server_gc_orphan
 * says are released, and the reported volumes that want NodeExpandVolume
 * there (server_gc_expand_wanted), so the agent learns both from its
 * heartbeat. A volume that cannot be read is skipped (asked again at the
 * next heartbeat). Returns 0 or CSID_ENOMEM with e set.
 */
int server_gc_answer(struct server *s, const char *node_id, const struct model_node_alloc *allocs,
		     size_t n, struct arena *a, struct server_gc_answer *out, struct err *e);

#endif
