/*
 * Route templates and request metrics (see http_route.h). Matching walks
 * template and path segment by segment; a template segment in braces
 * takes one non-empty path segment, any other must be equal.
 */
#include "api/http_route.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "util/metrics.h"

static struct metrics_family http_route_requests =
    METRICS_FAMILY("csid_http_requests_total",
		   "HTTP requests answered, by API, route template, method and status.",
		   METRICS_COUNTER, NULL, 0, "api", "route", "method", "code");
static struct metrics_family http_route_seconds = METRICS_FAMILY(
    "csid_http_request_duration_seconds",
    "Time from a request's arrival to its answer (a blocking query's wait included).",
    METRICS_HISTOGRAM, metrics_latency_buckets, METRICS_LATENCY_NBUCKETS, "api", "route", "method");

static bool http_route_matches(const char *tpl, const char *url)
{
	while (*tpl && *url) {
		if (*tpl == '{') {
			const char *tend = strchr(tpl, '}');
			const char *uend = strchr(url, '/');

			if (!tend)
				return false;
			uend = uend ? uend : url + strlen(url);
			if (uend == url)
				return false;
			tpl = tend + 1;
			url = uend;
			continue;
		}
		if (*tpl != *url)
			return false;
		tpl++;
		url++;
	}
	return !*tpl && !*url;
}

const char *http_route_match(const char *const *routes, const char *url)
{
	for (; routes && *routes; routes++)
		if (http_route_matches(*routes, url))
			return *routes;
	return "other";
}

static const char *http_route_method(const char *m)
{
	static const char *const known[] = {"GET", "PUT", "POST", "DELETE", "HEAD"};

	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (strcmp(m, known[i]) == 0)
			return known[i];
	return "other";
}

void http_route_observe(const char *api, const char *const *routes, const char *method,
			const char *url, unsigned status, double seconds)
{
	char code[8];
	const char *route = http_route_match(routes, url);
	const char *m = http_route_method(method);
	const char *v[] = {api, route, m, code};

	snprintf(code, sizeof(code), "%u", status < 1000 ? status : 0);
	metrics_add(&http_route_requests, v, 1);
	metrics_observe(&http_route_seconds, v, seconds);
}
