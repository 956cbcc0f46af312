/*
 * HTTP plumbing on libmicrohttpd (see http.h and http_int.h): a unix
 * listener we bind ourselves and hand over, an optional TCP listener,
 * each served by epoll on its own I/O thread(s) with suspend/resume;
 * request bodies gathered up to the cap and wiped when done; handlers run
 * by the workers of http_work.c, or on the connection's own thread of a
 * threaded listener (libmicrohttpd's thread per connection, with poll:
 * there a request is answered where it was read, as at_once ones are);
 * and the one place where answers, streams and errors are written
 * (http_finish). What a handler reads of its request: http_request.c.
 *
 * Limits: the TCP listener takes at most limits.per_client connections
 * from one address; a new connection has limits.header_timeout_s of
 * silence to send its request head (a TLS handshake included) before it
 * is closed, every later request head on it from its request line on the
 * same, and limits.idle_timeout_s between requests; all
 * connections together stay below the process's file limit.
 *
 * libmicrohttpd answers a few failures itself with an HTML page: a request
 * head larger than its per-connection memory. The memory limit is set
 * above HTTP_URL_MAX so that a long URL reaches us and gets our JSON 414;
 * what still goes past it (a head over HTTP_CONN_MEMORY) or is not HTTP at
 * all is answered by libmicrohttpd. It is also what every connection
 * costs (libmicrohttpd zeroes the whole of it between requests, so it is
 * resident), hence no larger than that.
 */
#include "api/http.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <gnutls/gnutls.h>
#include <microhttpd.h>

#include "api/http_route.h"
#include "api/http_int.h"
#include "util/clock.h"
#include "util/decimal.h"
#include "util/log.h"
#include "util/wipe.h"

#define HTTP_CONN_MEMORY (16 * 1024)
#define HTTP_STREAM_BLOCK 16384
/* Bodies announced up to this many times the cap are read (and dropped) before the 413. */
#define HTTP_DRAIN_FACTOR 4
/* Lines a second logged for libmicrohttpd's complaints (refused connections...). */
#define HTTP_LOG_BURST 10
/* Bytes of TLS handshake messages a client may send (its certificate chain among them). */
#define HTTP_TLS_HANDSHAKE_MAX (64 * 1024)
/* File descriptors kept for everything but connections (files, plugins, clients). */
#define HTTP_FD_RESERVE 256

/* Sends text (owned; NULL: out of memory); wipe: zeroed before it is freed. */
static enum MHD_Result http_send_text_wipe(struct MHD_Connection *c, unsigned status, char *text,
					   const char *index, const char *allow, bool wipe,
					   const char *ctype)
{
	static const char oom[] = "{\"error\":\"out of memory\",\"code\":\"no_memory\"}";
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (!text) {
		status = 500;
		resp = MHD_create_response_from_buffer(sizeof(oom) - 1, (void *)oom,
						       MHD_RESPMEM_PERSISTENT);
	} else {
		resp = wipe ? MHD_create_response_from_buffer_with_free_callback(strlen(text), text,
										 wipe_free)
			    : MHD_create_response_from_buffer(strlen(text), text,
							      MHD_RESPMEM_MUST_FREE);
	}
	if (!resp) {
		if (wipe)
			wipe_free(text);
		else
			free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				text && ctype ? ctype : "application/json");
	if (index && index[0])
		MHD_add_response_header(resp, "X-Csid-Index", index);
	if (allow)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result http_send_text(struct MHD_Connection *c, unsigned status, char *text,
				      const char *index, const char *allow)
{
	return http_send_text_wipe(c, status, text, index, allow, false, NULL);
}

static void http_send_error(struct MHD_Connection *c, unsigned status, const char *code,
			    const char *msg, const char *allow, const char *key)
{
	json_t *doc = json_pack("{s:s, s:s}", key ? key : "error", msg, "code", code);

	http_send_text(c, status, doc ? json_dumps(doc, JSON_COMPACT) : NULL, NULL, allow);
	json_decref(doc);
}

static void http_send_err(struct MHD_Connection *c, int rc, const struct err *e, const char *key)
{
	http_send_error(c, (unsigned)csid_err_http_status(rc), csid_err_code(rc),
			e->msg[0] ? e->msg : csid_strerror(rc), NULL, key);
}

static ssize_t http_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct http_sbox *b = cls;
	long n = b->st.next(b->st.ctx, buf, max);

	if (n < 0)
		return MHD_CONTENT_READER_END_OF_STREAM;
	/* Nothing now: the connection sleeps until the next wake-up or tick. */
	if (n == 0 && !http_work_park_stream(b->srv, b))
		return MHD_CONTENT_READER_END_OF_STREAM;
	return (ssize_t)n;
}

