/*
 * Plugin supervisor: runs the plugins of the agent's configuration on a
 * libuv loop and keeps them registered in the plugin registry while they
 * are healthy.
 *
 * A supervised plugin instance gets a directory of its own,
 * <data_dir>/plugins/<id>/<instance>/, holding its state file and its
 * capped log (plugin.log, rotated to plugin.log.1 at the cap); its socket
 * is csi.sock in that directory, or <data_dir>/p/<hash>/csi.sock when that
 * path would pass the 107-byte limit of a unix socket path. The process is
 * started with uv_spawn (never fork without exec: the agent runs gRPC
 * threads) with CSI_ENDPOINT=unix://<socket>, in a session of its own.
 *
 * Lifecycle of an instance: start -> wait for the socket (socket_timeout)
 * -> GetPluginInfo + Probe, retried until health_timeout -> register (a
 * monolith as controller and node) -> Probe every probe_interval, with an
 * event on every health change. An instance that exits, fails to start,
 * or stays unhealthy for unhealthy_threshold is stopped and a new instance
 * is started after a capped exponential backoff with jitter. Stopping an
 * instance first removes every registration it made.
 *
 * supervisor_apply() with a changed definition starts a new instance,
 * waits until it is registered and healthy, then stops the old one, so a
 * plugin name is never without an instance during an update. External
 * plugins (a socket, no command) are probed and registered the same way,
 * but never started nor restarted.
 *
 * Threading: every function except supervisor_snapshot must be called on
 * the loop's thread. Probes run on the libuv thread pool.
 */
#ifndef CSID_PLUGINS_SUPERVISOR_H
#define CSID_PLUGINS_SUPERVISOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "plugins/config_plugin.h"
#include "plugins/instance_manager.h"
#include "plugins/registry.h"
#include "util/err.h"

#define SUPERVISOR_INSTANCE_ID_MAX 32
#define SUPERVISOR_SOCK_MAX 108

enum supervisor_event_kind {
	SUPERVISOR_EVENT_STARTED, /* process spawned (or external plugin watched) */
	SUPERVISOR_EVENT_REGISTERED, /* first healthy probe: registered */
	SUPERVISOR_EVENT_HEALTHY, /* a probe succeeded after failing */
	SUPERVISOR_EVENT_UNHEALTHY, /* a probe failed after succeeding */
	SUPERVISOR_EVENT_FAILED, /* start failed (spawn, socket, health timeout) */
	SUPERVISOR_EVENT_EXITED, /* the process exited */
	SUPERVISOR_EVENT_RESTARTING, /* a restart is scheduled after a backoff */
	SUPERVISOR_EVENT_STOPPING, /* deregistered, stop requested */
	SUPERVISOR_EVENT_STOPPED, /* the instance is gone */
};

/* "started", "registered", ... */
const char *supervisor_event_name(enum supervisor_event_kind k);

struct supervisor_event {
	enum supervisor_event_kind kind;
	const char *plugin_id; /* valid during the callback */
	const char *instance_id;
	const char *message; /* why, e.g. "Probe: UNAVAILABLE: connect failed" */
	int64_t delay_ms; /* RESTARTING: the backoff */
};

typedef void (*supervisor_event_cb)(void *ctx, const struct supervisor_event *ev);

struct supervisor_config {
	uv_loop_t *loop; /* borrowed */
	const char *data_dir; /* copied; must exist */
	const char *node_name; /* copied; for ${NODE_NAME} */
	struct registry *registry; /* borrowed */
	/* How probes open a client; NULL: csi_client_grpc_new. */
	instance_manager_connect_fn connect;
	void *connect_ctx;
	supervisor_event_cb on_event; /* optional; called on the loop thread */
	void *on_event_ctx;
	/* Randomness for the jitter; NULL: an internal generator. */
	uint64_t (*random)(void *ctx);
	void *random_ctx;
	/* Timings (ms); 0 takes the config_new() default. */
	int64_t socket_timeout_ms;
	int64_t health_timeout_ms;
	int64_t probe_interval_ms;
	int64_t unhealthy_threshold_ms;
	int64_t backoff_base_ms;
	int64_t backoff_max_ms;
	/*
	 * An external plugin still not answering after health_timeout is
	 * probed after delays doubling from 1 s with jitter up to this cap.
	 */
	int64_t reconnect_max_ms;
	int64_t stop_grace_ms; /* SIGTERM, then SIGKILL after this */
	int64_t log_max_bytes;
};

