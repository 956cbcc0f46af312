/*
 * SQLite rows of the mounter's records (table mounter_mounts in the
 * agent database) and the transition function of their state machine.
 * Each transition is one autocommitted statement, so a crash leaves every
 * row in a whole state. Statements are prepared once per connection
 * (SQLITE_PREPARE_PERSISTENT) and reset after each use: a mount and
 * unmount cycle runs about ten of them, and compiling each every time
 * cost more than running it. Attachment, access mode and state are stored by
 * name, so the file reads well with the sqlite3 shell.
 */
#include "agent/mount_store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "store/agent_db.h"
#include "util/log.h"

static const char *const mount_store_schema[] = {
    "CREATE TABLE mounter_mounts ("
    " volume_id TEXT NOT NULL, alloc_id TEXT NOT NULL,"
    " plugin_id TEXT NOT NULL, external_id TEXT NOT NULL,"
    " read_only INTEGER NOT NULL, attachment TEXT NOT NULL, access TEXT NOT NULL,"
    " fs_type TEXT NOT NULL, options_hash TEXT NOT NULL,"
    " staging_path TEXT, target_path TEXT NOT NULL,"
    " publish_context TEXT NOT NULL, volume_context TEXT NOT NULL,"
    " state TEXT NOT NULL, updated_ms INTEGER NOT NULL,"
    " PRIMARY KEY (volume_id, alloc_id));"
    "CREATE INDEX mounter_mounts_staging ON mounter_mounts(staging_path);",
    /* The claim flow's mark, written with the mount's intent (mount_record.claimed). */
    "ALTER TABLE mounter_mounts ADD COLUMN claimed INTEGER NOT NULL DEFAULT 0",
};

static const char *const mount_state_names[MOUNT_STATE_COUNT_] = {
    [MOUNT_STATE_NEW] = "new",
    [MOUNT_STATE_STAGING] = "staging",
    [MOUNT_STATE_STAGED] = "staged",
    [MOUNT_STATE_PUBLISHING] = "publishing",
    [MOUNT_STATE_PUBLISHED] = "published",
    [MOUNT_STATE_UNPUBLISHING] = "unpublishing",
    [MOUNT_STATE_UNSTAGING] = "unstaging",
    [MOUNT_STATE_UNSTAGING_UNCONFIRMED] = "unstaging-unconfirmed",
    [MOUNT_STATE_MOUNTING] = "mounting",
    [MOUNT_STATE_UNPUBLISHING_UNCONFIRMED] = "unpublishing-unconfirmed",
    [MOUNT_STATE_GONE] = "gone",
};

#define MOUNT_STORE_BIT(s) (1u << (s))

/* Allowed next states, one bit mask per state (see the table in the header). */
static const unsigned mount_store_next[MOUNT_STATE_COUNT_] = {
    [MOUNT_STATE_NEW] = MOUNT_STORE_BIT(MOUNT_STATE_MOUNTING) |
			MOUNT_STORE_BIT(MOUNT_STATE_PUBLISHING) |
			MOUNT_STORE_BIT(MOUNT_STATE_STAGING) | MOUNT_STORE_BIT(MOUNT_STATE_STAGED),
    [MOUNT_STATE_MOUNTING] = MOUNT_STORE_BIT(MOUNT_STATE_PUBLISHED) |
			     MOUNT_STORE_BIT(MOUNT_STATE_UNSTAGING_UNCONFIRMED) |
			     MOUNT_STORE_BIT(MOUNT_STATE_UNPUBLISHING) |
			     MOUNT_STORE_BIT(MOUNT_STATE_UNPUBLISHING_UNCONFIRMED),
    [MOUNT_STATE_UNPUBLISHING_UNCONFIRMED] =
	MOUNT_STORE_BIT(MOUNT_STATE_UNSTAGING_UNCONFIRMED) | MOUNT_STORE_BIT(MOUNT_STATE_GONE),
    [MOUNT_STATE_STAGING] = MOUNT_STORE_BIT(MOUNT_STATE_STAGED) |
			    MOUNT_STORE_BIT(MOUNT_STATE_PUBLISHING) |
			    MOUNT_STORE_BIT(MOUNT_STATE_UNSTAGING_UNCONFIRMED),
    [MOUNT_STATE_STAGED] = MOUNT_STORE_BIT(MOUNT_STATE_PUBLISHING) |
			   MOUNT_STORE_BIT(MOUNT_STATE_UNSTAGING) |
			   MOUNT_STORE_BIT(MOUNT_STATE_GONE),
    [MOUNT_STATE_PUBLISHING] =
	MOUNT_STORE_BIT(MOUNT_STATE_PUBLISHED) | MOUNT_STORE_BIT(MOUNT_STATE_UNPUBLISHING),
    [MOUNT_STATE_PUBLISHED] = MOUNT_STORE_BIT(MOUNT_STATE_UNPUBLISHING),
    [MOUNT_STATE_UNPUBLISHING] =
	MOUNT_STORE_BIT(MOUNT_STATE_UNSTAGING) | MOUNT_STORE_BIT(MOUNT_STATE_GONE),
    [MOUNT_STATE_UNSTAGING] = MOUNT_STORE_BIT(MOUNT_STATE_GONE),
    [MOUNT_STATE_UNSTAGING_UNCONFIRMED] = MOUNT_STORE_BIT(MOUNT_STATE_GONE),
    [MOUNT_STATE_GONE] = 0,
};

