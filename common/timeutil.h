/* Monotonic time. Every timer and deadline in pskv uses CLOCK_MONOTONIC. */
#ifndef PSKV_TIMEUTIL_H
#define PSKV_TIMEUTIL_H

#include <stdint.h>

/* Milliseconds / microseconds / nanoseconds on CLOCK_MONOTONIC. */
int64_t tu_now_ms(void);
int64_t tu_now_us(void);
int64_t tu_now_ns(void);

/* Sleeps `ms` milliseconds (restarts on EINTR). */
void tu_sleep_ms(int64_t ms);

#endif
