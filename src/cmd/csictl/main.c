/*
 * csictl: the command-line client of csid. The first argument picks the
 * command group, which owns everything after it:
 *   csictl csi ...    talk CSI (gRPC) to any plugin at a unix socket
 *   csictl agent ...  talk to a csid agent's HTTP API
 *   csictl volume|plugin|node|events|operator|server ...  talk to a csid server's HTTP API
 *   csictl version | completion bash
 * Every command's help comes from one table (csictl_cmds.c).
 * Exit status: 0 OK, 1 the operation failed, 2 usage error.
 *
 * `csictl csi` runs the program csictl-csi beside this one: only that
 * program links gRPC, whose libraries made every csictl command take
 * about twice as long to start (csictl is linked with --as-needed).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "csictl_agent.h"
#include "csictl_cmds.h"
#include "csictl_csi.h"
#include "csictl_server.h"
#include "util/wipe.h"

static void csictl_usage(FILE *f)
{
	csictl_cmd_help("", NULL, NULL, 0, f);
}

/* Replaces this process with csictl-csi from csictl's directory, with argv[2..]. */
static int csictl_run_csi(char **argv)
{
	char self[PATH_MAX], path[PATH_MAX + 16], *slash;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n <= 0) {
		fprintf(stderr, "error: csi: where csictl is: %s\n", strerror(errno));
		return CSICTL_EXIT_FAIL;
	}
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (slash)
		*slash = '\0';
	snprintf(path, sizeof(path), "%s/csictl-csi", slash ? self : ".");
	argv[1] = path;
	execv(path, argv + 1);
	fprintf(stderr, "error: csi: cannot run %s: %s\n", path, strerror(errno));
	return CSICTL_EXIT_FAIL;
}

int main(int argc, char **argv)
{
	/* Volume and snapshot specs carry secrets: their JSON is freed zeroed. */
	wipe_json_install();
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
		return csictl_run_csi(argv);
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
	if (strcmp(argv[1], "operator") == 0)
		return csictl_operator_main(argc - 2, argv + 2, stdout, stderr);
	if (strcmp(argv[1], "server") == 0)
		return csictl_members_main(argc - 2, argv + 2, stdout, stderr);
	if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0)
		return csictl_version_main(argc - 1, argv + 1, stdout, stderr);
	if (strcmp(argv[1], "completion") == 0) {
		if (argc == 3 && strcmp(argv[2], "bash") == 0) {
			csictl_cmd_completion_bash(stdout);
			return CSICTL_EXIT_OK;
		}
		if (argc == 3 && (strcmp(argv[2], "-h") == 0 || strcmp(argv[2], "--help") == 0 ||
				  strcmp(argv[2], "-help") == 0)) {
			struct csictl_args a = {.v = {"completion"}, .n = 1};

			csictl_cmd_help("", &a, NULL, 0, stdout);
			return CSICTL_EXIT_OK;
		}
		fputs("error: usage: csictl completion bash\n", stderr);
		return CSICTL_EXIT_USAGE;
	}
	fprintf(stderr, "error: unknown command \"%.64s\"\n", argv[1]);
	csictl_usage(stderr);
	return CSICTL_EXIT_USAGE;
}
