/*
 * State store: the one seam between the control plane and its durable
 * state. The store keeps objects, each named by a kind and an ID, whose
 * value is an opaque byte string (the model's JSON encoding; the store
 * never looks inside). It knows nothing of volumes or claims and has no
 * SQL above it: a backend is a struct store_ops.
 *
 * Index. Every committed write transaction gets the next value of one
 * store-wide, monotonically increasing index (1, 2, 3, ...). Each object
 * carries the index that created it and the index of its last change
 * (modify_index). This is etcd's revision model on purpose: an etcd
 * backend maps the index to the revision, conditions to Compare on
 * mod_revision, and the change log to a watch from a revision. Callers
 * rely on the order only: etcd's revisions also count writes outside the
 * store's prefix, so its indexes may skip values; and the etcd backend
 * sends concurrent transactions that touch disjoint objects together, in
 * one revision, so they may share an index (a transaction that returned
 * before another began always has a smaller one).
 *
 * Transactions. store_txn() applies a list of puts and deletes atomically,
 * and only when every condition holds: a condition on an op asks that its
 * object currently has a given modify_index (0: does not exist). If one
 * fails nothing is written and the call returns CSID_ECONFLICT, naming the
 * object. Callers build compare-and-set on it: read, decide, write on the
 * index they read, re-read and retry on conflict.
 *
 * Changes. Every put and delete is recorded, in index order, in a change
 * log that readers page through from an index (store_changes, or
 * store_change_keys without the values) and wait on (store_wait).
 * Blocking queries, the event stream and the reconciler all follow it,
 * so none of them misses a change. The log keeps at least the last
 * STORE_CHANGES_KEEP changes; asking for older ones gives CSID_ERANGE
 * ("compacted"), and the reader resynchronises with a list. The log is
 * not durable: a backend may start it afresh when the store is opened
 * (SQLite and etcd do), so after a restart changes from before the open
 * give CSID_ERANGE too. The index itself is durable: it goes on from
 * where it was and never repeats.
 *
 * Durability. A write acknowledged by store_txn survives a kill -9 of the
 * process (SQLite: WAL, synchronous=NORMAL; etcd: a quorum commit).
 *
 * Thread-safety: every function may be called from any thread; writes are
 * serialised by the backend; store_wait blocks only its caller.
 */
#ifndef CSID_STORE_STORE_H
#define CSID_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/err.h"

/* Longest object ID (bytes, without NUL). IDs are checked by the model. */
#define STORE_ID_MAX 1024
/* Largest object value (bytes). */
#define STORE_VALUE_MAX (4 * 1024 * 1024)
/* Fewest changes a backend keeps in its log. */
#define STORE_CHANGES_KEEP 10000
/* Most ops in one transaction (etcd's default --max-txn-ops). */
#define STORE_TXN_OPS_MAX 128

/*
 * STORE_CLAIM: the server's index of active claims by node (one small
 * object per claimed claim, "<node>/<volume>/<alloc>"), written in the
 * same transactions as the volumes whose claims they mirror.
 * STORE_CLAIM_HISTORY: each volume's freed claims (one object per volume,
 * keyed by its ID), written in the same transactions as the volume.
 * STORE_INSTALLATION: one object, the installation record
 * (src/server/server_install.h), written by the first server to start.
 */
enum store_kind {
	STORE_VOLUME,
	STORE_NODE,
	STORE_SNAPSHOT,
	STORE_CLAIM,
	STORE_CLAIM_HISTORY,
	STORE_INSTALLATION,
	STORE_KIND_COUNT_
};

/*
 * "volume", "node", "snapshot", "claim", "claim-history", "installation";
 * NULL outside the enum.
 */
const char *store_kind_name(enum store_kind k);

/* One stored object. id and value are owned by whoever filled it. */
struct store_obj {
	enum store_kind kind;
	char *id;
	char *value; /* NUL-terminated for convenience; len excludes the NUL */
	size_t len;
	uint64_t create_index;
	uint64_t modify_index;
};

enum store_op_type { STORE_OP_PUT, STORE_OP_DELETE };

/* Do not check the object's modify_index (see struct store_op). */
#define STORE_ANY UINT64_MAX

/* One write of a transaction. Every pointer is borrowed for the call. */
struct store_op {
	enum store_op_type type;
	enum store_kind kind;
	const char *id;
	const char *value; /* PUT only */
	size_t len;
	/*
	 * Condition: STORE_ANY (none), 0 (the object must not exist), or the
	 * modify_index the object must have now. A DELETE of a missing object
	 * without condition succeeds and records nothing.
	 */
	uint64_t expect_index;
};

/*
 * One recorded change: the object as written (PUT) or its ID (DELETE; the
 * object's create_index, modify_index the index of the delete).
 */
