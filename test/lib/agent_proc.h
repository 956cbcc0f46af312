/*
 * Test helpers for end-to-end tests of `csid agent`: a short private
 * directory under /tmp (so every socket path fits in 107 bytes), the
 * agent started with posix_spawn from CSID_BIN with its stderr appended
 * to a log file, HTTP over the agent's unix socket with libcurl, polling
 * with a deadline (never sleeping blindly), and a cleanup that works
 * after any failure: it kills the agent and every plugin process the
 * supervisor recorded, detaches every mount under the directory and
 * removes the directory.
 *
 * Layout of a struct agent_proc's directory:
 *   agent.json   config      agent.log   the agent's stderr
 *   faults       hostpath fault script   hp/   hostpath data dir
 *   d/           the agent's data_dir (agent.sock, agent.db, plugins/, mounts/)
 */
#ifndef CSID_TEST_AGENT_PROC_H
#define CSID_TEST_AGENT_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <sys/types.h>

#include <jansson.h>

#define AGENT_PROC_PATH 160

struct agent_proc {
	char dir[AGENT_PROC_PATH];
	char data_dir[AGENT_PROC_PATH];
	char sock[AGENT_PROC_PATH];
	char config[AGENT_PROC_PATH];
	char log[AGENT_PROC_PATH];
	char faults[AGENT_PROC_PATH];
	char hp_dir[AGENT_PROC_PATH];
	pid_t pid; /* 0 when not running */
	/*
	 * Set to reuse one HTTP connection for every request (as a long-lived
	 * client would); then agent_proc_http must not be called from two
	 * threads at once. Released by agent_proc_cleanup.
	 */
	bool keepalive;
	void *curl_;
};

/* Creates the directory (/tmp/cae-XXXXXX). Returns 0 or -1. */
int agent_proc_init(struct agent_proc *a);
/* The same under base (at most 40 bytes, so socket paths fit), e.g. a tmpfs. */
int agent_proc_init_at(struct agent_proc *a, const char *base);

/*
 * Writes the config: a JSON object text where "@DIR@" is replaced with
 * a->dir (atomically: temp file + rename). Returns 0 or -1.
 */
int agent_proc_write_config(struct agent_proc *a, const char *json);
/* Writes the hostpath fault script atomically. Returns 0 or -1. */
int agent_proc_write_faults(struct agent_proc *a, const char *text);

/* Starts csid agent -config <config>. Returns 0 or -1. */
int agent_proc_start(struct agent_proc *a);
/*
 * Runs CSID_BIN with args (NULL-terminated, without argv[0]) to completion,
 * at most 30 s; its stdout and stderr go to out (size len, NUL-terminated).
 * Returns the exit status, or -1.
 */
int agent_proc_run_csid(const char *const *args, char *out, size_t len);

/* Polls until GET /v1/agent/self answers 200, at most timeout_ms. 0 or -1. */
int agent_proc_wait_ready(struct agent_proc *a, int64_t timeout_ms);
/*
 * Sends sig and waits at most timeout_ms for the agent to exit. Returns
 * its exit status (>= 0), 128 + signal when killed, or -1 on timeout (then
 * it is killed with SIGKILL).
 */
int agent_proc_stop(struct agent_proc *a, int sig, int64_t timeout_ms);

/*
 * One HTTP request to the agent. body may be NULL. Returns the HTTP status
 * (> 0) with *out set to the parsed JSON answer (NULL when not JSON; may be
 * NULL to ignore), or -1 when the request could not be made.
 */
long agent_proc_http(struct agent_proc *a, const char *method, const char *path, const char *body,
		     json_t **out);

/* Prints why (a line) and the end of the agent's log to stderr, for a failed setup. */
void agent_proc_dump_log(struct agent_proc *a, const char *why);

/* Prints the end of every plugin instance's log (plugin.log) to stderr. */
void agent_proc_dump_plugin_logs(struct agent_proc *a);

/* Whether the agent's log holds needle at least `count` times. */
bool agent_proc_log_count(struct agent_proc *a, const char *needle, int count);

/*
 * Polls until the agent's log holds needle at least `count` times, at most
 * timeout_ms. Log lines may trail the state the API reports (they are
 * written by another thread), so a test checks them with this, not once.
 */
bool agent_proc_wait_log(struct agent_proc *a, const char *needle, int count, int64_t timeout_ms);
/* A generous timeout_ms for agent_proc_wait_log of a line that is due. */
#define AGENT_PROC_LOG_MS 20000

/* Polls cond(ctx) every few ms until it is true or timeout_ms passed. */
bool agent_proc_poll(bool (*cond)(void *ctx), void *ctx, int64_t timeout_ms);

/*
 * Whether the plugins' logs (<data_dir>/plugins/ * / * /plugin.log, all
 * instances together) hold needle at least `count` times.
 */
bool agent_proc_plugin_log_count(struct agent_proc *a, const char *needle, int count);

/* Monotonic milliseconds. */
int64_t agent_proc_now_ms(void);

