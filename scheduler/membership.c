/* Membership: who is in the job, who is alive, and the job's life from the first
 * REGISTER to the last STOP_ACK. See membership.h for the contract. */
#define _GNU_SOURCE
#include "membership.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "events.h"
#include "group.h"
#include "log.h"
#include "net.h"
#include "pskv_errors.h"
#include "sched_net.h"
#include "timeutil.h"
#include "view.h"

memb_state memb;

const char *memb_role_name(int role)
{
    switch (role) {
    case PSKV__ROLE__SCHEDULER: return "scheduler";
    case PSKV__ROLE__SERVER: return "server";
    case PSKV__ROLE__WORKER: return "worker";
    case PSKV__ROLE__EVALUATOR: return "evaluator";
    default: return "control";
    }
}

const char *memb_state_name(const memb_node *n)
{
    if (n->dead)
        return "dead";
    if (n->drain != DRAIN_NONE)
        return n->drain == DRAIN_LEFT ? "left" : "draining";
    switch (n->state) {
    case NODE_JOINED: return "joined";
    case NODE_ACTIVE: return "active";
    case NODE_FINISHED: return n->role == PSKV__ROLE__SERVER ? "stopped" : "finished";
    }
    return "?";
}

int memb_count_role(int role)
{
    int c = 0;
    for (int i = 0; i < memb.nnodes; i++)
        c += memb.nodes[i].role == role;
    return c;
}

memb_node *memb_find(uint32_t id)
{
    for (int i = 0; i < memb.nnodes; i++)
        if (memb.nodes[i].id == id)
            return &memb.nodes[i];
    return NULL;
}

memb_node *memb_sender(wire_msg *msg)
{
    memb_node *n = msg->meta->has_sender ? memb_find(msg->meta->sender) : NULL;
    if (!n)
        sched_refuse(msg, PSKV_EPROTO, "sender is not a registered node");
    return n;
}

/* ---- the job's end ----------------------------------------------------------- */

void memb_begin_stop(const char *why)
{
    if (memb.state == JOB_STOPPING || memb.state == JOB_FINISHED)
        return;
    memb.state = JOB_STOPPING;
    memb.stop_deadline_ms = tu_now_ms() + 5000;
    Pskv__Meta m;
    sched_meta(&m, PSKV__MSG_TYPE__STOP);
    for (int i = 0; i < memb.nnodes; i++)
        if (memb.nodes[i].role == PSKV__ROLE__SERVER ||
            (memb.nodes[i].role == PSKV__ROLE__EVALUATOR && !memb.nodes[i].dead))
            sched_send(&memb.nodes[i], &m); /* the evaluator stops too; it answers nothing */
    LOG_I("%s", why);
}

void memb_on_shutdown(wire_msg *msg)
{
    if (!memb.service) {
        if (msg)
            sched_refuse(msg, PSKV_EREFUSED, "not a service (pskv-scheduler --service): a job "
                         "ends when its workers finish");
        return;
    }
    int live = 0;
    for (int i = 0; i < memb.nnodes; i++)
        live += group_counts(&memb.nodes[i]);
    char why[200];
    snprintf(why, sizeof why, "service shutdown (%s): stopping the servers; %d workers still "
             "running are cut off", msg ? "pskvctl shutdown" : "signal", live);
    memb_begin_stop(why);
    if (!msg)
        return;
    Pskv__Meta a;
    sched_meta(&a, PSKV__MSG_TYPE__SHUTDOWN_ACK);
    a.has_request_id = msg->meta->has_request_id;
    a.request_id = msg->meta->request_id;
    sched_reply(&msg->rid, &a);
}

/* ---- registration and joins --------------------------------------------------- */

void memb_ack_register(memb_node *n)
{
    Pskv__Meta m;
    Pskv__View v;
    sched_meta(&m, PSKV__MSG_TYPE__REGISTER_ACK);
    m.has_rank = 1;
    m.rank = n->rank;
    m.has_nonce = 1;
    m.nonce = n->nonce;
    m.has_request_id = 1;
    m.request_id = n->id; /* the node id assigned */
    m.has_seq = 1;
    m.seq = group_barriers(n); /* barriers already passed: a rejoining worker counts on */
    pskv__view__init(&v);
    v.has_heartbeat_ms = 1;
    v.heartbeat_ms = (uint32_t)memb.heartbeat_ms;
    m.view = &v;
    sched_send(n, &m);
}

