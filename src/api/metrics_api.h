/*
 * GET /v1/metrics of the server's and the agent's APIs: the process's
 * metrics registry (util/metrics.h) in the Prometheus text format 0.0.4.
 * Access control is the caller's (the server asks for a token when ACL is
 * on, like any read).
 */
#ifndef CSID_API_METRICS_API_H
#define CSID_API_METRICS_API_H

#include "api/http.h"
#include "util/err.h"

#define METRICS_API_PATH "/v1/metrics"

/* Answers req: the rendered metrics (GET only; HTTP_METHOD_NOT_ALLOWED otherwise). */
int metrics_api_reply(const struct http_request *req, struct http_reply *rep, struct err *e);

#endif
