/*
 * csictl's HTTP transport on libcurl (see csictl_http.h).
 */
#include "csictl_http.h"

#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "csictl_csi.h"
#include "csictl_out.h"
#include "util/curl_pool.h"
#include "util/strbuf.h"

int csictl_http_addr_parse(const char *what, const char *s, struct csictl_http_addr *a,
			   struct err *e)
{
	const char *path = NULL;

	memset(a, 0, sizeof(*a));
	if (!s || !*s)
		return err_set(e, CSID_EINVAL, "empty %s address", what);
	if (strncmp(s, "unix://", 7) == 0)
		path = s + 7;
	else if (strncmp(s, "unix:", 5) == 0)
		path = s + 5;
	else if (s[0] == '/')
		path = s;
	if (path) {
		if (path[0] != '/')
			return err_set(e, CSID_EINVAL,
				       "%s socket \"%.64s\" is not an absolute path", what, path);
		if (strlen(path) >= sizeof(a->socket))
			return err_set(e, CSID_EINVAL, "%s socket path is longer than %zu bytes",
				       what, sizeof(a->socket) - 1);
		memcpy(a->socket, path, strlen(path) + 1);
		snprintf(a->base, sizeof(a->base), "http://localhost");
		return 0;
	}
	if (strlen(s) >= sizeof(a->base) - 256)
		return err_set(e, CSID_EINVAL, "%s address is too long", what);
	if (strncmp(s, "https://", 8) == 0 || strncmp(s, "http://", 7) == 0)
		snprintf(a->base, sizeof(a->base), "%s", s);
	else if (strstr(s, "://"))
		return err_set(e, CSID_EINVAL,
			       "%s address \"%.64s\": expected unix:PATH or http://HOST:PORT", what,
			       s);
	else
		snprintf(a->base, sizeof(a->base), "http://%s", s);
	/* No trailing slash: paths are appended as "/v1/...". */
	for (size_t n = strlen(a->base); n > 0 && a->base[n - 1] == '/'; n--)
		a->base[n - 1] = '\0';
	return 0;
}

int csictl_http_addr_list_parse(const char *what, const char *s, struct csictl_http *h,
				struct err *e)
{
	char one[CSICTL_HTTP_URL_MAX];
	size_t n = 0;

	h->nalt = 0;
	for (const char *p = s;; n++) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		int rc;

		if (n == CSICTL_HTTP_ADDRS_MAX)
			return err_set(e, CSID_EINVAL, "more than %d %s addresses",
				       CSICTL_HTTP_ADDRS_MAX, what);
		if (len >= sizeof(one))
			return err_set(e, CSID_EINVAL, "%s address is too long", what);
		memcpy(one, p, len);
		one[len] = '\0';
		rc = csictl_http_addr_parse(what, one, n == 0 ? &h->addr : &h->alt[n - 1], e);
		if (rc)
			return rc;
		h->nalt = n;
		if (!comma)
			return 0;
		p = comma + 1;
	}
}

int csictl_http_escape(const char *s, char *buf, size_t len)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			     (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' || c == '~';

		if (o + (plain ? 1 : 3) >= len)
			return CSID_ETOOBIG;
		if (plain) {
			buf[o++] = (char)c;
		} else {
			buf[o++] = '%';
			buf[o++] = hex[c >> 4];
			buf[o++] = hex[c & 15];
		}
	}
	if (o >= len)
		return CSID_ETOOBIG;
	buf[o] = '\0';
	return 0;
}