/* Every expected node registered: the job starts with view epoch 1 (a resumed
 * job first finds the checkpoint it continues from: checkpoint.c, on the event). */
static void cluster_complete(void)
{
    events_node(SCHED_EV_COMPLETE, NULL);
    view_place();
    memb.state = JOB_RUNNING;
    for (int i = 0; i < memb.nnodes; i++)
        if (memb.nodes[i].role != PSKV__ROLE__WORKER)
            memb.nodes[i].state = NODE_ACTIVE;
    group_start_ready(0); /* a job's group; a service's groups complete by now */
    view_send();
    LOG_I("cluster complete: %d servers, %d workers; view epoch %llu published", memb.nservers,
          memb.nworkers, (unsigned long long)view_epoch());
}

/* 1 when server msg may join the running job (it takes the partitions its ring
 * tokens win); else refuses it. */
static int join_allowed(wire_msg *msg)
{
    if (memb_count_role(PSKV__ROLE__SERVER) >= VIEW_MAX_SERVERS) {
        sched_refuse(msg, PSKV_EREFUSED, "cluster full: 4096 servers");
        return 0;
    }
    return 1;
}

/* Server n (just registered) joins the running job: a new view takes it in. */
static void join(memb_node *n)
{
    n->state = NODE_ACTIVE;
    memb_ack_register(n);
    memb.nservers++;
    events_node(SCHED_EV_JOINED, n);
    int moved = view_join_server(n->id);
    LOG_I("server node %u joined the running job at %s:%d pid %u: view epoch %llu moves %d "
          "partitions to it (heads %u, holds %u)", n->id, n->host, n->port, n->pid,
          (unsigned long long)view_epoch(), moved, n->heads, n->holds);
}

/* Appends the node of msg to the table with `rank` (state NODE_JOINED, alive
 * now). Returns it, or NULL after refusing msg when out of memory. */
memb_node *memb_add_node(wire_msg *msg, int rank)
{
    Pskv__Meta *r = msg->meta;
    if (memb.nnodes == memb.cap) {
        int cap = memb.cap ? memb.cap * 2 : 16;
        memb_node *grown = realloc(memb.nodes, (size_t)cap * sizeof *grown);
        if (!grown) {
            sched_refuse(msg, PSKV_ENOMEM, "scheduler out of memory");
            return NULL;
        }
        memb.nodes = grown;
        memb.cap = cap;
    }
    memb_node *n = &memb.nodes[memb.nnodes++];
    memset(n, 0, sizeof *n);
    n->id = ++memb.last_id; /* ids start at 1; 0 is the scheduler */
    memb.servers_seen += r->role == PSKV__ROLE__SERVER;
    n->role = (int)r->role;
    n->rank = rank;
    snprintf(n->host, sizeof n->host, "%s", r->host);
    n->port = (int)r->port;
    n->pid = r->pid;
    n->nonce = r->nonce;
    snprintf(n->key, sizeof n->key, "%s", msg->key);
    n->insecure = r->has_insecure && r->insecure;
    if (r->n_ckpts && (n->ckpts = calloc(r->n_ckpts, sizeof *n->ckpts))) {
        for (size_t i = 0; i < r->n_ckpts; i++)
            if ((n->ckpts[n->nckpts] = strdup(r->ckpts[i])))
                n->nckpts++;
    }
    n->ridlen = zmq_msg_size(&msg->rid);
    if (n->ridlen > sizeof n->rid)
        n->ridlen = sizeof n->rid;
    memcpy(n->rid, zmq_msg_data(&msg->rid), n->ridlen);
    n->last_hb_ms = tu_now_ms();
    detect_node_init(&n->det);
    n->state = NODE_JOINED;
    return n;
}

/* The evaluator (rank -1) registers at any time before the job ends and counts
 * for nothing the job waits on; joining a running job it gets a view of its own
 * epoch (so the servers know its node id). A dead one it replaces is out for good. */