static void http_stream_free(void *cls)
{
	struct http_sbox *b = cls;

	if (b->st.done)
		b->st.done(b->st.ctx);
	free(b);
}

static void http_send_stream(struct http_server *s, struct MHD_Connection *c,
			     const struct http_stream *src, const char *index)
{
	struct http_sbox *b = calloc(1, sizeof(*b));
	struct MHD_Response *resp = NULL;

	if (b) {
		b->st = *src;
		b->srv = s;
		b->c = c;
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, HTTP_STREAM_BLOCK,
							 http_stream_read, b, http_stream_free);
	}
	if (!resp) {
		if (b)
			http_stream_free(b);
		else if (src->done)
			src->done(src->ctx);
		http_send_error(c, 500, "no_memory", "out of memory", NULL, NULL);
		return;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
	if (index && index[0])
		MHD_add_response_header(resp, "X-Csid-Index", index);
	MHD_queue_response(c, 200, resp);
	MHD_destroy_response(resp);
}

/* Sends a handler's static bytes with their content type and header lines. */
static void http_send_bytes(struct MHD_Connection *c, const struct http_reply *rep)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
	    rep->data_len, (void *)rep->data, MHD_RESPMEM_PERSISTENT);

	if (!resp) {
		http_send_error(c, 500, "no_memory", "out of memory", NULL, NULL);
		return;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				rep->content_type ? rep->content_type : "application/octet-stream");
	for (size_t i = 0; i + 1 < 2 * HTTP_REPLY_HEADERS && rep->headers[i]; i += 2)
		MHD_add_response_header(resp, rep->headers[i], rep->headers[i + 1]);
	MHD_queue_response(c, rep->status, resp);
	MHD_destroy_response(resp);
}

/* The line of every request, without a format (log_parts). */
static void http_log_line(enum log_level level, const char *api, const char *method,
			  const char *url, const char *status, const char *ms, const char *error)
{
	char qu[300], qe[600];
	const char *const parts[] = {
	    "msg=\"http request\" api=",
	    api,
	    " method=",
	    method,
	    " path=",
	    log_q(qu, sizeof(qu), url),
	    " status=",
	    status,
	    " duration_ms=",
	    ms,
	    " error=",
	    log_q(qe, sizeof(qe), error && error[0] ? error : "-"),
	};

	log_parts(level, parts, sizeof(parts) / sizeof(parts[0]));
}

/* ms: whole milliseconds. */
static void http_log(const struct http_server *s, const char *method, const char *url,
		     unsigned status, int64_t ms, const char *error)
{
	enum log_level level = strcmp(method, "GET") == 0 && status < 400 ? LOG_DEBUG : LOG_INFO;
	char st[DECIMAL_MAX], dur[DECIMAL_MAX];

	if (log_enabled(level)) {
		decimal_text(st, status);
		decimal_text(dur, ms);
		http_log_line(level, s->name, method, url, st, dur, error);
	}
	http_route_observe(s->name, s->cfg.routes, method, url, status, (double)ms / 1e3);
}

/* Frees what a reply holds (the handler's outcome was not sent). */
static void http_reply_drop(struct http_reply *rep)
{
	if (rep->text && rep->wipe)
		wipe_free(rep->text);
	else
		free(rep->text);
	rep->text = NULL;
	json_decref(rep->doc);
	rep->doc = NULL;
	if (rep->stream.done)
		rep->stream.done(rep->stream.ctx);
	rep->stream.next = NULL;
	rep->stream.done = NULL;
}

/* The handler's view of hc's request. */
static struct http_request http_request_of(struct http_conn *hc)
{
	return (struct http_request){
	    .method = hc->method,
	    .url = hc->url,
	    .body = hc->body ? hc->body : "",
	    .len = hc->len,
	    .conn_ = hc->c,
	    .hc_ = hc,
	};
}

