/*
 * The claim flow's durable rows (claims_state.h): two tables of the
 * agent database, one SQLite connection used under a mutex. The schema
 * steps are those the agent API used before the flow moved here, so an
 * agent database written by an older agent opens unchanged.
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

struct claims_state {
	sqlite3 *db;
	pthread_mutex_t mu;
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
	agent_db_close(s->db);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/*
 * Runs sql with vol, alloc (and reason when nbind is 3) bound; *row
 * (may be NULL) whether a row came. what names the rows in a message.
 */
static int claims_state_sql(struct claims_state *s, const char *sql, const char *vol,
			    const char *alloc, const char *reason, int nbind, bool *row,
			    const char *what, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int src, rc = 0;

	pthread_mutex_lock(&s->mu);
	src = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
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
	sqlite3_finalize(st);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int claims_state_release_put(struct claims_state *s, const char *vol, const char *alloc,
			     const char *reason, struct err *e)
{
	return claims_state_sql(s, "INSERT OR IGNORE INTO claims_pending_release VALUES (?, ?, ?)",
				vol, alloc, reason, 3, NULL, "pending release", e);
}

int claims_state_release_drop(struct claims_state *s, const char *vol, const char *alloc,
			      struct err *e)
{
	return claims_state_sql(
	    s, "DELETE FROM claims_pending_release WHERE volume_id = ? AND alloc_id = ?", vol,
	    alloc, NULL, 2, NULL, "pending release", e);
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

int claims_state_mark(struct claims_state *s, const char *vol, const char *alloc, bool on,
		      struct err *e)
{
	return claims_state_sql(s,
				on ? "INSERT OR IGNORE INTO claims_mounted VALUES (?, ?)"
				   : "DELETE FROM claims_mounted WHERE volume_id = ? AND "
				     "alloc_id = ?",
				vol, alloc, NULL, 2, NULL, "claim mark", e);
}

int claims_state_marked(struct claims_state *s, const char *vol, const char *alloc, bool *out,
			struct err *e)
{
	return claims_state_sql(s,
				"SELECT 1 FROM claims_mounted WHERE volume_id = ? AND alloc_id = ?",
				vol, alloc, NULL, 2, out, "claim mark", e);
}
