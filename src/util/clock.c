/*
 * The clock seam: the real clock (CLOCK_MONOTONIC for timers, CLOCK_REALTIME
 * for timestamps) and a virtual clock for tests whose time moves only when
 * the test says so (or, in auto-advance mode, whenever someone waits).
 */
#include "util/clock.h"

#include <errno.h>
#include <time.h>

#include "csid.h"

/* A waiter on a virtual clock re-checks the time at least this often (real ms). */
#define CLOCK_FAKE_POLL_MS 2

static int64_t clock_ts_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t clock_real_now(struct clock *c)
{
	return clock_ts_ms(CLOCK_MONOTONIC);
}

static int64_t clock_real_wall(struct clock *c)
{
	return clock_ts_ms(CLOCK_REALTIME);
}

static void clock_timedwait(pthread_cond_t *cond, pthread_mutex_t *mu, int64_t until_ms)
{
	struct timespec ts;

	ts.tv_sec = (time_t)(until_ms / 1000);
	ts.tv_nsec = (long)(until_ms % 1000) * 1000000;
	pthread_cond_timedwait(cond, mu, &ts);
}

static void clock_real_wait(struct clock *c, pthread_cond_t *cond, pthread_mutex_t *mu,
			    int64_t until_ms)
{
	if (until_ms == CLOCK_NEVER) {
		pthread_cond_wait(cond, mu);
		return;
	}
	if (until_ms <= clock_real_now(c))
		return;
	clock_timedwait(cond, mu, until_ms);
}

static struct clock clock_real_impl = {
    .now_ms = clock_real_now,
    .wall_ms = clock_real_wall,
    .wait = clock_real_wait,
};

struct clock *clock_real(void)
{
	return &clock_real_impl;
}

int64_t clock_now_ms(struct clock *c)
{
	return c->now_ms(c);
}

int64_t clock_wall_ms(struct clock *c)
{
	return c->wall_ms(c);
}

void clock_wait(struct clock *c, pthread_cond_t *cond, pthread_mutex_t *mu, int64_t until_ms)
{
	c->wait(c, cond, mu, until_ms);
}

int clock_cond_init(pthread_cond_t *cond)
{
	pthread_condattr_t attr;
	int rc;

	if (pthread_condattr_init(&attr) != 0)
		return CSID_ENOMEM;
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	rc = pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
	return rc == 0 ? 0 : CSID_ENOMEM;
}

static int64_t clock_fake_now(struct clock *c)
{
	struct clock_fake *f = (struct clock_fake *)c;
	int64_t t;

	pthread_mutex_lock(&f->mu);
	t = f->now;
	pthread_mutex_unlock(&f->mu);
	return t;
}

static int64_t clock_fake_wall(struct clock *c)
{
	struct clock_fake *f = (struct clock_fake *)c;
	int64_t t;

	pthread_mutex_lock(&f->mu);
	t = f->wall_base + (f->now - f->start);
	pthread_mutex_unlock(&f->mu);
	return t;
}

static void clock_fake_wait(struct clock *c, pthread_cond_t *cond, pthread_mutex_t *mu,
			    int64_t until_ms)
{
	struct clock_fake *f = (struct clock_fake *)c;
	bool jump;

	pthread_mutex_lock(&f->mu);
	jump = f->auto_advance && until_ms != CLOCK_NEVER;
	if (jump && until_ms > f->now)
		f->now = until_ms;
	pthread_mutex_unlock(&f->mu);
	if (jump)
		return;
	/*
	 * Wait a few real milliseconds for a signal, then let the caller
	 * re-check: another thread may have advanced the virtual time. The
	 * cond runs on CLOCK_MONOTONIC (clock_cond_init), as for the real clock.
	 */
	clock_timedwait(cond, mu, clock_ts_ms(CLOCK_MONOTONIC) + CLOCK_FAKE_POLL_MS);
}

void clock_fake_init(struct clock_fake *f, int64_t start_ms, int64_t wall_base_ms)
{
	f->base.now_ms = clock_fake_now;
	f->base.wall_ms = clock_fake_wall;
	f->base.wait = clock_fake_wait;
	pthread_mutex_init(&f->mu, NULL);
	f->now = start_ms;
	f->start = start_ms;
	f->wall_base = wall_base_ms;
	f->auto_advance = false;
}

void clock_fake_destroy(struct clock_fake *f)
{
	pthread_mutex_destroy(&f->mu);
}

void clock_fake_advance(struct clock_fake *f, int64_t delta_ms)
{
	if (delta_ms <= 0)
		return;
	pthread_mutex_lock(&f->mu);
	f->now += delta_ms;
	pthread_mutex_unlock(&f->mu);
}

void clock_fake_set(struct clock_fake *f, int64_t t_ms)
{
	pthread_mutex_lock(&f->mu);
	if (t_ms > f->now)
		f->now = t_ms;
	pthread_mutex_unlock(&f->mu);
}

void clock_fake_set_auto_advance(struct clock_fake *f, bool on)
{
	pthread_mutex_lock(&f->mu);
	f->auto_advance = on;
	pthread_mutex_unlock(&f->mu);
}
