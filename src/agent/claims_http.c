/*
 * The claim flow's client over HTTP (claims_http.h): one request tries
 * each server once, in order, on a pooled curl handle.
 */
#include "agent/claims_http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "csi/csi_remote.h"
#include "model/model.h"
#include "util/curl_pool.h"
#include "util/strbuf.h"

#define CLAIMS_HTTP_URL_MAX 2048

struct claims_http {
	struct claims_client base; /* first: the seam points here */
	char **servers;
	size_t nservers;
	char *token; /* NULL: none */
	char *instance_id; /* NULL: none */
	struct curl_pool *conns;
	bool cancelled; /* atomic */
};

/* Ends a request early once cancelled. */
static int claims_http_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut,
				curl_off_t un)
{
	struct claims_http *h = ud;

	(void)dt;
	(void)dn;
	(void)ut;
	(void)un;
	return __atomic_load_n(&h->cancelled, __ATOMIC_ACQUIRE);
}

/* Appends "name: value" to hdrs, the line wiped after (value is a credential). */
static struct curl_slist *claims_http_secret_header(struct curl_slist *hdrs, const char *name,
						    const char *value)
{
	char line[600];

	snprintf(line, sizeof(line), "%s: %s", name, value);
	hdrs = curl_slist_append(hdrs, line);
	explicit_bzero(line, sizeof(line));
	return hdrs;
}

/* One request to one server: 0 with *status and *text (NULL when none), or CSID_EUNAVAIL. */
static int claims_http_once(struct claims_http *h, const char *base, const char *method,
			    const char *path, const char *body, bool want_ok, long *status,
			    char **text, size_t *len, struct err *e)
{
	struct strbuf ans = {.max = CLAIMS_HTTP_ANSWER_MAX};
	struct curl_slist *hdrs = NULL;
	char url[CLAIMS_HTTP_URL_MAX];
	CURL *c = curl_pool_get(h->conns);
	CURLcode cc;
	int rc = 0;

	*text = NULL;
	*len = 0;
	*status = 0;
	if (!c)
		return err_set(e, CSID_ENOMEM, "out of memory");
	if (curl_pool_target(c, base, path, url, sizeof(url)) != 0) {
		curl_pool_put(h->conns, c);
		return err_set(e, CSID_EINVAL, "server %.256s: request path too long", base);
	}
	hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
	if (h->token)
		hdrs = claims_http_secret_header(hdrs, CSI_REMOTE_TOKEN_HEADER, h->token);
	if (h->instance_id)
		hdrs = claims_http_secret_header(hdrs, MODEL_NODE_INSTANCE_HEADER, h->instance_id);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)CLAIMS_HTTP_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)CLAIMS_HTTP_CONNECT_MS);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, strbuf_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &ans);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, claims_http_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, h);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	cc = curl_easy_perform(c);
	if (cc != CURLE_OK) {
		rc = err_set(e, CSID_EUNAVAIL, "server %.256s: %s", base,
			     ans.too_big ? "answer too large" : curl_easy_strerror(cc));
		goto out;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	if (*status >= 500) {
		json_t *doc = json_loadb(ans.p ? ans.p : "", ans.len, 0, NULL);
		const char *msg = json_string_value(json_object_get(doc, "error"));

		rc = err_set(e, CSID_EUNAVAIL, "server %.256s: HTTP %ld: %.300s", base, *status,
			     msg ? msg : "no message");
		json_decref(doc);
		goto out;
	}
	/* A success whose body is not wanted is dropped (a release's: the whole volume). */
	if (ans.len && (want_ok || *status < 200 || *status > 299)) {
		*text = ans.p;
		*len = ans.len;
		ans.p = NULL;
		ans.len = 0;
	}
out:
	curl_pool_headers_free(hdrs);
	curl_pool_put(h->conns, c);
	/* A node-stage answer holds secrets. */
	if (ans.p)
		explicit_bzero(ans.p, ans.len);
	strbuf_free(&ans);
	return rc;
}

static int claims_http_request(struct claims_client *cl, const char *method, const char *path,
			       const char *body, bool want_ok, long *status, char **text,
			       size_t *len, struct err *e)
{
	struct claims_http *h = (struct claims_http *)cl;
	int rc = CSID_EUNAVAIL;

	*text = NULL;
	*len = 0;
	*status = 0;
	for (size_t i = 0; i < h->nservers && rc == CSID_EUNAVAIL; i++) {
		if (__atomic_load_n(&h->cancelled, __ATOMIC_ACQUIRE))
			return err_set(e, CSID_EUNAVAIL, "the agent is stopping");
		rc = claims_http_once(h, h->servers[i], method, path, body, want_ok, status, text,
				      len, e);
	}
	return rc;
}

static void claims_http_cancel(struct claims_client *cl)
{
	struct claims_http *h = (struct claims_http *)cl;

	__atomic_store_n(&h->cancelled, true, __ATOMIC_RELEASE);
}

static char *claims_http_dup_secret(const char *s)
{
	return s && *s ? strdup(s) : NULL;
}

int claims_http_new(const struct claims_http_config *cfg, struct claims_client **out, struct err *e)
{
	struct claims_http *h;
	int rc;

	*out = NULL;
	if (!cfg->nservers || !cfg->servers)
		return err_set(e, CSID_EINVAL, "claims client: servers required");
	if (!(h = calloc(1, sizeof(*h))))
		return err_set(e, CSID_ENOMEM, "out of memory");
	h->base.request = claims_http_request;
	h->base.cancel = claims_http_cancel;
	h->servers = calloc(cfg->nservers, sizeof(*h->servers));
	h->token = claims_http_dup_secret(cfg->token);
	h->instance_id = claims_http_dup_secret(cfg->instance_id);
	if (!h->servers || (cfg->token && *cfg->token && !h->token) ||
	    (cfg->instance_id && *cfg->instance_id && !h->instance_id)) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto fail;
	}
	for (; h->nservers < cfg->nservers; h->nservers++)
		if (!(h->servers[h->nservers] = strdup(cfg->servers[h->nservers]))) {
			rc = err_set(e, CSID_ENOMEM, "out of memory");
			goto fail;
		}
	if ((rc = curl_pool_new(CLAIMS_HTTP_CONNS, &h->conns, e)))
		goto fail;
	*out = &h->base;
	return 0;
fail:
	claims_http_free(&h->base);
	return rc;
}

static void claims_http_wipe(char *s)
{
	if (s) {
		explicit_bzero(s, strlen(s));
		free(s);
	}
}

void claims_http_free(struct claims_client *cl)
{
	struct claims_http *h = (struct claims_http *)cl;

	if (!h)
		return;
	curl_pool_free(h->conns);
	for (size_t i = 0; i < h->nservers; i++)
		free(h->servers[i]);
	free(h->servers);
	claims_http_wipe(h->token);
	claims_http_wipe(h->instance_id);
	free(h);
}
