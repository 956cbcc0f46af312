/*
 * The etcd store backend. Each object is one etcd key, <prefix><kind>/<id>
 * (prefix "/csid/" by default, so installations can share a cluster), its
 * value the object's bytes. The store index is etcd's revision: an
 * object's create_index and modify_index are its key's create_revision
 * and mod_revision, a condition is a Compare on mod_revision (0: the key
 * does not exist), and a transaction is one etcd Txn whose revision is
 * the index it returns. Leases, the election and member records are in
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
 * flight; on this loaded machine the two could not be told apart in
 * throughput, so this is for the cluster's sake, not a measured gain). It
 * loses nothing the store promises: the member applied every write it
 * acknowledged to us and every revision our watch delivered before it
 * sent them, so a read sees our own writes and at least store_index();
 * another server's newer write it may not see yet only makes our
 * compare-and-set fail and the caller read again.
 *
 * Gets are answered from a cache (etcd_cache.h) while the watch runs:
 * every change the watch delivers updates it before its revision is
 * published, so a get sees our own writes and at least store_index(),
 * the same promise as a serializable read, without a round trip (an
 * API request's read before its compare-and-set cost etcd as much CPU
 * as half a transaction). A miss reads etcd and keeps the answer when
 * it is at least as new as the watch. A failed compare forgets its
 * objects, so the caller's next read goes to etcd and sees what won;
 * a compaction under the watch empties the cache, and while the watch
 * is down every get reads etcd.
 *
 * Errors. A transaction that fails in transport before anything was
 * sent (no connection) wrote nothing; one that times out after it was sent
 * (CSID_ETIMEDOUT) or loses its connection may still commit when etcd
 * gets to it: the caller reads again before deciding, as after a conflict.
 *
 * Limits. etcd refuses a request over --max-request-bytes (1.5 MiB by
 * default) and a Txn of more than --max-txn-ops (128) compares or ops.
 * STORE_TXN_OPS_MAX is 128 and a transaction is one Txn (its compares,
 * its writes, and on failure one read per compare), so the op count
 * fits; a transaction whose encoded size would pass the request limit is
 * refused here with CSID_ETOOBIG naming the limit, since splitting it
 * would break its atomicity.
 *
 * Why the JSON gateway and libcurl rather than etcd's gRPC API. The gRPC
 * core we link would need our own .proto subset of etcd's KV and Watch
 * services, generated code, and a completion-queue driver for the
 * bidirectional watch: several hundred lines more. The gateway is part of
 * every etcd server, libcurl already gives us keep-alive, TLS with client
 * certificates and a wakeable poll for the stream, and an operator can
 * read the same documents with curl. The price, measured on this machine
 * (2 cores, shared, load average 15-18) against a one-member etcd 3.4 on
 * loopback: a one-object transaction takes 2.5-5 ms of wall time, nearly
 * all of it etcd's commit (a bare PUT through the same client takes as
 * long), and about 0.2 ms of our CPU (JSON and base64 both ways, the HTTP
 * exchange, the watch event); a read takes 0.6-1.1 ms and 0.09 ms of CPU.
 * etcd's own CPU is the larger price (measured later from its /proc
 * times, data on tmpfs so no fsync wait): about 0.4 ms per Range or Put
 * and 0.6 ms per Txn through the gateway (HTTP/1.1, JSON to protobuf and
 * back, and a second gRPC hop inside etcd), plus 0.2-0.3 ms per event for
 * each gateway watch (0.1 ms of it for prev_kv). A claim + release cycle
 * is 4 transactions: about 3 ms of etcd CPU, which alone caps a 2-core
 * machine near 600 cycles/s. Native gRPC is where that would be won; the
 * figures of bench/server.c (README) say what it means per claim.
 */
#include "store/store_etcd_int.h"

#include <stdlib.h>
#include <string.h>

#include "store/etcd_cache.h"
#include "store/etcd_client.h"
#include "util/clock.h"
#include "util/log.h"

#define ETCD_PREFIX_DEFAULT "/csid/"
#define ETCD_PREFIX_MAX 256
#define ETCD_TRIM_BATCH 1024
/* Per-op framing of a request beyond its key and value bytes (protobuf tags, lengths). */
#define ETCD_OP_OVERHEAD 32
#define ETCD_REQ_OVERHEAD 256
#define ETCD_BACKOFF_MIN_MS 50
#define ETCD_BACKOFF_MAX_MS 2000

