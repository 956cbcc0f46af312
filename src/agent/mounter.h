/*
 * The volume mounter of the node agent: stages a volume once per (plugin,
 * volume, usage) on this node, publishes it once per allocation, and takes
 * both down again, through a node plugin's CSI client. Every step is
 * recorded durably before and after its RPC (agent/mount_store.h), so a
 * restarted agent adopts what is mounted and finishes or rolls back what
 * was half done (mounter_recover; the rules are in mounter_recover.c).
 * When a plugin cannot take a mount down, mounter_unmount_force is the
 * operator's way out (mounter_force.c).
 *
 * The mounter does not know the plugin manager: each call gets a small
 * struct mounter_plugin describing the node plugin to use.
 *
 * Thread-safety: every function may be called from several threads at
 * once. Node RPCs are serialized per volume; different volumes proceed in
 * parallel. All calls block until their RPCs are done (each RPC is bounded
 * by the mounter's deadline).
 */
#ifndef CSID_AGENT_MOUNTER_H
#define CSID_AGENT_MOUNTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/mount_paths.h"
#include "agent/mount_store.h"
#include "agent/mountinfo.h"
#include "csi/csi_client.h"
#include "util/err.h"

/* Room for any path the mounter builds. */
#define MOUNTER_PATH_MAX 4096

/*
 * How many empty directories (staging paths, targets' parents) an unmount
 * leaves in place for the next mount of the same path; the oldest beyond
 * this are removed. mounter_close removes them all, and the first
 * mounter_recover removes those an earlier process left (see mounter_recover.c).
 */
#define MOUNTER_PARK_MAX 32

/* One entry of a string map (volume context, publish context, secrets). Borrowed. */
struct mount_kv {
	const char *key;
	const char *value;
};

/* The node plugin an operation goes through. Borrowed for the call. */
struct mounter_plugin {
	const char *plugin_id;
	struct csi_client *client;
	bool has_stage_unstage; /* node capability STAGE_UNSTAGE_VOLUME */
	bool has_node_expand; /* node capability EXPAND_VOLUME */
};

/*
 * A mount request. Every pointer is borrowed for the call. Secrets are
 * passed to NodeStageVolume and NodePublishVolume only: never stored,
 * listed or logged. mount_flags (in usage) are treated the same way.
 */
struct mounter_request {
	const char *volume_id; /* the cluster's volume ID (a path component) */
	const char *external_id; /* the plugin's volume ID, sent in the RPCs */
	const char *plugin_id; /* must equal the plugin's plugin_id */
	const char *alloc_id; /* the allocation (a path component) */
	struct mount_usage usage;
	const struct mount_kv *volume_context;
	size_t n_volume_context;
	const struct mount_kv *publish_context;
	size_t n_publish_context;
	const struct mount_kv *secrets;
	size_t n_secrets;
	/*
	 * Mounted by the claim flow: recorded with the mount's intent
	 * (mount_record.claimed); a repeated mount sets the mark to this.
	 */
	bool claimed;
	/*
	 * Optional, out: set to 1 when the allocation already had a record of
	 * the volume as the mount began (an earlier mount, which a failure of
	 * this one leaves to its owner), 0 when it had none; untouched when
	 * the mount failed before it read that.
	 */
	int *had_record;
};

struct mounter_result {
	/* The staging path when the volume was staged, else the target. */
	char source[MOUNTER_PATH_MAX];
	/* The per-allocation target path the plugin published to. */
	char target[MOUNTER_PATH_MAX];
	bool is_device; /* block-device attachment: target is a device file */
};

struct mounter_options {
	/* Deadline of each node RPC; 0 means CSI_DEFAULT_TIMEOUT_MS. */
	int64_t rpc_timeout_ms;
	/* The mount table; NULL means the real one (mountinfo_table()). Borrowed. */
	struct mount_table *table;
};

struct mounter;

/*
 * Opens a mounter that mounts under <data_dir>/mounts (created, data_dir
 * resolved to its real path so it compares with the mount table) and keeps
 * its records in the agent database at db_path. opts may be NULL. Does not
 * touch existing mounts: call mounter_recover before serving requests.
 * Returns 0 and *out, or a negative code with e set.
 */
int mounter_open(const char *data_dir, const char *db_path, const struct mounter_options *opts,
		 struct mounter **out, struct err *e);

/* Closes the mounter (mounts stay as they are); no call may be in progress. NULL is a no-op. */
void mounter_close(struct mounter *m);

/*
 * Mounts req's volume for req's allocation: NodeStageVolume when the
 * plugin has STAGE_UNSTAGE and no other allocation has staged the same
 * volume with the same usage segment, then NodePublishVolume to the
 * allocation's target. Idempotent: a published mount with the same usage
 * is returned as is (re-published if its target is no longer mounted).
 * A failure rolls back what the call did (best effort; whatever could not
 * be rolled back stays recorded and is finished by the next call on the
 * same volume and allocation, or by mounter_recover). Returns 0 and
 * *result, CSID_EINVAL for a bad request, CSID_ECONFLICT when the
 * allocation has the volume mounted with another usage or when another
 * allocation has it mounted through another plugin or external ID (e
 * names both), or the code of the failing RPC (csi_status_to_err) with e
 * naming the step and the plugin.
 */
int mounter_mount(struct mounter *m, const struct mounter_plugin *plugin,
		  const struct mounter_request *req, struct mounter_result *result, struct err *e);

/*
 * Unmounts volume_id for alloc_id: NodeUnpublishVolume, then
 * NodeUnstageVolume when no other allocation still uses the staging path.
 * NOT_FOUND from either RPC counts as done. Also finishes any half-done
 * operation recorded for this pair. Returns 0, CSID_ENOTFOUND when nothing
 * is recorded, CSID_EINVAL when plugin is not the one that mounted it, or
 * the code of the failing RPC (the record stays, a retry continues).
 */
