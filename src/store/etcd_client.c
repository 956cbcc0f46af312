/*
 * The etcd JSON gateway client (etcd_client.h). Unary calls take a pooled
 * libcurl easy handle (keep-alive connections survive between calls) and
 * POST one JSON document; the watch stream runs one easy handle in its
 * own multi handle, so another thread can wake it (curl_multi_wakeup)
 * to cancel it at once instead of at the next progress tick.
 *
 * Endpoint choice: `cur` is the endpoint that answered last. A call
 * starts there; a failure to connect (nothing sent) moves it to the next
 * endpoint and retries, once per endpoint.
 */
#include "store/etcd_client.h"

#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "util/base64.h"
#include "util/curl_pool.h"
#include "util/strbuf.h"

/* The largest answer of a unary call (a list page of big values). */
#define ETCD_ANSWER_MAX (256 * 1024 * 1024)
/* The longest line of a stream (one watch message: one revision's events). */
#define ETCD_LINE_MAX (64 * 1024 * 1024)
#define ETCD_CONNS 16

struct etcd_client {
	char *endpoints[ETCD_ENDPOINTS_MAX];
	size_t n;
	atomic_size_t cur;
	char *ca_file, *cert_file, *key_file;
	int64_t dial_ms, request_ms;
	struct curl_pool *pool;
};

static char *etcd_dup(const char *s)
{
	return s ? strdup(s) : NULL;
}

void etcd_client_free(struct etcd_client *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->n; i++)
		free(c->endpoints[i]);
	free(c->ca_file);
	free(c->cert_file);
	free(c->key_file);
	curl_pool_free(c->pool);
	free(c);
	curl_global_cleanup();
}

int etcd_client_new(const struct etcd_client_config *cfg, struct etcd_client **out, struct err *e)
{
	struct etcd_client *c;

	*out = NULL;
	if (cfg->nendpoints == 0 || cfg->nendpoints > ETCD_ENDPOINTS_MAX)
		return err_set(e, CSID_EINVAL, "etcd: between 1 and %d endpoints needed",
			       ETCD_ENDPOINTS_MAX);
	for (size_t i = 0; i < cfg->nendpoints; i++) {
		const char *ep = cfg->endpoints[i];

		if (ep == NULL ||
		    (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0))
			return err_set(e, CSID_EINVAL,
				       "etcd: endpoint %zu: expected http://HOST:PORT or "
				       "https://HOST:PORT",
				       i);
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return err_set(e, CSID_EINTERNAL, "etcd: libcurl did not start");
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		curl_global_cleanup();
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	}
	c->dial_ms = cfg->dial_timeout_ms > 0 ? cfg->dial_timeout_ms : 2000;
	c->request_ms = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : 10000;
	for (; c->n < cfg->nendpoints; c->n++) {
		size_t len = strlen(cfg->endpoints[c->n]);

		c->endpoints[c->n] = strdup(cfg->endpoints[c->n]);
		if (c->endpoints[c->n] == NULL)
			goto nomem;
		while (len > 0 && c->endpoints[c->n][len - 1] == '/')
			c->endpoints[c->n][--len] = '\0';
	}
	c->ca_file = etcd_dup(cfg->ca_file);
	c->cert_file = etcd_dup(cfg->cert_file);
	c->key_file = etcd_dup(cfg->key_file);
	if ((cfg->ca_file && !c->ca_file) || (cfg->cert_file && !c->cert_file) ||
	    (cfg->key_file && !c->key_file) || curl_pool_new(ETCD_CONNS, &c->pool, e))
		goto nomem;
	*out = c;
	return 0;
nomem:
	etcd_client_free(c);
	return err_set(e, CSID_ENOMEM, "etcd: out of memory");
}

const char *etcd_client_endpoint(struct etcd_client *c)
{
	return c->endpoints[atomic_load(&c->cur) % c->n];
}

/* Maps a gRPC status code of an etcd error answer to a csid code. */
static int etcd_grpc_code(long code, const char *msg)
{
	switch (code) {
	case 1:
		return CSID_ECANCELED;
	case 3:
		return strstr(msg, "too large") ? CSID_ETOOBIG : CSID_EINVAL;
	case 4:
		return CSID_ETIMEDOUT;
	case 5:
		return CSID_ENOTFOUND;
	case 7:
		return CSID_EPERM;
	case 8:
		return CSID_EEXHAUSTED;
	case 9:
		return CSID_EPRECOND;
	case 11:
		return CSID_ERANGE;
	case 14:
		return CSID_EUNAVAIL;
	case 16:
		return CSID_EUNAUTH;
	default:
		return CSID_EIO;
	}
}