static void register_evaluator(wire_msg *msg)
{
    memb_node *n = memb_add_node(msg, -1);
    if (!n)
        return;
    snprintf(n->group, sizeof n->group, "%s", msg->meta->group ? msg->meta->group : "");
    for (int i = 0; i < memb.nnodes - 1; i++) {
        memb_node *o = &memb.nodes[i];
        if (o->role == PSKV__ROLE__EVALUATOR && o->dead && !o->replaced &&
            !strcmp(o->group, n->group)) {
            o->replaced = 1;
            o->gone_ms = tu_now_ms();
        }
    }
    LOG_I("evaluator registered: node %u at %s pid %u%s%s%s", n->id, n->host, n->pid,
          memb.state == JOB_RUNNING ? " (joins the running job)" : "",
          *n->group ? " for group " : "", n->group);
    memb_ack_register(n);
    events_node(SCHED_EV_JOINED, n);
    if (memb.state == JOB_RUNNING) {
        n->state = NODE_ACTIVE;
        view_send();
    }
}

void memb_on_register(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    char why[400];
    for (int i = 0; i < memb.nnodes; i++) {
        if (memb.nodes[i].nonce == r->nonce && r->has_nonce) { /* a re-sent registration */
            memb_ack_register(&memb.nodes[i]);
            return;
        }
    }
    if (memb.state == JOB_STOPPING || memb.state == JOB_FINISHED) {
        /* told at once: the node would otherwise wait out its time-outs */
        snprintf(why, sizeof why, "job %llu finished; no node can join it",
                 (unsigned long long)memb.job_id);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return;
    }
    if (r->role != PSKV__ROLE__SERVER && r->role != PSKV__ROLE__WORKER &&
        r->role != PSKV__ROLE__EVALUATOR) {
        sched_refuse(msg, PSKV_EPROTO,
                     "REGISTER with a role other than server, worker or evaluator");
        return;
    }
    if (!r->host || !*r->host || strlen(r->host) >= sizeof memb.nodes[0].host) {
        sched_refuse(msg, PSKV_EPROTO, "REGISTER without a valid advertised host");
        return;
    }
    if (net_is_loopback(r->host) && strcmp(msg->peer, "?") && !net_is_loopback(msg->peer)) {
        snprintf(why, sizeof why,
                 "the node advertises the loopback address %s but connects from %s: other "
                 "hosts could not reach it (give it --advertise ADDR or --interface NAME)",
                 r->host, msg->peer);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return;
    }
    sched_ev may = {.kind = SCHED_EV_REGISTERING, .msg = msg};
    if (events_publish(&may)) /* earlystop.c: an evaluator only when the job runs one */
        return;
    if (r->role == PSKV__ROLE__EVALUATOR) {
        register_evaluator(msg);
        return;
    }
    if (r->role == PSKV__ROLE__WORKER) {
        group_on_register(msg); /* its group's rank; starts the group, or the job */
        return;
    }
    if (memb.state == JOB_RUNNING) {
        memb_node *n = join_allowed(msg) ? memb_add_node(msg, memb.servers_seen) : NULL;
        if (n)
            join(n);
        return;
    }
    if (memb_count_role(PSKV__ROLE__SERVER) >= memb.nservers) {
        snprintf(why, sizeof why, "cluster full: %d servers already registered", memb.nservers);
        sched_refuse(msg, PSKV_EREFUSED, why);
        return;
    }
    memb_node *n = memb_add_node(msg, memb_count_role(PSKV__ROLE__SERVER));
    if (!n)
        return;
    LOG_I("%s registered: node %u rank %d at %s:%d pid %u (%d/%d servers, %d/%d workers)",
          memb_role_name(n->role), n->id, n->rank, n->host, n->port, n->pid,
          memb_count_role(PSKV__ROLE__SERVER), memb.nservers,
          memb_count_role(PSKV__ROLE__WORKER), memb.nworkers);
    memb_ack_register(n);
    events_node(SCHED_EV_JOINED, n);
    memb_check_complete();
}

void memb_check_complete(void)
{
    if (memb.state != JOB_WAITING || memb_count_role(PSKV__ROLE__SERVER) != memb.nservers)
        return;
    const sched_group *g = group_find("");
    if (memb.service || (g && memb_count_role(PSKV__ROLE__WORKER) == g->size))
        cluster_complete();
}

