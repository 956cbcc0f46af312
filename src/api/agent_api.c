/*
 * The agent's HTTP server: listeners (a unix socket we bind ourselves and
 * hand to libmicrohttpd, and optionally a TCP address), request bodies
 * gathered up to a cap, routing to the resource handlers of
 * agent_api_mounts.c and agent_api_plugins.c, and the one way every answer
 * and error is written. libmicrohttpd runs a thread per connection, so a
 * mount blocked on a slow plugin (bounded by its RPC deadlines) never
 * delays another request. Request bodies are never logged; the log line
 * of a request has its method, path, status and duration.
 */
#include "api/agent_api_int.h"

#include <errno.h>
#include <fcntl.h>
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

#include "util/clock.h"
#include "util/log.h"

#define AGENT_API_CONN_LIMIT 256
#define AGENT_API_IDLE_TIMEOUT_S 120

struct agent_api_req {
	char *body;
	size_t len;
	size_t cap;
	bool too_big;
	bool answered; /* a response is queued already */
	struct timespec start;
};

static enum MHD_Result agent_api_send(struct MHD_Connection *c, unsigned status, json_t *doc)
{
	char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
	struct MHD_Response *resp;
	enum MHD_Result ret;

	if (!text) {
		static const char oom[] = "{\"error\":\"out of memory\",\"code\":\"no_memory\"}";

		status = 500;
		resp = MHD_create_response_from_buffer(sizeof(oom) - 1, (void *)oom,
						       MHD_RESPMEM_PERSISTENT);
	} else {
		resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	}
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result agent_api_send_error(struct MHD_Connection *c, unsigned status,
					    const char *code, const char *msg)
{
	json_t *doc = json_pack("{s:s, s:s}", "error", msg, "code", code);
	enum MHD_Result ret = agent_api_send(c, status, doc);

	json_decref(doc);
	return ret;
}

static void agent_api_log(const char *method, const char *url, unsigned status,
			  const struct timespec *start, const char *error)
{
	char qu[300], qe[600];
	struct timespec now;
	double ms;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ms = (double)(now.tv_sec - start->tv_sec) * 1e3 +
	     (double)(now.tv_nsec - start->tv_nsec) / 1e6;
	log_msg(strcmp(method, "GET") == 0 && status < 400 ? LOG_DEBUG : LOG_INFO,
		"msg=\"http request\" method=%s path=%s status=%u duration_ms=%.1f error=%s",
		method, log_q(qu, sizeof(qu), url), status, ms,
		log_q(qe, sizeof(qe), error && error[0] ? error : "-"));
}

/* Routes one complete request; returns the status it answered with. */
static unsigned agent_api_route(struct agent_api *a, struct MHD_Connection *c, const char *url,
				const char *method, struct agent_api_req *r, struct err *e)
{
	static const char mounts[] = "/v1/agent/mounts";
	json_t *doc = NULL;
	bool get = strcmp(method, "GET") == 0;
	const char *allow = NULL;
	int rc = 1;

	if (r->too_big) {
		rc = err_set(e, CSID_ETOOBIG, "request body larger than %d bytes",
			     AGENT_API_BODY_MAX);
	} else if (strcmp(url, "/v1/agent/self") == 0) {
		rc = get ? agent_api_self(a, &doc, e) : 1;
		allow = "GET";
	} else if (strcmp(url, "/v1/agent/plugins") == 0) {
		rc = get ? agent_api_plugins_list(a, &doc, e) : 1;
		allow = "GET";
	} else if (strcmp(url, mounts) == 0) {
		if (get)
			rc = agent_api_mounts_list(a, &doc, e);
		else if (strcmp(method, "PUT") == 0)
			rc = agent_api_mounts_put(a, r->body ? r->body : "", r->len, &doc, e);
		allow = "GET, PUT";
	} else if (strncmp(url, mounts, sizeof(mounts) - 1) == 0 &&
		   url[sizeof(mounts) - 1] == '/') {
		if (strcmp(method, "DELETE") == 0)
			rc = agent_api_mounts_delete(
			    a, url, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "force"),
			    &doc, e);
		allow = "DELETE";
	} else {
		rc = err_set(e, CSID_ENOTFOUND, "no such endpoint: %s", url);
	}
	if (rc == 1) {
		char msg[128];

		snprintf(msg, sizeof(msg), "method %s not allowed here (allowed: %s)", method,
			 allow);
		err_set(e, CSID_EINVAL, "%s", msg);
		agent_api_send_error(c, 405, "method_not_allowed", msg);
		return 405;
	}
	if (rc) {
		unsigned status = (unsigned)csid_err_http_status(rc);

		agent_api_send_error(c, status, csid_err_code(rc),
				     e->msg[0] ? e->msg : csid_strerror(rc));
		return status;
	}
	agent_api_send(c, 200, doc);
	json_decref(doc);
	return 200;
}

