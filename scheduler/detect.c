/* The scheduler's failure detector (detect.h). */
#define _GNU_SOURCE
#include "detect.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>

#include "log.h"
#include "membership.h"
#include "metrics.h"
#include "net.h"
#include "probe.h"
#include "timeutil.h"

#define PROBE_MS 50 /* a refusal on a LAN comes back in well under a millisecond */
/* The longest heartbeat gap of any live node over the last PAUSE_BUCKETS x
 * PAUSE_BUCKET_MS, times PAUSE_FACTOR, is a floor of every node's time-out: on a
 * loaded host gaps are heavy-tailed (a node heartbeating like clockwork for a
 * minute stalls for a second), which a normal tail, phi's, misses; one node's
 * stall warns for all, since they share the machine or its network. */
#define PAUSE_BUCKETS 6
#define PAUSE_BUCKET_MS 10000
#define PAUSE_FACTOR 3
/* Before a minute of gaps was seen the host is assumed loaded: every bucket starts
 * at this pause (a job's start, every process at once, is when a busy host stalls
 * its daemons most), so the floor is 3 s for the job's first minute and then
 * follows what the gaps show (800 ms on a quiet host). */
#define PAUSE_PRIOR_MS 1000

static struct {
    double threshold;       /* --phi-threshold */
    int min_dead_ms;        /* --min-dead-after-ms */
    uint64_t dead_heard[8]; /* by role */
    struct met_series *heard_s[8];
    void *mon;              /* the monitor's PAIR, or the one ZAP forwards closes on */
    int own_mon;            /* 1: mon is our own monitor of the socket */
    int64_t last_any;       /* the latest heartbeat of any node */
    int64_t pause[PAUSE_BUCKETS]; /* longest gap per bucket, ms */
    int64_t bucket;         /* the current bucket's number (time / PAUSE_BUCKET_MS) */
} D;

/* The longest gap of the last minute, as of `now`. */
static int64_t recent_pause(int64_t now)
{
    int64_t b = now / PAUSE_BUCKET_MS, m = 0;
    for (; D.bucket < b; D.bucket++)
        D.pause[(D.bucket + 1) % PAUSE_BUCKETS] = 0;
    for (int i = 0; i < PAUSE_BUCKETS; i++)
        m = D.pause[i] > m ? D.pause[i] : m;
    return m;
}

int detect_init(double phi_threshold, int min_dead_after_ms, int is_default)
{
    if (!(phi_threshold > 0)) {
        fprintf(stderr, "pskv-scheduler: --phi-threshold %g must be above 0\n", phi_threshold);
        return 2;
    }
    if (is_default && min_dead_after_ms < 2 * memb.heartbeat_ms)
        min_dead_after_ms = 2 * memb.heartbeat_ms;
    if (is_default && min_dead_after_ms > memb.dead_after_ms)
        min_dead_after_ms = memb.dead_after_ms;
    if (is_default && min_dead_after_ms < 2 * memb.heartbeat_ms) {
        fprintf(stderr, "pskv-scheduler: --dead-after-ms %d must be at least 2 x --heartbeat-ms "
                "%d (a server's lease is at least the time-out minus one heartbeat and must "
                "outlast one)\n", memb.dead_after_ms, memb.heartbeat_ms);
        return 2;
    }
    if (min_dead_after_ms > memb.dead_after_ms) {
        fprintf(stderr, "pskv-scheduler: --min-dead-after-ms %d is above --dead-after-ms %d "
                "(the lower bound of a silent node's time-out above its upper bound)\n",
                min_dead_after_ms, memb.dead_after_ms);
        return 2;
    }
    if (min_dead_after_ms < 2 * memb.heartbeat_ms) {
        fprintf(stderr, "pskv-scheduler: --min-dead-after-ms %d must be at least 2 x "
                "--heartbeat-ms %d (a server's lease is at least that minus one heartbeat and "
                "must outlast one)\n", min_dead_after_ms, memb.heartbeat_ms);
        return 2;
    }
    D.threshold = phi_threshold;
    D.min_dead_ms = min_dead_after_ms;
    D.bucket = tu_now_ms() / PAUSE_BUCKET_MS;
    for (int i = 0; i < PAUSE_BUCKETS; i++)
        D.pause[i] = PAUSE_PRIOR_MS;
    return 0;
}

int detect_min_dead_ms(void) { return D.min_dead_ms; }

void detect_node_init(detect_node *d)
{
    memset(d, 0, sizeof *d);
    /* the sd floor: half a period, so that a steady node's time-out is the floor
     * --min-dead-after-ms, not a few ms past its mean */
    phi_init(&d->gaps, memb.heartbeat_ms, memb.heartbeat_ms / 2.0);
    for (int i = 0; i < DETECT_FDS; i++)
        d->fds[i] = -1;
}

