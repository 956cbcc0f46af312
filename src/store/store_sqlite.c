/*
 * The SQLite store backend: the only SQL of the control plane (with its
 * schema's migrations, src/store/store_sqlite_schema.c).
 *
 * File. A csid store is a SQLite database whose application_id is 'csid'
 * and whose user_version is its schema version. Opening probes the file
 * first on a read-only connection: a file that is not a database, not a
 * csid store, from a newer schema, or that fails quick_check is refused
 * and nothing is written to it (src/store/store_sqlite_probe.c). Then
 * the migrations (src/store/store_sqlite_schema.c) run forward in one
 * IMMEDIATE transaction.
 *
 * Tables. objects(kind, id, value, create_index, modify_index), keyed on
 * (kind, id), so a list page is a range scan. A rowid table: as a WITHOUT
 * ROWID one (a single b-tree instead of the table and its key index) an
 * update of a volume record is a delete and an insert in the b-tree, and
 * bench_server's commits wrote 5.5 pages instead of 2.7 (records over
 * about 1 KB overflow such a b-tree's cells). The claim index's entries,
 * tens of bytes each, are in entries, the same columns WITHOUT ROWID: a
 * claim or a release inserts or deletes one, which wrote the table's
 * page and its key index's page there, one page here (bench_server: 2.9
 * pages per commit, 2.35 now). meta holds `index`: the store's index when
 * the last transaction deleted only (see below).
 *
 * The change log is in memory (src/store/store_log.h), not in the file:
 * writing it cost a commit two or three more pages (its leaf, its inner
 * page, and the pages its trims freed), and nothing needs it after a
 * restart, since every reader starts from a list. It holds what this
 * process wrote since it opened the store; older changes give
 * CSID_ERANGE, as in the etcd backend. The index must still go on from
 * where it was: on open it is the larger of meta's `index` and the
 * objects' largest modify_index. A transaction that puts anything leaves
 * its index as some object's modify_index, so only a batch whose last
 * transaction deletes only writes meta. The log has its own mutex, so
 * readers of the changes never wait for a commit.
 *
 * Connection. One connection with its prepared statements, serialised by
 * one mutex, in exclusive locking mode: the store is this process's alone
 * (another process opening it gets "locked"), the WAL index lives in the
 * heap (no -shm file), and a transaction makes no lock calls. Measured:
 * reads take microseconds, so a second, reading connection (which
 * exclusive mode rules out) would gain little; fewer pages and syscalls
 * per write gained about a tenth.
 *
 * Read cache. The objects this process committed or read lately
 * (src/store/store_cache.h, SQ_CACHE_BYTES), updated by every commit
 * before c.mu is released and filled by reads under c.mu, so it is the
 * file's state for whoever holds c.mu: a get and a transaction's look at
 * what it writes (sq_have) use it and run no statement. The file being
 * this process's alone is what makes it true.
 *
 * Group commit. Write transactions that come while another is being
 * written queue, and the next batch runs them all in one SQLite
 * transaction (sq_txn says how): each caller keeps its own index and
 * outcome, the batch pays one COMMIT and writes a page that several of
 * them changed to the WAL once.
 *
 * VFS: SQLite's default, but a transaction's WAL frames reach the file in
 * one write at its commit rather than two per page
 * (src/store/store_sqlite_vfs.c).
 *
 * Durability: WAL with synchronous=NORMAL. A commit is in the WAL file
 * when COMMIT returns, so it survives a kill -9 of the process; only a
 * power loss or kernel crash can lose the last commits, and the database
 * stays consistent even then.
 */
#include "store/store_int.h"
#include "store/store_log.h"
#include "store/store_sqlite_int.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_cache.h"
#include "store/store_sqlite_vfs.h"
#include "store/store_sqlite_wal.h"
#include "util/array.h"

/*
 * The read cache's size (sq_get): the records read or written lately,
 * beside the page cache. At 100,000 volumes a settled server's gets
 * would otherwise grow it to the whole catalogue.
 */
#define SQ_CACHE_BYTES (4 * 1024 * 1024)
/* Rides out a previous owner's exit; nothing else ever waits on a lock. */
#define SQ_BUSY_MS 200
/*
 * Checkpoints: src/store/store_sqlite_wal.c, not SQLite's own hook. A
 * page cache of 16 MiB instead of SQLite's 2: with the default, the
 * change log's and the volumes' pages were read again and again from the
 * WAL (bench_server: 16 pread calls per claim + release cycle, 2 now).
 * Memory-mapping the file saved little more (the pages read are mostly
 * the WAL's, which SQLite never maps) and would count the whole file in
 * the server's resident memory.
 */
