/*
 * csi-hostpath state in SQLite. Why SQLite, in WAL mode with
 * synchronous=NORMAL: a commit appends to the write-ahead log with one
 * write(2) and no fsync, so it costs tens of microseconds (the plugin must
 * create and delete a volume in under 0.5 ms), yet a committed
 * transaction lives in the kernel's page cache the moment the call
 * returns, so a kill -9 of the plugin loses nothing: SQLite replays the log
 * on the next open. Only a power loss can drop the last few commits, which
 * a test plugin whose volumes are plain directories may accept (the
 * directories would not survive it either). SQLite also serialises
 * several plugin processes that share one data dir (a controller and node
 * plugins), which a hand-written journal would have to reimplement.
 *
 * Tables: volumes, snapshots (seq = AUTOINCREMENT key, the paging token),
 * publications (volume, node), stages (node, volume), mounts (target path),
 * nodes, and group_snapshots with group_members (snapshot -> group).
 * Statements are prepared once and reused.
 */
#include "hp_store.h"

#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum hp_store_q {
	HP_Q_VOL_GET,
	HP_Q_VOL_BY_NAME,
	HP_Q_VOL_INSERT,
	HP_Q_VOL_DELETE,
	HP_Q_VOL_UPDATE,
	HP_Q_VOL_LIST,
	HP_Q_USED,
	HP_Q_MAXSEQ_VOL,
	HP_Q_MAXSEQ_SNAP,
	HP_Q_SNAP_GET,
	HP_Q_SNAP_BY_NAME,
	HP_Q_SNAP_INSERT,
	HP_Q_SNAP_DELETE,
	HP_Q_SNAP_LIST,
	HP_Q_PUB_GET,
	HP_Q_PUB_PUT,
	HP_Q_PUB_DELETE,
	HP_Q_PUB_DELETE_ALL,
	HP_Q_PUB_LIST_VOL,
	HP_Q_PUB_LIST_NODE,
	HP_Q_PUB_COUNT,
	HP_Q_STAGE_GET,
	HP_Q_STAGE_PUT,
	HP_Q_STAGE_DELETE,
	HP_Q_MOUNT_GET,
	HP_Q_MOUNT_PUT,
	HP_Q_MOUNT_DELETE,
	HP_Q_MOUNT_LIST,
	HP_Q_NODE_USES,
	HP_Q_NODE_ADD,
	HP_Q_NODE_KNOWN,
	HP_Q_NODE_LIST,
	HP_Q_GROUP_GET,
	HP_Q_GROUP_BY_NAME,
	HP_Q_GROUP_INSERT,
	HP_Q_GROUP_MEMBER_ADD,
	HP_Q_GROUP_MEMBERS,
	HP_Q_GROUP_DELETE_SNAPS,
	HP_Q_GROUP_DELETE_MEMBERS,
	HP_Q_GROUP_DELETE,
	HP_Q_BEGIN,
	HP_Q_BEGIN_WRITE,
	HP_Q_COMMIT,
	HP_Q_ROLLBACK,
	HP_Q_COUNT
};

#define HP_VOL_COLS "seq, id, name, capacity, block, source, params, mut"
/* A snapshot's group (hp_snap.group) comes from the group_members table. */
#define HP_SNAP_COLS                                      \
	"seq, id, name, source, size, block, created_ns," \
	" coalesce((SELECT group_id FROM group_members"   \
	" WHERE snapshot_id = snapshots.id), '')"
#define HP_MNT_COLS "node_id, volume_id, path, staging, readonly, mode, cap"
#define HP_GROUP_COLS "seq, id, name, params, created_ns"

