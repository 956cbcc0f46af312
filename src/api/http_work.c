/*
 * The workers of the HTTP layer (see http_int.h): a fixed pool of threads
 * that run handlers while the I/O threads go on serving connections, and
 * one wake thread that watches the config's wake source and the clock and
 * lets parked requests run again and parked streams resume.
 *
 * New requests are served before parked ones that run again, so a storm
 * of wake-ups (every blocking query woken by one write) delays a health
 * probe by one handler at most. Wake-ups are coalesced: after a round
 * that ran n parked requests again, the next waits n * HTTP_WAKE_RUN_US
 * (at most HTTP_WAKE_GAP_MS), so a thousand writes a second wake a
 * thousand parked requests 20 times a second, not a thousand times, while
 * a few parked requests (an agent following its claim) wake at once.
 *
 * While nothing is parked the wake thread does not follow the wake source
 * (every store write woke it, three to four times per claim + release
 * cycle, for nothing); it sleeps from tick to tick until something parks.
 * Each run of a handler records the source's mark first (hc->seen), so
 * that following it again from the oldest parked request's mark misses no
 * change that request did not see; a request whose run began before the
 * last change the wake thread handled runs again instead of parking (that
 * change's round did not find it parked). A parked stream records none:
 * it is resumed once at the first change after the old mark, possibly for
 * nothing.
 */
#include "api/http_int.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "util/clock.h"
#include "util/log.h"

/*
 * The request this worker thread runs now (NULL: none, or not a worker
 * thread), its server, and whether http_answer_now sent its answer.
 */
static _Thread_local struct http_conn *http_work_hc;
static _Thread_local struct http_server *http_work_srv;
static _Thread_local bool http_work_sent;

/* The longest time between two rounds of wake-ups caused by changes (ms). */
#define HTTP_WAKE_GAP_MS 50
/* The gap after a round, per parked request it ran again (us). */
#define HTTP_WAKE_RUN_US 50

static void http_work_push(struct http_conn **head, struct http_conn **tail, struct http_conn *hc)
{
	hc->next = NULL;
	if (*tail)
		(*tail)->next = hc;
	else
		*head = hc;
	*tail = hc;
}

static struct http_conn *http_work_pop(struct http_work *w)
{
	struct http_conn **head = w->fresh_head ? &w->fresh_head : &w->again_head;
	struct http_conn **tail = w->fresh_head ? &w->fresh_tail : &w->again_tail;
	struct http_conn *hc = *head;

	if (!hc)
		return NULL;
	*head = hc->next;
	if (!*head)
		*tail = NULL;
	hc->next = NULL;
	return hc;
}

/*
 * Workers and the wake thread run as SCHED_BATCH: the same share of CPU,
 * but a thread woken by the I/O thread (a request queued, a mutex freed)
 * does not preempt it. With bench/edge.c at 10,000 agents (perf sched),
 * the I/O thread was preempted about 360 times a second right after it
 * signalled a worker or released a lock one waited for; SCHED_BATCH cut
 * that to about 75. On the shared 2-core machine the health p99 moved
 * within the noise: its tail is the I/O thread runnable but waiting for
 * a CPU behind other processes (see README, Performance).
 */
static void http_work_batch(void)
{
	struct sched_param sp = {.sched_priority = 0};

	pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
}