/* Whether hc runs on the I/O thread: always on a threaded listener (its connection's own). */
static bool http_at_once(struct http_server *s, struct http_conn *hc)
{
	struct http_request req = http_request_of(hc);

	return s->cfg.threaded || (s->cfg.at_once && s->cfg.at_once(s->cfg.ctx, &req));
}

void http_run(struct http_server *s, struct http_conn *hc)
{
	struct http_request req = http_request_of(hc);
	int rc;

	memset(&hc->rep, 0, sizeof(hc->rep));
	err_clear(&hc->e);
	rc = s->cfg.handler(s->cfg.ctx, &req, &hc->rep, &hc->e);
	/* Answered while it ran: hc is the I/O thread's now (it may be freed). */
	if (http_work_answered())
		return;
	hc->rc = rc;
	if (hc->rc && hc->rc != HTTP_METHOD_NOT_ALLOWED)
		http_reply_drop(&hc->rep);
}

/* Queues the answer of a request whose outcome is known; returns its status. */
static unsigned http_answer(struct http_server *s, struct http_conn *hc)
{
	struct MHD_Connection *c = hc->c;
	struct http_reply *rep = &hc->rep;
	struct err *e = &hc->e;
	unsigned status;

	if (hc->url_too_long) {
		http_send_error(c, 414, csid_err_code(hc->rc), e->msg, NULL, s->cfg.error_key);
		return 414;
	}
	if (hc->rc == HTTP_METHOD_NOT_ALLOWED) {
		char msg[160];

		snprintf(msg, sizeof(msg), "method %s not allowed here (allowed: %s)", hc->method,
			 rep->allow ? rep->allow : "none");
		err_set(e, CSID_EINVAL, "%s", msg);
		http_reply_drop(rep);
		http_send_error(c, 405, "method_not_allowed", msg, rep->allow, s->cfg.error_key);
		return 405;
	}
	if (hc->rc) {
		http_send_err(c, hc->rc, e, s->cfg.error_key);
		return (unsigned)csid_err_http_status(hc->rc);
	}
	if (rep->stream.next) {
		json_decref(rep->doc);
		rep->doc = NULL;
		if (rep->text && rep->wipe)
			wipe_free(rep->text);
		else
			free(rep->text);
		rep->text = NULL;
		http_send_stream(s, c, &rep->stream, rep->index);
		memset(&rep->stream, 0, sizeof(rep->stream));
		return 200;
	}
	status = rep->status ? rep->status : 200;
	if (rep->data) {
		json_decref(rep->doc);
		rep->doc = NULL;
		rep->status = status;
		http_send_bytes(c, rep);
		return status;
	}
	if (rep->text) {
		json_decref(rep->doc);
		rep->doc = NULL;
		http_send_text_wipe(c, status, rep->text, rep->index, NULL, rep->wipe,
				    rep->content_type);
		rep->text = NULL;
		return status;
	}
	if (!rep->doc)
		rep->doc = json_object();
	http_send_text(c, status, rep->doc ? json_dumps(rep->doc, JSON_COMPACT) : NULL, rep->index,
		       NULL);
	json_decref(rep->doc);
	rep->doc = NULL;
	return status;
}

/* Logs hc's answer and counts it in the route metrics. */
static void http_log_answer(struct http_server *s, struct http_conn *hc)
{
	const char *url = hc->url_too_long ? "(long url)" : hc->url;

	hc->log_pending = false;
	http_log(s, hc->method, url, hc->status, hc->answer_ms - hc->start_ms,
		 hc->status < 400 ? NULL : hc->e.msg);
}

/*
 * Completes a request: queues its answer, whose log line follows once it
 * is sent (http_completed): libmicrohttpd sends a queued answer when this
 * callback returns, so a line written here delayed every answer by a
 * write to the log. A stream is logged at once (it may last for hours).
 * The duration stays the time to the answer. Every request that gets an
 * answer from us passes here once, on an I/O thread.
 */
static void http_finish(struct http_server *s, struct http_conn *hc)
{
	bool stream = hc->rep.stream.next != NULL;

	hc->status = http_answer(s, hc);
	hc->answer_ms = clock_now_ms(clock_real());
	hc->state = HTTP_CONN_ANSWERED;
	hc->log_pending = true;
	if (stream)
		http_log_answer(s, hc);
}

