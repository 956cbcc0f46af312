/*
 * HTTP plumbing on libmicrohttpd (see http.h): a unix listener we bind
 * ourselves and hand over, an optional TCP listener, a thread per
 * connection, request bodies gathered up to the cap and wiped when done,
 * and the one place where answers, streams and errors are written.
 *
 * libmicrohttpd answers a few failures itself with an HTML page: a request
 * head larger than its per-connection memory. The memory limit is set well
 * above HTTP_URL_MAX so that a long URL reaches us and gets our JSON 414;
 * what still goes past it (a head over HTTP_CONN_MEMORY) or is not HTTP at
 * all is answered by libmicrohttpd.
 */
#include "api/http.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "util/log.h"

#define HTTP_CONN_LIMIT 512
#define HTTP_IDLE_TIMEOUT_S 120
#define HTTP_CONN_MEMORY (128 * 1024)
#define HTTP_STREAM_BLOCK 16384

struct http_server {
	struct http_server_config cfg;
	char *name;
	char *socket_path;
	char *tcp_addr;
	struct MHD_Daemon *unix_daemon;
	struct MHD_Daemon *tcp_daemon;
};

/* Per-request state, from the first call of the handler to completion. */
struct http_conn {
	char *body;
	size_t len;
	size_t cap;
	bool too_big;
	bool url_too_long;
	bool answered;
	struct timespec start;
};

const char *http_query(const struct http_request *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn_, MHD_GET_ARGUMENT_KIND, key);
}

const char *http_header(const struct http_request *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn_, MHD_HEADER_KIND, name);
}

const char *http_request_token(const struct http_request *r)
{
	const char *tok = http_header(r, "X-Csid-Token");
	const char *auth = http_header(r, "Authorization");

	if (!tok && auth && strncmp(auth, "Bearer ", 7) == 0)
		tok = auth + 7;
	return tok;
}

bool http_token_eq(const char *presented, const char *secret)
{
	size_t la = strlen(presented), lb = strlen(secret), i;
	unsigned char d = la != lb;

	/* Time depends on the secret's length only, never on where they differ. */
	for (i = 0; i < lb; i++)
		d |= (unsigned char)(presented[i < la ? i : 0] ^ secret[i]);
	return d == 0;
}

/* Frees an answer that held secrets, zeroed first. */
static void http_wipe_free(void *text)
{
	explicit_bzero(text, strlen(text));
	free(text);
}

/* Sends text (owned; NULL: out of memory); wipe: zeroed before it is freed. */
static enum MHD_Result http_send_text_wipe(struct MHD_Connection *c, unsigned status, char *text,
					   const char *index, const char *allow, bool wipe)
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
										 http_wipe_free)
			    : MHD_create_response_from_buffer(strlen(text), text,
							      MHD_RESPMEM_MUST_FREE);
	}
	if (!resp) {
		if (wipe)
			http_wipe_free(text);
		else
			free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
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
	return http_send_text_wipe(c, status, text, index, allow, false);
}

static void http_send_error(struct MHD_Connection *c, unsigned status, const char *code,
			    const char *msg, const char *allow)
{
	json_t *doc = json_pack("{s:s, s:s}", "error", msg, "code", code);

	http_send_text(c, status, doc ? json_dumps(doc, JSON_COMPACT) : NULL, NULL, allow);
	json_decref(doc);
}

static void http_send_err(struct MHD_Connection *c, int rc, const struct err *e)
{
	http_send_error(c, (unsigned)csid_err_http_status(rc), csid_err_code(rc),
			e->msg[0] ? e->msg : csid_strerror(rc), NULL);
}

static ssize_t http_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct http_stream *st = cls;
	long n = st->next(st->ctx, buf, max);

	if (n < 0)
		return MHD_CONTENT_READER_END_OF_STREAM;
	return (ssize_t)n;
}

static void http_stream_free(void *cls)
{
	struct http_stream *st = cls;

	if (st->done)
		st->done(st->ctx);
	free(st);
}