/* The silence after which n is declared dead, as its window and the host's
 * recent pauses stand now. */
static int64_t dead_after(const memb_node *n)
{
    double t = phi_time_to(&n->det.gaps, D.threshold);
    double floor = (double)PAUSE_FACTOR * (double)recent_pause(tu_now_ms());
    if (t < floor)
        t = floor;
    if (t < D.min_dead_ms)
        t = D.min_dead_ms;
    if (t > memb.dead_after_ms)
        t = memb.dead_after_ms;
    return (int64_t)t;
}

/* Nodes that count for liveness now (not dead, not finished). */
static int live_nodes(void)
{
    int c = 0;
    for (int i = 0; i < memb.nnodes; i++)
        c += !memb.nodes[i].dead && memb.nodes[i].state != NODE_FINISHED;
    return c;
}

/* 1 while the scheduler hears no node at all although several live: its own
 * receiving is starved (its ZeroMQ I/O thread waits for a core while its loop
 * runs), not every node silent at once. */
static int deaf(int64_t now)
{
    return D.last_any && now - D.last_any > 2 * (int64_t)memb.heartbeat_ms && live_nodes() > 1;
}

int detect_heard(memb_node *n, int64_t now)
{
    if (deaf(now)) { /* the time nobody was heard is not the others' silence */
        int64_t lost = now - D.last_any - memb.heartbeat_ms;
        for (int i = 0; i < memb.nnodes; i++)
            if (memb.nodes[i].last_hb_ms <= D.last_any)
                memb.nodes[i].last_hb_ms += lost;
        LOG_W("the scheduler heard no node for %lld ms (its receiving starved): that time is "
              "not counted as the nodes' silence", (long long)(now - D.last_any));
    }
    D.last_any = now;
    int64_t gap = now - n->last_hb_ms;
    if (gap >= D.min_dead_ms / 2 && !n->dead) /* a near miss: worth knowing on a busy host */
        LOG_I("late heartbeat from %s node %u: %lld ms after the one before (phi %.1f, "
              "time-out %lld ms)", memb_role_name(n->role), n->id, (long long)gap,
              phi_value(&n->det.gaps, (double)gap), (long long)dead_after(n));
    phi_add(&n->det.gaps, (double)(gap < memb.dead_after_ms ? gap : memb.dead_after_ms));
    recent_pause(now); /* turns the buckets to now */
    int64_t *b = &D.pause[D.bucket % PAUSE_BUCKETS];
    if (!n->dead && gap > *b && gap < memb.dead_after_ms)
        *b = gap;
    int64_t t = dead_after(n);
    if (n->det.not_before_ms < now + t)
        n->det.not_before_ms = now + t;
    return (int)(t - memb.heartbeat_ms);
}

int detect_silent(memb_node *n, int64_t now)
{
    int64_t silent = now - n->last_hb_ms;
    if (silent <= memb.dead_after_ms &&
        (now < n->det.not_before_ms || silent <= dead_after(n) || deaf(now)))
        return 0;
    snprintf(n->det.why, sizeof n->det.why, "silent %lld ms, phi %.1f", (long long)silent,
             phi_value(&n->det.gaps, (double)silent));
    return 1;
}

void detect_dead(memb_node *n)
{
    n->det.heard_dead = 0;
    n->det.recheck_ms = 0;
    for (int i = 0; i < DETECT_FDS; i++)
        n->det.fds[i] = -1;
}

void detect_dead_heard(memb_node *n)
{
    if (n->det.heard_dead)
        return;
    n->det.heard_dead = 1;
    if (n->role >= 0 && n->role < 8)
        D.dead_heard[n->role]++;
    LOG_W("%s node %u, declared dead (%s), is heard from: counted as declared dead then "
          "heard from", memb_role_name(n->role), n->id, n->det.why);
}

uint64_t detect_dead_heard_count(int role) { return role >= 0 && role < 8 ? D.dead_heard[role] : 0; }

/* ---- the connection monitor ---------------------------------------------------- */

int detect_start(void *ctx, void *sock)
{
    D.mon = net_monitor(ctx, sock, "inproc://pskv-sched-monitor", ZMQ_EVENT_DISCONNECTED);
    if (!D.mon) {
        LOG_W("cannot monitor the nodes' connections (%s): a crashed node is noticed by its "
              "lease only", zmq_strerror(errno));
        return -1;
    }
    D.own_mon = 1;
    return 0;
}

void detect_take(void *events) { D.mon = events; }

void *detect_socket(void) { return D.mon; }

