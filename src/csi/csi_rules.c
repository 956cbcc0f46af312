/*
 * The CSI error rules as data. csi_rules_general is the spec's general
 * error table ("Error Scheme") plus the transport codes, one outcome per
 * gRPC code for every RPC; csi_rules_special lists the per-RPC rows of the
 * spec's "<RPC> Errors" tables (and one CO convention) that differ from
 * it. A lookup takes the special row when there is one, else the general
 * one. Quotes are from CSI spec v1.12.0, spec.md.
 */
#include "csi/csi_rules.h"

#include "csi/csi_client.h"
#include "csid.h"

#define D CSI_OUTCOME_DONE
#define R CSI_OUTCOME_RETRY
#define F CSI_OUTCOME_FINAL

static const unsigned char csi_rules_general[CSI_UNAUTHENTICATED + 1] = {
    [CSI_OK] = D,
    /* The call was abandoned; the plugin may still have acted. */
    [CSI_CANCELLED] = R,
    /*
     * UNKNOWN and INTERNAL are not in the spec's tables: the plugin failed
     * for a reason of its own (plugins in Go answer UNKNOWN for any plain
     * error), commonly a transient one such as a cloud API hiccup. The
     * reconcilers of Kubernetes and Swarm retry such errors with backoff;
     * the backoff is capped and the error stays visible to the operator.
     */
    [CSI_UNKNOWN] = R,
    /* "Caller MUST fix the request before retrying" (general table). */
    [CSI_INVALID_ARGUMENT] = F,
    /*
     * "Any RPC MAY time out and MAY be retried", relying on idempotency
     * (spec §Timeouts): the outcome is unknown, so the same call is
     * repeated.
     */
    [CSI_DEADLINE_EXCEEDED] = R,
    /*
     * Most per-RPC tables say of NOT_FOUND: "Caller MUST verify that the
     * volume_id is correct and that the volume is accessible and has not
     * been deleted before retrying with exponential back off."
     */
    [CSI_NOT_FOUND] = R,
    /* Same name or target with incompatible arguments: change them. */
    [CSI_ALREADY_EXISTS] = F,
    /* An administrator must grant the permission first. */
    [CSI_PERMISSION_DENIED] = F,
    /* Quota, topology or attach limits: retried with backoff by every CO. */
    [CSI_RESOURCE_EXHAUSTED] = R,
    /* A state the CO must change first (unpublish, stage, ...). */
    [CSI_FAILED_PRECONDITION] = F,
    /*
     * "There is already an operation pending for the specified volume ...
     * Caller SHOULD ensure that there are no other calls pending for the
     * specified volume, and then retry with exponential back off."
     */
    [CSI_ABORTED] = R,
    [CSI_OUT_OF_RANGE] = F,
    /* "Caller MUST NOT retry" (general table). */
    [CSI_UNIMPLEMENTED] = F,
    [CSI_INTERNAL] = R,
    /* Plugin down or restarting: the same idempotent call is repeated. */
    [CSI_UNAVAILABLE] = R,
    [CSI_DATA_LOSS] = F,
    /* The secrets are wrong; someone must fix them. */
    [CSI_UNAUTHENTICATED] = F,
};

struct csi_rules_row {
	enum csi_rpc rpc;
	int code;
	enum csi_outcome outcome;
};

