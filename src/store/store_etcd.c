/*
 * The etcd store backend. Each object is one etcd key, <prefix><kind>/<id>
 * (prefix "/csid/" by default, so installations can share a cluster), its
 * value the object's bytes. The store index is etcd's revision: an
 * object's create_index and modify_index are its key's create_revision
 * and mod_revision, a condition is a Compare on mod_revision (0: the key
 * does not exist), and a transaction is one etcd Txn, or one nested Txn
 * of a Txn that carries concurrent ones together, whose revision is the
 * index it returns (store_etcd_txn.c). Leases and member records are in
 * store_etcd_lease.c.
 *
 * Change log. One thread keeps a watch on the prefix, resumed after the
 * last revision it saw whenever the stream breaks, and appends every
 * event to an in-memory log (at least STORE_CHANGES_KEEP changes, trimmed
 * at revision boundaries); store_changes pages through it and store_wait
 * waits on the revision it reached. The log starts at the revision the
 * store was opened at: older changes (a reader resuming from another
 * process's index) give CSID_ERANGE and the reader resynchronises with a
 * list, as after a trim. When etcd has compacted past the revision the
 * watch resumes from (it cancels the watch with compact_revision), the
 * changes in between are gone: the log is emptied, starts again at the
 * compacted revision, and readers behind it get CSID_ERANGE. A write
 * returns once the watch has delivered its revision, so the index it
 * returns is already in store_index and in the log (read your writes).
 * Revisions of keys outside the prefix never appear: the index moves only
 * with this installation's writes (etcd's revisions are not dense).
 *
 * Reads. Gets and lists are serializable: the member we talk to answers
 * from what it has applied, without a round through raft (a linearizable
 * read has the leader confirm it still leads and waits for the commits in
 * flight). It loses nothing the store promises: the member applied every
 * write it acknowledged to us and every revision our watch delivered
 * before it sent them, so a read sees our own writes and at least
 * store_index(); another server's newer write it may not see yet only
 * makes our compare-and-set fail and the caller read again.
 *
 * Gets are answered from a cache (store_cache.h) while the watch runs:
 * every change the watch delivers updates it before its revision is
 * published, so a get sees our own writes and at least store_index(),
 * the same promise as a serializable read, without a round trip. A miss
 * reads etcd and keeps the answer when it is at least as new as the
 * watch. A failed compare forgets its objects, so the caller's next read
 * goes to etcd and sees what won; a compaction under the watch empties
 * the cache, and while the watch is down every get reads etcd.
 *
 * Errors. A transaction that fails in transport before anything was
 * sent (no connection) wrote nothing; one that times out after it was sent
 * (CSID_ETIMEDOUT) or loses its connection may still commit when etcd
 * gets to it: the caller reads again before deciding, as after a conflict.
 *
 * Limits. etcd refuses a request over --max-request-bytes (1.5 MiB by
 * default) and a Txn of more than --max-txn-ops (128) compares or ops.
 * STORE_TXN_OPS_MAX is 128 and a transaction is one Txn (its compares,
 * its writes, and on failure one read per compare), so the op count fits;
 * transactions sent together stay within both limits (store_etcd_txn.c).
 *
 * Why etcd's native gRPC API rather than its JSON gateway. The store
 * first spoke the gateway (HTTP/1.1 and JSON through libcurl). Measured
 * on this machine (2 cores, shared) against a one-member etcd 3.4 on
 * loopback with its data on tmpfs, etcd's own CPU was the larger price:
 * about 0.4 ms per Range or Put and 0.6 ms per Txn through the gateway
 * (JSON to protobuf and back, and a second gRPC hop inside etcd), plus
 * 0.2 ms per event for a gateway watch; a claim + release cycle (3-4
 * Txns) cost etcd 1.8 ms of CPU and the server about 1 ms, which capped
 * the machine near 450 cycles/s. Over gRPC etcd decodes protobuf once
 * and answers on the same HTTP/2 connection, and our side packs with
 * protobuf-c instead of JSON and base64; the figures of bench/server.c
 * (README) say what it gives per claim.
 */
#include "store/store_etcd_int.h"

#include <stdlib.h>
#include <string.h>

#include "store/store_cache.h"
#include "store/etcd_client.h"
#include "util/clock.h"
#include "util/log.h"

