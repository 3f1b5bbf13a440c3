/* The fault-ahead helper (prefault.h): a queue of requests under a mutex, served
 * in order by one thread that sleeps on a condition variable when there are none.
 *
 * Populating holds the process's mmap lock for reading while a slice faults in
 * (the kernel serialises it with mmap, munmap and mremap, not with page faults),
 * so slices are one huge page: a writer that maps or moves memory waits for one
 * slice at most. A request records the epoch it was asked in and is dropped at
 * the first slice after prefault_moved: the owner asks again for what it still
 * wants. Between that check and the slice the range may go away; the slice then
 * fails (ENOMEM), or faults in up to 2 MiB of a mapping made meanwhile, zero
 * pages made resident, nothing written. */
#define _GNU_SOURCE /* madvise, MADV_POPULATE_WRITE */
#include "prefault.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>

#define SLICE (2u << 20)         /* bytes populated per madvise: one huge page */
#define RELEASE_SLICE (4u << 20) /* bytes of a released mapping given back per madvise */
#define QUEUE 64

typedef enum {
    OP_POPULATE, /* fault in [p, p + len) unless the epoch moved on */
    OP_RELEASE,  /* give back and unmap [p, p + len) */
} op_kind;

typedef struct request {
    op_kind op;
    char *p;
    size_t len;
    uint64_t epoch;
} request;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static request queue[QUEUE];
static size_t head, count; /* under mu */
static int busy;           /* under mu: a request taken and not finished */
static int running;        /* set once by start: the thread is there */
static atomic_uint_fast64_t epoch;
static atomic_int unsupported; /* the kernel refused MADV_POPULATE_WRITE */

/* Queues r at the tail when others wait, so that a doubled map of 1 GiB (2 s
 * of faults) does not hold up the records a push will write next; it goes on,
 * in order, after them. Returns 1 when queued. Under mu. */
static int yield_to_others(const request *r)
{
    if (!count || count == QUEUE)
        return 0;
    queue[(head + count) % QUEUE] = *r;
    count++;
    return 1;
}

static void populate(request r)
{
    while (r.len) {
        if (atomic_load_explicit(&epoch, memory_order_acquire) != r.epoch)
            return; /* the owner moved or unmapped something: asked again if still wanted */
        size_t n = r.len < SLICE ? r.len : SLICE;
        if (madvise(r.p, n, MADV_POPULATE_WRITE) < 0) {
            if (errno == EINVAL)
                atomic_store(&unsupported, 1);
            return; /* EINVAL, or ENOMEM/EFAULT: the range is gone */
        }
        r.p += n;
        r.len -= n;
        pthread_mutex_lock(&mu);
        int queued = r.len && yield_to_others(&r);
        pthread_mutex_unlock(&mu);
        if (queued)
            return;
    }
}

static void release(const request *r)
{
    for (size_t off = 0; off + RELEASE_SLICE < r->len; off += RELEASE_SLICE)
        madvise(r->p + off, RELEASE_SLICE, MADV_DONTNEED);
    munmap(r->p, r->len); /* what is left is a slice: short under the write lock */
}

static void *helper(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!count)
            pthread_cond_wait(&cv, &mu);
        request r = queue[head];
        head = (head + 1) % QUEUE;
        count--;
        busy = 1;
        pthread_mutex_unlock(&mu);
        if (r.op == OP_POPULATE)
            populate(r);
        else
            release(&r);
        pthread_mutex_lock(&mu);
        busy = 0;
    }
    return NULL;
}

static void start(void)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals stay the daemon's main thread's */
    pthread_t t;
    if (pthread_create(&t, NULL, helper, NULL) == 0) {
        pthread_detach(t);
        running = 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/* Queues r; 0, or -1 when there is no room or no helper. */
static int push(const request *r)
{
    pthread_once(&once, start);
    if (!running)
        return -1;
    pthread_mutex_lock(&mu);
    int rc = -1;
    if (count < QUEUE) {
        queue[(head + count) % QUEUE] = *r;
        count++;
        rc = 0;
        pthread_cond_signal(&cv);
    }
    pthread_mutex_unlock(&mu);
    return rc;
}

int prefault_ask(void *p, size_t len)
{
    if (!p || !len || atomic_load(&unsupported))
        return -1;
    request r = {OP_POPULATE, p, len, prefault_epoch()};
    return push(&r);
}

void prefault_release(void *p, size_t len)
{
    if (!p)
        return;
    request r = {OP_RELEASE, p, len, 0};
    if (push(&r) < 0)
        munmap(p, len);
}

void prefault_moved(void) { atomic_fetch_add_explicit(&epoch, 1, memory_order_acq_rel); }

uint64_t prefault_epoch(void) { return atomic_load_explicit(&epoch, memory_order_acquire); }

int prefault_idle(void)
{
    pthread_mutex_lock(&mu);
    int idle = !count && !busy;
    pthread_mutex_unlock(&mu);
    return idle;
}
