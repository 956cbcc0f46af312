/*
 * The SQLite store backend: the store contract (test/lib/store_conformance.c)
 * run against it, then what only it promises (src/store/store_sqlite.c):
 * a reopened store holds every object and goes on from its index (its
 * change log starts afresh); schema 1 and 2 files are migrated with their data;
 * a file from a newer schema, a
 * foreign file and a corrupt file are refused at open and left byte for
 * byte as they were; and every write acknowledged before a kill -9 is
 * there after a restart. The crash test runs this program again as a
 * child (--child <dir>): it commits transactions and reports each
 * acknowledged index through a pipe until the parent kills it with
 * SIGKILL at a random point (the seed is printed).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "store/store.h"
#include "store/store_sqlite_int.h"
#include "store_conformance.h"

extern char **environ;

/* SQLite's header: user_version at byte 60, application_id at 68 (big-endian). */
#define TQ_USER_VERSION_AT 60
#define TQ_APP_ID_AT 68
#define TQ_PAGE 4096
/* The crash child's largest value (bytes): over 128 KiB of WAL frames. */
#define TQ_BIG (300 * 1024)

struct tq {
	char dir[PATH_MAX];
	char path[PATH_MAX + 16];
};

static int tq_setup(void **state)
{
	struct tq *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "/tmp/csid-test-sqlite-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->path, sizeof(t->path), "%s/store.db", t->dir);
	*state = t;
	return 0;
}

static int tq_teardown(void **state)
{
	struct tq *t = *state;
	const char *suffix[] = {"", "-wal", "-shm", "-journal"};
	char path[PATH_MAX + 32];

	for (size_t i = 0; i < sizeof(suffix) / sizeof(suffix[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", t->path, suffix[i]);
		unlink(path);
	}
	rmdir(t->dir);
	free(t);
	return 0;
}

/* Reads the whole file at path into a malloc'd buffer. */
static char *tq_slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	assert_true(n >= 0);
	rewind(f);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void tq_patch(const char *path, long at, const void *bytes, size_t n)
{
	int fd = open(path, O_WRONLY);

	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, bytes, n, at), (ssize_t)n);
	close(fd);
}

static bool tq_exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}

/* Creates a closed store at t->path holding n volumes. */
static void tq_make(struct tq *t, int n)
{
	struct store *s;
	char id[32], val[600];
	struct err e;

	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	memset(val, 'x', sizeof(val) - 1);
	val[sizeof(val) - 1] = '\0';
	for (int i = 0; i < n; i++) {
		struct store_op op = {STORE_OP_PUT, STORE_VOLUME, id, val, sizeof(val) - 1, 0};

		snprintf(id, sizeof(id), "vol-%04d", i);
		assert_int_equal(store_txn(s, &op, 1, NULL, &e), 0);
	}
	store_close(s);
}

/* Opening t->path fails with code and a message holding what; the file is unchanged. */
static void tq_expect_refused(struct tq *t, int code, const char *what)
{
	char wal[PATH_MAX + 32];
	struct store *s = (struct store *)&s;
	size_t n0, n1;
	char *before = tq_slurp(t->path, &n0);
	char *after;
	struct err e;

	assert_int_equal(store_sqlite_open(t->path, &s, &e), code);
	assert_null(s);
	assert_non_null(strstr(e.msg, what));
	assert_non_null(strstr(e.msg, t->path));
	after = tq_slurp(t->path, &n1);
	assert_int_equal(n0, n1);
	assert_memory_equal(before, after, n0);
	snprintf(wal, sizeof(wal), "%s-wal", t->path);
	assert_false(tq_exists(wal));
	free(before);
	free(after);
}

