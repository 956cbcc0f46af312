/*
 * The agent's local state: one SQLite file (<data_dir>/agent.db by
 * convention) shared by the node's modules that must survive a restart
 * (the plugin registry, the mounter, the claim flow, the claim owners).
 * It sits below plugin hosting and the agent, beside the server's store.
 * Each module opens its own connection with agent_db_open() and creates
 * its tables with agent_db_migrate(), which keeps one schema version per
 * module, so modules evolve their schemas independently.
 *
 * Connections are not shared between threads by the modules (SQLite
 * connections are serialized internally anyway, but a module that uses its
 * connection from several threads must hold its own lock around each
 * statement and transaction).
 */
#ifndef CSID_STORE_AGENT_DB_H
#define CSID_STORE_AGENT_DB_H

#include <sqlite3.h>

#include "util/err.h"

/* How long a statement waits for another connection's write lock (ms). */
#define AGENT_DB_BUSY_TIMEOUT_MS 5000

/*
 * Opens (creating it if needed) the SQLite database at path, with
 * journal_mode=WAL, synchronous=NORMAL, busy_timeout and foreign keys on.
 * The file is this process's while any of its connections is open: the
 * process's connections share it (readers read while one writes), and
 * another process is refused with CSID_EUNAVAIL ("locked") after the busy
 * timeout. path may be ":memory:" (a private in-memory database, for
 * tests). Returns 0 and *out (close it with agent_db_close), or CSID_EIO /
 * CSID_EINVAL / CSID_ENOMEM / CSID_EUNAVAIL with e naming the path and
 * SQLite's message.
 */
int agent_db_open(const char *path, sqlite3 **out, struct err *e);

/* Closes db; NULL is a no-op. */
void agent_db_close(sqlite3 *db);

/*
 * Brings module's schema up to date. steps[i] is the SQL (one or more
 * statements) that takes the schema from version i to i+1; the module's
 * current version is kept in the table agent_schema(module, version).
 * Runs each missing step and the version bump in one transaction per step,
 * so a crash leaves the schema at a whole version. Steps already applied
 * are skipped; a database whose version for module is greater than nsteps
 * (written by a newer agent) is refused with CSID_EPRECOND.
 * module: non-empty, at most 64 bytes. Returns 0 or a negative code with e
 * set ("schema registry step 2: <sqlite message>").
 */
int agent_db_migrate(sqlite3 *db, const char *module, const char *const *steps, int nsteps,
		     struct err *e);

/*
 * Runs sql (one or more statements without results) on db. Returns 0 or
 * CSID_EIO (CSID_EABORTED when the database stayed busy) with e set.
 */
int agent_db_exec(sqlite3 *db, const char *sql, struct err *e);

/* Maps a SQLite result code to a csid code (SQLITE_BUSY -> CSID_EABORTED ...). */
int agent_db_err(int rc);

#endif
