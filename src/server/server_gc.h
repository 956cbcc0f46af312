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

/* A duration as Go prints it ("500ms", "2s", "1m30s", "5m0s", "1h0m0s") into buf. */
void server_gc_duration(int64_t ms, char *buf, size_t cap);

#endif