static int http_hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Percent-decodes the path and query values in place, except "%00": a
 * decoded NUL would cut the C string, so "/v1/volume/prod%00x" would name
 * volume "prod". "%00" stays as written, and the ID checks refuse the '%'.
 */
static size_t http_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	char *r = s, *w = s;

	while (*r) {
		int hi, lo;

		if (r[0] == '%' && (hi = http_hex(r[1])) >= 0 && (lo = http_hex(r[2])) >= 0 &&
		    (hi || lo)) {
			*w++ = (char)(hi * 16 + lo);
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return (size_t)(w - s);
}

static enum MHD_Result http_count_arg(void *cls, enum MHD_ValueKind kind, const char *key,
				      const char *value)
{
	size_t *n = cls;

	*n += strlen(key) + (value ? strlen(value) : 0) + 2;
	return MHD_YES;
}

static int http_body_append(struct http_conn *hc, const char *data, size_t n, size_t max)
{
	if (hc->too_big || hc->len + n > max) {
		hc->too_big = true;
		return 0;
	}
	if (hc->len + n + 1 > hc->cap) {
		size_t cap = hc->cap ? hc->cap : 4096;
		char *nb;

		while (cap < hc->len + n + 1)
			cap *= 2;
		nb = malloc(cap);
		if (!nb)
			return -1;
		if (hc->body) {
			memcpy(nb, hc->body, hc->len);
			/* The body may hold secrets: never leave copies behind. */
			wipe_free(hc->body);
		}
		hc->body = nb;
		hc->cap = cap;
	}
	memcpy(hc->body + hc->len, data, n);
	hc->len += n;
	hc->body[hc->len] = '\0';
	return 0;
}

/* Whether a peer address is a loopback one (127/8, ::1, ::ffff:127/104). */
static bool http_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return false;
}

/* The verification status of the client's certificate, 0 when it verified; -1: none sent. */
static int http_cert_status(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	gnutls_session_t ses = ci ? (gnutls_session_t)ci->tls_session : NULL;
	unsigned int n = 0, status = 0;

	if (!ses || !gnutls_certificate_get_peers(ses, &n) || n == 0)
		return -1;
	if (gnutls_certificate_verify_peers2(ses, &status) != 0)
		return (int)GNUTLS_CERT_INVALID;
	return (int)status;
}

static const char *http_cert_problem(const struct http_conn *hc)
{
	if (!hc->tls)
		return "not a TLS connection";
	if (hc->cert_status < 0)
		return "none presented";
	if (hc->cert_status & GNUTLS_CERT_EXPIRED)
		return "it has expired";
	if (hc->cert_status & GNUTLS_CERT_NOT_ACTIVATED)
		return "it is not valid yet";
	if (hc->cert_status & (GNUTLS_CERT_SIGNER_NOT_FOUND | GNUTLS_CERT_SIGNER_NOT_CA))
		return "it is not signed by the configured CA";
	return "it does not verify";
}