static void http_send_stream(struct MHD_Connection *c, const struct http_stream *src,
			     const char *index)
{
	struct http_stream *st = malloc(sizeof(*st));
	struct MHD_Response *resp = NULL;

	if (st) {
		*st = *src;
		resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, HTTP_STREAM_BLOCK,
							 http_stream_read, st, http_stream_free);
	}
	if (!resp) {
		if (st)
			http_stream_free(st);
		else if (src->done)
			src->done(src->ctx);
		http_send_error(c, 500, "no_memory", "out of memory", NULL);
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
		http_send_error(c, 500, "no_memory", "out of memory", NULL);
		return;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				rep->content_type ? rep->content_type : "application/octet-stream");
	for (size_t i = 0; i + 1 < 2 * HTTP_REPLY_HEADERS && rep->headers[i]; i += 2)
		MHD_add_response_header(resp, rep->headers[i], rep->headers[i + 1]);
	MHD_queue_response(c, rep->status, resp);
	MHD_destroy_response(resp);
}

static void http_log(const struct http_server *s, const char *method, const char *url,
		     unsigned status, const struct timespec *start, const char *error)
{
	char qu[300], qe[600];
	struct timespec now;
	double ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (double)(now.tv_sec - start->tv_sec) * 1e3 +
	     (double)(now.tv_nsec - start->tv_nsec) / 1e6;
	log_msg(strcmp(method, "GET") == 0 && status < 400 ? LOG_DEBUG : LOG_INFO,
		"msg=\"http request\" api=%s method=%s path=%s status=%u duration_ms=%.1f "
		"error=%s",
		s->name, method, log_q(qu, sizeof(qu), url), status, ms,
		log_q(qe, sizeof(qe), error && error[0] ? error : "-"));
}

/* Runs the handler for a complete request and queues its answer; returns the status. */
static unsigned http_dispatch(struct http_server *s, struct MHD_Connection *c, const char *url,
			      const char *method, struct http_conn *hc, struct err *e)
{
	struct http_request req = {
	    .method = method,
	    .url = url,
	    .body = hc->body ? hc->body : "",
	    .len = hc->len,
	    .conn_ = c,
	};
	struct http_reply rep;
	int rc;

	if (hc->url_too_long) {
		rc =
		    err_set(e, CSID_ETOOBIG, "%s: URL longer than %d bytes", s->name, HTTP_URL_MAX);
		http_send_error(c, 414, csid_err_code(rc), e->msg, NULL);
		return 414;
	}
	if (hc->too_big) {
		rc = err_set(e, CSID_ETOOBIG, "%s: request body larger than %zu bytes", s->name,
			     s->cfg.body_max);
		http_send_err(c, rc, e);
		return (unsigned)csid_err_http_status(rc);
	}
	memset(&rep, 0, sizeof(rep));
	rc = s->cfg.handler(s->cfg.ctx, &req, &rep, e);
	if ((rc || rep.stream.next) && rep.text && rep.wipe)
		http_wipe_free(rep.text);
	else if (rc || rep.stream.next)
		free(rep.text);
	if (rc == HTTP_METHOD_NOT_ALLOWED) {
		char msg[160];

		snprintf(msg, sizeof(msg), "method %s not allowed here (allowed: %s)", method,
			 rep.allow ? rep.allow : "none");
		err_set(e, CSID_EINVAL, "%s", msg);
		http_send_error(c, 405, "method_not_allowed", msg, rep.allow);
		json_decref(rep.doc);
		return 405;
	}
	if (rc) {
		json_decref(rep.doc);
		if (rep.stream.done)
			rep.stream.done(rep.stream.ctx);
		http_send_err(c, rc, e);
		return (unsigned)csid_err_http_status(rc);
	}
	if (rep.stream.next) {
		json_decref(rep.doc);
		http_send_stream(c, &rep.stream, rep.index);
		return 200;
	}
	if (!rep.status)
		rep.status = 200;
	if (rep.data) {
		json_decref(rep.doc);
		http_send_bytes(c, &rep);
		return rep.status;
	}
	if (rep.text) {
		json_decref(rep.doc);
		http_send_text_wipe(c, rep.status, rep.text, rep.index, NULL, rep.wipe);
		return rep.status;
	}
	if (!rep.doc)
		rep.doc = json_object();
	http_send_text(c, rep.status, rep.doc ? json_dumps(rep.doc, JSON_COMPACT) : NULL, rep.index,
		       NULL);
	json_decref(rep.doc);
	return rep.status;
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
			memset(hc->body, 0, hc->cap);
			free(hc->body);
		}
		hc->body = nb;
		hc->cap = cap;
	}
	memcpy(hc->body + hc->len, data, n);
	hc->len += n;
	hc->body[hc->len] = '\0';
	return 0;
}

