/*
 * A small client of etcd's native v3 gRPC API (proto/etcd_rpc.proto, our
 * own subset of etcd's KV, Watch and Lease services) over the gRPC core
 * csid links for CSI: unary calls (Range, Put, Txn, LeaseGrant,
 * LeaseRevoke, and LeaseKeepAlive as a one-message stream) and the
 * bidirectional watch stream. The client moves protobuf-c messages; the
 * store backend (store_etcd.c) builds and reads them.
 *
 * Endpoints. A client has one or more endpoints ("http://host:port", or
 * "https://host:port" for TLS), one gRPC channel each; it sends to the one
 * that answered last and moves on to the next when a call could not get a
 * connection (nothing was sent, so a retry elsewhere is safe). A request
 * that may have been sent and then failed is not retried: a transaction
 * may have committed.
 *
 * Every call but a read carries the metadata "hasleader: true": a member
 * that lost its quorum then answers UNAVAILABLE "no leader" at once, and
 * cancels such a watch, instead of holding a write until its own timeout
 * (7 s) and answering "context deadline exceeded"; a serializable read
 * may still be answered from what the member has.
 *
 * Errors. Transport failures become CSID_EUNAVAIL / CSID_ETIMEDOUT naming
 * the endpoint; an etcd error status becomes the matching csid code with
 * etcd's message. TLS: a CA file to check the server, a client
 * certificate and key when etcd asks for them (read once, at
 * etcd_client_new; the key's bytes are zeroed once gRPC has them). No
 * secret ever reaches a message.
 *
 * Threading: every call is thread-safe. A unary call waits on the calling
 * thread's own completion queue (csi_grpc_thread_cq); a stream on a queue
 * of its own, read by the calling thread alone.
 */
#ifndef CSID_STORE_ETCD_CLIENT_H
#define CSID_STORE_ETCD_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "etcd_rpc.pb-c.h"
#include "util/err.h"

#define ETCD_ENDPOINTS_MAX 16
/* etcd's default --max-request-bytes. */
#define ETCD_REQUEST_MAX_DEFAULT 1572864

struct etcd_client_config {
	const char *const *endpoints; /* borrowed; copied by etcd_client_new */
	size_t nendpoints;
	const char *ca_file, *cert_file, *key_file; /* NULL: none */
	int64_t dial_timeout_ms; /* connection set-up; 0: 2 s */
	int64_t request_timeout_ms; /* a whole unary call; 0: 10 s */
};

struct etcd_client;

/*
 * Returns 0 and *out, or CSID_EINVAL (no or bad endpoint, a TLS file that
 * cannot be read) / CSID_ENOMEM. Starts gRPC (csi_grpc_init); the program
 * calls csi_grpc_shutdown at exit.
 */
int etcd_client_new(const struct etcd_client_config *cfg, struct etcd_client **out, struct err *e);
void etcd_client_free(struct etcd_client *c);

/* The unary methods of the client. */
enum etcd_rpc {
	ETCD_RANGE,
	ETCD_PUT,
	ETCD_TXN,
	ETCD_COMPACT,
	ETCD_LEASE_GRANT,
	ETCD_LEASE_REVOKE,
	ETCD_LEASE_KEEPALIVE,
	ETCD_RPC_COUNT_
};

/*
 * Calls rpc with req (borrowed, of the rpc's request type) and returns
 * the decoded answer in *resp (the caller frees it with
 * protobuf_c_message_free_unpacked). Returns 0, or a code as said above
 * with e naming the endpoint and etcd's message.
 */
int etcd_client_call(struct etcd_client *c, enum etcd_rpc rpc, const ProtobufCMessage *req,
		     ProtobufCMessage **resp, struct err *e);

/* Called with each message of a watch stream (borrowed); nonzero ends the stream. */
typedef int (*etcd_stream_cb)(void *arg, const Etcdserverpb__WatchResponse *msg);

/* A stream's cancel flag and its call, shared with the thread that stops it. */
struct etcd_stream {
	atomic_bool stop;
	void *call; /* the grpc_call of the running stream, under mu */
	pthread_mutex_t mu;
};

void etcd_stream_init(struct etcd_stream *st);
void etcd_stream_fini(struct etcd_stream *st);
/* Makes the running (or next) etcd_client_watch of st return; any thread. */
void etcd_stream_cancel(struct etcd_stream *st);
/* Clears the cancel flag for the next stream. */
void etcd_stream_reset(struct etcd_stream *st);

/*
 * Opens a Watch stream, sends req, and calls cb with each answer until
 * etcd ends the stream (an error code), cb returns nonzero (then returns
 * that), st is cancelled (CSID_ECANCELED), or the transport fails (an
 * error code).
 */
int etcd_client_watch(struct etcd_client *c, const Etcdserverpb__WatchRequest *req,
		      struct etcd_stream *st, etcd_stream_cb cb, void *arg, struct err *e);

/* The endpoint in use, for messages. */
const char *etcd_client_endpoint(struct etcd_client *c);

#endif