#define SQ_PRAGMAS                                                                           \
	"PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;" \
	"PRAGMA cache_size=-16384;"
enum sq_stmt_id {
	SQ_BEGIN_WRITE,
	SQ_COMMIT,
	SQ_ROLLBACK,
	SQ_META_GET,
	SQ_META_SET,
	SQ_GET,
	SQ_HAVE,
	SQ_INSERT,
	SQ_UPDATE,
	SQ_DELETE,
	SQ_LIST_GT, /* id > ?2, no upper bound */
	SQ_LIST_GE, /* id >= ?2 */
	SQ_LIST_GT_LT, /* id > ?2 AND id < ?3 */
	SQ_LIST_GE_LT,
	SQ_MAX_MODIFY,
	SQ_COUNT_
};

#define SQ_OBJ_COLS "id, value, create_index, modify_index"
#define SQ_LIST_FROM(t) "SELECT " SQ_OBJ_COLS " FROM " t " WHERE kind = ?1 AND id "
/* The statements on one table of objects. */
#define SQ_ON_TABLE(t)                                                                          \
	[SQ_GET] = "SELECT " SQ_OBJ_COLS " FROM " t " WHERE kind = ?1 AND id = ?2",             \
	[SQ_HAVE] = "SELECT modify_index, create_index FROM " t " WHERE kind = ?1 AND id = ?2", \
	[SQ_INSERT] = "INSERT INTO " t " (kind, id, value, create_index, modify_index)"         \
		      " VALUES (?1, ?2, ?3, ?4, ?4)",                                           \
	[SQ_UPDATE] =                                                                           \
	    "UPDATE " t " SET value = ?3, modify_index = ?4 WHERE kind = ?1 AND id = ?2",       \
	[SQ_DELETE] = "DELETE FROM " t " WHERE kind = ?1 AND id = ?2",                          \
	[SQ_LIST_GT] = SQ_LIST_FROM(t) "> ?2 ORDER BY id LIMIT ?4",                             \
	[SQ_LIST_GE] = SQ_LIST_FROM(t) ">= ?2 ORDER BY id LIMIT ?4",                            \
	[SQ_LIST_GT_LT] = SQ_LIST_FROM(t) "> ?2 AND id < ?3 ORDER BY id LIMIT ?4",              \
	[SQ_LIST_GE_LT] = SQ_LIST_FROM(t) ">= ?2 AND id < ?3 ORDER BY id LIMIT ?4"

/*
 * The tables: objects (a rowid table) for the kinds whose records are
 * large, entries (WITHOUT ROWID) for the claim index's small ones.
 */
enum sq_table { SQ_OBJECTS, SQ_ENTRIES, SQ_TABLE_COUNT_ };

/* By table; the statements on no table are objects' only. */
static const char *const sq_sql[SQ_TABLE_COUNT_][SQ_COUNT_] = {
    [SQ_OBJECTS] =
	{
	    [SQ_BEGIN_WRITE] = "BEGIN IMMEDIATE",
	    [SQ_COMMIT] = "COMMIT",
	    [SQ_ROLLBACK] = "ROLLBACK",
	    [SQ_META_GET] = "SELECT value FROM meta WHERE key = ?1",
	    [SQ_META_SET] = "UPDATE meta SET value = ?2 WHERE key = ?1",
	    [SQ_MAX_MODIFY] = "SELECT max(coalesce((SELECT max(modify_index) FROM objects), 0),"
			      " coalesce((SELECT max(modify_index) FROM entries), 0))",
	    SQ_ON_TABLE("objects"),
	},
    [SQ_ENTRIES] = {SQ_ON_TABLE("entries")},
};

static enum sq_table sq_table(enum store_kind kind)
{
	return kind == STORE_CLAIM ? SQ_ENTRIES : SQ_OBJECTS;
}

struct sq_conn {
	pthread_mutex_t mu;
	sqlite3 *db;
	/* [SQ_OBJECTS] for every statement; [SQ_ENTRIES] for those on a table. */
	sqlite3_stmt *st[SQ_TABLE_COUNT_][SQ_COUNT_];
};

/*
 * One caller's transaction waiting in the group commit's queue (on the
 * caller's stack until done).
 */
struct sq_req {
	const struct store_op *ops;
	size_t n;
	struct err *e;
	uint64_t index; /* its index, or the current one when it changed nothing */
	int rc;
	bool final; /* its outcome is decided (rc), in this batch */
	bool done; /* its batch has ended: the caller may return */
	pthread_cond_t cond; /* done, or it is its turn to lead */
	struct sq_req *next;
};

