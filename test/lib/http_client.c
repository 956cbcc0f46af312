/*
 * Test HTTP client on libcurl (see http_client.h).
 */
#include "http_client.h"

#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

struct http_client {
	CURL *curl;
	char *base; /* URL prefix: "http://localhost" for unix sockets */
	char *socket; /* unix socket path, or NULL */
	char *token;
	char *header; /* one more header line, or NULL */
	char *ca, *cert, *key; /* TLS files, or NULL */
	char head[HTTP_CLIENT_HEAD_MAX]; /* the last answer's header lines */
	size_t hlen;
};

struct http_client_buf {
	char *p;
	size_t len;
	uint64_t index;
	struct http_client *c;
};

static size_t http_client_write(char *data, size_t size, size_t n, void *ctx)
{
	struct http_client_buf *b = ctx;
	char *np = realloc(b->p, b->len + size * n + 1);

	if (!np)
		return 0;
	b->p = np;
	memcpy(b->p + b->len, data, size * n);
	b->len += size * n;
	b->p[b->len] = '\0';
	return size * n;
}

static size_t http_client_header(char *data, size_t size, size_t n, void *ctx)
{
	struct http_client_buf *b = ctx;
	struct http_client *c = b->c;
	static const char name[] = "x-csid-index:";

	if (size * n > sizeof(name) && strncasecmp(data, name, sizeof(name) - 1) == 0)
		b->index = strtoull(data + sizeof(name) - 1, NULL, 10);
	if (c->hlen + size * n < sizeof(c->head)) {
		memcpy(c->head + c->hlen, data, size * n);
		c->hlen += size * n;
		c->head[c->hlen] = '\0';
	}
	return size * n;
}

struct http_client *http_client_new(const char *base)
{
	struct http_client *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	curl_global_init(CURL_GLOBAL_DEFAULT);
	c->curl = curl_easy_init();
	if (strncmp(base, "unix:", 5) == 0) {
		c->socket = strdup(base + 5);
		c->base = strdup("http://localhost");
	} else {
		c->base = strdup(base);
	}
	if (!c->curl || !c->base || (strncmp(base, "unix:", 5) == 0 && !c->socket)) {
		http_client_free(c);
		return NULL;
	}
	return c;
}

void http_client_free(struct http_client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	free(c->base);
	free(c->socket);
	free(c->token);
	free(c->header);
	free(c->ca);
	free(c->cert);
	free(c->key);
	free(c);
}

void http_client_token(struct http_client *c, const char *token)
{
	free(c->token);
	c->token = token ? strdup(token) : NULL;
}

void http_client_extra_header(struct http_client *c, const char *line)
{
	free(c->header);
	c->header = line ? strdup(line) : NULL;
}

long http_client_do(struct http_client *c, const char *method, const char *path, const char *body,
		    char **out, uint64_t *index, int64_t timeout_ms)
{
	struct http_client_buf b = {.c = c};
	struct curl_slist *hdrs = NULL;
	size_t ulen = strlen(c->base) + strlen(path) + 1;
	char *url = malloc(ulen), *tok = NULL;
	long status = -1;

	if (out)
		*out = NULL;
	if (index)
		*index = 0;
	c->hlen = 0;
	c->head[0] = '\0';
	if (!url)
		return -1;
	snprintf(url, ulen, "%s%s", c->base, path);
	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	if (c->socket)
		curl_easy_setopt(c->curl, CURLOPT_UNIX_SOCKET_PATH, c->socket);
	curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
	if (c->ca)
		curl_easy_setopt(c->curl, CURLOPT_CAINFO, c->ca);
	if (c->cert) {
		curl_easy_setopt(c->curl, CURLOPT_SSLCERT, c->cert);
		curl_easy_setopt(c->curl, CURLOPT_SSLKEY, c->key);
	}
	curl_easy_setopt(c->curl, CURLOPT_TIMEOUT_MS, (long)(timeout_ms ? timeout_ms : 30000));
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, http_client_write);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, http_client_header);
	curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, &b);
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	/* Send "/.." as written: hostile paths are what some tests are about. */
	curl_easy_setopt(c->curl, CURLOPT_PATH_AS_IS, 1L);
	if (body) {
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	} else if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, 0L);
	}
	if (strcmp(method, "GET") == 0)
		curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
	/* A HEAD answer announces a length but has no body: do not wait for one. */
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c->curl, CURLOPT_NOBODY, 1L);
	if (c->token) {
		size_t tl = strlen(c->token) + 16;

		tok = malloc(tl);
		if (tok) {
			snprintf(tok, tl, "X-Csid-Token: %s", c->token);
			hdrs = curl_slist_append(hdrs, tok);
		}
	}
	if (c->header)
		hdrs = curl_slist_append(hdrs, c->header);
	hdrs = curl_slist_append(hdrs, "Expect:");
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, hdrs);
	if (curl_easy_perform(c->curl) == CURLE_OK)
		curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdrs);
	free(tok);
	free(url);
	if (out)
		*out = b.p;
	else
		free(b.p);
	if (index)
		*index = b.index;
	return status;
}

long http_client_json(struct http_client *c, const char *method, const char *path, const char *body,
		      json_t **out)
{
	char *text = NULL;
	long status = http_client_do(c, method, path, body, &text, NULL, 0);

	*out = text ? json_loads(text, 0, NULL) : NULL;
	free(text);
	return status;
}

static char *http_client_dup(const char *s)
{
	return s ? strdup(s) : NULL;
}

void http_client_tls(struct http_client *c, const char *ca, const char *cert, const char *key)
{
	free(c->ca);
	free(c->cert);
	free(c->key);
	c->ca = http_client_dup(ca);
	c->cert = http_client_dup(cert);
	c->key = http_client_dup(key);
}

bool http_client_last_header(const struct http_client *c, const char *name, char *buf, size_t cap)
{
	size_t n = strlen(name);

	for (const char *l = c->head; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : "") {
		const char *v = l + n + 1, *end;

		if (strncasecmp(l, name, n) != 0 || l[n] != ':')
			continue;
		while (*v == ' ')
			v++;
		end = strpbrk(v, "\r\n");
		snprintf(buf, cap, "%.*s", (int)(end ? (size_t)(end - v) : strlen(v)), v);
		return true;
	}
	return false;
}