#define ETCD_PREFIX_DEFAULT "/csid/"
#define ETCD_PREFIX_MAX 256
#define ETCD_TRIM_BATCH 1024
#define ETCD_BACKOFF_MIN_MS 50
#define ETCD_BACKOFF_MAX_MS 2000

/* The key of kind/id (id_len bytes) into a new buffer; *len its length. */
char *etcd_key(struct store_etcd *s, enum store_kind kind, const char *id, size_t id_len,
	       size_t *len)
{
	const char *kn = store_kind_name(kind);
	size_t kl = strlen(kn);
	char *k = malloc(s->prefix_len + kl + 1 + id_len + 1);

	if (k == NULL)
		return NULL;
	memcpy(k, s->prefix, s->prefix_len);
	memcpy(k + s->prefix_len, kn, kl);
	k[s->prefix_len + kl] = '/';
	memcpy(k + s->prefix_len + kl + 1, id, id_len);
	*len = s->prefix_len + kl + 1 + id_len;
	k[*len] = '\0';
	return k;
}

/* The first key after every key starting with k[0..len): k with its last byte raised. */
void etcd_prefix_end(char *k, size_t *len)
{
	while (*len > 0 && (unsigned char)k[*len - 1] == 0xff)
		(*len)--;
	if (*len > 0)
		k[*len - 1] = (char)((unsigned char)k[*len - 1] + 1);
}

/* Splits a key of this store into kind and ID; false for any other key. */
static bool etcd_parse_key(struct store_etcd *s, const char *k, size_t len, enum store_kind *kind,
			   const char **id, size_t *id_len)
{
	if (len <= s->prefix_len || memcmp(k, s->prefix, s->prefix_len) != 0)
		return false;
	for (int i = 0; i < STORE_KIND_COUNT_; i++) {
		const char *kn = store_kind_name((enum store_kind)i);
		size_t kl = strlen(kn);

		if (len > s->prefix_len + kl + 1 && memcmp(k + s->prefix_len, kn, kl) == 0 &&
		    k[s->prefix_len + kl] == '/') {
			*kind = (enum store_kind)i;
			*id = k + s->prefix_len + kl + 1;
			*id_len = len - s->prefix_len - kl - 1;
			/* Our IDs are C strings: a key with a NUL byte is someone else's. */
			return memchr(*id, '\0', *id_len) == NULL;
		}
	}
	return false;
}

/*
 * Reads one kv of an answer into *o. Returns 0, 1 for a key under the
 * prefix that names no object, or CSID_ENOMEM.
 */
static int etcd_kv_obj(struct store_etcd *s, const Mvccpb__KeyValue *kv, struct store_obj *o,
		       struct err *e)
{
	const char *id;
	size_t id_len;
	enum store_kind kind;

	if (kv == NULL ||
	    !etcd_parse_key(s, (const char *)kv->key.data, kv->key.len, &kind, &id, &id_len))
		return 1; /* a stray key under the prefix, no object of ours */
	return store_obj_set(o, kind, id, id_len,
			     kv->value.data ? (const char *)kv->value.data : "", kv->value.len,
			     etcd_rev(kv->create_revision), etcd_rev(kv->mod_revision), e);
}

int etcd_read(struct store_etcd *s, const char *k, size_t klen, const char *end, size_t elen,
	      size_t limit, Etcdserverpb__RangeResponse **out, struct err *e)
{
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;

	req.key = etcd_bytes(k, klen);
	if (end)
		req.range_end = etcd_bytes(end, elen);
	req.limit = (int64_t)limit;
	req.serializable = true;
	return etcd_client_call(s->c, ETCD_RANGE, &req.base, (ProtobufCMessage **)out, e);
}

static bool store_cache_live(struct store_etcd *s)
{
	return s->watching && !s->paused && !s->closing;
}

/*
 * A get is answered from the cache while the watch runs; a miss reads
 * etcd, and the answer enters the cache when it is at least as new as
 * what the watch applied (the watch then brings every later change), or
 * when the cache has forgotten nothing the watch applied to that key
 * since the read's revision (store_cache_fillable): a key the watch
 * never touched, read while other writes keep the watch ahead, is
 * cached at its first read instead of read from etcd every time.
 */
