/*
 * Fuzz target: what of a request reaches the metrics text. The input is a
 * request path (http_route_match: the answer must be one of the templates
 * or "other", with as many segments as the path) and a label value
 * (metrics_write_sample: the sample must stay one line, its label value
 * quoted with every backslash, quote and newline escaped, so that
 * unescaping it gives the input back).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/http_route.h"
#include "util/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const fuzz_routes[] = {
    "/v1/volumes", "/v1/volume/{id}", "/v1/volume/{id}/claim", "/v1/agent/mounts/{v}/{a}", NULL,
};

static size_t fuzz_segments(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == '/';
	return n;
}

static void fuzz_route(const char *url)
{
	const char *r = http_route_match(fuzz_routes, url);
	size_t i;

	if (strcmp(r, "other") == 0)
		return;
	for (i = 0; fuzz_routes[i] && fuzz_routes[i] != r; i++)
		;
	if (!fuzz_routes[i] || fuzz_segments(r) != fuzz_segments(url))
		abort();
}

static void fuzz_label(const char *value)
{
	struct strbuf b = {.max = 1 << 20};
	struct metrics_writer w = {.out = &b};
	const char *l[] = {"v"}, *v[] = {value};
	const char *p, *end;
	size_t k = 0, vlen = strlen(value);

	metrics_write_sample(&w, "fuzz_sample", l, v, 1, 1);
	if (w.failed || !b.p || strncmp(b.p, "fuzz_sample{v=\"", 15) != 0)
		abort();
	/* One line, ending in "} 1\n". */
	end = strchr(b.p, '\n');
	if (!end || end[1] || end - b.p < 4 || strncmp(end - 4, "\"} 1", 4) != 0)
		abort();
	for (p = b.p + 15; p < end - 4; p++, k++) {
		char c = *p;

		if (c == '"')
			abort();
		if (c == '\\') {
			p++;
			c = *p == 'n' ? '\n' : *p;
			if (*p != 'n' && *p != '\\' && *p != '"')
				abort();
		}
		if (k >= vlen || value[k] != c)
			abort();
	}
	if (k != vlen)
		abort();
	strbuf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);
	size_t cut;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	/* Up to the first NUL: a path; the rest: a label value. */
	cut = strlen(s);
	fuzz_route(s);
	fuzz_label(cut < size ? s + cut + 1 : s);
	free(s);
	return 0;
}