/* Where the request comes from: transport, peer address, TLS and client certificate. */
static void http_peer(struct http_server *s, struct http_conn *hc)
{
	const union MHD_ConnectionInfo *di =
	    MHD_get_connection_info(hc->c, MHD_CONNECTION_INFO_DAEMON);
	const union MHD_ConnectionInfo *ai =
	    MHD_get_connection_info(hc->c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = ai ? ai->client_addr : NULL;

	hc->tcp = di && di->daemon == s->tcp_daemon && s->tcp_daemon;
	snprintf(hc->peer, sizeof(hc->peer), "unix");
	hc->loopback = !hc->tcp;
	if (!hc->tcp)
		return;
	hc->loopback = sa && http_loopback(sa);
	if (sa && sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, hc->peer,
			  sizeof(hc->peer));
	else if (sa && sa->sa_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, hc->peer,
			  sizeof(hc->peer));
	else
		snprintf(hc->peer, sizeof(hc->peer), "?");
	hc->tls = s->tls_cert != NULL;
	if (hc->tls && s->tls_ca) {
		hc->cert_status = http_cert_status(hc->c);
		hc->cert_ok = hc->cert_status == 0;
	}
}

/* The first call for a request: its head is complete. Returns false to drop the connection. */
static bool http_begin(struct http_server *s, struct MHD_Connection *c, const char *url,
		       const char *method, void **con_cls)
{
	const char *cl =
	    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	size_t ulen = strlen(url);
	struct http_conn *hc = calloc(1, sizeof(*hc));
	bool drain;

	if (!hc)
		return false;
	hc->c = c;
	hc->url = url;
	hc->method = method;
	hc->start_ms = clock_now_ms(clock_real());
	*con_cls = hc;
	http_peer(s, hc);
	/* The head came: from now on the connection has the daemon's idle timeout. */
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
				  (unsigned)s->cfg.limits.idle_timeout_s);
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, http_count_arg, &ulen);
	hc->url_too_long = ulen > HTTP_URL_MAX;
	/*
	 * A body announced larger than the cap is refused: up to
	 * HTTP_DRAIN_FACTOR times the cap it is read and dropped first, so
	 * that the client, still sending, reads the 413 instead of a reset;
	 * beyond that at once.
	 */
	hc->too_big = cl && strtoull(cl, NULL, 10) > s->cfg.body_max;
	drain = hc->too_big && strtoull(cl, NULL, 10) <= HTTP_DRAIN_FACTOR * s->cfg.body_max;
	if (hc->tcp && s->tls_ca && !hc->cert_ok) {
		/* Nothing is served without a client certificate of the CA: not even a 404. */
		hc->rc = err_set(&hc->e, CSID_EUNAUTH,
				 "%s: a client certificate signed by the configured CA is "
				 "required (%s)",
				 s->name, http_cert_problem(hc));
		http_finish(s, hc);
		return true;
	}
	if (hc->url_too_long)
		hc->rc = err_set(&hc->e, CSID_ETOOBIG, "%s: URL longer than %d bytes", s->name,
				 HTTP_URL_MAX);
	else if (hc->too_big)
		hc->rc = err_set(&hc->e, CSID_ETOOBIG, "%s: request body larger than %zu bytes",
				 s->name, s->cfg.body_max);
	if (hc->url_too_long || (hc->too_big && !drain))
		http_finish(s, hc);
	return true;
}

static enum MHD_Result http_handler(void *cls, struct MHD_Connection *c, const char *url,
				    const char *method, const char *version, const char *upload,
				    size_t *upload_size, void **con_cls)
{
	struct http_server *s = cls;
	struct http_conn *hc = *con_cls;

	if (!hc)
		return http_begin(s, c, url, method, con_cls) ? MHD_YES : MHD_NO;
	if (hc->state == HTTP_CONN_ANSWERED) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		size_t n = *upload_size;
		int rc = http_body_append(hc, upload, n, s->cfg.body_max);

		/*
		 * The body may hold secrets: no copy stays in libmicrohttpd's
		 * read buffer either (its memory, writable, handed to us to
		 * consume; the bytes are not read again once consumed).
		 */
		explicit_bzero((char *)upload, n);
		*upload_size = 0;
		return rc == 0 ? MHD_YES : MHD_NO;
	}
	if (hc->state == HTTP_CONN_DONE) {
		http_finish(s, hc);
		return MHD_YES;
	}
	if (hc->state != HTTP_CONN_READING)
		return MHD_YES;
	if (hc->too_big) {
		hc->rc = err_set(&hc->e, CSID_ETOOBIG, "%s: request body larger than %zu bytes",
				 s->name, s->cfg.body_max);
		http_finish(s, hc);
		return MHD_YES;
	}
	if (http_at_once(s, hc)) {
		http_run(s, hc);
		/* No suspending here (a stream with nothing to send suspends). */
		if (hc->rc == HTTP_WAIT || (s->cfg.threaded && hc->rep.stream.next)) {
			http_reply_drop(&hc->rep);
			hc->rc = err_set(&hc->e, CSID_EINTERNAL, "%s: %s may not wait nor stream",
					 s->name, url);
		}
		http_finish(s, hc);
		return MHD_YES;
	}
	if (!http_work_submit(s, hc)) {
		hc->rc = err_set(&hc->e, CSID_EUNAVAIL, "%s: shutting down", s->name);
		http_finish(s, hc);
	}
	return MHD_YES;
}

/*
 * A new connection has the header timeout until its first request head is
 * in (http_begin). Only those connections carry a timeout of their own:
 * libmicrohttpd walks the list of such connections on every turn of its
 * loop, while connections on the daemon's timeout cost nothing.
 */