/* The statements of the store, prepared once per connection (mount_store_stmt). */
enum mount_store_sql {
	MOUNT_STORE_SQL_GET,
	MOUNT_STORE_SQL_LIST,
	MOUNT_STORE_SQL_LIST_VOLUME,
	MOUNT_STORE_SQL_USERS,
	MOUNT_STORE_SQL_INSERT,
	MOUNT_STORE_SQL_UPDATE,
	MOUNT_STORE_SQL_DELETE,
	MOUNT_STORE_SQL_CLAIMED,
	MOUNT_STORE_SQL_COUNT_
};

#define MOUNT_STORE_COLS                                                               \
	"volume_id, alloc_id, plugin_id, external_id, read_only, attachment, access, " \
	"fs_type, options_hash, staging_path, target_path, publish_context, "          \
	"volume_context, state, updated_ms, claimed"

static const char *const mount_store_sql_text[MOUNT_STORE_SQL_COUNT_] = {
    [MOUNT_STORE_SQL_GET] = "SELECT " MOUNT_STORE_COLS " FROM mounter_mounts "
			    "WHERE volume_id = ?1 AND alloc_id = ?2",
    [MOUNT_STORE_SQL_LIST] = "SELECT " MOUNT_STORE_COLS " FROM mounter_mounts "
			     "ORDER BY volume_id, alloc_id",
    [MOUNT_STORE_SQL_LIST_VOLUME] = "SELECT " MOUNT_STORE_COLS " FROM mounter_mounts "
				    "WHERE volume_id = ?1 ORDER BY volume_id, alloc_id",
    [MOUNT_STORE_SQL_USERS] = "SELECT count(*), coalesce(sum(state IN ('staged', 'publishing', "
			      "'published', 'unpublishing')), 0) FROM mounter_mounts "
			      "WHERE staging_path = ?1 AND alloc_id != ?2",
    [MOUNT_STORE_SQL_INSERT] =
	"INSERT INTO mounter_mounts (" MOUNT_STORE_COLS ") VALUES "
	"(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    [MOUNT_STORE_SQL_UPDATE] = "UPDATE mounter_mounts SET state = ?3, updated_ms = ?4 "
			       "WHERE volume_id = ?1 AND alloc_id = ?2",
    [MOUNT_STORE_SQL_DELETE] = "DELETE FROM mounter_mounts WHERE volume_id = ?1 AND alloc_id = ?2",
    [MOUNT_STORE_SQL_CLAIMED] = "UPDATE mounter_mounts SET claimed = ?3 "
				"WHERE volume_id = ?1 AND alloc_id = ?2",
};

struct mount_store {
	sqlite3 *db;
	pthread_mutex_t lock; /* guards db and st */
	sqlite3_stmt *st[MOUNT_STORE_SQL_COUNT_]; /* NULL until first used */
};

const char *mount_state_name(enum mount_state s)
{
	if ((unsigned)s >= MOUNT_STATE_COUNT_)
		return "invalid";
	return mount_state_names[s];
}

static int mount_state_parse(const char *s)
{
	for (int i = 0; s != NULL && i < MOUNT_STATE_COUNT_; i++)
		if (strcmp(s, mount_state_names[i]) == 0)
			return i;
	return -1;
}

bool mount_store_allowed(enum mount_state from, enum mount_state to)
{
	if ((unsigned)from >= MOUNT_STATE_COUNT_ || (unsigned)to >= MOUNT_STATE_COUNT_)
		return false;
	return (mount_store_next[from] & MOUNT_STORE_BIT(to)) != 0;
}

void mount_record_free(struct mount_record *r)
{
	if (r == NULL)
		return;
	free(r->volume_id);
	free(r->alloc_id);
	free(r->plugin_id);
	free(r->external_id);
	free(r->fs_type);
	free(r->staging_path);
	free(r->target_path);
	free(r->publish_context);
	free(r->volume_context);
	free(r);
}

