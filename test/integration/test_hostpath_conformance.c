/*
 * csi-hostpath against the error tables of CSI spec v1.12: one table row
 * per misuse the spec names for an RPC of Identity, Controller or Node
 * (plus the INVALID_ARGUMENT of each required field, the precedence of
 * INVALID_ARGUMENT over NOT_FOUND over FAILED_PRECONDITION, and the OK
 * that the spec asks for where something is already done or already
 * gone), each run against the real plugin process over gRPC.
 *
 * A row is {rpc, setup, changes, expected code}. The setup makes the
 * state the row needs (a volume, published, staged, ...) under names of
 * its own, so rows never share state. The request starts as the RPC's
 * valid request (conf_base) and the row's changes are applied to it:
 * "field.sub=value;..." where a field path walks into sub-messages
 * (allocating them, and choosing the oneof member named), a number
 * indexes a repeated message field (the next index appends), "field="
 * clears a message, a repeated field or a string, and "{}" sets an empty
 * message. $vol, $vol2, $snap, $staging, $target, $target2, $pods,
 * $data and $row stand for the row's own values.
 *
 * Not in the table: ControllerPublishVolume's RESOURCE_EXHAUSTED (node
 * full) needs --max-volumes-per-node and is in test_hostpath_ctl; Probe's
 * FAILED_PRECONDITION needs the data dir removed; ABORTED for a pending
 * operation cannot happen (the plugin serialises calls); the
 * FAILED_PRECONDITION of expansion while published cannot either (ONLINE).
 *
 * The table runs twice: on a plugin without --enable-alpha, where the
 * spec's alpha methods (ControllerGetVolume, GetSnapshot) must answer
 * UNIMPLEMENTED, and on one with it, where they answer per the table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "hostpath_proc.h"
#include "util/arena.h"

#define SNW CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER

enum conf_setup {
	S_NONE, /* $vol and $snap name nothing that exists */
	S_VOLUME, /* $vol: a 1 MiB mount volume named src-$row; $vol2 another */
	S_BLOCK, /* $vol: a 1 MiB block volume named src-$row */
	S_PUBLISHED, /* S_VOLUME, ControllerPublished to node-1 (SINGLE_NODE_WRITER) */
	S_STAGED, /* S_PUBLISHED, staged at $staging */
	S_NODE_PUBLISHED, /* S_STAGED, published at $target */
	S_SNAPSHOT, /* S_VOLUME and $snap: a snapshot of $vol named ssnap-$row */
	S_HUGE, /* $vol: a 60 GiB mount volume (of the plugin's 100 GiB) named src-$row */
};

struct conf_row {
	enum csi_rpc rpc;
	enum conf_setup setup;
	const char *change;
	int code;
	const char *why;
};

#define IA CSI_INVALID_ARGUMENT
#define NF CSI_NOT_FOUND
#define AE CSI_ALREADY_EXISTS
#define FP CSI_FAILED_PRECONDITION
#define OOR CSI_OUT_OF_RANGE
#define MOUNT_CAP(f) f ".mount.fs_type=;" f ".access_mode.mode=1"

/* The valid request of each RPC, before a row's changes. */
static const char *const conf_base[CSI_RPC_COUNT] = {
    [CSI_RPC_CREATE_VOLUME] =
	"name=conf-$row;capacity_range.required_bytes=1048576;" MOUNT_CAP("volume_capabilities.0"),
    [CSI_RPC_DELETE_VOLUME] = "volume_id=$vol",
    [CSI_RPC_CONTROLLER_PUBLISH_VOLUME] =
	"volume_id=$vol;node_id=node-1;" MOUNT_CAP("volume_capability"),
    [CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME] = "volume_id=$vol;node_id=node-1",
    [CSI_RPC_VALIDATE_VOLUME_CAPABILITIES] = "volume_id=$vol;" MOUNT_CAP("volume_capabilities.0"),
    [CSI_RPC_GET_CAPACITY] = MOUNT_CAP("volume_capabilities.0"),
    [CSI_RPC_CREATE_SNAPSHOT] = "name=csnap-$row;source_volume_id=$vol",
    [CSI_RPC_DELETE_SNAPSHOT] = "snapshot_id=$snap",
    [CSI_RPC_GET_SNAPSHOT] = "snapshot_id=$snap",
    [CSI_RPC_CONTROLLER_EXPAND_VOLUME] = "volume_id=$vol;capacity_range.required_bytes=2097152",
    [CSI_RPC_CONTROLLER_GET_VOLUME] = "volume_id=$vol",
    [CSI_RPC_CONTROLLER_MODIFY_VOLUME] =
	"volume_id=$vol;mutable_parameters.0.key=iops;mutable_parameters.0.value=100",
    [CSI_RPC_NODE_STAGE_VOLUME] =
	"volume_id=$vol;staging_target_path=$staging;" MOUNT_CAP("volume_capability"),
    [CSI_RPC_NODE_UNSTAGE_VOLUME] = "volume_id=$vol;staging_target_path=$staging",
    [CSI_RPC_NODE_PUBLISH_VOLUME] =
	"volume_id=$vol;staging_target_path=$staging;target_path=$target;" MOUNT_CAP(
	    "volume_capability"),
    [CSI_RPC_NODE_UNPUBLISH_VOLUME] = "volume_id=$vol;target_path=$target",
    [CSI_RPC_NODE_GET_VOLUME_STATS] = "volume_id=$vol;volume_path=$target",
    [CSI_RPC_NODE_EXPAND_VOLUME] =
	"volume_id=$vol;volume_path=$target;capacity_range.required_bytes=1048576",
};