struct store_change {
	uint64_t index;
	enum store_op_type type;
	struct store_obj obj; /* value NULL and len 0 for a DELETE */
};

/* Arrays returned by list and changes; free with the matching _free. */
struct store_list {
	struct store_obj *objs;
	size_t n;
	bool more; /* objects remain after the last one (next page) */
	uint64_t index; /* the store's index when the list was read */
};

struct store_changes {
	struct store_change *changes;
	size_t n;
	uint64_t index; /* the store's index when the log was read */
};

struct store;

struct store_ops {
	int (*get)(struct store *s, enum store_kind kind, const char *id, struct store_obj *out,
		   struct err *e);
	int (*list)(struct store *s, enum store_kind kind, const char *prefix, const char *after_id,
		    size_t limit, struct store_list *out, struct err *e);
	int (*txn)(struct store *s, const struct store_op *ops, size_t n, uint64_t *index,
		   struct err *e);
	/* values false: store_change_keys (every obj.value NULL, len 0). */
	int (*changes)(struct store *s, uint64_t after, size_t limit, bool values,
		       struct store_changes *out, struct err *e);
	uint64_t (*index)(struct store *s);
	uint64_t (*wait)(struct store *s, uint64_t after, int64_t timeout_ms);
	void (*close)(struct store *s);
	/*
	 * Coordination of several servers (see "Leases" below); NULL in a
	 * backend that one process holds alone (memory, SQLite).
	 */
	int (*txn_fenced)(struct store *s, uint64_t fence, const struct store_op *ops, size_t n,
			  uint64_t *index, struct err *e);
	int (*lease_grant)(struct store *s, int64_t ttl_ms, uint64_t *lease, struct err *e);
	int (*lease_keepalive)(struct store *s, uint64_t lease, struct err *e);
	int (*lease_revoke)(struct store *s, uint64_t lease, struct err *e);
	int (*campaign)(struct store *s, uint64_t lease, const char *value, size_t len,
			struct store_obj *holder, struct err *e);
	int (*member_put)(struct store *s, uint64_t lease, const char *id, const char *value,
			  size_t len, struct err *e);
	int (*member_list)(struct store *s, struct store_list *out, struct err *e);
	/* NULL: the backend's namespace holds nothing but its own keys. */
	int (*foreign_keys)(struct store *s, uint64_t *n, struct err *e);
	/* NULL: no watch on the election key (store_election_wait). */
	int (*election_wait)(struct store *s, uint64_t *seen, int64_t timeout_ms);
	/* NULL: the backend bounds its history itself (store_compact). */
	int (*compact)(struct store *s, uint64_t index, struct err *e);
};

/* A backend embeds this as its first member. */
struct store {
	const struct store_ops *ops;
	const char *backend; /* "sqlite", "memory", "etcd": for messages */
};

/*
 * Reads one object into *out (free with store_obj_free). Returns 0,
 * CSID_ENOTFOUND, or another code with e set.
 */
int store_get(struct store *s, enum store_kind kind, const char *id, struct store_obj *out,
	      struct err *e);

/*
 * Lists objects of kind in ID order (bytewise): those whose ID starts with
 * prefix (NULL or "": all) and sorts after after_id (NULL or "": from the
 * start), at most limit of them (0: no limit). out->more says whether
 * another page follows. Free with store_list_free.
 */
int store_list(struct store *s, enum store_kind kind, const char *prefix, const char *after_id,
	       size_t limit, struct store_list *out, struct err *e);

/*
 * Applies ops[0..n) atomically when every condition holds. Returns 0 and
 * the new index in *index (may be NULL; a transaction that changes
 * nothing returns the current index and records nothing), CSID_ECONFLICT
 * when a condition fails (e names the kind and ID), CSID_EINVAL for a bad
 * op (empty ID, ID over STORE_ID_MAX, value over STORE_VALUE_MAX, the same
 * object twice, more than STORE_TXN_OPS_MAX ops), or an I/O code. Values
 * are copied. Every change of one transaction carries its index.
 */
int store_txn(struct store *s, const struct store_op *ops, size_t n, uint64_t *index,
	      struct err *e);

/*
 * The changes with index > after, oldest first, at most limit (0: no
 * limit), except that a page never ends inside a transaction: it holds
 * every change of its last index (so it may exceed limit), and the next
 * page starts after that index. Returns 0, or CSID_ERANGE when changes
 * after `after` were compacted away (resynchronise with store_list). Free
 * with store_changes_free.
 */
int store_changes(struct store *s, uint64_t after, size_t limit, struct store_changes *out,
		  struct err *e);

/*
 * store_changes without the values: each change's kind, ID, type and
 * indexes, obj.value NULL and obj.len 0 (a put too), for a reader that
 * only needs to know what changed (no value is copied).
 */
