/*
 * The TLS identity of this process as an HTTP client, applied to every
 * libcurl handle it uses (curl_pool_get does it; code with its own handle
 * calls curl_tls_apply): the CA file that verifies servers (the system's
 * store when none), and an optional client certificate and key. https://
 * peers are always verified (name and chain); http:// peers are
 * plaintext, which the callers refuse for secrets (see http.h).
 *
 * Threading: set once at start, before any request; apply is then
 * thread-safe.
 */
#ifndef CSID_UTIL_CURL_TLS_H
#define CSID_UTIL_CURL_TLS_H

#include <curl/curl.h>

#include "util/err.h"

struct curl_tls {
	const char *ca_file; /* PEM CA bundle; NULL: the system's */
	const char *cert_file; /* PEM client certificate; NULL: none */
	const char *key_file; /* its key */
};

/*
 * Sets the process's client TLS settings (copied; NULL or all NULL:
 * none). Files must be readable now. Returns 0 or CSID_EINVAL naming the
 * file, or CSID_ENOMEM.
 */
int curl_tls_set(const struct curl_tls *t, struct err *e);
/* Applies the settings to c (after curl_easy_reset or init). */
void curl_tls_apply(CURL *c);
/* Forgets the settings (frees the copies). */
void curl_tls_clear(void);

#endif