static enum MHD_Result agent_api_handler(void *cls, struct MHD_Connection *c, const char *url,
					 const char *method, const char *version,
					 const char *upload, size_t *upload_size, void **con_cls)
{
	struct agent_api *a = cls;
	struct agent_api_req *r = *con_cls;
	struct err e;
	unsigned status;

	if (!r) {
		const char *cl =
		    MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		clock_gettime(CLOCK_MONOTONIC, &r->start);
		*con_cls = r;
		/* A body announced larger than the cap is refused before it is read. */
		if (cl && strtoull(cl, NULL, 10) > AGENT_API_BODY_MAX) {
			r->too_big = true;
			r->answered = true;
			err_clear(&e);
			status = agent_api_route(a, c, url, method, r, &e);
			agent_api_log(method, url, status, &r->start, e.msg);
		}
		return MHD_YES;
	}
	if (r->answered) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size) {
		size_t n = *upload_size;

		*upload_size = 0;
		if (r->too_big || r->len + n > AGENT_API_BODY_MAX) {
			r->too_big = true;
			return MHD_YES;
		}
		if (r->len + n + 1 > r->cap) {
			size_t cap = r->cap ? r->cap : 4096;
			char *nb;

			while (cap < r->len + n + 1)
				cap *= 2;
			nb = malloc(cap);
			if (!nb)
				return MHD_NO;
			if (r->body) {
				memcpy(nb, r->body, r->len);
				/* The body may hold secrets: never leave copies behind. */
				memset(r->body, 0, r->cap);
				free(r->body);
			}
			r->body = nb;
			r->cap = cap;
		}
		memcpy(r->body + r->len, upload, n);
		r->len += n;
		r->body[r->len] = '\0';
		return MHD_YES;
	}
	err_clear(&e);
	status = agent_api_route(a, c, url, method, r, &e);
	agent_api_log(method, url, status, &r->start, status == 200 ? NULL : e.msg);
	return MHD_YES;
}

static void agent_api_completed(void *cls, struct MHD_Connection *c, void **con_cls,
				enum MHD_RequestTerminationCode code)
{
	struct agent_api_req *r = *con_cls;

	if (!r)
		return;
	if (r->body) {
		memset(r->body, 0, r->cap);
		free(r->body);
	}
	free(r);
	*con_cls = NULL;
}

static void agent_api_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void agent_api_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512], q[600];
	size_t n;

	vsnprintf(buf, sizeof(buf), fmt, ap);
	n = strlen(buf);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		buf[--n] = '\0';
	log_warn("msg=\"http server\" detail=%s", log_q(q, sizeof(q), buf));
}

