/*
 * A small client of etcd's v3 JSON gateway (the grpc-gateway every etcd
 * server serves on its client URLs): unary calls (POST /v3/kv/range,
 * /v3/kv/txn, ...) and the streaming watch (POST /v3/watch, one JSON
 * message per line). Keys and values travel base64-encoded, 64-bit
 * numbers as JSON strings; the client only moves JSON documents, the
 * store backend (store_etcd.c) builds and reads them.
 *
 * Endpoints. A client has one or more endpoints ("http://host:port" or
 * "https://..."); it sends to the one that answered last and moves on
 * to the next when a connection cannot be made (nothing was sent, so a
 * retry elsewhere is safe). A request that was sent and then failed is
 * not retried: a transaction may have committed.
 *
 * Errors. Transport failures become CSID_EUNAVAIL / CSID_ETIMEDOUT naming
 * the endpoint; an etcd error answer ({"code": gRPC code, "message"})
 * becomes the matching csid code with etcd's message. TLS: a CA file
 * to check the server, a client certificate and key when etcd asks for
 * them. No secret (key contents) ever reaches a message.
 *
 * Threading: every call is thread-safe; each call uses its own handle.
 */
#ifndef CSID_STORE_ETCD_CLIENT_H
#define CSID_STORE_ETCD_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/err.h"
#include "util/strbuf.h"

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

/* Returns 0 and *out, or CSID_EINVAL (no or bad endpoint) / CSID_ENOMEM. */
int etcd_client_new(const struct etcd_client_config *cfg, struct etcd_client **out, struct err *e);
void etcd_client_free(struct etcd_client *c);

/*
 * POSTs req (borrowed) to path ("/v3/kv/range") and returns the parsed
 * answer in *resp (the caller's reference). Returns 0, or a code as said
 * above with e naming the endpoint and etcd's message.
 */
int etcd_client_call(struct etcd_client *c, const char *path, json_t *req, json_t **resp,
		     struct err *e);

/*
 * Reads the answer of a unary call: body[0..len) with HTTP status http,
 * from ep + path (for messages). Returns 0 and the JSON object in *resp
 * (the caller's reference), the code of etcd's error answer, or
 * CSID_EPROTO for anything else.
 */
int etcd_client_answer(const char *ep, const char *path, const char *body, size_t len, long http,
		       json_t **resp, struct err *e);

/* Called with each message of a stream (borrowed); nonzero ends the stream. */
typedef int (*etcd_stream_cb)(void *arg, json_t *msg);

/*
 * The reader of a stream's bytes: splits them into lines, each one JSON
 * message for cb; an error message ({"error": ...}) or a line that is not
 * a JSON object ends the stream.
 */
struct etcd_lines {
	struct strbuf line; /* the partial line */
	etcd_stream_cb cb;
	void *arg;
	int cb_rc; /* why the stream ended: cb's result or an error code */
	struct err *e;
	const char *ep;
};

void etcd_lines_init(struct etcd_lines *l, const char *ep, etcd_stream_cb cb, void *arg,
		     struct err *e);
void etcd_lines_fini(struct etcd_lines *l);
/* Reads len more bytes; returns len, or 0 once the stream ended (l->cb_rc says why). */
size_t etcd_lines_feed(struct etcd_lines *l, char *data, size_t len);

/* A stream's cancel flag and wake-up, shared with the thread that stops it. */
struct etcd_stream {
	atomic_bool stop;
	void *multi; /* CURLM of the running stream, under mu */
	pthread_mutex_t mu;
};

void etcd_stream_init(struct etcd_stream *st);
void etcd_stream_fini(struct etcd_stream *st);
/* Makes the running (or next) etcd_client_stream of st return; any thread. */
void etcd_stream_cancel(struct etcd_stream *st);
/* Clears the cancel flag for the next stream. */
void etcd_stream_reset(struct etcd_stream *st);

/*
 * POSTs req to path and calls cb with each line of the answer until the
 * server ends it, cb returns nonzero (then returns that), st is cancelled
 * (CSID_ECANCELED), or the transport fails (an error code).
 */
int etcd_client_stream(struct etcd_client *c, const char *path, json_t *req, struct etcd_stream *st,
		       etcd_stream_cb cb, void *arg, struct err *e);

/* The endpoint in use, for messages. */
const char *etcd_client_endpoint(struct etcd_client *c);

/* Base64 of len bytes as a new JSON string; NULL when out of memory. */
json_t *etcd_b64_json(const void *data, size_t len);
/*
 * Decodes base64 text s (NULL or "": empty) into a new NUL-terminated
 * buffer *out of *len bytes. Returns 0, CSID_EPROTO (not base64) or
 * CSID_ENOMEM.
 */
int etcd_b64_decode(const char *s, char **out, size_t *len);
/* A JSON string holding a decimal 64-bit number (etcd's int64), or 0 when absent. */
uint64_t etcd_json_u64(json_t *obj, const char *key);

#endif
