/* The server's heartbeat thread and lease (lease.h). */
#include "lease.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <stdatomic.h>
#include <unistd.h>
#include <zmq.h>

#include "log.h"
#include "metrics.h"
#include "refuse.h"
#include "timeutil.h"
#include "wire.h"

static struct {
    pthread_t thread;
    int started;
    atomic_int stop;
    _Atomic int64_t lease_until_ms; /* serve only before this */
    _Atomic int64_t loop_ms;        /* the loop's last pass */
    _Atomic int lease_ms;           /* from the latest view (0 before the first) */
    _Atomic uint64_t dropped, pushes, pulls;
    _Atomic uint64_t rows, admitted, not_admitted, evicted, bytes; /* lease_set_tables */
    _Atomic uint64_t whole_epoch;   /* lease_set_whole */
    pthread_mutex_t ns_mu;          /* guards ns, nns (lease_set_namespaces) and the
                                       awaited partitions (lease_set_awaited) */
    uint32_t awaited[LEASE_MAX_AWAITED];
    size_t nawaited;
    uint64_t awaited_epoch;         /* 0: none sent */
    lease_ns ns[LEASE_MAX_NS];
    size_t nns;
    /* copies taken at the start: the loop applies views meanwhile */
    void *ctx;
    const struct secure *sec;
    char sched[300];
    int period;
    uint64_t job;
    uint32_t node;
} HB = {.ns_mu = PTHREAD_MUTEX_INITIALIZER};

/* The namespaces into hb (names point into the copies, valid until the next call). */
static void put_namespaces(Pskv__Meta *hb, lease_ns *copy, char **names, uint64_t *bytes,
                           uint64_t *quota)
{
    pthread_mutex_lock(&HB.ns_mu);
    size_t n = HB.nns;
    memcpy(copy, HB.ns, n * sizeof *copy);
    pthread_mutex_unlock(&HB.ns_mu);
    for (size_t i = 0; i < n; i++)
        names[i] = copy[i].name, bytes[i] = copy[i].bytes, quota[i] = copy[i].quota;
    hb->n_ns_names = hb->n_ns_bytes = hb->n_ns_quota = n;
    hb->ns_names = names;
    hb->ns_bytes = bytes;
    hb->ns_quota = quota;
}

/* Takes the scheduler's HEARTBEAT_ACKs: each renews the lease from the send
 * time it echoes. */
static void take_acks(void *s, int lease)
{
    wire_msg msg;
    char why[200];
    while (wire_recv(s, 0, &msg, why, sizeof why) == 0) {
        Pskv__Meta *m = msg.meta;
        /* the ack's grant (the scheduler's adaptive time-out for this server, minus
         * a heartbeat); an older scheduler's ack: the view's */
        int grant = m->has_lease_ms && m->lease_ms ? (int)m->lease_ms : lease;
        if (m->type == PSKV__MSG_TYPE__HEARTBEAT_ACK && m->has_request_id && lease > 0) {
            int64_t until = (int64_t)m->request_id + grant;
            int64_t was = atomic_load(&HB.lease_until_ms);
            while (until > was && !atomic_compare_exchange_weak(&HB.lease_until_ms, &was, until))
                ;
        }
        wire_msg_close(&msg);
    }
    wire_msg_close(&msg);
}

void lease_set_awaited(uint64_t epoch, const uint32_t *parts, size_t n)
{
    pthread_mutex_lock(&HB.ns_mu);
    HB.awaited_epoch = n <= LEASE_MAX_AWAITED ? epoch : 0;
    HB.nawaited = HB.awaited_epoch ? n : 0;
    if (HB.nawaited)
        memcpy(HB.awaited, parts, n * sizeof *parts);
    pthread_mutex_unlock(&HB.ns_mu);
}

/* The partitions awaited (lease_set_awaited) into hb, copied to buf. */
static void put_awaited(Pskv__Meta *hb, uint32_t *buf)
{
    pthread_mutex_lock(&HB.ns_mu);
    if (HB.awaited_epoch) {
        hb->has_awaited_epoch = 1;
        hb->awaited_epoch = HB.awaited_epoch;
        memcpy(buf, HB.awaited, HB.nawaited * sizeof *buf);
        hb->n_awaited = HB.nawaited;
        hb->awaited = buf;
    }
    pthread_mutex_unlock(&HB.ns_mu);
}

