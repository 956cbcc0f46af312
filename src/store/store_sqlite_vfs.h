/*
 * The SQLite store's VFS (src/store/store_sqlite_vfs.c): SQLite's default
 * one, except that a transaction's WAL frames are written in one write
 * when it commits; and the same over SQLite's unix-excl VFS, for the
 * agent's database.
 */
#ifndef CSID_STORE_STORE_SQLITE_VFS_H
#define CSID_STORE_STORE_SQLITE_VFS_H

/*
 * Registers the VFS (once; not as the default) and returns its name for
 * sqlite3_open_v2, or NULL when it could not be (then the default VFS).
 */
const char *store_sqlite_vfs(void);

/*
 * The same over SQLite's "unix-excl" VFS (the file's lock is taken once
 * for the process and kept, the WAL index is heap memory its connections
 * share), or NULL when it could not be registered.
 */
const char *store_sqlite_vfs_excl(void);

#endif