/* State of one plugin, for the API. */
struct supervisor_status {
	char id[CONFIG_ID_MAX + 1];
	enum config_plugin_type type;
	bool external;
	char instance_id[SUPERVISOR_INSTANCE_ID_MAX]; /* "" between instances */
	const char *state; /* "starting", "probing", "running", "backoff", "stopping" */
	int pid; /* 0 when none */
	bool healthy;
	bool registered;
	char endpoint[SUPERVISOR_SOCK_MAX + 8];
	unsigned restarts; /* instances started after the first */
	unsigned attempt; /* consecutive failures (backoff exponent) */
	int64_t next_restart_ms; /* wall clock (Unix ms) of the next start; 0: none */
	char message[256]; /* last failure or health description */
};

struct supervisor;

/* Creates a supervisor (no plugin yet). Returns 0 and *out or a code with e set. */
int supervisor_new(const struct supervisor_config *cfg, struct supervisor **out, struct err *e);

/*
 * Kills what a previous agent left behind (its plugin processes still
 * running after a crash, identified by the state files and checked
 * against their start time), deregisters their instances and removes their
 * sockets. Call once, before supervisor_apply. Returns the number of
 * stale instances found.
 */
int supervisor_cleanup_stale(struct supervisor *sv);

/*
 * Makes the supervised set match plugins[0..n): new IDs are started,
 * removed ones stopped, changed definitions replaced with an overlap (see
 * above), unchanged ones left alone. The definitions are copied.
 * Returns 0 or CSID_ENOMEM / CSID_EPRECOND (shutting down) with e set.
 */
int supervisor_apply(struct supervisor *sv, const struct config_plugin *plugins, size_t n,
		     struct err *e);

/*
 * Stops every instance (deregistering it first) and calls done(ctx) on the
 * loop once every process exited and every handle closed. No plugin is
 * started afterwards. Calling it twice is CSID_EPRECOND.
 */
int supervisor_shutdown(struct supervisor *sv, void (*done)(void *ctx), void *ctx);

/* Frees a supervisor that finished shutting down (or never started one); NULL: no-op. */
void supervisor_free(struct supervisor *sv);

/*
 * Copies the state of every plugin. Thread-safe. Returns 0 and *out, *n
 * (free(*out)), or CSID_ENOMEM.
 */
int supervisor_snapshot(struct supervisor *sv, struct supervisor_status **out, size_t *n);

/*
 * The restart delay after `attempt` consecutive failures (0 = first
 * retry): base * 2^attempt capped at max, with jitter drawn from rnd so
 * that the result lies in [3/4 d, d] of that value d. Pure.
 */
int64_t supervisor_backoff_ms(unsigned attempt, int64_t base_ms, int64_t max_ms, uint64_t rnd);

/*
 * Chooses the socket path of an instance: <data_dir>/plugins/<id>/<instance>/csi.sock
 * when it fits in 107 bytes, else <data_dir>/p/<16 hex digits>/csi.sock.
 * Writes it (and its directory) to sock and dir (SUPERVISOR_SOCK_MAX bytes
 * each). Returns 0, or CSID_EINVAL with e set when even the short form
 * does not fit. Pure.
 */
int supervisor_socket_path(const char *data_dir, const char *id, const char *instance, char *sock,
			   char *dir, struct err *e);

#endif
