/*
 * sched_wait.h on Linux's per-thread scheduling policy: sched_getscheduler
 * and pthread_setschedparam act on the calling thread only, priority 0
 * (the only one SCHED_OTHER and SCHED_BATCH have). Two or three system
 * calls of well under a microsecond each per wait.
 */
#include "util/sched_wait.h"

#include <pthread.h>
#include <sched.h>

void sched_wait_begin(struct sched_wait *saved)
{
	struct sched_param sp = {.sched_priority = 0};

	saved->was_batch = sched_getscheduler(0) == SCHED_BATCH &&
			   pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp) == 0;
}

void sched_wait_end(const struct sched_wait *saved)
{
	struct sched_param sp = {.sched_priority = 0};

	if (saved->was_batch)
		pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
}