/* 200 GiB: more than the plugin's default --capacity of 100 GiB. */
#define TOO_BIG "214748364800"

static const struct conf_row conf_rows[] = {
    /* Identity */
    {CSI_RPC_GET_PLUGIN_INFO, S_NONE, "", CSI_OK, "always served"},
    {CSI_RPC_GET_PLUGIN_CAPABILITIES, S_NONE, "", CSI_OK, "always served"},
    {CSI_RPC_PROBE, S_NONE, "", CSI_OK, "healthy"},

    /* CreateVolume */
    {CSI_RPC_CREATE_VOLUME, S_NONE, "", CSI_OK, "valid request"},
    {CSI_RPC_CREATE_VOLUME, S_NONE, "name=", IA, "name is required"},
    {CSI_RPC_CREATE_VOLUME, S_NONE, "volume_capabilities=", IA, "capabilities are required"},
    {CSI_RPC_CREATE_VOLUME, S_NONE, "volume_capabilities.0.access_mode=", IA,
     "access_mode is required"},
    {CSI_RPC_CREATE_VOLUME, S_NONE, "volume_capabilities.0.access_mode.mode=0", IA,
     "access mode UNKNOWN"},
    {CSI_RPC_CREATE_VOLUME, S_NONE, "volume_capabilities.0.mount=", IA, "access_type is required"},
    {CSI_RPC_CREATE_VOLUME, S_NONE, "capacity_range.required_bytes=-1", IA,
     "required_bytes must not be negative"},
    {CSI_RPC_CREATE_VOLUME, S_NONE,
     "capacity_range.required_bytes=2097152;capacity_range.limit_bytes=1048576", OOR,
     "unsupported capacity_range: limit below required"},
    {CSI_RPC_CREATE_VOLUME, S_NONE, "capacity_range.required_bytes=" TOO_BIG, OOR,
     "unsupported capacity_range: above the plugin's capacity"},
    {CSI_RPC_CREATE_VOLUME, S_NONE, "volume_content_source.snapshot.snapshot_id=snap-missing", NF,
     "source snapshot does not exist"},
    {CSI_RPC_CREATE_VOLUME, S_NONE, "volume_content_source.volume.volume_id=vol-missing", NF,
     "source volume does not exist"},
    {CSI_RPC_CREATE_VOLUME, S_NONE, "volume_content_source.snapshot.snapshot_id=", IA,
     "source without an ID"},
    {CSI_RPC_CREATE_VOLUME, S_NONE, "volume_content_source={}", IA,
     "source of no kind: unsupported"},
    {CSI_RPC_CREATE_VOLUME, S_BLOCK, "volume_content_source.volume.volume_id=$vol", IA,
     "source incompatible: a block volume for a mount volume"},
    {CSI_RPC_CREATE_VOLUME, S_SNAPSHOT, "volume_content_source.snapshot.snapshot_id=$snap", CSI_OK,
     "from a snapshot"},
    {CSI_RPC_CREATE_VOLUME, S_VOLUME, "name=src-$row", CSI_OK,
     "same name, compatible: the existing volume"},
    {CSI_RPC_CREATE_VOLUME, S_VOLUME, "name=src-$row;capacity_range.required_bytes=10485760", AE,
     "same name, incompatible capacity"},
    {CSI_RPC_CREATE_VOLUME, S_VOLUME,
     "name=src-$row;volume_capabilities.0.block={};volume_capabilities.0.access_mode.mode=1", AE,
     "same name, incompatible access type"},
    {CSI_RPC_CREATE_VOLUME, S_NONE,
     "accessibility_requirements.requisite.0.segments.0.key=topology.hostpath.csi/node;"
     "accessibility_requirements.requisite.0.segments.0.value=node-9",
     CSI_RESOURCE_EXHAUSTED, "unable to provision in the requisite topology"},
    {CSI_RPC_CREATE_VOLUME, S_NONE, "name=;volume_content_source.snapshot.snapshot_id=snap-missing",
     IA, "precedence: missing name before a missing source"},
    {CSI_RPC_CREATE_VOLUME, S_VOLUME, "name=src-$row;capacity_range.required_bytes=-1", IA,
     "precedence: a bad range before ALREADY_EXISTS"},

    /* DeleteVolume */
    {CSI_RPC_DELETE_VOLUME, S_NONE, "volume_id=", IA, "volume_id is required"},
    {CSI_RPC_DELETE_VOLUME, S_NONE, "", CSI_OK, "a volume that does not exist: OK"},
    {CSI_RPC_DELETE_VOLUME, S_VOLUME, "", CSI_OK, "deleted"},
    {CSI_RPC_DELETE_VOLUME, S_PUBLISHED, "", FP, "volume in use (published)"},
    {CSI_RPC_DELETE_VOLUME, S_SNAPSHOT, "", CSI_OK, "snapshots do not depend on the volume"},

    /* ControllerPublishVolume */
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, S_VOLUME, "", CSI_OK, "valid request"},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, S_VOLUME, "volume_id=", IA, "volume_id is required"},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, S_VOLUME, "node_id=", IA, "node_id is required"},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, S_VOLUME, "volume_capability=", IA,
     "volume_capability is required"},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, S_VOLUME, "volume_capability.access_mode=", IA,
     "access_mode is required"},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, S_NONE, "", NF, "volume does not exist"},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, S_VOLUME, "node_id=node-9", NF, "node does not exist"},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, S_NONE, "volume_capability=", IA,
     "precedence: missing capability before a missing volume"},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, S_PUBLISHED, "", CSI_OK,
     "already published, compatible: OK"},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, S_PUBLISHED, "readonly=1", AE,
     "already published to the node, incompatible"},
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, S_PUBLISHED, "node_id=node-2", FP,
     "published to another node, not MULTI_NODE"},

    /* ControllerUnpublishVolume */
    {CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, S_NONE, "volume_id=", IA, "volume_id is required"},
    {CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, S_PUBLISHED, "", CSI_OK, "unpublished"},
    {CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, S_VOLUME, "", CSI_OK, "not published: OK"},
    {CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, S_NONE, "", CSI_OK,
     "unknown volume, safely unpublished: OK"},
    {CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, S_PUBLISHED, "node_id=", CSI_OK,
     "no node_id: every node"},

    /* ValidateVolumeCapabilities */
    {CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, S_VOLUME, "", CSI_OK, "valid request"},
    {CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, S_VOLUME, "volume_id=", IA, "volume_id is required"},
    {CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, S_VOLUME, "volume_capabilities=", IA,
     "capabilities are required"},
    {CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, S_NONE, "", NF, "volume does not exist"},
    {CSI_RPC_VALIDATE_VOLUME_CAPABILITIES, S_NONE, "volume_capabilities=", IA,
     "precedence: missing capabilities before a missing volume"},

    /* ListVolumes, GetCapacity, ControllerGetCapabilities */
    {CSI_RPC_LIST_VOLUMES, S_VOLUME, "", CSI_OK, "valid request"},
    {CSI_RPC_LIST_VOLUMES, S_NONE, "starting_token=bogus", CSI_ABORTED, "invalid starting_token"},
    {CSI_RPC_LIST_VOLUMES, S_NONE, "starting_token=99999999", CSI_ABORTED,
     "starting_token never issued"},
    {CSI_RPC_LIST_VOLUMES, S_NONE, "max_entries=-1", IA, "negative max_entries"},
    {CSI_RPC_LIST_VOLUMES, S_VOLUME, "max_entries=2147483647", CSI_OK, "max_entries INT32_MAX"},
    {CSI_RPC_GET_CAPACITY, S_NONE, "", CSI_OK, "valid request"},
    {CSI_RPC_GET_CAPACITY, S_NONE, "volume_capabilities.0.access_mode=", IA,
     "a malformed capability"},
    {CSI_RPC_CONTROLLER_GET_CAPABILITIES, S_NONE, "", CSI_OK, "always served"},

    /* CreateSnapshot, DeleteSnapshot, ListSnapshots, GetSnapshot */
    {CSI_RPC_CREATE_SNAPSHOT, S_VOLUME, "", CSI_OK, "valid request"},
    {CSI_RPC_CREATE_SNAPSHOT, S_VOLUME, "name=", IA, "name is required"},
    {CSI_RPC_CREATE_SNAPSHOT, S_VOLUME, "source_volume_id=", IA, "source_volume_id is required"},
    {CSI_RPC_CREATE_SNAPSHOT, S_NONE, "", NF, "source volume does not exist"},
    {CSI_RPC_CREATE_SNAPSHOT, S_NONE, "name=", IA,
     "precedence: missing name before a missing source"},
    {CSI_RPC_CREATE_SNAPSHOT, S_SNAPSHOT, "name=ssnap-$row", CSI_OK,
     "same name, same source: the existing snapshot"},
    {CSI_RPC_CREATE_SNAPSHOT, S_SNAPSHOT, "name=ssnap-$row;source_volume_id=$vol2", AE,
     "same name, another source"},
    {CSI_RPC_CREATE_SNAPSHOT, S_HUGE, "", CSI_RESOURCE_EXHAUSTED,
     "not enough space for the snapshot"},
    {CSI_RPC_DELETE_SNAPSHOT, S_NONE, "snapshot_id=", IA, "snapshot_id is required"},
    {CSI_RPC_DELETE_SNAPSHOT, S_NONE, "", CSI_OK, "a snapshot that does not exist: OK"},
    {CSI_RPC_DELETE_SNAPSHOT, S_SNAPSHOT, "", CSI_OK, "deleted"},
    {CSI_RPC_LIST_SNAPSHOTS, S_SNAPSHOT, "", CSI_OK, "valid request"},
    {CSI_RPC_LIST_SNAPSHOTS, S_NONE, "starting_token=bogus", CSI_ABORTED, "invalid starting_token"},
    {CSI_RPC_LIST_SNAPSHOTS, S_NONE, "max_entries=-1", IA, "negative max_entries"},
    {CSI_RPC_LIST_SNAPSHOTS, S_SNAPSHOT, "max_entries=2147483647", CSI_OK, "max_entries INT32_MAX"},
    {CSI_RPC_LIST_SNAPSHOTS, S_NONE, "snapshot_id=snap-missing", CSI_OK,
     "an unknown snapshot_id: an empty list"},
    {CSI_RPC_GET_SNAPSHOT, S_SNAPSHOT, "", CSI_OK, "valid request"},
    {CSI_RPC_GET_SNAPSHOT, S_NONE, "snapshot_id=", IA, "snapshot_id is required"},
    {CSI_RPC_GET_SNAPSHOT, S_NONE, "", NF, "snapshot does not exist"},

    /* ControllerExpandVolume */
    {CSI_RPC_CONTROLLER_EXPAND_VOLUME, S_VOLUME, "", CSI_OK, "valid request"},
    {CSI_RPC_CONTROLLER_EXPAND_VOLUME, S_PUBLISHED, "", CSI_OK, "ONLINE expansion"},
    {CSI_RPC_CONTROLLER_EXPAND_VOLUME, S_VOLUME, "volume_id=", IA, "volume_id is required"},
    {CSI_RPC_CONTROLLER_EXPAND_VOLUME, S_VOLUME, "capacity_range=", IA,
     "capacity_range is required"},
    {CSI_RPC_CONTROLLER_EXPAND_VOLUME, S_VOLUME, "capacity_range.required_bytes=-1", IA,
     "negative required_bytes"},
    {CSI_RPC_CONTROLLER_EXPAND_VOLUME, S_VOLUME, "volume_capability.access_mode.mode=0", IA,
     "a malformed capability"},
    {CSI_RPC_CONTROLLER_EXPAND_VOLUME, S_NONE, "", NF, "volume does not exist"},
    {CSI_RPC_CONTROLLER_EXPAND_VOLUME, S_VOLUME,
     "capacity_range.required_bytes=4194304;capacity_range.limit_bytes=2097152", OOR,
     "unsupported capacity_range: limit below required"},
    {CSI_RPC_CONTROLLER_EXPAND_VOLUME, S_VOLUME, "capacity_range.required_bytes=" TOO_BIG, OOR,
     "unsupported capacity_range: above the plugin's capacity"},
    {CSI_RPC_CONTROLLER_EXPAND_VOLUME, S_NONE, "capacity_range=", IA,
     "precedence: missing range before a missing volume"},

    /* ControllerGetVolume (alpha) */
    {CSI_RPC_CONTROLLER_GET_VOLUME, S_VOLUME, "", CSI_OK, "valid request"},
    {CSI_RPC_CONTROLLER_GET_VOLUME, S_NONE, "volume_id=", IA, "volume_id is required"},
    {CSI_RPC_CONTROLLER_GET_VOLUME, S_NONE, "", NF, "volume does not exist"},

    /* ControllerModifyVolume */
    {CSI_RPC_CONTROLLER_MODIFY_VOLUME, S_VOLUME, "", CSI_OK, "valid request"},
    {CSI_RPC_CONTROLLER_MODIFY_VOLUME, S_VOLUME, "volume_id=", IA, "volume_id is required"},
    {CSI_RPC_CONTROLLER_MODIFY_VOLUME, S_VOLUME, "mutable_parameters=", IA,
     "mutable_parameters is required"},
    {CSI_RPC_CONTROLLER_MODIFY_VOLUME, S_VOLUME, "mutable_parameters.0.key=bogus", IA,
     "a parameter the plugin does not support"},
    {CSI_RPC_CONTROLLER_MODIFY_VOLUME, S_VOLUME, "mutable_parameters.0.value=0", IA,
     "a value the plugin does not support"},
    {CSI_RPC_CONTROLLER_MODIFY_VOLUME, S_NONE, "", NF, "volume does not exist"},
    {CSI_RPC_CONTROLLER_MODIFY_VOLUME, S_NONE, "mutable_parameters=", IA,
     "precedence: missing parameters before a missing volume"},

    /* NodeStageVolume */
    {CSI_RPC_NODE_STAGE_VOLUME, S_PUBLISHED, "", CSI_OK, "valid request"},
    {CSI_RPC_NODE_STAGE_VOLUME, S_PUBLISHED, "volume_id=", IA, "volume_id is required"},
    {CSI_RPC_NODE_STAGE_VOLUME, S_PUBLISHED, "staging_target_path=", IA,
     "staging_target_path is required"},
    {CSI_RPC_NODE_STAGE_VOLUME, S_PUBLISHED, "volume_capability=", IA,
     "volume_capability is required"},
    {CSI_RPC_NODE_STAGE_VOLUME, S_PUBLISHED, "staging_target_path=relative/dir", IA,
     "staging_target_path must be absolute"},
    {CSI_RPC_NODE_STAGE_VOLUME, S_PUBLISHED, "staging_target_path=$data/volumes", IA,
     "staging_target_path inside the plugin's data dir"},
    {CSI_RPC_NODE_STAGE_VOLUME, S_NONE, "", NF, "volume does not exist"},
    {CSI_RPC_NODE_STAGE_VOLUME, S_NONE, "volume_capability=", IA,
     "precedence: missing capability before a missing volume"},
    {CSI_RPC_NODE_STAGE_VOLUME, S_STAGED, "", CSI_OK, "already staged, compatible: OK"},
    {CSI_RPC_NODE_STAGE_VOLUME, S_STAGED, "volume_capability.mount.fs_type=xfs", AE,
     "already staged at the path, incompatible capability"},
    {CSI_RPC_NODE_STAGE_VOLUME, S_STAGED, "staging_target_path=$pods", FP,
     "already staged at another path"},
    {CSI_RPC_NODE_STAGE_VOLUME, S_VOLUME, "", FP,
     "not ControllerPublished (PUBLISH_UNPUBLISH_VOLUME is set)"},
    {CSI_RPC_NODE_STAGE_VOLUME, S_PUBLISHED,
     "volume_capability.block={};volume_capability.access_mode.mode=1", FP,
     "exceeds capabilities: block access to a mount volume"},

    /* NodeUnstageVolume */
    {CSI_RPC_NODE_UNSTAGE_VOLUME, S_STAGED, "", CSI_OK, "unstaged"},
    {CSI_RPC_NODE_UNSTAGE_VOLUME, S_STAGED, "volume_id=", IA, "volume_id is required"},
    {CSI_RPC_NODE_UNSTAGE_VOLUME, S_STAGED, "staging_target_path=", IA,
     "staging_target_path is required"},
    {CSI_RPC_NODE_UNSTAGE_VOLUME, S_PUBLISHED, "", CSI_OK, "not staged: OK"},
    {CSI_RPC_NODE_UNSTAGE_VOLUME, S_NONE, "", NF, "volume does not exist"},

    /* NodePublishVolume */
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_STAGED, "", CSI_OK, "valid request"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_STAGED, "volume_id=", IA, "volume_id is required"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_STAGED, "target_path=", IA, "target_path is required"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_STAGED, "volume_capability=", IA,
     "volume_capability is required"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_STAGED, "target_path=relative/t", IA,
     "target_path must be absolute"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_STAGED, "target_path=$staging", IA,
     "target_path equal to staging_target_path"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_STAGED, "staging_target_path=;volume_capability=", IA,
     "precedence: missing capability before the missing staging path"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_NONE, "", NF, "volume does not exist"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_NONE, "volume_capability=", IA,
     "precedence: missing capability before a missing volume"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_NONE, "staging_target_path=", NF,
     "precedence: a missing volume before the missing staging path"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_STAGED, "staging_target_path=", FP,
     "STAGE_UNSTAGE_VOLUME set but no staging_target_path"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_PUBLISHED, "", FP, "not staged"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_NODE_PUBLISHED, "", CSI_OK,
     "already published, compatible: OK"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_NODE_PUBLISHED, "readonly=1", AE,
     "already published at the target, incompatible"},
    {CSI_RPC_NODE_PUBLISH_VOLUME, S_NODE_PUBLISHED, "target_path=$target2", FP,
     "second target under SINGLE_NODE_WRITER"},

    /* NodeUnpublishVolume */
    {CSI_RPC_NODE_UNPUBLISH_VOLUME, S_NODE_PUBLISHED, "", CSI_OK, "unpublished"},
    {CSI_RPC_NODE_UNPUBLISH_VOLUME, S_NODE_PUBLISHED, "volume_id=", IA, "volume_id is required"},
    {CSI_RPC_NODE_UNPUBLISH_VOLUME, S_NODE_PUBLISHED, "target_path=", IA,
     "target_path is required"},
    {CSI_RPC_NODE_UNPUBLISH_VOLUME, S_STAGED, "", CSI_OK, "not published: OK"},
    {CSI_RPC_NODE_UNPUBLISH_VOLUME, S_NONE, "", NF, "volume does not exist"},

    /* NodeGetVolumeStats */
    {CSI_RPC_NODE_GET_VOLUME_STATS, S_NODE_PUBLISHED, "", CSI_OK, "valid request"},
    {CSI_RPC_NODE_GET_VOLUME_STATS, S_STAGED, "volume_path=$staging", CSI_OK, "staging path"},
    {CSI_RPC_NODE_GET_VOLUME_STATS, S_NODE_PUBLISHED, "volume_id=", IA, "volume_id is required"},
    {CSI_RPC_NODE_GET_VOLUME_STATS, S_NODE_PUBLISHED, "volume_path=", IA,
     "volume_path is required"},
    {CSI_RPC_NODE_GET_VOLUME_STATS, S_NONE, "", NF, "volume does not exist"},
    {CSI_RPC_NODE_GET_VOLUME_STATS, S_NODE_PUBLISHED, "volume_id=../etc", NF,
     "a volume_id that cannot exist"},
    {CSI_RPC_NODE_GET_VOLUME_STATS, S_NODE_PUBLISHED, "volume_path=relative/t", NF,
     "not published at a relative path"},
    {CSI_RPC_NODE_GET_VOLUME_STATS, S_NODE_PUBLISHED, "volume_path=$data/volumes/$vol", NF,
     "not published inside the plugin's data dir"},
    {CSI_RPC_NODE_GET_VOLUME_STATS, S_NODE_PUBLISHED, "volume_path=/nonexistent/path", NF,
     "not published at a path that does not exist"},
    {CSI_RPC_NODE_GET_VOLUME_STATS, S_NODE_PUBLISHED, "volume_path=$target2", NF,
     "not published at that path"},
    {CSI_RPC_NODE_GET_VOLUME_STATS, S_VOLUME, "", NF, "neither staged nor published"},

    /* NodeExpandVolume */
    {CSI_RPC_NODE_EXPAND_VOLUME, S_NODE_PUBLISHED, "", CSI_OK, "valid request"},
    {CSI_RPC_NODE_EXPAND_VOLUME, S_NODE_PUBLISHED, "volume_id=", IA, "volume_id is required"},
    {CSI_RPC_NODE_EXPAND_VOLUME, S_NODE_PUBLISHED, "volume_path=", IA, "volume_path is required"},
    {CSI_RPC_NODE_EXPAND_VOLUME, S_NODE_PUBLISHED, "capacity_range.required_bytes=-1", IA,
     "negative required_bytes"},
    {CSI_RPC_NODE_EXPAND_VOLUME, S_NODE_PUBLISHED, "volume_capability.access_mode.mode=0", IA,
     "a malformed capability"},
    {CSI_RPC_NODE_EXPAND_VOLUME, S_NONE, "", NF, "volume does not exist"},
    {CSI_RPC_NODE_EXPAND_VOLUME, S_NODE_PUBLISHED, "volume_path=relative/t", NF,
     "not published at a relative path"},
    {CSI_RPC_NODE_EXPAND_VOLUME, S_NODE_PUBLISHED, "volume_path=$data/volumes/$vol", NF,
     "not published inside the plugin's data dir"},
    {CSI_RPC_NODE_EXPAND_VOLUME, S_NODE_PUBLISHED, "volume_path=/nonexistent/path", NF,
     "not published at a path that does not exist"},
    {CSI_RPC_NODE_EXPAND_VOLUME, S_NODE_PUBLISHED, "capacity_range.required_bytes=2097152", OOR,
     "more than the controller gave the volume"},
    {CSI_RPC_NODE_EXPAND_VOLUME, S_NODE_PUBLISHED,
     "volume_path=relative/t;capacity_range.required_bytes=-1", IA,
     "precedence: a bad range before a path not found"},

    /* NodeGetCapabilities, NodeGetInfo */
    {CSI_RPC_NODE_GET_CAPABILITIES, S_NONE, "", CSI_OK, "always served"},
    {CSI_RPC_NODE_GET_INFO, S_NONE, "", CSI_OK, "always served"},
};