struct store_sqlite {
	struct store base;
	struct sq_conn c;
	uint64_t index; /* under c.mu, like the rest */
	/* The change log and the read cache, under lmu (taken inside c.mu, never the other way). */
	pthread_mutex_t lmu;
	struct store_log log;
	struct store_cache *cache;
	_Atomic uint64_t reads; /* point reads that ran a statement (store_sqlite_reads) */
	/* The group commit: callers queue under qmu; one leads a batch at a time. */
	pthread_mutex_t qmu;
	struct sq_req *qhead, **qtail;
	bool leading;
	bool held; /* store_sqlite_hold */
	size_t queued;
	_Atomic uint64_t commits;
	struct store_notify notify;
	struct store_sqlite_wal *wal;
	char *path, *wal_path;
};

/* Maps a SQLite result code to a csid code. */
static int sq_code(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return CSID_EUNAVAIL;
	case SQLITE_NOMEM:
		return CSID_ENOMEM;
	case SQLITE_FULL:
	case SQLITE_TOOBIG:
		return CSID_EEXHAUSTED;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return CSID_EPERM;
	default:
		return CSID_EIO;
	}
}

int store_sqlite_fail(struct err *e, sqlite3 *db, int rc, const char *what)
{
	int code = sq_code(rc);

	if (code == 0)
		code = CSID_EINTERNAL;
	return err_set(e, code, "%s: sqlite: %s", what,
		       db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
}

/* Resets and clears kind's table's cached statement for its next use. */
static sqlite3_stmt *sq_kstmt(struct sq_conn *c, enum sq_stmt_id id, enum store_kind kind)
{
	sqlite3_stmt *st = c->st[sq_table(kind)][id];

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return st;
}

/* The same for a statement on no table, or on objects. */
static sqlite3_stmt *sq_stmt(struct sq_conn *c, enum sq_stmt_id id)
{
	return sq_kstmt(c, id, STORE_VOLUME);
}

/* Runs a statement that returns no rows. */
static int sq_run(struct sq_conn *c, sqlite3_stmt *st, const char *what, struct err *e)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	if (rc != SQLITE_DONE)
		return store_sqlite_fail(e, c->db, rc, what);
	return 0;
}

static int sq_exec(struct sq_conn *c, enum sq_stmt_id id, const char *what, struct err *e)
{
	return sq_run(c, sq_stmt(c, id), what, e);
}

static void sq_rollback(struct sq_conn *c)
{
	if (!sqlite3_get_autocommit(c->db))
		sq_exec(c, SQ_ROLLBACK, "rollback", NULL);
}

static int sq_meta_get(struct sq_conn *c, const char *key, uint64_t *v, struct err *e)
{
	sqlite3_stmt *st = sq_stmt(c, SQ_META_GET);
	int rc;

	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*v = (uint64_t)sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	if (rc != SQLITE_ROW)
		return store_sqlite_fail(e, c->db, rc == SQLITE_DONE ? SQLITE_CORRUPT : rc, key);
	return 0;
}

static int sq_meta_set(struct sq_conn *c, const char *key, uint64_t v, struct err *e)
{
	sqlite3_stmt *st = sq_stmt(c, SQ_META_SET);

	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)v);
	return sq_run(c, st, key, e);
}

/* Binds (kind, id) as ?1, ?2. */
static void sq_bind_key(sqlite3_stmt *st, enum store_kind kind, const char *id)
{
	sqlite3_bind_int(st, 1, (int)kind);
	sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
}

/* Copies the object of a row of SQ_OBJ_COLS into *o. */
static int sq_row_obj(sqlite3_stmt *st, enum store_kind kind, struct store_obj *o, struct err *e)
{
	const char *id = (const char *)sqlite3_column_text(st, 0);
	size_t id_len = (size_t)sqlite3_column_bytes(st, 0);
	const char *value = sqlite3_column_blob(st, 1);
	size_t len = (size_t)sqlite3_column_bytes(st, 1);

	if (id == NULL)
		return err_set(e, CSID_ENOMEM, "%s: out of memory", store_kind_name(kind));
	return store_obj_set(o, kind, id, id_len, value ? value : "", len,
			     (uint64_t)sqlite3_column_int64(st, 2),
			     (uint64_t)sqlite3_column_int64(st, 3), e);
}

/*
 * From the read cache when it knows (kind, id), else from the file, and
 * then the cache knows it. The cache is true: this process alone writes
 * the file (exclusive locking mode), every commit updates the cache
 * before its writer returns or its index is published (sq_publish), and
 * a read fills it under c.mu, so no commit falls between the read and
 * the fill. A get between a COMMIT and its sq_publish answers the
 * version before, as if it came just before that COMMIT.
 */
