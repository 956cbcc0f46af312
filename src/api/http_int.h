/*
 * Inside the HTTP layer: the server, the state of one request, and the
 * worker pool (http_work.c) that runs handlers off the I/O threads.
 *
 * A request's life: the I/O thread gathers its head and body
 * (HTTP_CONN_READING), suspends the connection and queues it
 * (HTTP_CONN_QUEUED); a worker runs the handler (HTTP_CONN_RUNNING); a
 * handler that parks (HTTP_WAIT) waits in the parked list
 * (HTTP_CONN_PARKED) until a wake-up or its deadline queues it again;
 * any other outcome is kept (HTTP_CONN_DONE) and the connection resumed,
 * and the I/O thread, called again, writes the answer (http_finish).
 * A stream whose next() has nothing suspends its connection in the
 * parked stream list until the next wake-up or tick resumes it. On a
 * threaded listener (a thread per connection) nothing is queued nor
 * suspended: every request runs where it was read, as an at_once one
 * does, and there are no workers nor wake thread.
 */
#ifndef CSID_API_HTTP_INT_H
#define CSID_API_HTTP_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "api/http.h"

enum http_conn_state {
	HTTP_CONN_READING,
	HTTP_CONN_QUEUED,
	HTTP_CONN_RUNNING,
	HTTP_CONN_PARKED,
	HTTP_CONN_DONE,
	HTTP_CONN_ANSWERED,
};

/* One request, from its head to its completion. */
struct http_conn {
	struct MHD_Connection *c;
	const char *url; /* MHD's, valid while the request lives */
	const char *method;
	char *body;
	size_t len;
	size_t cap;
	bool too_big;
	bool url_too_long;
	bool tcp; /* came on the TCP listener */
	bool tls;
	bool cert_ok; /* a client certificate verified against the client CA */
	int cert_status; /* gnutls verification status; -1: no certificate */
	bool loopback; /* the peer is a loopback address (or the unix socket) */
	char peer[48];
	enum http_conn_state state;
	int64_t start_ms;
	int64_t deadline_ms; /* HTTP_CONN_PARKED: when to run again */
	bool polled; /* parked: also run again every tick */
	uint64_t memo; /* kept for the handler across runs (http_request_memo) */
	uint64_t seen; /* the wake source's mark read before the handler last ran */
	/* The handler's outcome (HTTP_CONN_DONE). */
	int rc;
	struct http_reply rep;
	struct err e;
	/* HTTP_CONN_ANSWERED: the answer's status and time, logged once sent (http_completed). */
	unsigned status;
	int64_t answer_ms;
	bool log_pending;
	struct http_conn *next; /* queue or parked list */
};

/* A streamed answer being sent. */
struct http_sbox {
	struct http_stream st;
	struct http_server *srv;
	struct MHD_Connection *c;
	struct http_sbox *next; /* parked list */
};

struct http_work {
	pthread_mutex_t mu;
	pthread_cond_t ready; /* workers: a request is queued, or stopping */
	pthread_cond_t tick; /* the wake thread without a wake source */
	struct http_conn *fresh_head, *fresh_tail; /* new requests, served first */
	struct http_conn *again_head, *again_tail; /* parked requests that run again */
	struct http_conn *parked;
	struct http_sbox *sparked;
	bool stopping;
	pthread_t *workers;
	unsigned nworkers;
	pthread_t waker;
	bool waker_on;
	bool sync_on; /* mu, ready and tick are initialised */
	bool idle; /* the wake thread: nothing parked, the wake source not followed */
	uint64_t mark;
};

/* Connections per local process on the unix socket (http_peers.c). */
struct http_peer {
	pid_t pid;
	unsigned n;
};

struct http_peers {
	pthread_mutex_t mu;
	struct http_peer *v;
	size_t n, cap;
	int64_t warned_s; /* the second of the last warning */
	unsigned long refused; /* connections closed since that warning */
};

struct http_server {
	struct http_server_config cfg;
	char *name;
	char *socket_path;
	char *tcp_addr;
	struct MHD_Daemon *unix_daemon;
	struct MHD_Daemon *tcp_daemon;
	struct http_work work;
	char *tls_cert; /* the PEM texts given to libmicrohttpd (the key wiped on stop) */
	char *tls_key;
	char *tls_ca;
	pthread_mutex_t log_mu; /* libmicrohttpd's log lines, rate-limited */
	int64_t log_second;
	unsigned log_lines;
	unsigned long log_dropped;
	struct http_peers peers;
};

void http_peers_init(struct http_peers *p);
/* After the daemons stopped. */
void http_peers_fini(struct http_peers *p);
/*
 * libmicrohttpd's connection notices: a new unix-socket connection is
 * counted by its process and shut at once past limits.per_client
 * (*socket_ctx then keeps the process for the close); the close takes
 * it away again.
 */
void http_peers_started(struct http_server *s, struct MHD_Connection *c, void **socket_ctx);
void http_peers_closed(struct http_server *s, void *socket_ctx);

/* A listening unix socket at path (http_listen.c); returns the fd or a code with e set. */
int http_listen_unix(const char *name, const char *path, struct err *e);
/* A listening TCP socket on addr ("host:port"); returns the fd or a code with e set. */
int http_listen_tcp(const char *name, const char *addr, struct err *e);
/* Reads a PEM file of at most HTTP_TLS_FILE_MAX bytes into *out (malloc'd); name and what in
 * errors. */
int http_read_pem(const char *name, const char *what, const char *path, char **out, struct err *e);
/* Zeroes and frees a PEM text; NULL is a no-op. */
void http_free_pem(char *p);

/* Runs the handler of hc on the calling worker (http.c). */
void http_run(struct http_server *s, struct http_conn *hc);
/* Whether the request the calling worker runs was answered while it ran (http_answer_now). */
bool http_work_answered(void);

/* Starts the workers and the wake thread. Returns 0 or a code with e set. */
int http_work_start(struct http_server *s, struct err *e);
/*
 * Parked requests run again, parked streams resume, the queue drains,
 * the threads end: afterwards no connection is suspended. Idempotent.
 */
void http_work_stop(struct http_server *s);
/*
 * Destroys the mutex and conditions, once no I/O thread runs (after the
 * daemons stopped: until then an I/O thread may still call
 * http_work_submit, which then finds stopping set). Idempotent.
 */
void http_work_free(struct http_server *s);
/* Suspends hc's connection and queues it; false (nothing done) when stopping. */
bool http_work_submit(struct http_server *s, struct http_conn *hc);
/* Suspends the stream's connection until the next wake-up or tick; false when stopping. */
bool http_work_park_stream(struct http_server *s, struct http_sbox *b);

#endif