/* ---- forgotten nodes ------------------------------------------------------------ */

/* The last nodes forgotten, so that one heard again learns it is out of the job:
 * a fixed ring, not a table that grows. */
static struct {
    uint32_t id;
    int role;
    unsigned char rid[256];
    size_t ridlen;
} forgot[64];

static void heartbeat_forgotten(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    for (size_t i = 0; r->has_sender && r->sender && i < sizeof forgot / sizeof forgot[0]; i++) {
        if (forgot[i].id != r->sender)
            continue;
        if (forgot[i].role == PSKV__ROLE__SERVER && memb.state == JOB_RUNNING) {
            /* the view without it: a server absent from the view is dead */
            LOG_W("heartbeat from server node %u, which was declared dead, replaced and "
                  "forgotten: sending it the view", r->sender);
            memb_node n = {.id = forgot[i].id, .role = forgot[i].role, .ridlen = forgot[i].ridlen};
            memcpy(n.rid, forgot[i].rid, n.ridlen);
            view_send_to(&n);
        } else {
            LOG_W("heartbeat from %s node %u, which left the job and was forgotten",
                  memb_role_name(forgot[i].role), r->sender);
        }
        return;
    }
    LOG_W("heartbeat from unknown node %u at %s", r->sender, msg->peer);
}

/* MEMB_FORGET_MS, or the test hook PSKV_TEST_FORGET_MS (a test of forgetting need
 * not wait 30 s), read once. */
static int64_t forget_after_ms(void)
{
    static int64_t ms = -1;
    if (ms < 0) {
        const char *e = getenv("PSKV_TEST_FORGET_MS");
        long long v = e ? atoll(e) : 0;
        ms = v > 0 ? v : MEMB_FORGET_MS;
        if (v > 0)
            LOG_W("test hook PSKV_TEST_FORGET_MS: nodes gone for good are forgotten after "
                  "%lld ms, not %d", v, MEMB_FORGET_MS);
    }
    return ms;
}

/* Drops the nodes gone for good MEMB_FORGET_MS ago from the table (membership.h). */
static void forget_gone(int64_t now)
{
    static size_t next;
    int kept = 0;
    int64_t after = forget_after_ms();
    for (int i = 0; i < memb.nnodes; i++) {
        memb_node *n = &memb.nodes[i];
        if (!n->gone_ms || now - n->gone_ms < after) {
            if (kept != i)
                memb.nodes[kept] = *n;
            kept++;
            continue;
        }
        LOG_I("forgetting %s node %u (rank %d at %s:%d): out of the job for %lld s",
              memb_role_name(n->role), n->id, n->rank, n->host, n->port,
              (long long)((now - n->gone_ms) / 1000));
        forgot[next].id = n->id;
        forgot[next].role = n->role;
        forgot[next].ridlen = n->ridlen;
        memcpy(forgot[next].rid, n->rid, n->ridlen);
        next = (next + 1) % (sizeof forgot / sizeof forgot[0]);
        for (size_t k = 0; k < n->nckpts; k++)
            free(n->ckpts[k]);
        free(n->ckpts);
        free(n->traffic);
        free(n->ns);
        memb.forgotten++;
    }
    memb.nnodes = kept;
}

/* ---- heartbeats, barriers, the end -------------------------------------------- */

/* A worker's tables' traffic from its heartbeat (the first MEMB_MAX_TRAFFIC), for
 * pskvctl status; kept as it was when out of memory. */
static void note_traffic(memb_node *n, const Pskv__Meta *r)
{
    if (!n->traffic && !(n->traffic = calloc(1, sizeof *n->traffic))) {
        LOG_W("out of memory keeping the traffic of worker node %u", n->id);
        return;
    }
    memb_traffic *t = n->traffic;
    t->n = r->n_traffic < MEMB_MAX_TRAFFIC ? r->n_traffic : MEMB_MAX_TRAFFIC;
    for (size_t i = 0; i < t->n; i++) {
        const Pskv__TableTraffic *s = r->traffic[i];
        t->tt[i] = *s;
        t->tt[i].base.unknown_fields = NULL;
        t->tt[i].base.n_unknown_fields = 0;
        snprintf(t->names[i], sizeof t->names[i], "%s", s->name ? s->name : "?");
        t->tt[i].name = t->names[i];
        t->ptr[i] = &t->tt[i];
    }
}