static void *heartbeat_main(void *arg)
{
    (void)arg;
    void *s = member_hb_socket(HB.ctx, HB.sec, HB.sched);
    if (!s)
        return NULL;
    int64_t next = 0;
    while (!atomic_load(&HB.stop)) {
        int64_t now = tu_now_ms();
        int lease = atomic_load(&HB.lease_ms);
        int64_t stall = 10 * (int64_t)(lease + HB.period);
        if (now >= next && now - atomic_load(&HB.loop_ms) <= (stall > 2000 ? stall : 2000)) {
            Pskv__Meta hb;
            uint64_t refusals[REFUSE_COUNT];
            member_hb_meta(&hb, HB.job, HB.node);
            hb.has_clock = hb.has_dropped = hb.has_request_id = 1;
            hb.request_id = (uint64_t)now; /* echoed: the lease runs from the send time */
            hb.clock = 0;
            hb.dropped = atomic_load(&HB.dropped);
            hb.has_pushes = hb.has_pulls = hb.has_rss_bytes = 1;
            hb.pushes = atomic_load(&HB.pushes);
            hb.pulls = atomic_load(&HB.pulls);
            hb.rss_bytes = (uint64_t)metrics_resident_bytes();
            hb.has_rows = hb.has_admitted = hb.has_not_admitted = hb.has_evicted = 1;
            hb.has_bytes = 1;
            hb.rows = atomic_load(&HB.rows);
            hb.admitted = atomic_load(&HB.admitted);
            hb.not_admitted = atomic_load(&HB.not_admitted);
            hb.evicted = atomic_load(&HB.evicted);
            hb.bytes = atomic_load(&HB.bytes);
            hb.has_whole_epoch = 1;
            hb.whole_epoch = atomic_load(&HB.whole_epoch);
            for (int i = 0; i < REFUSE_COUNT; i++)
                refusals[i] = refuse_count((refuse_reason)i);
            hb.n_refusals = REFUSE_COUNT;
            hb.refusals = refusals;
            lease_ns ns[LEASE_MAX_NS];
            char *ns_names[LEASE_MAX_NS];
            uint64_t ns_bytes[LEASE_MAX_NS], ns_quota[LEASE_MAX_NS];
            put_namespaces(&hb, ns, ns_names, ns_bytes, ns_quota);
            static uint32_t awaited[LEASE_MAX_AWAITED]; /* this thread's only */
            put_awaited(&hb, awaited);
            wire_send(s, NULL, &hb, NULL, NULL);
            next = now + HB.period;
        }
        zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 10) > 0)
            take_acks(s, lease);
    }
    zmq_close(s);
    return NULL;
}

int lease_start(void *ctx, const member *mb)
{
    HB.ctx = ctx;
    HB.sec = mb->sec;
    snprintf(HB.sched, sizeof HB.sched, "%s", mb->sched);
    HB.period = mb->heartbeat_ms > 0 ? mb->heartbeat_ms : 100;
    HB.job = mb->job_id;
    HB.node = mb->node_id;
    atomic_store(&HB.loop_ms, tu_now_ms());
    if (pthread_create(&HB.thread, NULL, heartbeat_main, NULL) != 0) {
        LOG_E("cannot start the heartbeat thread: this server will be declared dead");
        return -1;
    }
    HB.started = 1;
    return 0;
}

void lease_pass(void) { atomic_store(&HB.loop_ms, tu_now_ms()); }

void lease_set_stats(uint64_t dropped, uint64_t pushes, uint64_t pulls)
{
    atomic_store(&HB.dropped, dropped);
    atomic_store(&HB.pushes, pushes);
    atomic_store(&HB.pulls, pulls);
}

void lease_set_tables(uint64_t rows, uint64_t admitted, uint64_t not_admitted, uint64_t evicted,
                      uint64_t bytes)
{
    atomic_store(&HB.rows, rows);
    atomic_store(&HB.admitted, admitted);
    atomic_store(&HB.not_admitted, not_admitted);
    atomic_store(&HB.evicted, evicted);
    atomic_store(&HB.bytes, bytes);
}

void lease_set_whole(uint64_t epoch) { atomic_store(&HB.whole_epoch, epoch); }

void lease_set_namespaces(const lease_ns *ns, size_t n)
{
    if (n > LEASE_MAX_NS)
        n = LEASE_MAX_NS;
    pthread_mutex_lock(&HB.ns_mu);
    memcpy(HB.ns, ns, n * sizeof *ns);
    HB.nns = n;
    pthread_mutex_unlock(&HB.ns_mu);
}

void lease_view(int lease_ms)
{
    atomic_store(&HB.lease_ms, lease_ms);
    int64_t none = 0; /* the first lease runs from the first view */
    atomic_compare_exchange_strong(&HB.lease_until_ms, &none, tu_now_ms() + (int64_t)lease_ms);
}

int lease_valid(void) { return tu_now_ms() <= atomic_load(&HB.lease_until_ms); }

void lease_stop(void)
{
    atomic_store(&HB.stop, 1);
    if (HB.started)
        pthread_join(HB.thread, NULL);
    HB.started = 0;
}