struct conf_fx {
	struct hpp_proc h;
	struct hpp_client cl;
	bool alpha;
};

/* The row's own names and paths, the values of the $ names. */
struct conf_ctx {
	char row[16];
	char vol[64], vol2[64], snap[64];
	char dir[160], staging[200], pods[200], target[220], target2[220];
	const char *data;
};

static int conf_teardown(void **state)
{
	struct conf_fx *f = *state;

	hpp_client_close(&f->cl);
	hpp_proc_cleanup(&f->h);
	free(f);
	return 0;
}

static int conf_setup_with(void **state, bool alpha)
{
	struct conf_fx *f = calloc(1, sizeof(*f));
	const char *const args[] = {alpha ? "--enable-alpha" : NULL, NULL};
	struct hpp_proc node2;
	int rc;

	if (!f)
		return -1;
	*state = f;
	f->alpha = alpha;
	if (hpp_proc_start(&f->h, args) != 0 || hpp_client_open(&f->cl, f->h.endpoint) != 0) {
		conf_teardown(state);
		return -1;
	}
	/* A node plugin with node ID node-2 registers it in the shared data dir. */
	memset(&node2, 0, sizeof(node2));
	rc = hpp_proc_start(&node2, (const char *const[]){"--data-dir", f->h.data, "--mode", "node",
							  "--node-id", "node-2", NULL});
	hpp_proc_cleanup(&node2);
	if (rc != 0) {
		conf_teardown(state);
		return -1;
	}
	return 0;
}

