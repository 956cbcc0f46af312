/*
 * `csid agent`: runs the node agent until SIGTERM or SIGINT (plugins are
 * stopped, mounts kept); SIGHUP reloads the plugin list from the config
 * file. Flags override the config file:
 *   -config FILE  -data-dir DIR  -node-name NAME  -listen unix:PATH|HOST:PORT
 *   -log-level debug|info|warn|error
 */
#ifndef CSID_CMD_AGENT_H
#define CSID_CMD_AGENT_H

#define CSID_AGENT_VERSION "0.1.0"

/* argv holds what follows "agent". Returns the process exit status. */
int csid_agent_main(int argc, char **argv);

#endif