static void test_sqlite_reopen(void **state)
{
	struct tq *t = *state;
	struct store *s;
	struct store_op ops[2] = {
	    {STORE_OP_PUT, STORE_VOLUME, "v1", "one", 3, 0},
	    {STORE_OP_PUT, STORE_NODE, "n1", "node", 4, 0},
	};
	struct store_changes c;
	struct store_list l;
	struct store_obj o;
	uint64_t index;
	struct err e;

	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	assert_string_equal(s->backend, "sqlite");
	assert_int_equal(store_txn(s, ops, 2, &index, &e), 0);
	ops[0].expect_index = 1;
	ops[0].value = "uno";
	assert_int_equal(store_txn(s, ops, 1, &index, &e), 0);
	ops[1].type = STORE_OP_DELETE;
	ops[1].expect_index = 1;
	assert_int_equal(store_txn(s, &ops[1], 1, &index, &e), 0);
	assert_int_equal(index, 3);
	store_close(s);

	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	assert_int_equal(store_index(s), 3);
	assert_int_equal(store_get(s, STORE_VOLUME, "v1", &o, &e), 0);
	assert_string_equal(o.value, "uno");
	assert_int_equal(o.create_index, 1);
	assert_int_equal(o.modify_index, 2);
	store_obj_free(&o);
	assert_int_equal(store_get(s, STORE_NODE, "n1", &o, &e), CSID_ENOTFOUND);
	/* The log starts at the open: older changes are gone, as if compacted. */
	assert_int_equal(store_changes(s, 0, 0, &c, &e), CSID_ERANGE);
	assert_int_equal(store_changes(s, 2, 0, &c, &e), CSID_ERANGE);
	assert_int_equal(store_changes(s, 3, 0, &c, &e), 0);
	assert_int_equal(c.n, 0);
	assert_int_equal(c.index, 3);
	store_changes_free(&c);
	/*
	 * The index goes on from where it was, though no object has index 3
	 * (the last transaction only deleted).
	 */
	ops[0].expect_index = 2;
	assert_int_equal(store_txn(s, ops, 1, &index, &e), 0);
	assert_int_equal(index, 4);
	assert_int_equal(store_changes(s, 3, 0, &c, &e), 0);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.changes[0].index, 4);
	assert_string_equal(c.changes[0].obj.value, "uno");
	store_changes_free(&c);
	assert_int_equal(store_list(s, STORE_VOLUME, NULL, NULL, 0, &l, &e), 0);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.index, 4);
	store_list_free(&l);
	store_close(s);
}

/* Runs sql on the SQLite database at path (no csid code in between). */
static void tq_sql(const char *path, const char *sql)
{
	sqlite3 *db;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

/* The first column of the first row of sql on the database at path. */
static int tq_sql_int(const char *path, const char *sql)
{
	sqlite3_stmt *q;
	sqlite3 *db;
	int v;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &q, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(q), SQLITE_ROW);
	v = sqlite3_column_int(q, 0);
	sqlite3_finalize(q);
	sqlite3_close(db);
	return v;
}

/*
 * A store of schema 1 as csid wrote it (objects with a rowid, the change
 * log in a table, seq = index * 1024 + position) opens as schema 2 with
 * every object, and its index goes on after the log's last.
 */
/*
 * Gets, and a transaction's look at the objects it writes, come from the
 * read cache once the store wrote or read the object: its commits (not a
 * failed transaction's writes), a delete (not found), a missing object
 * read once; a reopened store reads the file again.
 */