int store_change_keys(struct store *s, uint64_t after, size_t limit, struct store_changes *out,
		      struct err *e);

/* The index of the last committed transaction (0 for an empty store). */
uint64_t store_index(struct store *s);

/*
 * Blocks until the index is greater than after or timeout_ms passed
 * (real time; 0 or negative: does not wait), and returns the index. It
 * also returns, early, when the store is being closed.
 */
uint64_t store_wait(struct store *s, uint64_t after, int64_t timeout_ms);

/* Closes the store and frees it; NULL is a no-op. Waiters return. */
void store_close(struct store *s);

/*
 * Leases, the election and members: what lets several servers share one
 * store (etcd) with one leader (src/server/server_leader.c). A lease is a
 * store-side timer that the holder keeps alive; keys written with it go
 * when it expires. The election key (one per installation, beside its
 * objects but not one of them: it is in no list, change log or
 * snapshot) names the leader; it is created with the leader's lease, so
 * it goes when the leader stops renewing, and its create_index
 * identifies one term. Member records (one per server, also with its
 * lease) say which servers are up and carry what each saw of the nodes.
 * A backend one process holds alone (memory, SQLite) has none of this:
 * store_shared() is false, its single server always leads, and a fenced
 * transaction is a plain one.
 */
bool store_shared(struct store *s);

/*
 * store_txn, and only while the election key's create_index is still
 * fence (this server's term): a leader that lost its lease and slept
 * through another's election writes nothing. Returns what store_txn
 * does, or CSID_EPRECOND ("fenced: ...") when the key is gone or another
 * server's, whatever the other conditions say.
 */
int store_txn_fenced(struct store *s, uint64_t fence, const struct store_op *ops, size_t n,
		     uint64_t *index, struct err *e);

/* A new lease of ttl_ms (rounded up to whole seconds) in *lease. */
int store_lease_grant(struct store *s, int64_t ttl_ms, uint64_t *lease, struct err *e);
/* Renews the lease for its TTL; CSID_ENOTFOUND when it has expired. */
int store_lease_keepalive(struct store *s, uint64_t lease, struct err *e);
/* Ends the lease now (its keys go); an expired one is no error. */
int store_lease_revoke(struct store *s, uint64_t lease, struct err *e);
/*
 * Creates the election key with value and lease unless it exists, and
 * reads it in the same transaction: *holder (free with store_obj_free;
 * id "leader", kind unused) is the key as it now is, ours when its value
 * and create_index say so (create_index is the fence of the term).
 */
int store_campaign(struct store *s, uint64_t lease, const char *value, size_t len,
		   struct store_obj *holder, struct err *e);
/*
 * Waits until the election key was written or deleted since *seen (a
 * generation the call updates; start from 0), at most timeout_ms (real
 * time), so a server that does not lead campaigns when the key goes
 * rather than on a timer. Returns 1 when it changed, 0 at the timeout or
 * when the store closes, CSID_EUNIMPL when the backend has no watch on
 * the key (the caller polls). A change the backend's watch could not
 * follow (it was compacted past) counts as a change.
 */
int store_election_wait(struct store *s, uint64_t *seen, int64_t timeout_ms);
/* Writes the member record id (an existing one is replaced) with lease. */
int store_member_put(struct store *s, uint64_t lease, const char *id, const char *value, size_t len,
		     struct err *e);
/* Every member record, ID order (kind unused). Free with store_list_free. */
int store_member_list(struct store *s, struct store_list *out, struct err *e);

/*
 * Counts the keys in the store's namespace (an etcd prefix) that are none
 * of its own (objects, the election key, member records) into *n, in one
 * read. 0 on a backend whose namespace holds nothing else (memory; SQLite
 * refuses a file that is not a csid store when it opens it). A server
 * refuses to make its installation in a namespace that holds others' keys.
 */
int store_foreign_keys(struct store *s, uint64_t *n, struct err *e);

/*
 * Drops the history before index, the changes a reader resumes from: a
 * reader behind it gets CSID_ERANGE and lists again (as after any
 * compaction). On etcd this is etcd's compaction, which covers the whole
 * keyspace, not only this store's prefix; without it etcd keeps every
 * revision until its space quota is full and then refuses every write.
 * The leader compacts periodically (server_leader_compact). Returns 0,
 * also when the history is gone up to there already; CSID_EUNIMPL on a
 * backend that bounds its history itself (memory, SQLite); CSID_ERANGE
 * for an index the store has not reached.
 */
int store_compact(struct store *s, uint64_t index, struct err *e);

/*
 * A fence shared by a store view and the election: index is the fence of
 * the term this server leads (0: it does not lead); lost, when set, is
 * called (from the writing thread) when a fenced transaction found the
 * term over.
 */