void detect_note(wire_msg *msg)
{
    if (!msg->meta || !msg->meta->has_sender || !msg->nframes)
        return;
    memb_node *n = memb_find(msg->meta->sender);
    int fd = zmq_msg_get(&msg->frames[0], ZMQ_SRCFD);
    if (!n || n->dead || fd < 0)
        return;
    n->det.local = !strncmp(msg->peer, "127.", 4) || !strcmp(msg->peer, "::1");
    int free_at = -1;
    for (int i = 0; i < DETECT_FDS; i++) {
        if (n->det.fds[i] == fd)
            return;
        if (n->det.fds[i] < 0 && free_at < 0)
            free_at = i;
    }
    if (free_at < 0) { /* the oldest goes: a node holds two connections at most */
        memmove(n->det.fds, n->det.fds + 1, (DETECT_FDS - 1) * sizeof n->det.fds[0]);
        free_at = DETECT_FDS - 1;
    }
    n->det.fds[free_at] = fd;
}

/* A connection of live node n closed: confirm its process is gone, then it dies;
 * not confirmed yet, probed again a little later (detect_recheck). */
static void closed(memb_node *n)
{
    static const int again_ms[] = {10, 30, 100, 300};
    probe_result r = n->port > 0 ? probe_tcp(n->host, n->port, PROBE_MS) : PROBE_UNKNOWN;
    int pid_gone = n->det.local && probe_pid_gone(n->pid) == 1;
    if (r != PROBE_REFUSED && !pid_gone) {
        if (n->det.rechecks < (int)(sizeof again_ms / sizeof again_ms[0])) {
            n->det.recheck_ms = tu_now_ms() + again_ms[n->det.rechecks++];
            return;
        }
        LOG_I("a connection of %s node %u closed, but %s: left to its lease",
              memb_role_name(n->role), n->id,
              n->port > 0 ? probe_name(r) : n->det.local ? "its process runs"
                                                         : "it has no port to probe");
        return;
    }
    snprintf(n->det.why, sizeof n->det.why, "connection closed");
    long ago = (long)(tu_now_ms() - n->det.closed_ms);
    if (r == PROBE_REFUSED)
        LOG_W("%s node %u: its connection closed (%ld ms ago, probe %d) and %s:%d refuses "
              "connections", memb_role_name(n->role), n->id, ago, n->det.rechecks + 1, n->host,
              n->port);
    else
        LOG_W("%s node %u: its connection closed (%ld ms ago, probe %d) and its process %u is "
              "gone", memb_role_name(n->role), n->id, ago, n->det.rechecks + 1, n->pid);
    memb_declare_dead(n, tu_now_ms());
}

/* Whether n may still be declared dead by its closed connection: not once the job
 * stops (every node is leaving; a server's STOP_ACK may still be on its way). */
static int judged(const memb_node *n)
{
    return !n->dead && !n->replaced && n->state != NODE_FINISHED && n->drain != DRAIN_LEFT &&
           memb.state != JOB_STOPPING && memb.state != JOB_FINISHED;
}

long detect_recheck(int64_t now)
{
    long wait = -1;
    for (int i = 0; i < memb.nnodes; i++) {
        memb_node *n = &memb.nodes[i];
        if (!n->det.recheck_ms)
            continue;
        if (!judged(n)) {
            n->det.recheck_ms = 0;
            continue;
        }
        if (now >= n->det.recheck_ms) {
            n->det.recheck_ms = 0;
            closed(n);
            now = tu_now_ms();
        }
        if (n->det.recheck_ms && (wait < 0 || n->det.recheck_ms - now < wait))
            wait = (long)(n->det.recheck_ms > now ? n->det.recheck_ms - now : 0);
    }
    return wait;
}

void detect_on_peer_closed(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    memb_node *from = memb_sender(msg), *n;
    if (!from)
        return;
    if (from->role != PSKV__ROLE__SERVER || !r->has_closed_node) {
        LOG_W("dropped PEER_CLOSED from %s node %u (%s): %s", memb_role_name(from->role),
              from->id, msg->peer, from->role != PSKV__ROLE__SERVER ? "only servers send it"
                                                                   : "no closed_node");
        return;
    }
    n = memb_find(r->closed_node);
    if (!n || n->role != PSKV__ROLE__SERVER || n == from) {
        LOG_W("dropped PEER_CLOSED from server node %u (%s): node %u is not another server of "
              "this job", from->id, msg->peer, r->closed_node);
        return;
    }
    if (!judged(n) || from->dead)
        return; /* dead already (most often by the scheduler's own monitor), or leaving */
    LOG_I("server node %u reports that its connection to server node %u closed: probing it",
          from->id, n->id);
    if (!n->det.recheck_ms) /* else a close is being probed already: its time stands */
        n->det.closed_ms = tu_now_ms();
    n->det.rechecks = 0;
    closed(n);
}