static int conf_setup(void **state)
{
	return conf_setup_with(state, false);
}

static int conf_setup_alpha(void **state)
{
	return conf_setup_with(state, true);
}

/* Value of a $ name, or NULL. */
static const char *conf_var(const struct conf_ctx *c, const char *name, size_t len)
{
	static const struct {
		const char *name;
		size_t off;
	} vars[] = {
	    {"row", offsetof(struct conf_ctx, row)},
	    {"vol2", offsetof(struct conf_ctx, vol2)},
	    {"vol", offsetof(struct conf_ctx, vol)},
	    {"snap", offsetof(struct conf_ctx, snap)},
	    {"staging", offsetof(struct conf_ctx, staging)},
	    {"pods", offsetof(struct conf_ctx, pods)},
	    {"target2", offsetof(struct conf_ctx, target2)},
	    {"target", offsetof(struct conf_ctx, target)},
	};

	if (len == 4 && strncmp(name, "data", 4) == 0)
		return c->data;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (strlen(vars[i].name) == len && strncmp(name, vars[i].name, len) == 0)
			return (const char *)c + vars[i].off;
	return NULL;
}

/* text with every $name replaced, from the arena; NULL for an unknown name. */
static char *conf_expand(struct arena *a, const struct conf_ctx *c, const char *text)
{
	char buf[2048];
	size_t n = 0;

	for (const char *s = text; *s && n < sizeof(buf) - 1;) {
		size_t len;
		const char *v;

		if (*s != '$') {
			buf[n++] = *s++;
			continue;
		}
		len = strspn(s + 1, "abcdefghijklmnopqrstuvwxyz0123456789");
		v = conf_var(c, s + 1, len);
		if (!v)
			return NULL;
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s", v);
		s += len + 1;
	}
	buf[n < sizeof(buf) ? n : sizeof(buf) - 1] = '\0';
	return arena_strdup(a, buf);
}