int mounter_unmount(struct mounter *m, const struct mounter_plugin *plugin, const char *volume_id,
		    const char *alloc_id, struct err *e);

/*
 * How many entries each list of a forced unmount's report holds at most
 * (the first ones; the log has every one).
 */
#define MOUNTER_FORCE_NOTES 8

/*
 * What a forced unmount did without the plugin. Every string is owned by
 * the report (fixed arrays: allocate the report on the heap).
 */
struct mounter_force_report {
	/* The RPCs did not finish: the rest below was done by the agent. */
	bool forced;
	/* Steps the plugin did not do, each with why ("unpublish: ..."). */
	int n_skipped;
	char skipped[MOUNTER_FORCE_NOTES][ERR_MSG_MAX];
	/* Paths the agent unmounted itself; lazy: detached while busy. */
	int n_detached;
	char detached[MOUNTER_FORCE_NOTES][MOUNTER_PATH_MAX];
	bool lazy[MOUNTER_FORCE_NOTES];
	/* Paths left in place (used by another allocation, or not empty), with why. */
	int n_kept;
	char kept[MOUNTER_FORCE_NOTES][ERR_MSG_MAX];
};

/*
 * The operator's way out of a mount the plugin cannot take down: tries
 * the RPCs once (mounter_unmount's sequence, through plugin p when p is
 * not NULL; when it is NULL, no_plugin says why, e.g. "node plugin X is
 * not running"); then, whatever they left, unmounts every mount at or
 * under the target and (when no other allocation names it) the staging
 * path, lazily when busy, removes those directories, and drops the
 * record. *rep (zeroed first) says what was skipped. Returns 0 (also when
 * something was skipped), CSID_ENOTFOUND when nothing is recorded,
 * CSID_EINVAL for a bad name or a plugin that did not mount it, or
 * another code with e set when the agent itself could not unmount a path
 * or drop the record (the record then stays).
 */
int mounter_unmount_force(struct mounter *m, const struct mounter_plugin *p, const char *no_plugin,
			  const char *volume_id, const char *alloc_id,
			  struct mounter_force_report *rep, struct err *e);

/*
 * Grows the file system of volume_id on this node to capacity bytes after
 * its controller expanded it: NodeExpandVolume once per staging path of
 * the volume's published mounts through plugin p (once per volume when
 * the plugin does not stage), with volume_path a published target. A
 * plugin without the node capability EXPAND_VOLUME is not called: nothing
 * is to be done on the node, and that counts as done. Returns 0,
 * CSID_ENOTFOUND when no mount of the volume through p is published here,
 * CSID_EINVAL for a bad name, or the code of the failing RPC (the caller
 * retries; FAILED_PRECONDITION and OUT_OF_RANGE are final, csi_rules.h).
 */
int mounter_expand(struct mounter *m, const struct mounter_plugin *p, const char *volume_id,
		   int64_t capacity, struct err *e);

/*
 * Whether volume_id is published for alloc_id and its target is still a
 * mount point. Returns 0 with *out set, or a negative code with e set.
 */
int mounter_has_mount(struct mounter *m, const char *volume_id, const char *alloc_id, bool *out,
		      struct err *e);

/*
 * The record of volume_id for alloc_id, as a new *out (free with
 * mount_record_free), e.g. to find which plugin an unmount needs.
 * Returns 0, CSID_ENOTFOUND, CSID_EINVAL for a bad name, or another code.
 */
int mounter_get(struct mounter *m, const char *volume_id, const char *alloc_id,
		struct mount_record **out, struct err *e);

/*
 * Every record (for GET /v1/agent/mounts), ordered by volume then
 * allocation, as a new array of *n records (free with
 * mount_records_free). Records hold no secrets and no mount flags.
 */
int mounter_list(struct mounter *m, struct mount_record ***out, size_t *n, struct err *e);

/* <data_dir>/mounts, the data dir resolved: every staging path and target is under it. */
const char *mounter_mounts_dir(const struct mounter *m);

/*
 * Finds the node plugin named plugin_id for recovery (the callback may
 * wait a bounded time for it to become healthy). Returns 0 and fills *out,
 * or a negative code with e set (the records of that plugin are then left
 * for a later recovery or call).
 */
typedef int (*mounter_lookup_fn)(void *ctx, const char *plugin_id, struct mounter_plugin *out,
				 struct err *e);
/* Releases what a successful lookup returned; may be NULL. */
typedef void (*mounter_release_fn)(void *ctx, struct mounter_plugin *p);

struct mounter_recovery {
	int adopted; /* published records whose target is mounted */
	int rolled_back; /* mounts in progress at the crash, undone */
	int finished; /* unmounts in progress at the crash, completed */
	int lost; /* published records whose target was gone, cleaned up */
	int pending; /* records left for later (plugin missing or RPC failing) */
	int orphans; /* mounts under <data_dir>/mounts nobody owned, detached */
};

/*
 * Brings every record to a stable state after a start (see the rules in
 * mounter_recover.c), then detaches mounts under <data_dir>/mounts that no record
 * owns. Idempotent; may be called again while serving (e.g. when a plugin
 * comes back) to retry pending records. Fills *report when not NULL.
 * Returns 0 when nothing is pending, CSID_EUNAVAIL when some records are
 * pending (e names the first), or another negative code with e set.
 */
int mounter_recover(struct mounter *m, mounter_lookup_fn lookup, mounter_release_fn release,
		    void *ctx, struct mounter_recovery *report, struct err *e);

#endif