void mount_records_free(struct mount_record **rs, size_t n)
{
	if (rs == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		mount_record_free(rs[i]);
	free(rs);
}

int mount_store_open(const char *db_path, struct mount_store **out, struct err *e)
{
	struct mount_store *s = calloc(1, sizeof(*s));
	int rc;

	if (s == NULL)
		return err_set(e, CSID_ENOMEM, "mount store: out of memory");
	rc = agent_db_open(db_path, &s->db, e);
	if (rc == 0)
		rc = agent_db_migrate(
		    s->db, "mounter", mount_store_schema,
		    (int)(sizeof(mount_store_schema) / sizeof(*mount_store_schema)), e);
	if (rc != 0) {
		agent_db_close(s->db);
		free(s);
		return err_wrap(e, "mount store");
	}
	pthread_mutex_init(&s->lock, NULL);
	*out = s;
	return 0;
}

void mount_store_close(struct mount_store *s)
{
	if (s == NULL)
		return;
	for (int i = 0; i < MOUNT_STORE_SQL_COUNT_; i++)
		sqlite3_finalize(s->st[i]);
	agent_db_close(s->db);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static int mount_store_sqlerr(struct mount_store *s, int rc, const char *what, struct err *e)
{
	return err_set(e, agent_db_err(rc), "mount store: %s: %s", what, sqlite3_errmsg(s->db));
}

/*
 * The cached statement id, prepared on first use (the caller holds the
 * lock). Give it back with mount_store_stmt_done.
 */
static int mount_store_stmt(struct mount_store *s, enum mount_store_sql id, sqlite3_stmt **out,
			    struct err *e)
{
	int rc;

	if (s->st[id] == NULL) {
		rc = sqlite3_prepare_v3(s->db, mount_store_sql_text[id], -1,
					SQLITE_PREPARE_PERSISTENT, &s->st[id], NULL);
		if (rc != SQLITE_OK) {
			s->st[id] = NULL;
			return mount_store_sqlerr(s, rc, "prepare", e);
		}
	}
	*out = s->st[id];
	return 0;
}

/* Resets a cached statement for its next use (NULL is a no-op). */
static void mount_store_stmt_done(sqlite3_stmt *st)
{
	if (st == NULL)
		return;
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

static char *mount_store_col(sqlite3_stmt *st, int i, bool *nomem)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	char *c;

	if (t == NULL)
		return NULL;
	c = strdup((const char *)t);
	if (c == NULL)
		*nomem = true;
	return c;
}

/* Builds a record from the current row of st (columns MOUNT_STORE_COLS). */
static int mount_store_row(sqlite3_stmt *st, struct mount_record **out, struct err *e)
{
	struct mount_record *r = calloc(1, sizeof(*r));
	bool nomem = r == NULL;
	const unsigned char *hash;
	int state;

	if (r == NULL)
		return err_set(e, CSID_ENOMEM, "mount store: out of memory");
	r->volume_id = mount_store_col(st, 0, &nomem);
	r->alloc_id = mount_store_col(st, 1, &nomem);
	r->plugin_id = mount_store_col(st, 2, &nomem);
	r->external_id = mount_store_col(st, 3, &nomem);
	r->read_only = sqlite3_column_int(st, 4) != 0;
	r->fs_type = mount_store_col(st, 7, &nomem);
	r->staging_path = mount_store_col(st, 9, &nomem);
	r->target_path = mount_store_col(st, 10, &nomem);
	r->publish_context = mount_store_col(st, 11, &nomem);
	r->volume_context = mount_store_col(st, 12, &nomem);
	r->updated_ms = sqlite3_column_int64(st, 14);
	r->claimed = sqlite3_column_int(st, 15) != 0;
	hash = sqlite3_column_text(st, 8);
	snprintf(r->options_hash, sizeof(r->options_hash), "%s", hash ? (const char *)hash : "");
	if (nomem) {
		mount_record_free(r);
		return err_set(e, CSID_ENOMEM, "mount store: out of memory");
	}
	state = mount_state_parse((const char *)sqlite3_column_text(st, 13));
	if (mount_attachment_parse((const char *)sqlite3_column_text(st, 5), &r->attachment, e) !=
		0 ||
	    mount_access_parse((const char *)sqlite3_column_text(st, 6), &r->access, e) != 0 ||
	    state <= MOUNT_STATE_NEW || state >= MOUNT_STATE_GONE || r->volume_id == NULL ||
	    r->alloc_id == NULL || r->target_path == NULL) {
		err_set(e, CSID_EIO, "mount store: corrupt record %s/%s",
			r->volume_id ? r->volume_id : "?", r->alloc_id ? r->alloc_id : "?");
		mount_record_free(r);
		return CSID_EIO;
	}
	r->state = (enum mount_state)state;
	*out = r;
	return 0;
}

/* Runs a prepared SELECT of MOUNT_STORE_COLS, collecting every row. */
static int mount_store_collect(struct mount_store *s, sqlite3_stmt *st, struct mount_record ***out,
			       size_t *n, struct err *e)
{
	struct mount_record **rs = NULL;
	size_t cnt = 0, cap = 0;
	int rc;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (cnt == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			struct mount_record **grown = realloc(rs, ncap * sizeof(*grown));

			if (grown == NULL) {
				mount_records_free(rs, cnt);
				return err_set(e, CSID_ENOMEM, "mount store: out of memory");
			}
			rs = grown;
			cap = ncap;
		}
		rc = mount_store_row(st, &rs[cnt], e);
		if (rc != 0) {
			mount_records_free(rs, cnt);
			return rc;
		}
		cnt++;
	}
	if (rc != SQLITE_DONE) {
		mount_records_free(rs, cnt);
		return mount_store_sqlerr(s, rc, "select", e);
	}
	*out = rs;
	*n = cnt;
	return 0;
}

int mount_store_list(struct mount_store *s, const char *volume_id, struct mount_record ***out,
		     size_t *n, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&s->lock);
	rc = mount_store_stmt(s, volume_id ? MOUNT_STORE_SQL_LIST_VOLUME : MOUNT_STORE_SQL_LIST,
			      &st, e);
	if (rc == 0 && volume_id)
		sqlite3_bind_text(st, 1, volume_id, -1, SQLITE_STATIC);
	if (rc == 0)
		rc = mount_store_collect(s, st, out, n, e);
	mount_store_stmt_done(st);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int mount_store_get(struct mount_store *s, const char *volume_id, const char *alloc_id,
		    struct mount_record **out, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*out = NULL;
	pthread_mutex_lock(&s->lock);
	rc = mount_store_stmt(s, MOUNT_STORE_SQL_GET, &st, e);
	if (rc != 0)
		goto out;
	sqlite3_bind_text(st, 1, volume_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, alloc_id, -1, SQLITE_STATIC);
	/* The primary key: one row at most. */
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		rc = mount_store_row(st, out, e);
	else if (rc == SQLITE_DONE)
		rc = err_set(e, CSID_ENOTFOUND, "no mount of volume %s for alloc %s", volume_id,
			     alloc_id);
	else
		rc = mount_store_sqlerr(s, rc, "select", e);
out:
	mount_store_stmt_done(st);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int mount_store_stage_users(struct mount_store *s, const char *staging_path,
			    const char *exclude_alloc, int *users, int *staged, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*users = 0;
	*staged = 0;
	pthread_mutex_lock(&s->lock);
	rc = mount_store_stmt(s, MOUNT_STORE_SQL_USERS, &st, e);
	if (rc != 0)
		goto out;
	sqlite3_bind_text(st, 1, staging_path, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, exclude_alloc, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = mount_store_sqlerr(s, rc, "stage users", e);
		goto out;
	}
	*users = sqlite3_column_int(st, 0);
	*staged = sqlite3_column_int(st, 1);
	rc = 0;
out:
	mount_store_stmt_done(st);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int64_t mount_store_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Binds every column of r, with state to, for the INSERT statement. */
static void mount_store_bind_all(sqlite3_stmt *st, const struct mount_record *r,
				 enum mount_state to, int64_t now)
{
	sqlite3_bind_text(st, 1, r->volume_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, r->alloc_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, r->plugin_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, r->external_id, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 5, r->read_only);
	sqlite3_bind_text(st, 6, mount_attachment_name(r->attachment), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, mount_access_name(r->access), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 8, r->fs_type ? r->fs_type : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 9, r->options_hash, -1, SQLITE_STATIC);
	if (r->staging_path)
		sqlite3_bind_text(st, 10, r->staging_path, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 10);
	sqlite3_bind_text(st, 11, r->target_path, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 12, r->publish_context ? r->publish_context : "{}", -1,
			  SQLITE_STATIC);
	sqlite3_bind_text(st, 13, r->volume_context ? r->volume_context : "{}", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 14, mount_state_name(to), -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 15, now);
	sqlite3_bind_int(st, 16, r->claimed);
}

static void mount_store_log(const struct mount_record *r, enum mount_state to)
{
	char line[400];
	char q[800];

	snprintf(line, sizeof(line), "mount %s/%s: %s -> %s", r->volume_id, r->alloc_id,
		 mount_state_name(r->state), mount_state_name(to));
	log_debug("msg=%s", log_q(q, sizeof(q), line));
}

int mount_store_transition(struct mount_store *s, struct mount_record *r, enum mount_state to,
			   struct err *e)
{
	sqlite3_stmt *st = NULL;
	int64_t now = mount_store_now_ms();
	enum mount_store_sql id;
	int rc;

	if (!mount_store_allowed(r->state, to))
		return err_set(e, CSID_EINTERNAL, "mount %s/%s: transition %s -> %s not allowed",
			       r->volume_id, r->alloc_id, mount_state_name(r->state),
			       mount_state_name(to));
	if (r->state == MOUNT_STATE_NEW)
		id = MOUNT_STORE_SQL_INSERT;
	else if (to == MOUNT_STATE_GONE)
		id = MOUNT_STORE_SQL_DELETE;
	else
		id = MOUNT_STORE_SQL_UPDATE;
	pthread_mutex_lock(&s->lock);
	rc = mount_store_stmt(s, id, &st, e);
	if (rc != 0)
		goto out;
	if (id == MOUNT_STORE_SQL_INSERT) {
		mount_store_bind_all(st, r, to, now);
	} else {
		sqlite3_bind_text(st, 1, r->volume_id, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, r->alloc_id, -1, SQLITE_STATIC);
		if (id == MOUNT_STORE_SQL_UPDATE) {
			sqlite3_bind_text(st, 3, mount_state_name(to), -1, SQLITE_STATIC);
			sqlite3_bind_int64(st, 4, now);
		}
	}
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		rc = mount_store_sqlerr(s, rc, "write", e);
		goto out;
	}
	if (id != MOUNT_STORE_SQL_INSERT && sqlite3_changes(s->db) != 1) {
		rc = err_set(e, CSID_EIO, "mount store: record %s/%s vanished", r->volume_id,
			     r->alloc_id);
		goto out;
	}
	mount_store_log(r, to);
	r->state = to;
	r->updated_ms = now;
	rc = 0;
out:
	mount_store_stmt_done(st);
	pthread_mutex_unlock(&s->lock);
	if (rc != 0)
		err_wrap(e, "mount %s/%s: %s -> %s", r->volume_id, r->alloc_id,
			 mount_state_name(r->state), mount_state_name(to));
	return rc;
}

int mount_store_forget(struct mount_store *s, struct mount_record *r, struct err *e)
{
	sqlite3_stmt *st = NULL;
	char line[400];
	char q[800];
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = mount_store_stmt(s, MOUNT_STORE_SQL_DELETE, &st, e);
	if (rc != 0)
		goto out;
	sqlite3_bind_text(st, 1, r->volume_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, r->alloc_id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		rc = mount_store_sqlerr(s, rc, "delete", e);
		goto out;
	}
	if (sqlite3_changes(s->db) != 1) {
		rc = err_set(e, CSID_ENOTFOUND, "no mount of volume %s for alloc %s", r->volume_id,
			     r->alloc_id);
		goto out;
	}
	snprintf(line, sizeof(line), "mount %s/%s: %s -> gone (forced)", r->volume_id, r->alloc_id,
		 mount_state_name(r->state));
	log_warn("msg=%s", log_q(q, sizeof(q), line));
	r->state = MOUNT_STATE_GONE;
	rc = 0;
out:
	mount_store_stmt_done(st);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

int mount_store_set_claimed(struct mount_store *s, struct mount_record *r, bool claimed,
			    struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc;

	pthread_mutex_lock(&s->lock);
	rc = mount_store_stmt(s, MOUNT_STORE_SQL_CLAIMED, &st, e);
	if (rc != 0)
		goto out;
	sqlite3_bind_text(st, 1, r->volume_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, r->alloc_id, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 3, claimed);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		rc = mount_store_sqlerr(s, rc, "write", e);
		goto out;
	}
	if (sqlite3_changes(s->db) != 1) {
		rc = err_set(e, CSID_EIO, "mount store: record %s/%s vanished", r->volume_id,
			     r->alloc_id);
		goto out;
	}
	r->claimed = claimed;
	rc = 0;
out:
	mount_store_stmt_done(st);
	pthread_mutex_unlock(&s->lock);
	if (rc != 0)
		err_wrap(e, "mount %s/%s: claim mark", r->volume_id, r->alloc_id);
	return rc;
}
