/*
 * Idle libcurl easy handles (curl_pool.h): a stack of at most max
 * handles under one mutex. A handle is reset when it is given back, so a
 * request's options (its headers, which may hold a token, its callbacks
 * and their data) never outlive it; the connection cache survives the
 * reset, which is the point.
 */
#include "util/curl_pool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/curl_tls.h"

struct curl_pool {
	pthread_mutex_t mu; /* guards idle, n */
	CURL **idle;
	size_t n, max;
};

int curl_pool_new(size_t max, struct curl_pool **out, struct err *e)
{
	struct curl_pool *p = calloc(1, sizeof(*p));

	*out = NULL;
	if (!p || !(p->idle = calloc(max ? max : 1, sizeof(*p->idle)))) {
		free(p);
		return err_set(e, CSID_ENOMEM, "out of memory");
	}
	p->max = max;
	pthread_mutex_init(&p->mu, NULL);
	*out = p;
	return 0;
}

CURL *curl_pool_get(struct curl_pool *p)
{
	CURL *c = NULL;

	if (p) {
		pthread_mutex_lock(&p->mu);
		if (p->n)
			c = p->idle[--p->n];
		pthread_mutex_unlock(&p->mu);
	}
	if (!c)
		c = curl_easy_init();
	if (c)
		curl_tls_apply(c);
	return c;
}

int curl_pool_target(CURL *c, const char *base, const char *path, char *url, size_t len)
{
	bool unix_socket = strncmp(base, "unix:", 5) == 0;
	int n = unix_socket ? snprintf(url, len, "http://localhost%s", path)
			    : snprintf(url, len, "%s%s", base, path);

	if (n < 0 || (size_t)n >= len)
		return CSID_EINVAL;
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, unix_socket ? base + 5 : NULL);
	curl_easy_setopt(c, CURLOPT_URL, url);
	return 0;
}

void curl_pool_headers_free(struct curl_slist *hdrs)
{
	for (struct curl_slist *t = hdrs; t; t = t->next)
		explicit_bzero(t->data, strlen(t->data));
	curl_slist_free_all(hdrs);
}

void curl_pool_put(struct curl_pool *p, CURL *c)
{
	if (!c)
		return;
	curl_easy_reset(c);
	if (p) {
		pthread_mutex_lock(&p->mu);
		if (p->n < p->max) {
			p->idle[p->n++] = c;
			c = NULL;
		}
		pthread_mutex_unlock(&p->mu);
	}
	if (c)
		curl_easy_cleanup(c);
}

void curl_pool_free(struct curl_pool *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n; i++)
		curl_easy_cleanup(p->idle[i]);
	pthread_mutex_destroy(&p->mu);
	free(p->idle);
	free(p);
}
