/*
 * The SQLite store's probe: an existing file is checked on a read-only
 * connection before the store opens it for writing, so that a file it
 * refuses is left byte for byte as it was (src/store/store_sqlite.c).
 */
#include "store/store_sqlite_int.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "csid.h"

/* One integer from the first row of sql. */
static int sq_query_int(sqlite3 *db, const char *sql, int64_t *v)
{
	sqlite3_stmt *q = NULL;
	int rc = sqlite3_prepare_v2(db, sql, -1, &q, NULL);

	if (rc == SQLITE_OK) {
		rc = sqlite3_step(q);
		if (rc == SQLITE_ROW) {
			*v = sqlite3_column_int64(q, 0);
			rc = SQLITE_OK;
		} else if (rc == SQLITE_DONE) {
			rc = SQLITE_CORRUPT;
		}
	}
	sqlite3_finalize(q);
	return rc;
}

int store_sqlite_read_owner(sqlite3 *db, int64_t *app_id, int64_t *version, int64_t *tables)
{
	int rc = sq_query_int(db, "PRAGMA application_id", app_id);

	if (rc == SQLITE_OK)
		rc = sq_query_int(db, "PRAGMA user_version", version);
	if (rc == SQLITE_OK)
		rc = sq_query_int(db, "SELECT count(*) FROM sqlite_master", tables);
	return rc;
}

/* Refuses a file that is not ours or from a newer schema (version, app_id read). */
int store_sqlite_check_owner(const char *path, int64_t app_id, int64_t version, int64_t tables,
			     struct err *e)
{
	if (app_id == 0 && version == 0 && tables == 0)
		return 0; /* an empty database: ours to fill */
	if (app_id != STORE_SQLITE_APP_ID)
		return err_set(
		    e, CSID_EPRECOND,
		    "store %s: not a csid store (application_id 0x%08llx); left untouched", path,
		    (unsigned long long)(uint32_t)app_id);
	if (version > STORE_SQLITE_VERSION)
		return err_set(e, CSID_EPRECOND,
			       "store %s: schema version %lld is newer than this program knows "
			       "(%d); left untouched",
			       path, (long long)version, STORE_SQLITE_VERSION);
	return 0;
}

/*
 * The URI of the probe's connection to path, and whether a WAL file is
 * there. Without one, the database file alone is the whole database: it
 * is opened read-only and immutable, so not even a -wal or -shm file is
 * created next to a file we may refuse. With one (after a crash), the WAL
 * must be read too, which takes a read-write connection; the probe then
 * never checkpoints, so the database file is still not written.
 */
static int sq_probe_uri(const char *path, char *uri, size_t size, bool *wal_there, struct err *e)
{
	static const char hex[] = "0123456789ABCDEF";
	char wal[PATH_MAX + 8];
	struct stat sb;
	size_t n = 0;

	snprintf(wal, sizeof(wal), "%s-wal", path);
	if (strlen(path) >= PATH_MAX)
		return err_set(e, CSID_EINVAL, "sqlite store: path too long");
	memcpy(uri, "file:", 5);
	n = 5;
	for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
		if (strchr("?#%", *p) == NULL && *p > ' ' && *p < 0x7f) {
			uri[n++] = (char)*p;
		} else {
			uri[n++] = '%';
			uri[n++] = hex[*p >> 4];
			uri[n++] = hex[*p & 15];
		}
	}
	*wal_there = stat(wal, &sb) == 0;
	snprintf(uri + n, size - n, "%s", *wal_there ? "?mode=rw" : "?mode=ro&immutable=1");
	return 0;
}

/*
 * Checks an existing file on a read-only connection, so that a file we
 * refuse is never written: it must be a SQLite database, a csid store (or
 * empty), of a schema version we know, and pass quick_check.
 */
int store_sqlite_probe(const char *path, struct err *e)
{
	sqlite3 *db = NULL;
	int64_t app_id = 0, version = 0, tables = 0;
	char uri[3 * PATH_MAX + 32];
	struct stat sb;
	sqlite3_stmt *q = NULL;
	const char *verdict;
	bool wal_there = false;
	int rc;

	if (stat(path, &sb) != 0 || sb.st_size == 0)
		return 0; /* created below; a bad path fails there */
	rc = sq_probe_uri(path, uri, sizeof(uri), &wal_there, e);
	if (rc < 0)
		return rc;
	rc = sqlite3_open_v2(uri, &db,
			     (wal_there ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY) |
				 SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_URI,
			     NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	/* Exclusive, so a WAL is indexed in the heap: no -shm file either. */
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, "PRAGMA locking_mode=EXCLUSIVE", NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = store_sqlite_read_owner(db, &app_id, &version, &tables);
	if ((rc & 0xff) == SQLITE_BUSY) {
		rc = err_set(e, CSID_EUNAVAIL, "store %s: locked: another process has it open",
			     path);
		goto done;
	}
	if (rc != SQLITE_OK) {
		rc = err_set(e, CSID_EIO,
			     "store %s: not a SQLite database or corrupt (%s); left untouched",
			     path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		goto done;
	}
	rc = store_sqlite_check_owner(path, app_id, version, tables, e);
	if (rc < 0 || tables == 0)
		goto done;
	rc = sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &q, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(q);
	verdict = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(q, 0) : NULL;
	if (verdict != NULL && strcmp(verdict, "ok") == 0) {
		rc = 0;
		goto done;
	}
	rc = err_set(e, CSID_EIO, "store %s: corrupt (%s); left untouched", path,
		     verdict ? verdict : sqlite3_errmsg(db));
	/* quick_check reports on several lines: one line of message. */
	for (char *p = e ? e->msg : NULL; p && *p; p++)
		if (*p == '\n')
			*p = ' ';
done:
	sqlite3_finalize(q);
	sqlite3_close_v2(db);
	return rc;
}
