/*
 * `csid agent`: runs the node agent until SIGTERM or SIGINT (plugins are
 * stopped, mounts kept); SIGHUP reloads the plugin list from the config
 * file. Flags override the config file:
 *   -config FILE  -data-dir DIR  -node-name NAME  -listen unix:PATH|HOST:PORT
 *   -log-level debug|info|warn|error
 *
 * struct csid_agent_run is the agent itself, started and stopped on a
 * libuv loop the caller runs (main thread): `csid agent` runs one, `csid
 * dev` runs one beside a server in the same process. The caller owns the
 * process-wide setup: signals, SIGPIPE ignored, curl_global_init before
 * any thread, and at exit uv_library_shutdown then csi_grpc_shutdown.
 */
#ifndef CSID_CMD_AGENT_H
#define CSID_CMD_AGENT_H

#include <uv.h>

#include "agent/config.h"
#include "util/err.h"

struct csid_agent_run;

/*
 * Runs once on the loop thread when the agent has stopped (plugins
 * stopped, mounts kept): after csid_agent_run_stop, or after a failed
 * start, also one found after csid_agent_run_start returned (its API
 * could not listen). exit_code is 0 for a clean stop, 1 after a failure.
 */
typedef void (*csid_agent_stopped_fn)(void *ctx, int exit_code);

/*
 * An agent on loop (borrowed) with cfg (finalized; owned from now on,
 * even on failure). NULL when out of memory.
 */
struct csid_agent_run *csid_agent_run_new(uv_loop_t *loop, struct config *cfg,
					  csid_agent_stopped_fn on_stopped, void *ctx);
/*
 * Locks the data_dir, restores the registry, joins the servers, starts
 * the plugins, then (startup thread) recovers the mounts and opens the
 * API. On failure it returns the code with e set and stops what it
 * started: on_stopped then runs (exit code 1), possibly before this
 * returns.
 */
int csid_agent_run_start(struct csid_agent_run *a, struct err *e);
/*
 * Stops the agent: the server link, the plugin manager, the API, then
 * the plugins; on_stopped runs once that is done, possibly before this
 * returns. Mounts are kept. A second call does nothing more.
 */
void csid_agent_run_stop(struct csid_agent_run *a);
/* Applies the plugin list of cfg (borrowed), a reloaded config (loop thread). */
void csid_agent_run_reload(struct csid_agent_run *a, const struct config *cfg);
/* The config it runs with (borrowed). */
const struct config *csid_agent_run_config(const struct csid_agent_run *a);
/* Releases everything, after on_stopped and once the loop has ended; NULL is a no-op. */
void csid_agent_run_free(struct csid_agent_run *a);

/* argv holds what follows "agent". Returns the process exit status. */
int csid_agent_main(int argc, char **argv);

#endif
