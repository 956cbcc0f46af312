/*
 * The node RPCs of the volume mounter (NodeStageVolume, NodePublishVolume,
 * NodeUnpublishVolume, NodeUnstageVolume, NodeExpandVolume) for one mount record. Each call
 * is bounded by timeout_ms and returns 0 when the step is done (OK, or
 * NOT_FOUND on an unpublish/unstage, per csi_rules.h), else the csid code
 * of the gRPC status with e saying "node stage: plugin <id>: <CODE>:
 * <plugin message>". Blocking; thread-safe as far as the client is.
 */
#ifndef CSID_AGENT_MOUNT_RPC_H
#define CSID_AGENT_MOUNT_RPC_H

#include <stdint.h>

#include "agent/mount_store.h"
#include "agent/mounter.h"

/* Stages r's volume at r->staging_path with req's usage, contexts and secrets. */
int mount_rpc_stage(const struct mounter_plugin *p, int64_t timeout_ms,
		    const struct mount_record *r, const struct mounter_request *req, struct err *e);
/* Publishes r's volume at r->target_path (from r->staging_path when staged). */
int mount_rpc_publish(const struct mounter_plugin *p, int64_t timeout_ms,
		      const struct mount_record *r, const struct mounter_request *req,
		      struct err *e);
/* Unpublishes r->target_path. */
int mount_rpc_unpublish(const struct mounter_plugin *p, int64_t timeout_ms,
			const struct mount_record *r, struct err *e);
/*
 * Expands r's volume on the node to capacity bytes: NodeExpandVolume with
 * volume_path r->target_path, staging_target_path r->staging_path (when
 * staged) and r's capability.
 */
int mount_rpc_expand(const struct mounter_plugin *p, int64_t timeout_ms,
		     const struct mount_record *r, int64_t capacity, struct err *e);
/* Unstages r->staging_path. */
int mount_rpc_unstage(const struct mounter_plugin *p, int64_t timeout_ms,
		      const struct mount_record *r, struct err *e);

#endif