/*
 * Sets e from an etcd error document ({"error", "code", "message"}, or
 * in a stream {"error": {"grpc_code", "message"}}).
 */
static int etcd_error_doc(const char *ep, json_t *doc, long http, struct err *e)
{
	json_t *inner = json_object_get(doc, "error");
	json_t *src = json_is_object(inner) ? inner : doc;
	const char *msg = json_string_value(json_object_get(src, "message"));
	json_t *code = json_object_get(src, json_is_object(inner) ? "grpc_code" : "code");

	if (msg == NULL)
		msg = "no message";
	if (!json_is_integer(code))
		return err_set(e, CSID_EPROTO, "etcd %s: HTTP %ld: %.200s", ep, http, msg);
	if (json_integer_value(code) == 14 && strstr(msg, "no leader"))
		return err_set(e, CSID_EUNAVAIL, "etcd %s: no quorum (%.200s)", ep, msg);
	return err_set(e, etcd_grpc_code((long)json_integer_value(code), msg), "etcd %s: %.300s",
		       ep, msg);
}

/* Sets the options every request shares. */
static void etcd_setopt(struct etcd_client *c, CURL *h, const char *url, const char *body,
			struct curl_slist *hdrs)
{
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)c->dial_ms);
	curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (c->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, c->ca_file);
	if (c->cert_file)
		curl_easy_setopt(h, CURLOPT_SSLCERT, c->cert_file);
	if (c->key_file)
		curl_easy_setopt(h, CURLOPT_SSLKEY, c->key_file);
}

/*
 * The request headers: JSON, and no "Expect: 100-continue" (libcurl asks
 * for it on bodies over 1 KiB, which would cost a transaction a round
 * trip to etcd's answer of 100 first). Every call but a read also asks
 * for a leader (the gateway passes Grpc-Metadata-* on as gRPC metadata,
 * here etcd's "hasleader"): a member that lost its quorum then answers
 * "no leader" at once, and cancels such a watch, instead of holding a
 * write until its own timeout (7 s) and answering "context deadline
 * exceeded"; a serializable read may still be answered from what the
 * member has. NULL when out of memory.
 */
static struct curl_slist *etcd_headers(const char *path)
{
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	struct curl_slist *h2 = h ? curl_slist_append(h, "Expect:") : NULL;

	if (h2 && strcmp(path, "/v3/kv/range") != 0)
		h2 = curl_slist_append(h2, "Grpc-Metadata-hasleader: true");
	if (h2 == NULL)
		curl_slist_free_all(h);
	return h2;
}

/* Whether a transport failure happened before anything was sent. */
static bool etcd_not_sent(CURLcode cc)
{
	return cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST ||
	       cc == CURLE_SSL_CONNECT_ERROR;
}

static int etcd_transport_err(const char *ep, CURLcode cc, struct err *e)
{
	int code = cc == CURLE_OPERATION_TIMEDOUT ? CSID_ETIMEDOUT : CSID_EUNAVAIL;

	return err_set(e, code, "etcd %s: %s", ep, curl_easy_strerror(cc));
}

/* One POST of body to ep + path; the answer in *sb, the status in *http. */
static CURLcode etcd_post(struct etcd_client *c, const char *ep, const char *path, const char *body,
			  struct strbuf *sb, long *http)
{
	struct curl_slist *hdrs = etcd_headers(path);
	char url[512];
	CURL *h = curl_pool_get(c->pool);
	CURLcode cc;

	if (h == NULL || hdrs == NULL) {
		curl_slist_free_all(hdrs);
		curl_pool_put(c->pool, h);
		return CURLE_OUT_OF_MEMORY;
	}
	snprintf(url, sizeof(url), "%s%s", ep, path);
	etcd_setopt(c, h, url, body, hdrs);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)c->request_ms);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, strbuf_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, sb);
	cc = curl_easy_perform(h);
	*http = 0;
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, http);
	curl_pool_put(c->pool, h);
	curl_slist_free_all(hdrs);
	return cc;
}

