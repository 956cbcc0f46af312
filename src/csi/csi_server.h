/*
 * CSI server glue, for plugins written in C (csi-hostpath, test plugins):
 * serves every unary RPC of csi_rpc.h on one unix socket and hands each
 * decoded request to a single handler function. The handler runs on one
 * of the server's worker threads (several at once), builds its response
 * from the per-call arena, and returns a gRPC code. A request that does
 * not decode is answered INVALID_ARGUMENT without calling the handler; a
 * method outside the table is answered UNIMPLEMENTED.
 */
#ifndef CSID_CSI_SERVER_H
#define CSID_CSI_SERVER_H

#include "csi/csi_client.h"
#include "util/arena.h"

/*
 * Handles one call. req is the decoded request (borrowed). On CSI_OK the
 * handler sets *resp to a response of rpc's response type built entirely
 * from memory of arena a (or static storage); the server encodes it and
 * then frees the arena. On any other code, msg (CSI_STATUS_MSG_MAX bytes)
 * may hold the status message. Returning CSI_OK with *resp NULL sends an
 * empty response.
 */
typedef int (*csi_handler_fn)(void *ctx, enum csi_rpc rpc, const ProtobufCMessage *req,
			      ProtobufCMessage **resp, struct arena *a, char *msg);

struct csi_server;

/*
 * Creates a server listening on endpoint (see csi_endpoint_parse). A
 * stale socket file at that path is removed first. nthreads worker
 * threads (1..16) serve calls. Returns 0 and *out, or a negative code with
 * e set.
 */
int csi_server_new(const char *endpoint, int nthreads, csi_handler_fn fn, void *ctx,
		   struct csi_server **out, struct err *e);
/* Starts serving; returns 0 or a negative code with e set. */
int csi_server_start(struct csi_server *s, struct err *e);
/*
 * Stops accepting calls, waits for the workers (calls in flight get at
 * most grace_ms to finish, then are cancelled; a handler still running is
 * waited for, as it cannot be interrupted) and removes the socket.
 * Safe to call from a signal-watching thread, not from a handler.
 */
void csi_server_stop(struct csi_server *s, int grace_ms);
/* Frees a stopped server (stops it first if needed); NULL is a no-op. */
void csi_server_free(struct csi_server *s);

#endif
