/*
 * The HTTP plumbing shared by the agent's and the server's APIs, on
 * libmicrohttpd with a thread per connection (a request blocked on a slow
 * plugin or a blocking query never stalls another): listeners (a unix
 * socket bound here, and TCP), request bodies gathered up to a cap (and
 * wiped, since they may hold secrets), routing to one handler, and the one
 * way answers and errors are written. Every error is our JSON,
 * {"error": "...", "code": "..."} with the status of include/csid.h's
 * table, including 404, 405, 413 and 414 (a URL longer than HTTP_URL_MAX).
 * Request lines are logged with method, path, status and duration; never
 * a body, a query string or a header.
 */
#ifndef CSID_API_HTTP_H
#define CSID_API_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/err.h"

/* Longest URL (path and query) answered; longer ones get 414. */
#define HTTP_URL_MAX 8192

struct MHD_Connection;

/* One request, complete (body gathered). Borrowed for the handler's call. */
struct http_request {
	const char *method;
	const char *url; /* the path, without the query string */
	const char *body; /* NUL-terminated ("" when none) */
	size_t len;
	struct MHD_Connection *conn_;
};

/* Returns the query argument key, or NULL. */
const char *http_query(const struct http_request *r, const char *key);
/* Returns the request header name, or NULL. */
const char *http_header(const struct http_request *r, const char *name);

/*
 * The token a request presents: the X-Csid-Token header, else the
 * "Authorization: Bearer <token>" header; NULL when none.
 */
const char *http_request_token(const struct http_request *r);
/* Constant-time comparison of a presented token with a configured secret. */
bool http_token_eq(const char *presented, const char *secret);

/*
 * A streamed answer (status 200, newline-delimited JSON). next() is called
 * on the connection's thread whenever the client can take more; it writes
 * at most cap bytes to buf and returns how many, 0 to be called again
 * (it should block a while first, e.g. in store_wait), or -1 to end the
 * stream. done() runs once when the connection ends.
 */
struct http_stream {
	long (*next)(void *ctx, char *buf, size_t cap);
	void (*done)(void *ctx);
	void *ctx;
};

/* Most extra header lines an answer of static bytes carries (struct http_reply.headers). */
#define HTTP_REPLY_HEADERS 8

/* What a handler answers with. */
struct http_reply {
	unsigned status; /* 0: 200 */
	json_t *doc; /* owned: the JSON body (NULL: text, or {}) */
	char *text; /* owned (malloc'd): a JSON body already written, instead of doc */
	bool wipe; /* text holds secrets: zeroed once sent (or dropped), before it is freed */
	char index[24]; /* X-Csid-Index value, "" for none */
	const char *allow; /* for 405: the methods allowed here */
	struct http_stream stream; /* next != NULL: stream instead of doc */
	/*
	 * data != NULL: these bytes (borrowed, alive as long as the server:
	 * static) are the body instead of doc, with content_type and the
	 * header lines in headers (name, value, ...; a NULL name ends them).
	 */
	const void *data;
	size_t data_len;
	const char *content_type;
	const char *headers[2 * HTTP_REPLY_HEADERS];
};

/*
 * The header an agent's requests for its node carry: the agent's instance
 * ID, which proves it is the node's agent (a credential: never logged).
 */
#define HTTP_NODE_INSTANCE_HEADER "X-Csid-Node-Instance"

/* A handler's return value meaning "method not allowed" (reply.allow says what is). */
#define HTTP_METHOD_NOT_ALLOWED 1

/*
 * Answers one request: returns 0 with rep filled, HTTP_METHOD_NOT_ALLOWED,
 * or a negative csid code with e set (the answer is then the JSON error
 * with the code's status). Runs on the connection's thread.
 */
typedef int (*http_handler_fn)(void *ctx, const struct http_request *req, struct http_reply *rep,
			       struct err *e);

struct http_server_config {
	const char *name; /* "agent api", "server api": in log lines and errors */
	const char *socket_path; /* optional unix listener (replaced when stale) */
	const char *tcp_addr; /* optional "host:port" */
	size_t body_max; /* bytes; larger bodies get 413 */
	http_handler_fn handler;
	void *ctx;
};

struct http_server;

/* Binds the listeners and starts serving. Returns 0 and *out, or a code with e set. */
int http_server_start(const struct http_server_config *cfg, struct http_server **out,
		      struct err *e);
/* Stops accepting, waits for requests in flight, removes the socket, frees. NULL: no-op. */
void http_server_stop(struct http_server *s);

/* Splits "<prefix><a>/<b>" style paths: the segment after prefix, up to '/'
 * or the end, into buf (cap bytes); returns a pointer past it (at "/..." or
 * ""), or NULL when the segment is empty or does not fit. */
const char *http_path_segment(const char *url, const char *prefix, char *buf, size_t cap);

/* A 64-bit query argument ("index", "per_page"); CSID_EINVAL when malformed. */
int http_query_u64(const struct http_request *r, const char *key, uint64_t dflt, uint64_t *out,
		   struct err *e);
/* A duration query argument ("30s", "500ms", "2m"); CSID_EINVAL when malformed. */
int http_query_duration(const struct http_request *r, const char *key, int64_t dflt_ms,
			int64_t *out_ms, struct err *e);
/* A boolean query argument ("true", "false", "1", "0", or present without value). */
int http_query_bool(const struct http_request *r, const char *key, bool *out, struct err *e);

#endif