static enum MHD_Result http_handler(void *cls, struct MHD_Connection *c, const char *url,
				    const char *method, const char *version, const char *upload,
				    size_t *upload_size, void **con_cls)
{
	struct http_server *s = cls;
	struct http_conn *hc = *con_cls;
	struct err e;
	unsigned status;

	if (!hc) {
		const char *cl =
		    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		size_t ulen = strlen(url);

		hc = calloc(1, sizeof(*hc));
		if (!hc)
			return MHD_NO;
		clock_gettime(CLOCK_MONOTONIC, &hc->start);
		*con_cls = hc;
		MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, http_count_arg, &ulen);
		hc->url_too_long = ulen > HTTP_URL_MAX;
		/* A body announced larger than the cap is refused before it is read. */
		hc->too_big = cl && strtoull(cl, NULL, 10) > s->cfg.body_max;
		if (hc->too_big || hc->url_too_long) {
			hc->answered = true;
			err_clear(&e);
			status = http_dispatch(s, c, hc->url_too_long ? "(long url)" : url, method,
					       hc, &e);
			http_log(s, method, hc->url_too_long ? "(long url)" : url, status,
				 &hc->start, e.msg);
		}
		return MHD_YES;
	}
	if (hc->answered) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		size_t n = *upload_size;

		*upload_size = 0;
		return http_body_append(hc, upload, n, s->cfg.body_max) == 0 ? MHD_YES : MHD_NO;
	}
	hc->answered = true;
	err_clear(&e);
	status = http_dispatch(s, c, url, method, hc, &e);
	http_log(s, method, url, status, &hc->start, status < 400 ? NULL : e.msg);
	return MHD_YES;
}

static void http_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			   enum MHD_RequestTerminationCode code)
{
	struct http_conn *hc = *con_cls;

	if (!hc)
		return;
	if (hc->body) {
		memset(hc->body, 0, hc->cap);
		free(hc->body);
	}
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

	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	log_warn("msg=\"http server\" api=%s detail=%s", s->name, log_q(q, sizeof(q), buf));
}

static int http_listen_unix(const char *name, const char *path, struct err *e)
{
	struct sockaddr_un sa;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path))
		return err_set(e, CSID_EINVAL, "%s: listener socket %s: longer than %zu bytes",
			       name, path, sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(e, errno, "socket");
	/* A socket file that nobody answers on is left over from a crash: replace it. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		return err_set(e, CSID_EEXIST, "%s: listener socket %s: another process listens",
			       name, path);
	}
	close(fd);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(e, errno, "socket");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, 0600) != 0 ||
	    listen(fd, 128) != 0) {
		int rc = err_errno(e, errno, "%s: listener socket %s", name, path);

		close(fd);
		return rc;
	}
	return fd;
}

static int http_listen_tcp(const char *name, const char *addr, struct err *e)
{
	char host[256], *colon;
	struct addrinfo hints, *res = NULL;
	int fd, one = 1, rc;

	snprintf(host, sizeof(host), "%s", addr);
	colon = strrchr(host, ':');
	if (!colon)
		return err_set(e, CSID_EINVAL, "%s: listener addr %s: expected host:port", name,
			       addr);
	*colon = '\0';
	/* "[::1]:4646" */
	if (host[0] == '[' && colon > host + 1 && colon[-1] == ']') {
		colon[-1] = '\0';
		memmove(host, host + 1, strlen(host));
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
	if (rc != 0)
		return err_set(e, CSID_EINVAL, "%s: listener addr %s: %s", name, addr,
			       gai_strerror(rc));
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(res);
		return err_errno(e, errno, "socket");
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0) {
		rc = err_errno(e, errno, "%s: listener addr %s", name, addr);
		close(fd);
		freeaddrinfo(res);
		return rc;
	}
	freeaddrinfo(res);
	return fd;
}

/* Starts a daemon on listening socket fd (or passes on fd's error code). */
static int http_serve(struct http_server *s, int fd, const char *where, struct MHD_Daemon **out,
		      struct err *e)
{
	if (fd < 0)
		return fd;
	*out = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG, 0,
	    NULL, NULL, http_handler, s, MHD_OPTION_EXTERNAL_LOGGER, http_mhd_log, s,
	    MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONN_LIMIT,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_IDLE_TIMEOUT_S,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTP_CONN_MEMORY,
	    MHD_OPTION_UNESCAPE_CALLBACK, http_unescape, s, MHD_OPTION_NOTIFY_COMPLETED,
	    http_completed, s, MHD_OPTION_END);
	if (*out)
		return 0;
	close(fd);
	return err_set(e, CSID_EIO, "%s: cannot start the HTTP server on %s", s->name, where);
}