int etcd_client_call(struct etcd_client *c, const char *path, json_t *req, json_t **resp,
		     struct err *e)
{
	char *body = json_dumps(req, JSON_COMPACT);
	size_t first = atomic_load(&c->cur);
	struct strbuf sb = {.max = ETCD_ANSWER_MAX};
	const char *ep = c->endpoints[first % c->n];
	CURLcode cc = CURLE_OK;
	long http = 0;
	int rc;

	*resp = NULL;
	if (body == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	for (size_t i = 0; i < c->n; i++) {
		ep = c->endpoints[(first + i) % c->n];
		strbuf_free(&sb);
		cc = etcd_post(c, ep, path, body, &sb, &http);
		if (!etcd_not_sent(cc))
			break;
	}
	free(body);
	if (cc != CURLE_OK) {
		strbuf_free(&sb);
		if (cc == CURLE_WRITE_ERROR && sb.too_big)
			return err_set(e, CSID_ETOOBIG, "etcd %s: answer over %d bytes", ep,
				       ETCD_ANSWER_MAX);
		return etcd_transport_err(ep, cc, e);
	}
	for (size_t i = 0; i < c->n; i++) {
		if (c->endpoints[i] == ep)
			atomic_store(&c->cur, i);
	}
	rc = etcd_client_answer(ep, path, sb.p ? sb.p : "", sb.len, http, resp, e);
	strbuf_free(&sb);
	return rc;
}

int etcd_client_answer(const char *ep, const char *path, const char *body, size_t len, long http,
		       json_t **resp, struct err *e)
{
	json_t *doc = json_loadb(body, len, 0, NULL);
	int rc;

	*resp = NULL;
	if (!json_is_object(doc)) {
		json_decref(doc);
		return err_set(e, CSID_EPROTO, "etcd %s%s: HTTP %ld: answer is not a JSON object",
			       ep, path, http);
	}
	if (http != 200 || json_object_get(doc, "error")) {
		rc = etcd_error_doc(ep, doc, http, e);
		json_decref(doc);
		return rc;
	}
	*resp = doc;
	return 0;
}

void etcd_stream_init(struct etcd_stream *st)
{
	atomic_init(&st->stop, false);
	st->multi = NULL;
	pthread_mutex_init(&st->mu, NULL);
}

void etcd_stream_fini(struct etcd_stream *st)
{
	pthread_mutex_destroy(&st->mu);
}

void etcd_stream_cancel(struct etcd_stream *st)
{
	atomic_store(&st->stop, true);
	pthread_mutex_lock(&st->mu);
	if (st->multi)
		curl_multi_wakeup(st->multi);
	pthread_mutex_unlock(&st->mu);
}

void etcd_stream_reset(struct etcd_stream *st)
{
	atomic_store(&st->stop, false);
}

void etcd_lines_init(struct etcd_lines *l, const char *ep, etcd_stream_cb cb, void *arg,
		     struct err *e)
{
	*l = (struct etcd_lines){
	    .line = {.max = ETCD_LINE_MAX}, .cb = cb, .arg = arg, .e = e, .ep = ep};
}

void etcd_lines_fini(struct etcd_lines *l)
{
	strbuf_free(&l->line);
}

size_t etcd_lines_feed(struct etcd_lines *l, char *data, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		char *nl = memchr(data + i, '\n', len - i);
		size_t take = nl ? (size_t)(nl - (data + i)) : len - i;
		json_t *msg;

		if (take > 0 && strbuf_write(data + i, 1, take, &l->line) != take)
			return 0;
		i += take;
		if (nl == NULL)
			break;
		if (l->line.len == 0)
			continue;
		msg = json_loadb(l->line.p, l->line.len, 0, NULL);
		strbuf_free(&l->line);
		if (!json_is_object(msg)) {
			json_decref(msg);
			l->cb_rc =
			    err_set(l->e, CSID_EPROTO, "etcd %s: stream line is not JSON", l->ep);
			return 0;
		}
		if (json_object_get(msg, "error")) {
			l->cb_rc = etcd_error_doc(l->ep, msg, 200, l->e);
			json_decref(msg);
			return 0;
		}
		l->cb_rc = l->cb(l->arg, msg);
		json_decref(msg);
		if (l->cb_rc)
			return 0;
	}
	return len;
}

