/*
 * The web console's files (src/api/ui/), compiled into the binary: the
 * build runs src/api/ui/ui_embed.c over them and compiles the C file it
 * writes, which defines the table below. server_api_ui.c serves them at
 * /ui/ (see server_api_int.h); the two functions below are its parsing of
 * what a request says (path, If-None-Match), fuzzed by fuzz_console.c.
 */
#ifndef CSID_API_SERVER_API_UI_H
#define CSID_API_SERVER_API_UI_H

#include <stdbool.h>
#include <stddef.h>

struct server_api_ui_asset {
	const char *name; /* file name, e.g. "index.html" */
	const unsigned char *data;
	size_t len;
	const char *etag; /* quoted, e.g. "\"1f3a-0123456789abcdef\"": length and hash */
};

extern const struct server_api_ui_asset server_api_ui_assets[];
extern const size_t server_api_ui_nassets;

/* The file a request path names ("/ui/" is index.html), or NULL. */
const struct server_api_ui_asset *server_api_ui_lookup(const char *path);

/* Whether an If-None-Match header value ("a", "b" or *; NULL: none) names etag. */
bool server_api_ui_etag_matches(const char *inm, const char *etag);

#endif