static int etcd_get(struct store *st, enum store_kind kind, const char *id, struct store_obj *out,
		    struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	Etcdserverpb__RangeResponse *resp = NULL;
	size_t klen;
	char *k;
	uint64_t rev;
	int rc;

	pthread_mutex_lock(&s->mu);
	rc = store_cache_live(s) ? store_cache_get(s->cache, kind, id, out, e) : 1;
	pthread_mutex_unlock(&s->mu);
	if (rc != 1)
		return rc;
	k = etcd_key(s, kind, id, strlen(id), &klen);
	if (k == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	rc = etcd_read(s, k, klen, NULL, 0, 0, &resp, e);
	free(k);
	if (rc)
		return err_wrap(e, "get %s %s", store_kind_name(kind), id);
	rev = resp->header ? etcd_rev(resp->header->revision) : 0;
	if (resp->n_kvs == 0)
		rc = err_set(e, CSID_ENOTFOUND, "%s %s: not found", store_kind_name(kind), id);
	else if ((rc = etcd_kv_obj(s, resp->kvs[0], out, e)) == 1)
		rc = err_set(e, CSID_EINTERNAL, "%s %s: not an object key", store_kind_name(kind),
			     id);
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	pthread_mutex_lock(&s->mu);
	if ((rc == 0 || rc == CSID_ENOTFOUND) &&
	    (rev + 1 >= s->next || store_cache_fillable(s->cache, kind, id, rev)))
		store_cache_fill(s->cache, kind, id, rc == 0 ? out : NULL, rev);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* Reads a range answer into *out (a list page; out->index its revision). */
static int etcd_list_decode(struct store_etcd *s, const Etcdserverpb__RangeResponse *resp,
			    struct store_list *out, struct err *e)
{
	out->objs = calloc(resp->n_kvs + 1, sizeof(*out->objs));
	if (out->objs == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	for (size_t i = 0; i < resp->n_kvs; i++) {
		int rc = etcd_kv_obj(s, resp->kvs[i], &out->objs[out->n], e);

		if (rc < 0)
			return rc;
		out->n += rc == 0;
	}
	out->more = resp->more;
	out->index = resp->header ? etcd_rev(resp->header->revision) : 0;
	return 0;
}

static int etcd_list(struct store *st, enum store_kind kind, const char *prefix,
		     const char *after_id, size_t limit, struct store_list *out, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	size_t plen = strlen(prefix), alen = strlen(after_id), slen, elen;
	/* IDs are never empty: a bare "<kind>/" key (no object) sorts before "<kind>/\0". */
	char *start =
	    plen ? etcd_key(s, kind, prefix, plen, &slen) : etcd_key(s, kind, "", 1, &slen);
	char *end = etcd_key(s, kind, prefix, plen, &elen);
	Etcdserverpb__RangeResponse *resp = NULL;
	int rc = 0, cmp;

	if (start && end && alen > 0 && strcmp(after_id, prefix) >= 0) {
		/* Start just after after_id: after_id followed by a NUL byte. */
		free(start);
		start = etcd_key(s, kind, after_id, alen + 1, &slen);
	}
	if (start == NULL || end == NULL) {
		rc = err_set(e, CSID_ENOMEM, "etcd: out of memory");
		goto out;
	}
	etcd_prefix_end(end, &elen);
	out->index = store_notify_index(&s->notify);
	cmp = memcmp(start, end, slen < elen ? slen : elen);
	if (cmp > 0 || (cmp == 0 && slen >= elen))
		goto out; /* after_id is past every ID with prefix */
	rc = etcd_read(s, start, slen, end, elen, limit, &resp, e);
	if (rc) {
		err_wrap(e, "list %s", store_kind_name(kind));
		goto out;
	}
	rc = etcd_list_decode(s, resp, out, e);
out:
	if (rc)
		store_list_free(out);
	if (resp)
		protobuf_c_message_free_unpacked(&resp->base, NULL);
	free(start);
	free(end);
	return rc;
}

/* The key of the election (store.h), "<prefix>leader", into a new buffer. */
char *etcd_election_key(struct store_etcd *s, size_t *len)
{
	char *k = malloc(s->prefix_len + sizeof("leader"));

	if (k == NULL)
		return NULL;
	memcpy(k, s->prefix, s->prefix_len);
	memcpy(k + s->prefix_len, "leader", sizeof("leader"));
	*len = s->prefix_len + strlen("leader");
	return k;
}

static struct store_change *etcd_log_at(struct store_etcd *s, size_t i)
{
	return &s->log[s->log_head + i];
}

/* Drops the oldest changes, whole revisions, once the log is a batch over its minimum. */
static void etcd_log_trim(struct store_etcd *s)
{
	size_t drop;

	if (s->log_n < STORE_CHANGES_KEEP + ETCD_TRIM_BATCH)
		return;
	drop = s->log_n - STORE_CHANGES_KEEP;
	while (drop > 1 && etcd_log_at(s, drop)->index == etcd_log_at(s, drop - 1)->index)
		drop--;
	for (size_t i = 0; i < drop; i++)
		store_obj_free(&etcd_log_at(s, i)->obj);
	s->compacted = etcd_log_at(s, drop - 1)->index;
	s->log_head += drop;
	s->log_n -= drop;
}

/* Room for one more change at the end of the log; false when out of memory. */
static bool etcd_log_room(struct store_etcd *s)
{
	if (s->log_head + s->log_n < s->log_cap)
		return true;
	if (s->log_head > 0) {
		memmove(s->log, s->log + s->log_head, s->log_n * sizeof(*s->log));
		s->log_head = 0;
		return true;
	}
	size_t cap = s->log_cap ? s->log_cap * 2 : 1024;
	struct store_change *log = realloc(s->log, cap * sizeof(*log));

	if (log == NULL)
		return false;
	s->log = log;
	s->log_cap = cap;
	return true;
}

static void etcd_log_clear(struct store_etcd *s)
{
	for (size_t i = 0; i < s->log_n; i++)
		store_obj_free(&etcd_log_at(s, i)->obj);
	s->log_head = s->log_n = 0;
}

/*
 * Appends one watch event (mu held); a delete's object has create_index
 * created. Returns 0 or CSID_ENOMEM.
 */
static int etcd_log_event(struct store_etcd *s, const Mvccpb__Event *ev, uint64_t created,
			  uint64_t *rev, struct err *e)
{
	bool del = ev->type == MVCCPB__EVENT__EVENT_TYPE__DELETE;
	const Mvccpb__KeyValue *kv = ev->kv;
	struct store_change ch = {.type = del ? STORE_OP_DELETE : STORE_OP_PUT};
	size_t id_len;
	const char *id;
	int rc;

	if (kv == NULL || !etcd_parse_key(s, (const char *)kv->key.data, kv->key.len, &ch.obj.kind,
					  &id, &id_len)) {
		if (kv)
			etcd_election_event(s, (const char *)kv->key.data, kv->key.len);
		return 0; /* not an object of ours (another kind or a stray key) */
	}
	ch.index = etcd_rev(kv->mod_revision);
	if (del)
		rc = store_obj_set(&ch.obj, ch.obj.kind, id, id_len, NULL, 0, created, ch.index, e);
	else
		rc = etcd_kv_obj(s, kv, &ch.obj, e);
	if (rc == 0 && !etcd_log_room(s)) {
		store_obj_free(&ch.obj);
		rc = err_set(e, CSID_ENOMEM, "etcd watch: out of memory");
	}
	if (rc)
		return rc;
	s->log[s->log_head + s->log_n++] = ch;
	if (ch.index > *rev)
		*rev = ch.index;
	return 0;
}

/*
 * The create_revision of key kv->key just before its delete at
 * kv->mod_revision, read from etcd at the revision before (what a watch's
 * prev_kv reads); 0 when that revision is compacted or etcd does not
 * answer, as prev_kv then gives nothing.
 */
static uint64_t etcd_created_before(struct store_etcd *s, const Mvccpb__KeyValue *kv)
{
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RangeResponse *resp = NULL;
	const Mvccpb__KeyValue *prev;
	uint64_t created = 0;
	struct err e;

	if (s->c == NULL || kv->mod_revision <= 1)
		return 0;
	req.key = kv->key;
	req.revision = kv->mod_revision - 1;
	req.keys_only = true;
	req.serializable = true;
	if (etcd_client_call(s->c, ETCD_RANGE, &req.base, (ProtobufCMessage **)&resp, &e) != 0) {
		log_warn("msg=\"etcd watch: the create index of a deleted key is unknown\" "
			 "error=\"%s\"",
			 e.msg);
		return 0;
	}
	prev = etcd_first_kv(resp);
	created = prev ? etcd_rev(prev->create_revision) : 0;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return created;
}

/*
 * The create index of each delete of msg (created[i], 0 for other events):
 * from the cache, which holds every object the watch or a read brought
 * since the store opened, else read from etcd (without mu). The watch
 * does not ask etcd for prev_kv: etcd then reads every event's previous
 * state from its database, about 0.1 ms of its CPU per event, for a
 * field only deletes need and the cache nearly always has.
 */
static void etcd_watch_created(struct store_etcd *s, const Etcdserverpb__WatchResponse *msg,
			       uint64_t *created)
{
	bool *miss = calloc(msg->n_events, sizeof(*miss));
	bool any = false;

	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < msg->n_events; i++) {
		const Mvccpb__Event *ev = msg->events[i];
		enum store_kind kind;
		const char *id;
		size_t id_len;
		char idz[STORE_ID_MAX + 1];

		created[i] = 0;
		if (ev == NULL || ev->type != MVCCPB__EVENT__EVENT_TYPE__DELETE || ev->kv == NULL ||
		    !etcd_parse_key(s, (const char *)ev->kv->key.data, ev->kv->key.len, &kind, &id,
				    &id_len) ||
		    id_len > STORE_ID_MAX)
			continue;
		memcpy(idz, id, id_len);
		idz[id_len] = '\0';
		if (!store_cache_created(s->cache, kind, idz, &created[i]) && miss) {
			miss[i] = true;
			any = true;
		}
	}
	pthread_mutex_unlock(&s->mu);
	for (size_t i = 0; any && i < msg->n_events; i++) {
		if (miss[i])
			created[i] = etcd_created_before(s, msg->events[i]->kv);
	}
	free(miss);
}

/* The watch stream's callback: one message. */
static int etcd_watch_msg(void *arg, const Etcdserverpb__WatchResponse *msg)
{
	struct store_etcd *s = arg;
	uint64_t rev = 0, *created;
	size_t had;
	struct err e;
	int rc = 0;

	if (msg->canceled) {
		s->compact_to = etcd_rev(msg->compact_revision);
		if (s->compact_to)
			return 1;
		log_warn("msg=\"etcd cancelled the watch\" reason=\"%.200s\"",
			 msg->cancel_reason ? msg->cancel_reason : "");
		return CSID_EUNAVAIL;
	}
	created = calloc(msg->n_events + 1, sizeof(*created));
	if (created == NULL) {
		log_warn("msg=\"etcd watch: out of memory\"");
		return CSID_ENOMEM;
	}
	etcd_watch_created(s, msg, created);
	pthread_mutex_lock(&s->mu);
	if (s->paused || s->closing) {
		/* Stopped while the stream was still reading: nothing more reaches the log. */
		pthread_mutex_unlock(&s->mu);
		free(created);
		return CSID_ECANCELED;
	}
	had = s->log_n;
	for (size_t i = 0; i < msg->n_events && rc == 0; i++)
		rc = msg->events[i] ? etcd_log_event(s, msg->events[i], created[i], &rev, &e) : 0;
	free(created);
	if (rc) {
		/* Drop the message's changes: the watch resumes at its revision. */
		while (s->log_n > had)
			store_obj_free(&etcd_log_at(s, --s->log_n)->obj);
		rev = 0;
	} else {
		for (size_t i = had; i < s->log_n; i++)
			store_cache_apply(s->cache, etcd_log_at(s, i));
		if (rev >= s->next)
			s->next = rev + 1;
	}
	etcd_log_trim(s);
	pthread_mutex_unlock(&s->mu);
	if (rc)
		log_warn("msg=\"etcd watch\" error=\"%s\"", e.msg);
	if (rev)
		store_notify_publish(&s->notify, rev);
	return rc;
}

/* One watch stream from s->next (mu held, released while it runs). */
static int etcd_watch_once(struct store_etcd *s, struct err *e)
{
	Etcdserverpb__WatchCreateRequest cr = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
	Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
	size_t elen = s->prefix_len;
	char *end = strdup(s->prefix);
	int rc;

	if (end == NULL)
		return err_set(e, CSID_ENOMEM, "etcd watch: out of memory");
	etcd_prefix_end(end, &elen);
	cr.key = etcd_bytes(s->prefix, s->prefix_len);
	cr.range_end = etcd_bytes(end, elen);
	cr.start_revision = (int64_t)s->next;
	req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
	req.create_request = &cr;
	s->watching = true;
	etcd_stream_reset(&s->stream);
	pthread_mutex_unlock(&s->mu);
	rc = etcd_client_watch(s->c, &req, &s->stream, etcd_watch_msg, s, e);
	pthread_mutex_lock(&s->mu);
	s->watching = false;
	free(end);
	return rc;
}

/* The watch thread: keeps the watch open from s->next until closing. */
static void *etcd_watch_main(void *arg)
{
	struct store_etcd *s = arg;
	struct clock *clk = clock_real();
	int64_t backoff = ETCD_BACKOFF_MIN_MS;
	struct err e;

	pthread_mutex_lock(&s->mu);
	while (!s->closing) {
		int rc;

		if (s->paused) {
			pthread_cond_wait(&s->cond, &s->mu);
			continue;
		}
		rc = etcd_watch_once(s, &e);
		if (s->closing || s->paused)
			continue;
		if (rc == 1) {
			/* etcd compacted past s->next: the changes in between are gone. */
			log_warn("msg=\"etcd compacted past the watch; readers resynchronise\" "
				 "from=%llu compacted=%llu",
				 (unsigned long long)s->next, (unsigned long long)s->compact_to);
			etcd_log_clear(s);
			store_cache_clear(s->cache);
			store_cache_raise_floor(s->cache, s->compact_to);
			etcd_election_event(s, NULL, 0);
			s->compacted = s->compact_to;
			s->next = s->compact_to + 1;
			pthread_mutex_unlock(&s->mu);
			store_notify_publish(&s->notify, s->compact_to);
			pthread_mutex_lock(&s->mu);
			backoff = ETCD_BACKOFF_MIN_MS;
			continue;
		}
		log_warn("msg=\"etcd watch broken; resuming\" from=%llu error=\"%s\"",
			 (unsigned long long)s->next, e.msg);
		clock_wait(clk, &s->cond, &s->mu, clock_now_ms(clk) + backoff);
		backoff = backoff * 2 > ETCD_BACKOFF_MAX_MS ? ETCD_BACKOFF_MAX_MS : backoff * 2;
	}
	pthread_mutex_unlock(&s->mu);
	return NULL;
}

static int etcd_changes(struct store *st, uint64_t after, size_t limit, bool values,
			struct store_changes *out, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	size_t lo, hi, n;
	int rc = 0;

	pthread_mutex_lock(&s->mu);
	out->index = store_notify_index(&s->notify);
	if (after < s->compacted) {
		rc = err_set(e, CSID_ERANGE,
			     "store changes after %llu: compacted (the log starts after %llu)",
			     (unsigned long long)after, (unsigned long long)s->compacted);
		goto out;
	}
	/* The first change with index > after. */
	lo = 0;
	hi = s->log_n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (etcd_log_at(s, mid)->index <= after)
			lo = mid + 1;
		else
			hi = mid;
	}
	n = s->log_n - lo;
	if (limit > 0 && n > limit) {
		n = limit;
		while (lo + n < s->log_n &&
		       etcd_log_at(s, lo + n)->index == etcd_log_at(s, lo + n - 1)->index)
			n++;
	}
	if (n == 0)
		goto out;
	out->changes = calloc(n, sizeof(*out->changes));
	if (out->changes == NULL) {
		rc = err_set(e, CSID_ENOMEM, "store changes: out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const struct store_change *ch = etcd_log_at(s, lo + i);
		const struct store_obj *o = &ch->obj;

		out->changes[i].index = ch->index;
		out->changes[i].type = ch->type;
		rc = store_obj_set(&out->changes[i].obj, o->kind, o->id, strlen(o->id),
				   values ? o->value : NULL, values ? o->len : 0, o->create_index,
				   o->modify_index, e);
		if (rc)
			break;
		out->n++;
	}
out:
	pthread_mutex_unlock(&s->mu);
	if (rc)
		store_changes_free(out);
	return rc;
}

/*
 * store_compact: etcd's compaction up to index (the revisions before it
 * go, of every prefix: etcd keeps one history). Compacted already, or
 * by someone else further: nothing to do.
 */
static int etcd_compact(struct store *st, uint64_t index, struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	Etcdserverpb__CompactionRequest req = ETCDSERVERPB__COMPACTION_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	int rc;

	req.revision = (int64_t)index; /* store_compact bounds it */
	rc = etcd_client_call(s->c, ETCD_COMPACT, &req.base, &resp, e);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	if (rc == CSID_ERANGE && strstr(e->msg, "has been compacted"))
		return 0;
	return rc ? err_wrap(e, "compact etcd to revision %llu", (unsigned long long)index) : 0;
}

static uint64_t etcd_index(struct store *st)
{
	return store_notify_index(&((struct store_etcd *)st)->notify);
}

static uint64_t etcd_wait(struct store *st, uint64_t after, int64_t timeout_ms)
{
	return store_notify_wait(&((struct store_etcd *)st)->notify, after, timeout_ms);
}

static void etcd_stop_watch(struct store_etcd *s)
{
	etcd_stream_cancel(&s->stream);
	pthread_cond_broadcast(&s->cond);
}

static void etcd_free(struct store_etcd *s)
{
	etcd_log_clear(s);
	free(s->log);
	store_cache_free(s->cache);
	etcd_client_free(s->c);
	free(s->prefix);
	free(s);
}

static void etcd_close(struct store *st)
{
	struct store_etcd *s = (struct store_etcd *)st;

	pthread_mutex_lock(&s->mu);
	s->closing = true;
	etcd_stop_watch(s);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->watcher, NULL);
	store_notify_fini(&s->notify);
	etcd_stream_fini(&s->stream);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->mu);
	pthread_mutex_destroy(&s->bmu);
	etcd_free(s);
}

