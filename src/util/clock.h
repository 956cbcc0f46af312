/*
 * Clock seam. Everything that schedules work or stamps a time takes a
 * struct clock, so the same code runs on real time in the programs and on
 * virtual time in tests (no sleeping: a test advances the fake clock and
 * steps the module).
 *
 * A clock has two readings: now_ms, monotonic milliseconds used for
 * deadlines and timers (never goes back, unrelated to the calendar), and
 * wall_ms, milliseconds since the Unix epoch used only for timestamps shown
 * to people or persisted (registration times, health change times).
 *
 * wait() blocks the calling thread on a condition variable until it is
 * signalled or the clock reaches until_ms; it may wake early, so callers
 * loop and re-check their condition and now_ms. Condition variables waited
 * on with the real clock must be initialised with clock_cond_init() so
 * that their timeouts run on CLOCK_MONOTONIC.
 */
#ifndef CSID_UTIL_CLOCK_H
#define CSID_UTIL_CLOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* Larger than any real time: "no deadline". */
#define CLOCK_NEVER INT64_MAX

struct clock {
	/* Monotonic time in milliseconds. Thread-safe. */
	int64_t (*now_ms)(struct clock *c);
	/* Wall-clock time in milliseconds since the Unix epoch. Thread-safe. */
	int64_t (*wall_ms)(struct clock *c);
	/*
	 * Called with mu locked; returns with mu locked. Waits until cond is
	 * signalled or now_ms() >= until_ms (CLOCK_NEVER: no timeout). May
	 * return early (spurious wake-up); the caller re-checks.
	 */
	void (*wait)(struct clock *c, pthread_cond_t *cond, pthread_mutex_t *mu, int64_t until_ms);
};

/* The process-wide real clock (CLOCK_MONOTONIC and CLOCK_REALTIME). Never NULL. */
struct clock *clock_real(void);

/* Shorthands: c->now_ms(c), c->wall_ms(c), c->wait(...). */
int64_t clock_now_ms(struct clock *c);
int64_t clock_wall_ms(struct clock *c);
void clock_wait(struct clock *c, pthread_cond_t *cond, pthread_mutex_t *mu, int64_t until_ms);

/*
 * Initialises cond so that timed waits use CLOCK_MONOTONIC, as the real
 * clock's wait() expects. Returns 0 or CSID_ENOMEM.
 */
int clock_cond_init(pthread_cond_t *cond);

/*
 * Virtual clock for tests. Starts at start_ms (monotonic) and at
 * wall_base_ms + (now - start) for the wall clock. Time moves only when the
 * test calls clock_fake_advance/clock_fake_set, except in auto-advance mode
 * where a wait() with a deadline jumps the clock to that deadline at once
 * (a discrete-event simulation: waiting costs no real time).
 *
 * Without auto-advance, wait() waits for a signal for at most a few real
 * milliseconds and returns, so a thread waiting on a virtual deadline
 * notices when another thread advances the clock. Thread-safe.
 */
struct clock_fake {
	struct clock base; /* pass &fake->base wherever a struct clock * is taken */
	pthread_mutex_t mu;
	int64_t now;
	int64_t start;
	int64_t wall_base;
	bool auto_advance;
};

void clock_fake_init(struct clock_fake *f, int64_t start_ms, int64_t wall_base_ms);
void clock_fake_destroy(struct clock_fake *f);
/* Moves the fake clock forward by delta_ms (negative deltas are ignored). */
void clock_fake_advance(struct clock_fake *f, int64_t delta_ms);
/* Sets the fake clock to t_ms if that is later than now (time never goes back). */
void clock_fake_set(struct clock_fake *f, int64_t t_ms);
/* Turns auto-advance mode on or off (see above). */
void clock_fake_set_auto_advance(struct clock_fake *f, bool on);

#endif
