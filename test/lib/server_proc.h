/*
 * Test helpers for end-to-end tests of `csid server`: a private directory
 * under /tmp, a free TCP port on 127.0.0.1, the server started with
 * posix_spawn from CSID_BIN with its stderr appended to a log file, HTTP
 * with the test client (http_client.h), and a cleanup that works after any
 * failure: it kills the server and every process left under the directory
 * (the supervised plugins of a server that was killed) and removes it.
 *
 * Layout of a struct server_proc's directory:
 *   server.json  config    server.log  the server's stderr
 *   faults       hostpath fault script  hp/  hostpath data dir
 *   d/           the server's data_dir (server.db, server.lock, plugins/)
 */
#ifndef CSID_TEST_SERVER_PROC_H
#define CSID_TEST_SERVER_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "http_client.h"

#define SERVER_PROC_PATH 160
#define SERVER_PROC_HP_ID "hostpath.csi.csid.dev"
/* The fingerprint of node-1 with the node plugin SERVER_PROC_HP_ID (PUT /v1/node/node-1). */
#define SERVER_PROC_NODE_BODY                                                            \
	"{\"plugins\": [{\"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"type\": \"node\", " \
	"\"healthy\": true, \"health\": \"healthy\", \"version\": \"0.1.0\", "           \
	"\"capabilities\": [\"STAGE_UNSTAGE_VOLUME\"], \"plugin_node_id\": \"node-1\", " \
	"\"topology\": {\"topology.hostpath.csi/node\": \"node-1\"}}]}"
/* A 1 MiB single-node-single-writer volume of SERVER_PROC_HP_ID (PUT /v1/volume/<id>/create). */
#define SERVER_PROC_CREATE_BODY                                                   \
	"{\"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"capacity_min\": \"1MiB\", " \
	"\"capabilities\": [{\"access_mode\": \"single-node-single-writer\"}]}"

struct server_proc {
	char dir[SERVER_PROC_PATH];
	char data_dir[SERVER_PROC_PATH];
	char config[SERVER_PROC_PATH];
	char log[SERVER_PROC_PATH];
	char faults[SERVER_PROC_PATH];
	char hp_dir[SERVER_PROC_PATH];
	char addr[64]; /* "127.0.0.1:PORT" */
	char base[80]; /* "http://127.0.0.1:PORT" */
	pid_t pid; /* 0 when not running */
	struct http_client *http;
};

/* The lowest port server_proc_free_port hands out. */
#define SERVER_PROC_PORT_MIN 10000

/*
 * A TCP port for a test's listener (or a test's address where nothing
 * listens), held by this process until it exits; -1 when none is left.
 * Picked below the kernel's range of local ports for outgoing connections
 * (ip_local_port_range), so no connection on the machine takes it as its
 * own port, and held by a bound socket that never listens, so no other
 * process's pick (another test run in parallel, this project's or not)
 * gets it. Only a listener that sets SO_REUSEADDR binds it then; every
 * server the tests start does. A port picked and released again would be
 * free for anyone until the listener binds it: on a loaded machine with
 * many test runs, sooner or later someone takes it (and a listener on
 * 0.0.0.0 fails to start).
 */
int server_proc_free_port(void);

/* Creates the directory (/tmp/csp-XXXXXX) and picks a free port. Returns 0 or -1. */
int server_proc_init(struct server_proc *s);

/*
 * Writes the config: a JSON object text where "@DIR@" is the directory,
 * "@ADDR@" the listen address and "@HP@" the csi-hostpath binary. NULL
 * writes the default: data_dir, listen, short backoffs, and csi-hostpath
 * (controller mode, fault script <dir>/faults) supervised as the
 * controller plugin SERVER_PROC_HP_ID. extra (or NULL) is a text of more
 * keys spliced into the default object ("\"acl_tokens\": [...]").
 */
int server_proc_write_config(struct server_proc *s, const char *json, const char *extra);
/* Writes the hostpath fault script atomically. Returns 0 or -1. */
int server_proc_write_faults(struct server_proc *s, const char *text);

/* Starts csid server -config <config>. Returns 0 or -1. */
int server_proc_start(struct server_proc *s);
/*
 * Starts CSID_BIN with args (NULL-terminated, at most 14, without argv[0])
 * the same way, e.g. {"dev", "-listen", s->addr, NULL}. Returns 0 or -1.
 */
int server_proc_start_args(struct server_proc *s, const char *const *args);
/*
 * Starts `csid dev -data-dir dev_dir -listen <s->addr>` (with -keep when
 * keep) and waits up to timeout_ms until it is ready; on failure prints
 * its log. Returns 0 or -1.
 */
int server_proc_start_dev(struct server_proc *s, const char *dev_dir, bool keep,
			  int64_t timeout_ms);
/* Polls GET /v1/status/health until it answers 200. */
bool server_proc_wait_ready(struct server_proc *s, int64_t timeout_ms);
/* Polls until plugin id has a healthy controller. */
bool server_proc_wait_plugin(struct server_proc *s, const char *id, int64_t timeout_ms);
/* Sends sig and waits for the exit; returns the wait status, or -1 on timeout (then kills). */
int server_proc_stop(struct server_proc *s, int sig, int64_t timeout_ms);

/* One request; *out the parsed JSON answer (may be NULL). Returns the HTTP status. */
long server_proc_http(struct server_proc *s, const char *method, const char *path, const char *body,
		      json_t **out);
/*
 * Polls GET path until the JSON field key (top level) equals want, or the
 * deadline passes. Returns true when it did.
 */
bool server_proc_wait_field(struct server_proc *s, const char *path, const char *key,
			    const char *want, int64_t timeout_ms);

/*
 * Polls GET path until check(doc) holds for its parsed answer, at most
 * timeout_ms; prints the log when it never does. Returns whether it held.
 */
bool server_proc_wait_doc(struct server_proc *s, const char *path, bool (*check)(json_t *doc),
			  int64_t timeout_ms);
/* Checks of a volume for server_proc_wait_doc: ready, with an external ID. */
bool server_proc_volume_ready(json_t *doc);
/* Its first publication is published. */
bool server_proc_volume_published(json_t *doc);
/* It has publications, and each is published. */
bool server_proc_volume_all_published(json_t *doc);
/* No claim nor publication left, one past claim. */
bool server_proc_volume_freed(json_t *doc);
/* An answer with code "not_found" (a deleted volume). */
bool server_proc_not_found(json_t *doc);
/*
 * The healthy controller and node plugins of plugin id in an answer of GET
 * /v1/plugins. Returns false when the answer does not list id.
 */
bool server_proc_plugin_counts(json_t *doc, const char *id, int *controllers, int *nodes);
/* Check for GET /v1/plugins: SERVER_PROC_HP_ID with one healthy controller and node (csid dev). */
bool server_proc_hp_up(json_t *doc);
/* A PUT whose answer is printed to stderr unless it is 200. Returns the HTTP status. */
long server_proc_put(struct server_proc *s, const char *path, const char *body);

/* Whether the server's log holds needle. */
bool server_proc_log_has(struct server_proc *s, const char *needle);
/*
 * Whether the server's log holds needle within timeout_ms: for a line
 * written by another thread than the one whose work the test waited for
 * (a request's line is written after its answer went out).
 */
bool server_proc_wait_log(struct server_proc *s, const char *needle, int64_t timeout_ms);
/* Prints the log to stderr with a heading (for failures). */
void server_proc_dump_log(struct server_proc *s, const char *why);
/* Kills everything, removes the directory. */
void server_proc_cleanup(struct server_proc *s);

#endif