static ProtobufCMessage *conf_new_msg(struct arena *a, const ProtobufCMessageDescriptor *d)
{
	ProtobufCMessage *m = arena_alloc(a, d->sizeof_message);

	if (m)
		protobuf_c_message_init(d, m);
	return m;
}

/* Sets the field at a dotted path of m to value (see the top of the file); 0 or -1. */
static int conf_set(struct arena *a, ProtobufCMessage *m, const char *path, const char *value)
{
	size_t len = strcspn(path, ".");
	const char *rest = path[len] ? path + len + 1 : NULL;
	const ProtobufCFieldDescriptor *fd;
	char name[64], *base = (char *)m, *end;
	uint32_t *oneof_case = NULL;

	snprintf(name, sizeof(name), "%.*s", (int)len, path);
	fd = protobuf_c_message_descriptor_get_field_by_name(m->descriptor, name);
	if (!fd)
		return -1;
	if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
		size_t *n = (size_t *)(base + fd->quantifier_offset);
		ProtobufCMessage ***arr = (ProtobufCMessage ***)(base + fd->offset);
		ProtobufCMessage **grown;
		long i;

		if (!rest) {
			if (*value)
				return -1;
			*n = 0;
			return 0;
		}
		i = strtol(rest, &end, 10);
		if (end == rest || *end != '.' || fd->type != PROTOBUF_C_TYPE_MESSAGE || i < 0 ||
		    (size_t)i > *n)
			return -1;
		if ((size_t)i == *n) {
			grown = arena_alloc(a, (*n + 1) * sizeof(*grown));
			if (!grown)
				return -1;
			if (*n)
				memcpy(grown, *arr, *n * sizeof(*grown));
			grown[*n] = conf_new_msg(a, fd->descriptor);
			if (!grown[*n])
				return -1;
			*arr = grown;
			(*n)++;
		}
		return conf_set(a, (*arr)[i], end + 1, value);
	}
	if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
		oneof_case = (uint32_t *)(base + fd->quantifier_offset);
	if (fd->type == PROTOBUF_C_TYPE_MESSAGE) {
		ProtobufCMessage **sub = (ProtobufCMessage **)(base + fd->offset);

		if (!rest && !*value) {
			*sub = NULL;
			if (oneof_case)
				*oneof_case = 0;
			return 0;
		}
		if (!*sub || (oneof_case && *oneof_case != fd->id)) {
			*sub = conf_new_msg(a, fd->descriptor);
			if (!*sub)
				return -1;
		}
		if (oneof_case)
			*oneof_case = fd->id;
		if (!rest)
			return strcmp(value, "{}") == 0 ? 0 : -1;
		return conf_set(a, *sub, rest, value);
	}
	if (rest)
		return -1;
	switch (fd->type) {
	case PROTOBUF_C_TYPE_STRING:
		*(char **)(base + fd->offset) = arena_strdup(a, value);
		break;
	case PROTOBUF_C_TYPE_BOOL:
		*(protobuf_c_boolean *)(base + fd->offset) = strcmp(value, "1") == 0;
		break;
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_ENUM:
		*(int32_t *)(base + fd->offset) = (int32_t)strtol(value, NULL, 10);
		break;
	case PROTOBUF_C_TYPE_INT64:
		*(int64_t *)(base + fd->offset) = strtoll(value, NULL, 10);
		break;
	default:
		return -1;
	}
	if (oneof_case)
		*oneof_case = fd->id;
	return 0;
}

