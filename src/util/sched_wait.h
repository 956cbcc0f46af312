/*
 * The scheduling class of a thread around work that waits on another
 * process (a CSI plugin's answer, an agent's answer to a controller RPC).
 *
 * The server's HTTP workers and the reconciler's workers run as
 * SCHED_BATCH, so that a worker woken with a request never preempts the
 * I/O thread that queued it (src/api/http_work.c). A batch thread woken
 * by an answer does not preempt anything either: on a busy machine it
 * waits for a CPU until the running thread blocks or the next tick. Such
 * waits sit on a mount's path (the claim's ControllerPublish, through an
 * agent or to a plugin on the server's host): at load 5-6 on 2 cores a
 * batch thread waited for a CPU 0.19-0.50 ms per CSI RPC at the median,
 * 0.003-0.22 ms as SCHED_OTHER, and the server's thread 49-137 us per
 * controller call through an agent, 19-39 us as SCHED_OTHER (README,
 * Performance). So a thread runs such a wait as SCHED_OTHER and goes back
 * to its class after it; it stays a batch one for the rest of its work.
 *
 * Nesting is free: an inner sched_wait_begin on a thread that is already
 * SCHED_OTHER changes nothing, and its sched_wait_end neither.
 */
#ifndef CSID_UTIL_SCHED_WAIT_H
#define CSID_UTIL_SCHED_WAIT_H

#include <stdbool.h>

/* What sched_wait_begin changed, for sched_wait_end. */
struct sched_wait {
	bool was_batch;
};

/*
 * Makes the calling thread SCHED_OTHER when it is SCHED_BATCH and records
 * that in *saved; any other class is left alone. Never fails: a thread
 * whose class cannot be changed simply keeps it.
 */
void sched_wait_begin(struct sched_wait *saved);

/* Puts the calling thread back into SCHED_BATCH when *saved says it was. */
void sched_wait_end(const struct sched_wait *saved);

#endif