struct store_fence {
	_Atomic uint64_t index;
	void (*lost)(void *arg);
	void *arg;
};

/*
 * A view of base (borrowed, must outlive it) whose reads are base's and
 * whose every transaction is store_txn_fenced on f->index (borrowed);
 * while f->index is 0 every transaction is refused with CSID_EPRECOND.
 * store_close frees the view only.
 */
int store_fenced_new(struct store *base, struct store_fence *f, struct store **out, struct err *e);

void store_obj_free(struct store_obj *o);
void store_list_free(struct store_list *l);
void store_changes_free(struct store_changes *c);

/* An empty in-memory store (tests, benchmarks, `csid dev -store memory`). */
int store_mem_new(struct store **out, struct err *e);

/*
 * Fault injection for tests: the next count write transactions on s (a
 * memory store) fail with code (e.g. CSID_EIO) and write nothing; count 0
 * stops it. Transactions refused for a bad argument do not count.
 */
void store_mem_fail_txn(struct store *s, int code, unsigned count);

/*
 * Opens (creating it when missing) the SQLite store at path. The schema is
 * versioned and migrated forward in one transaction; a file whose schema
 * is newer than this program knows, or that is not a csid store, or that
 * is corrupt, is refused with CSID_EPRECOND / CSID_EIO and left untouched.
 * The store is this process's alone while open: another process (or a
 * second open in this one) gets CSID_EUNAVAIL ("locked").
 */
int store_sqlite_open(const char *path, struct store **out, struct err *e);

/*
 * The SQLite transactions that wrote something, so far: a batch of the
 * group commit (src/store/store_sqlite.c) counts once, however many
 * store_txn calls it carried (benchmarks compare it with the index).
 */
uint64_t store_sqlite_commits(struct store *s);
/* The pages (WAL frames) those transactions wrote, so far. */
uint64_t store_sqlite_pages(struct store *s);
/*
 * The reads of one object that ran a statement, so far (gets, and a
 * transaction's look at what it changes): the rest came from the read
 * cache.
 */
uint64_t store_sqlite_reads(struct store *s);

/*
 * For tests: while hold is true, store_txn calls on s (a SQLite store)
 * queue instead of committing; false lets them go, as one batch. Returns
 * how many are queued and not yet taken by a batch.
 */
size_t store_sqlite_hold(struct store *s, bool hold);

/* Where and how the etcd backend reaches etcd (every pointer borrowed). */
struct store_etcd_config {
	const char *const *endpoints; /* "http://host:port" or "https://host:port" */
	size_t nendpoints;
	const char *prefix; /* of every key; NULL or "": "/csid/" */
	const char *ca_file, *cert_file, *key_file; /* TLS; NULL: none */
	int64_t dial_timeout_ms; /* 0: 2 s */
	int64_t request_timeout_ms; /* 0: 10 s */
	size_t max_request_bytes; /* etcd's --max-request-bytes; 0: its default 1.5 MiB */
};

/*
 * Opens the etcd store (src/store/store_etcd.c says how objects, indexes
 * and the change log map onto etcd). Returns 0, or CSID_EUNAVAIL /
 * CSID_ETIMEDOUT naming the endpoint when etcd does not answer, or
 * CSID_EINVAL for a bad config. The store's index starts at etcd's
 * revision: changes from before the open give CSID_ERANGE. Any number of
 * processes may open the same prefix; each sees the others' writes.
 */
int store_etcd_open(const struct store_etcd_config *cfg, struct store **out, struct err *e);

/*
 * For tests: pause stops the etcd store's watch (no change reaches the log
 * and writes wait for it until their timeout) until called again with
 * false; the watch then resumes from the last revision it saw.
 */
void store_etcd_pause_watch(struct store *s, bool pause);

/*
 * For tests: hold keeps every transaction of the etcd store queued (none
 * is sent) until called again with false; the queued ones then go
 * together, as many per etcd Txn as its limits allow (store_etcd_txn.c).
 */
void store_etcd_hold_txns(struct store *s, bool hold);
/* How many transactions the etcd store took (*txns) and in how many etcd Txns it sent them. */
void store_etcd_txn_stats(struct store *s, uint64_t *txns, uint64_t *calls);

/*
 * For the fuzz target (test/fuzz/fuzz_etcd_answer.c): decodes data as the
 * etcd store on prefix decodes etcd's answers, with no etcd behind it: as
 * a list page (RangeResponse), a transaction's outcome (TxnResponse) and
 * a watch message (WatchResponse) into the change log and the read cache.
 * Returns 0, or CSID_EINTERNAL when the cache and the log disagree (a
 * bug); bytes that do not decode are not an error here.
 */
int store_etcd_decode(const char *prefix, const uint8_t *data, size_t len, struct err *e);

#endif
