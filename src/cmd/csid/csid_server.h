/*
 * `csid server`: runs the control plane until SIGTERM or SIGINT: the state
 * store, the host controller plugins, the reconciler and the HTTP API.
 * Flags override the config file:
 *   -config FILE  -data-dir DIR  -listen HOST:PORT  -socket PATH
 *   -log-level debug|info|warn|error
 */
#ifndef CSID_CMD_SERVER_H
#define CSID_CMD_SERVER_H

/* argv holds what follows "server". Returns the process exit status. */
int csid_server_main(int argc, char **argv);

#endif
