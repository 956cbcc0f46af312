/*
 * Idle libcurl easy handles kept for the next request, so a client that
 * makes its requests from many short-lived threads (the agent's API
 * handlers asking the servers, the reconciler's workers calling agents)
 * reuses its keep-alive connections instead of opening a TCP connection
 * (and making the HTTP server start a thread) per request. A handle is
 * used by one thread at a time: a caller takes one, sets its options,
 * performs and gives it back; a handle given back is reset
 * (curl_easy_reset: options cleared, its connection cache kept). No
 * handle is shared while in use, which libcurl's shared connection cache
 * would need and does not support across threads. curl_pool_target
 * points a handle at an API over TCP or at a unix socket on this host.
 *
 * Threading: every function but curl_pool_free is thread-safe.
 */
#ifndef CSID_UTIL_CURL_POOL_H
#define CSID_UTIL_CURL_POOL_H

#include <stddef.h>

#include <curl/curl.h>

#include "util/err.h"

struct curl_pool;

/* A pool keeping at most max idle handles. Returns 0 and *out, or CSID_ENOMEM. */
int curl_pool_new(size_t max, struct curl_pool **out, struct err *e);
/*
 * An easy handle for one request: an idle one of p (its options cleared)
 * or a new one; p may be NULL (always a new one). The process's client
 * TLS settings (curl_tls.h) are set on it. The caller owns it
 * until curl_pool_put. NULL when out of memory.
 */
CURL *curl_pool_get(struct curl_pool *p);
/*
 * Gives c back (NULL is a no-op): kept idle in p with its connections when
 * there is room, else cleaned up; p NULL: cleaned up. The caller drops c.
 */
void curl_pool_put(struct curl_pool *p, CURL *c);
/*
 * Points c at base + path and writes that URL into url (len bytes). base
 * is "http://HOST:PORT" or "https://HOST:PORT", or "unix:/PATH" for an API
 * on this host at that socket (checked by conf_is_unix_addr): the request
 * then goes over the socket, as http://localhost + path. Returns 0, or
 * CSID_EINVAL when the URL does not fit.
 */
int curl_pool_target(CURL *c, const char *base, const char *path, char *url, size_t len);
/* Frees a header list, zeroing every line first (one may hold a token). */
void curl_pool_headers_free(struct curl_slist *hdrs);
/* Cleans up every idle handle and frees p, once no handle is out; NULL is a no-op. */
void curl_pool_free(struct curl_pool *p);

#endif
