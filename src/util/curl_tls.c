/*
 * The process's client TLS settings (see curl_tls.h): three copied paths
 * behind a lock, set at start and read by every request.
 */
#include "util/curl_tls.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t curl_tls_mu = PTHREAD_MUTEX_INITIALIZER;
static char *curl_tls_ca, *curl_tls_cert, *curl_tls_key;

static int curl_tls_check(const char *what, const char *path, struct err *e)
{
	if (path && access(path, R_OK) != 0)
		return err_errno(e, errno, "TLS %s %s", what, path);
	return 0;
}

int curl_tls_set(const struct curl_tls *t, struct err *e)
{
	char *ca = NULL, *cert = NULL, *key = NULL;
	int rc;

	if (t && ((rc = curl_tls_check("CA file", t->ca_file, e)) ||
		  (rc = curl_tls_check("client certificate", t->cert_file, e)) ||
		  (rc = curl_tls_check("client key", t->key_file, e))))
		return rc;
	if (t && !t->cert_file != !t->key_file)
		return err_set(e, CSID_EINVAL, "TLS: a client certificate goes with its key");
	if (t && ((t->ca_file && !(ca = strdup(t->ca_file))) ||
		  (t->cert_file && !(cert = strdup(t->cert_file))) ||
		  (t->key_file && !(key = strdup(t->key_file))))) {
		free(ca);
		free(cert);
		free(key);
		return err_set(e, CSID_ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&curl_tls_mu);
	free(curl_tls_ca);
	free(curl_tls_cert);
	free(curl_tls_key);
	curl_tls_ca = ca;
	curl_tls_cert = cert;
	curl_tls_key = key;
	pthread_mutex_unlock(&curl_tls_mu);
	return 0;
}

void curl_tls_apply(CURL *c)
{
	pthread_mutex_lock(&curl_tls_mu);
	if (curl_tls_ca)
		curl_easy_setopt(c, CURLOPT_CAINFO, curl_tls_ca);
	if (curl_tls_cert) {
		curl_easy_setopt(c, CURLOPT_SSLCERT, curl_tls_cert);
		curl_easy_setopt(c, CURLOPT_SSLKEY, curl_tls_key);
	}
	pthread_mutex_unlock(&curl_tls_mu);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
}

void curl_tls_clear(void)
{
	curl_tls_set(NULL, NULL);
}