const char *csictl_http_error_text(long status, const char *body, size_t len, char *buf,
				   size_t buflen)
{
	json_t *j = body && len ? json_loadb(body, len, 0, NULL) : NULL;
	const char *msg = json_string_value(json_object_get(j, "error"));
	const char *code = json_string_value(json_object_get(j, "code"));
	char tmp[1100];

	if (msg) {
		if (code && *code)
			snprintf(tmp, sizeof(tmp), "%s: %s", code, msg);
		else
			snprintf(tmp, sizeof(tmp), "%s", msg);
	} else {
		char raw[512];
		size_t n = len < sizeof(raw) - 1 ? len : sizeof(raw) - 1;

		if (n)
			memcpy(raw, body, n);
		raw[n] = '\0';
		while (n > 0 && (raw[n - 1] == '\n' || raw[n - 1] == '\r'))
			raw[--n] = '\0';
		snprintf(tmp, sizeof(tmp), "HTTP %ld%s%s", status, raw[0] ? ": " : "", raw);
	}
	csictl_out_clean(tmp, buf, buflen);
	json_decref(j);
	return buf;
}

const char *csictl_http_connect_error(const char *what, const char *hint, int curl_code,
				      const char *where, const char *detail, char *buf, size_t len)
{
	char tmp[1200];

	if (curl_code == CURLE_COULDNT_CONNECT)
		snprintf(tmp, sizeof(tmp), "no %s listening at %s: %s", what, where, hint);
	else
		snprintf(tmp, sizeof(tmp), "%s at %s: %s", what, where, detail);
	return csictl_out_clean(tmp, buf, len);
}

struct csictl_http_rd {
	struct csictl_http_answer *ans;
	struct strbuf body;
};

static size_t csictl_http_header(char *data, size_t size, size_t n, void *arg)
{
	struct csictl_http_rd *r = arg;
	static const char name[] = "x-csid-index:";
	size_t len = size * n, i, o = 0;

	if (len > sizeof(name) && strncasecmp(data, name, sizeof(name) - 1) == 0) {
		for (i = sizeof(name) - 1; i < len && o + 1 < sizeof(r->ans->index); i++)
			if (data[i] >= '0' && data[i] <= '9')
				r->ans->index[o++] = data[i];
		r->ans->index[o] = '\0';
	}
	return len;
}

void csictl_http_answer_free(struct csictl_http_answer *ans)
{
	free(ans->data);
	memset(ans, 0, sizeof(*ans));
}

/* One request to address a; the transfer's result (errbuf holds libcurl's detail). */
static CURLcode csictl_http_once(struct csictl_http *h, const struct csictl_http_addr *a,
				 const char *method, const char *path, const char *body,
				 struct csictl_http_rd *rd, char *errbuf)
{
	char url[CSICTL_HTTP_URL_MAX + 2048], tokhdr[600];
	struct curl_slist *hdrs = NULL;
	CURL *curl = curl_easy_init();
	CURLcode rc;

	if (!curl)
		return CURLE_FAILED_INIT;
	snprintf(url, sizeof(url), "%s%s", a->base, path);
	hdrs = curl_slist_append(hdrs, "Accept: application/json");
	hdrs = curl_slist_append(hdrs, "Expect:");
	if (body)
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	if (h->token && h->token[0]) {
		snprintf(tokhdr, sizeof(tokhdr), "X-Csid-Token: %.512s", h->token);
		hdrs = curl_slist_append(hdrs, tokhdr);
	}
	curl_easy_setopt(curl, CURLOPT_URL, url);
	csictl_http_tls(h, curl);
	if (a->socket[0])
		curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, a->socket);
	curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	}
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)h->timeout_ms);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, strbuf_write);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &rd->body);
	curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, csictl_http_header);
	curl_easy_setopt(curl, CURLOPT_HEADERDATA, rd);
	rc = curl_easy_perform(curl);
	memset(tokhdr, 0, sizeof(tokhdr));
	if (rc == CURLE_OK)
		curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &rd->ans->status);
	curl_pool_headers_free(hdrs);
	curl_easy_cleanup(curl);
	return rc;
}

/* "A, B, C": every address of h, for a message. */
static void csictl_http_where(const struct csictl_http *h, char *buf, size_t len)
{
	size_t o = 0;

	buf[0] = '\0';
	for (size_t i = 0; i <= h->nalt && o < len; i++) {
		const struct csictl_http_addr *a = i == 0 ? &h->addr : &h->alt[i - 1];

		o += (size_t)snprintf(buf + o, len - o, "%s%s", i ? ", " : "",
				      a->socket[0] ? a->socket : a->base);
	}
}

