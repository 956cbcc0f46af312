/*
 * The agent's local state database: opening the SQLite file with the
 * settings every agent module relies on, and a per-module schema version
 * table so that each module (registry, mounter) creates and evolves its
 * own tables independently in the same file.
 */
#include "store/agent_db.h"

#include <string.h>

#include "store/store_sqlite_vfs.h"

#define AGENT_DB_MODULE_MAX 64
/* SQLite's unix VFS that holds the file's lock for the whole process. */
#define AGENT_DB_VFS "unix-excl"

int agent_db_err(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return CSID_EABORTED;
	case SQLITE_NOMEM:
		return CSID_ENOMEM;
	case SQLITE_CONSTRAINT:
		return CSID_ECONFLICT;
	case SQLITE_MISUSE:
	case SQLITE_RANGE:
		return CSID_EINTERNAL;
	case SQLITE_PERM:
	case SQLITE_AUTH:
	case SQLITE_READONLY:
		return CSID_EPERM;
	case SQLITE_TOOBIG:
	case SQLITE_FULL:
		return CSID_EEXHAUSTED;
	default:
		return CSID_EIO;
	}
}

int agent_db_exec(sqlite3 *db, const char *sql, struct err *e)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	int code;

	if (rc == SQLITE_OK)
		return 0;
	code = agent_db_err(rc);
	err_set(e, code ? code : CSID_EIO, "sqlite: %s", msg ? msg : sqlite3_errstr(rc));
	sqlite3_free(msg);
	return code ? code : CSID_EIO;
}

int agent_db_open(const char *path, sqlite3 **out, struct err *e)
{
	sqlite3 *db = NULL;
	int code;
	int rc;

	*out = NULL;
	if (path == NULL || path[0] == '\0')
		return err_set(e, CSID_EINVAL, "agent db: empty path");
	/*
	 * unix-excl: the first connection takes one POSIX lock on the file for
	 * the process and keeps it; from then on the connections of this
	 * process lock one another in memory only (no fcntl per transaction),
	 * and the WAL index is heap memory they share (no -shm file, no fcntl
	 * on it), so a reader still reads while another connection writes.
	 * Another process cannot open the file while this one has it open.
	 */
	rc = sqlite3_open_v2(path, &db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
			     store_sqlite_vfs_excl() ? store_sqlite_vfs_excl() : AGENT_DB_VFS);
	if (rc != SQLITE_OK) {
		code = err_set(e, agent_db_err(rc) ? agent_db_err(rc) : CSID_EIO, "agent db %s: %s",
			       path, db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
		goto fail;
	}
	sqlite3_extended_result_codes(db, 1);
	sqlite3_busy_timeout(db, AGENT_DB_BUSY_TIMEOUT_MS);
	/*
	 * WAL lets each module's connection read while another writes. With
	 * WAL, synchronous=NORMAL syncs the log only at checkpoints: a commit
	 * is in the WAL file (in the kernel's page cache) when the statement
	 * returns, so it survives a kill -9 of the agent, which is the crash
	 * the agent must survive; only a power loss or kernel crash can lose
	 * the last commits, and even then the database stays consistent.
	 * FULL would add an fsync per commit for no gain against kill -9.
	 */
	rc = agent_db_exec(db,
			   "PRAGMA journal_mode=WAL;"
			   "PRAGMA synchronous=NORMAL;"
			   "PRAGMA foreign_keys=ON;",
			   e);
	if (rc == CSID_EABORTED) {
		code = err_set(e, CSID_EUNAVAIL,
			       "agent db %s: locked, another process has it open (another agent on "
			       "this data_dir?)",
			       path);
		goto fail;
	}
	if (rc < 0) {
		code = rc;
		err_wrap(e, "agent db %s", path);
		goto fail;
	}
	*out = db;
	return 0;
fail:
	sqlite3_close_v2(db);
	return code;
}

void agent_db_close(sqlite3 *db)
{
	if (db != NULL)
		sqlite3_close_v2(db);
}

static int agent_db_version(sqlite3 *db, const char *module, int *version, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*version = 0;
	rc = sqlite3_prepare_v2(db, "SELECT version FROM agent_schema WHERE module = ?1", -1, &st,
				NULL);
	if (rc != SQLITE_OK)
		goto fail;
	sqlite3_bind_text(st, 1, module, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*version = sqlite3_column_int(st, 0);
		rc = SQLITE_DONE;
	}
	if (rc != SQLITE_DONE)
		goto fail;
	sqlite3_finalize(st);
	return 0;
fail:
	rc = err_set(e, agent_db_err(rc) ? agent_db_err(rc) : CSID_EIO, "read version: %s",
		     sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return rc;
}

static int agent_db_set_version(sqlite3 *db, const char *module, int version, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc;

	rc = sqlite3_prepare_v2(db,
				"INSERT INTO agent_schema(module, version) VALUES (?1, ?2) "
				"ON CONFLICT(module) DO UPDATE SET version = excluded.version",
				-1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, module, -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 2, version);
		rc = sqlite3_step(st);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE)
		return err_set(e, agent_db_err(rc) ? agent_db_err(rc) : CSID_EIO,
			       "write version: %s", sqlite3_errmsg(db));
	return 0;
}

/* Applies step number i (version i -> i+1) in one transaction. */
static int agent_db_step(sqlite3 *db, const char *module, const char *sql, int i, struct err *e)
{
	int version;
	int rc;

	/* IMMEDIATE: take the write lock first, so two agents never both apply it. */
	rc = agent_db_exec(db, "BEGIN IMMEDIATE", e);
	if (rc < 0)
		return rc;
	/* Re-read under the lock: another connection may have applied it. */
	rc = agent_db_version(db, module, &version, e);
	if (rc == 0 && version == i)
		rc = agent_db_exec(db, sql, e);
	if (rc == 0 && version == i)
		rc = agent_db_set_version(db, module, i + 1, e);
	if (rc == 0)
		return agent_db_exec(db, "COMMIT", e);
	sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

int agent_db_migrate(sqlite3 *db, const char *module, const char *const *steps, int nsteps,
		     struct err *e)
{
	int version;
	int rc;

	if (db == NULL || module == NULL || module[0] == '\0' ||
	    strlen(module) > AGENT_DB_MODULE_MAX || nsteps < 0 || (nsteps > 0 && steps == NULL))
		return err_set(e, CSID_EINVAL, "schema migrate: invalid arguments");
	rc = agent_db_exec(db,
			   "CREATE TABLE IF NOT EXISTS agent_schema ("
			   " module TEXT PRIMARY KEY NOT NULL,"
			   " version INTEGER NOT NULL)",
			   e);
	if (rc < 0)
		goto fail;
	rc = agent_db_version(db, module, &version, e);
	if (rc < 0)
		goto fail;
	if (version > nsteps) {
		return err_set(e, CSID_EPRECOND,
			       "schema %s is at version %d, newer than this agent knows (%d)",
			       module, version, nsteps);
	}
	for (int i = version; i < nsteps; i++) {
		if (steps[i] == NULL) {
			rc = err_set(e, CSID_EINVAL, "step %d is NULL", i + 1);
			goto fail;
		}
		rc = agent_db_step(db, module, steps[i], i, e);
		if (rc < 0) {
			err_wrap(e, "step %d", i + 1);
			goto fail;
		}
	}
	return 0;
fail:
	err_wrap(e, "schema %s", module);
	return rc;
}