/* Applies "path=value;..." (after $ expansion) to m; 0 or -1. */
static int conf_apply(struct arena *a, const struct conf_ctx *c, ProtobufCMessage *m,
		      const char *changes)
{
	char *text = conf_expand(a, c, changes ? changes : "");
	char *item, *next;

	if (!text)
		return -1;
	for (item = text; item && *item; item = next) {
		char *eq;

		next = strchr(item, ';');
		if (next)
			*next++ = '\0';
		eq = strchr(item, '=');
		if (!eq)
			return -1;
		*eq = '\0';
		if (conf_set(a, m, item, eq + 1) != 0)
			return -1;
	}
	return 0;
}

static int conf_snapshot(struct conf_fx *f, const char *name, const char *vol, char *id)
{
	Csi__V1__CreateSnapshotRequest r = CSI__V1__CREATE_SNAPSHOT_REQUEST__INIT;
	Csi__V1__CreateSnapshotResponse *out;
	int code;

	r.name = (char *)name;
	r.source_volume_id = (char *)vol;
	code = hpp_client_call(&f->cl, CSI_RPC_CREATE_SNAPSHOT, &r, &out, 0);
	if (code == CSI_OK)
		snprintf(id, 64, "%s", out->snapshot->snapshot_id);
	return code;
}

