/*
 * Server link: the agent's side of joining csid servers. The agent sends
 * its node's fingerprint (every node and controller plugin it manages,
 * with health, capabilities, CSI node ID, max volumes and accessible
 * topology, plus the agent's instance ID, the address of its API and the
 * allocations it holds, agent/held_allocs.h) with PUT /v1/node/<node> to
 * one of the configured servers: at start, at once when the fingerprint changes, and every
 * heartbeat period as the node's heartbeat.
 *
 * The decisions live in an I/O-free core (struct server_link_core):
 * what is due when, to which server, and how long to wait after each
 * outcome. It is stepped with explicit times, so tests run it in virtual
 * time:
 *   - a send that succeeds: the next is due one heartbeat later, or at
 *     once when the fingerprint changed meanwhile; the link stays on that
 *     server;
 *   - a server that cannot be reached (no connection, timeout, 5xx, an
 *     answer that is not HTTP): fail over to the next server in the list
 *     at once; once every server failed in a row, wait a delay doubling
 *     from retry_min up to retry_max, drawn in [3/4 d, d] (jitter, so
 *     the agents of a cluster do not come back together), then go round
 *     again; the first success resets the delay;
 *   - 401 or 403 (a wrong or missing token): the next server, after the
 *     slow delay (a token is not fixed by retrying quickly);
 *   - 409 conflict (another live agent instance holds this node): the same
 *     server again after one heartbeat, so the node is taken over soon
 *     after the other agent stops;
 *   - any other answer (400: a fingerprint this server refuses): the same
 *     server after the slow delay.
 * A server's answer to a send names, in "released", the reported
 * allocations that hold no active claim on the node any more (claims
 * released while the node was away, server/server_gc.h): the shell passes
 * each on through held_allocs_released (agent/held_allocs.h), which
 * hands it to the agent API for an unmount unless it may be stale; and
 * in "expand" the reported volumes that want NodeExpandVolume on this
 * node, which the shell passes on, the whole list of each answer,
 * through held_allocs_expand (the claim flow grows and reports them).
 * A fingerprint change while the link is failing does not cut the wait
 * short. The agent serves its mounts whatever the link does: the link
 * only reports, and every send carries the whole fingerprint, so a server
 * that comes back (or lost its state) is caught up by the next send.
 *
 * The shell (server_link_new/start) runs the core on a thread of its own
 * with libcurl, builds the body from the plugin manager's snapshot and
 * logs every change of outcome. The token goes in X-Csid-Token and is
 * never logged. Thread-safety: server_link_notify may be called from any
 * thread; the core functions from one thread at a time.
 */
#ifndef CSID_AGENT_SERVER_LINK_H
#define CSID_AGENT_SERVER_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/held_allocs.h"
#include "plugins/plugin_manager.h"
#include "model/model.h"
#include "util/clock.h"
#include "util/err.h"

#define SERVER_LINK_HEARTBEAT_MS 10000
#define SERVER_LINK_RETRY_MIN_MS 500
#define SERVER_LINK_RETRY_MAX_MS 30000
#define SERVER_LINK_SLOW_MS 60000
/* Deadline of one request (connect included) and of its connect alone. */
#define SERVER_LINK_REQUEST_TIMEOUT_MS 5000
#define SERVER_LINK_CONNECT_TIMEOUT_MS 2000
/* Length of an instance ID (hex digits). */
#define SERVER_LINK_INSTANCE_ID_LEN 32

enum server_link_outcome {
	SERVER_LINK_OK, /* 2xx */
	SERVER_LINK_UNREACHABLE, /* no connection, timeout, 5xx, not HTTP */
	SERVER_LINK_UNAUTHORIZED, /* 401 or 403 */
	SERVER_LINK_DUPLICATE, /* 409 conflict: another agent instance holds the node */
	SERVER_LINK_REFUSED, /* any other answer */
};

/* "ok", "unreachable", "unauthorized", "duplicate node", "refused". */
const char *server_link_outcome_name(enum server_link_outcome o);
/* The outcome of an HTTP answer: status, and the "code" of its error body (may be NULL). */
enum server_link_outcome server_link_classify(long status, const char *code);

struct server_link_timing {
	int64_t heartbeat_ms; /* 0: SERVER_LINK_HEARTBEAT_MS */
	int64_t retry_min_ms; /* 0: SERVER_LINK_RETRY_MIN_MS */
	int64_t retry_max_ms; /* 0: SERVER_LINK_RETRY_MAX_MS */
	int64_t slow_ms; /* 0: SERVER_LINK_SLOW_MS */
	/* Randomness for the jitter; NULL: an internal generator. */
	uint64_t (*random)(void *ctx);
	void *random_ctx;
};

/* The core's state; fields are read-only outside server_link.c. */
struct server_link_core {
	size_t nservers;
	struct server_link_timing t;
	uint64_t rng;
	size_t cur; /* the server of the next send */
	size_t failed; /* servers unreachable in a row in this round */
	unsigned rounds; /* rounds where every server failed, in a row */
	int64_t due_ms; /* when the next send is due */
	int64_t delay_ms; /* the wait chosen by the last outcome */
	bool sending;
	bool round_done; /* the last outcome ended a round of failures */
	bool joined; /* the last send succeeded */
	uint64_t gen, sent_gen, acked_gen; /* fingerprint generations */
};

