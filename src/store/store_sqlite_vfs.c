/*
 * The SQLite store's VFS: SQLite's default one, except that what a
 * transaction appends to its WAL file reaches the kernel in one write.
 *
 * SQLite writes each WAL frame as two writes, its 24-byte header and its
 * page, so a commit of five pages was ten pwrite calls (bench_server: 42
 * per claim + release cycle, 13 us of system time per commit against 6
 * for one write of the same bytes). Here the writes to a WAL file that
 * continue one another are gathered in a buffer, and the buffer is
 * written when the frame that commits a transaction (its header has the
 * database size, nonzero) has its page, before that write returns: so
 * when COMMIT returns, the transaction is in the file as before (it
 * survives a kill -9; synchronous=NORMAL syncs at checkpoints as before).
 * Anything else done to the file (a read, a sync, a size, a truncate, a
 * write that is not at its end, a close) writes the buffer first, and a
 * write that is not at the end (a frame rewritten in place, or its
 * header's checksum) goes straight to the file, so SQLite never sees the
 * difference. Other files (the database) are passed through.
 *
 * Two such VFSes: over SQLite's default one (the server's store), and
 * over its "unix-excl" one (the agent's database, agent_db.c).
 */
#include "store/store_sqlite_vfs.h"

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SV_NAME "csid-wal"
/*
 * A transaction's frames up to this many bytes go in one write: below
 * 128 KiB, since the default VFS's write masks its length to 17 bits.
 */
#define SV_BUF (120 * 1024)
/* The WAL file's header, and each frame's (SQLite's file format). */
#define SV_WAL_HDR 32
#define SV_FRAME_HDR 24

struct sv_file {
	sqlite3_file base;
	sqlite3_file *real; /* the default VFS's file, right after this struct */
	bool wal;
	char *buf; /* WAL: bytes not written yet, from off */
	size_t len;
	sqlite3_int64 off;
	bool commit; /* the last header gathered is a commit's: write at its page */
	sqlite3_int64 end; /* where the WAL's next frame goes; -1: not known yet */
};

/* One of our VFSes: first, so that SQLite's pointer to it is a pointer to this. */
struct sv_base {
	sqlite3_vfs vfs;
	const char *real_name; /* the VFS wrapped, NULL: the default */
	sqlite3_vfs *real;
	int registered;
};

static struct sv_base sv_bases[] = {
    {.real_name = NULL, .registered = SQLITE_ERROR},
    {.real_name = "unix-excl", .registered = SQLITE_ERROR},
};
static const char *const sv_names[] = {SV_NAME, SV_NAME "-excl"};
static pthread_once_t sv_once = PTHREAD_ONCE_INIT;

/* Writes the gathered bytes. */
static int sv_flush(struct sv_file *f)
{
	int rc;

	if (f->len == 0)
		return SQLITE_OK;
	rc = f->real->pMethods->xWrite(f->real, f->buf, (int)f->len, f->off);
	f->len = 0;
	f->commit = false;
	return rc;
}

static int sv_close(sqlite3_file *file)
{
	struct sv_file *f = (struct sv_file *)file;
	int rc = sv_flush(f);
	int rc2 = f->real->pMethods->xClose(f->real);

	free(f->buf);
	f->buf = NULL;
	return rc != SQLITE_OK ? rc : rc2;
}