/* A server's namespaces from its heartbeat (the first MEMB_MAX_NS), for pskvctl
 * status; kept as they were when out of memory. */
static void note_namespaces(memb_node *n, const Pskv__Meta *r)
{
    if (!n->ns && !(n->ns = calloc(1, sizeof *n->ns))) {
        LOG_W("out of memory keeping the namespaces of server node %u", n->id);
        return;
    }
    memb_ns *m = n->ns;
    size_t k = r->n_ns_names < r->n_ns_bytes ? r->n_ns_names : r->n_ns_bytes;
    k = k < r->n_ns_quota ? k : r->n_ns_quota;
    m->n = k < MEMB_MAX_NS ? k : MEMB_MAX_NS;
    for (size_t i = 0; i < m->n; i++) {
        snprintf(m->names[i], sizeof m->names[i], "%s", r->ns_names[i] ? r->ns_names[i] : "");
        m->ptr[i] = m->names[i];
        m->bytes[i] = r->ns_bytes[i];
        m->quota[i] = r->ns_quota[i];
    }
}

/* A worker's progress, from heartbeats and barriers (which travel on different
 * sockets): it only moves forward. */
static void note_progress(memb_node *n, const Pskv__Meta *r)
{
    if (!r->has_progress_step || r->progress_step < n->progress[1])
        return;
    n->progress[0] = r->progress_epoch;
    n->progress[1] = r->progress_step;
    n->progress[2] = r->progress_pos;
}

void memb_on_heartbeat(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    /* no reply; an unknown sender is logged but not answered */
    memb_node *n = r->has_sender ? memb_find(r->sender) : NULL;
    if (!n) {
        heartbeat_forgotten(msg);
        return;
    }
    if (n->replaced) {
        LOG_W("heartbeat from %s node %u, whose place another node took over",
              memb_role_name(n->role), n->id);
        detect_dead_heard(n);
        return;
    }
    events_node(SCHED_EV_HEARD, n); /* drain.c: a server let go is told again to exit */
    if (n->drain == DRAIN_LEFT)
        return; /* out of the job: its heartbeats renew nothing */
    if (n->dead && n->role == PSKV__ROLE__SERVER && memb.state != JOB_WAITING) {
        /* replaced: its partitions have new owners; it must learn so and
         * serve nothing (the view says it is dead) */
        LOG_W("heartbeat from server node %u, which was declared dead and replaced", n->id);
        detect_dead_heard(n);
        if (memb.state == JOB_RUNNING)
            view_send_to(n);
        return;
    }
    int64_t now = tu_now_ms();
    int lease = detect_heard(n, now);
    n->last_hb_ms = now;
    if (r->has_clock && r->clock > n->clock)
        n->clock = r->clock; /* only forward: a barrier's may have come first */
    if (r->has_dropped)
        n->dropped = r->dropped;
    if (r->has_whole_epoch && r->whole_epoch > n->whole_epoch) {
        n->whole_epoch = r->whole_epoch;
        if (n->role == PSKV__ROLE__SERVER)
            view_heard_whole(n->id, n->whole_epoch, NULL, 0); /* who can lose what (view.h) */
    }
    if (r->has_awaited_epoch && n->role == PSKV__ROLE__SERVER) /* copies under way */
        view_heard_whole(n->id, r->awaited_epoch, r->awaited, r->n_awaited);
    n->pushes = r->has_pushes ? r->pushes : n->pushes;
    n->pulls = r->has_pulls ? r->pulls : n->pulls;
    n->rss = r->has_rss_bytes ? r->rss_bytes : n->rss;
    n->wait_ns = r->has_wait_ns ? r->wait_ns : n->wait_ns;
    if (r->n_traffic && n->role == PSKV__ROLE__WORKER)
        note_traffic(n, r);
    /* a server's heartbeat always has its tables' counters (rows): without names
     * it holds no namespace any more (the last one dropped) */
    if ((r->n_ns_names || r->has_rows) && n->role == PSKV__ROLE__SERVER)
        note_namespaces(n, r);
    n->ar_waiting = r->has_ar_waiting ? r->ar_waiting : 0;
    if (r->has_pipe_stage && r->has_pipe_pipeline)
        n->pipe_place = ((int64_t)r->pipe_pipeline << 32 | r->pipe_stage) + 1;
    if (r->has_balance_batch && r->balance_batch > 0 && r->balance_batch <= 1u << 24) {
        n->bal_batch = r->balance_batch;
        n->bal_us = r->has_balance_us && r->balance_us >= 0 && r->balance_us < 1e9f
                        ? r->balance_us : 0;
    }
    if (r->has_stage_layers && (r->stage_layers & 0xffff) > r->stage_layers >> 16) {
        n->stage_layers = r->stage_layers; /* last + 1 > first: a real range */
        n->stage_ms = r->has_stage_ms && r->stage_ms >= 0 && r->stage_ms < 1e9f ? r->stage_ms : 0;
    }
    if (r->has_rows) {
        n->rows = r->rows;
        n->admitted = r->admitted;
        n->not_admitted = r->not_admitted;
        n->evicted = r->evicted;
        n->bytes = r->bytes;
    }
    for (size_t i = 0; i < r->n_refusals && i < REFUSE_COUNT; i++)
        n->refusals[i] = r->refusals[i];
    note_progress(n, r);
    if (n->role == PSKV__ROLE__SERVER) { /* renews its lease */
        Pskv__Meta a;
        sched_meta(&a, PSKV__MSG_TYPE__HEARTBEAT_ACK);
        a.has_request_id = r->has_request_id;
        a.request_id = r->request_id;
        a.has_lease_ms = 1;
        a.lease_ms = (uint32_t)lease;
        sched_reply(&msg->rid, &a);
    }
    if (n->dead) {
        detect_dead_heard(n);
        n->dead = 0;
        n->det.why[0] = 0;
        LOG_I("node %u (%s) is alive again", n->id, memb_role_name(n->role));
        if (memb.state == JOB_RUNNING)
            view_send(); /* back in the clock set */
    }
}

