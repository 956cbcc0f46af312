/*
 * Pending releases of the agent API's claims (agent_api_claims.c): an
 * unmount that took the mount down records the release in the agent's
 * database before sending it, and forgets it once a server took it (or
 * refused it for good). A release no server answered, or one refused
 * with 403 (a wrong token, a node another agent instance took over: an
 * operator's fix lets it pass), stays recorded; a
 * thread of its own retries every recorded release with backoff (1 s
 * doubling to 30 s), and at start, so an agent restarted meanwhile
 * finishes it. Nothing is freed on the server before the node's
 * unpublish succeeded: a release is recorded only after the unmount.
 *
 * The table (module "claims"): claims_pending_release(volume_id,
 * alloc_id, reason), reason NULL unless a claim owner was gone. The connection is used under rel_mu
 * from the handlers and the thread.
 */
#include "api/agent_api_int.h"

#include <stdlib.h>
#include <string.h>

#include "agent/state.h"
#include "util/clock.h"
#include "util/log.h"

#define AGENT_API_RELEASE_MIN_MS 1000
#define AGENT_API_RELEASE_MAX_MS 30000
/* Releases retried per pass at most (the rest in the next pass). */
#define AGENT_API_RELEASE_BATCH 64

static const char *const agent_api_release_schema[] = {
    "CREATE TABLE claims_pending_release ("
    " volume_id TEXT NOT NULL, alloc_id TEXT NOT NULL,"
    " PRIMARY KEY (volume_id, alloc_id))",
    /* Why the release was asked (a claim owner gone), sent along. */
    "ALTER TABLE claims_pending_release ADD COLUMN reason TEXT",
    /* The allocations the claim flow mounted (agent_api_orphans.c). */
    "CREATE TABLE claims_mounted ("
    " volume_id TEXT NOT NULL, alloc_id TEXT NOT NULL,"
    " PRIMARY KEY (volume_id, alloc_id))",
};

struct agent_api_release_row {
	char vol[MOUNT_NAME_MAX + 1];
	char alloc[MOUNT_NAME_MAX + 1];
	char reason[OWNERS_REASON_MAX];
};

int agent_api_release_record(struct agent_api *a, const char *vol, const char *alloc,
			     const char *reason, bool add, struct err *e)
{
	sqlite3_stmt *st = NULL;
	int rc = 0, src;

	if (!a->rel_db)
		return 0;
	pthread_mutex_lock(&a->rel_mu);
	src =
	    sqlite3_prepare_v2(a->rel_db,
			       add ? "INSERT OR IGNORE INTO claims_pending_release VALUES (?, ?, ?)"
				   : "DELETE FROM claims_pending_release WHERE volume_id = ? AND "
				     "alloc_id = ?",
			       -1, &st, NULL);
	if (src == SQLITE_OK) {
		sqlite3_bind_text(st, 1, vol, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, alloc, -1, SQLITE_STATIC);
		if (add)
			sqlite3_bind_text(st, 3, reason, -1, SQLITE_STATIC);
		src = sqlite3_step(st);
	}
	if (src != SQLITE_OK && src != SQLITE_DONE)
		rc = err_set(e, agent_db_err(src), "pending release of %s for %s: %s", vol, alloc,
			     sqlite3_errmsg(a->rel_db));
	sqlite3_finalize(st);
	pthread_mutex_unlock(&a->rel_mu);
	/* Released after the unmount: the claim flow's mark goes too (agent_api_orphans.c). */
	if (!rc && !add)
		rc = agent_api_claimed_mark(a, vol, alloc, false, e);
	return rc;
}

