/*
 * `csictl plugin status [ID]` and `csictl node status [ID]`: the server's
 * view of plugins (controllers and node plugins, healthy/expected counts,
 * versions) and of nodes (status, fingerprinted plugins).
 */
#include <string.h>

#include "csictl_csi.h"
#include "csictl_server.h"

/* One "<what> status [ID]" run. */
static int plugin_status(const char *what, const char *list_path, csictl_server_render_fn all,
			 csictl_server_render_fn one, int argc, char **argv, FILE *out, FILE *err)
{
	struct csictl_server_opts o;
	struct csictl_server s;
	char path[1200];
	int ret;

	ret = csictl_server_init_plain(&s, &o, argc, argv, what, out, err);
	if (ret)
		return ret < 0 ? 0 : ret;
	if (strcmp(s.args.v[0], "status") != 0 || s.args.n > 2)
		return csictl_server_usage(&s, "usage: csictl %s status [ID]", what);
	if (s.args.n == 1)
		return csictl_server_request(&s, "GET", list_path, NULL, all, NULL);
	ret = csictl_server_path(&s, what, s.args.v[1], NULL, path, sizeof(path));
	return ret ? ret : csictl_server_request(&s, "GET", path, NULL, one, NULL);
}

int csictl_plugin_main(int argc, char **argv, FILE *out, FILE *err)
{
	return plugin_status("plugin", "/v1/plugins", csictl_render_plugins, csictl_render_plugin,
			     argc, argv, out, err);
}

int csictl_node_main(int argc, char **argv, FILE *out, FILE *err)
{
	return plugin_status("node", "/v1/nodes", csictl_render_nodes, csictl_render_node, argc,
			     argv, out, err);
}
