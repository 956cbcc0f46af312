/*
 * What the two files of the etcd store backend share: store_etcd.c (keys,
 * reads, transactions, the watch and its change log) and
 * store_etcd_lease.c (leases, the election and the member records of
 * several servers, store.h's coordination calls).
 */
#ifndef CSID_STORE_STORE_ETCD_INT_H
#define CSID_STORE_STORE_ETCD_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

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
	struct etcd_cache *cache; /* what the watch delivered and reads fetched, under mu */
	uint64_t election_gen; /* events of the election key the watch saw, under mu (cond) */
};

/* The first key after every key starting with k[0..len): k with its last byte raised. */
void etcd_prefix_end(char *k, size_t *len);
/* Sets a base64 (a decimal string) field of obj; false when out of memory. */
bool etcd_set_b64(json_t *obj, const char *field, const char *data, size_t len);
bool etcd_set_u64(json_t *obj, const char *field, uint64_t v);
/* A request document with a base64 "key" (and "range_end" when end); NULL when out of memory. */
json_t *etcd_range_req(const char *k, size_t klen, const char *end, size_t elen);
/* The same, a serializable read (store_etcd.c's opening comment says why). */
json_t *etcd_read_req(const char *k, size_t klen, const char *end, size_t elen);
/* The key of the election, "<prefix>leader", into a new buffer; NULL when out of memory. */
char *etcd_election_key(struct store_etcd *s, size_t *len);

/* store_ops of store_etcd_lease.c (store.h says what each does). */
int etcd_lease_grant(struct store *st, int64_t ttl_ms, uint64_t *lease, struct err *e);
int etcd_lease_keepalive(struct store *st, uint64_t lease, struct err *e);
int etcd_lease_revoke(struct store *st, uint64_t lease, struct err *e);
int etcd_campaign(struct store *st, uint64_t lease, const char *value, size_t len,
		  struct store_obj *holder, struct err *e);
int etcd_member_put(struct store *st, uint64_t lease, const char *id, const char *value, size_t len,
		    struct err *e);
int etcd_member_list(struct store *st, struct store_list *out, struct err *e);
int etcd_foreign_keys(struct store *st, uint64_t *n, struct err *e);
int etcd_election_wait(struct store *st, uint64_t *seen, int64_t timeout_ms);
/* The watch saw an event of key[0..len) that is no object: counts it when it is the election's (mu
 * held). */
void etcd_election_event(struct store_etcd *s, const char *key, size_t len);

#endif