static void http_notify_conn(void *cls, struct MHD_Connection *c, void **socket_ctx,
			     enum MHD_ConnectionNotificationCode code)
{
	struct http_server *s = cls;
	const union MHD_ConnectionInfo *ci;

	if (code == MHD_CONNECTION_NOTIFY_CLOSED)
		http_peers_closed(s, *socket_ctx);
	if (code != MHD_CONNECTION_NOTIFY_STARTED)
		return;
	http_peers_started(s, c, socket_ctx);
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
				  (unsigned)s->cfg.limits.header_timeout_s);
	/*
	 * GnuTLS takes a handshake message of any length by default. With
	 * this bound a complete message over 64 KiB (a client certificate
	 * chain of 10,000 entries is 11 MB) is refused before it is parsed.
	 * GnuTLS still gathers an incomplete message until the header
	 * timeout cuts the connection: that memory is not bounded here.
	 */
	ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);
	if (ci && ci->tls_session)
		gnutls_handshake_set_max_packet_length((gnutls_session_t)ci->tls_session,
						       HTTP_TLS_HANDSHAKE_MAX);
}

/*
 * Every request line read (libmicrohttpd's URI logger, called once per
 * request): the rest of that head has the header timeout again, so a
 * keep-alive connection's later requests are bounded as its first one is.
 * Between requests a keep-alive connection has the idle timeout (as Go's
 * IdleTimeout), and http_begin gives it back once the head is in. The
 * return value would be the request's context: none yet (http_begin).
 */
static void *http_request_line(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct http_server *s = cls;

	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
				  (unsigned)s->cfg.limits.header_timeout_s);
	return NULL;
}

/*
 * Zeroes a credential header's value where libmicrohttpd keeps it (the
 * connection's read buffer, reused or freed later without zeroing).
 */
static enum MHD_Result http_wipe_header(void *cls, enum MHD_ValueKind kind, const char *key,
					size_t key_size, const char *value, size_t value_size)
{
	(void)cls;
	(void)kind;
	(void)key_size;
	if (value &&
	    (strcasecmp(key, "X-Csid-Token") == 0 || strcasecmp(key, "Authorization") == 0))
		explicit_bzero((char *)value, value_size);
	return MHD_YES;
}

static void http_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			   enum MHD_RequestTerminationCode code)
{
	struct http_conn *hc = *con_cls;

	(void)MHD_get_connection_values_n(c, MHD_HEADER_KIND, http_wipe_header, NULL);
	if (!hc)
		return;
	if (hc->log_pending)
		http_log_answer(cls, hc);
	http_reply_drop(&hc->rep);
	wipe_free(hc->body);
	free(hc);
	*con_cls = NULL;
}

static void http_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void http_mhd_log(void *cls, const char *fmt, va_list ap)
{
	struct http_server *s = cls;
	char buf[512], q[600];
	size_t n;

	int64_t now = clock_now_ms(clock_real());
	unsigned long dropped;

	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	/*
	 * A flood of connections makes one line per refused connection: at
	 * most HTTP_LOG_BURST lines a second, then a count of those dropped.
	 */
	pthread_mutex_lock(&s->log_mu);
	if (now - s->log_second >= 1000) {
		s->log_second = now;
		s->log_lines = 0;
	}
	if (++s->log_lines > HTTP_LOG_BURST) {
		s->log_dropped++;
		pthread_mutex_unlock(&s->log_mu);
		return;
	}
	dropped = s->log_dropped;
	s->log_dropped = 0;
	pthread_mutex_unlock(&s->log_mu);
	log_warn("msg=\"http server\" api=%s detail=%s dropped=%lu", s->name,
		 log_q(q, sizeof(q), buf), dropped);
}

/* Starts a daemon on listening socket fd (or passes on fd's error code); tcp: limits per client,
 * TLS. */
static int http_serve(struct http_server *s, int fd, const char *where, bool tcp,
		      struct MHD_Daemon **out, struct err *e)
{
	const struct http_limits *l = &s->cfg.limits;
	unsigned pool = tcp ? l->io_threads : 1, flags = MHD_USE_ERROR_LOG;
	struct MHD_OptionItem opts[7];
	size_t n = 0;