void memb_on_barrier(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    memb_node *n = memb_sender(msg);
    if (!n)
        return;
    if (n->role != PSKV__ROLE__WORKER || !r->has_seq) {
        sched_refuse(msg, PSKV_EPROTO, "BARRIER from a non-worker or without seq");
        return;
    }
    if (r->seq > n->barrier)
        n->barrier = r->seq;
    if (r->has_clock && r->clock > n->clock)
        n->clock = r->clock; /* a checkpoint right after the barrier records it */
    note_progress(n, r);
    if (r->seq <= group_barriers(n)) { /* a re-sent request for a released barrier */
        Pskv__Meta m;
        sched_meta(&m, PSKV__MSG_TYPE__BARRIER_DONE);
        m.has_seq = 1;
        m.seq = r->seq;
        sched_send(n, &m);
    }
    group_changed(n);
}

void memb_on_finish(wire_msg *msg)
{
    memb_node *n = memb_sender(msg);
    if (!n)
        return;
    if (n->state != NODE_FINISHED && n->role == PSKV__ROLE__EVALUATOR)
        LOG_I("evaluator (node %u) finished", n->id);
    else if (n->state != NODE_FINISHED)
        LOG_I("worker rank %d (node %u) finished", n->rank, n->id);
    int was = n->state;
    n->state = NODE_FINISHED;
    Pskv__Meta m;
    sched_meta(&m, PSKV__MSG_TYPE__FINISH_ACK);
    sched_send(n, &m);
    group_changed(n); /* its barriers, and the end of its group (of a job: of the job) */
    if (was != NODE_FINISHED && memb.state == JOB_RUNNING)
        view_send(); /* out of the clock set: nobody waits for it */
}

void memb_on_stop_ack(wire_msg *msg)
{
    memb_node *n = memb_sender(msg);
    if (n)
        n->state = NODE_FINISHED;
}

/* ---- leases and deaths -------------------------------------------------------- */