size_t agent_api_release_pending(void *ctx)
{
	struct agent_api *a = ctx;
	sqlite3_stmt *st = NULL;
	size_t n = 0;

	if (!a->rel_db)
		return 0;
	pthread_mutex_lock(&a->rel_mu);
	if (sqlite3_prepare_v2(a->rel_db, "SELECT count(*) FROM claims_pending_release", -1, &st,
			       NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = (size_t)sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	pthread_mutex_unlock(&a->rel_mu);
	return n;
}

/* The recorded releases (at most AGENT_API_RELEASE_BATCH); call under rel_mu. */
static size_t agent_api_release_rows(struct agent_api *a, struct agent_api_release_row *rows)
{
	sqlite3_stmt *st = NULL;
	size_t n = 0;

	if (sqlite3_prepare_v2(a->rel_db,
			       "SELECT volume_id, alloc_id, reason FROM claims_pending_release "
			       "ORDER BY volume_id, alloc_id",
			       -1, &st, NULL) != SQLITE_OK)
		return 0;
	while (n < AGENT_API_RELEASE_BATCH && sqlite3_step(st) == SQLITE_ROW) {
		snprintf(rows[n].vol, sizeof(rows[n].vol), "%s",
			 (const char *)sqlite3_column_text(st, 0));
		snprintf(rows[n].alloc, sizeof(rows[n].alloc), "%s",
			 (const char *)sqlite3_column_text(st, 1));
		snprintf(rows[n].reason, sizeof(rows[n].reason), "%s",
			 sqlite3_column_text(st, 2) ? (const char *)sqlite3_column_text(st, 2)
						    : "");
		n++;
	}
	sqlite3_finalize(st);
	return n;
}

/* One pass over the recorded releases; whether one is still pending. */
static bool agent_api_release_pass(struct agent_api *a, struct agent_api_release_row *rows)
{
	bool pending = false;
	size_t n;

	pthread_mutex_lock(&a->rel_mu);
	n = agent_api_release_rows(a, rows);
	pthread_mutex_unlock(&a->rel_mu);
	for (size_t i = 0; i < n && !agent_api_release_stopping(a); i++) {
		struct err e;
		char q[600];
		int rc;

		err_clear(&e);
		rc = agent_api_release_send(a, rows[i].vol, rows[i].alloc,
					    rows[i].reason[0] ? rows[i].reason : NULL, false, &e);
		if (rc == CSID_EUNAVAIL) {
			pending = true;
			continue;
		}
		/*
		 * Refused for who sent it (a wrong server_token, or a node now
		 * held by another agent instance): kept, since the claim is
		 * still held and an operator's fix makes the next try pass.
		 */
		if (rc == CSID_EPERM) {
			log_warn("msg=\"pending release refused: the agent is not allowed; kept "
				 "and retried\" volume=%s alloc=%s error=%s",
				 rows[i].vol, rows[i].alloc, log_q(q, sizeof(q), e.msg));
			pending = true;
			continue;
		}
		if (rc)
			log_warn("msg=\"pending release refused: dropped\" volume=%s alloc=%s "
				 "error=%s",
				 rows[i].vol, rows[i].alloc, log_q(q, sizeof(q), e.msg));
		else
			log_info("msg=\"pending release sent\" volume=%s alloc=%s", rows[i].vol,
				 rows[i].alloc);
		if (agent_api_release_record(a, rows[i].vol, rows[i].alloc, NULL, false, &e))
			pending = true;
	}
	return pending;
}

static void *agent_api_release_main(void *arg)
{
	struct agent_api *a = arg;
	struct agent_api_release_row *rows = calloc(AGENT_API_RELEASE_BATCH, sizeof(*rows));
	int64_t delay = AGENT_API_RELEASE_MIN_MS;

	if (!rows) {
		log_error("msg=\"pending releases: out of memory\"");
		return NULL;
	}
	for (;;) {
		bool pending;
		int64_t until;

		agent_api_orphans_run(a);
		pending = agent_api_release_pass(a, rows);
		delay = pending ? delay : AGENT_API_RELEASE_MIN_MS;
		until = clock_now_ms(clock_real()) +
			(pending ? delay : (int64_t)AGENT_API_RELEASE_MAX_MS);
		if (pending)
			delay = delay * 2 > AGENT_API_RELEASE_MAX_MS ? AGENT_API_RELEASE_MAX_MS
								     : delay * 2;
		pthread_mutex_lock(&a->rel_mu);
		while (!a->rel_stop && !a->rel_poke && clock_now_ms(clock_real()) < until) {
			/* Orphans (agent_api_orphans.c) go at once; the backoff stays. */
			if (a->norphans) {
				pthread_mutex_unlock(&a->rel_mu);
				agent_api_orphans_run(a);
				pthread_mutex_lock(&a->rel_mu);
				continue;
			}
			clock_wait(clock_real(), &a->rel_cond, &a->rel_mu, until);
		}
		a->rel_poke = false;
		if (a->rel_stop) {
			pthread_mutex_unlock(&a->rel_mu);
			break;
		}
		pthread_mutex_unlock(&a->rel_mu);
	}
	free(rows);
	return NULL;
}

bool agent_api_release_stopping(struct agent_api *a)
{
	return __atomic_load_n(&a->rel_stop, __ATOMIC_ACQUIRE);
}

void agent_api_release_poke(struct agent_api *a)
{
	if (!a->rel_started)
		return;
	pthread_mutex_lock(&a->rel_mu);
	a->rel_poke = true;
	pthread_cond_signal(&a->rel_cond);
	pthread_mutex_unlock(&a->rel_mu);
}

int agent_api_release_open(struct agent_api *a, const char *db_path, struct err *e)
{
	int rc;

	pthread_mutex_init(&a->rel_mu, NULL);
	clock_cond_init(&a->rel_cond);
	a->rel_init = true;
	if (!db_path || !a->cfg.nservers)
		return 0;
	rc = agent_db_open(db_path, &a->rel_db, e);
	if (rc == 0)
		rc = agent_db_migrate(
		    a->rel_db, "claims", agent_api_release_schema,
		    (int)(sizeof(agent_api_release_schema) / sizeof(agent_api_release_schema[0])),
		    e);
	if (rc)
		return err_wrap(e, "pending releases");
	if (pthread_create(&a->rel_thread, NULL, agent_api_release_main, a) != 0)
		return err_set(e, CSID_ENOMEM, "pending releases: cannot start a thread");
	a->rel_started = true;
	agent_api_orphans_open(a);
	return 0;
}

void agent_api_release_close(struct agent_api *a)
{
	if (!a->rel_init)
		return;
	agent_api_orphans_close(a);
	pthread_mutex_lock(&a->rel_mu);
	__atomic_store_n(&a->rel_stop, true, __ATOMIC_RELEASE);
	pthread_cond_signal(&a->rel_cond);
	pthread_mutex_unlock(&a->rel_mu);
	if (a->rel_started)
		pthread_join(a->rel_thread, NULL);
	agent_db_close(a->rel_db);
	a->rel_db = NULL;
	pthread_cond_destroy(&a->rel_cond);
	pthread_mutex_destroy(&a->rel_mu);
	a->rel_init = false;
}