static void test_sqlite_read_cache(void **state)
{
	struct tq *t = *state;
	struct store *s;
	struct store_op ops[2] = {
	    {STORE_OP_PUT, STORE_VOLUME, "v1", "one", 3, 0},
	    {STORE_OP_PUT, STORE_VOLUME, "v9", "nine", 4, 99},
	};
	struct store_obj o;
	uint64_t index;
	struct err e;

	/* The first write of v1 looks it up in the file, the rest in the cache. */
	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	assert_int_equal(store_txn(s, ops, 1, &index, &e), 0);
	assert_int_equal(store_sqlite_reads(s), 1);
	assert_int_equal(store_get(s, STORE_VOLUME, "v1", &o, &e), 0);
	assert_string_equal(o.value, "one");
	assert_int_equal(o.create_index, 1);
	assert_int_equal(o.modify_index, 1);
	store_obj_free(&o);
	assert_int_equal(store_sqlite_reads(s), 1);

	/* Missing: read once, then known to be missing, by gets and writes. */
	assert_int_equal(store_get(s, STORE_VOLUME, "v9", &o, &e), CSID_ENOTFOUND);
	assert_int_equal(store_get(s, STORE_VOLUME, "v9", &o, &e), CSID_ENOTFOUND);
	assert_int_equal(store_sqlite_reads(s), 2);

	/* A transaction that fails on its condition changes nothing cached. */
	ops[0].value = "uno";
	ops[0].expect_index = 1;
	assert_int_equal(store_txn(s, ops, 2, &index, &e), CSID_ECONFLICT);
	assert_int_equal(store_get(s, STORE_VOLUME, "v1", &o, &e), 0);
	assert_string_equal(o.value, "one");
	store_obj_free(&o);
	assert_int_equal(store_get(s, STORE_VOLUME, "v9", &o, &e), CSID_ENOTFOUND);

	ops[1].expect_index = 0;
	assert_int_equal(store_txn(s, ops, 2, &index, &e), 0);
	assert_int_equal(store_get(s, STORE_VOLUME, "v1", &o, &e), 0);
	assert_string_equal(o.value, "uno");
	assert_int_equal(o.create_index, 1);
	assert_int_equal(o.modify_index, 2);
	store_obj_free(&o);
	assert_int_equal(store_get(s, STORE_VOLUME, "v9", &o, &e), 0);
	assert_string_equal(o.value, "nine");
	assert_int_equal(o.create_index, 2);
	store_obj_free(&o);

	ops[0].type = STORE_OP_DELETE;
	ops[0].expect_index = 2;
	assert_int_equal(store_txn(s, ops, 1, &index, &e), 0);
	assert_int_equal(store_get(s, STORE_VOLUME, "v1", &o, &e), CSID_ENOTFOUND);
	assert_int_equal(store_sqlite_reads(s), 2);
	store_close(s);

	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(store_get(s, STORE_VOLUME, "v9", &o, &e), 0);
		assert_string_equal(o.value, "nine");
		assert_int_equal(o.modify_index, 2);
		store_obj_free(&o);
	}
	assert_int_equal(store_sqlite_reads(s), 1);
	store_close(s);
}

/* Tables of the schemas before 3, as those versions made them. */
#define TQ_META_TABLE                                                                        \
	"CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) WITHOUT " \
	"ROWID;"
#define TQ_OBJECTS_TABLE                                                                      \
	"CREATE TABLE objects (kind INTEGER NOT NULL, id TEXT NOT NULL, value BLOB NOT NULL," \
	" create_index INTEGER NOT NULL, modify_index INTEGER NOT NULL, PRIMARY KEY (kind, id));"

static void test_sqlite_v1_migrated(void **state)
{
	struct tq *t = *state;
	struct store_op op = {STORE_OP_PUT, STORE_VOLUME, "v1", "new", 3, 5};
	struct store_changes c;
	struct store_list l;
	struct store *s;
	uint64_t index;
	struct err e;

	tq_sql(t->path,
	       "PRAGMA journal_mode=WAL;" TQ_META_TABLE
	       "INSERT INTO meta (key, value) VALUES ('compacted', 2);" TQ_OBJECTS_TABLE
	       "CREATE TABLE changes ("
	       " seq INTEGER PRIMARY KEY, idx INTEGER NOT NULL, type INTEGER NOT NULL,"
	       " kind INTEGER NOT NULL, id TEXT NOT NULL, value BLOB, create_index INTEGER NOT "
	       "NULL);"
	       "INSERT INTO objects VALUES (0, 'v1', 'one', 3, 5), (0, 'v2', 'two', 4, 4),"
	       " (1, 'n1', 'node', 1, 1);"
	       /* Index 7 deleted v3: no object has it. */
	       "INSERT INTO changes VALUES (5120, 5, 0, 0, 'v1', 'one', 3),"
	       " (7168, 7, 1, 0, 'v3', NULL, 6);"
	       "PRAGMA application_id=1668508004; PRAGMA user_version=1;");
	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	assert_int_equal(store_index(s), 7);
	assert_int_equal(store_list(s, STORE_VOLUME, NULL, NULL, 0, &l, &e), 0);
	assert_int_equal(l.n, 2);
	assert_string_equal(l.objs[0].id, "v1");
	assert_string_equal(l.objs[0].value, "one");
	assert_int_equal(l.objs[0].create_index, 3);
	assert_int_equal(l.objs[0].modify_index, 5);
	assert_string_equal(l.objs[1].value, "two");
	store_list_free(&l);
	assert_int_equal(store_list(s, STORE_NODE, NULL, NULL, 0, &l, &e), 0);
	assert_int_equal(l.n, 1);
	store_list_free(&l);
	assert_int_equal(store_changes(s, 5, 0, &c, &e), CSID_ERANGE);
	assert_int_equal(store_txn(s, &op, 1, &index, &e), 0);
	assert_int_equal(index, 8);
	store_close(s);
	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	assert_int_equal(store_index(s), 8);
	store_close(s);
	/* Schema 2 on disk: the log's table is gone, meta holds the index only. */
	assert_int_equal(tq_sql_int(t->path, "SELECT count(*) FROM sqlite_master"
					     " WHERE name = 'changes'"),
			 0);
	assert_int_equal(tq_sql_int(t->path, "SELECT value FROM meta WHERE key = 'index'"), 7);
	assert_int_equal(tq_sql_int(t->path, "SELECT count(*) FROM meta"), 1);
	assert_int_equal(tq_sql_int(t->path, "PRAGMA user_version"), STORE_SQLITE_VERSION);
}

