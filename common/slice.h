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
 * create (0: leave the kernel's default). Returns the slice the kernel reports
 * now in microseconds (it clamps to 100..100000), or 0 when it has no custom
 * slices or refused (logged at info, with why). */
long slice_apply(long us);

#endif
