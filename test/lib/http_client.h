/*
 * A small HTTP client for tests and benchmarks, on libcurl: one request to
 * an API over a unix socket ("unix:/path") or TCP ("http://host:port"),
 * with an optional body and token, returning the status, the body and the
 * X-Csid-Index header (and any header of the last answer, on request). A
 * struct http_client reuses its connection.
 */
#ifndef CSID_TEST_HTTP_CLIENT_H
#define CSID_TEST_HTTP_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct http_client;

/* base: "unix:/path/to.sock" or "http://127.0.0.1:4646". NULL on failure. */
struct http_client *http_client_new(const char *base);
void http_client_free(struct http_client *c);
/* Sets the token sent in X-Csid-Token (NULL: none). */
void http_client_token(struct http_client *c, const char *token);
/* Sets the TLS files of https:// requests: CA, client certificate and key (NULL: none). */
void http_client_tls(struct http_client *c, const char *ca, const char *cert, const char *key);
/* Sets one more header line sent with every request ("Name: value"; NULL: none). */
void http_client_extra_header(struct http_client *c, const char *line);

/*
 * Sends method path (with its query) and body (NULL: none). Returns the
 * HTTP status, or -1 when the request failed at the transport. *out, when
 * out is not NULL, receives the body (malloc'd, NUL-terminated) and
 * *index the X-Csid-Index header (0 when absent), when index is not NULL.
 * timeout_ms bounds the whole request (0: 30 s).
 */
long http_client_do(struct http_client *c, const char *method, const char *path, const char *body,
		    char **out, uint64_t *index, int64_t timeout_ms);

/* Bytes of the last answer's header lines kept for http_client_last_header. */
#define HTTP_CLIENT_HEAD_MAX 8192

/*
 * The value of header name (case-insensitive) in the last answer, into
 * buf (cap bytes, NUL-terminated); false when it had none.
 */
bool http_client_last_header(const struct http_client *c, const char *name, char *buf, size_t cap);

/* http_client_do with the body parsed as JSON (*out NULL when it is not JSON). */
long http_client_json(struct http_client *c, const char *method, const char *path, const char *body,
		      json_t **out);

#endif
