/*
 * A scripted fake node plugin and mount table for the mounter's tests.
 *
 * The fake keeps the plugin's view of the node (what is staged, what is
 * published where) in a small text file, so that a test can "kill -9" a
 * child process in the middle of an operation and look at the same node
 * from the parent afterwards. Its client answers NodeStage, NodePublish,
 * NodeUnpublish, NodeUnstage and NodeExpand like a strict plugin (idempotent, publish
 * requires the stage) and counts protocol violations: a stage of a path
 * that is already staged, an unstage while a target still uses the stage,
 * a publish without a stage, two RPCs of one volume at once.
 *
 * Faults, per process: fail the Nth node RPC (0-based, counted across all
 * node RPCs) with a gRPC code, fail every RPC of one kind, or crash
 * (_exit) at the Nth RPC either before the plugin acts or after it acted
 * but before it answered. One mount point can be marked busy, so that
 * the table's detach reports a lazy unmount.
 *
 * The mount table seam reports the staged paths and published targets as
 * mount points (as csi-hostpath's bind mounts would be).
 */
#ifndef CSID_TEST_MOUNTER_FAKE_H
#define CSID_TEST_MOUNTER_FAKE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/mountinfo.h"
#include "csi/csi_client.h"

#define MOUNTER_FAKE_MAX 64
#define MOUNTER_FAKE_PATH 512
#define MOUNTER_FAKE_CRASH_EXIT 42

struct mounter_fake_counts {
	int stage, publish, unpublish, unstage;
	int double_stage; /* NodeStage of an already staged path */
	int unstage_in_use; /* NodeUnstage while a target uses the stage */
	int publish_unstaged; /* NodePublish with a staging path not staged */
	int overlap; /* two RPCs of one volume at once */
};

struct mounter_fake {
	struct csi_client client; /* first: the mounter gets &fake->client */
	struct mount_table table;
	char state_file[MOUNTER_FAKE_PATH];
	bool needs_stage; /* reject a publish without staging path */
	/* Faults: -1 disables. */
	int fail_at;
	int fail_count; /* how many calls from fail_at on fail (default 1) */
	int fail_code;
	int crash_at;
	bool crash_after; /* crash after acting (the answer is lost) */
	int calls; /* node RPCs seen by this process */
	int64_t last_timeout_ms;
	int delay_ms; /* simulated work per RPC, to widen races */
	/* A mount point a plain unmount finds busy (the table's detach goes lazy); "" for none. */
	char busy_mount[MOUNTER_FAKE_PATH];
	/* Fail every RPC of this kind (enum csi_rpc) with fail_code; -1 for none. */
	int fail_rpc;
	/* NodeExpandVolume calls that reached the plugin's logic (not failed by a fault). */
	int expands;
	int64_t expand_bytes; /* capacity_range.required_bytes of the last one */
	char expand_path[MOUNTER_FAKE_PATH]; /* its volume_path */
	char expand_stage[MOUNTER_FAKE_PATH]; /* its staging_target_path */
	pthread_mutex_t mu;
	char busy[MOUNTER_FAKE_MAX][MOUNTER_FAKE_PATH]; /* volumes with an RPC in flight */
	int n_busy;
};

/* Initialises f with its state in state_file (created empty if missing). */
void mounter_fake_init(struct mounter_fake *f, const char *state_file);
/* Releases f's lock (the state file stays). */
void mounter_fake_fini(struct mounter_fake *f);

/* The node's view as the fake plugin sees it (read from the file). */
struct mounter_fake_view {
	char staged[MOUNTER_FAKE_MAX][MOUNTER_FAKE_PATH];
	int n_staged;
	char targets[MOUNTER_FAKE_MAX][MOUNTER_FAKE_PATH];
	char target_stage[MOUNTER_FAKE_MAX][MOUNTER_FAKE_PATH]; /* "" when unstaged */
	int n_targets;
	struct mounter_fake_counts counts;
};

/* Reads the view; returns 0 or -1 when the file is unreadable. */
int mounter_fake_view(const struct mounter_fake *f, struct mounter_fake_view *v);
/* Adds a published target that no mounter asked for (an orphan). */
int mounter_fake_add_orphan(struct mounter_fake *f, const char *target);

#endif
