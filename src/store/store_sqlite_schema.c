/*
 * The SQLite store's schema: one migration per version, each taking the
 * file from version i to i + 1, all run forward in one transaction when
 * the store opens (src/store/store_sqlite.c says what the tables hold).
 */
#include "store/store_sqlite_int.h"

#include <stdio.h>

#include "csid.h"
#include "store/store.h"

/* The schema, one migration per version. */
static const char *const sq_steps[] = {
    /* 0 -> 1 */
    "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT ROWID;"
    "INSERT INTO meta (key, value) VALUES ('compacted', 0);"
    "CREATE TABLE objects ("
    " kind INTEGER NOT NULL, id TEXT NOT NULL, value BLOB NOT NULL,"
    " create_index INTEGER NOT NULL, modify_index INTEGER NOT NULL,"
    " PRIMARY KEY (kind, id));"
    "CREATE TABLE changes ("
    " seq INTEGER PRIMARY KEY, idx INTEGER NOT NULL, type INTEGER NOT NULL,"
    " kind INTEGER NOT NULL, id TEXT NOT NULL, value BLOB, create_index INTEGER NOT NULL);",
    /*
     * 1 -> 2: the change log leaves the file (its last index goes to meta:
     * seq was index * 1024 + position).
     */
    "INSERT INTO meta (key, value) SELECT 'index', coalesce(max(seq), 0) / 1024 FROM changes;"
    "DELETE FROM meta WHERE key = 'compacted';"
    "DROP TABLE changes;",
    /* 2 -> 3: the claim index's entries (kind 3) move to their own table. */
    "CREATE TABLE entries ("
    " kind INTEGER NOT NULL, id TEXT NOT NULL, value BLOB NOT NULL,"
    " create_index INTEGER NOT NULL, modify_index INTEGER NOT NULL,"
    " PRIMARY KEY (kind, id)) WITHOUT ROWID;"
    "INSERT INTO entries SELECT kind, id, value, create_index, modify_index FROM objects"
    " WHERE kind = 3;"
    "DELETE FROM objects WHERE kind = 3;",
};
_Static_assert(STORE_CLAIM == 3, "the 2 -> 3 migration moves kind 3");
_Static_assert(sizeof(sq_steps) / sizeof(sq_steps[0]) == STORE_SQLITE_VERSION,
	       "one migration per schema version");

int store_sqlite_migrate(sqlite3 *db, const char *path, struct err *e)
{
	int64_t app_id = 0, version = 0, tables = 0;
	char pragma[96];
	int rc;

	rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
	/* Again under the write lock: the file may have changed since the probe. */
	if (rc == SQLITE_OK)
		rc = store_sqlite_read_owner(db, &app_id, &version, &tables);
	if (rc != SQLITE_OK) {
		rc = store_sqlite_fail(e, db, rc, "read schema version");
		goto fail;
	}
	rc = store_sqlite_check_owner(path, app_id, version, tables, e);
	if (rc < 0)
		goto fail;
	for (int64_t v = version; v < STORE_SQLITE_VERSION; v++) {
		rc = sqlite3_exec(db, sq_steps[v], NULL, NULL, NULL);
		if (rc != SQLITE_OK) {
			rc = store_sqlite_fail(e, db, rc, "migrate schema");
			goto fail;
		}
	}
	snprintf(pragma, sizeof(pragma), "PRAGMA application_id=%d; PRAGMA user_version=%d;",
		 STORE_SQLITE_APP_ID, STORE_SQLITE_VERSION);
	rc =
	    version < STORE_SQLITE_VERSION ? sqlite3_exec(db, pragma, NULL, NULL, NULL) : SQLITE_OK;
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		rc = store_sqlite_fail(e, db, rc, "migrate schema");
		goto fail;
	}
	return 0;
fail:
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}