	if (fd < 0)
		return fd;
	/* Threads per connection poll (epoll is not offered) and never suspend. */
	if (s->cfg.threaded) {
		flags |= MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL_INTERNAL_THREAD;
		opts[n++] =
		    (struct MHD_OptionItem){MHD_OPTION_THREAD_STACK_SIZE, HTTP_THREAD_STACK, NULL};
	} else {
		flags |= MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
	}
	if (tcp)
		opts[n++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT,
						    l->per_client, NULL};
	/* More than one I/O thread: a pool of them. */
	if (tcp && pool > 1 && !s->cfg.threaded)
		opts[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, pool, NULL};
	if (tcp && s->tls_cert) {
		flags |= MHD_USE_TLS;
		opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls_cert};
		opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls_key};
		/* With a CA, clients are asked for a certificate (http_peer checks it). */
		if (s->tls_ca)
			opts[n++] =
			    (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, s->tls_ca};
	}
	opts[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
	*out = MHD_start_daemon(
	    flags, 0, NULL, NULL, http_handler, s, MHD_OPTION_EXTERNAL_LOGGER, http_mhd_log, s,
	    MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, l->max_conns,
	    MHD_OPTION_CONNECTION_TIMEOUT, l->idle_timeout_s, MHD_OPTION_NOTIFY_CONNECTION,
	    http_notify_conn, s, MHD_OPTION_URI_LOG_CALLBACK, http_request_line, s,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
	    MHD_OPTION_UNESCAPE_CALLBACK, http_unescape, s, MHD_OPTION_NOTIFY_COMPLETED,
	    http_completed, s, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
	if (*out)
		return 0;
	close(fd);
	return err_set(e, CSID_EIO, "%s: cannot start the HTTP server on %s%s", s->name, where,
		       tcp && s->tls_cert ? " (are the TLS certificate and key a valid pair?)"
					  : "");
}

void http_tls_from_config(const struct conf_http *h, struct http_tls *out)
{
	out->cert_file = h->tls_cert_file;
	out->key_file = h->tls_key_file;
	out->client_ca_file = h->tls_client_ca_file;
}

static char *http_dup(const char *v)
{
	return v ? strdup(v) : NULL;
}

void http_limits_from_config(const struct conf_http *h, struct http_limits *out)
{
	memset(out, 0, sizeof(*out));
	out->workers = h->workers;
	out->per_client = h->max_conns_per_client;
	out->header_timeout_s = h->header_timeout_s;
	out->idle_timeout_s = h->idle_timeout_s;
	out->max_conns = h->max_conns;
}

/*
 * The limits with defaults filled in. Connections take file descriptors:
 * the soft limit is raised to the hard one, and the total stays below it.
 */
static void http_limits_fill(struct http_limits *l, bool threaded)
{
	struct rlimit rl;
	unsigned fit = HTTP_MAX_CONNS;

	if (!l->workers)
		l->workers = HTTP_WORKERS;
	if (!l->io_threads)
		l->io_threads = 1;
	if (!l->per_client)
		l->per_client = HTTP_PER_CLIENT;
	if (!l->header_timeout_s)
		l->header_timeout_s = HTTP_HEADER_TIMEOUT_S;
	if (!l->idle_timeout_s)
		l->idle_timeout_s = HTTP_IDLE_TIMEOUT_S;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		if (rl.rlim_cur < rl.rlim_max) {
			rl.rlim_cur = rl.rlim_max;
			setrlimit(RLIMIT_NOFILE, &rl);
			getrlimit(RLIMIT_NOFILE, &rl);
		}
		if (rl.rlim_cur != RLIM_INFINITY)
			fit = rl.rlim_cur > 2 * HTTP_FD_RESERVE
				  ? (unsigned)(rl.rlim_cur - HTTP_FD_RESERVE)
				  : (unsigned)rl.rlim_cur / 2;
	}
	if (!l->max_conns)
		l->max_conns = threaded ? HTTP_THREADED_MAX_CONNS : HTTP_MAX_CONNS;
	if (l->max_conns > fit)
		l->max_conns = fit;
}