/* libcurl's write callback of a stream. */
static size_t etcd_lines_write(char *data, size_t size, size_t n, void *arg)
{
	return etcd_lines_feed(arg, data, size * n);
}

/* Runs h in a multi handle until done or cancelled. */
static CURLcode etcd_stream_run(struct etcd_stream *st, CURL *h, bool *cancelled)
{
	CURLM *m = curl_multi_init();
	CURLcode cc = CURLE_OK;
	int running = 1;

	*cancelled = false;
	if (m == NULL)
		return CURLE_OUT_OF_MEMORY;
	curl_multi_add_handle(m, h);
	pthread_mutex_lock(&st->mu);
	st->multi = m;
	pthread_mutex_unlock(&st->mu);
	while (running) {
		CURLMsg *msg;
		int left;

		if (atomic_load(&st->stop)) {
			*cancelled = true;
			break;
		}
		if (curl_multi_perform(m, &running) != CURLM_OK) {
			cc = CURLE_RECV_ERROR;
			break;
		}
		while ((msg = curl_multi_info_read(m, &left))) {
			if (msg->msg == CURLMSG_DONE)
				cc = msg->data.result;
		}
		if (running && curl_multi_poll(m, NULL, 0, 1000, NULL) != CURLM_OK) {
			cc = CURLE_RECV_ERROR;
			break;
		}
	}
	pthread_mutex_lock(&st->mu);
	st->multi = NULL;
	pthread_mutex_unlock(&st->mu);
	curl_multi_remove_handle(m, h);
	curl_multi_cleanup(m);
	return cc;
}

int etcd_client_stream(struct etcd_client *c, const char *path, json_t *req, struct etcd_stream *st,
		       etcd_stream_cb cb, void *arg, struct err *e)
{
	struct curl_slist *hdrs = etcd_headers(path);
	char *body = json_dumps(req, JSON_COMPACT);
	size_t first = atomic_load(&c->cur);
	struct etcd_lines l;
	CURLcode cc = CURLE_OK;
	bool cancelled = false;
	long http = 0;
	char url[512];
	int rc = 0;

	etcd_lines_init(&l, c->endpoints[first % c->n], cb, arg, e);
	err_clear(e);
	if (body == NULL || hdrs == NULL) {
		rc = err_set(e, CSID_ENOMEM, "etcd: out of memory");
		goto out;
	}
	for (size_t i = 0; i < c->n; i++) {
		CURL *h = curl_easy_init();

		if (h == NULL) {
			rc = err_set(e, CSID_ENOMEM, "etcd: out of memory");
			goto out;
		}
		l.ep = c->endpoints[(first + i) % c->n];
		snprintf(url, sizeof(url), "%s%s", l.ep, path);
		etcd_setopt(c, h, url, body, hdrs);
		curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, etcd_lines_write);
		curl_easy_setopt(h, CURLOPT_WRITEDATA, &l);
		cc = etcd_stream_run(st, h, &cancelled);
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
		curl_easy_cleanup(h);
		if (cancelled || !etcd_not_sent(cc))
			break;
	}
	if (cancelled)
		rc = err_set(e, CSID_ECANCELED, "etcd %s: stream cancelled", l.ep);
	else if (l.cb_rc)
		rc = l.cb_rc;
	else if (cc != CURLE_OK)
		rc = etcd_transport_err(l.ep, cc, e);
	else if (http != 200)
		rc = err_set(e, CSID_EPROTO, "etcd %s%s: HTTP %ld", l.ep, path, http);
	else
		rc = err_set(e, CSID_EUNAVAIL, "etcd %s: stream ended", l.ep);
out:
	etcd_lines_fini(&l);
	free(body);
	curl_slist_free_all(hdrs);
	return rc;
}

json_t *etcd_b64_json(const void *data, size_t len)
{
	size_t n;
	char *s = base64_encode(data, len, &n);
	json_t *j = s ? json_stringn_nocheck(s, n) : NULL;

	free(s);
	return j;
}

int etcd_b64_decode(const char *s, char **out, size_t *len)
{
	return base64_decode(s ? s : "", s ? strlen(s) : 0, out, len);
}

uint64_t etcd_json_u64(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	if (json_is_string(v))
		return strtoull(json_string_value(v), NULL, 10);
	if (json_is_integer(v) && json_integer_value(v) > 0)
		return (uint64_t)json_integer_value(v);
	return 0;
}
