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
 * client; each thread uses its own completion queue internally. A
 * SCHED_BATCH thread makes the gRPC client's blocking call as SCHED_OTHER
 * and is a batch thread again when call() returns (util/sched_wait.h).
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
 * is created at once (the plugin need not exist yet) and reused. A call
 * made while the last connection attempt failed makes a new attempt
 * itself, so a plugin that appears or restarts is reached by the next call;
 * gRPC's own attempts in the background are rare (every 2 minutes), so
 * the caller's retry schedule decides how often a dead plugin is tried.
 * Returns 0 and *out, or a negative code with e set. Initialises gRPC on
 * first use.
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

struct grpc_completion_queue;
struct grpc_byte_buffer;
/*
 * The calling thread's completion queue for plucking its own blocking
 * calls (gRPC 1.51 lets at most six threads pluck one queue), made on
 * first use and destroyed when the thread exits (or by
 * csi_grpc_shutdown for the calling thread). NULL on failure. Also used
 * by the etcd store's client (src/store/etcd_client.c).
 */
struct grpc_completion_queue *csi_grpc_thread_cq(void);
/*
 * Decodes a received message as type d; NULL when the bytes are not one.
 * The caller frees it with protobuf_c_message_free_unpacked.
 */
ProtobufCMessage *csi_grpc_unpack(const ProtobufCMessageDescriptor *d, struct grpc_byte_buffer *bb);

/*
 * Asynchronous calls. A struct csi_async is a completion queue driven by
 * one thread: csi_client_call_async() starts a call on it and returns at
 * once; csi_async_poll() waits for calls to end and runs their callbacks
 * on the polling thread. One thread can so keep many calls in flight
 * without a thread wake-up per call. A csi_async is not thread-safe: one
 * thread at a time starts calls on it and polls it. Calls on one queue may
 * go to different clients; a client may be freed with calls in flight
 * (they still end and call back).
 */
struct csi_async;

/*
 * Outcome of an asynchronous call, as call() reports it: rc is 0 or a
 * negative csid code, st the status. resp (of the RPC's response type, or
 * NULL unless rc is 0) now belongs to the callback: free it with
 * csi_msg_free. st is borrowed for the callback's duration.
 */
typedef void (*csi_done_fn)(void *arg, int rc, ProtobufCMessage *resp, const struct csi_status *st);

/* Creates a queue; returns 0 and *out, or CSID_ENOMEM with e set. */
int csi_async_new(struct csi_async **out, struct err *e);

/*
 * Starts rpc with req (copied: it may be freed on return) on client c and
 * returns at once. On 0 the call is in flight and fn(arg, ...) runs
 * exactly once, from csi_async_poll or csi_async_free, never before this
 * returns. On failure (a negative code, with st filled in when not NULL)
 * fn never runs. timeout_ms bounds the call as for call(). Clients other
 * than csi_client_grpc_new's (fakes) are called synchronously here, and
 * the callback still waits for the next poll. Fails with CSID_EINVAL while
 * the queue is being freed.
 */
int csi_client_call_async(struct csi_client *c, struct csi_async *q, enum csi_rpc rpc,
			  const ProtobufCMessage *req, int64_t timeout_ms, csi_done_fn fn,
			  void *arg, struct csi_status *st);

/*
 * Calls on q make progress only while some thread polls q (gRPC does a
 * call's I/O on the thread that polls its queue), so the owner of q should
 * poll whenever it has calls in flight.
 *
 * Waits at most timeout_ms (0: not at all) until a call ends, then runs
 * the callbacks of every call that has ended. Returns how many callbacks
 * ran (0 on timeout, or at once when nothing is in flight). Callbacks may
 * start new calls on q; they must not poll or free q.
 */
int csi_async_poll(struct csi_async *q, int64_t timeout_ms);

/* Calls started on q whose callback has not run yet. */
int csi_async_pending(const struct csi_async *q);

/*
 * Cancels every call in flight, runs their callbacks (most with
 * CANCELLED) and frees q; NULL is a no-op. Not from a callback.
 */
void csi_async_free(struct csi_async *q);

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
#define CSI_WRAPPER_DECL_(id, svc, method, snake)                                    \
	int csi_##snake(struct csi_client *c, const Csi__V1__##method##Request *req, \
			Csi__V1__##method##Response **resp, int64_t timeout_ms,      \
			struct csi_status *st);
CSI_RPCS(CSI_WRAPPER_DECL_)
#undef CSI_WRAPPER_DECL_

#endif
