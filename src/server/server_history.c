/*
 * The reconciler's recent figures (server_history.h): a fixed ring, no
 * allocation, so taking a sample can never fail.
 */
#include "server/server_history.h"

#include <string.h>

void server_history_init(struct server_history *h)
{
	memset(h, 0, sizeof(*h));
	h->due_ms = INT64_MIN;
}

int64_t server_history_record(struct server_history *h, int64_t now_ms, int queued, int failing)
{
	struct server_history_sample *s;

	if (now_ms < h->due_ms)
		return h->due_ms;
	if (h->n == SERVER_HISTORY_SAMPLES) {
		s = &h->ring[h->start];
		h->start = (h->start + 1) % SERVER_HISTORY_SAMPLES;
	} else {
		s = &h->ring[(h->start + h->n) % SERVER_HISTORY_SAMPLES];
		h->n++;
	}
	s->time_ms = now_ms;
	s->queued = queued;
	s->failing = failing;
	h->due_ms = now_ms + SERVER_HISTORY_PERIOD_MS;
	return h->due_ms;
}

size_t server_history_list(const struct server_history *h, int64_t now_ms,
			   struct server_history_sample *out)
{
	int64_t since = now_ms - (int64_t)SERVER_HISTORY_PERIOD_MS * SERVER_HISTORY_SAMPLES;
	size_t n = 0;

	for (size_t i = 0; i < h->n; i++) {
		const struct server_history_sample *s =
		    &h->ring[(h->start + i) % SERVER_HISTORY_SAMPLES];

		if (s->time_ms > since)
			out[n++] = *s;
	}
	return n;
}