/*
 * A schema 2 file: the claim index's entries (kind 3) move from objects to
 * entries with their indexes; the index goes on from the largest
 * modify_index of either table.
 */
static void test_sqlite_v2_migrated(void **state)
{
	static const char *const ids[] = {"n1/v1/a1", "n1/v2/a2"};
	struct tq *t = *state;
	struct store_op op = {STORE_OP_PUT, STORE_CLAIM, "n2/v3/a3", "{}", 2, 0};
	struct store_list l;
	struct store_obj o;
	struct store *s;
	uint64_t index;
	struct err e;

	tq_sql(t->path,
	       "PRAGMA journal_mode=WAL;" TQ_META_TABLE
	       "INSERT INTO meta (key, value) VALUES ('index', 4);" TQ_OBJECTS_TABLE
	       "INSERT INTO objects VALUES (0, 'v1', 'one', 3, 5), (3, 'n1/v1/a1', 'c1', 3, 9),"
	       " (3, 'n1/v2/a2', 'c2', 6, 6), (4, 'v1', 'past', 5, 5);"
	       "PRAGMA application_id=1668508004; PRAGMA user_version=2;");
	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	assert_int_equal(store_index(s), 9);
	assert_int_equal(store_list(s, STORE_CLAIM, "n1/", NULL, 0, &l, &e), 0);
	assert_int_equal(l.n, 2);
	for (size_t i = 0; i < 2; i++)
		assert_string_equal(l.objs[i].id, ids[i]);
	assert_string_equal(l.objs[0].value, "c1");
	assert_int_equal(l.objs[0].create_index, 3);
	assert_int_equal(l.objs[0].modify_index, 9);
	assert_int_equal(l.objs[1].modify_index, 6);
	store_list_free(&l);
	assert_int_equal(store_get(s, STORE_CLAIM_HISTORY, "v1", &o, &e), 0);
	assert_string_equal(o.value, "past");
	store_obj_free(&o);
	/* A write of an entry: the index after the largest of both tables. */
	assert_int_equal(store_txn(s, &op, 1, &index, &e), 0);
	assert_int_equal(index, 10);
	store_close(s);
	assert_int_equal(tq_sql_int(t->path, "SELECT count(*) FROM objects WHERE kind = 3"), 0);
	assert_int_equal(tq_sql_int(t->path, "SELECT count(*) FROM entries WHERE kind = 3"), 3);
	assert_int_equal(tq_sql_int(t->path, "SELECT count(*) FROM objects"), 2);
	assert_int_equal(tq_sql_int(t->path, "PRAGMA user_version"), STORE_SQLITE_VERSION);
	/* Reopened: the entry written last gives the index. */
	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	assert_int_equal(store_index(s), 10);
	assert_int_equal(store_get(s, STORE_CLAIM, "n2/v3/a3", &o, &e), 0);
	assert_int_equal(o.modify_index, 10);
	store_obj_free(&o);
	store_close(s);
}

