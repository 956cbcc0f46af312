/*
 * Leadership: which of the servers sharing one store runs the reconciler,
 * the lost-claim passes and node liveness. Every server serves the API
 * (its writes are compare-and-set, so any server takes them); exactly one
 * leads.
 *
 * Election. Each server holds one lease of the store (TTL ttl_ms), kept
 * alive every ttl/3, and campaigns: it creates the installation's
 * election key with its lease unless the key exists (store.h). The one
 * that created it leads until its lease ends: it stops renewing (killed,
 * paused, cut off from the store), or it steps down. The key's
 * create_index names the term and is the fence: every write of the
 * leader's workers goes through a fenced view of the store
 * (server_leader_store) that refuses to write once the key is gone or
 * another's, so a leader that wakes from a long pause changes nothing; a
 * write refused so makes it step down at once, logged. A server that
 * does not lead campaigns again when the store's watch sees the key go or
 * change (store_election_wait; at once, so a dead leader is replaced
 * within its TTL and the watch's delay), or after a whole TTL without a
 * word; on a store without that watch, every SERVER_LEADER_POLL_MS (at
 * most ttl/3). A server that cannot renew its lease for a whole TTL steps
 * down by itself.
 *
 * Members. Each server also writes its member record with its lease
 * (server_leader_publish), keyed by its ID, which is stable across
 * restarts (server_leader_stored_id): its ID, API address, start time, and the nodes
 * whose heartbeats it took since its last record, each with how long ago
 * (so no clocks need agree), and the claims it found lost by the
 * allocation reports it took (server_gc.c); the leader's also carries
 * the reconciler's statuses. The leader reads every record
 * (server_leader_members) and counts those heartbeats as its own: node
 * liveness costs one write per server per interval, not one per
 * heartbeat. A record goes with its server's lease. server_leader_start
 * refuses to start beside a live server with the same ID (a copied
 * data_dir; server_leader.c says how it tells one from its own killed
 * predecessor).
 *
 * On a store one server holds alone (memory, SQLite; store_shared()
 * false) the server leads from server_leader_new on, no thread runs, and
 * the member list is the server itself.
 *
 * on_change is called on the leader's thread (or in server_leader_new)
 * each time this server starts or stops leading. Thread-safety: every
 * function may be called from any thread.
 */
#ifndef CSID_SERVER_SERVER_LEADER_H
#define CSID_SERVER_SERVER_LEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"
#include "store/store.h"
#include "util/arena.h"
#include "util/clock.h"
#include "util/err.h"

/* Default lease TTL and bounds of the configurable one. */
#define SERVER_LEADER_TTL_MS 10000
#define SERVER_LEADER_TTL_MIN_MS 1000
#define SERVER_LEADER_TTL_MAX_MS 300000
/*
 * How often a server that does not lead campaigns again without a watch on
 * the election key (at most ttl/3), and at most waits on it with one.
 */
#define SERVER_LEADER_POLL_MS 250
#define SERVER_LEADER_ID_MAX 128
/* How often a server that shares its ID with another live one logs it (ms). */
#define SERVER_LEADER_CONFLICT_LOG_MS 60000
/* The store history the leader keeps (server_leader_compact), as kube-apiserver does. */
#define SERVER_LEADER_COMPACT_MS (5 * 60 * 1000)

struct server_leader_config {
	struct store *store; /* borrowed, required */
	const char *id; /* this server's ID; NULL: "<hostname>-<random>" */
	const char *address; /* its API address, for members; NULL: "" */
	int64_t ttl_ms; /* 0: SERVER_LEADER_TTL_MS */
	/* History kept by server_leader_compact; 0: SERVER_LEADER_COMPACT_MS, < 0: none. */
	int64_t compact_ms;
	void (*on_change)(void *arg, bool leading);
	void *arg;
};

/* One node heartbeat a member took: the node and how long before the record was written. */
struct server_member_seen {
	char *node_id;
	int64_t age_ms;
};

/*
 * A claim a member judged lost by the report rule (server_gc.h) on a node
 * whose reports it took: the leader, which has not seen those reports,
 * checks again and releases it (server_gc.c).
 */