/* Makes the row's directories and the state its setup names. */
static void conf_prepare(struct conf_fx *f, size_t i, enum conf_setup s, struct conf_ctx *c)
{
	const struct hpp_caller *cl = &f->cl.caller;
	char name[32];

	memset(c, 0, sizeof(*c));
	snprintf(c->row, sizeof(c->row), "%zu", i);
	snprintf(c->vol, sizeof(c->vol), "vol-missing");
	snprintf(c->vol2, sizeof(c->vol2), "vol-missing");
	snprintf(c->snap, sizeof(c->snap), "snap-missing");
	snprintf(c->dir, sizeof(c->dir), "%s/r%zu", f->h.dir, i);
	snprintf(c->staging, sizeof(c->staging), "%s/staging", c->dir);
	snprintf(c->pods, sizeof(c->pods), "%s/pods", c->dir);
	snprintf(c->target, sizeof(c->target), "%s/t1", c->pods);
	snprintf(c->target2, sizeof(c->target2), "%s/t2", c->pods);
	c->data = f->h.data;
	assert_int_equal(mkdir(c->dir, 0750), 0);
	assert_int_equal(mkdir(c->staging, 0750), 0);
	assert_int_equal(mkdir(c->pods, 0750), 0);
	if (s == S_NONE)
		return;
	snprintf(name, sizeof(name), "src-%zu", i);
	assert_int_equal(
	    hpp_create(cl, name, s == S_HUGE ? 60LL << 30 : 1 << 20, 0, s == S_BLOCK, c->vol),
	    CSI_OK);
	if (s == S_HUGE) /* conf_run deletes it after the row */
		return;
	snprintf(name, sizeof(name), "src2-%zu", i);
	assert_int_equal(hpp_create(cl, name, 1 << 20, 0, false, c->vol2), CSI_OK);
	if (s == S_SNAPSHOT) {
		snprintf(name, sizeof(name), "ssnap-%zu", i);
		assert_int_equal(conf_snapshot(f, name, c->vol, c->snap), CSI_OK);
	}
	if (s < S_PUBLISHED || s == S_SNAPSHOT)
		return;
	assert_int_equal(hpp_ctl_publish(cl, c->vol, "node-1", false, SNW, false), CSI_OK);
	if (s >= S_STAGED)
		assert_int_equal(hpp_stage(cl, c->vol, c->staging, false, SNW), CSI_OK);
	if (s >= S_NODE_PUBLISHED)
		assert_int_equal(hpp_publish(cl, c->vol, c->staging, c->target, false, SNW, false),
				 CSI_OK);
}

