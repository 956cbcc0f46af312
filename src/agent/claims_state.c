/*
 * The claim flow's durable rows (claims_state.h): two tables of the
 * agent database, one SQLite connection used under a mutex. The schema
 * steps are those the agent API used before the flow moved here, so an
 * agent database written by an older agent opens unchanged. The
 * statements of an unmount (the pending release, the mark's removal)
 * are prepared once per connection and reset after each use: compiling
 * one cost as much as running it, on the path of every mount.
 */
#include "agent/claims_state.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include <sqlite3.h>

#include "store/agent_db.h"

static const char *const claims_state_schema[] = {
    "CREATE TABLE claims_pending_release ("
    " volume_id TEXT NOT NULL, alloc_id TEXT NOT NULL,"
    " PRIMARY KEY (volume_id, alloc_id))",
    /* Why the release was asked (a claim owner gone), sent along. */
    "ALTER TABLE claims_pending_release ADD COLUMN reason TEXT",
    /* The allocations the claim flow mounted (claims_orphans.c). */
    "CREATE TABLE claims_mounted ("
    " volume_id TEXT NOT NULL, alloc_id TEXT NOT NULL,"
    " PRIMARY KEY (volume_id, alloc_id))",
};

/* The statements kept prepared (claims_state_stmt). */
enum claims_state_sql {
	CLAIMS_STATE_SQL_RELEASE_PUT,
	CLAIMS_STATE_SQL_RELEASE_DROP,
	CLAIMS_STATE_SQL_UNMARK,
	CLAIMS_STATE_SQL_MARKED,
	CLAIMS_STATE_SQL_COUNT_
};

static const char *const claims_state_sql_text[CLAIMS_STATE_SQL_COUNT_] = {
    [CLAIMS_STATE_SQL_RELEASE_PUT] = "INSERT OR IGNORE INTO claims_pending_release VALUES "
				     "(?, ?, ?)",
    [CLAIMS_STATE_SQL_RELEASE_DROP] = "DELETE FROM claims_pending_release WHERE volume_id = ? "
				      "AND alloc_id = ?",
    [CLAIMS_STATE_SQL_UNMARK] = "DELETE FROM claims_mounted WHERE volume_id = ? AND "
				"alloc_id = ?",
    [CLAIMS_STATE_SQL_MARKED] = "SELECT 1 FROM claims_mounted WHERE volume_id = ? AND "
				"alloc_id = ?",
};

struct claims_state {
	sqlite3 *db;
	pthread_mutex_t mu; /* guards db and st */
	sqlite3_stmt *st[CLAIMS_STATE_SQL_COUNT_]; /* NULL until first used */
};

int claims_state_open(const char *db_path, struct claims_state **out, struct err *e)
{
	struct claims_state *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (!s)
		return err_set(e, CSID_ENOMEM, "out of memory");
	pthread_mutex_init(&s->mu, NULL);
	rc = agent_db_open(db_path, &s->db, e);
	if (rc == 0)
		rc = agent_db_migrate(
		    s->db, "claims", claims_state_schema,
		    (int)(sizeof(claims_state_schema) / sizeof(claims_state_schema[0])), e);
	if (rc) {
		claims_state_close(s);
		return err_wrap(e, "claim records");
	}
	*out = s;
	return 0;
}

void claims_state_close(struct claims_state *s)
{
	if (!s)
		return;
	for (int i = 0; i < CLAIMS_STATE_SQL_COUNT_; i++)
		sqlite3_finalize(s->st[i]);
	agent_db_close(s->db);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/*
 * Runs statement q with vol, alloc (and reason when nbind is 3) bound;
 * *row (may be NULL) whether a row came. what names the rows in a
 * message.
 */
static int claims_state_sql(struct claims_state *s, enum claims_state_sql q, const char *vol,
			    const char *alloc, const char *reason, int nbind, bool *row,
			    const char *what, struct err *e)
{
	int src = SQLITE_OK, rc = 0;
	sqlite3_stmt *st;

	pthread_mutex_lock(&s->mu);
	if (!s->st[q])
		src = sqlite3_prepare_v3(s->db, claims_state_sql_text[q], -1,
					 SQLITE_PREPARE_PERSISTENT, &s->st[q], NULL);
	st = s->st[q];
	if (src == SQLITE_OK) {
		sqlite3_bind_text(st, 1, vol, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, alloc, -1, SQLITE_STATIC);
		if (nbind == 3)
			sqlite3_bind_text(st, 3, reason, -1, SQLITE_STATIC);
		src = sqlite3_step(st);
	}
	if (row)
		*row = src == SQLITE_ROW;
	if (src != SQLITE_OK && src != SQLITE_DONE && src != SQLITE_ROW)
		rc = err_set(e, agent_db_err(src), "%s of %s for %s: %s", what, vol, alloc,
			     sqlite3_errmsg(s->db));
	if (st) {
		/* Reset at once: a statement left stepping would hold its read transaction. */
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int claims_state_release_put(struct claims_state *s, const char *vol, const char *alloc,
			     const char *reason, struct err *e)
{
	return claims_state_sql(s, CLAIMS_STATE_SQL_RELEASE_PUT, vol, alloc, reason, 3, NULL,
				"pending release", e);
}

int claims_state_release_drop(struct claims_state *s, const char *vol, const char *alloc,
			      struct err *e)
{
	return claims_state_sql(s, CLAIMS_STATE_SQL_RELEASE_DROP, vol, alloc, NULL, 2, NULL,
				"pending release", e);
}

size_t claims_state_release_count(struct claims_state *s)
{
	sqlite3_stmt *st = NULL;
	size_t n = 0;

	pthread_mutex_lock(&s->mu);
	if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM claims_pending_release", -1, &st,
			       NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = (size_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->mu);
	return n;
}

size_t claims_state_release_list(struct claims_state *s, struct claims_state_release *rows,
				 size_t max)
{
	sqlite3_stmt *st = NULL;
	size_t n = 0;

	pthread_mutex_lock(&s->mu);
	if (sqlite3_prepare_v2(s->db,
			       "SELECT volume_id, alloc_id, reason FROM claims_pending_release "
			       "ORDER BY volume_id, alloc_id",
			       -1, &st, NULL) != SQLITE_OK) {
		pthread_mutex_unlock(&s->mu);
		return 0;
	}
	while (n < max && sqlite3_step(st) == SQLITE_ROW) {
		const char *reason = (const char *)sqlite3_column_text(st, 2);

		snprintf(rows[n].vol, sizeof(rows[n].vol), "%s",
			 (const char *)sqlite3_column_text(st, 0));
		snprintf(rows[n].alloc, sizeof(rows[n].alloc), "%s",
			 (const char *)sqlite3_column_text(st, 1));
		snprintf(rows[n].reason, sizeof(rows[n].reason), "%s", reason ? reason : "");
		n++;
	}
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->mu);
	return n;
}

int claims_state_unmark(struct claims_state *s, const char *vol, const char *alloc, struct err *e)
{
	return claims_state_sql(s, CLAIMS_STATE_SQL_UNMARK, vol, alloc, NULL, 2, NULL, "claim mark",
				e);
}

int claims_state_marked(struct claims_state *s, const char *vol, const char *alloc, bool *out,
			struct err *e)
{
	return claims_state_sql(s, CLAIMS_STATE_SQL_MARKED, vol, alloc, NULL, 2, out, "claim mark",
				e);
}