int http_server_start(const struct http_server_config *cfg, struct http_server **out, struct err *e)
{
	int rc = 0, tcp_fd = -1, unix_fd = -1;
	struct http_server *s;
	bool unix_made;

	*out = NULL;
	if (!cfg->handler || (!cfg->socket_path && !(cfg->tcp_addr && cfg->tcp_addr[0])))
		return err_set(e, CSID_EINVAL, "http server: a handler and a listener required");
	if (cfg->threaded && cfg->wake)
		return err_set(e, CSID_EINVAL, "http server: a threaded listener parks nothing");
	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, CSID_ENOMEM, "out of memory");
	s->cfg = *cfg;
	pthread_mutex_init(&s->log_mu, NULL);
	http_peers_init(&s->peers);
	http_limits_fill(&s->cfg.limits, cfg->threaded);
	s->name = http_dup(cfg->name ? cfg->name : "api");
	s->socket_path = http_dup(cfg->socket_path);
	s->tcp_addr = cfg->tcp_addr && cfg->tcp_addr[0] ? http_dup(cfg->tcp_addr) : NULL;
	if (!s->cfg.body_max)
		s->cfg.body_max = 1024 * 1024;
	if (!s->name || (cfg->socket_path && !s->socket_path) ||
	    (cfg->tcp_addr && cfg->tcp_addr[0] && !s->tcp_addr)) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto fail;
	}
	if (cfg->tls.cert_file && s->tcp_addr &&
	    ((rc =
		  http_read_pem(s->name, "TLS certificate", cfg->tls.cert_file, &s->tls_cert, e)) ||
	     (rc = http_read_pem(s->name, "TLS key", cfg->tls.key_file ? cfg->tls.key_file : "",
				 &s->tls_key, e)) ||
	     (cfg->tls.client_ca_file &&
	      (rc = http_read_pem(s->name, "client CA", cfg->tls.client_ca_file, &s->tls_ca, e)))))
		goto fail;
	/* A threaded listener runs every handler on its connection's thread: no workers. */
	rc = cfg->threaded ? 0 : http_work_start(s, e);
	/*
	 * Both sockets listen before either is served: a client that finds
	 * one answering (local clients and tests take either for "up") finds
	 * the other taking connections too, held in its backlog until its
	 * daemon runs.
	 */
	if (!rc && s->tcp_addr && (tcp_fd = http_listen_tcp(s->name, s->tcp_addr, e)) < 0)
		rc = tcp_fd;
	if (!rc && s->socket_path && (unix_fd = http_listen_unix(s->name, s->socket_path, e)) < 0)
		rc = unix_fd;
	unix_made = unix_fd >= 0;
	/* http_serve owns the fd it is given: the daemon's, or closed. */
	if (!rc && tcp_fd >= 0) {
		rc = http_serve(s, tcp_fd, s->tcp_addr, true, &s->tcp_daemon, e);
		tcp_fd = -1;
	}
	if (!rc && unix_fd >= 0) {
		rc = http_serve(s, unix_fd, s->socket_path, false, &s->unix_daemon, e);
		unix_fd = -1;
	}
	if (rc) {
		if (tcp_fd >= 0)
			close(tcp_fd);
		if (unix_fd >= 0)
			close(unix_fd);
		/* A socket file made here and never served goes too. */
		if (unix_made && !s->unix_daemon)
			unlink(s->socket_path);
		goto fail;
	}
	log_info("msg=\"%s listening\" socket=%s addr=%s tls=%s client_certs=%s max_conns=%u "
		 "per_client=%u workers=%u",
		 s->name, s->socket_path ? s->socket_path : "-", s->tcp_addr ? s->tcp_addr : "-",
		 s->tls_cert ? "on" : "off", s->tls_ca ? "required" : "off",
		 s->cfg.limits.max_conns, s->cfg.limits.per_client,
		 s->cfg.threaded ? 0 : s->cfg.limits.workers);
	*out = s;
	return 0;
fail:
	http_server_stop(s);
	return rc;
}

void http_server_stop(struct http_server *s)
{
	if (!s)
		return;
	/* No connection may stay suspended when a daemon stops. */
	http_work_stop(s);
	if (s->unix_daemon) {
		MHD_stop_daemon(s->unix_daemon);
		unlink(s->socket_path);
	}
	if (s->tcp_daemon)
		MHD_stop_daemon(s->tcp_daemon);
	http_work_free(s);
	http_peers_fini(&s->peers);
	pthread_mutex_destroy(&s->log_mu);
	http_free_pem(s->tls_cert);
	http_free_pem(s->tls_key);
	http_free_pem(s->tls_ca);
	free(s->name);
	free(s->socket_path);
	free(s->tcp_addr);
	free(s);
}
