/* slice: the scheduling slice a latency-bound daemon asks the kernel for.
 *
 * On a host where workers compute on every core, a server woken by a message
 * waits for a core; under Linux's EEVDF scheduler (6.6 and later) a woken task
 * preempts the running one at once only when its own slice is shorter, and from
 * 6.12 a task may ask for a slice of its own (sched_setattr's sched_runtime for
 * SCHED_OTHER, 0.1 to 100 ms). A short slice changes when a thread runs, never
 * how much: CPU is still shared by weight. Threads created afterwards inherit it,
 * so the daemon asks once, first thing in main.
 *
 * OWNS   nothing.
 * THREAD the calling thread (the main thread, before it starts others).
 * NEVER  fails the daemon: a kernel without custom slices keeps its default, said
 *        once in the log. */
#ifndef PSKV_SLICE_H
#define PSKV_SLICE_H

/* Asks for a slice of `us` microseconds for the calling thread and those it will
 * create (0: leave the kernel's default); `who` names them in the log line
 * ("scheduling slice of WHO: 100 us"). Returns the slice the kernel reports now
 * in microseconds (it clamps to 100..100000), or 0 when it has no custom slices
 * or refused (logged at info, with why). */
long slice_apply(long us, const char *who);

/* The slice thread `tid` (0: the calling thread) has now, in microseconds, as the
 * kernel reports it: 0 when it has no custom slices (before 6.12 it reports none),
 * -1 when it cannot tell (no such thread, sched_getattr refused). */
long slice_of(int tid);

/* Starts ZeroMQ context ctx's threads (ZeroMQ starts them with its first socket)
 * from a short-lived thread that first asks for a slice of `us`, so that they
 * inherit it while the calling thread (a user's compute) keeps its own; with
 * us = 0 nothing is done. Returns what slice_apply returned in that thread, 0
 * when none was granted or ZeroMQ had started already, or -1 when the thread or
 * a socket could not be made (ZeroMQ then starts its threads as usual). */
long slice_start_zmq(void *ctx, long us, const char *who);

#endif