static const char *const hp_store_sql[HP_Q_COUNT] = {
    [HP_Q_VOL_GET] = "SELECT " HP_VOL_COLS " FROM volumes WHERE id = ?1",
    [HP_Q_VOL_BY_NAME] = "SELECT " HP_VOL_COLS " FROM volumes WHERE name = ?1",
    [HP_Q_VOL_INSERT] = "INSERT INTO volumes(id, name, capacity, block, source, params, mut)"
			" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [HP_Q_VOL_DELETE] = "DELETE FROM volumes WHERE id = ?1",
    [HP_Q_VOL_UPDATE] = "UPDATE volumes SET capacity = ?2, mut = ?3 WHERE id = ?1",
    [HP_Q_VOL_LIST] = "SELECT " HP_VOL_COLS " FROM volumes WHERE seq > ?1"
		      " ORDER BY seq LIMIT ?2",
    [HP_Q_USED] = "SELECT (SELECT coalesce(sum(capacity), 0) FROM volumes) +"
		  " (SELECT coalesce(sum(size), 0) FROM snapshots)",
    [HP_Q_MAXSEQ_VOL] = "SELECT coalesce((SELECT seq FROM sqlite_sequence"
			" WHERE name = 'volumes'), 0)",
    [HP_Q_MAXSEQ_SNAP] = "SELECT coalesce((SELECT seq FROM sqlite_sequence"
			 " WHERE name = 'snapshots'), 0)",
    [HP_Q_SNAP_GET] = "SELECT " HP_SNAP_COLS " FROM snapshots WHERE id = ?1",
    [HP_Q_SNAP_BY_NAME] = "SELECT " HP_SNAP_COLS " FROM snapshots WHERE name = ?1",
    [HP_Q_SNAP_INSERT] = "INSERT INTO snapshots(id, name, source, size, block, created_ns)"
			 " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [HP_Q_SNAP_DELETE] = "DELETE FROM snapshots WHERE id = ?1",
    [HP_Q_SNAP_LIST] = "SELECT " HP_SNAP_COLS " FROM snapshots WHERE seq > ?1 AND"
		       " (?2 IS NULL OR source = ?2) ORDER BY seq LIMIT ?3",
    [HP_Q_PUB_GET] = "SELECT volume_id, node_id, readonly, cap FROM publications"
		     " WHERE volume_id = ?1 AND node_id = ?2",
    [HP_Q_PUB_PUT] = "INSERT OR REPLACE INTO publications(volume_id, node_id, readonly, cap)"
		     " VALUES (?1, ?2, ?3, ?4)",
    [HP_Q_PUB_DELETE] = "DELETE FROM publications WHERE volume_id = ?1 AND node_id = ?2",
    [HP_Q_PUB_DELETE_ALL] = "DELETE FROM publications WHERE volume_id = ?1",
    [HP_Q_PUB_LIST_VOL] = "SELECT volume_id, node_id, readonly, cap FROM publications"
			  " WHERE volume_id = ?1 ORDER BY node_id",
    [HP_Q_PUB_LIST_NODE] = "SELECT volume_id, node_id, readonly, cap FROM publications"
			   " WHERE node_id = ?1 ORDER BY volume_id",
    [HP_Q_PUB_COUNT] = "SELECT count(*) FROM publications WHERE node_id = ?1",
    [HP_Q_STAGE_GET] = "SELECT " HP_MNT_COLS " FROM stages WHERE node_id = ?1"
		       " AND volume_id = ?2",
    [HP_Q_STAGE_PUT] = "INSERT OR REPLACE INTO stages(" HP_MNT_COLS ")"
		       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [HP_Q_STAGE_DELETE] = "DELETE FROM stages WHERE node_id = ?1 AND volume_id = ?2",
    [HP_Q_MOUNT_GET] = "SELECT " HP_MNT_COLS " FROM mounts WHERE path = ?1",
    [HP_Q_MOUNT_PUT] = "INSERT OR REPLACE INTO mounts(" HP_MNT_COLS ")"
		       " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [HP_Q_MOUNT_DELETE] = "DELETE FROM mounts WHERE path = ?1",
    [HP_Q_MOUNT_LIST] = "SELECT " HP_MNT_COLS " FROM mounts WHERE node_id = ?1"
			" AND volume_id = ?2 ORDER BY path",
    [HP_Q_NODE_USES] = "SELECT (SELECT count(*) FROM stages WHERE volume_id = ?1) +"
		       " (SELECT count(*) FROM mounts WHERE volume_id = ?1)",
    [HP_Q_NODE_ADD] = "INSERT OR IGNORE INTO nodes(node_id) VALUES (?1)",
    [HP_Q_NODE_KNOWN] = "SELECT 1 FROM nodes WHERE node_id = ?1",
    [HP_Q_NODE_LIST] = "SELECT node_id FROM nodes ORDER BY node_id LIMIT 64",
    [HP_Q_GROUP_GET] = "SELECT " HP_GROUP_COLS " FROM group_snapshots WHERE id = ?1",
    [HP_Q_GROUP_BY_NAME] = "SELECT " HP_GROUP_COLS " FROM group_snapshots WHERE name = ?1",
    [HP_Q_GROUP_INSERT] = "INSERT INTO group_snapshots(id, name, params, created_ns)"
			  " VALUES (?1, ?2, ?3, ?4)",
    [HP_Q_GROUP_MEMBER_ADD] = "INSERT INTO group_members(snapshot_id, group_id) VALUES (?1, ?2)",
    [HP_Q_GROUP_MEMBERS] = "SELECT " HP_SNAP_COLS " FROM snapshots WHERE id IN"
			   " (SELECT snapshot_id FROM group_members WHERE group_id = ?1)"
			   " ORDER BY seq",
    [HP_Q_GROUP_DELETE_SNAPS] = "DELETE FROM snapshots WHERE id IN"
				" (SELECT snapshot_id FROM group_members WHERE group_id = ?1)",
    [HP_Q_GROUP_DELETE_MEMBERS] = "DELETE FROM group_members WHERE group_id = ?1",
    [HP_Q_GROUP_DELETE] = "DELETE FROM group_snapshots WHERE id = ?1",
    [HP_Q_BEGIN] = "BEGIN",
    [HP_Q_BEGIN_WRITE] = "BEGIN IMMEDIATE",
    [HP_Q_COMMIT] = "COMMIT",
    [HP_Q_ROLLBACK] = "ROLLBACK",
};

