/*
 * The table of CSI unary RPCs: one row per RPC with its service, method
 * name and protobuf-c message types. Everything that needs a per-RPC fact
 * (the client wrappers, the server dispatcher, the error rules, csictl)
 * is driven from this one list.
 */
#ifndef CSID_CSI_RPC_H
#define CSID_CSI_RPC_H

#include <stddef.h>

#include "csi.pb-c.h"

/*
 * X(ID, Service, Method, snake_name). The request type is
 * Csi__V1__<Method>Request, its descriptor
 * csi__v1__<snake_name>_request__descriptor, and likewise for Response.
 */
/* clang-format off */
#define CSI_RPCS(X)                                                              \
	X(GET_PLUGIN_INFO, Identity, GetPluginInfo, get_plugin_info)                 \
	X(GET_PLUGIN_CAPABILITIES, Identity, GetPluginCapabilities,                  \
	  get_plugin_capabilities)                                                   \
	X(PROBE, Identity, Probe, probe)                                             \
	X(CREATE_VOLUME, Controller, CreateVolume, create_volume)                    \
	X(DELETE_VOLUME, Controller, DeleteVolume, delete_volume)                    \
	X(CONTROLLER_PUBLISH_VOLUME, Controller, ControllerPublishVolume,            \
	  controller_publish_volume)                                                 \
	X(CONTROLLER_UNPUBLISH_VOLUME, Controller, ControllerUnpublishVolume,        \
	  controller_unpublish_volume)                                               \
	X(VALIDATE_VOLUME_CAPABILITIES, Controller, ValidateVolumeCapabilities,      \
	  validate_volume_capabilities)                                              \
	X(LIST_VOLUMES, Controller, ListVolumes, list_volumes)                       \
	X(GET_CAPACITY, Controller, GetCapacity, get_capacity)                       \
	X(CONTROLLER_GET_CAPABILITIES, Controller, ControllerGetCapabilities,        \
	  controller_get_capabilities)                                               \
	X(CREATE_SNAPSHOT, Controller, CreateSnapshot, create_snapshot)              \
	X(DELETE_SNAPSHOT, Controller, DeleteSnapshot, delete_snapshot)              \
	X(LIST_SNAPSHOTS, Controller, ListSnapshots, list_snapshots)                 \
	X(GET_SNAPSHOT, Controller, GetSnapshot, get_snapshot)                       \
	X(CONTROLLER_EXPAND_VOLUME, Controller, ControllerExpandVolume,              \
	  controller_expand_volume)                                                  \
	X(CONTROLLER_GET_VOLUME, Controller, ControllerGetVolume,                    \
	  controller_get_volume)                                                     \
	X(CONTROLLER_MODIFY_VOLUME, Controller, ControllerModifyVolume,              \
	  controller_modify_volume)                                                  \
	X(GROUP_CONTROLLER_GET_CAPABILITIES, GroupController,                        \
	  GroupControllerGetCapabilities, group_controller_get_capabilities)         \
	X(CREATE_VOLUME_GROUP_SNAPSHOT, GroupController, CreateVolumeGroupSnapshot, \
	  create_volume_group_snapshot)                                              \
	X(DELETE_VOLUME_GROUP_SNAPSHOT, GroupController, DeleteVolumeGroupSnapshot, \
	  delete_volume_group_snapshot)                                              \
	X(GET_VOLUME_GROUP_SNAPSHOT, GroupController, GetVolumeGroupSnapshot,        \
	  get_volume_group_snapshot)                                                 \
	X(NODE_STAGE_VOLUME, Node, NodeStageVolume, node_stage_volume)               \
	X(NODE_UNSTAGE_VOLUME, Node, NodeUnstageVolume, node_unstage_volume)         \
	X(NODE_PUBLISH_VOLUME, Node, NodePublishVolume, node_publish_volume)         \
	X(NODE_UNPUBLISH_VOLUME, Node, NodeUnpublishVolume, node_unpublish_volume)   \
	X(NODE_GET_VOLUME_STATS, Node, NodeGetVolumeStats, node_get_volume_stats)    \
	X(NODE_EXPAND_VOLUME, Node, NodeExpandVolume, node_expand_volume)            \
	X(NODE_GET_CAPABILITIES, Node, NodeGetCapabilities, node_get_capabilities)   \
	X(NODE_GET_INFO, Node, NodeGetInfo, node_get_info)
/* clang-format on */

enum csi_rpc {
#define CSI_RPC_ENUM_(id, svc, method, snake) CSI_RPC_##id,
	CSI_RPCS(CSI_RPC_ENUM_)
#undef CSI_RPC_ENUM_
	    CSI_RPC_COUNT
};

struct csi_rpc_info {
	const char *path; /* "/csi.v1.Identity/Probe" */
	const char *name; /* "Probe" */
	const char *service; /* "Identity" */
	const ProtobufCMessageDescriptor *request;
	const ProtobufCMessageDescriptor *response;
};

/* Row of rpc, or NULL when rpc is out of range. */
const struct csi_rpc_info *csi_rpc_info(enum csi_rpc rpc);
/* RPC with the given method path ("/csi.v1.Node/NodeGetInfo"); -1 if none. */
int csi_rpc_by_path(const char *path, size_t len);
/* RPC with the given method name ("NodeGetInfo"); -1 if none. */
int csi_rpc_by_name(const char *name);
/*
 * Size of one element of a repeated field of type t in a protobuf-c
 * message (what the field's array holds), for code that walks messages
 * generically.
 */
size_t csi_rpc_elem_size(ProtobufCType t);

#endif