/* The key of kind/id (id_len bytes) into a new buffer; *len its length. */
static char *etcd_key(struct store_etcd *s, enum store_kind kind, const char *id, size_t id_len,
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

/* Sets a base64 field of obj; false when out of memory. */
bool etcd_set_b64(json_t *obj, const char *field, const char *data, size_t len)
{
	json_t *v = etcd_b64_json(data, len);

	return v && json_object_set_new(obj, field, v) == 0;
}

bool etcd_set_u64(json_t *obj, const char *field, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
	return json_object_set_new(obj, field, json_string(buf)) == 0;
}

/*
 * Reads one kv of an answer into *o. Returns 0, 1 for a key under the
 * prefix that names no object (an empty ID), CSID_EPROTO (not base64) or
 * CSID_ENOMEM.
 */
static int etcd_kv_obj(struct store_etcd *s, json_t *kv, struct store_obj *o, struct err *e)
{
	char *key = NULL, *val = NULL;
	size_t klen, vlen;
	const char *id;
	size_t id_len;
	enum store_kind kind;
	int rc;

	if ((rc = etcd_b64_decode(json_string_value(json_object_get(kv, "key")), &key, &klen)) ||
	    (rc = etcd_b64_decode(json_string_value(json_object_get(kv, "value")), &val, &vlen)))
		goto out;
	if (!etcd_parse_key(s, key, klen, &kind, &id, &id_len)) {
		rc = 1; /* a stray key under the prefix, no object of ours */
		goto out;
	}
	rc = store_obj_set(o, kind, id, id_len, val, vlen, etcd_json_u64(kv, "create_revision"),
			   etcd_json_u64(kv, "mod_revision"), e);
out:
	free(key);
	free(val);
	if (rc == CSID_EPROTO)
		return err_set(e, rc, "etcd %s: a key or value that is not base64",
			       s->c ? etcd_client_endpoint(s->c) : "answer");
	if (rc == CSID_ENOMEM)
		return err_set(e, rc, "etcd: out of memory");
	return rc;
}

/* A request document with a base64 "key" (and "range_end" when end). */
json_t *etcd_range_req(const char *k, size_t klen, const char *end, size_t elen)
{
	json_t *r = json_object();

	if (r && etcd_set_b64(r, "key", k, klen) &&
	    (!end || etcd_set_b64(r, "range_end", end, elen)))
		return r;
	json_decref(r);
	return NULL;
}

/* A serializable read of [k, end) (the file's opening comment says why). */
json_t *etcd_read_req(const char *k, size_t klen, const char *end, size_t elen)
{
	json_t *r = etcd_range_req(k, klen, end, elen);

	if (r && json_object_set_new(r, "serializable", json_true()) != 0) {
		json_decref(r);
		return NULL;
	}
	return r;
}

/* Whether the cache follows etcd: the watch runs (mu held). */
static bool etcd_cache_live(struct store_etcd *s)
{
	return s->watching && !s->paused && !s->closing;
}

/*
 * A get is answered from the cache while the watch runs; a miss reads
 * etcd, and the answer enters the cache when it is at least as new as
 * what the watch applied (the watch then brings every later change).
 */
static int etcd_get(struct store *st, enum store_kind kind, const char *id, struct store_obj *out,
		    struct err *e)
{
	struct store_etcd *s = (struct store_etcd *)st;
	size_t klen;
	char *k;
	json_t *req, *resp = NULL, *kvs;
	uint64_t rev;
	int rc;

	pthread_mutex_lock(&s->mu);
	rc = etcd_cache_live(s) ? etcd_cache_get(s->cache, kind, id, out, e) : 1;
	pthread_mutex_unlock(&s->mu);
	if (rc != 1)
		return rc;
	k = etcd_key(s, kind, id, strlen(id), &klen);
	req = k ? etcd_read_req(k, klen, NULL, 0) : NULL;
	free(k);
	if (req == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	rc = etcd_client_call(s->c, "/v3/kv/range", req, &resp, e);
	json_decref(req);
	if (rc)
		return err_wrap(e, "get %s %s", store_kind_name(kind), id);
	kvs = json_object_get(resp, "kvs");
	rev = etcd_json_u64(json_object_get(resp, "header"), "revision");
	if (json_array_size(kvs) == 0)
		rc = err_set(e, CSID_ENOTFOUND, "%s %s: not found", store_kind_name(kind), id);
	else if ((rc = etcd_kv_obj(s, json_array_get(kvs, 0), out, e)) == 1)
		rc = err_set(e, CSID_EINTERNAL, "%s %s: not an object key", store_kind_name(kind),
			     id);
	json_decref(resp);
	pthread_mutex_lock(&s->mu);
	if ((rc == 0 || rc == CSID_ENOTFOUND) && rev + 1 >= s->next)
		etcd_cache_fill(s->cache, kind, id, rc == 0 ? out : NULL, rev);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* Reads a range answer into *out (a list page; out->index its revision). */
static int etcd_list_decode(struct store_etcd *s, json_t *resp, struct store_list *out,
			    struct err *e)
{
	json_t *kvs = json_object_get(resp, "kvs");

	out->objs = calloc(json_array_size(kvs) + 1, sizeof(*out->objs));
	if (out->objs == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	for (size_t i = 0; i < json_array_size(kvs); i++) {
		int rc = etcd_kv_obj(s, json_array_get(kvs, i), &out->objs[out->n], e);

		if (rc < 0)
			return rc;
		out->n += rc == 0;
	}
	out->more = json_is_true(json_object_get(resp, "more"));
	out->index = etcd_json_u64(json_object_get(resp, "header"), "revision");
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
	json_t *req = NULL, *resp = NULL;
	int rc = 0, cmp;

	if (start && end && alen > 0 && strcmp(after_id, prefix) >= 0) {
		/* Start just after after_id: after_id followed by a NUL byte. */
		free(start);
		start = etcd_key(s, kind, after_id, alen + 1, &slen);
	}
	if (start == NULL || end == NULL)
		goto nomem;
	etcd_prefix_end(end, &elen);
	out->index = store_notify_index(&s->notify);
	cmp = memcmp(start, end, slen < elen ? slen : elen);
	if (cmp > 0 || (cmp == 0 && slen >= elen))
		goto out; /* after_id is past every ID with prefix */
	req = etcd_read_req(start, slen, end, elen);
	if (req == NULL || (limit > 0 && !etcd_set_u64(req, "limit", limit)))
		goto nomem;
	rc = etcd_client_call(s->c, "/v3/kv/range", req, &resp, e);
	if (rc) {
		err_wrap(e, "list %s", store_kind_name(kind));
		goto out;
	}
	rc = etcd_list_decode(s, resp, out, e);
	goto out;
nomem:
	rc = err_set(e, CSID_ENOMEM, "etcd: out of memory");
out:
	if (rc)
		store_list_free(out);
	json_decref(req);
	json_decref(resp);
	free(start);
	free(end);
	return rc;
}

/* Builds the Txn document of ops; *size its estimated request size. */
static json_t *etcd_txn_req(struct store_etcd *s, const struct store_op *ops, size_t n,
			    size_t *size)
{
	json_t *req = json_object(), *cmp = json_array(), *ok = json_array(), *fail = json_array();
	bool good = req && cmp && ok && fail;

	*size = ETCD_REQ_OVERHEAD;
	for (size_t i = 0; good && i < n; i++) {
		size_t klen = 0;
		char *k = etcd_key(s, ops[i].kind, ops[i].id, strlen(ops[i].id), &klen);
		json_t *w = json_object(), *op = json_object(), *c, *r;

		good = k && w && op && etcd_set_b64(op, "key", k, klen);
		if (good && ops[i].type == STORE_OP_PUT) {
			good =
			    etcd_set_b64(op, "value", ops[i].value ? ops[i].value : "", ops[i].len);
			good = good && json_object_set(w, "request_put", op) == 0;
		} else if (good) {
			good = json_object_set(w, "request_delete_range", op) == 0;
		}
		good = good && json_array_append(ok, w) == 0;
		*size += klen + ops[i].len + ETCD_OP_OVERHEAD;
		if (good && ops[i].expect_index != STORE_ANY) {
			c = etcd_range_req(k, klen, NULL, 0);
			r = etcd_range_req(k, klen, NULL, 0);
			good =
			    c && r && json_object_set_new(c, "target", json_string("MOD")) == 0 &&
			    json_object_set_new(c, "result", json_string("EQUAL")) == 0 &&
			    etcd_set_u64(c, "mod_revision", ops[i].expect_index) &&
			    json_object_set_new(r, "keys_only", json_true()) == 0 &&
			    json_array_append(cmp, c) == 0 &&
			    json_array_append_new(fail, json_pack("{s:O}", "request_range", r)) ==
				0;
			json_decref(c);
			json_decref(r);
			*size += 2 * (klen + ETCD_OP_OVERHEAD);
		}
		json_decref(w);
		json_decref(op);
		free(k);
	}
	if (good && json_object_set(req, "compare", cmp) == 0 &&
	    json_object_set(req, "success", ok) == 0 &&
	    json_object_set(req, "failure", fail) == 0) {
		json_decref(cmp);
		json_decref(ok);
		json_decref(fail);
		return req;
	}
	json_decref(req);
	json_decref(cmp);
	json_decref(ok);
	json_decref(fail);
	return NULL;
}

/* Names the first failed condition from the failure branch's reads. */
static int etcd_txn_conflict(const struct store_op *ops, size_t n, json_t *resp, struct err *e)
{
	json_t *rs = json_object_get(resp, "responses");
	size_t j = 0;

	for (size_t i = 0; i < n; i++) {
		json_t *kvs;
		uint64_t have;

		if (ops[i].expect_index == STORE_ANY)
			continue;
		kvs = json_object_get(json_object_get(json_array_get(rs, j++), "response_range"),
				      "kvs");
		have = etcd_json_u64(json_array_get(kvs, 0), "mod_revision");
		if (!store_cond_holds(ops[i].expect_index, have))
			return store_conflict(e, &ops[i], have);
	}
	return err_set(e, CSID_ECONFLICT, "store txn: a condition failed and then held again");
}

/* Whether a successful Txn changed anything (a delete of a missing key does not). */
static bool etcd_txn_changed(const struct store_op *ops, size_t n, json_t *resp)
{
	json_t *rs = json_object_get(resp, "responses");

	for (size_t i = 0; i < n; i++) {
		json_t *del = json_object_get(json_array_get(rs, i), "response_delete_range");

		if (ops[i].type == STORE_OP_PUT || etcd_json_u64(del, "deleted") > 0)
			return true;
	}
	return false;
}

/*
 * Forgets the objects of ops: their next get reads etcd, and changes up
 * to rev the watch still brings do not put an older state back.
 */
static void etcd_cache_forget(struct store_etcd *s, const struct store_op *ops, size_t n,
			      uint64_t rev)
{
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < n; i++)
		etcd_cache_drop(s->cache, ops[i].kind, ops[i].id, rev);
	pthread_mutex_unlock(&s->mu);
}

/*
 * Reads the answer to the Txn of ops: 0 and the revision it wrote in *rev
 * (0 when it changed nothing), CSID_ECONFLICT naming the failed
 * condition, or CSID_EPROTO for a write without a revision.
 */
static int etcd_txn_outcome(const struct store_op *ops, size_t n, json_t *resp, uint64_t *rev,
			    struct err *e)
{
	*rev = 0;
	if (!json_is_true(json_object_get(resp, "succeeded")))
		return etcd_txn_conflict(ops, n, resp, e);
	if (!etcd_txn_changed(ops, n, resp))
		return 0;
	*rev = etcd_json_u64(json_object_get(resp, "header"), "revision");
	if (*rev == 0)
		return err_set(e, CSID_EPROTO, "store txn: etcd's answer carries no revision");
	return 0;
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

/*
 * Adds the fence to a Txn document: a compare that the election key's
 * create_revision is still fence, and a read of the key on failure (the
 * last failure response).
 */
static bool etcd_txn_fence(struct store_etcd *s, json_t *req, uint64_t fence)
{
	size_t klen;
	char *k = etcd_election_key(s, &klen);
	json_t *c = k ? etcd_range_req(k, klen, NULL, 0) : NULL;
	json_t *r = k ? etcd_range_req(k, klen, NULL, 0) : NULL;
	bool good = c && r && json_object_set_new(c, "target", json_string("CREATE")) == 0 &&
		    json_object_set_new(c, "result", json_string("EQUAL")) == 0 &&
		    etcd_set_u64(c, "create_revision", fence) &&
		    json_array_append(json_object_get(req, "compare"), c) == 0 &&
		    json_array_append_new(json_object_get(req, "failure"),
					  json_pack("{s:O}", "request_range", r)) == 0;

	json_decref(c);
	json_decref(r);
	free(k);
	return good;
}

/* Whether the fence of a failed Txn (its last failure response) no longer holds. */
static bool etcd_txn_fenced_off(json_t *resp, uint64_t fence)
{
	json_t *rs = json_object_get(resp, "responses");
	json_t *kvs = json_object_get(
	    json_object_get(json_array_get(rs, json_array_size(rs) - 1), "response_range"), "kvs");

	return etcd_json_u64(json_array_get(kvs, 0), "create_revision") != fence;
}

/* A transaction; with fence (nonzero) conditioned on the election key too. */
static int etcd_txn_run(struct store_etcd *s, uint64_t fence, const struct store_op *ops, size_t n,
			uint64_t *index, struct err *e)
{
	size_t size;
	json_t *req = etcd_txn_req(s, ops, n, &size), *resp = NULL;
	uint64_t rev;
	int rc;

	if (req != NULL && fence != 0 && !etcd_txn_fence(s, req, fence)) {
		json_decref(req);
		req = NULL;
	}
	if (req == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	if (size > s->request_max) {
		json_decref(req);
		return err_set(e, CSID_ETOOBIG,
			       "store txn: about %zu bytes, over etcd's request limit of %zu bytes "
			       "(--max-request-bytes)",
			       size, s->request_max);
	}
	rc = etcd_client_call(s->c, "/v3/kv/txn", req, &resp, e);
	json_decref(req);
	if (rc)
		return err_wrap(e, "store txn");
	if (fence != 0 && !json_is_true(json_object_get(resp, "succeeded")) &&
	    etcd_txn_fenced_off(resp, fence)) {
		json_decref(resp);
		return err_set(
		    e, CSID_EPRECOND,
		    "fenced: the election term %llu is over; this server no longer leads",
		    (unsigned long long)fence);
	}
	rc = etcd_txn_outcome(ops, n, resp, &rev, e);
	/* After a conflict the caller reads again: from etcd, as the cache was behind. */
	if (rc == CSID_ECONFLICT)
		etcd_cache_forget(s, ops, n,
				  etcd_json_u64(json_object_get(resp, "header"), "revision"));
	json_decref(resp);
	if (rc)
		return rc;
	if (rev == 0) {
		rev = store_notify_index(&s->notify);
	} else if (store_notify_wait(&s->notify, rev - 1, s->request_ms) < rev) {
		/* Read your writes: the watch delivers the revision to the log first. */
		log_warn("msg=\"etcd watch behind a write\" revision=%llu",
			 (unsigned long long)rev);
		etcd_cache_forget(s, ops, n, rev);
	}
	if (index != NULL)
		*index = rev;
	return 0;
}

static int etcd_txn(struct store *st, const struct store_op *ops, size_t n, uint64_t *index,
		    struct err *e)
{
	return etcd_txn_run((struct store_etcd *)st, 0, ops, n, index, e);
}

static int etcd_txn_fenced(struct store *st, uint64_t fence, const struct store_op *ops, size_t n,
			   uint64_t *index, struct err *e)
{
	return etcd_txn_run((struct store_etcd *)st, fence, ops, n, index, e);
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

/* Appends one watch event (mu held). Returns 0, CSID_EPROTO or CSID_ENOMEM. */
static int etcd_log_event(struct store_etcd *s, json_t *ev, uint64_t *rev, struct err *e)
{
	const char *type = json_string_value(json_object_get(ev, "type"));
	bool del = type && strcmp(type, "DELETE") == 0;
	json_t *kv = json_object_get(ev, "kv");
	struct store_change ch = {.type = del ? STORE_OP_DELETE : STORE_OP_PUT};
	char *key = NULL;
	size_t klen, id_len;
	const char *id;
	int rc;

	if (etcd_b64_decode(json_string_value(json_object_get(kv, "key")), &key, &klen))
		return err_set(e, CSID_EPROTO, "etcd watch: a key that is not base64");
	if (!etcd_parse_key(s, key, klen, &ch.obj.kind, &id, &id_len)) {
		etcd_election_event(s, key, klen);
		free(key);
		return 0; /* not an object of ours (another kind or a stray key) */
	}
	ch.index = etcd_json_u64(kv, "mod_revision");
	if (del) {
		json_t *prev = json_object_get(ev, "prev_kv");

		rc = store_obj_set(&ch.obj, ch.obj.kind, id, id_len, NULL, 0,
				   etcd_json_u64(prev, "create_revision"), ch.index, e);
	} else {
		rc = etcd_kv_obj(s, kv, &ch.obj, e);
	}
	free(key);
	if (rc == 1)
		return 0;
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

/* The watch stream's callback: one message. */
static int etcd_watch_msg(void *arg, json_t *msg)
{
	struct store_etcd *s = arg;
	json_t *r = json_object_get(msg, "result"), *evs = json_object_get(r, "events");
	uint64_t rev = 0;
	size_t had;
	struct err e;
	int rc = 0;

	if (json_is_true(json_object_get(r, "canceled"))) {
		s->compact_to = etcd_json_u64(r, "compact_revision");
		return s->compact_to ? 1 : CSID_EUNAVAIL;
	}
	pthread_mutex_lock(&s->mu);
	if (s->paused || s->closing) {
		/* Stopped while the stream was still reading: nothing more reaches the log. */
		pthread_mutex_unlock(&s->mu);
		return CSID_ECANCELED;
	}
	had = s->log_n;
	for (size_t i = 0; i < json_array_size(evs) && rc == 0; i++)
		rc = etcd_log_event(s, json_array_get(evs, i), &rev, &e);
	if (rc) {
		/* Drop the message's changes: the watch resumes at its revision. */
		while (s->log_n > had)
			store_obj_free(&etcd_log_at(s, --s->log_n)->obj);
		rev = 0;
	} else {
		for (size_t i = had; i < s->log_n; i++)
			etcd_cache_apply(s->cache, etcd_log_at(s, i));
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

/* The watch thread: keeps the watch open from s->next until closing. */
static void *etcd_watch_main(void *arg)
{
	struct store_etcd *s = arg;
	struct clock *clk = clock_real();
	int64_t backoff = ETCD_BACKOFF_MIN_MS;
	struct err e;

	pthread_mutex_lock(&s->mu);
	while (!s->closing) {
		json_t *cr, *req;
		size_t klen;
		char *end;
		int rc;

		if (s->paused) {
			pthread_cond_wait(&s->cond, &s->mu);
			continue;
		}
		end = strdup(s->prefix);
		klen = s->prefix_len;
		cr = end ? (etcd_prefix_end(end, &klen),
			    etcd_range_req(s->prefix, s->prefix_len, end, klen))
			 : NULL;
		free(end);
		if (cr == NULL || !etcd_set_u64(cr, "start_revision", s->next) ||
		    json_object_set_new(cr, "prev_kv", json_true()) != 0 ||
		    (req = json_pack("{s:O}", "create_request", cr)) == NULL) {
			json_decref(cr);
			rc = err_set(&e, CSID_ENOMEM, "etcd watch: out of memory");
		} else {
			json_decref(cr);
			s->watching = true;
			etcd_stream_reset(&s->stream);
			pthread_mutex_unlock(&s->mu);
			rc = etcd_client_stream(s->c, "/v3/watch", req, &s->stream, etcd_watch_msg,
						s, &e);
			json_decref(req);
			pthread_mutex_lock(&s->mu);
			s->watching = false;
		}
		if (s->closing || s->paused)
			continue;
		if (rc == 1) {
			/* etcd compacted past s->next: the changes in between are gone. */
			log_warn("msg=\"etcd compacted past the watch; readers resynchronise\" "
				 "from=%llu compacted=%llu",
				 (unsigned long long)s->next, (unsigned long long)s->compact_to);
			etcd_log_clear(s);
			etcd_cache_clear(s->cache);
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

static int etcd_changes(struct store *st, uint64_t after, size_t limit, struct store_changes *out,
			struct err *e)
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
		rc = store_obj_set(&out->changes[i].obj, o->kind, o->id, strlen(o->id), o->value,
				   o->len, o->create_index, o->modify_index, e);
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
	etcd_cache_free(s->cache);
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
	int rc = etcd_cache_get(s->cache, ch->obj.kind, ch->obj.id, &o, e);

	store_obj_free(&o);
	if (rc == 1)
		return err_set(e, CSID_EINTERNAL, "%s %s: in the change log, not in the cache",
			       store_kind_name(ch->obj.kind), ch->obj.id);
	return 0;
}

int store_etcd_decode(const char *prefix, char *text, size_t len, size_t chunk, struct err *e)
{
	static const struct store_op ops[] = {
	    {STORE_OP_PUT, STORE_VOLUME, "a", "x", 1, 5},
	    {STORE_OP_DELETE, STORE_CLAIM, "n/a/b", NULL, 0, STORE_ANY},
	    {STORE_OP_PUT, STORE_NODE, "b", "y", 1, 0},
	};
	struct store_etcd s = {.prefix = (char *)prefix, .prefix_len = strlen(prefix), .next = 1};
	struct store_list l = {0};
	struct store_changes ch = {0};
	struct etcd_lines lines;
	json_t *doc = NULL;
	uint64_t rev;
	int rc = 0;

	if ((s.cache = etcd_cache_new()) == NULL || store_notify_init(&s.notify, 0) != 0) {
		etcd_cache_free(s.cache);
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	}
	pthread_mutex_init(&s.mu, NULL);
	/* As a unary answer: a list page, then the outcome of a Txn. */
	if (etcd_client_answer("answer", "/v3/kv/range", text, len, 200, &doc, e) == 0) {
		etcd_list_decode(&s, doc, &l, e);
		store_list_free(&l);
		etcd_txn_outcome(ops, sizeof(ops) / sizeof(ops[0]), doc, &rev, e);
		json_decref(doc);
	}
	/* As the watch stream, in chunks of chunk bytes (0: at once). */
	etcd_lines_init(&lines, "answer", etcd_watch_msg, &s, e);
	for (size_t off = 0; off < len;) {
		size_t n = chunk && chunk < len - off ? chunk : len - off;

		if (etcd_lines_feed(&lines, text + off, n) != n)
			break;
		off += n;
	}
	etcd_lines_fini(&lines);
	if (etcd_changes(&s.base, 0, 0, &ch, e) == 0) {
		for (size_t i = 0; i < ch.n && rc == 0; i++)
			rc = etcd_decode_check(&s, &ch.changes[i], e);
		store_changes_free(&ch);
	}
	etcd_log_clear(&s);
	free(s.log);
	etcd_cache_free(s.cache);
	store_notify_fini(&s.notify);
	pthread_mutex_destroy(&s.mu);
	return rc;
}

/* Reads etcd's revision (and checks that it answers). */
static int etcd_revision(struct store_etcd *s, uint64_t *rev, struct err *e)
{
	json_t *req = etcd_range_req(s->prefix, s->prefix_len, NULL, 0), *resp = NULL;
	int rc;

	if (req == NULL || json_object_set_new(req, "count_only", json_true()) != 0) {
		json_decref(req);
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	}
	rc = etcd_client_call(s->c, "/v3/kv/range", req, &resp, e);
	json_decref(req);
	if (rc)
		return rc;
	*rev = etcd_json_u64(json_object_get(resp, "header"), "revision");
	json_decref(resp);
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
	    (s->cache = etcd_cache_new()) == NULL) {
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
	if (store_notify_init(&s->notify, rev) != 0) {
		etcd_free(s);
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	}
	etcd_stream_init(&s->stream);
	pthread_mutex_init(&s->mu, NULL);
	if (clock_cond_init(&s->cond) != 0 ||
	    pthread_create(&s->watcher, NULL, etcd_watch_main, s) != 0) {
		store_notify_fini(&s->notify);
		etcd_free(s);
		return err_set(e, CSID_ENOMEM, "etcd: cannot start the watch thread");
	}
	*out = &s->base;
	return 0;
}