static const char hp_store_schema[] =
    "PRAGMA journal_mode = WAL;"
    "PRAGMA synchronous = NORMAL;"
    "PRAGMA cache_size = -512;"
    "PRAGMA foreign_keys = OFF;"
    "CREATE TABLE IF NOT EXISTS volumes(seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " id TEXT NOT NULL UNIQUE, name TEXT NOT NULL UNIQUE, capacity INTEGER NOT NULL,"
    " block INTEGER NOT NULL, source TEXT NOT NULL, params TEXT NOT NULL,"
    " mut TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS snapshots(seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " id TEXT NOT NULL UNIQUE, name TEXT NOT NULL UNIQUE, source TEXT NOT NULL,"
    " size INTEGER NOT NULL, block INTEGER NOT NULL, created_ns INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS snapshots_source ON snapshots(source);"
    "CREATE TABLE IF NOT EXISTS publications(volume_id TEXT NOT NULL, node_id TEXT NOT NULL,"
    " readonly INTEGER NOT NULL, cap TEXT NOT NULL, PRIMARY KEY(volume_id, node_id));"
    "CREATE INDEX IF NOT EXISTS publications_node ON publications(node_id);"
    "CREATE TABLE IF NOT EXISTS stages(node_id TEXT NOT NULL, volume_id TEXT NOT NULL,"
    " path TEXT NOT NULL, staging TEXT NOT NULL, readonly INTEGER NOT NULL,"
    " mode INTEGER NOT NULL, cap TEXT NOT NULL, PRIMARY KEY(node_id, volume_id));"
    "CREATE INDEX IF NOT EXISTS stages_volume ON stages(volume_id);"
    "CREATE TABLE IF NOT EXISTS mounts(node_id TEXT NOT NULL, volume_id TEXT NOT NULL,"
    " path TEXT PRIMARY KEY, staging TEXT NOT NULL, readonly INTEGER NOT NULL,"
    " mode INTEGER NOT NULL, cap TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS mounts_volume ON mounts(volume_id, node_id);"
    "CREATE TABLE IF NOT EXISTS nodes(node_id TEXT PRIMARY KEY);"
    /*
     * Volume group snapshots (added after the first release: new tables,
     * so an older data dir gains them on open). Member snapshots are rows
     * of snapshots; group_members says which group each belongs to.
     */
    "CREATE TABLE IF NOT EXISTS group_snapshots(seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " id TEXT NOT NULL UNIQUE, name TEXT NOT NULL UNIQUE, params TEXT NOT NULL,"
    " created_ns INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS group_members(snapshot_id TEXT PRIMARY KEY,"
    " group_id TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS group_members_group ON group_members(group_id);";

struct hp_store {
	sqlite3 *db;
	sqlite3_stmt *q[HP_Q_COUNT];
};

