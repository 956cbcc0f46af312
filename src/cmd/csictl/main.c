/*
 * csictl: the command-line client of csid. The first argument picks the
 * command group, which owns everything after it:
 *   csictl csi ...    talk CSI (gRPC) to any plugin at a unix socket
 *   csictl agent ...  talk to a csid agent's HTTP API
 *   csictl volume|plugin|node|events ...  talk to a csid server's HTTP API
 * Exit status: 0 OK, 1 the operation failed, 2 usage error.
 */
#include <stdio.h>
#include <string.h>

#include "csictl_agent.h"
#include "csictl_csi.h"
#include "csictl_server.h"

static void csictl_usage(FILE *f)
{
	fputs("usage: csictl COMMAND [ARGS]\n\n"
	      "Commands:\n"
	      "  volume  volumes of a csid server: create, claim, snapshot... (csictl volume -h)\n"
	      "  plugin  plugins a csid server knows, with their health\n"
	      "  node    nodes registered with a csid server\n"
	      "  events  follow a csid server's event stream\n"
	      "  agent   drive a csid agent: plugins, mounts (csictl agent -h)\n"
	      "  csi     call a CSI plugin directly (csictl csi -h)\n",
	      f);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		csictl_usage(stderr);
		return CSICTL_EXIT_USAGE;
	}
	if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-help") == 0 || strcmp(argv[1], "help") == 0) {
		csictl_usage(stdout);
		return CSICTL_EXIT_OK;
	}
	if (strcmp(argv[1], "csi") == 0)
		return csictl_csi_main(argc - 2, argv + 2, stdout, stderr);
	if (strcmp(argv[1], "agent") == 0)
		return csictl_agent_main(argc - 2, argv + 2, stdout, stderr);
	if (strcmp(argv[1], "volume") == 0)
		return csictl_volume_main(argc - 2, argv + 2, stdout, stderr);
	if (strcmp(argv[1], "plugin") == 0)
		return csictl_plugin_main(argc - 2, argv + 2, stdout, stderr);
	if (strcmp(argv[1], "node") == 0)
		return csictl_node_main(argc - 2, argv + 2, stdout, stderr);
	if (strcmp(argv[1], "events") == 0)
		return csictl_events_main(argc - 2, argv + 2, stdout, stderr);
	fprintf(stderr, "error: unknown command \"%.64s\"\n", argv[1]);
	csictl_usage(stderr);
	return CSICTL_EXIT_USAGE;
}