static const struct store_ops etcd_ops = {
    .get = etcd_get,
    .list = etcd_list,
    .txn = etcd_txn,
    .changes = etcd_changes,
    .index = etcd_index,
    .wait = etcd_wait,
    .close = etcd_close,
    .txn_fenced = etcd_txn_fenced,
    .lease_grant = etcd_lease_grant,
    .lease_keepalive = etcd_lease_keepalive,
    .lease_revoke = etcd_lease_revoke,
    .campaign = etcd_campaign,
    .member_put = etcd_member_put,
    .member_list = etcd_member_list,
    .foreign_keys = etcd_foreign_keys,
    .election_wait = etcd_election_wait,
    .compact = etcd_compact,
};

void store_etcd_pause_watch(struct store *st, bool pause)
{
	struct store_etcd *s = (struct store_etcd *)st;

	pthread_mutex_lock(&s->mu);
	s->paused = pause;
	etcd_stop_watch(s);
	pthread_mutex_unlock(&s->mu);
}

/* Every change in the log reached the cache too (store_etcd_decode). */
static int etcd_decode_check(struct store_etcd *s, const struct store_change *ch, struct err *e)
{
	struct store_obj o = {0};
	int rc = store_cache_get(s->cache, ch->obj.kind, ch->obj.id, &o, e);

	store_obj_free(&o);
	if (rc == 1)
		return err_set(e, CSID_EINTERNAL, "%s %s: in the change log, not in the cache",
			       store_kind_name(ch->obj.kind), ch->obj.id);
	return 0;
}