static void test_sqlite_newer_refused(void **state)
{
	struct tq *t = *state;
	const unsigned char v2[4] = {0, 0, 0, STORE_SQLITE_VERSION + 1};

	tq_make(t, 5);
	tq_patch(t->path, TQ_USER_VERSION_AT, v2, sizeof(v2));
	tq_expect_refused(t, CSID_EPRECOND, "newer");
}

static void test_sqlite_foreign_refused(void **state)
{
	struct tq *t = *state;
	const unsigned char other[4] = {0x12, 0x34, 0x56, 0x78};
	FILE *f;

	/* Another program's SQLite database. */
	tq_make(t, 5);
	tq_patch(t->path, TQ_APP_ID_AT, other, sizeof(other));
	tq_expect_refused(t, CSID_EPRECOND, "not a csid store");
	/* Not a database at all. */
	f = fopen(t->path, "w");
	assert_non_null(f);
	for (int i = 0; i < 500; i++)
		fputs("hello, this is not a database\n", f);
	fclose(f);
	tq_expect_refused(t, CSID_EIO, "not a SQLite database");
}

static void test_sqlite_corrupt_refused(void **state)
{
	struct tq *t = *state;
	char junk[TQ_PAGE];
	size_t n;
	char *all;

	tq_make(t, 200);
	all = tq_slurp(t->path, &n);
	free(all);
	assert_true(n > 8 * TQ_PAGE);
	/* Pages 3 and 4 (of the tables' b-trees) become noise. */
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (char)(i * 131 + 7);
	tq_patch(t->path, 2 * TQ_PAGE, junk, sizeof(junk));
	tq_patch(t->path, 3 * TQ_PAGE, junk, sizeof(junk));
	tq_expect_refused(t, CSID_EIO, "corrupt");
}

static void test_sqlite_empty_file(void **state)
{
	struct tq *t = *state;
	struct store *s;
	struct err e;
	FILE *f = fopen(t->path, "w");

	assert_non_null(f);
	fclose(f);
	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	assert_int_equal(store_index(s), 0);
	store_close(s);
	/* A directory that does not exist: a clear error. */
	assert_int_equal(store_sqlite_open("/nonexistent-csid/x/store.db", &s, &e), CSID_EIO);
	assert_non_null(strstr(e.msg, "/nonexistent-csid/x/store.db"));
	assert_int_equal(store_sqlite_open("", &s, &e), CSID_EINVAL);
}

static void test_sqlite_locked(void **state)
{
	struct tq *t = *state;
	struct store *s, *s2;
	struct err e;

	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	assert_int_equal(store_txn(s, NULL, 0, NULL, &e), 0);
	/* The store is one process's alone: a second opener is told so. */
	assert_int_equal(store_sqlite_open(t->path, &s2, &e), CSID_EUNAVAIL);
	assert_null(s2);
	assert_non_null(strstr(e.msg, "another process"));
	store_close(s);
	assert_int_equal(store_sqlite_open(t->path, &s2, &e), 0);
	store_close(s2);
}

/*
 * The crash child: on the store in dir, commits transaction after
 * transaction, each creating vol-<index> and moving the node "counter" to
 * the new index on a compare-and-set, and writes each acknowledged index
 * to stdout (8 bytes). Runs until killed. Every 16th volume's value is
 * large (up to TQ_BIG bytes), so that its commit's WAL frames do not fit
 * the store VFS's buffer and reach the file in several writes.
 */