static int sv_read(sqlite3_file *file, void *out, int n, sqlite3_int64 off)
{
	struct sv_file *f = (struct sv_file *)file;
	int rc = sv_flush(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xRead(f->real, out, n, off);
}

/* Whether bytes (n of them at off) are the header of a frame that commits. */
static bool sv_commit_header(const void *bytes, int n, sqlite3_int64 off)
{
	const unsigned char *p = bytes;

	return n == SV_FRAME_HDR && off >= SV_WAL_HDR && (p[4] | p[5] | p[6] | p[7]) != 0;
}

/*
 * Whether a write at off continues the WAL at its end (a frame appended,
 * or the header of a WAL started again at 0), rather than rewriting a
 * frame already there (SQLite rewrites a page written twice in one
 * transaction in place, and then the checksums of the frame headers
 * after it, the commit's among them: always frames this file wrote in
 * the same transaction, so before its end). Past the end this file knows
 * is an append too: another connection of the process (the agent's
 * database has several) wrote the frames in between.
 */
static bool sv_appends(const struct sv_file *f, sqlite3_int64 off)
{
	return off == 0 || f->end < 0 || off >= f->end;
}

static int sv_write(sqlite3_file *file, const void *bytes, int n, sqlite3_int64 off)
{
	struct sv_file *f = (struct sv_file *)file;
	bool page_of_commit;
	int rc;

	if (!f->wal)
		return f->real->pMethods->xWrite(f->real, bytes, n, off);
	if (!sv_appends(f, off)) {
		/* Straight to the file, after what is gathered (it may be the frame rewritten). */
		rc = sv_flush(f);
		return rc != SQLITE_OK ? rc : f->real->pMethods->xWrite(f->real, bytes, n, off);
	}
	f->end = off + n;
	/* The previous write was a commit's header: this is its page. */
	page_of_commit = f->commit;
	if (f->len > 0 && (off != f->off + (sqlite3_int64)f->len || f->len + (size_t)n > SV_BUF)) {
		rc = sv_flush(f);
		if (rc != SQLITE_OK)
			return rc;
	}
	if (f->buf == NULL)
		f->buf = malloc(SV_BUF);
	if (f->buf == NULL || (size_t)n > SV_BUF)
		return f->real->pMethods->xWrite(f->real, bytes, n, off);
	if (f->len == 0)
		f->off = off;
	memcpy(f->buf + f->len, bytes, (size_t)n);
	f->len += (size_t)n;
	if (page_of_commit)
		return sv_flush(f);
	f->commit = sv_commit_header(bytes, n, off);
	return SQLITE_OK;
}

static int sv_truncate(sqlite3_file *file, sqlite3_int64 size)
{
	struct sv_file *f = (struct sv_file *)file;
	int rc = sv_flush(f);

	f->end = -1;
	return rc != SQLITE_OK ? rc : f->real->pMethods->xTruncate(f->real, size);
}

static int sv_sync(sqlite3_file *file, int flags)
{
	struct sv_file *f = (struct sv_file *)file;
	int rc = sv_flush(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int sv_file_size(sqlite3_file *file, sqlite3_int64 *size)
{
	struct sv_file *f = (struct sv_file *)file;
	int rc = sv_flush(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xFileSize(f->real, size);
}

static int sv_lock(sqlite3_file *file, int level)
{
	struct sv_file *f = (struct sv_file *)file;

	return f->real->pMethods->xLock(f->real, level);
}

static int sv_unlock(sqlite3_file *file, int level)
{
	struct sv_file *f = (struct sv_file *)file;
	int rc = sv_flush(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xUnlock(f->real, level);
}

static int sv_check_reserved(sqlite3_file *file, int *out)
{
	struct sv_file *f = (struct sv_file *)file;

	return f->real->pMethods->xCheckReservedLock(f->real, out);
}

static int sv_file_control(sqlite3_file *file, int op, void *arg)
{
	struct sv_file *f = (struct sv_file *)file;
	int rc = sv_flush(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xFileControl(f->real, op, arg);
}

static int sv_sector_size(sqlite3_file *file)
{
	struct sv_file *f = (struct sv_file *)file;

	return f->real->pMethods->xSectorSize(f->real);
}

static int sv_device(sqlite3_file *file)
{
	struct sv_file *f = (struct sv_file *)file;

	return f->real->pMethods->xDeviceCharacteristics(f->real);
}

static int sv_shm_map(sqlite3_file *file, int page, int size, int extend, void volatile **out)
{
	struct sv_file *f = (struct sv_file *)file;

	return f->real->pMethods->xShmMap(f->real, page, size, extend, out);
}

static int sv_shm_lock(sqlite3_file *file, int offset, int n, int flags)
{
	struct sv_file *f = (struct sv_file *)file;

	return f->real->pMethods->xShmLock(f->real, offset, n, flags);
}

static void sv_shm_barrier(sqlite3_file *file)
{
	struct sv_file *f = (struct sv_file *)file;

	f->real->pMethods->xShmBarrier(f->real);
}

static int sv_shm_unmap(sqlite3_file *file, int del)
{
	struct sv_file *f = (struct sv_file *)file;

	return f->real->pMethods->xShmUnmap(f->real, del);
}

static int sv_fetch(sqlite3_file *file, sqlite3_int64 off, int n, void **out)
{
	struct sv_file *f = (struct sv_file *)file;
	int rc = sv_flush(f);

	return rc != SQLITE_OK ? rc : f->real->pMethods->xFetch(f->real, off, n, out);
}

static int sv_unfetch(sqlite3_file *file, sqlite3_int64 off, void *p)
{
	struct sv_file *f = (struct sv_file *)file;

	return f->real->pMethods->xUnfetch(f->real, off, p);
}

static const sqlite3_io_methods sv_methods = {
    .iVersion = 3,
    .xClose = sv_close,
    .xRead = sv_read,
    .xWrite = sv_write,
    .xTruncate = sv_truncate,
    .xSync = sv_sync,
    .xFileSize = sv_file_size,
    .xLock = sv_lock,
    .xUnlock = sv_unlock,
    .xCheckReservedLock = sv_check_reserved,
    .xFileControl = sv_file_control,
    .xSectorSize = sv_sector_size,
    .xDeviceCharacteristics = sv_device,
    .xShmMap = sv_shm_map,
    .xShmLock = sv_shm_lock,
    .xShmBarrier = sv_shm_barrier,
    .xShmUnmap = sv_shm_unmap,
    .xFetch = sv_fetch,
    .xUnfetch = sv_unfetch,
};

static int sv_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *file, int flags,
		   int *out_flags)
{
	struct sv_file *f = (struct sv_file *)file;
	sqlite3_vfs *real = ((struct sv_base *)vfs)->real;
	int rc;

	memset(f, 0, sizeof(*f));
	f->real = (sqlite3_file *)(f + 1);
	rc = real->xOpen(real, name, f->real, flags, out_flags);
	/* The default VFS's files are of version 3: ours forwards all of it. */
	if (rc != SQLITE_OK || f->real->pMethods == NULL || f->real->pMethods->iVersion < 3) {
		if (rc == SQLITE_OK && f->real->pMethods != NULL)
			f->real->pMethods->xClose(f->real);
		f->base.pMethods = NULL;
		return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
	}
	f->wal = (flags & SQLITE_OPEN_WAL) != 0;
	f->end = -1;
	f->base.pMethods = &sv_methods;
	return SQLITE_OK;
}

static void sv_register(void)
{
	for (size_t i = 0; i < sizeof(sv_bases) / sizeof(sv_bases[0]); i++) {
		struct sv_base *b = &sv_bases[i];

		b->real = sqlite3_vfs_find(b->real_name);
		if (b->real == NULL)
			continue;
		b->vfs = *b->real;
		b->vfs.pNext = NULL;
		b->vfs.zName = sv_names[i];
		b->vfs.szOsFile = (int)sizeof(struct sv_file) + b->real->szOsFile;
		b->vfs.xOpen = sv_open;
		b->registered = sqlite3_vfs_register(&b->vfs, 0);
	}
}

const char *store_sqlite_vfs(void)
{
	pthread_once(&sv_once, sv_register);
	return sv_bases[0].registered == SQLITE_OK ? sv_names[0] : NULL;
}

const char *store_sqlite_vfs_excl(void)
{
	pthread_once(&sv_once, sv_register);
	return sv_bases[1].registered == SQLITE_OK ? sv_names[1] : NULL;
}
