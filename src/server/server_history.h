/*
 * The reconciler's recent figures, for the web console's chart
 * (GET /v1/status/reconciler): a ring of samples of the queue (items
 * queued, items failing) taken every SERVER_HISTORY_PERIOD_MS, the last
 * SERVER_HISTORY_SAMPLES of them (10 minutes). An operator who opens the
 * console at 3 a.m. sees at once whether the queue has been growing,
 * without a metrics system.
 *
 * Pure and I/O-free: the caller passes the time (the server's clock, so
 * tests step virtual time) and the figures, and holds a lock around calls
 * made from several threads (the server holds its mutex).
 */
#ifndef CSID_SERVER_SERVER_HISTORY_H
#define CSID_SERVER_SERVER_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#define SERVER_HISTORY_PERIOD_MS 5000
#define SERVER_HISTORY_SAMPLES 120

struct server_history_sample {
	int64_t time_ms; /* the clock's time of the sample */
	int queued;
	int failing;
};

struct server_history {
	struct server_history_sample ring[SERVER_HISTORY_SAMPLES];
	size_t start, n; /* oldest at ring[start], n kept */
	int64_t due_ms; /* when the next sample is taken */
};

/* Makes h empty, its first sample due at once. */
void server_history_init(struct server_history *h);

/*
 * Keeps the figures as a sample when one is due at now_ms (else does
 * nothing); the next is due SERVER_HISTORY_PERIOD_MS later. The oldest
 * sample goes when the ring is full. Returns when the next one is due.
 */
int64_t server_history_record(struct server_history *h, int64_t now_ms, int queued, int failing);

/*
 * Copies the samples of the last SERVER_HISTORY_PERIOD_MS *
 * SERVER_HISTORY_SAMPLES milliseconds before now_ms into out (room for
 * SERVER_HISTORY_SAMPLES), oldest first; returns how many.
 */
size_t server_history_list(const struct server_history *h, int64_t now_ms,
			   struct server_history_sample *out);

#endif
