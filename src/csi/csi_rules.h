/*
 * What a gRPC status means for a CSI call: one table, per RPC and per gRPC
 * code, that says whether the step is done, should be retried with backoff,
 * or has failed for good; and the one mapping of gRPC codes to csid error
 * codes. The reconciler, the mounter and the supervisor all ask this
 * module, so they never disagree on what the CSI spec requires.
 */
#ifndef CSID_CSI_RULES_H
#define CSID_CSI_RULES_H

#include <stdbool.h>

#include "csi/csi_rpc.h"

/* How a CO must treat the outcome of one call. */
enum csi_outcome {
	CSI_OUTCOME_DONE, /* the step succeeded (or is known to be in effect) */
	CSI_OUTCOME_RETRY, /* retry the same call later, with backoff */
	CSI_OUTCOME_FINAL, /* failed: do not retry unchanged, report it */
};

/* "done", "retry" or "final". */
const char *csi_outcome_name(enum csi_outcome o);

/*
 * Outcome of rpc finishing with gRPC code (enum csi_code). A code outside
 * 0..16 or an rpc out of range is FINAL, except that such an rpc with
 * CSI_OK is DONE.
 */
enum csi_outcome csi_rules_outcome(enum csi_rpc rpc, int code);

/*
 * Whether the outcome of a call that ended with code is unknown: the
 * plugin may or may not have done the work (DEADLINE_EXCEEDED, UNAVAILABLE,
 * CANCELLED). A mounter records such a step as "maybe done".
 */
bool csi_rules_uncertain(int code);

/*
 * The csid error code (negative CSID_E*, or 0 for CSI_OK) for a gRPC code;
 * an unknown code gives CSID_EINTERNAL.
 */
int csi_status_to_err(int code);

#endif