static int hp_store_fail(struct hp_store *s, struct err *e, const char *what)
{
	int code = sqlite3_errcode(s->db);
	int rc = CSID_EIO;

	if (code == SQLITE_BUSY || code == SQLITE_LOCKED)
		rc = CSID_EABORTED;
	else if (code == SQLITE_CONSTRAINT)
		rc = CSID_EEXIST;
	else if (code == SQLITE_NOMEM)
		rc = CSID_ENOMEM;
	else if (code == SQLITE_FULL)
		rc = CSID_EEXHAUSTED;
	return err_set(e, rc, "state db: %s: %s", what, sqlite3_errmsg(s->db));
}

int hp_store_open(const char *path, struct hp_store **out, struct err *e)
{
	struct hp_store *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return err_set(e, CSID_ENOMEM, "state db: out of memory");
	if (sqlite3_open_v2(path, &s->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
			    NULL) != SQLITE_OK) {
		rc = err_set(e, CSID_EIO, "state db %s: %s", path,
			     s->db ? sqlite3_errmsg(s->db) : "cannot open");
		goto fail;
	}
	sqlite3_busy_timeout(s->db, 30000);
	if (sqlite3_exec(s->db, hp_store_schema, NULL, NULL, NULL) != SQLITE_OK) {
		rc = hp_store_fail(s, e, "schema");
		goto fail;
	}
	for (int i = 0; i < HP_Q_COUNT; i++) {
		if (sqlite3_prepare_v3(s->db, hp_store_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
				       &s->q[i], NULL) != SQLITE_OK) {
			rc = hp_store_fail(s, e, "prepare");
			goto fail;
		}
	}
	*out = s;
	return 0;
fail:
	hp_store_close(s);
	return rc;
}

void hp_store_close(struct hp_store *s)
{
	if (!s)
		return;
	for (int i = 0; i < HP_Q_COUNT; i++)
		sqlite3_finalize(s->q[i]);
	sqlite3_close(s->db);
	free(s);
}

/* The statement q, reset, with ?1.. bound to the strings given (NULL binds NULL). */
static sqlite3_stmt *hp_store_q(struct hp_store *s, enum hp_store_q q, int n, ...)
{
	sqlite3_stmt *st = s->q[q];
	va_list ap;

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	va_start(ap, n);
	for (int i = 1; i <= n; i++) {
		const char *v = va_arg(ap, const char *);

		if (v)
			sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
	}
	va_end(ap);
	return st;
}

/* Runs a statement that returns no row. */
static int hp_store_run(struct hp_store *s, sqlite3_stmt *st, struct err *e, const char *what)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		return hp_store_fail(s, e, what);
	return 0;
}

/* Steps to the first row: 0 (row), CSID_ENOTFOUND (none), or an error. */
static int hp_store_row(struct hp_store *s, sqlite3_stmt *st, struct err *e, const char *what)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		return 0;
	sqlite3_reset(st);
	if (rc == SQLITE_DONE)
		return CSID_ENOTFOUND;
	return hp_store_fail(s, e, what);
}

static void hp_store_text(sqlite3_stmt *st, int col, char *buf, size_t len)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	snprintf(buf, len, "%s", t ? (const char *)t : "");
}

static int hp_store_scalar_rc(struct hp_store *s, sqlite3_stmt *st, int64_t *out, struct err *e)
{
	int rc = hp_store_row(s, st, e, "count");

	if (rc == CSID_ENOTFOUND) {
		*out = 0;
		return 0;
	}
	if (rc)
		return rc;
	*out = sqlite3_column_int64(st, 0);
	sqlite3_reset(st);
	return 0;
}

int hp_store_begin(struct hp_store *s, bool write, struct err *e)
{
	return hp_store_run(s, hp_store_q(s, write ? HP_Q_BEGIN_WRITE : HP_Q_BEGIN, 0), e, "begin");
}

int hp_store_commit(struct hp_store *s, struct err *e)
{
	int rc = hp_store_run(s, hp_store_q(s, HP_Q_COMMIT, 0), e, "commit");

	if (rc)
		hp_store_rollback(s);
	return rc;
}

void hp_store_rollback(struct hp_store *s)
{
	if (!sqlite3_get_autocommit(s->db))
		hp_store_run(s, hp_store_q(s, HP_Q_ROLLBACK, 0), NULL, "rollback");
}

/* --- volumes --- */