int store_etcd_decode(const char *prefix, const uint8_t *data, size_t len, struct err *e)
{
	static const struct store_op ops[] = {
	    {STORE_OP_PUT, STORE_VOLUME, "a", "x", 1, 5},
	    {STORE_OP_DELETE, STORE_CLAIM, "n/a/b", NULL, 0, STORE_ANY},
	    {STORE_OP_PUT, STORE_NODE, "b", "y", 1, 0},
	};
	struct store_etcd s = {.prefix = (char *)prefix, .prefix_len = strlen(prefix), .next = 1};
	struct store_list l = {0};
	struct store_changes ch = {0};
	Etcdserverpb__RangeResponse *range;
	Etcdserverpb__TxnResponse *txn;
	Etcdserverpb__WatchResponse *watch;
	uint64_t rev;
	int rc = 0;

	if ((s.cache = store_cache_new(STORE_CACHE_BYTES)) == NULL ||
	    store_notify_init(&s.notify, 0) != 0) {
		store_cache_free(s.cache);
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	}
	pthread_mutex_init(&s.mu, NULL);
	/* As a list page, as the outcome of a Txn, and as a watch message. */
	range = etcdserverpb__range_response__unpack(NULL, len, data);
	if (range) {
		etcd_list_decode(&s, range, &l, e);
		store_list_free(&l);
		etcdserverpb__range_response__free_unpacked(range, NULL);
	}
	txn = etcdserverpb__txn_response__unpack(NULL, len, data);
	if (txn) {
		uint64_t hdr = txn->header ? etcd_rev(txn->header->revision) : 0;

		etcd_txn_outcome(ops, sizeof(ops) / sizeof(ops[0]), txn, hdr, &rev, e);
		/* And as the answer to a batch: each nested Txn's outcome. */
		for (size_t i = 0; i < txn->n_responses; i++)
			if (txn->responses[i] &&
			    txn->responses[i]->response_case ==
				ETCDSERVERPB__RESPONSE_OP__RESPONSE_RESPONSE_TXN &&
			    txn->responses[i]->response_txn)
				etcd_txn_outcome(ops, sizeof(ops) / sizeof(ops[0]),
						 txn->responses[i]->response_txn, hdr, &rev, e);
		etcdserverpb__txn_response__free_unpacked(txn, NULL);
	}
	watch = etcdserverpb__watch_response__unpack(NULL, len, data);
	if (watch) {
		etcd_watch_msg(&s, watch);
		etcdserverpb__watch_response__free_unpacked(watch, NULL);
	}
	if (etcd_changes(&s.base, 0, 0, true, &ch, e) == 0) {
		for (size_t i = 0; i < ch.n && rc == 0; i++)
			rc = etcd_decode_check(&s, &ch.changes[i], e);
		store_changes_free(&ch);
	}
	etcd_log_clear(&s);
	free(s.log);
	store_cache_free(s.cache);
	store_notify_fini(&s.notify);
	pthread_mutex_destroy(&s.mu);
	return rc;
}

