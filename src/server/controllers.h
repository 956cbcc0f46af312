/*
 * Controller plugins on the server's own host: the reconciler_controllers
 * seam for plugins given by socket or run as supervised commands (config
 * controller_plugins), built from the agent's modules. The supervisor
 * starts the commands (and watches the sockets), registering each healthy
 * instance in an in-memory registry; the plugin manager follows the
 * registry, connects to the active instance of each plugin, fingerprints
 * it (ControllerGetCapabilities) and probes its health.
 *
 * acquire() hands out a gRPC client on the active instance of a healthy
 * plugin, with its controller capability bits; clients are shared and
 * counted, and one whose instance was replaced is freed when its last
 * holder releases it. controllers_local() fills the server's plugins view
 * (struct server_config.local_controllers).
 *
 * The next issue puts controller plugins behind agents: another
 * implementation of struct reconciler_controllers, nothing else changes.
 *
 * Threading: controllers_new, controllers_shutdown and controllers_free
 * run on the loop's thread; acquire, release and controllers_local are
 * thread-safe.
 */
#ifndef CSID_SERVER_CONTROLLERS_H
#define CSID_SERVER_CONTROLLERS_H

#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "plugins/config_plugin.h"
#include "server/reconciler.h"
#include "server/server.h"
#include "util/err.h"

struct controllers_config {
	uv_loop_t *loop; /* borrowed; the supervisor runs on it */
	const char *data_dir; /* plugin sockets and logs under <data_dir>/plugins */
	const struct config_plugin *plugins; /* copied; type controller */
	size_t nplugins;
	int64_t rpc_timeout_ms; /* fingerprint and probe deadline; 0: default */
};

struct controllers;

/* Starts the plugins (on the loop). Returns 0 and *out, or a code with e set. */
int controllers_new(const struct controllers_config *cfg, struct controllers **out, struct err *e);

/* The seam for server_config.controllers (valid until controllers_free). */
struct reconciler_controllers controllers_seam(struct controllers *c);

/*
 * server_config.local_controllers: one entry per configured plugin
 * (ctx: the struct controllers), strings in a; a plugin not yet
 * registered shows as unhealthy with the supervisor's last message.
 */
size_t controllers_local(void *ctx, struct server_local_controller *out, size_t cap,
			 struct arena *a);

/*
 * Stops the plugin manager, then the plugins; calls done(ctx) on the loop
 * once every plugin process exited. Call after the reconciler stopped.
 */
int controllers_shutdown(struct controllers *c, void (*done)(void *ctx), void *ctx, struct err *e);

/* Frees (after the shutdown's done, or when it never started); NULL is a no-op. */
void controllers_free(struct controllers *c);

#endif
