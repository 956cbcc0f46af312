/*
 * What the SQLite store's files share (not for callers of the store):
 * the file's identity and schema version, the probe of an existing file
 * before it is opened for writing (src/store/store_sqlite_probe.c), and
 * its migrations (src/store/store_sqlite_schema.c).
 */
#ifndef CSID_STORE_STORE_SQLITE_INT_H
#define CSID_STORE_STORE_SQLITE_INT_H

#include <sqlite3.h>
#include <stdint.h>

#include "util/err.h"

/* application_id: 'csid' */
#define STORE_SQLITE_APP_ID 0x63736964
/* user_version: the schema this program writes (one migration per version). */
#define STORE_SQLITE_VERSION 3

/* The file's application_id, user_version and table count; a SQLite result code. */
int store_sqlite_read_owner(sqlite3 *db, int64_t *app_id, int64_t *version, int64_t *tables);

/*
 * Refuses, with CSID_EPRECOND, a file that is not a csid store or is of
 * a newer schema, from its application_id, user_version and table count
 * (all 0: an empty database, ours to fill).
 */
int store_sqlite_check_owner(const char *path, int64_t app_id, int64_t version, int64_t tables,
			     struct err *e);

/*
 * Checks an existing file at path without writing to it: a SQLite
 * database, a csid store (or empty), of a schema this program knows,
 * passing quick_check. 0 also when there is no file yet.
 */
int store_sqlite_probe(const char *path, struct err *e);

/*
 * Brings the schema of the store file at path (open on db, probed) to
 * STORE_SQLITE_VERSION in one transaction, after checking its owner again
 * under the write lock. 0, or the error (the file as it was).
 */
int store_sqlite_migrate(sqlite3 *db, const char *path, struct err *e);

/* Sets e from db's last error (what failed, SQLite's message); returns the csid code of rc. */
int store_sqlite_fail(struct err *e, sqlite3 *db, int rc, const char *what);

#endif