struct server_member_lost {
	char *node_id, *volume_id, *alloc_id;
	int64_t prev_report_ms; /* wall: the member received the report before the last one */
};

/*
 * The reconciler's status of one object, as the leader shares it in its
 * member record: the other servers show it (server_status.c).
 */
struct server_member_status {
	enum store_kind kind;
	char *id;
	struct model_status st;
};

/* What a member record carries besides the member itself (all borrowed). */
struct server_member_news {
	const struct server_member_seen *seen; /* heartbeats taken since the last record */
	size_t nseen;
	const struct server_member_lost *lost; /* claims found lost (a follower) */
	size_t nlost;
	const struct server_member_status *status; /* the reconciler's (the leader) */
	size_t nstatus;
};

/* One server of the installation, from its member record (strings in an arena). */
struct server_member {
	char *id;
	char *address;
	int64_t started_ms; /* wall clock */
	bool leader; /* holds the election key now */
	struct server_member_seen *seen;
	size_t nseen;
	struct server_member_lost *lost;
	size_t nlost;
	struct server_member_status *status;
	size_t nstatus;
	uint64_t modify_index; /* of the record: it changes with each new record */
};

/* What GET /v1/status/leader shows. */
struct server_leader_status {
	char server_id[SERVER_LEADER_ID_MAX + 1]; /* this server */
	char leader_id[SERVER_LEADER_ID_MAX + 1]; /* "" while no one leads */
	char leader_address[SERVER_LEADER_ID_MAX + 1];
	int64_t since_ms; /* wall clock the term began (its leader's clock); 0: no leader */
	uint64_t term; /* the election key's create_index; 0: no leader */
	bool leading; /* this server leads */
	int64_t ttl_ms;
	/*
	 * The address of another live process that wrote this server's member
	 * record since this one last did (two servers with one ID, started at
	 * the same moment from copies of one data_dir); "" when none was seen
	 * before this server's last record.
	 */
	char id_conflict[SERVER_LEADER_ID_MAX + 1];
};

struct server_leader;

/*
 * This server's stable ID: the one kept in <data_dir>/server-id, made
 * ("<hostname>-<8 hex digits>") and kept there on the first start. A
 * restarted server keeps its ID, so its member record replaces the one
 * its old self left rather than showing beside it.
 */
int server_leader_stored_id(const char *data_dir, char *out, size_t cap, struct err *e);

/* Returns 0 or CSID_EINVAL / CSID_ENOMEM. A server on an unshared store leads at once. */
int server_leader_new(const struct server_leader_config *cfg, struct server_leader **out,
		      struct err *e);
/*
 * Starts campaigning (a thread; nothing on an unshared store), once no
 * other live server has this server's ID: CSID_EEXIST naming its address
 * when one has (this may wait up to the lease TTL and a half, when a
 * record of the ID is of a process not known dead), or a store error.
 */
int server_leader_start(struct server_leader *l, struct err *e);
/* Stops; a leader revokes its lease so another takes over at once. NULL is a no-op. */
void server_leader_free(struct server_leader *l);

bool server_leader_leading(struct server_leader *l);
/* The fenced view of the store that the leader's workers write through (owned by l). */
struct store *server_leader_store(struct server_leader *l);

/*
 * The leader's compaction of the store's history (store_compact), called
 * by the server's tick while it leads (one thread): every compact_ms it
 * compacts up to the index it noted one period before, so a reader less
 * than a period behind (another server's watch, a blocking query, an
 * event stream) never finds its changes gone, and etcd never fills its
 * space quota with old revisions. A failure is logged and tried again
 * the next period. Returns when it is due next (now_ms on the server's
 * clock); CLOCK_NEVER when off or the store bounds its history itself.
 */
int64_t server_leader_compact(struct server_leader *l, int64_t now_ms);
void server_leader_status(struct server_leader *l, struct server_leader_status *out);

/*
 * Writes this server's member record with news (a no-op on an unshared
 * store). Returns 0 or the store's error.
 */
int server_leader_publish(struct server_leader *l, const struct server_member_news *news,
			  struct err *e);
/* Every member (ID order), in a. */
int server_leader_members(struct server_leader *l, struct arena *a, struct server_member **out,
			  size_t *n, struct err *e);

#endif
