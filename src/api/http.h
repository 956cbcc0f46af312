/*
 * The HTTP plumbing shared by the agent's and the server's APIs, on
 * libmicrohttpd driven by events (epoll): a few I/O threads serve every
 * connection, and handlers run on a bounded pool of workers while their
 * connection is suspended, so a slow plugin or a blocking query never
 * stalls the I/O threads; a listener with few clients (the agent's) may
 * run one thread per connection instead, each handler on its
 * connection's thread (threaded, below). A handler that must wait (a blocking query)
 * parks its request with http_wait(): it holds no thread until its wake-up
 * (the config's wake source reports a change) or its deadline, when it
 * runs again. No client can take the API down: connections per client
 * address are capped, a request head must arrive within the header
 * timeout, and the total is capped below the process's file limit.
 * Listeners (a unix socket bound here, and TCP), request bodies gathered
 * up to a cap (and wiped, since they may hold secrets), routing to one
 * handler, and the one way answers and errors are written. Every error is our JSON,
 * {"error": "...", "code": "..."} with the status of include/csid.h's
 * table, including 404, 405, 413 and 414 (a URL longer than HTTP_URL_MAX).
 * Request lines are logged with method, path, status and duration; never
 * a body, a query string or a header. Each request is counted, by route
 * template, in the request metrics of http_route.h.
 */
#ifndef CSID_API_HTTP_H
#define CSID_API_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "model/model.h"
#include "util/conf_http.h"
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
	struct http_conn *hc_;
};

struct http_conn;

/* When the request arrived (clock_now_ms(clock_real())): the same on every run of a parked request.
 */
int64_t http_request_start_ms(const struct http_request *r);
/* Whether the request came over TCP (not the unix socket). */
bool http_request_tcp(const struct http_request *r);
/*
 * Whether the request presented a client certificate that verified
 * against the listener's tls.client_ca_file (never without one).
 */
bool http_request_client_cert(const struct http_request *r);
/*
 * Whether what is answered stays private to the peer: the unix socket,
 * TLS, or plaintext TCP from a loopback address.
 */
bool http_request_private(const struct http_request *r);
/* The peer's address for messages ("10.0.0.5", "unix"), into buf. */
const char *http_request_peer(const struct http_request *r, char *buf, size_t cap);

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
 * on an I/O thread whenever the client can take more, and must not block:
 * it writes at most cap bytes to buf and returns how many, -1 to end the
 * stream, or 0 when it has nothing now: it is called again after the next
 * wake-up (a change reported by the config's wake source) or tick
 * (HTTP_TICK_MS). done() runs once when the connection ends.
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
	/* Of data (NULL: application/octet-stream) or of text (NULL: application/json). */
	const char *content_type;
	const char *headers[2 * HTTP_REPLY_HEADERS];
};

/* The header an agent's requests for its node carry (model/model.h). */
#define HTTP_NODE_INSTANCE_HEADER MODEL_NODE_INSTANCE_HEADER

/* A handler's return value meaning "method not allowed" (reply.allow says what is). */
#define HTTP_METHOD_NOT_ALLOWED 1
/* A handler's return value meaning "parked: run me again later" (see http_wait). */
#define HTTP_WAIT 2
/* How often parked requests and streams are looked at without a wake-up (ms). */
#define HTTP_TICK_MS 250

/*
 * Parks the request: the handler returns what this returns (HTTP_WAIT),
 * with nothing in its reply; the request holds no thread, and the handler
 * runs again (same request, same start time) after a wake-up of the
 * config's wake source, at deadline_ms (clock_now_ms(clock_real())), or
 * when the server stops. Only for servers with a wake source; without one
 * the handler runs again at the deadline.
 */
int http_wait(const struct http_request *r, int64_t deadline_ms);
/* http_wait, and the handler also runs again every HTTP_TICK_MS (it watches something without a
 * wake-up). */
int http_wait_polled(const struct http_request *r, int64_t deadline_ms);
/* A value the handler keeps across the runs of a parked request (0 at the first run). */
uint64_t *http_request_memo(const struct http_request *r);
/*
 * Sends the answer now, as if the handler had returned 0 with its reply
 * as filled so far, while the handler goes on with work the answer need
 * not wait for. Returns true when it was sent: from then on the handler
 * must not touch r, its reply nor its err (they belong to the I/O thread,
 * which may free them), and what it returns is dropped. Returns false,
 * changing nothing, when it cannot: the handler does not run on a worker
 * (a threaded listener, an at_once request), or it answered already.
 */
bool http_answer_now(const struct http_request *r);