/* Sets up a core for nservers (>= 1) servers: the first send is due at now_ms. */
void server_link_core_init(struct server_link_core *c, size_t nservers,
			   const struct server_link_timing *t, int64_t now_ms);
/* The fingerprint changed: sent at once if the link is up, else at the next due send. */
void server_link_core_changed(struct server_link_core *c, int64_t now_ms);
/* When the next send is due (CLOCK_NEVER while one is in flight). */
int64_t server_link_core_next(const struct server_link_core *c);
/*
 * Starts the send due at now_ms, if any: returns true and the index of the
 * server to send to; the caller sends the current fingerprint and reports
 * with server_link_core_end.
 */
bool server_link_core_begin(struct server_link_core *c, int64_t now_ms, size_t *server);
/* Ends the send begun last with its outcome at now_ms, and schedules the next. */
void server_link_core_end(struct server_link_core *c, int64_t now_ms, enum server_link_outcome o);

/* The allocations report of a fingerprint (agent/held_allocs.h); borrowed. */
struct server_link_allocs {
	const struct model_node_alloc *v;
	size_t n;
};

/*
 * The body of PUT /v1/node/<node>: instance_id, the agent's address (NULL:
 * none), every plugin of snap (managed or not yet: one not
 * fingerprinted is sent unhealthy, so the server expects it) and the
 * allocations report (NULL: none, the key is left out). Returns 0
 * and *out (malloc'd, *len bytes, no NUL needed) or CSID_ENOMEM.
 */
int server_link_body(const struct plugin_manager_snapshot *snap, const char *node,
		     const char *instance_id, const char *address,
		     const struct server_link_allocs *allocs, char **out, size_t *len,
		     struct err *e);

/* Longest note of a released allocation kept (longer ones are cut). */
#define SERVER_LINK_NOTE_MAX 400
/* Most released allocations taken from one answer (the rest at the next heartbeat). */
#define SERVER_LINK_RELEASED_MAX 4096

/* One allocation a server answered released. */
struct server_link_released {
	const char *volume_id;
	const char *alloc_id;
	const char *note; /* "" when none */
};

/*
 * The "released" allocations of a server's answer to PUT /v1/node/<node>
 * (text, len bytes, not NUL-terminated): *out (in a) and *n. An answer
 * that is not an object, or has no "released" array, names none; an entry
 * whose volume_id or alloc_id is missing or not a valid mount name
 * (agent/mount_paths.h) is skipped; a note is cut to SERVER_LINK_NOTE_MAX
 * bytes. Returns 0 or CSID_ENOMEM.
 */
int server_link_released_parse(const char *text, size_t len, struct arena *a,
			       struct server_link_released **out, size_t *n, struct err *e);

/* Most volumes to expand taken from one answer (the rest at the next heartbeat). */
#define SERVER_LINK_EXPAND_MAX 4096

/*
 * The "expand" volumes of a server's answer to PUT /v1/node/<node> (text,
 * len bytes): *out (in a) and *n, and *present whether the answer has an
 * "expand" array at all (a server answers one to every report; none
 * means the answer tells nothing of expansions). An entry whose
 * volume_id is not a valid mount name, whose plugin_id is missing, or
 * whose capacity is not a positive integer is skipped. Returns 0 or
 * CSID_ENOMEM.
 */
int server_link_expand_parse(const char *text, size_t len, struct arena *a,
			     struct held_allocs_expand **out, size_t *n, bool *present,
			     struct err *e);

/*
 * The agent's instance ID, kept in <data_dir>/agent-instance-id: read, or
 * made (random) and written there the first time. One agent at a time
 * holds a data_dir, so a restarted agent keeps its ID and another agent
 * never has it. out has SERVER_LINK_INSTANCE_ID_LEN + 1 bytes.
 */
int server_link_instance_id(const char *data_dir, char *out, struct err *e);

struct server_link_config {
	const char *const *servers; /* base URLs; copied */
	size_t nservers;
	const char *token; /* copied, wiped on free; NULL: none */
	const char *node_name; /* copied */
	const char *instance_id; /* copied */
	/* The agent's API for the servers ("http://10.0.0.5:4650"); copied; NULL: none. */
	const char *address;
	struct plugin_manager *pm; /* borrowed; outlives the link */
	/* The allocations reported with the fingerprint; borrowed, outlives the link; NULL: none.
	 */
	struct held_allocs *held;
	struct clock *clock; /* borrowed; NULL: real clock */
	struct server_link_timing timing;
};

struct server_link;

/* Creates a link (not running). Returns 0 and *out, or CSID_EINVAL / CSID_ENOMEM. */
int server_link_new(const struct server_link_config *cfg, struct server_link **out, struct err *e);
/* Starts the link's thread. */
int server_link_start(struct server_link *l, struct err *e);
/* The fingerprint may have changed: rebuilt soon, and sent at once if it did. */
void server_link_notify(struct server_link *l);
/* Asks the thread to stop (sends nothing more; a request in flight is aborted); returns at once. */
void server_link_stop(struct server_link *l);
/* Stops the thread, waits for it and frees l. NULL: no-op. */
void server_link_free(struct server_link *l);

#endif
