/*
 * Private structures of the plugin supervisor, shared by supervisor.c
 * (lifecycle, probing, registration) and supervisor_proc.c (processes,
 * logs, directories, stale instances). Not part of the library contract.
 *
 * Ownership: the supervisor owns its plugins (one per configured ID) and
 * every instance. A plugin points at its current instance (cur) and, during
 * an update, at the instance being replaced (old). An instance being
 * stopped is detached from its plugin and kept on the supervisor's dying
 * list until its process exited, its handles closed and no probe runs; it
 * is freed then, never inside one of its own callbacks' dispatch.
 */
#ifndef CSID_PLUGINS_SUPERVISOR_INT_H
#define CSID_PLUGINS_SUPERVISOR_INT_H

#include <limits.h>
#include <pthread.h>

#include "plugins/supervisor.h"

enum supervisor_istate {
	SUPERVISOR_STARTING, /* spawned, waiting for the socket */
	SUPERVISOR_PROBING, /* socket there, waiting for a healthy probe */
	SUPERVISOR_RUNNING, /* registered, heartbeat */
	SUPERVISOR_STOPPING, /* deregistered, waiting for the process to exit */
};

struct supervisor_plugin;

struct supervisor_instance {
	struct supervisor *sv;
	struct supervisor_plugin *plugin; /* NULL once detached */
	struct config_plugin def;
	char id[SUPERVISOR_INSTANCE_ID_MAX];
	char dir[PATH_MAX]; /* state file and log */
	char sock[SUPERVISOR_SOCK_MAX];
	char sock_dir[SUPERVISOR_SOCK_MAX];
	char endpoint[SUPERVISOR_SOCK_MAX + 8];
	enum supervisor_istate state;
	bool external;
	uv_process_t proc;
	uv_pipe_t pipes[2];
	uv_timer_t timer;
	int open_handles;
	bool proc_running;
	bool proc_init;
	bool pipe_open[2];
	bool closing;
	int pid;
	/* Probe work: the fields below the line are written by the worker. */
	uv_work_t work;
	bool work_busy;
	int probe_rc;
	char probe_msg[256];
	bool info_done;
	struct csi_client *client;
	/* Timing (loop ms). */
	int64_t deadline_ms;
	int64_t retry_ms;
	unsigned probe_attempts; /* failed probes past the health deadline */
	int64_t unhealthy_since_ms;
	int64_t healthy_since_ms;
	bool healthy;
	bool registered;
	bool fail_reported;
	int log_fd;
	int64_t log_size;
	struct supervisor_instance *next; /* dying list */
};

struct supervisor_plugin {
	struct supervisor *sv;
	struct config_plugin def; /* desired definition */
	struct supervisor_instance *cur;
	struct supervisor_instance *old;
	uv_timer_t restart_timer;
	bool restart_pending;
	bool removed;
	unsigned attempt;
	unsigned restarts;
	int64_t next_restart_ms;
	char message[256];
	struct supervisor_plugin *next;
};

struct supervisor {
	struct supervisor_config cfg;
	char *data_dir;
	char *node_name;
	struct supervisor_plugin *plugins;
	struct supervisor_instance *dying;
	bool shutting_down;
	void (*done)(void *ctx);
	void *done_ctx;
	bool done_called;
	uint64_t rng;
	pthread_mutex_t mu; /* guards status */
	struct supervisor_status *status;
	size_t nstatus;
};

/* supervisor_proc.c */
/*
 * Names inst (inst->def and inst->external set): 12 random hex digits for a
 * process; for an external plugin a stable "ext-" + hash of its ID and
 * socket, so that after an agent restart its registration is replaced,
 * not duplicated.
 */
void supervisor_proc_instance_id(struct supervisor_instance *inst);
int supervisor_proc_prepare(struct supervisor_instance *inst, struct err *e);
int supervisor_proc_spawn(struct supervisor_instance *inst, uv_exit_cb on_exit, struct err *e);
void supervisor_proc_log(struct supervisor_instance *inst, const char *buf, size_t n);
void supervisor_proc_forget(struct supervisor_instance *inst);
void supervisor_proc_prune(struct supervisor *sv, const char *plugin_id);
uint64_t supervisor_rand(struct supervisor *sv);
/* supervisor.c: closes a handle of inst (once); the last close frees inst. */
void supervisor_close_handle(struct supervisor_instance *inst, uv_handle_t *h);
/* Deregisters what inst registered (both types for a monolith). */
void supervisor_deregister(struct supervisor *sv, const char *id, enum config_plugin_type type,
			   const char *instance_id);

#endif
