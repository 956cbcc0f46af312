/*
 * The metrics endpoint (see metrics_api.h): renders the default registry
 * into one text answer. The answer is capped so a runaway label set can
 * never make a scrape eat the process's memory.
 */
#include "api/metrics_api.h"

#include <string.h>

#include "util/metrics.h"
#include "util/strbuf.h"

/* Largest exposition answered; a bigger one is an error, not a truncated text. */
#define METRICS_API_MAX (32 * 1024 * 1024)

int metrics_api_reply(const struct http_request *req, struct http_reply *rep, struct err *e)
{
	struct strbuf b = {.max = METRICS_API_MAX};

	rep->allow = "GET";
	if (strcmp(req->method, "GET") != 0)
		return HTTP_METHOD_NOT_ALLOWED;
	if (metrics_render(metrics_default(), &b) != 0) {
		bool big = b.too_big;

		strbuf_free(&b);
		return big ? err_set(e, CSID_ETOOBIG, "metrics: exposition larger than %d bytes",
				     METRICS_API_MAX)
			   : err_set(e, CSID_ENOMEM, "metrics: out of memory");
	}
	rep->text = b.p ? b.p : strdup("");
	if (!rep->text)
		return err_set(e, CSID_ENOMEM, "metrics: out of memory");
	rep->content_type = METRICS_CONTENT_TYPE;
	return 0;
}