static void *http_work_worker(void *arg)
{
	struct http_server *s = arg;
	struct http_work *w = &s->work;
	struct http_conn *hc;

	http_work_batch();
	pthread_mutex_lock(&w->mu);
	for (;;) {
		hc = http_work_pop(w);
		if (!hc) {
			if (w->stopping)
				break;
			pthread_cond_wait(&w->ready, &w->mu);
			continue;
		}
		hc->state = HTTP_CONN_RUNNING;
		pthread_mutex_unlock(&w->mu);
		if (s->cfg.wake)
			hc->seen = s->cfg.wake(s->cfg.wake_ctx, 0, 0);
		http_work_hc = hc;
		http_work_srv = s;
		http_work_sent = false;
		http_run(s, hc);
		http_work_hc = NULL;
		pthread_mutex_lock(&w->mu);
		/* Answered while it ran (http_answer_now): hc is the I/O thread's now. */
		if (http_work_sent)
			continue;
		if (hc->rc == HTTP_WAIT && !w->stopping && hc->seen < w->mark) {
			/* The wake thread reported a change while it ran: it runs again now. */
			hc->state = HTTP_CONN_QUEUED;
			http_work_push(&w->again_head, &w->again_tail, hc);
			continue;
		}
		if (hc->rc == HTTP_WAIT && !w->stopping) {
			hc->state = HTTP_CONN_PARKED;
			hc->next = w->parked;
			w->parked = hc;
			if (w->idle)
				pthread_cond_signal(&w->tick);
			continue;
		}
		if (hc->rc == HTTP_WAIT)
			hc->rc = err_set(&hc->e, CSID_EUNAVAIL, "%s: shutting down", s->name);
		hc->state = HTTP_CONN_DONE;
		/* Outside mu: it writes to the I/O thread's wake-up fd. */
		pthread_mutex_unlock(&w->mu);
		MHD_resume_connection(hc->c);
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/*
 * One round, with mu held: parked requests whose deadline passed, and
 * polled ones (all of them when changed or stopping), are queued again;
 * parked streams resume. Returns how many requests were queued again.
 */
static unsigned http_work_round(struct http_work *w, bool changed)
{
	int64_t now = clock_now_ms(clock_real());
	struct http_conn **pp = &w->parked;
	struct http_sbox *b;
	unsigned n = 0;

	while (*pp) {
		struct http_conn *hc = *pp;

		if (!changed && !w->stopping && !hc->polled && now < hc->deadline_ms) {
			pp = &hc->next;
			continue;
		}
		*pp = hc->next;
		hc->state = HTTP_CONN_QUEUED;
		http_work_push(&w->again_head, &w->again_tail, hc);
		n++;
	}
	while ((b = w->sparked)) {
		w->sparked = b->next;
		b->next = NULL;
		MHD_resume_connection(b->c);
	}
	/* One worker per queued request: a broadcast on every store change woke all of them. */
	if (w->stopping)
		pthread_cond_broadcast(&w->ready);
	else
		for (unsigned i = 0; i < n && i < w->nworkers; i++)
			pthread_cond_signal(&w->ready);
	return n;
}

/*
 * With mu held, nothing parked and a wake source: sleeps until a tick or
 * until something parks; then the mark to follow from is the oldest
 * parked request's (a parked stream keeps the older mark).
 */
static void http_work_idle(struct http_work *w, struct clock *clk)
{
	w->idle = true;
	clock_wait(clk, &w->tick, &w->mu, clock_now_ms(clk) + HTTP_TICK_MS);
	w->idle = false;
	if (w->sparked || !w->parked)
		return;
	w->mark = w->parked->seen;
	for (struct http_conn *hc = w->parked->next; hc; hc = hc->next)
		if (hc->seen < w->mark)
			w->mark = hc->seen;
}

static void *http_work_waker(void *arg)
{
	struct http_server *s = arg;
	struct http_work *w = &s->work;
	struct clock *clk = clock_real();

	http_work_batch();
	pthread_mutex_lock(&w->mu);
	while (!w->stopping) {
		uint64_t mark = w->mark, now_mark = mark;
		unsigned ran;

		if (s->cfg.wake && !w->parked && !w->sparked) {
			http_work_idle(w, clk);
			continue;
		}
		if (s->cfg.wake) {
			pthread_mutex_unlock(&w->mu);
			now_mark = s->cfg.wake(s->cfg.wake_ctx, mark, HTTP_TICK_MS);
			pthread_mutex_lock(&w->mu);
		} else {
			clock_wait(clk, &w->tick, &w->mu, clock_now_ms(clk) + HTTP_TICK_MS);
		}
		if (w->stopping)
			break;
		w->mark = now_mark;
		ran = http_work_round(w, now_mark != mark);
		if (now_mark != mark && ran) {
			int64_t gap = (int64_t)ran * HTTP_WAKE_RUN_US / 1000;
			int64_t until =
			    clock_now_ms(clk) + (gap < HTTP_WAKE_GAP_MS ? gap : HTTP_WAKE_GAP_MS);

			while (!w->stopping && clock_now_ms(clk) < until)
				clock_wait(clk, &w->tick, &w->mu, until);
		}
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int http_work_start(struct http_server *s, struct err *e)
{
	struct http_work *w = &s->work;
	unsigned i;

	w->mark = 0;
	if (pthread_mutex_init(&w->mu, NULL) != 0)
		return err_set(e, CSID_ENOMEM, "%s: mutex", s->name);
	if (pthread_cond_init(&w->ready, NULL) != 0) {
		pthread_mutex_destroy(&w->mu);
		return err_set(e, CSID_ENOMEM, "%s: condition variable", s->name);
	}
	if (clock_cond_init(&w->tick) != 0) {
		pthread_cond_destroy(&w->ready);
		pthread_mutex_destroy(&w->mu);
		return err_set(e, CSID_ENOMEM, "%s: condition variable", s->name);
	}
	w->sync_on = true;
	w->workers = calloc(s->cfg.limits.workers, sizeof(*w->workers));
	if (!w->workers)
		return err_set(e, CSID_ENOMEM, "out of memory");
	for (i = 0; i < s->cfg.limits.workers; i++) {
		if (pthread_create(&w->workers[i], NULL, http_work_worker, s) != 0)
			return err_set(e, CSID_ENOMEM, "%s: cannot start worker threads", s->name);
		/* Named, so that per-thread figures (top -H, schedstat) tell roles apart. */
		pthread_setname_np(w->workers[i], "http-work");
		w->nworkers++;
	}
	if (pthread_create(&w->waker, NULL, http_work_waker, s) != 0)
		return err_set(e, CSID_ENOMEM, "%s: cannot start the wake thread", s->name);
	pthread_setname_np(w->waker, "http-wake");
	w->waker_on = true;
	return 0;
}

void http_work_stop(struct http_server *s)
{
	struct http_work *w = &s->work;
	unsigned i;

	if (!w->workers)
		return;
	pthread_mutex_lock(&w->mu);
	w->stopping = true;
	http_work_round(w, true);
	pthread_cond_broadcast(&w->tick);
	pthread_mutex_unlock(&w->mu);
	if (w->waker_on)
		pthread_join(w->waker, NULL);
	for (i = 0; i < w->nworkers; i++)
		pthread_join(w->workers[i], NULL);
	free(w->workers);
	w->workers = NULL;
	w->nworkers = 0;
	w->waker_on = false;
}

void http_work_free(struct http_server *s)
{
	struct http_work *w = &s->work;

	if (!w->sync_on)
		return;
	w->sync_on = false;
	pthread_cond_destroy(&w->tick);
	pthread_cond_destroy(&w->ready);
	pthread_mutex_destroy(&w->mu);
}

bool http_work_answered(void)
{
	return http_work_sent;
}

bool http_answer_now(const struct http_request *r)
{
	struct http_conn *hc = r->hc_;
	struct http_work *w;

	if (!hc || hc != http_work_hc || http_work_sent)
		return false;
	w = &http_work_srv->work;
	pthread_mutex_lock(&w->mu);
	hc->rc = 0;
	hc->state = HTTP_CONN_DONE;
	pthread_mutex_unlock(&w->mu);
	http_work_sent = true;
	/* Outside mu: it writes to the I/O thread's wake-up fd. */
	MHD_resume_connection(hc->c);
	return true;
}

bool http_work_submit(struct http_server *s, struct http_conn *hc)
{
	struct http_work *w = &s->work;

	pthread_mutex_lock(&w->mu);
	if (w->stopping) {
		pthread_mutex_unlock(&w->mu);
		return false;
	}
	MHD_suspend_connection(hc->c);
	hc->state = HTTP_CONN_QUEUED;
	http_work_push(&w->fresh_head, &w->fresh_tail, hc);
	pthread_cond_signal(&w->ready);
	pthread_mutex_unlock(&w->mu);
	return true;
}

bool http_work_park_stream(struct http_server *s, struct http_sbox *b)
{
	struct http_work *w = &s->work;

	pthread_mutex_lock(&w->mu);
	if (w->stopping) {
		pthread_mutex_unlock(&w->mu);
		return false;
	}
	MHD_suspend_connection(b->c);
	b->next = w->sparked;
	w->sparked = b;
	if (w->idle)
		pthread_cond_signal(&w->tick);
	pthread_mutex_unlock(&w->mu);
	return true;
}
