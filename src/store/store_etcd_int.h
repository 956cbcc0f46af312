/*
 * What the files of the etcd store backend share: store_etcd.c (keys,
 * reads, the watch and its change log), store_etcd_txn.c (transactions,
 * the fence, the campaign) and store_etcd_lease.c (leases and the member
 * records of several servers, store.h's coordination calls).
 */
#ifndef CSID_STORE_STORE_ETCD_INT_H
#define CSID_STORE_STORE_ETCD_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "store/etcd_client.h"
#include "store/store_int.h"

struct store_etcd {
	struct store base;
	struct etcd_client *c;
	char *prefix;
	size_t prefix_len;
	size_t request_max;
	int64_t request_ms;
	struct store_notify notify;
	/* The watch and the log, under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cond; /* closing or pause changed */
	pthread_t watcher;
	struct etcd_stream stream;
	bool closing, paused, watching;
	uint64_t next; /* the revision the watch resumes from */
	uint64_t compacted; /* changes up to here may be missing */
	uint64_t compact_to; /* set by the stream callback: etcd compacted to here */
	struct store_change *log;
	size_t log_cap, log_head, log_n;
	struct store_cache *cache; /* what the watch delivered and reads fetched, under mu */
	uint64_t election_gen; /* events of the election key the watch saw, under mu (cond) */
	/* Transactions on their way (store_etcd_txn.c), under bmu. */
	pthread_mutex_t bmu;
	struct etcd_pending *queue, **queue_tail; /* waiting for a sender, oldest first */
	unsigned inflight; /* Txns sent and not yet answered */
	bool held; /* store_etcd_hold_txns */
	uint64_t queued, calls; /* transactions queued, Txns sent: store_etcd_txn_stats */
};

/*
 * Txns one store has in flight at once; the transactions that come
 * meanwhile go together in the next. bench_server etcd (8 clients, 3
 * runs each, load 11-26): 1 gave 0.64 Txns and 530 us of etcd CPU per
 * cycle, 2 gave 1.3 and 760 us, 4 gave 1.9 and 770 us.
 */
#define ETCD_TXN_INFLIGHT 1

/* The key of kind/id (id_len bytes) into a new buffer; *len its length. NULL when out of memory. */
char *etcd_key(struct store_etcd *s, enum store_kind kind, const char *id, size_t id_len,
	       size_t *len);
/* The first key after every key starting with k[0..len): k with its last byte raised. */
void etcd_prefix_end(char *k, size_t *len);
/* The key of the election, "<prefix>leader", into a new buffer; NULL when out of memory. */
char *etcd_election_key(struct store_etcd *s, size_t *len);
/* len bytes at p as a protobuf bytes field (borrowed, not copied). */
ProtobufCBinaryData etcd_bytes(const char *p, size_t len);
/* An etcd revision (int64 on the wire) as a store index; 0 for none or a negative one. */
static inline uint64_t etcd_rev(int64_t v)
{
	return v > 0 ? (uint64_t)v : 0;
}
/* The first key of a range answer; NULL when none (or no answer). */
const Mvccpb__KeyValue *etcd_first_kv(const Etcdserverpb__RangeResponse *r);
/*
 * A serializable read of [k, end) (end NULL: k alone), at most limit keys
 * (0: all); *out the answer (freed with protobuf_c_message_free_unpacked).
 */
int etcd_read(struct store_etcd *s, const char *k, size_t klen, const char *end, size_t elen,
	      size_t limit, Etcdserverpb__RangeResponse **out, struct err *e);

/*
 * Forgets the objects of ops in the cache: their next get reads etcd, and
 * changes up to rev the watch still brings do not put an older state back.
 */
void store_cache_forget(struct store_etcd *s, const struct store_op *ops, size_t n, uint64_t rev);
/*
 * Reads the answer to the Txn of ops, whose request wrote revision hdr
 * (the answer's header's; a nested Txn's answer has none): 0 and the
 * revision it wrote in *rev (0 when it changed nothing), CSID_ECONFLICT naming the failed
 * condition, or CSID_EPROTO for a write without a revision.
 */
int etcd_txn_outcome(const struct store_op *ops, size_t n, const Etcdserverpb__TxnResponse *resp,
		     uint64_t hdr, uint64_t *rev, struct err *e);

/* store_ops of store_etcd_txn.c and store_etcd_lease.c (store.h says what each does). */
int etcd_txn(struct store *st, const struct store_op *ops, size_t n, uint64_t *index,
	     struct err *e);
int etcd_txn_fenced(struct store *st, uint64_t fence, const struct store_op *ops, size_t n,
		    uint64_t *index, struct err *e);
int etcd_campaign(struct store *st, uint64_t lease, const char *value, size_t len,
		  struct store_obj *holder, struct err *e);
int etcd_lease_grant(struct store *st, int64_t ttl_ms, uint64_t *lease, struct err *e);
int etcd_lease_keepalive(struct store *st, uint64_t lease, struct err *e);
int etcd_lease_revoke(struct store *st, uint64_t lease, struct err *e);
int etcd_member_put(struct store *st, uint64_t lease, const char *id, const char *value, size_t len,
		    struct err *e);
int etcd_member_list(struct store *st, struct store_list *out, struct err *e);
int etcd_foreign_keys(struct store *st, uint64_t *n, struct err *e);
int etcd_election_wait(struct store *st, uint64_t *seen, int64_t timeout_ms);
/* The watch saw an event of key[0..len) that is no object: counts it when it is the election's (mu
 * held). */
void etcd_election_event(struct store_etcd *s, const char *key, size_t len);

#endif
