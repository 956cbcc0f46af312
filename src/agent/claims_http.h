/*
 * The real claims_client (agent/claims.h): the csid servers over HTTP
 * with libcurl, keep-alive connections from a pool (util/curl_pool.h).
 * Each request tries the servers in order; one that does not answer, or
 * answers 5xx, counts as none. Every request carries the server token
 * (CSI_REMOTE_TOKEN_HEADER) and the agent's instance ID
 * (MODEL_NODE_INSTANCE_HEADER), neither ever in a message or a log line.
 * Answers are capped (CLAIMS_HTTP_ANSWER_MAX) and their bytes wiped (a
 * node-stage answer holds secrets). cancel aborts requests in flight
 * (curl's progress callback) and makes new ones fail at once. The
 * caller runs curl_global_init first.
 */
#ifndef CSID_AGENT_CLAIMS_HTTP_H
#define CSID_AGENT_CLAIMS_HTTP_H

#include <stddef.h>

#include "agent/claims.h"

#define CLAIMS_HTTP_ANSWER_MAX (4 * 1024 * 1024)
/* One request to one server, and its connection (ms). */
#define CLAIMS_HTTP_TIMEOUT_MS 10000
#define CLAIMS_HTTP_CONNECT_MS 2000
/* Idle keep-alive connections kept between requests. */
#define CLAIMS_HTTP_CONNS 8

struct claims_http_config {
	const char *const *servers; /* base URLs ("http://host:port"), copied; at least one */
	size_t nservers;
	const char *token; /* the server token (copied, wiped on free); NULL or "": none */
	const char *instance_id; /* the agent's instance ID (copied, wiped); NULL: none */
};

/* Returns 0 and *out (free with claims_http_free), or a code with e set. */
int claims_http_new(const struct claims_http_config *cfg, struct claims_client **out,
		    struct err *e);
/* Frees; no request may be in progress. NULL is a no-op. */
void claims_http_free(struct claims_client *c);

#endif