static void hp_store_read_vol(sqlite3_stmt *st, struct hp_vol *v)
{
	v->seq = sqlite3_column_int64(st, 0);
	hp_store_text(st, 1, v->id, sizeof(v->id));
	hp_store_text(st, 2, v->name, sizeof(v->name));
	v->capacity = sqlite3_column_int64(st, 3);
	v->block = sqlite3_column_int(st, 4) != 0;
	hp_store_text(st, 5, v->source, sizeof(v->source));
	hp_store_text(st, 6, v->params, sizeof(v->params));
	hp_store_text(st, 7, v->mut, sizeof(v->mut));
}

static int hp_store_vol_one(struct hp_store *s, sqlite3_stmt *st, struct hp_vol *v, struct err *e)
{
	int rc = hp_store_row(s, st, e, "volume");

	if (rc)
		return rc;
	hp_store_read_vol(st, v);
	sqlite3_reset(st);
	return 0;
}

int hp_store_vol_get(struct hp_store *s, const char *id, struct hp_vol *v, struct err *e)
{
	return hp_store_vol_one(s, hp_store_q(s, HP_Q_VOL_GET, 1, id), v, e);
}

int hp_store_vol_by_name(struct hp_store *s, const char *name, struct hp_vol *v, struct err *e)
{
	return hp_store_vol_one(s, hp_store_q(s, HP_Q_VOL_BY_NAME, 1, name), v, e);
}

int hp_store_vol_insert(struct hp_store *s, struct hp_vol *v, struct err *e)
{
	sqlite3_stmt *st = hp_store_q(s, HP_Q_VOL_INSERT, 2, v->id, v->name);
	int rc;

	sqlite3_bind_int64(st, 3, v->capacity);
	sqlite3_bind_int(st, 4, v->block);
	sqlite3_bind_text(st, 5, v->source, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, v->params, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, v->mut, -1, SQLITE_STATIC);
	rc = hp_store_run(s, st, e, "insert volume");
	if (!rc)
		v->seq = sqlite3_last_insert_rowid(s->db);
	return rc;
}

int hp_store_vol_delete(struct hp_store *s, const char *id, struct err *e)
{
	return hp_store_run(s, hp_store_q(s, HP_Q_VOL_DELETE, 1, id), e, "delete volume");
}

int hp_store_vol_update(struct hp_store *s, const struct hp_vol *v, struct err *e)
{
	sqlite3_stmt *st = hp_store_q(s, HP_Q_VOL_UPDATE, 1, v->id);

	sqlite3_bind_int64(st, 2, v->capacity);
	sqlite3_bind_text(st, 3, v->mut, -1, SQLITE_STATIC);
	return hp_store_run(s, st, e, "update volume");
}

