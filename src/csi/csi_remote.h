/*
 * One CSI controller RPC carried over an agent's HTTP API, for the server
 * whose reconciler drives a controller plugin that an agent supervises:
 *
 *   POST /v1/agent/controller/<plugin>/<Method>
 *   X-Csid-Token: <the agent's server_token>
 *   X-Csid-Deadline-Ms: <the server's deadline for the RPC>
 *   Content-Type: application/x-protobuf
 *   body: the CSI request, protobuf bytes
 *
 * answered (HTTP 200 whenever the plugin was called) with the JSON
 *
 *   {"code": "NOT_FOUND", "message": "...", "response": "<base64>"}
 *
 * code is the gRPC status name, message the plugin's status message,
 * response the protobuf bytes of the CSI response (only with "OK"). JSON
 * with base64 keeps the answer in the shape every other answer of the
 * API has (and its error path), and carries a plugin's message safely,
 * which an HTTP header could not. Everything else (bad token, unknown
 * plugin, bad request) is the API's usual JSON error with an HTTP status.
 *
 * This module holds the encodings both ends share; pure functions,
 * thread-safe.
 */
#ifndef CSID_CSI_CSI_REMOTE_H
#define CSID_CSI_CSI_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "csi/csi_client.h"
#include "util/err.h"

#define CSI_REMOTE_PREFIX "/v1/agent/controller/"
#define CSI_REMOTE_DEADLINE_HEADER "X-Csid-Deadline-Ms"
#define CSI_REMOTE_TOKEN_HEADER "X-Csid-Token"
/* Longest deadline an agent grants one RPC (ms); longer ones are cut to it. */
#define CSI_REMOTE_DEADLINE_MAX_MS (10 * 60 * 1000)
/* Largest answer a server reads from an agent (bytes). */
#define CSI_REMOTE_ANSWER_MAX (8 * 1024 * 1024)

/*
 * Whether rpc may run through an agent: every Controller-service RPC, and
 * the Identity RPCs (GetPluginInfo, GetPluginCapabilities, Probe).
 */
bool csi_remote_allowed(enum csi_rpc rpc);

/*
 * The deadline header's value: 1..CSI_REMOTE_DEADLINE_MAX_MS digits
 * (larger values are cut to the cap); NULL gives dflt_ms. Returns 0 with
 * *out_ms, or CSID_EINVAL with e set.
 */
int csi_remote_deadline_parse(const char *value, int64_t dflt_ms, int64_t *out_ms, struct err *e);

/*
 * The CSI request of rpc from the body bytes. Returns 0 and *out (free
 * with csi_msg_free), or CSID_EINVAL with e set (never quoting the body,
 * which may hold secrets).
 */
int csi_remote_request_decode(enum csi_rpc rpc, const void *body, size_t len,
			      ProtobufCMessage **out, struct err *e);

/*
 * The answer to one call: st's code and message, and (when the code is
 * OK) resp's bytes. Returns 0 and *out (malloc'd, NUL-terminated, JSON),
 * or CSID_ENOMEM.
 */
int csi_remote_answer_encode(const struct csi_status *st, const ProtobufCMessage *resp, char **out,
			     struct err *e);

/*
 * Decodes an agent's answer of len bytes to rpc: fills st (message
 * truncated to CSI_STATUS_MSG_MAX) and, when the code is OK, *resp (of
 * rpc's response type, free with csi_msg_free). Returns 0, or CSID_EPROTO
 * with e set when the answer is malformed (then *resp is NULL and st is
 * untouched).
 */
int csi_remote_answer_decode(enum csi_rpc rpc, const char *body, size_t len,
			     ProtobufCMessage **resp, struct csi_status *st, struct err *e);

#endif
