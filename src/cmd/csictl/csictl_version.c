/*
 * `csictl version [-client]`: csictl's version, then the version the
 * server reports in GET /v1/status/health (which needs no token). An
 * unreachable server is an error after csictl's own line, so a script
 * can tell "csictl works" from "the server answers".
 */
#include <string.h>

#include "csictl_csi.h"
#include "csictl_out.h"
#include "csictl_server.h"

struct version_opts {
	struct csictl_server_opts c;
	bool client;
};

int csictl_version_main(int argc, char **argv, FILE *out, FILE *err)
{
	struct csictl_flag flags[CSICTL_SERVER_FLAGS_MAX];
	struct version_opts o;
	struct csictl_server s;
	json_t *j = NULL;
	const char *v;
	size_t n;
	int ret;

	memset(&o, 0, sizeof(o));
	flags[0] = (struct csictl_flag){"client", CSICTL_FLAG_BOOL, &o.client, NULL,
					"csictl's version only: do not ask the server"};
	n = csictl_server_flags(&o.c, flags, 1);
	ret = csictl_server_init(&s, &o.c, flags, n, argc, argv, "", out, err);
	if (ret)
		return ret < 0 ? CSICTL_EXIT_OK : ret;
	if (s.args.n != 1)
		return csictl_server_usage(&s, "usage: csictl version [-client]");
	if (!s.json)
		fprintf(out, "csictl %s\n", CSID_VERSION);
	if (!o.client) {
		fflush(out);
		ret = csictl_http_json(&s.http, "GET", "/v1/status/health", NULL, &j);
		if (ret)
			return ret;
	}
	v = json_string_value(json_object_get(j, "version"));
	if (s.json) {
		json_t *doc = json_pack("{s:s}", "csictl", CSID_VERSION);

		if (doc && !o.client)
			json_object_set_new(doc, "server", json_string(v ? v : "unknown"));
		if (doc)
			csictl_out_json_print(doc, out);
		json_decref(doc);
	} else if (!o.client) {
		char clean[256];

		fprintf(out, "server %s\n",
			v ? csictl_out_clean(v, clean, sizeof(clean)) : "unknown");
	}
	json_decref(j);
	return CSICTL_EXIT_OK;
}