static int tq_child(const char *dir)
{
	char path[PATH_MAX + 16], id[32], count[32];
	static char val[TQ_BIG];
	struct store *s;
	struct store_obj o;
	uint64_t index, have = 0;
	unsigned seed = (unsigned)getpid();
	struct err e;

	snprintf(path, sizeof(path), "%s/store.db", dir);
	if (store_sqlite_open(path, &s, &e) != 0) {
		fprintf(stderr, "child: %s\n", e.msg);
		return 2;
	}
	if (store_get(s, STORE_NODE, "counter", &o, &e) == 0)
		have = o.modify_index;
	store_obj_free(&o);
	memset(val, 'v', sizeof(val));
	for (;;) {
		size_t len = 1 + (size_t)rand_r(&seed) % (store_index(s) % 16 == 0 ? TQ_BIG : 2048);
		struct store_op ops[2] = {
		    {STORE_OP_PUT, STORE_VOLUME, id, val, len, 0},
		    {STORE_OP_PUT, STORE_NODE, "counter", count, 0, have},
		};

		snprintf(id, sizeof(id), "vol-%llu", (unsigned long long)store_index(s) + 1);
		snprintf(count, sizeof(count), "%llu", (unsigned long long)store_index(s) + 1);
		ops[1].len = strlen(count);
		if (store_txn(s, ops, 2, &index, &e) != 0) {
			fprintf(stderr, "child: %s\n", e.msg);
			return 3;
		}
		have = index;
		if (write(STDOUT_FILENO, &index, sizeof(index)) != (ssize_t)sizeof(index))
			return 4;
	}
}

