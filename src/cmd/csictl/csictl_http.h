/*
 * HTTP transport of csictl's API clients (the server's and the agent's):
 * one request with libcurl to a unix socket or a TCP base URL, an answer
 * read into a capped buffer, API errors rendered as "code: message", and
 * a connection that nobody answers explained in words a user can act on.
 */
#ifndef CSICTL_HTTP_H
#define CSICTL_HTTP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <curl/curl.h>

#include <jansson.h>

#include "util/err.h"

#define CSICTL_HTTP_URL_MAX 4096
/* Largest answer read. */
#define CSICTL_HTTP_BODY_MAX (16u << 20)

struct csictl_http;

/* Where requests go: a unix socket path, or a base URL for TCP. */
struct csictl_http_addr {
	char socket[108]; /* "" for TCP */
	char base[CSICTL_HTTP_URL_MAX]; /* "http://localhost" for a socket */
};

/*
 * Parses an address: "unix:PATH", "unix://PATH", an absolute path,
 * "http://host:port" or "host:port". what names it in messages ("agent").
 * Returns 0, or CSID_EINVAL with e set.
 */
int csictl_http_addr_parse(const char *what, const char *s, struct csictl_http_addr *a,
			   struct err *e);

/*
 * Parses a comma-separated list of addresses (at most
 * CSICTL_HTTP_ADDRS_MAX) into h->addr and h->alt. Returns 0 or CSID_EINVAL.
 */
int csictl_http_addr_list_parse(const char *what, const char *s, struct csictl_http *h,
				struct err *e);

/*
 * Percent-encodes s for one URL path segment or query value into buf (len
 * bytes). Returns 0 or CSID_ETOOBIG.
 */
int csictl_http_escape(const char *s, char *buf, size_t len);

/* Most addresses in one comma-separated list (-address, CSID_ADDR). */
#define CSICTL_HTTP_ADDRS_MAX 8

/* One API endpoint and how to talk to it. */
struct csictl_http {
	struct csictl_http_addr addr; /* the one in use */
	/*
	 * The others of a list, tried in turn when addr cannot be reached (no
	 * connection: nothing was sent); the first that answers becomes addr.
	 */
	struct csictl_http_addr alt[CSICTL_HTTP_ADDRS_MAX - 1];
	size_t nalt;
	const char *what; /* "agent", "server" */
	const char
	    *hint; /* what to do when nobody listens ("start csid server or set CSID_ADDR") */
	const char *token; /* sent as X-Csid-Token, or NULL */
	/* TLS of https:// addresses: CA file (NULL: the system's), client certificate and key. */
	const char *ca_file;
	const char *cert_file;
	const char *key_file;
	int64_t timeout_ms;
	FILE *err;
	size_t body_max; /* largest answer read; 0: CSICTL_HTTP_BODY_MAX */
};

/* Takes ca_file, cert_file and key_file from $CSID_CACERT, $CSID_CLIENT_CERT, $CSID_CLIENT_KEY
 * where unset. */
void csictl_http_tls_env(struct csictl_http *h);
/* Sets h's TLS files on c (peers always verified). */
void csictl_http_tls(const struct csictl_http *h, CURL *c);

/* An answer: status and body (data malloc'd, NUL-terminated). */
struct csictl_http_answer {
	long status;
	char *data;
	size_t len;
	char index[24]; /* X-Csid-Index, "" when absent */
};

/*
 * Sends method path (path and query, already escaped) with an optional
 * JSON body and reads the answer. Returns 0 with *ans filled (free with
 * csictl_http_answer_free), or CSICTL_EXIT_FAIL after printing why the
 * endpoint could not be reached.
 */
int csictl_http_do(struct csictl_http *h, const char *method, const char *path, const char *body,
		   struct csictl_http_answer *ans);
void csictl_http_answer_free(struct csictl_http_answer *ans);

/*
 * The message when the endpoint cannot be reached at where (a socket path
 * or a URL): "no <what> listening at <where>: <hint>" when nothing accepts
 * connections there (curl_code CURLE_COULDNT_CONNECT), else "<what> at
 * <where>: <detail>". Cleaned for a terminal; writes to buf, returns it.
 */
const char *csictl_http_connect_error(const char *what, const char *hint, int curl_code,
				      const char *where, const char *detail, char *buf, size_t len);

/*
 * "code: message" of an API error answer, or "HTTP <status>: <start of
 * the body>" when it is not our JSON; cleaned for a terminal. Returns buf.
 */
const char *csictl_http_error_text(long status, const char *body, size_t len, char *buf,
				   size_t buflen);

/*
 * Sends the request and, on a 2xx answer, returns 0 with the parsed JSON
 * in *out (a new reference; {} for an empty body). Otherwise prints
 * "error: ..." and returns CSICTL_EXIT_FAIL.
 */
int csictl_http_json(struct csictl_http *h, const char *method, const char *path, const char *body,
		     json_t **out);

#endif