static const struct csi_rules_row csi_rules_special[] = {
    /*
     * NOT_FOUND on the "undo" calls counts as done. This is a CO
     * convention, not spec text: the spec's success for "already gone" is
     * OK ("MUST reply 0 OK"), and for ControllerUnpublish NOT_FOUND
     * formally means "cannot be assumed unpublished". Nomad treats it as
     * done for the unpublish and unstage calls, reasoning that the CO had
     * already checked the volume and node exist, so a previous attempt
     * finished the work; DESIGN.md asks for the same.
     */
    {CSI_RPC_NODE_UNPUBLISH_VOLUME, CSI_NOT_FOUND, D},
    {CSI_RPC_NODE_UNSTAGE_VOLUME, CSI_NOT_FOUND, D},
    {CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, CSI_NOT_FOUND, D},
    {CSI_RPC_DELETE_VOLUME, CSI_NOT_FOUND, D},
    {CSI_RPC_DELETE_SNAPSHOT, CSI_NOT_FOUND, D},
    {CSI_RPC_DELETE_VOLUME_GROUP_SNAPSHOT, CSI_NOT_FOUND, D},

    /* Reads: NOT_FOUND is the answer, asking again does not change it. */
    {CSI_RPC_CONTROLLER_GET_VOLUME, CSI_NOT_FOUND, F},
    {CSI_RPC_GET_SNAPSHOT, CSI_NOT_FOUND, F},
    {CSI_RPC_GET_VOLUME_GROUP_SNAPSHOT, CSI_NOT_FOUND, F},
    {CSI_RPC_NODE_GET_VOLUME_STATS, CSI_NOT_FOUND, F},

    /*
     * Probe: "FAILED_PRECONDITION: Plugin is unable to complete the call
     * successfully because of missing dependencies ... The CO SHOULD
     * treat the plugin as unhealthy" and keep probing it.
     */
    {CSI_RPC_PROBE, CSI_FAILED_PRECONDITION, R},

    /*
     * DeleteVolume: "Volume in use ... Caller SHOULD ensure that there
     * are no other calls pending for the specified volume, and then
     * retry with exponential back off." (also: has dependent snapshots)
     */
    {CSI_RPC_DELETE_VOLUME, CSI_FAILED_PRECONDITION, R},
    /*
     * ControllerPublishVolume: "Volume published to another node ...
     * Caller SHOULD ensure the specified volume is not published to any
     * other node before retrying with exponential back off."
     */
    {CSI_RPC_CONTROLLER_PUBLISH_VOLUME, CSI_FAILED_PRECONDITION, R},
    /* DeleteSnapshot: "Snapshot in use ... retry with exponential back off." */
    {CSI_RPC_DELETE_SNAPSHOT, CSI_FAILED_PRECONDITION, R},
    /*
     * DeleteVolumeGroupSnapshot: "Volume group snapshot in use ... Caller
     * SHOULD ensure that there are no other resources using the volume
     * group snapshot, and then retry with exponential back off."
     */
    {CSI_RPC_DELETE_VOLUME_GROUP_SNAPSHOT, CSI_FAILED_PRECONDITION, R},
    /*
     * NodeExpandVolume: "FAILED_PRECONDITION ... the volume cannot be
     * expanded while staged or published. Caller MUST NOT retry."
     */
    {CSI_RPC_NODE_EXPAND_VOLUME, CSI_FAILED_PRECONDITION, F},

    /*
     * CreateSnapshot: "RESOURCE_EXHAUSTED: There is not enough space on
     * the storage system to handle the create snapshot request. Caller
     * should fail this request." (the spec prints code 13; gRPC's is 8).
     */
    {CSI_RPC_CREATE_SNAPSHOT, CSI_RESOURCE_EXHAUSTED, F},

    /*
     * ListVolumes, ListSnapshots: "ABORTED: Indicates that starting_token
     * is not valid. Caller MUST restart the List... call", so the same
     * call would fail again; the caller starts over with an empty token.
     */
    {CSI_RPC_LIST_VOLUMES, CSI_ABORTED, F},
    {CSI_RPC_LIST_SNAPSHOTS, CSI_ABORTED, F},
};

#undef D
#undef R
#undef F

const char *csi_outcome_name(enum csi_outcome o)
{
	switch (o) {
	case CSI_OUTCOME_DONE:
		return "done";
	case CSI_OUTCOME_RETRY:
		return "retry";
	case CSI_OUTCOME_FINAL:
		return "final";
	}
	return "final";
}

enum csi_outcome csi_rules_outcome(enum csi_rpc rpc, int code)
{
	if (code == CSI_OK)
		return CSI_OUTCOME_DONE;
	if (code < 0 || code > CSI_UNAUTHENTICATED || (unsigned)rpc >= CSI_RPC_COUNT)
		return CSI_OUTCOME_FINAL;
	for (size_t i = 0; i < sizeof(csi_rules_special) / sizeof(csi_rules_special[0]); i++)
		if (csi_rules_special[i].rpc == rpc && csi_rules_special[i].code == code)
			return csi_rules_special[i].outcome;
	return (enum csi_outcome)csi_rules_general[code];
}

bool csi_rules_uncertain(int code)
{
	return code == CSI_CANCELLED || code == CSI_DEADLINE_EXCEEDED || code == CSI_UNAVAILABLE;
}

static const int csi_rules_errors[CSI_UNAUTHENTICATED + 1] = {
    [CSI_OK] = 0,
    [CSI_CANCELLED] = CSID_ECANCELED,
    [CSI_UNKNOWN] = CSID_EINTERNAL,
    [CSI_INVALID_ARGUMENT] = CSID_EINVAL,
    [CSI_DEADLINE_EXCEEDED] = CSID_ETIMEDOUT,
    [CSI_NOT_FOUND] = CSID_ENOTFOUND,
    [CSI_ALREADY_EXISTS] = CSID_EEXIST,
    [CSI_PERMISSION_DENIED] = CSID_EPERM,
    [CSI_RESOURCE_EXHAUSTED] = CSID_EEXHAUSTED,
    [CSI_FAILED_PRECONDITION] = CSID_EPRECOND,
    [CSI_ABORTED] = CSID_EABORTED,
    [CSI_OUT_OF_RANGE] = CSID_ERANGE,
    [CSI_UNIMPLEMENTED] = CSID_EUNIMPL,
    [CSI_INTERNAL] = CSID_EINTERNAL,
    [CSI_UNAVAILABLE] = CSID_EUNAVAIL,
    [CSI_DATA_LOSS] = CSID_EIO,
    [CSI_UNAUTHENTICATED] = CSID_EUNAUTH,
};

int csi_status_to_err(int code)
{
	if (code < 0 || code > CSI_UNAUTHENTICATED)
		return CSID_EINTERNAL;
	return csi_rules_errors[code];
}