static bool conf_alpha_rpc(enum csi_rpc rpc)
{
	return rpc == CSI_RPC_CONTROLLER_GET_VOLUME || rpc == CSI_RPC_GET_SNAPSHOT;
}

static void conf_run(struct conf_fx *f)
{
	size_t failed = 0, n = sizeof(conf_rows) / sizeof(conf_rows[0]);

	for (size_t i = 0; i < n; i++) {
		const struct conf_row *row = &conf_rows[i];
		const struct csi_rpc_info *info = csi_rpc_info(row->rpc);
		int want = conf_alpha_rpc(row->rpc) && !f->alpha ? CSI_UNIMPLEMENTED : row->code;
		struct arena *a = arena_new();
		struct conf_ctx c;
		ProtobufCMessage *req;
		int got;

		assert_non_null(a);
		conf_prepare(f, i, row->setup, &c);
		req = conf_new_msg(a, info->request);
		assert_non_null(req);
		if (conf_apply(a, &c, req, conf_base[row->rpc]) != 0 ||
		    conf_apply(a, &c, req, row->change) != 0) {
			fprintf(stderr, "row %zu %s: bad change \"%s\"\n", i, info->name,
				row->change);
			arena_free(a);
			failed++;
			continue;
		}
		got = hpp_client_call(&f->cl, row->rpc, req, NULL, 0);
		if (got != want) {
			fprintf(stderr, "row %zu %s [%s] (%s): got %s (%s), want %s\n", i,
				info->name, row->change, row->why, csi_code_name(got),
				f->cl.st.message, csi_code_name(want));
			failed++;
		}
		/* Give the space back, or later rows would find the plugin full. */
		if (row->setup == S_HUGE)
			assert_int_equal(hpp_delete(&f->cl.caller, c.vol), CSI_OK);
		arena_free(a);
	}
	print_message("%zu rows, %zu failed\n", n, failed);
	assert_int_equal(failed, 0);
}

static void test_table(void **state)
{
	conf_run(*state);
}

static void test_table_alpha(void **state)
{
	conf_run(*state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_table, conf_setup, conf_teardown),
	    cmocka_unit_test_setup_teardown(test_table_alpha, conf_setup_alpha, conf_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
