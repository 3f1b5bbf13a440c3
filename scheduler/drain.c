/* The planned removal of a server (pskvctl drain). See drain.h. */
#define _GNU_SOURCE
#include "drain.h"

#include <stdio.h>
#include <string.h>

#include "events.h"
#include "log.h"
#include "pskv_errors.h"
#include "sched_metrics.h"
#include "sched_net.h"
#include "timeutil.h"
#include "view.h"

/* 1 when s is a server that stays: live, not stopped, not being drained. */
static int stays(const memb_node *s)
{
    return s->role == PSKV__ROLE__SERVER && !s->dead && s->state != NODE_FINISHED &&
           s->drain == DRAIN_NONE;
}

/* Servers that stay, n excluded. */
static int servers_staying(const memb_node *n)
{
    int left = 0;
    for (int i = 0; i < memb.nnodes; i++)
        left += &memb.nodes[i] != n && stays(&memb.nodes[i]);
    return left;
}

/* The first server that stays and does not yet hold the placement of view
 * `epoch` (or a later one) whole; NULL when every one does. */
const memb_node *drain_first_behind(uint64_t epoch)
{
    for (int i = 0; i < memb.nnodes; i++)
        if (stays(&memb.nodes[i]) && memb.nodes[i].whole_epoch < epoch)
            return &memb.nodes[i];
    return NULL;
}

/* Why node `id` may not be drained now (into why, returning its PSKV_E* code), or
 * 0 when it may. */
static int refusal(uint32_t id, char *why, size_t len)
{
    static const char *const js[] = {"waiting for its nodes", "running", "stopping", "finished"};
    const memb_node *n = memb_find(id);
    uint32_t np, R, vn;
    view_chains(&np, &R, &vn);
    if (memb.state != JOB_RUNNING) {
        snprintf(why, len, "job %llu is %s: only a running job's servers can be drained",
                 (unsigned long long)memb.job_id, js[memb.state]);
        return PSKV_EREFUSED;
    }
    if (!n) {
        snprintf(why, len, "node %u is not in the job (pskvctl status lists the node ids)", id);
        return PSKV_ENOTFOUND;
    }
    const char *no = n->role != PSKV__ROLE__SERVER ? "is not a server"
                     : n->drain == DRAIN_LEFT      ? "already left the job (drained)"
                     : n->drain != DRAIN_NONE      ? "is already being drained"
                     : n->dead                     ? "is not live (declared dead)"
                     : n->state == NODE_FINISHED   ? "has stopped"
                                                   : NULL;
    if (no) {
        snprintf(why, len, "node %u (%s) %s", id, memb_role_name(n->role), no);
        return PSKV_EREFUSED;
    }
    int staying = servers_staying(n);
    if (staying == 0) {
        snprintf(why, len, "server node %u is the last live server: no other could take its "
                 "partitions", id);
        return PSKV_EREFUSED;
    }
    if ((uint32_t)staying < R) {
        snprintf(why, len, "draining server node %u would leave %d live server%s, fewer than "
                 "R = %u (every partition keeps R replicas; the scheduler's --replicas)", id,
                 staying, staying == 1 ? "" : "s", R);
        return PSKV_EREFUSED;
    }
    /* a server still waiting for copies may be the only source of a partition's */
    const memb_node *behind = drain_first_behind(view_place_epoch());
    if (behind) {
        snprintf(why, len, "server node %u does not hold the placement of view epoch %llu "
                 "whole yet (copies under way): try again once it does", behind->id,
                 (unsigned long long)view_place_epoch());
        return PSKV_ENOTREADY;
    }
    return 0;
}

void drain_request(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    char why[300];
    if (!r->has_drain_node) {
        sched_refuse(msg, PSKV_EPROTO, "DRAIN without drain_node");
        return;
    }
    int code = refusal(r->drain_node, why, sizeof why);
    if (code) {
        sched_refuse(msg, code, why);
        return;
    }
    memb_node *n = memb_find(r->drain_node);
    n->drain = DRAIN_HANDING;
    n->drain_parts = n->holds;
    n->drain_ms = tu_now_ms();
    view_place(); /* its partitions go to the others (view.c) */
    view_send();
    n->drain_epoch = view_epoch();
    LOG_I("draining server node %u (pskvctl drain from %s): view epoch %llu places its %u "
          "partitions on the %d other live servers; it leaves once they hold them whole",
          n->id, msg->peer, (unsigned long long)n->drain_epoch, n->drain_parts,
          servers_staying(n));
    Pskv__Meta m;
    sched_meta(&m, PSKV__MSG_TYPE__DRAIN_ACK);
    m.has_request_id = r->has_request_id;
    m.request_id = r->request_id;
    m.has_drain_node = m.has_drain_parts = 1;
    m.drain_node = n->id;
    m.drain_parts = n->drain_parts;
    sched_reply(&msg->rid, &m);
}

/* STOP, drained: n exits. */
static void send_stop(memb_node *n)
{
    Pskv__Meta m;
    sched_meta(&m, PSKV__MSG_TYPE__STOP);
    m.has_drained = m.drained = 1;
    sched_send(n, &m);
}

/* The drained server n may go: told to exit, recorded as left, shown so. */
static void let_go(memb_node *n)
{
    int64_t now = tu_now_ms();
    double secs = (double)(now - n->drain_ms) / 1e3;
    n->drain = DRAIN_LEFT;
    n->state = NODE_FINISHED;
    n->gone_ms = now; /* forgotten MEMB_FORGET_MS later, like a replaced server */
    n->drain_ms = now;
    memb.nservers--; /* as a join adds one */
    send_stop(n);
    schedm_drain();
    LOG_I("server node %u drained: %u partitions handed over in %.1f s, every other server "
          "holds them whole; told to exit", n->id, n->drain_parts, secs);
    view_send(); /* it is shown left; nodes close their connections to it */
    events_node(SCHED_EV_LEFT, n); /* checkpoint.c: one in progress no longer waits */
}

void drain_tick(void)
{
    if (memb.state != JOB_RUNNING)
        return;
    for (int i = 0; i < memb.nnodes; i++) {
        memb_node *n = &memb.nodes[i];
        if (n->drain == DRAIN_HANDING && !n->dead && !drain_first_behind(n->drain_epoch))
            let_go(n);
    }
}

/* A heartbeat from n, a server already let go: it did not exit yet; it is sent
 * STOP again (at most once a second). */
static void drain_heard(memb_node *n)
{
    int64_t now = tu_now_ms();
    if (now - n->drain_ms < 1000)
        return;
    n->drain_ms = now;
    LOG_W("heartbeat from server node %u, drained and told to exit: telling it again", n->id);
    send_stop(n);
}

static int on_heard(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    if (ev->node->drain == DRAIN_LEFT)
        drain_heard(ev->node); /* told to exit: told again */
    return 0;
}

void drain_hooks(void) { events_subscribe(SCHED_EV_HEARD, on_heard, NULL); }