/* Reads etcd's revision (and checks that it answers). */
static int etcd_revision(struct store_etcd *s, uint64_t *rev, struct err *e)
{
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;
	Etcdserverpb__RangeResponse *resp = NULL;
	int rc;

	req.key = etcd_bytes(s->prefix, s->prefix_len);
	req.count_only = true;
	rc = etcd_client_call(s->c, ETCD_RANGE, &req.base, (ProtobufCMessage **)&resp, e);
	if (rc)
		return rc;
	*rev = resp->header ? etcd_rev(resp->header->revision) : 0;
	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return 0;
}

int store_etcd_open(const struct store_etcd_config *cfg, struct store **out, struct err *e)
{
	struct etcd_client_config cc = {
	    cfg->endpoints, cfg->nendpoints,      cfg->ca_file,           cfg->cert_file,
	    cfg->key_file,  cfg->dial_timeout_ms, cfg->request_timeout_ms};
	const char *prefix = cfg->prefix && cfg->prefix[0] ? cfg->prefix : ETCD_PREFIX_DEFAULT;
	struct store_etcd *s;
	uint64_t rev = 0;
	int rc;

	*out = NULL;
	if (strlen(prefix) > ETCD_PREFIX_MAX)
		return err_set(e, CSID_EINVAL, "etcd prefix: longer than %d bytes",
			       ETCD_PREFIX_MAX);
	s = calloc(1, sizeof(*s));
	if (s == NULL || (s->prefix = strdup(prefix)) == NULL ||
	    (s->cache = store_cache_new(STORE_CACHE_BYTES)) == NULL) {
		if (s)
			free(s->prefix);
		free(s);
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	}
	s->base.ops = &etcd_ops;
	s->base.backend = "etcd";
	s->prefix_len = strlen(prefix);
	s->request_max = cfg->max_request_bytes ? cfg->max_request_bytes : ETCD_REQUEST_MAX_DEFAULT;
	s->request_ms = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : 10000;
	if ((rc = etcd_client_new(&cc, &s->c, e)) || (rc = etcd_revision(s, &rev, e))) {
		etcd_free(s);
		return err_wrap(e, "open etcd store");
	}
	s->compacted = rev;
	s->next = rev + 1;
	store_cache_raise_floor(s->cache, rev);
	if (store_notify_init(&s->notify, rev) != 0) {
		etcd_free(s);
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	}
	etcd_stream_init(&s->stream);
	pthread_mutex_init(&s->mu, NULL);
	pthread_mutex_init(&s->bmu, NULL);
	s->queue_tail = &s->queue;
	if (clock_cond_init(&s->cond) != 0 ||
	    pthread_create(&s->watcher, NULL, etcd_watch_main, s) != 0) {
		store_notify_fini(&s->notify);
		etcd_free(s);
		return err_set(e, CSID_ENOMEM, "etcd: cannot start the watch thread");
	}
	*out = &s->base;
	return 0;
}