static int sq_get(struct store *st, enum store_kind kind, const char *id, struct store_obj *out,
		  struct err *e)
{
	struct store_sqlite *s = (struct store_sqlite *)st;
	struct sq_conn *c = &s->c;
	sqlite3_stmt *q;
	int rc;

	pthread_mutex_lock(&s->lmu);
	rc = store_cache_get(s->cache, kind, id, out, e);
	pthread_mutex_unlock(&s->lmu);
	if (rc != 1)
		return rc;
	pthread_mutex_lock(&c->mu);
	atomic_fetch_add(&s->reads, 1);
	q = sq_kstmt(c, SQ_GET, kind);
	sq_bind_key(q, kind, id);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW)
		rc = sq_row_obj(q, kind, out, e);
	else if (rc == SQLITE_DONE)
		rc = err_set(e, CSID_ENOTFOUND, "%s %s: not found", store_kind_name(kind), id);
	else
		rc = store_sqlite_fail(e, c->db, rc, "get");
	sqlite3_reset(q);
	if (rc == 0 || rc == CSID_ENOTFOUND) {
		pthread_mutex_lock(&s->lmu);
		store_cache_fill(s->cache, kind, id, rc == 0 ? out : NULL, s->index);
		pthread_mutex_unlock(&s->lmu);
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

/*
 * The smallest string above every string that starts with prefix, into
 * end: prefix with its last byte below 0xff incremented and the rest cut.
 * Returns false when there is none (empty or all 0xff: no upper bound).
 */
static bool sq_prefix_end(const char *prefix, char *end)
{
	size_t n = strlen(prefix);

	while (n > 0 && (unsigned char)prefix[n - 1] == 0xff)
		n--;
	if (n == 0)
		return false;
	memcpy(end, prefix, n);
	end[n - 1] = (char)((unsigned char)end[n - 1] + 1);
	end[n] = '\0';
	return true;
}

/* Reads one list page into out (inside the caller's read transaction). */
static int sq_list_rows(struct sq_conn *c, enum store_kind kind, const char *prefix,
			const char *after_id, size_t limit, struct store_list *out, struct err *e)
{
	char end[STORE_ID_MAX + 1];
	bool gt = after_id[0] != '\0' && strcmp(after_id, prefix) >= 0;
	bool bounded = sq_prefix_end(prefix, end);
	enum sq_stmt_id id =
	    gt ? (bounded ? SQ_LIST_GT_LT : SQ_LIST_GT) : (bounded ? SQ_LIST_GE_LT : SQ_LIST_GE);
	sqlite3_stmt *q = sq_kstmt(c, id, kind);
	size_t cap = 0;
	int rc;

	sqlite3_bind_int(q, 1, (int)kind);
	sqlite3_bind_text(q, 2, gt ? after_id : prefix, -1, SQLITE_STATIC);
	if (bounded)
		sqlite3_bind_text(q, 3, end, -1, SQLITE_STATIC);
	/* One more than asked, to know whether another page follows. */
	sqlite3_bind_int64(q, 4, limit > 0 ? (sqlite3_int64)limit + 1 : -1);
	while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
		if (limit > 0 && out->n == limit) {
			out->more = true;
			break;
		}
		rc = array_grow((void **)&out->objs, &cap, out->n + 1, sizeof(out->objs[0]));
		if (rc < 0) {
			rc = err_set(e, rc, "out of memory");
			goto done;
		}
		rc = sq_row_obj(q, kind, &out->objs[out->n], e);
		if (rc < 0)
			goto done;
		out->n++;
	}
	rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? 0 : store_sqlite_fail(e, c->db, rc, "list");
done:
	sqlite3_reset(q);
	return rc;
}