static char *http_dup(const char *v)
{
	return v ? strdup(v) : NULL;
}

int http_server_start(const struct http_server_config *cfg, struct http_server **out, struct err *e)
{
	struct http_server *s;
	int rc = 0;

	*out = NULL;
	if (!cfg->handler || (!cfg->socket_path && !(cfg->tcp_addr && cfg->tcp_addr[0])))
		return err_set(e, CSID_EINVAL, "http server: a handler and a listener required");
	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, CSID_ENOMEM, "out of memory");
	s->cfg = *cfg;
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
	if (s->socket_path)
		rc = http_serve(s, http_listen_unix(s->name, s->socket_path, e), s->socket_path,
				&s->unix_daemon, e);
	if (!rc && s->tcp_addr)
		rc = http_serve(s, http_listen_tcp(s->name, s->tcp_addr, e), s->tcp_addr,
				&s->tcp_daemon, e);
	if (rc)
		goto fail;
	log_info("msg=\"%s listening\" socket=%s addr=%s", s->name,
		 s->socket_path ? s->socket_path : "-", s->tcp_addr ? s->tcp_addr : "-");
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
	if (s->unix_daemon) {
		MHD_stop_daemon(s->unix_daemon);
		unlink(s->socket_path);
	}
	if (s->tcp_daemon)
		MHD_stop_daemon(s->tcp_daemon);
	free(s->name);
	free(s->socket_path);
	free(s->tcp_addr);
	free(s);
}

const char *http_path_segment(const char *url, const char *prefix, char *buf, size_t cap)
{
	size_t plen = strlen(prefix), n;
	const char *seg, *end;

	if (strncmp(url, prefix, plen) != 0)
		return NULL;
	seg = url + plen;
	end = strchr(seg, '/');
	n = end ? (size_t)(end - seg) : strlen(seg);
	if (n == 0 || n >= cap)
		return NULL;
	memcpy(buf, seg, n);
	buf[n] = '\0';
	return seg + n;
}

int http_query_u64(const struct http_request *r, const char *key, uint64_t dflt, uint64_t *out,
		   struct err *e)
{
	const char *v = http_query(r, key);
	char *end;
	unsigned long long x;

	*out = dflt;
	if (!v)
		return 0;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (!v[0] || *end || errno || v[0] == '-')
		return err_set(e, CSID_EINVAL, "query %s: expected an unsigned integer", key);
	*out = x;
	return 0;
}

int http_query_duration(const struct http_request *r, const char *key, int64_t dflt_ms,
			int64_t *out_ms, struct err *e)
{
	const char *v = http_query(r, key);
	char *end;
	double x, unit;

	*out_ms = dflt_ms;
	if (!v)
		return 0;
	errno = 0;
	x = strtod(v, &end);
	if (end == v || errno || x < 0)
		return err_set(e, CSID_EINVAL, "query %s: expected a duration such as 30s", key);
	if (strcmp(end, "ms") == 0)
		unit = 1;
	else if (strcmp(end, "s") == 0 || !*end)
		unit = 1000;
	else if (strcmp(end, "m") == 0)
		unit = 60000;
	else
		return err_set(e, CSID_EINVAL, "query %s: expected a duration such as 30s", key);
	x *= unit;
	*out_ms = x > 3.6e6 ? 3600000 : (int64_t)x;
	return 0;
}

int http_query_bool(const struct http_request *r, const char *key, bool *out, struct err *e)
{
	const char *v = NULL;
	size_t vlen = 0;

	*out = false;
	/* "?force" without a value is found with a NULL value: it means true. */
	if (MHD_lookup_connection_value_n(r->conn_, MHD_GET_ARGUMENT_KIND, key, strlen(key), &v,
					  &vlen) != MHD_YES)
		return 0;
	if (!v || !v[0] || strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
		*out = true;
	else if (strcmp(v, "false") != 0 && strcmp(v, "0") != 0)
		return err_set(e, CSID_EINVAL, "query %s: expected true or false", key);
	return 0;
}