int csictl_http_do(struct csictl_http *h, const char *method, const char *path, const char *body,
		   struct csictl_http_answer *ans)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	struct csictl_http_rd rd = {ans, {.max = h->body_max ? h->body_max : CSICTL_HTTP_BODY_MAX}};
	CURLcode rc;

	memset(ans, 0, sizeof(*ans));
	if (strlen(h->addr.base) + strlen(path) >= CSICTL_HTTP_URL_MAX + 2048) {
		fprintf(h->err, "error: request path too long\n");
		return CSICTL_EXIT_FAIL;
	}
	rc = csictl_http_once(h, &h->addr, method, path, body, &rd, errbuf);
	/* Nobody listens there (nothing was sent): the next address, which then stays. */
	for (size_t i = 0; rc == CURLE_COULDNT_CONNECT && i < h->nalt; i++) {
		struct csictl_http_addr a = h->alt[i];

		strbuf_free(&rd.body);
		errbuf[0] = '\0';
		rc = csictl_http_once(h, &a, method, path, body, &rd, errbuf);
		if (rc != CURLE_COULDNT_CONNECT) {
			h->alt[i] = h->addr;
			h->addr = a;
		}
	}
	ans->data = rd.body.p;
	ans->len = rd.body.len;
	if (rc != CURLE_OK) {
		char msg[1200], where[1024];

		csictl_http_where(h, where, sizeof(where));
		if (rc == CURLE_FAILED_INIT)
			fputs("error: cannot start libcurl\n", h->err);
		else if (rd.body.too_big)
			fprintf(h->err, "error: the %s's answer is larger than %zu bytes\n",
				h->what, rd.body.max);
		else
			fprintf(h->err, "error: %s\n",
				csictl_http_connect_error(
				    h->what, h->hint, (int)rc,
				    rc == CURLE_COULDNT_CONNECT ? where
				    : h->addr.socket[0]         ? h->addr.socket
								: h->addr.base,
				    errbuf[0] ? errbuf : curl_easy_strerror(rc), msg, sizeof(msg)));
		csictl_http_answer_free(ans);
		return CSICTL_EXIT_FAIL;
	}
	return 0;
}

void csictl_http_tls_env(struct csictl_http *h)
{
	if (!h->ca_file)
		h->ca_file = getenv("CSID_CACERT");
	if (!h->cert_file)
		h->cert_file = getenv("CSID_CLIENT_CERT");
	if (!h->key_file)
		h->key_file = getenv("CSID_CLIENT_KEY");
}

void csictl_http_tls(const struct csictl_http *h, CURL *c)
{
	if (h->ca_file && h->ca_file[0])
		curl_easy_setopt(c, CURLOPT_CAINFO, h->ca_file);
	if (h->cert_file && h->cert_file[0])
		curl_easy_setopt(c, CURLOPT_SSLCERT, h->cert_file);
	if (h->key_file && h->key_file[0])
		curl_easy_setopt(c, CURLOPT_SSLKEY, h->key_file);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
}

int csictl_http_json(struct csictl_http *h, const char *method, const char *path, const char *body,
		     json_t **out)
{
	struct csictl_http_answer ans;
	int ret = csictl_http_do(h, method, path, body, &ans);

	*out = NULL;
	if (ret)
		return ret;
	if (ans.status < 200 || ans.status > 299) {
		char msg[1200];

		fprintf(h->err, "error: %s\n",
			csictl_http_error_text(ans.status, ans.data, ans.len, msg, sizeof(msg)));
		ret = CSICTL_EXIT_FAIL;
	} else {
		*out = ans.len ? json_loadb(ans.data, ans.len, 0, NULL) : json_object();
		if (!*out) {
			fprintf(h->err, "error: the %s's answer is not valid JSON\n", h->what);
			ret = CSICTL_EXIT_FAIL;
		}
	}
	csictl_http_answer_free(&ans);
	return ret;
}
