/*
 * CSI client. A struct csi_client is a handle on one plugin endpoint with
 * one operation, call(): send a request, wait (bounded by a deadline) for
 * the response. The real client speaks gRPC over a unix socket
 * (csi_client_grpc_new); tests and the agent's unit tests plug in fakes by
 * filling the same struct. Typed wrappers for every unary RPC sit on top
 * of call(), so code that takes a struct csi_client never knows which one
 * it has.
 *
 * Thread-safety: call() may be invoked from many threads at once on one
 * client; each thread uses its own completion queue internally.
 */
#ifndef CSID_CSI_CLIENT_H
#define CSID_CSI_CLIENT_H

#include <stdint.h>

#include "csi/csi_rpc.h"
#include "util/err.h"

/* gRPC status codes, as numbered on the wire. */
enum csi_code {
	CSI_OK = 0,
	CSI_CANCELLED = 1,
	CSI_UNKNOWN = 2,
	CSI_INVALID_ARGUMENT = 3,
	CSI_DEADLINE_EXCEEDED = 4,
	CSI_NOT_FOUND = 5,
	CSI_ALREADY_EXISTS = 6,
	CSI_PERMISSION_DENIED = 7,
	CSI_RESOURCE_EXHAUSTED = 8,
	CSI_FAILED_PRECONDITION = 9,
	CSI_ABORTED = 10,
	CSI_OUT_OF_RANGE = 11,
	CSI_UNIMPLEMENTED = 12,
	CSI_INTERNAL = 13,
	CSI_UNAVAILABLE = 14,
	CSI_DATA_LOSS = 15,
	CSI_UNAUTHENTICATED = 16,
};

#define CSI_STATUS_MSG_MAX 256

/* Outcome of one call: the gRPC code and the plugin's message (truncated). */
struct csi_status {
	int code; /* enum csi_code */
	char message[CSI_STATUS_MSG_MAX];
};

/* "NOT_FOUND" for CSI_NOT_FOUND; "UNKNOWN_CODE" outside 0..16. */
const char *csi_code_name(int code);
/* Code for a name such as "NOT_FOUND" (case-insensitive); -1 if none. */
int csi_code_parse(const char *name);

/* Default per-call deadline (15 s), as Swarm and the k8s sidecars use. */
#define CSI_DEFAULT_TIMEOUT_MS 15000

struct csi_client {
	/*
	 * Sends req (of rpc's request type) and waits at most timeout_ms.
	 * Returns 0 with *resp set (of rpc's response type, free it with
	 * csi_msg_free) when the plugin answered OK; otherwise a negative csid
	 * code (csi_status_to_err) with st filled in and *resp NULL. A
	 * transport failure is reported as UNAVAILABLE or DEADLINE_EXCEEDED in
	 * st; a response that does not decode as CSI_INTERNAL with a message
	 * saying so, and CSID_EPROTO.
	 */
	int (*call)(struct csi_client *c, enum csi_rpc rpc, const ProtobufCMessage *req,
		    ProtobufCMessage **resp, int64_t timeout_ms, struct csi_status *st);
	/* Releases the client. */
	void (*free)(struct csi_client *c);
	/* For messages: the endpoint or a fake's name. */
	const char *endpoint;
};

/*
 * Checks a plugin endpoint: "unix:///abs/path", "unix:/abs/path" or
 * "/abs/path"; the path must be absolute, contain no NUL, and fit a unix
 * socket (at most 107 bytes). On success writes the path to path_out
 * (at least 108 bytes) and returns 0; else CSID_EINVAL with e set.
 */
int csi_endpoint_parse(const char *endpoint, char *path_out, struct err *e);

/*
 * Writes the gRPC target ("unix:" + path, percent-encoded, since gRPC
 * parses targets and listen addresses as URIs) for a socket path checked
 * by csi_endpoint_parse; out needs at least 3 * 107 + 6 bytes.
 */
void csi_endpoint_target(const char *path, char *out, size_t cap);

/*
 * Opens a gRPC client for endpoint (see csi_endpoint_parse). The channel
 * is created once and reused; it reconnects with a short backoff (about
 * 100 ms) after the plugin restarts. Returns 0 and *out, or a negative
 * code with e set. Initialises gRPC on first use.
 */
int csi_client_grpc_new(const char *endpoint, struct csi_client **out, struct err *e);

/*
 * gRPC library lifetime. csi_client_grpc_new and csi_server_new call
 * csi_grpc_init (idempotent, thread-safe). csi_grpc_shutdown releases gRPC
 * and the calling thread's completion queue; call it once at program exit,
 * after every client and server is freed and every other thread that made
 * calls has exited, so leak checkers see a clean exit.
 */
void csi_grpc_init(void);
void csi_grpc_shutdown(void);

/* c->free(c); NULL is a no-op. */
void csi_client_free(struct csi_client *c);

/* Frees a message returned by call() or csi_msg_dup(); NULL is a no-op. */
void csi_msg_free(ProtobufCMessage *m);
/* Deep copy by packing and unpacking; NULL when out of memory. */
ProtobufCMessage *csi_msg_dup(const ProtobufCMessage *m);

/*
 * Typed wrappers: csi_<snake_name>(client, req, &resp, timeout_ms, st),
 * e.g. csi_probe(c, &req, &resp, 1000, &st). Same contract as call().
 */
#define CSI_WRAPPER_DECL_(id, svc, method, snake)                                   \
	int csi_##snake(struct csi_client *c, const Csi__V1__##method##Request *req,     \
			Csi__V1__##method##Response **resp, int64_t timeout_ms,          \
			struct csi_status *st);
CSI_RPCS(CSI_WRAPPER_DECL_)
#undef CSI_WRAPPER_DECL_

#endif
