/*
 * Fuzz target: what the web console's handler reads from a request
 * (server_api_ui.c): the path it maps to an embedded file, and the
 * If-None-Match value it compares with the file's ETag. The input is
 * "<path>\n<If-None-Match>". A path names a file only as "/ui/<name>"
 * exactly (or "/ui/" for index.html); the ETag alone, or "*", always
 * matches; nothing reads past the strings.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/server_api_ui.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *in = malloc(size + 1), *inm;
	const struct server_api_ui_asset *a;

	if (!in)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	inm = strchr(in, '\n');
	if (inm)
		*inm++ = '\0';
	a = server_api_ui_lookup(in);
	if (a) {
		const char *name = strcmp(in, "/ui/") == 0 ? "index.html" : in + 4;

		if (strncmp(in, "/ui/", 4) != 0 || strcmp(a->name, name) != 0)
			abort();
		if (!server_api_ui_etag_matches(a->etag, a->etag) ||
		    !server_api_ui_etag_matches("*", a->etag))
			abort();
	}
	for (size_t i = 0; i < server_api_ui_nassets; i++)
		server_api_ui_etag_matches(inm, server_api_ui_assets[i].etag);
	free(in);
	return 0;
}
