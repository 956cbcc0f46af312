/*
 * The "http" section of the agent's and the server's config files: the
 * bounds of the HTTP listeners and TLS, for serving and for calling.
 *
 *   "http": {
 *     "max_conns_per_client": 100,    connections from one client address (TCP)
 *     "max_conns": 16384,             connections in all (below the file limit)
 *     "workers": 16,                  handler threads
 *     "header_timeout": "5s",         silence allowed before a request head is complete
 *     "idle_timeout": "2m",           silence allowed on a connection after its first request
 *     "tls_cert_file": "/etc/csid/tls/server.pem",   serve HTTPS on TCP (PEM chain)
 *     "tls_key_file": "/etc/csid/tls/server-key.pem",
 *     "tls_client_ca_file": "/etc/csid/tls/ca.pem",  ask clients for a certificate
 *                                                     and verify it against this CA
 *     "ca_file": "/etc/csid/tls/ca.pem",             as a client: verify peers with it
 *     "client_cert_file": "...", "client_key_file": "...",   as a client: present this
 *     "allow_plaintext_secrets": false  send node-stage secrets over plaintext TCP to a
 *                                       non-loopback peer (refused otherwise)
 *   }
 *
 * Every key is optional; zeros and NULLs mean the defaults of api/http.h.
 * A struct conf_http owns its strings.
 */
#ifndef CSID_UTIL_CONF_HTTP_H
#define CSID_UTIL_CONF_HTTP_H

#include <stdbool.h>

#include <jansson.h>

#include "util/err.h"

struct conf_http {
	unsigned max_conns_per_client;
	unsigned max_conns;
	unsigned workers;
	unsigned header_timeout_s;
	unsigned idle_timeout_s;
	char *tls_cert_file;
	char *tls_key_file;
	char *tls_client_ca_file;
	char *ca_file;
	char *client_cert_file;
	char *client_key_file;
	bool allow_plaintext_secrets;
};

/* The keys of the section, NULL-terminated (for the config keysets). */
extern const char *const conf_http_keys[];

/*
 * Parses v, the "http" object, into out (cleared first; on failure too it
 * must be cleared with conf_http_clear). Unknown keys, wrong types, a
 * certificate without its key are refused naming "http.<key>". Returns 0
 * or CSID_EINVAL / CSID_ENOMEM with e set.
 */
int conf_http_parse(json_t *v, struct conf_http *out, struct err *e);
/* Frees what h owns and zeroes it. */
void conf_http_clear(struct conf_http *h);

#endif
