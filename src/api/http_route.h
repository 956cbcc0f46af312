/*
 * Route templates of an API, for its request metrics: a request's path is
 * matched against a list such as "/v1/volume/{id}/claim", where a
 * "{...}" segment matches any one non-empty segment, and the request is
 * counted under the template, never under its raw path (which carries
 * volume and allocation IDs: unbounded, and not for a label). Paths that
 * match nothing count as "other", methods outside the usual few as
 * "other", so every label stays bounded.
 *
 * Metrics (default registry): csid_http_requests_total{api, route, method,
 * code} and csid_http_request_duration_seconds{api, route, method}.
 * Thread-safe.
 */
#ifndef CSID_API_HTTP_ROUTE_H
#define CSID_API_HTTP_ROUTE_H

/* The template of routes (NULL-terminated) that url matches first, or "other". */
const char *http_route_match(const char *const *routes, const char *url);

/*
 * Counts one answered request of API api ("server", "agent") with its
 * status and duration.
 */
void http_route_observe(const char *api, const char *const *routes, const char *method,
			const char *url, unsigned status, double seconds);

#endif
