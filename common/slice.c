/* slice: the scheduling slice a latency-bound daemon asks for (contract in slice.h). */
#define _GNU_SOURCE
#include "slice.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"

/* struct sched_attr of <linux/sched/types.h> (not in glibc's headers) */
typedef struct sattr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
} sattr;

long slice_apply(long us, const char *who)
{
    if (us <= 0)
        return 0;
    sattr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    if (syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) < 0) {
        LOG_I("scheduling slice of %s left as it is: sched_getattr: %s", who, strerror(errno));
        return 0;
    }
    if (a.policy != 0) { /* SCHED_OTHER only: a real-time or batch policy is the user's */
        LOG_I("scheduling slice of %s left as it is: the scheduling policy is %u, not "
              "SCHED_OTHER", who, a.policy);
        return 0;
    }
    a.size = sizeof a;
    a.flags = 0;
    a.runtime = (uint64_t)us * 1000;
    if (syscall(SYS_sched_setattr, 0, &a, 0) < 0) {
        LOG_I("scheduling slice of %s (%ld us) not set: sched_setattr: %s", who, us,
              strerror(errno));
        return 0;
    }
    long got = slice_of(0);
    if (got <= 0)
        LOG_I("scheduling slice of %s (%ld us) not set: this kernel has no custom slices "
              "(Linux 6.12 or later)", who, us);
    else
        LOG_I("scheduling slice of %s: %ld us (asked %ld us)", who, got, us);
    return got > 0 ? got : 0;
}

long slice_of(int tid)
{
    sattr a;
    memset(&a, 0, sizeof a);
    if (syscall(SYS_sched_getattr, tid, &a, sizeof a, 0) < 0)
        return -1;
    return (long)(a.runtime / 1000);
}

typedef struct zstart {
    void *ctx;
    long us, granted;
    const char *who;
    int sock_failed;
} zstart;

static void *start_zmq(void *arg)
{
    zstart *z = arg;
    z->granted = slice_apply(z->us, z->who);
    void *s = zmq_socket(z->ctx, ZMQ_PAIR); /* the context starts its threads here */
    if (!s)
        z->sock_failed = 1;
    else
        zmq_close(s);
    return NULL;
}

long slice_start_zmq(void *ctx, long us, const char *who)
{
    if (us <= 0)
        return 0;
    zstart z = {ctx, us, 0, who, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, start_zmq, &z) != 0) {
        LOG_I("scheduling slice of %s not set: no thread to start them from", who);
        return -1;
    }
    pthread_join(t, NULL);
    return z.sock_failed ? -1 : z.granted;
}