void detect_events(void)
{
    uint16_t event;
    int32_t fd;
    while (D.mon && net_monitor_event(D.mon, &event, &fd)) {
        if (event != ZMQ_EVENT_DISCONNECTED || fd < 0)
            continue;
        for (int i = 0; i < memb.nnodes; i++) {
            memb_node *n = &memb.nodes[i];
            int had = 0;
            for (int k = 0; k < DETECT_FDS; k++)
                if (n->det.fds[k] == fd) {
                    n->det.fds[k] = -1;
                    had = 1;
                }
            if (had && judged(n)) {
                if (!n->det.recheck_ms)
                    n->det.closed_ms = tu_now_ms();
                n->det.rechecks = 0;
                closed(n);
            }
        }
    }
}

void detect_stop(void *sock)
{
    if (!D.mon)
        return;
    net_monitor_stop(D.own_mon ? sock : NULL, &D.mon); /* ZAP's monitor is ZAP's to stop */
    D.own_mon = 0;
}

/* ---- status and metrics -------------------------------------------------------- */

void detect_fill_node(Pskv__Node *p, const memb_node *n, int64_t now)
{
    const phi_window *w = &n->det.gaps;
    if (n->dead && n->det.why[0])
        p->dead_reason = (char *)n->det.why;
    p->has_phi = p->has_gap_mean_ms = p->has_gap_sd_ms = p->has_gaps = p->has_dead_after_ms = 1;
    p->phi = n->dead ? 0 : phi_value(w, (double)(now - n->last_hb_ms));
    p->gap_mean_ms = phi_mean(w);
    p->gap_sd_ms = phi_sd(w);
    p->gaps = w->total;
    p->dead_after_ms = (uint32_t)dead_after(n);
}

void detect_fill_view(Pskv__View *v)
{
    static uint64_t heard[PSKV__ROLE__EVALUATOR + 1];
    for (int r = 0; r <= PSKV__ROLE__EVALUATOR; r++)
        heard[r] = D.dead_heard[r];
    v->has_phi_threshold = v->has_min_dead_after_ms = v->has_dead_after_ms = 1;
    v->phi_threshold = D.threshold;
    v->min_dead_after_ms = (uint32_t)D.min_dead_ms;
    v->dead_after_ms = (uint32_t)memb.dead_after_ms;
    v->n_dead_heard = PSKV__ROLE__EVALUATOR + 1;
    v->dead_heard = heard;
}

void detect_metrics(int64_t now)
{
    static const int roles[] = {PSKV__ROLE__SERVER, PSKV__ROLE__WORKER, PSKV__ROLE__EVALUATOR};
    for (size_t i = 0; i < sizeof roles / sizeof roles[0]; i++) {
        int r = roles[i];
        if (!D.heard_s[r])
            D.heard_s[r] = metrics_series(
                "pskv_declared_dead_then_heard_total", MET_COUNTER,
                "Nodes declared dead whose heartbeat came later (most likely false deaths), "
                "by role.", "of", memb_role_name(r));
        metrics_set(D.heard_s[r], (double)D.dead_heard[r]);
    }
    for (int i = 0; i < memb.nnodes; i++) {
        memb_node *n = &memb.nodes[i];
        if (n->replaced || n->gone_ms)
            continue;
        if (!n->det.phi_s) { /* by role and rank: bounded by the job's size */
            char who[48];
            snprintf(who, sizeof who, "%s-%d", memb_role_name(n->role), n->rank);
            n->det.phi_s = metrics_series("pskv_node_phi", MET_GAUGE,
                                          "The node's phi now (suspicion from its silence "
                                          "against its heartbeat gaps).", "node_of", who);
            n->det.mean_s = metrics_series("pskv_node_heartbeat_gap_mean_seconds", MET_GAUGE,
                                           "Mean gap between the node's heartbeats.",
                                           "node_of", who);
            n->det.sd_s = metrics_series("pskv_node_heartbeat_gap_sd_seconds", MET_GAUGE,
                                         "Standard deviation of the node's heartbeat gaps "
                                         "(at least half a period).", "node_of", who);
        }
        metrics_set(n->det.phi_s,
                    n->dead ? 0 : phi_value(&n->det.gaps, (double)(now - n->last_hb_ms)));
        metrics_set(n->det.mean_s, phi_mean(&n->det.gaps) / 1000.0); /* Prometheus: seconds */
        metrics_set(n->det.sd_s, phi_sd(&n->det.gaps) / 1000.0);
    }
}
