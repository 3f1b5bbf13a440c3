/* Monotonic time. Every timer and deadline in pskv uses CLOCK_MONOTONIC.
 *
 * OWNS   nothing.
 * THREAD any.
 * NEVER  reads the wall clock (log.h's time stamp is the only use of it); only
 *        tu_sleep_ms blocks. */
#ifndef PSKV_TIMEUTIL_H
#define PSKV_TIMEUTIL_H

#include <stdint.h>

/* Milliseconds / microseconds / nanoseconds on CLOCK_MONOTONIC. */
int64_t tu_now_ms(void);
int64_t tu_now_us(void);
int64_t tu_now_ns(void);

/* Nanoseconds of CPU time the calling thread has used (CLOCK_THREAD_CPUTIME_ID):
 * the cost of a piece of work on a machine where other processes take turns. */
int64_t tu_thread_cpu_ns(void);
/* CPU time of the whole process (every thread), in nanoseconds. */
int64_t tu_process_cpu_ns(void);

/* Sleeps `ms` milliseconds (restarts on EINTR). */
void tu_sleep_ms(int64_t ms);

#endif
