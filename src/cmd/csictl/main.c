/*
 * csictl: the command-line client of csid. The first argument picks the
 * command group, which owns everything after it:
 *   csictl csi ...    talk CSI (gRPC) to any plugin at a unix socket
 *   csictl agent ...  talk to a csid agent's HTTP API
 * Exit status: 0 OK, 1 the operation failed, 2 usage error.
 */
#include <stdio.h>
#include <string.h>

#include "csictl_agent.h"
#include "csictl_csi.h"

static void csictl_usage(FILE *f)
{
	fputs("usage: csictl COMMAND [ARGS]\n\n"
	      "Commands:\n"
	      "  csi     call a CSI plugin directly (csictl csi -h)\n"
	      "  agent   drive a csid agent: plugins, mounts (csictl agent -h)\n",
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
	fprintf(stderr, "error: unknown command \"%.64s\"\n", argv[1]);
	csictl_usage(stderr);
	return CSICTL_EXIT_USAGE;
}
