/* slice: the scheduling slice a latency-bound daemon asks for (contract in slice.h). */
#define _GNU_SOURCE
#include "slice.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"

/* struct sched_attr of <linux/sched/types.h> (not in glibc's headers) */
typedef struct sattr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
} sattr;

long slice_apply(long us)
{
    if (us <= 0)
        return 0;
    sattr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    if (syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) < 0) {
        LOG_I("scheduling slice left as it is: sched_getattr: %s", strerror(errno));
        return 0;
    }
    if (a.policy != 0) { /* SCHED_OTHER only: a real-time or batch policy is the user's */
        LOG_I("scheduling slice left as it is: the scheduling policy is %u, not SCHED_OTHER",
              a.policy);
        return 0;
    }
    a.size = sizeof a;
    a.flags = 0;
    a.runtime = (uint64_t)us * 1000;
    if (syscall(SYS_sched_setattr, 0, &a, 0) < 0) {
        LOG_I("scheduling slice of %ld us not set: sched_setattr: %s", us, strerror(errno));
        return 0;
    }
    memset(&a, 0, sizeof a);
    if (syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) < 0 || a.runtime == 0) {
        LOG_I("scheduling slice of %ld us not set: this kernel has no custom slices "
              "(Linux 6.12 or later)", us);
        return 0;
    }
    LOG_I("scheduling slice %ld us (asked %ld us)", (long)(a.runtime / 1000), us);
    return (long)(a.runtime / 1000);
}