static int sq_list(struct store *st, enum store_kind kind, const char *prefix, const char *after_id,
		   size_t limit, struct store_list *out, struct err *e)
{
	struct store_sqlite *s = (struct store_sqlite *)st;
	struct sq_conn *c = &s->c;
	int rc;

	pthread_mutex_lock(&c->mu);
	out->index = s->index;
	rc = sq_list_rows(c, kind, prefix, after_id, limit, out, e);
	if (rc < 0) {
		store_list_free(out);
		err_wrap(e, "list %s", store_kind_name(kind));
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

static int sq_changes(struct store *st, uint64_t after, size_t limit, bool values,
		      struct store_changes *out, struct err *e)
{
	struct store_sqlite *s = (struct store_sqlite *)st;
	int rc;

	pthread_mutex_lock(&s->lmu);
	rc = store_log_read(&s->log, after, limit, values, out, e);
	pthread_mutex_unlock(&s->lmu);
	return rc;
}

/*
 * The modify and create index of (kind, id) as this batch sees it; 0 and
 * 0 when missing: from the batch's own changes staged so far, else from
 * the read cache, which is the file's state under c.mu (every commit
 * updates it before c.mu is released), else from the file.
 */
static int sq_have(struct store_sqlite *s, const struct store_log *stage, enum store_kind kind,
		   const char *id, uint64_t *have, uint64_t *created, struct err *e)
{
	struct sq_conn *c = &s->c;
	sqlite3_stmt *q;
	int rc;

	for (size_t i = stage->n; i-- > 0;) {
		const struct store_log_change *ch = &stage->log[stage->head + i];

		if (ch->kind == kind && strcmp(ch->id, id) == 0) {
			*have = ch->type == STORE_OP_PUT ? ch->index : 0;
			*created = ch->type == STORE_OP_PUT ? ch->create_index : 0;
			return 0;
		}
	}
	pthread_mutex_lock(&s->lmu);
	rc = store_cache_version(s->cache, kind, id, have, created);
	pthread_mutex_unlock(&s->lmu);
	if (rc >= 0)
		return 0;
	atomic_fetch_add(&s->reads, 1);
	q = sq_kstmt(c, SQ_HAVE, kind);
	sq_bind_key(q, kind, id);
	rc = sqlite3_step(q);
	*have = *created = 0;
	if (rc == SQLITE_ROW) {
		*have = (uint64_t)sqlite3_column_int64(q, 0);
		*created = (uint64_t)sqlite3_column_int64(q, 1);
	}
	sqlite3_reset(q);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return store_sqlite_fail(e, c->db, rc, "read");
	return 0;
}

/*
 * Writes op as a change of transaction index, and stages the change in
 * stage (the batch's, moved into the log when it commits).
 */
static int sq_apply(struct sq_conn *c, const struct store_op *op, uint64_t have, uint64_t created,
		    uint64_t index, struct store_log *stage, struct err *e)
{
	const char *value = op->value ? op->value : "";
	struct store_val *val = NULL;
	size_t id_len = strlen(op->id);
	char *id = NULL;
	sqlite3_stmt *q;
	int rc;

	if (op->type == STORE_OP_DELETE)
		q = sq_kstmt(c, SQ_DELETE, op->kind);
	else
		q = sq_kstmt(c, have ? SQ_UPDATE : SQ_INSERT, op->kind);
	sq_bind_key(q, op->kind, op->id);
	if (op->type == STORE_OP_PUT) {
		sqlite3_bind_blob64(q, 3, value, op->len, SQLITE_STATIC);
		sqlite3_bind_int64(q, 4, (sqlite3_int64)index);
	}
	rc = sq_run(c, q, "write", e);
	if (rc < 0)
		return rc;
	id = malloc(id_len + 1);
	if (id != NULL && op->type == STORE_OP_PUT)
		val = store_val_new(value, op->len);
	if (id == NULL || (op->type == STORE_OP_PUT && val == NULL) ||
	    store_log_reserve(stage, 1) < 0) {
		free(id);
		store_val_put(val);
		return err_set(e, CSID_ENOMEM, "record change: out of memory");
	}
	memcpy(id, op->id, id_len + 1);
	store_log_append(stage, index, op->type, op->kind, id, val, have ? created : index);
	return 0;
}

/*
 * Checks r's conditions (nothing written when one fails) and writes its
 * ops as the changes of index next, staged in stage; *pos is how many it
 * recorded, *puts whether one of them is a put.
 */
static int sq_apply_req(struct store_sqlite *s, struct sq_req *r, uint64_t next,
			struct store_log *stage, uint64_t *pos, bool *puts)
{
	struct sq_conn *c = &s->c;
	uint64_t have[STORE_TXN_OPS_MAX], created[STORE_TXN_OPS_MAX];
	const struct store_op *ops = r->ops;
	int rc = 0;

	*pos = 0;
	*puts = false;
	for (size_t i = 0; rc == 0 && i < r->n; i++) {
		rc = sq_have(s, stage, ops[i].kind, ops[i].id, &have[i], &created[i], r->e);
		if (rc == 0 && !store_cond_holds(ops[i].expect_index, have[i]))
			rc = store_conflict(r->e, &ops[i], have[i]);
	}
	for (size_t i = 0; rc == 0 && i < r->n; i++) {
		if (ops[i].type == STORE_OP_DELETE && have[i] == 0)
			continue;
		rc = sq_apply(c, &ops[i], have[i], created[i], next, stage, r->e);
		(*pos)++;
		*puts = *puts || ops[i].type == STORE_OP_PUT;
	}
	return rc;
}

/* Gives every request of batch not decided yet the outcome rc (message: what failed). */
static void sq_fail_rest(struct sq_req *batch, int rc, const struct err *why)
{
	for (struct sq_req *r = batch; r != NULL; r = r->next) {
		if (r->final)
			continue;
		r->rc = err_set(r->e, rc, "%s", why->msg);
		r->final = true;
	}
}

/*
 * Before the COMMIT of a batch whose last index is last: meta's index
 * when that transaction only deleted (see the top of the file), and room
 * in the log for the staged changes, so that moving them in after the
 * COMMIT cannot fail.
 */
static int sq_precommit(struct store_sqlite *s, uint64_t last, bool last_puts,
			const struct store_log *stage, struct err *e)
{
	int rc = 0;

	if (last > s->index && !last_puts)
		rc = sq_meta_set(&s->c, "index", last, e);
	if (rc == 0) {
		pthread_mutex_lock(&s->lmu);
		rc = store_log_reserve(&s->log, stage->n);
		pthread_mutex_unlock(&s->lmu);
		if (rc < 0)
			rc = err_set(e, CSID_ENOMEM, "change log: out of memory");
	}
	return rc;
}

/*
 * Moves the committed batch's staged changes into the log (room
 * reserved), and into the read cache.
 */
static void sq_publish(struct store_sqlite *s, struct store_log *stage, uint64_t last)
{
	pthread_mutex_lock(&s->lmu);
	for (size_t i = 0; i < stage->n; i++) {
		struct store_log_change *ch = &stage->log[stage->head + i];
		struct store_change cached = {.index = ch->index,
					      .type = ch->type,
					      .obj = {.kind = ch->kind,
						      .id = ch->id,
						      .value = ch->val ? ch->val->data : NULL,
						      .len = ch->val ? ch->val->len : 0,
						      .create_index = ch->create_index,
						      .modify_index = ch->index}};

		store_cache_apply(s->cache, &cached);

		store_log_append(&s->log, ch->index, ch->type, ch->kind, ch->id, ch->val,
				 ch->create_index);
	}
	store_log_commit(&s->log, last);
	pthread_mutex_unlock(&s->lmu);
	stage->n = 0;
	store_log_fini(stage);
}

/*
 * Runs the requests of batch in one SQLite transaction, each with the
 * next index in queue order, and commits them together (with c.mu held).
 * A request whose condition fails writes nothing and fails alone. One
 * that fails otherwise (I/O, memory) may have left writes behind, so the
 * transaction is rolled back and the others run again without it.
 */
static void sq_run_batch(struct store_sqlite *s, struct sq_req *batch)
{
	struct sq_conn *c = &s->c;
	struct store_log stage;
	uint64_t next, pos;
	bool again, puts, last_puts;
	struct err e;
	int rc;

	err_clear(&e);
	store_log_init(&stage, s->index);
	do {
		again = false;
		last_puts = true;
		next = s->index + 1;
		store_log_fini(&stage);
		store_log_init(&stage, s->index);
		rc = sq_exec(c, SQ_BEGIN_WRITE, "begin", &e);
		for (struct sq_req *r = batch; rc == 0 && r != NULL; r = r->next) {
			if (r->final)
				continue;
			r->rc = sq_apply_req(s, r, next, &stage, &pos, &puts);
			if (r->rc == CSID_ECONFLICT) {
				r->final = true;
			} else if (r->rc < 0) {
				err_wrap(r->e, "store txn");
				r->final = true;
				again = true;
				break;
			} else {
				r->index = pos > 0 ? next++ : next - 1;
				if (pos > 0)
					last_puts = puts;
			}
		}
		if (rc == 0 && !again)
			rc = sq_precommit(s, next - 1, last_puts, &stage, &e);
		if (rc == 0 && !again)
			rc = sq_exec(c, SQ_COMMIT, "commit", &e);
		if (rc < 0 || again)
			sq_rollback(c);
	} while (again);
	if (rc < 0) {
		store_log_fini(&stage);
		err_wrap(&e, "store txn");
		sq_fail_rest(batch, rc, &e);
		return;
	}
	for (struct sq_req *r = batch; r != NULL; r = r->next)
		r->final = true;
	sq_publish(s, &stage, next - 1);
	if (next - 1 > s->index) {
		atomic_fetch_add(&s->commits, 1);
		s->index = next - 1;
		store_notify_publish(&s->notify, s->index);
	}
}

/*
 * Leads one batch: takes every queued request, runs them together, and
 * wakes their callers and the next leader. With qmu held (released while
 * the batch runs).
 */
static void sq_lead(struct store_sqlite *s)
{
	struct sq_req *batch = s->qhead, *next;

	s->qhead = NULL;
	s->qtail = &s->qhead;
	s->queued = 0;
	s->leading = true;
	pthread_mutex_unlock(&s->qmu);
	pthread_mutex_lock(&s->c.mu);
	sq_run_batch(s, batch);
	pthread_mutex_unlock(&s->c.mu);
	pthread_mutex_lock(&s->qmu);
	s->leading = false;
	for (struct sq_req *r = batch; r != NULL; r = next) {
		next = r->next;
		r->done = true;
		pthread_cond_signal(&r->cond);
	}
	/* Those that came meanwhile: the first leads their batch. */
	if (s->qhead != NULL && !s->held)
		pthread_cond_signal(&s->qhead->cond);
}

/*
 * Group commit: a caller queues its transaction; when no batch is
 * running it leads one of everything queued, else it waits for its
 * outcome. Writers that come together (the API's I/O thread, the
 * reconciler's workers) so share one COMMIT and its WAL frames: a page
 * written by several of them (the change log's last, the claim index's)
 * goes to the WAL once. Each keeps its own index, in queue order, and its
 * own outcome.
 */
static int sq_txn(struct store *st, const struct store_op *ops, size_t n, uint64_t *index,
		  struct err *e)
{
	struct store_sqlite *s = (struct store_sqlite *)st;
	struct sq_req req = {.ops = ops, .n = n, .e = e};

	pthread_cond_init(&req.cond, NULL);
	pthread_mutex_lock(&s->qmu);
	*s->qtail = &req;
	s->qtail = &req.next;
	s->queued++;
	while (!req.done) {
		if (s->leading || s->held)
			pthread_cond_wait(&req.cond, &s->qmu);
		else
			sq_lead(s);
	}
	pthread_mutex_unlock(&s->qmu);
	pthread_cond_destroy(&req.cond);
	if (req.rc == 0 && index != NULL)
		*index = req.index;
	return req.rc;
}

size_t store_sqlite_hold(struct store *st, bool hold)
{
	struct store_sqlite *s = (struct store_sqlite *)st;
	size_t queued;

	pthread_mutex_lock(&s->qmu);
	s->held = hold;
	queued = s->queued;
	if (!hold && !s->leading && s->qhead != NULL)
		pthread_cond_signal(&s->qhead->cond);
	pthread_mutex_unlock(&s->qmu);
	return queued;
}

uint64_t store_sqlite_commits(struct store *st)
{
	return atomic_load(&((struct store_sqlite *)st)->commits);
}

uint64_t store_sqlite_reads(struct store *st)
{
	return atomic_load(&((struct store_sqlite *)st)->reads);
}

uint64_t store_sqlite_pages(struct store *st)
{
	return store_sqlite_wal_pages(((struct store_sqlite *)st)->wal);
}

static uint64_t sq_index(struct store *st)
{
	return store_notify_index(&((struct store_sqlite *)st)->notify);
}

static uint64_t sq_wait(struct store *st, uint64_t after, int64_t timeout_ms)
{
	return store_notify_wait(&((struct store_sqlite *)st)->notify, after, timeout_ms);
}

/*
 * Adaptive: a thread that finds the connection taken spins a little
 * before it sleeps. Most holds are reads of a few microseconds, so on two
 * cores the holder usually ends within the spin; sleeping cost two
 * context switches each (about one per claim + release cycle each for
 * the I/O thread and the reconciler's workers, perf sched).
 */
static void sq_mutex_init(pthread_mutex_t *mu)
{
	pthread_mutexattr_t attr;

	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(mu, &attr);
	pthread_mutexattr_destroy(&attr);
}

static void sq_conn_close(struct sq_conn *c)
{
	for (int t = 0; t < SQ_TABLE_COUNT_; t++)
		for (int i = 0; i < SQ_COUNT_; i++)
			sqlite3_finalize(c->st[t][i]);
	sqlite3_close_v2(c->db);
	pthread_mutex_destroy(&c->mu);
	memset(c, 0, sizeof(*c));
}

static void sq_close(struct store *st)
{
	struct store_sqlite *s = (struct store_sqlite *)st;

	store_notify_fini(&s->notify);
	if (s->wal != NULL)
		sqlite3_wal_hook(s->c.db, NULL, NULL);
	store_sqlite_wal_stop(s->wal);
	sq_conn_close(&s->c);
	store_log_fini(&s->log);
	store_cache_free(s->cache);
	pthread_mutex_destroy(&s->lmu);
	pthread_mutex_destroy(&s->qmu);
	free(s->wal_path);
	free(s->path);
	free(s);
}

static const struct store_ops sq_ops = {
    .get = sq_get,
    .list = sq_list,
    .txn = sq_txn,
    .changes = sq_changes,
    .index = sq_index,
    .wait = sq_wait,
    .close = sq_close,
};

/*
 * Opens the connection: exclusive locking first (so the WAL index is never
 * shared memory), then WAL. A store another process holds is "locked".
 */
static int sq_conn_open(struct sq_conn *c, const char *path, struct err *e)
{
	int rc;

	rc = sqlite3_open_v2(path, &c->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
			     store_sqlite_vfs());
	if (rc != SQLITE_OK)
		return store_sqlite_fail(e, c->db, rc, "open");
	sqlite3_extended_result_codes(c->db, 1);
	sqlite3_busy_timeout(c->db, SQ_BUSY_MS);
	rc = sqlite3_exec(c->db, SQ_PRAGMAS, NULL, NULL, NULL);
	if ((rc & 0xff) == SQLITE_BUSY)
		return err_set(e, CSID_EUNAVAIL, "locked: another process has it open");
	if (rc != SQLITE_OK)
		return store_sqlite_fail(e, c->db, rc, "set WAL mode");
	return 0;
}

static int sq_prepare(struct sq_conn *c, struct err *e)
{
	int rc;

	for (int t = 0; t < SQ_TABLE_COUNT_; t++)
		for (int i = 0; i < SQ_COUNT_; i++) {
			if (sq_sql[t][i] == NULL)
				continue;
			rc = sqlite3_prepare_v3(c->db, sq_sql[t][i], -1, SQLITE_PREPARE_PERSISTENT,
						&c->st[t][i], NULL);
			if (rc != SQLITE_OK)
				return store_sqlite_fail(e, c->db, rc, "prepare");
		}
	return 0;
}

/*
 * Reads the index: the larger of meta's and the objects' largest
 * modify_index (one scan of the objects, at open only). The change log
 * starts there.
 */
static int sq_load(struct store_sqlite *s, struct err *e)
{
	sqlite3_stmt *q;
	uint64_t modified = 0;
	int rc;

	rc = sq_meta_get(&s->c, "index", &s->index, e);
	if (rc < 0)
		return rc;
	q = sq_stmt(&s->c, SQ_MAX_MODIFY);
	rc = sqlite3_step(q);
	if (rc == SQLITE_ROW)
		modified = (uint64_t)sqlite3_column_int64(q, 0);
	sqlite3_reset(q);
	if (rc != SQLITE_ROW)
		return store_sqlite_fail(e, s->c.db, rc, "read index");
	if (modified > s->index)
		s->index = modified;
	store_log_init(&s->log, s->index);
	return 0;
}

int store_sqlite_open(const char *path, struct store **out, struct err *e)
{
	struct store_sqlite *s = NULL;
	int rc;

	err_clear(e);
	*out = NULL;
	if (path == NULL || path[0] == '\0')
		return err_set(e, CSID_EINVAL, "sqlite store: empty path");
	rc = store_sqlite_probe(path, e);
	if (rc < 0)
		return rc;
	s = calloc(1, sizeof(*s));
	if (s != NULL && (s->wal_path = malloc(strlen(path) + 5)) != NULL)
		snprintf(s->wal_path, strlen(path) + 5, "%s-wal", path);
	if (s == NULL || (s->path = strdup(path)) == NULL || s->wal_path == NULL ||
	    (s->cache = store_cache_new(SQ_CACHE_BYTES)) == NULL ||
	    store_notify_init(&s->notify, 0) != 0) {
		if (s != NULL) {
			free(s->path);
			free(s->wal_path);
			store_cache_free(s->cache);
		}
		free(s);
		return err_set(e, CSID_ENOMEM, "sqlite store %s: out of memory", path);
	}
	s->base.ops = &sq_ops;
	s->base.backend = "sqlite";
	sq_mutex_init(&s->c.mu);
	sq_mutex_init(&s->qmu);
	sq_mutex_init(&s->lmu);
	s->qtail = &s->qhead;
	rc = sq_conn_open(&s->c, path, e);
	if (rc == 0)
		rc = store_sqlite_migrate(s->c.db, s->path, e);
	if (rc == 0)
		rc = sq_prepare(&s->c, e);
	if (rc == 0)
		rc = sq_load(s, e);
	if (rc == 0 && store_sqlite_wal_start(s->c.db, s->wal_path, &s->wal) != 0)
		rc = err_set(e, CSID_ENOMEM, "cannot start the WAL thread");
	if (rc < 0) {
		err_wrap(e, "sqlite store %s", path);
		sq_close(&s->base);
		return rc;
	}
	store_notify_publish(&s->notify, s->index);
	*out = &s->base;
	return 0;
}