int hp_store_vol_list(struct hp_store *s, int64_t after, int64_t limit,
		      int (*fn)(void *ctx, const struct hp_vol *v), void *ctx, struct err *e)
{
	sqlite3_stmt *st = hp_store_q(s, HP_Q_VOL_LIST, 0);
	struct hp_vol v;
	int rc;

	sqlite3_bind_int64(st, 1, after);
	sqlite3_bind_int64(st, 2, limit);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		hp_store_read_vol(st, &v);
		rc = fn(ctx, &v);
		if (rc) {
			sqlite3_reset(st);
			return rc;
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : hp_store_fail(s, e, "list volumes");
}

int hp_store_used(struct hp_store *s, int64_t *bytes, struct err *e)
{
	return hp_store_scalar_rc(s, hp_store_q(s, HP_Q_USED, 0), bytes, e);
}

int hp_store_max_seq(struct hp_store *s, bool snapshots, int64_t *seq, struct err *e)
{
	return hp_store_scalar_rc(
	    s, hp_store_q(s, snapshots ? HP_Q_MAXSEQ_SNAP : HP_Q_MAXSEQ_VOL, 0), seq, e);
}

/* --- snapshots --- */

static void hp_store_read_snap(sqlite3_stmt *st, struct hp_snap *v)
{
	v->seq = sqlite3_column_int64(st, 0);
	hp_store_text(st, 1, v->id, sizeof(v->id));
	hp_store_text(st, 2, v->name, sizeof(v->name));
	hp_store_text(st, 3, v->source, sizeof(v->source));
	v->size = sqlite3_column_int64(st, 4);
	v->block = sqlite3_column_int(st, 5) != 0;
	v->created_ns = sqlite3_column_int64(st, 6);
	hp_store_text(st, 7, v->group, sizeof(v->group));
}

static int hp_store_snap_one(struct hp_store *s, sqlite3_stmt *st, struct hp_snap *v, struct err *e)
{
	int rc = hp_store_row(s, st, e, "snapshot");

	if (rc)
		return rc;
	hp_store_read_snap(st, v);
	sqlite3_reset(st);
	return 0;
}

int hp_store_snap_get(struct hp_store *s, const char *id, struct hp_snap *v, struct err *e)
{
	return hp_store_snap_one(s, hp_store_q(s, HP_Q_SNAP_GET, 1, id), v, e);
}

int hp_store_snap_by_name(struct hp_store *s, const char *name, struct hp_snap *v, struct err *e)
{
	return hp_store_snap_one(s, hp_store_q(s, HP_Q_SNAP_BY_NAME, 1, name), v, e);
}

int hp_store_snap_insert(struct hp_store *s, struct hp_snap *v, struct err *e)
{
	sqlite3_stmt *st = hp_store_q(s, HP_Q_SNAP_INSERT, 3, v->id, v->name, v->source);
	int rc;

	sqlite3_bind_int64(st, 4, v->size);
	sqlite3_bind_int(st, 5, v->block);
	sqlite3_bind_int64(st, 6, v->created_ns);
	rc = hp_store_run(s, st, e, "insert snapshot");
	if (!rc)
		v->seq = sqlite3_last_insert_rowid(s->db);
	return rc;
}

int hp_store_snap_delete(struct hp_store *s, const char *id, struct err *e)
{
	return hp_store_run(s, hp_store_q(s, HP_Q_SNAP_DELETE, 1, id), e, "delete snapshot");
}

/* Calls fn for each snapshot row of st; fn's non-zero return stops and is returned. */
static int hp_store_snap_each(struct hp_store *s, sqlite3_stmt *st,
			      int (*fn)(void *ctx, const struct hp_snap *v), void *ctx,
			      struct err *e)
{
	struct hp_snap v;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		hp_store_read_snap(st, &v);
		rc = fn(ctx, &v);
		if (rc) {
			sqlite3_reset(st);
			return rc;
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : hp_store_fail(s, e, "list snapshots");
}

int hp_store_snap_list(struct hp_store *s, int64_t after, const char *source, int64_t limit,
		       int (*fn)(void *ctx, const struct hp_snap *v), void *ctx, struct err *e)
{
	sqlite3_stmt *st = hp_store_q(s, HP_Q_SNAP_LIST, 2, NULL, source);

	sqlite3_bind_int64(st, 1, after);
	sqlite3_bind_int64(st, 3, limit);
	return hp_store_snap_each(s, st, fn, ctx, e);
}

/* --- controller publications --- */

static void hp_store_read_pub(sqlite3_stmt *st, struct hp_pub *p)
{
	hp_store_text(st, 0, p->volume_id, sizeof(p->volume_id));
	hp_store_text(st, 1, p->node_id, sizeof(p->node_id));
	p->readonly = sqlite3_column_int(st, 2) != 0;
	hp_store_text(st, 3, p->cap, sizeof(p->cap));
}

int hp_store_pub_get(struct hp_store *s, const char *vol, const char *node, struct hp_pub *p,
		     struct err *e)
{
	sqlite3_stmt *st = hp_store_q(s, HP_Q_PUB_GET, 2, vol, node);
	int rc = hp_store_row(s, st, e, "publication");

	if (rc)
		return rc;
	hp_store_read_pub(st, p);
	sqlite3_reset(st);
	return 0;
}

int hp_store_pub_put(struct hp_store *s, const struct hp_pub *p, struct err *e)
{
	sqlite3_stmt *st = hp_store_q(s, HP_Q_PUB_PUT, 2, p->volume_id, p->node_id);

	sqlite3_bind_int(st, 3, p->readonly);
	sqlite3_bind_text(st, 4, p->cap, -1, SQLITE_STATIC);
	return hp_store_run(s, st, e, "put publication");
}

int hp_store_pub_delete(struct hp_store *s, const char *vol, const char *node, struct err *e)
{
	sqlite3_stmt *st = node ? hp_store_q(s, HP_Q_PUB_DELETE, 2, vol, node)
				: hp_store_q(s, HP_Q_PUB_DELETE_ALL, 1, vol);

	return hp_store_run(s, st, e, "delete publication");
}

int hp_store_pub_list(struct hp_store *s, const char *vol, const char *node,
		      int (*fn)(void *ctx, const struct hp_pub *p), void *ctx, struct err *e)
{
	sqlite3_stmt *st = vol ? hp_store_q(s, HP_Q_PUB_LIST_VOL, 1, vol)
			       : hp_store_q(s, HP_Q_PUB_LIST_NODE, 1, node);
	struct hp_pub p;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		hp_store_read_pub(st, &p);
		rc = fn(ctx, &p);
		if (rc) {
			sqlite3_reset(st);
			return rc;
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : hp_store_fail(s, e, "list publications");
}

int hp_store_pub_count(struct hp_store *s, const char *node, int64_t *n, struct err *e)
{
	return hp_store_scalar_rc(s, hp_store_q(s, HP_Q_PUB_COUNT, 1, node), n, e);
}

/* --- node stages and mounts --- */

static void hp_store_read_mnt(sqlite3_stmt *st, struct hp_mnt *m)
{
	hp_store_text(st, 0, m->node_id, sizeof(m->node_id));
	hp_store_text(st, 1, m->volume_id, sizeof(m->volume_id));
	hp_store_text(st, 2, m->path, sizeof(m->path));
	hp_store_text(st, 3, m->staging, sizeof(m->staging));
	m->readonly = sqlite3_column_int(st, 4) != 0;
	m->mode = sqlite3_column_int(st, 5);
	hp_store_text(st, 6, m->cap, sizeof(m->cap));
}

static int hp_store_mnt_one(struct hp_store *s, sqlite3_stmt *st, struct hp_mnt *m, struct err *e)
{
	int rc = hp_store_row(s, st, e, "mount");

	if (rc)
		return rc;
	hp_store_read_mnt(st, m);
	sqlite3_reset(st);
	return 0;
}

static int hp_store_mnt_put(struct hp_store *s, enum hp_store_q q, const struct hp_mnt *m,
			    struct err *e)
{
	sqlite3_stmt *st = hp_store_q(s, q, 4, m->node_id, m->volume_id, m->path, m->staging);

	sqlite3_bind_int(st, 5, m->readonly);
	sqlite3_bind_int(st, 6, m->mode);
	sqlite3_bind_text(st, 7, m->cap, -1, SQLITE_STATIC);
	return hp_store_run(s, st, e, "put mount");
}

int hp_store_stage_get(struct hp_store *s, const char *node, const char *vol, struct hp_mnt *m,
		       struct err *e)
{
	return hp_store_mnt_one(s, hp_store_q(s, HP_Q_STAGE_GET, 2, node, vol), m, e);
}

int hp_store_stage_put(struct hp_store *s, const struct hp_mnt *m, struct err *e)
{
	return hp_store_mnt_put(s, HP_Q_STAGE_PUT, m, e);
}

int hp_store_stage_delete(struct hp_store *s, const char *node, const char *vol, struct err *e)
{
	return hp_store_run(s, hp_store_q(s, HP_Q_STAGE_DELETE, 2, node, vol), e, "delete stage");
}

int hp_store_mount_get(struct hp_store *s, const char *path, struct hp_mnt *m, struct err *e)
{
	return hp_store_mnt_one(s, hp_store_q(s, HP_Q_MOUNT_GET, 1, path), m, e);
}

int hp_store_mount_put(struct hp_store *s, const struct hp_mnt *m, struct err *e)
{
	return hp_store_mnt_put(s, HP_Q_MOUNT_PUT, m, e);
}

int hp_store_mount_delete(struct hp_store *s, const char *path, struct err *e)
{
	return hp_store_run(s, hp_store_q(s, HP_Q_MOUNT_DELETE, 1, path), e, "delete mount");
}

int hp_store_mount_list(struct hp_store *s, const char *node, const char *vol,
			int (*fn)(void *ctx, const struct hp_mnt *m), void *ctx, struct err *e)
{
	sqlite3_stmt *st = hp_store_q(s, HP_Q_MOUNT_LIST, 2, node, vol);
	struct hp_mnt *m = malloc(sizeof(*m));
	int rc, cb = 0;

	if (!m)
		return err_set(e, CSID_ENOMEM, "out of memory");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		hp_store_read_mnt(st, m);
		cb = fn(ctx, m);
		if (cb)
			break;
	}
	sqlite3_reset(st);
	free(m);
	if (cb)
		return cb;
	return rc == SQLITE_DONE ? 0 : hp_store_fail(s, e, "list mounts");
}

int hp_store_node_uses(struct hp_store *s, const char *vol, int64_t *n, struct err *e)
{
	return hp_store_scalar_rc(s, hp_store_q(s, HP_Q_NODE_USES, 1, vol), n, e);
}

/* --- nodes --- */

int hp_store_node_add(struct hp_store *s, const char *node, struct err *e)
{
	return hp_store_run(s, hp_store_q(s, HP_Q_NODE_ADD, 1, node), e, "add node");
}

int hp_store_node_known(struct hp_store *s, const char *node, bool *known, struct err *e)
{
	sqlite3_stmt *st = hp_store_q(s, HP_Q_NODE_KNOWN, 1, node);
	int rc = hp_store_row(s, st, e, "node");

	*known = rc == 0;
	sqlite3_reset(st);
	return rc == CSID_ENOTFOUND ? 0 : rc;
}

int hp_store_node_list(struct hp_store *s, int (*fn)(void *ctx, const char *node), void *ctx,
		       struct err *e)
{
	sqlite3_stmt *st = hp_store_q(s, HP_Q_NODE_LIST, 0);
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		rc = fn(ctx, (const char *)sqlite3_column_text(st, 0));
		if (rc) {
			sqlite3_reset(st);
			return rc;
		}
	}
	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : hp_store_fail(s, e, "list nodes");
}

/* --- volume group snapshots --- */

static int hp_store_group_one(struct hp_store *s, sqlite3_stmt *st, struct hp_group *g,
			      struct err *e)
{
	int rc = hp_store_row(s, st, e, "group snapshot");

	if (rc)
		return rc;
	g->seq = sqlite3_column_int64(st, 0);
	hp_store_text(st, 1, g->id, sizeof(g->id));
	hp_store_text(st, 2, g->name, sizeof(g->name));
	hp_store_text(st, 3, g->params, sizeof(g->params));
	g->created_ns = sqlite3_column_int64(st, 4);
	sqlite3_reset(st);
	return 0;
}

int hp_store_group_get(struct hp_store *s, const char *id, struct hp_group *g, struct err *e)
{
	return hp_store_group_one(s, hp_store_q(s, HP_Q_GROUP_GET, 1, id), g, e);
}

int hp_store_group_by_name(struct hp_store *s, const char *name, struct hp_group *g, struct err *e)
{
	return hp_store_group_one(s, hp_store_q(s, HP_Q_GROUP_BY_NAME, 1, name), g, e);
}

int hp_store_group_insert(struct hp_store *s, struct hp_group *g, struct err *e)
{
	sqlite3_stmt *st = hp_store_q(s, HP_Q_GROUP_INSERT, 3, g->id, g->name, g->params);
	int rc;

	sqlite3_bind_int64(st, 4, g->created_ns);
	rc = hp_store_run(s, st, e, "insert group snapshot");
	if (!rc)
		g->seq = sqlite3_last_insert_rowid(s->db);
	return rc;
}

int hp_store_group_member_add(struct hp_store *s, const char *group, const char *snap,
			      struct err *e)
{
	return hp_store_run(s, hp_store_q(s, HP_Q_GROUP_MEMBER_ADD, 2, snap, group), e,
			    "add group member");
}

int hp_store_group_members(struct hp_store *s, const char *group,
			   int (*fn)(void *ctx, const struct hp_snap *v), void *ctx, struct err *e)
{
	return hp_store_snap_each(s, hp_store_q(s, HP_Q_GROUP_MEMBERS, 1, group), fn, ctx, e);
}

int hp_store_group_delete(struct hp_store *s, const char *id, struct err *e)
{
	static const enum hp_store_q steps[3] = {HP_Q_GROUP_DELETE_SNAPS, HP_Q_GROUP_DELETE_MEMBERS,
						 HP_Q_GROUP_DELETE};
	int rc = 0;

	for (int i = 0; i < 3 && !rc; i++)
		rc = hp_store_run(s, hp_store_q(s, steps[i], 1, id), e, "delete group snapshot");
	return rc;
}