static int agent_api_listen_unix(const char *path, struct err *e)
{
	struct sockaddr_un sa;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path))
		return err_set(e, CSID_EINVAL, "listener socket %s: longer than %zu bytes", path,
			       sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(e, errno, "socket");
	/* A socket file that nobody answers on is left over from a crash: replace it. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		return err_set(e, CSID_EEXIST, "listener socket %s: another agent is listening",
			       path);
	}
	close(fd);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(e, errno, "socket");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, 0600) != 0 ||
	    listen(fd, 128) != 0) {
		int rc = err_errno(e, errno, "listener socket %s", path);

		close(fd);
		return rc;
	}
	return fd;
}

static int agent_api_listen_tcp(const char *addr, struct err *e)
{
	char host[256], *colon;
	struct addrinfo hints, *res = NULL;
	int fd, one = 1, rc;

	snprintf(host, sizeof(host), "%s", addr);
	colon = strrchr(host, ':');
	if (!colon)
		return err_set(e, CSID_EINVAL, "listener addr %s: expected host:port", addr);
	*colon = '\0';
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
	if (rc != 0)
		return err_set(e, CSID_EINVAL, "listener addr %s: %s", addr, gai_strerror(rc));
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(res);
		return err_errno(e, errno, "socket");
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0) {
		rc = err_errno(e, errno, "listener addr %s", addr);
		close(fd);
		freeaddrinfo(res);
		return rc;
	}
	freeaddrinfo(res);
	return fd;
}

static struct MHD_Daemon *agent_api_daemon(struct agent_api *a, int fd)
{
	return MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG, 0,
	    NULL, NULL, agent_api_handler, a, MHD_OPTION_EXTERNAL_LOGGER, agent_api_mhd_log, a,
	    MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned)AGENT_API_CONN_LIMIT, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned)AGENT_API_IDLE_TIMEOUT_S, MHD_OPTION_NOTIFY_COMPLETED, agent_api_completed, a,
	    MHD_OPTION_END);
}

/* Starts a daemon on listening socket fd (or passes on fd's error code). */
static int agent_api_serve(struct agent_api *a, int fd, const char *where, struct MHD_Daemon **out,
			   struct err *e)
{
	if (fd < 0)
		return fd;
	*out = agent_api_daemon(a, fd);
	if (*out)
		return 0;
	close(fd);
	return err_set(e, CSID_EIO, "agent api: cannot start the HTTP server on %s", where);
}

static char *agent_api_dup(const char *s)
{
	return s ? strdup(s) : NULL;
}

int agent_api_start(const struct agent_api_config *cfg, struct agent_api **out, struct err *e)
{
	struct agent_api *a;
	int rc;

	*out = NULL;
	if (!cfg->socket_path || !cfg->plugins || !cfg->registry || !cfg->mounter)
		return err_set(e, CSID_EINVAL,
			       "agent api: socket, plugin manager, registry and mounter required");
	a = calloc(1, sizeof(*a));
	if (!a)
		return err_set(e, CSID_ENOMEM, "out of memory");
	a->cfg = *cfg;
	a->socket_path = agent_api_dup(cfg->socket_path);
	a->tcp_addr = agent_api_dup(cfg->tcp_addr);
	a->node_name = agent_api_dup(cfg->node_name ? cfg->node_name : "");
	a->data_dir = agent_api_dup(cfg->data_dir ? cfg->data_dir : "");
	a->started_ms = clock_wall_ms(clock_real());
	if (a->cfg.plugin_wait_ms <= 0)
		a->cfg.plugin_wait_ms = 30000;
	if (!a->socket_path || (cfg->tcp_addr && !a->tcp_addr) || !a->node_name || !a->data_dir) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto fail;
	}
	rc = agent_api_serve(a, agent_api_listen_unix(a->socket_path, e), a->socket_path,
			     &a->unix_daemon, e);
	if (!rc && a->tcp_addr)
		rc = agent_api_serve(a, agent_api_listen_tcp(a->tcp_addr, e), a->tcp_addr,
				     &a->tcp_daemon, e);
	if (rc)
		goto fail;
	if (a->tcp_addr)
		log_warn("msg=\"the agent api on TCP has no authentication: bind it to a trusted "
			 "address\" addr=%s",
			 a->tcp_addr);
	log_info("msg=\"agent api listening\" socket=%s addr=%s", a->socket_path,
		 a->tcp_addr ? a->tcp_addr : "-");
	*out = a;
	return 0;
fail:
	agent_api_stop(a);
	return rc;
}

void agent_api_stop(struct agent_api *a)
{
	if (!a)
		return;
	if (a->unix_daemon) {
		MHD_stop_daemon(a->unix_daemon);
		unlink(a->socket_path);
	}
	if (a->tcp_daemon)
		MHD_stop_daemon(a->tcp_daemon);
	free(a->socket_path);
	free(a->tcp_addr);
	free(a->node_name);
	free(a->data_dir);
	free(a);
}
