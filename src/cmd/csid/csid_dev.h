/*
 * `csid dev`: a control plane and a node agent in one process, for a
 * first try: the server (SQLite store under <dir>/server, API on
 * 127.0.0.1:4646) and the agent (data under <dir>/agent, node "dev",
 * socket <dir>/agent/agent.sock) joined with a generated token, the agent
 * supervising the bundled csi-hostpath as a monolith (controller publish
 * on, data under <dir>/hostpath). Flags:
 *   -data-dir DIR  -listen HOST:PORT  -node-name NAME  -hostpath PATH
 *   -log-level debug|info|warn|error  -keep
 * Without -data-dir, dir is a new temporary directory. On SIGTERM/SIGINT
 * both stop; without -keep every mount under dir is detached and what
 * csid dev made there is removed.
 */
#ifndef CSID_CMD_DEV_H
#define CSID_CMD_DEV_H

/* argv holds what follows "dev". Returns the process exit status. */
int csid_dev_main(int argc, char **argv);

#endif