/* (membership.h) A checkpoint in progress no longer waits for a dead server. */
void memb_declare_dead(memb_node *n, int64_t now)
{
    n->dead = 1;
    detect_dead(n);
    LOG_W("node %u (%s rank %d at %s:%d) is dead (%s): marked dead", n->id,
          memb_role_name(n->role),
          n->rank, n->host, n->port, n->det.why);
    group_changed(n);
    if (memb.state == JOB_RUNNING && n->role == PSKV__ROLE__SERVER) {
        int64_t t0 = tu_now_us();
        n->gone_ms = now; /* never serves again (memb_on_heartbeat) */
        view_place();
        view_send();
        /* checkpoint.c: one in progress no longer waits; sched_metrics.c: a failover */
        events_node(SCHED_EV_DIED, n);
        LOG_W("server node %u replaced: view epoch %llu published %.1f ms after it was "
              "declared dead; %u partitions lost (no live replica holds them whole)", n->id,
              (unsigned long long)view_epoch(), (double)(tu_now_us() - t0) / 1e3, view_lost());
    } else if (memb.state == JOB_RUNNING && n->role == PSKV__ROLE__WORKER) {
        view_send(); /* out of the clock set */
        events_node(SCHED_EV_DIED, n);
    } else {
        events_node(SCHED_EV_DIED, n); /* earlystop.c: an evaluator's */
    }
}

/* Time the scheduler itself did not run (its process starved or stopped) is not
 * counted against the nodes: without this, a machine that stalls every process
 * for longer than --dead-after-ms makes the scheduler declare every node dead at
 * the first tick after it, before any heartbeat could come in. Declaring a death
 * later is always safe: a server whose heartbeats go unanswered lets its lease
 * lapse on its own clock and serves nothing meanwhile. */
static void forgive_stall(int64_t now)
{
    static int64_t last;
    int64_t tick = memb.heartbeat_ms < 100 ? memb.heartbeat_ms : 100;
    int64_t gap = last ? now - last - tick : 0;
    last = now;
    if (gap <= tick)
        return;
    for (int i = 0; i < memb.nnodes; i++)
        memb.nodes[i].last_hb_ms += gap;
    LOG_W("the scheduler did not run for %lld ms (its process starved or stopped): that time "
          "is not counted as the nodes' silence", (long long)gap);
}

void memb_expire(int64_t now)
{
    forgive_stall(now);
    for (int i = 0; i < memb.nnodes; i++) {
        memb_node *n = &memb.nodes[i];
        if (n->dead || n->state == NODE_FINISHED || !detect_silent(n, now))
            continue;
        memb_declare_dead(n, now);
    }
    forget_gone(now);
    if (memb.state == JOB_WAITING &&
        now - memb.started_ms > (int64_t)(memb.join_timeout_s * 1000)) {
        LOG_E("only %d of %d servers and %d of %d workers joined within %.0f s; giving up",
              memb_count_role(PSKV__ROLE__SERVER), memb.nservers,
              memb_count_role(PSKV__ROLE__WORKER), memb.nworkers, memb.join_timeout_s);
        exit(1);
    }
}

static int servers_stopped(void)
{
    for (int i = 0; i < memb.nnodes; i++)
        if (memb.nodes[i].role == PSKV__ROLE__SERVER && memb.nodes[i].state != NODE_FINISHED &&
            !memb.nodes[i].dead)
            return 0;
    return 1;
}

int memb_stopped(void)
{
    int64_t now = tu_now_ms();
    if (memb.state == JOB_STOPPING && (servers_stopped() || now >= memb.stop_deadline_ms)) {
        if (!servers_stopped())
            LOG_W("not every server acknowledged STOP within 5 s; exiting anyway");
        memb.state = JOB_FINISHED;
        memb.finished_ms = now;
        if (memb.linger_s > 0)
            LOG_I("job %llu finished; lingering %.1f s to refuse late nodes (--linger)",
                  (unsigned long long)memb.job_id, memb.linger_s);
    }
    return memb.state == JOB_FINISHED &&
           now - memb.finished_ms >= (int64_t)(memb.linger_s * 1000);
}

void memb_free(void)
{
    for (int i = 0; i < memb.nnodes; i++) {
        for (size_t k = 0; k < memb.nodes[i].nckpts; k++)
            free(memb.nodes[i].ckpts[k]);
        free(memb.nodes[i].ckpts);
        free(memb.nodes[i].traffic);
        free(memb.nodes[i].ns);
    }
    free(memb.nodes);
    memb.nodes = NULL;
    memb.nnodes = memb.cap = 0;
}