/* Number of mount points at or under path (from /proc/self/mountinfo). */
int agent_proc_mounts_under(const char *path);
/* Whether path is itself a mount point. */
bool agent_proc_is_mount(const char *path);

/*
 * Kills the agent (SIGKILL) and every plugin process recorded in
 * <data_dir>/plugins/ * / * /supervisor.state, detaches every mount under
 * a->dir, removes the directory. Safe to call more than once.
 */
void agent_proc_cleanup(struct agent_proc *a);

/* Pids of live plugin processes recorded by the supervisor (at most max). */
int agent_proc_plugin_pids(struct agent_proc *a, pid_t *pids, int max);

/* ---- with the csi-hostpath plugin (CSI_HOSTPATH_BIN) ---- */

#define AGENT_PROC_HP_ID "hostpath.csi.csid.dev"
/*
 * Longest wait for a started agent to answer and its plugin to become
 * healthy: sanitized programs on a loaded 2-core CI machine start slowly.
 */
#define AGENT_PROC_HP_START_MS 60000

/*
 * The config of an agent running csi-hostpath as a supervised monolith
 * (plugin ID AGENT_PROC_HP_ID, fault script a->faults, data a->hp_dir),
 * with fast test timings; extra_env is a JSON object text for the plugin's
 * "env" ("{}" for none). Writes it to buf (size len). Returns 0 or -1.
 */
int agent_proc_hostpath_config(struct agent_proc *a, const char *extra_env, char *buf, size_t len);

/*
 * Starts the agent of a (made by agent_proc_init; a->hp_dir may be set to
 * another agent's, so both plugins share their volumes) running
 * csi-hostpath with that config, edited by `edits`: pairs of strings
 * {from, to, ..., NULL}, each first `from` replaced by `to`. Waits until
 * the agent answers and its node plugin is healthy. Returns 0 or -1 (the
 * caller cleans up with agent_proc_cleanup either way).
 */
int agent_proc_start_hostpath(struct agent_proc *a, const char *const *edits);
/*
 * cmocka-style setup: a new struct agent_proc in *state, made by
 * agent_proc_init and started by agent_proc_start_hostpath. Returns 0, or
 * -1 (agent_proc_teardown still cleans up what was made).
 */
int agent_proc_setup_hostpath(void **state, const char *const *edits);
/*
 * The same with the plugin's data in hp_dir (NULL: its own), e.g. another
 * agent's: the plugins of two nodes then share one volume store, as the
 * nodes of a real cluster share the storage.
 */
int agent_proc_setup_hostpath_dir(void **state, const char *const *edits, const char *hp_dir);
/* cmocka-style teardown: cleans up and frees *state. */
int agent_proc_teardown(void **state);

/* What GET /v1/agent/plugins says about one plugin (type "node"/"controller"). */
struct agent_proc_plugin {
	bool found;
	bool healthy;
	int ninstances;
	char active[64];
	char endpoint[256];
	int pid;
	int restarts;
	int attempt;
};
int agent_proc_plugin(struct agent_proc *a, const char *id, const char *type,
		      struct agent_proc_plugin *out);
/* Polls until the node plugin id is healthy; returns true when it is. */
bool agent_proc_wait_healthy(struct agent_proc *a, const char *id, int64_t timeout_ms);

/*
 * Polls until the node plugin AGENT_PROC_HP_ID is healthy on an instance
 * other than old, with no other instance left.
 */
bool agent_proc_wait_replaced(struct agent_proc *a, const char *old, int64_t timeout_ms);

/*
 * Creates a 1 MiB mount volume named name through the plugin's endpoint
 * (CreateVolume with the CSI client). Writes its ID to id (64 bytes).
 * Returns 0 or -1.
 */
int agent_proc_create_volume(struct agent_proc *a, const char *name, char *id);

/*
 * PUT /v1/agent/mounts for (vol, alloc) through AGENT_PROC_HP_ID,
 * file-system single-node-multi-writer. Returns the HTTP status, *out as
 * agent_proc_http.
 */
long agent_proc_mount(struct agent_proc *a, const char *vol, const char *alloc, json_t **out);
/* The same through the node plugin named plugin. */
long agent_proc_mount_with(struct agent_proc *a, const char *plugin, const char *vol,
			   const char *alloc, json_t **out);
/* A mount or unmount run on a thread of its own (the caller meanwhile kills or pokes). */
struct agent_proc_call {
	struct agent_proc *a;
	const char *vol;
	const char *alloc;
	bool unmount;
	long status; /* set by agent_proc_call_join */
	int64_t ms; /* how long the request took */
	pthread_t th_;
};
/* Starts c (a, vol, alloc, unmount filled in); 0 or -1. */
int agent_proc_call_start(struct agent_proc_call *c);
/* Waits for c to finish. */
void agent_proc_call_join(struct agent_proc_call *c);

/* DELETE /v1/agent/mounts/<vol>/<alloc>; returns the HTTP status. */
long agent_proc_unmount(struct agent_proc *a, const char *vol, const char *alloc);
/* Number of records GET /v1/agent/mounts lists (-1 on error). */
int agent_proc_mount_count(struct agent_proc *a);

#endif