/*
 * Answers one request: returns 0 with rep filled, HTTP_METHOD_NOT_ALLOWED,
 * HTTP_WAIT (http_wait), or a negative csid code with e set (the answer is
 * then the JSON error with the code's status). Runs on a worker thread;
 * may block (bounded), though a long wait should park with http_wait.
 */
typedef int (*http_handler_fn)(void *ctx, const struct http_request *req, struct http_reply *rep,
			       struct err *e);

/* Bounds of one listener's service; 0 in a field: its default. */
struct http_limits {
	unsigned workers; /* handler threads (HTTP_WORKERS) */
	unsigned io_threads; /* I/O threads of the TCP listener (1) */
	/* connections per client address on TCP, per process on the unix socket */
	unsigned per_client; /* (HTTP_PER_CLIENT) */
	unsigned header_timeout_s; /* a new connection's request head (HTTP_HEADER_TIMEOUT_S) */
	unsigned
	    idle_timeout_s; /* a connection idle after its first request (HTTP_IDLE_TIMEOUT_S) */
	unsigned max_conns; /* connections in all (HTTP_MAX_CONNS or HTTP_THREADED_MAX_CONNS, less
			       under a low file limit) */
};

/* The limits a config's "http" section sets (util/conf_http.h). */
void http_limits_from_config(const struct conf_http *h, struct http_limits *out);

/*
 * TLS on the TCP listener (the unix socket stays plaintext): PEM files,
 * read when the server starts (at most HTTP_TLS_FILE_MAX bytes each).
 * With client_ca_file, every TCP request must present a client
 * certificate signed by that CA (401 otherwise, before any handler runs).
 */
struct http_tls {
	const char *cert_file; /* NULL: plaintext */
	const char *key_file;
	const char *client_ca_file;
};

#define HTTP_TLS_FILE_MAX (1024 * 1024)

/* The TLS files of a config's "http" section (borrowed from h). */
void http_tls_from_config(const struct conf_http *h, struct http_tls *out);

#define HTTP_WORKERS 16
#define HTTP_PER_CLIENT 100
#define HTTP_HEADER_TIMEOUT_S 5
#define HTTP_IDLE_TIMEOUT_S 120
#define HTTP_MAX_CONNS 16384
/* A threaded listener's connections in all (each one a thread), and each one's stack (bytes). */
#define HTTP_THREADED_MAX_CONNS 256
#define HTTP_THREAD_STACK (512 * 1024)

struct http_server_config {
	const char *name; /* "agent api", "server api": in log lines and errors */
	const char *socket_path; /* optional unix listener (replaced when stale) */
	const char *tcp_addr; /* optional "host:port" */
	size_t body_max; /* bytes; larger bodies get 413 */
	/* The key of an error's message ("Err" for the Docker plugin protocol); NULL: "error". */
	const char *error_key;
	const char *const *routes; /* route templates for request metrics (http_route.h) */
	http_handler_fn handler;
	void *ctx;
	/*
	 * The wake source of parked requests and streams (optional): blocks
	 * until its mark passes after or timeout_ms ends, and returns the mark
	 * (store_wait has this shape). Called on one thread of the server,
	 * and with timeout_ms 0 (the current mark, at once) by the workers
	 * before each handler run.
	 */
	uint64_t (*wake)(void *wake_ctx, uint64_t after, int64_t timeout_ms);
	void *wake_ctx;
	/*
	 * Optional: whether a request (its method, path, query and body are
	 * readable; ctx is the handler's) is answered at once on the I/O
	 * thread instead of queueing for a worker. Only for handlers that
	 * never block nor park and take tens of microseconds: a health probe,
	 * so that a queue of slow requests never delays it, and short writes
	 * to a local store, which cost a hand-off to a worker and back
	 * otherwise (two thread wake-ups and their cache misses).
	 */
	bool (*at_once)(void *ctx, const struct http_request *req);
	/*
	 * One thread per connection (libmicrohttpd's own, polling its socket)
	 * instead of the I/O threads and the workers: every request is
	 * answered at once on its connection's thread, so it costs no
	 * hand-off to a worker and back. For a listener with few clients
	 * whose handlers never park nor stream (the agent's): a handler that
	 * parks or streams gets a 500, and a wake source is refused. Each
	 * open connection holds a thread with HTTP_THREAD_STACK bytes of
	 * stack, so max_conns defaults to HTTP_THREADED_MAX_CONNS; the
	 * workers limit is unused.
	 */
	bool threaded;
	struct http_tls tls;
	struct http_limits limits;
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
