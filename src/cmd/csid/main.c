/*
 * csid: the node agent (`csid agent`), the control plane (`csid server`)
 * and both in one process for a first try (`csid dev`). main() only
 * dispatches; each subcommand lives in a file of its own (csid_agent.c,
 * csid_server.c, csid_dev.c).
 */
#include <stdio.h>
#include <string.h>

#include "csid_agent.h"
#include "csid_dev.h"
#include "csid_server.h"
#include "util/wipe.h"

static void csid_usage(FILE *f)
{
	fprintf(f, "usage: csid <command> [flags]\n"
		   "\n"
		   "commands:\n"
		   "  agent     run the node agent: plugin supervisor, registry, plugin manager,\n"
		   "            volume mounter and the agent HTTP API\n"
		   "  server    run the control plane: state store, controller plugins,\n"
		   "            reconciler and the server HTTP API\n"
		   "  dev       run a server, an agent and csi-hostpath in one process on a\n"
		   "            temporary directory, for a first try\n"
		   "  version   print the version\n"
		   "\n"
		   "Run `csid <command> -h` for the flags of a command.\n");
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;

	if (!cmd) {
		csid_usage(stderr);
		return 2;
	}
	if (strcmp(cmd, "-h") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-help") == 0 ||
	    strcmp(cmd, "help") == 0) {
		csid_usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "-version") == 0 ||
	    strcmp(cmd, "--version") == 0) {
		printf("csid %s\n", CSID_VERSION);
		return 0;
	}
	/* JSON texts carry secrets (volume specs, node-stage answers): freed zeroed. */
	wipe_json_install();
	if (strcmp(cmd, "agent") == 0)
		return csid_agent_main(argc - 2, argv + 2);
	if (strcmp(cmd, "server") == 0)
		return csid_server_main(argc - 2, argv + 2);
	if (strcmp(cmd, "dev") == 0)
		return csid_dev_main(argc - 2, argv + 2);
	fprintf(stderr, "csid: unknown command \"%s\"\n\n", cmd);
	csid_usage(stderr);
	return 2;
}
