/*
 * The SQLite store's WAL upkeep (src/store/store_sqlite_wal.c): the
 * checkpoint every STORE_SQLITE_WAL_CHECKPOINT frames, and a thread that
 * syncs the WAL file ahead of it, outside the connection's lock.
 */
#ifndef CSID_STORE_STORE_SQLITE_WAL_H
#define CSID_STORE_STORE_SQLITE_WAL_H

#include <sqlite3.h>
#include <stdint.h>

/* A checkpoint per this many WAL frames (32 MiB of 4 KiB pages). */
#define STORE_SQLITE_WAL_CHECKPOINT 8192
/* The WAL file is synced ahead each time it grew by this many frames. */
#define STORE_SQLITE_WAL_SYNC 1024

struct store_sqlite_wal;

/*
 * Installs the WAL hook on db (whose WAL file is wal_path: borrowed, must
 * outlive it) and starts the syncing thread. Returns 0 or CSID_ENOMEM.
 */
int store_sqlite_wal_start(sqlite3 *db, const char *wal_path, struct store_sqlite_wal **out);

/* The pages (WAL frames) that commits wrote since the start. */
uint64_t store_sqlite_wal_pages(struct store_sqlite_wal *w);

/* Stops the thread and frees w (NULL: no-op); before db is closed. */
void store_sqlite_wal_stop(struct store_sqlite_wal *w);

#endif
