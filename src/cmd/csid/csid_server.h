/*
 * `csid server`: runs the control plane until SIGTERM or SIGINT: the state
 * store, the host controller plugins, the reconciler and the HTTP API.
 * Flags override the config file:
 *   -config FILE  -data-dir DIR  -listen HOST:PORT  -socket PATH
 *   -log-level debug|info|warn|error
 *
 * struct csid_server_run is the control plane itself, started and stopped
 * on a libuv loop the caller runs (main thread): `csid server` runs one,
 * `csid dev` runs one beside an agent in the same process. The caller owns
 * the process-wide setup: signals, SIGPIPE ignored, curl_global_init, and
 * at exit uv_library_shutdown then csi_grpc_shutdown.
 */
#ifndef CSID_CMD_SERVER_H
#define CSID_CMD_SERVER_H

#include <uv.h>

#include "server/server_config.h"
#include "util/err.h"

struct csid_server_run;

/*
 * Runs once on the loop thread when the control plane has stopped: after
 * csid_server_run_stop, or after a failed start. exit_code is 0 for a
 * clean stop, 1 after a failure.
 */
typedef void (*csid_server_stopped_fn)(void *ctx, int exit_code);

/*
 * A control plane on loop (borrowed) with cfg (finalized; owned from
 * now on, even on failure). NULL when out of memory.
 */
struct csid_server_run *csid_server_run_new(uv_loop_t *loop, struct server_config_file *cfg,
					    csid_server_stopped_fn on_stopped, void *ctx);
/*
 * Locks the data_dir, opens the store, starts the controllers, the
 * reconciler and the API (loop thread). On failure it returns the code
 * with e set and stops what it started: on_stopped then runs (exit code
 * 1), possibly before this returns.
 */
int csid_server_run_start(struct csid_server_run *s, struct err *e);
/*
 * Stops the API (requests in flight finish), drains the reconciler and
 * stops the controller plugins; on_stopped runs once that is done,
 * possibly before this returns. A second call does nothing.
 */
void csid_server_run_stop(struct csid_server_run *s);
/* The config it runs with (borrowed). */
const struct server_config_file *csid_server_run_config(const struct csid_server_run *s);
/* Releases everything, after on_stopped and once the loop has ended; NULL is a no-op. */
void csid_server_run_free(struct csid_server_run *s);

/* argv holds what follows "server". Returns the process exit status. */
int csid_server_main(int argc, char **argv);

#endif