/* Starts the child on dir with its stdout on a pipe; returns its pid and the read end. */
static pid_t tq_spawn(const char *dir, int *rfd)
{
	char self[PATH_MAX];
	char *argv[] = {self, "--child", (char *)dir, NULL};
	posix_spawn_file_actions_t fa;
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int p[2];
	pid_t pid;

	assert_true(n > 0);
	self[n] = '\0';
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
	assert_int_equal(posix_spawn(&pid, self, &fa, NULL, argv, environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	*rfd = p[0];
	return pid;
}

/* Reads one 8-byte ack into *index; false at EOF. */
static bool tq_read_ack(int fd, uint64_t *index)
{
	uint64_t v;
	size_t got = 0;
	ssize_t n;

	while (got < sizeof(v)) {
		n = read(fd, (char *)&v + got, sizeof(v) - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		got += (size_t)n;
	}
	*index = v;
	return true;
}

/* After a crash: every acknowledged index is there and the store adds up. */
static void tq_check(const char *path, uint64_t acked)
{
	struct store *s;
	struct store_obj o;
	struct store_list l;
	char id[32];
	const char *after = NULL;
	uint64_t n = 0;
	bool more;
	struct err e;

	if (store_sqlite_open(path, &s, &e) != 0)
		fail_msg("reopen after kill: %s", e.msg);
	assert_true(store_index(s) >= acked);
	/* The counter is at the index: no transaction was half applied. */
	assert_int_equal(store_get(s, STORE_NODE, "counter", &o, &e), 0);
	assert_int_equal(strtoull(o.value, NULL, 10), store_index(s));
	assert_int_equal(o.modify_index, store_index(s));
	store_obj_free(&o);
	for (uint64_t i = 1; i <= acked; i += 1 + i / 64) {
		snprintf(id, sizeof(id), "vol-%llu", (unsigned long long)i);
		assert_int_equal(store_get(s, STORE_VOLUME, id, &o, &e), 0);
		assert_int_equal(o.modify_index, i);
		store_obj_free(&o);
	}
	snprintf(id, sizeof(id), "vol-%llu", (unsigned long long)acked);
	assert_int_equal(store_get(s, STORE_VOLUME, id, &o, &e), 0);
	store_obj_free(&o);
	/* Exactly one volume per index. */
	do {
		assert_int_equal(store_list(s, STORE_VOLUME, NULL, after, 1000, &l, &e), 0);
		n += l.n;
		snprintf(id, sizeof(id), "%s", l.n ? l.objs[l.n - 1].id : "");
		after = id;
		more = l.more;
		store_list_free(&l);
	} while (more);
	assert_int_equal(n, store_index(s));
	store_close(s);
}

static void test_sqlite_kill9(void **state)
{
	struct tq *t = *state;
	unsigned seed = (unsigned)time(NULL);
	const char *env = getenv("CSID_TEST_SEED");
	char wal[PATH_MAX + 32], shm[PATH_MAX + 32];

	if (env != NULL)
		seed = (unsigned)strtoul(env, NULL, 10);
	print_message("kill -9 seed %u (CSID_TEST_SEED to repeat)\n", seed);
	snprintf(wal, sizeof(wal), "%s-wal", t->path);
	snprintf(shm, sizeof(shm), "%s-shm", t->path);
	for (int round = 0; round < 4; round++) {
		/* Enough in some rounds to trim the log (two changes each). */
		size_t target = 20 + (size_t)rand_r(&seed) % 4000;
		uint64_t acked = 0;
		size_t got = 0;
		int status = 0;
		int fd;
		pid_t pid = tq_spawn(t->dir, &fd);

		while (got < target && tq_read_ack(fd, &acked))
			got++;
		kill(pid, SIGKILL);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		/* Acks written before the kill count too. */
		while (tq_read_ack(fd, &acked))
			got++;
		close(fd);
		assert_true(WIFSIGNALED(status));
		assert_int_equal(WTERMSIG(status), SIGKILL);
		assert_true(got >= target);
		/* The crash left a WAL to recover, and no shared-memory index. */
		assert_true(tq_exists(wal));
		assert_false(tq_exists(shm));
		tq_check(t->path, acked);
	}
}

/*
 * The store checkpoints its WAL itself (src/store/store_sqlite_wal.c):
 * after about three checkpoints' worth of frames the WAL file is still
 * within one checkpoint's worth, and everything written is there after
 * a reopen.
 */
static void test_sqlite_wal_bounded(void **state)
{
	struct tq *t = *state;
	static char val[3 * TQ_PAGE];
	char wal[PATH_MAX + 32], id[32];
	struct store *s;
	struct store_obj o;
	struct stat sb;
	off_t most = 0;
	struct err e;

	snprintf(wal, sizeof(wal), "%s-wal", t->path);
	memset(val, 'w', sizeof(val));
	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	/* Each transaction: a volume of three pages and its change, about 7 frames. */
	for (int i = 0; i < 3 * 8192 / 7; i++) {
		struct store_op op = {STORE_OP_PUT, STORE_VOLUME, id, val, sizeof(val), STORE_ANY};

		snprintf(id, sizeof(id), "vol-%d", i % 500);
		assert_int_equal(store_txn(s, &op, 1, NULL, &e), 0);
		assert_int_equal(stat(wal, &sb), 0);
		if (sb.st_size > most)
			most = sb.st_size;
	}
	/* One checkpoint's frames (8192) and the transaction that passed it. */
	assert_true(most <= (off_t)(8192 + 64) * (TQ_PAGE + 24) + 32);
	store_close(s);
	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	assert_int_equal(store_get(s, STORE_VOLUME, "vol-499", &o, &e), 0);
	assert_int_equal(o.len, sizeof(val));
	store_obj_free(&o);
	store_close(s);
}

/* Writes len bytes of buf to path (created or emptied). */
static void tq_spit(const char *path, const char *buf, size_t len)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(buf, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/*
 * A transaction larger than SQLite's page cache spills pages to the WAL
 * before its commit and may write some of them again in place, then
 * rewrite the checksums of the frame headers after them, the commit's
 * among them (the store VFS sends such writes straight to the file).
 * Copied while the store is still open, as a kill -9 would leave them,
 * the database and WAL files hold the whole transaction.
 */
static void test_sqlite_big_txn_on_disk(void **state)
{
	struct tq *t = *state;
	enum { NBIG = 8 };
	char *val = malloc(STORE_VALUE_MAX);
	char ids[NBIG][16], copy[PATH_MAX + 32], from[PATH_MAX + 32], to[PATH_MAX + 64];
	struct store_op ops[NBIG];
	struct store *s, *c;
	struct store_obj o;
	uint64_t index;
	size_t len;
	char *bytes;
	struct err e;

	assert_non_null(val);
	assert_int_equal(store_sqlite_open(t->path, &s, &e), 0);
	for (int i = 0; i < NBIG; i++) {
		snprintf(ids[i], sizeof(ids[i]), "big-%d", i);
		ops[i] =
		    (struct store_op){STORE_OP_PUT, STORE_VOLUME, ids[i], val, STORE_VALUE_MAX, 0};
	}
	for (size_t i = 0; i < STORE_VALUE_MAX; i++)
		val[i] = (char)('a' + i % 23);
	assert_int_equal(store_txn(s, ops, NBIG, &index, &e), 0);
	snprintf(copy, sizeof(copy), "%s/copy.db", t->dir);
	for (int k = 0; k < 2; k++) {
		snprintf(from, sizeof(from), "%s%s", t->path, k ? "-wal" : "");
		snprintf(to, sizeof(to), "%s%s", copy, k ? "-wal" : "");
		bytes = tq_slurp(from, &len);
		tq_spit(to, bytes, len);
		free(bytes);
	}
	assert_int_equal(store_sqlite_open(copy, &c, &e), 0);
	assert_int_equal(store_index(c), index);
	for (int i = 0; i < NBIG; i++) {
		assert_int_equal(store_get(c, STORE_VOLUME, ids[i], &o, &e), 0);
		assert_int_equal(o.len, STORE_VALUE_MAX);
		assert_memory_equal(o.value, val, STORE_VALUE_MAX);
		store_obj_free(&o);
	}
	store_close(c);
	store_close(s);
	unlink(copy);
	snprintf(to, sizeof(to), "%s-wal", copy);
	unlink(to);
	free(val);
}

/* A store in a new directory for each contract test. */
static int tq_open(void *arg, struct store **out, void **ctx, struct err *e)
{
	struct tq *t = calloc(1, sizeof(*t));
	int rc;

	*ctx = t;
	if (t == NULL)
		return err_set(e, CSID_ENOMEM, "out of memory");
	snprintf(t->dir, sizeof(t->dir), "/tmp/csid-test-sqlite-XXXXXX");
	if (mkdtemp(t->dir) == NULL)
		return err_set(e, CSID_EIO, "mkdtemp failed");
	snprintf(t->path, sizeof(t->path), "%s/store.db", t->dir);
	rc = store_sqlite_open(t->path, out, e);
	return rc;
}

static void tq_close(void *arg, void *ctx)
{
	void *state = ctx;

	if (ctx != NULL)
		tq_teardown(&state);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_sqlite_reopen, tq_setup, tq_teardown),
	    cmocka_unit_test_setup_teardown(test_sqlite_read_cache, tq_setup, tq_teardown),
	    cmocka_unit_test_setup_teardown(test_sqlite_v1_migrated, tq_setup, tq_teardown),
	    cmocka_unit_test_setup_teardown(test_sqlite_v2_migrated, tq_setup, tq_teardown),
	    cmocka_unit_test_setup_teardown(test_sqlite_newer_refused, tq_setup, tq_teardown),
	    cmocka_unit_test_setup_teardown(test_sqlite_foreign_refused, tq_setup, tq_teardown),
	    cmocka_unit_test_setup_teardown(test_sqlite_corrupt_refused, tq_setup, tq_teardown),
	    cmocka_unit_test_setup_teardown(test_sqlite_empty_file, tq_setup, tq_teardown),
	    cmocka_unit_test_setup_teardown(test_sqlite_locked, tq_setup, tq_teardown),
	    cmocka_unit_test_setup_teardown(test_sqlite_kill9, tq_setup, tq_teardown),
	    cmocka_unit_test_setup_teardown(test_sqlite_wal_bounded, tq_setup, tq_teardown),
	    cmocka_unit_test_setup_teardown(test_sqlite_big_txn_on_disk, tq_setup, tq_teardown),
	};

	const struct store_conformance sqlite = {"sqlite", tq_open, tq_close, NULL,
						 STORE_VALUE_MAX};
	int failed;

	if (argc == 3 && strcmp(argv[1], "--child") == 0)
		return tq_child(argv[2]);
	failed = store_conformance_run(&sqlite);
	return failed + cmocka_run_group_tests(tests, NULL, NULL);
}
