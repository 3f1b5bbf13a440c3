/* pskv-scheduler: registration, node ids and ranks, key ranges, the published
 * cluster view, barriers, heartbeats and the orderly end of a job.
 *
 * One thread, one ROUTER socket, one poll loop with a periodic tick. Every node
 * talks to the scheduler over a DEALER; the scheduler answers on the routing id a
 * node registered with (heartbeats may come from another socket of the same node
 * and are matched by the sender id in Meta). Job life:
 *   WAITING  nodes register; status works; the view is not yet published
 *   RUNNING  every server and worker joined; view epoch 1 published
 *   STOPPING every worker finished (or died); STOP sent to the servers
 * and the process exits 0 once every server acknowledged STOP (or a grace time). */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <zmq.h>

#include "config.h"
#include "log.h"
#include "net.h"
#include "pskv_errors.h"
#include "ring.h"
#include "timeutil.h"
#include "wire.h"

enum job_state {
    JOB_WAITING,  /* nodes are registering */
    JOB_RUNNING,  /* view published, training */
    JOB_STOPPING, /* all workers done; servers told to stop */
};

enum node_state {
    NODE_JOINED,   /* registered, waiting for the view */
    NODE_ACTIVE,   /* has the view */
    NODE_FINISHED, /* worker: said FINISH; server: acknowledged STOP */
};

typedef struct node {
    uint32_t id;
    int role;
    int rank; /* workers: 0..W-1; servers: registration order */
    char host[128];
    int port;
    uint32_t pid;
    uint64_t nonce;
    unsigned char rid[256];
    size_t ridlen;
    int64_t last_hb_ms;
    int dead; /* silent past --dead-after-ms */
    enum node_state state;
    uint64_t barrier; /* highest barrier entered */
    uint32_t heads, holds; /* servers: partitions headed, replicas held */
    int64_t clock;    /* workers: clocks finished, from heartbeats */
    uint64_t dropped; /* servers: late pushes dropped, from heartbeats */
} node;

static struct {
    cfg_entry *cfg;
    void *ctx, *sock;
    uint64_t job_id, epoch;
    enum job_state state;
    int nservers, nworkers; /* expected */
    node *nodes;
    int nnodes, cap;
    int64_t started_ms, stop_deadline_ms;
    int heartbeat_ms, dead_after_ms, lease_ms;
    uint32_t nparts, replicas, vnodes;
    uint32_t *chains; /* nparts x replicas node ids, head first; 0 = none */
    uint32_t lost;    /* partitions whose every replica died */
    uint64_t barrier_done; /* highest barrier released */
} S;

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

static cfg_entry config[] = {
    {"servers", CFG_INT, "1", "PSKV_SCHEDULER_SERVERS", 1, 4096, NULL,
     "number of servers in the job", 0, 0, NULL, NULL},
    {"workers", CFG_INT, "1", "PSKV_SCHEDULER_WORKERS", 1, 65536, NULL,
     "number of workers in the job", 0, 0, NULL, NULL},
    {"heartbeat-ms", CFG_INT, "100", "PSKV_SCHEDULER_HEARTBEAT_MS", 10, 60000, "ms",
     "heartbeat period handed to every node", 0, 0, NULL, NULL},
    {"dead-after-ms", CFG_INT, "500", "PSKV_SCHEDULER_DEAD_AFTER_MS", 50, 3600000, "ms",
     "a node silent this long is shown dead", 0, 0, NULL, NULL},
    {"replicas", CFG_INT, "1", "PSKV_SCHEDULER_REPLICAS", 1, 8, NULL,
     "servers in each partition's chain (1 = no replication)", 0, 0, NULL, NULL},
    {"partitions", CFG_INT, "64", "PSKV_SCHEDULER_PARTITIONS", 1, 65536, NULL,
     "fixed partitions of the key ring (the unit of placement and replication)", 0, 0, NULL,
     NULL},
    {"vnodes", CFG_INT, "16", "PSKV_SCHEDULER_VNODES", 1, 256, NULL,
     "tokens per server on the consistent-hash ring", 0, 0, NULL, NULL},
    {"join-timeout", CFG_DOUBLE, "600", "PSKV_SCHEDULER_JOIN_TIMEOUT", 1, 86400, "s",
     "give up when the cluster is not complete after this long", 0, 0, NULL, NULL},
    {"job-id", CFG_INT, "0", "PSKV_JOB_ID", 0, 9.2e18, NULL,
     "job id (0 = pick a random one)", 0, 0, NULL, NULL},
    CFG_COMMON_ENTRIES("PSKV_SCHEDULER_PORT", "7700"),
    CFG_END};

static const char *role_name(int role)
{
    switch (role) {
    case PSKV__ROLE__SCHEDULER: return "scheduler";
    case PSKV__ROLE__SERVER: return "server";
    case PSKV__ROLE__WORKER: return "worker";
    default: return "control";
    }
}

static const char *state_name(const node *n)
{
    if (n->dead)
        return "dead";
    switch (n->state) {
    case NODE_JOINED: return "joined";
    case NODE_ACTIVE: return "active";
    case NODE_FINISHED: return n->role == PSKV__ROLE__SERVER ? "stopped" : "finished";
    }
    return "?";
}

static int count_role(int role)
{
    int c = 0;
    for (int i = 0; i < S.nnodes; i++)
        c += S.nodes[i].role == role;
    return c;
}

static node *find_node(uint32_t id)
{
    for (int i = 0; i < S.nnodes; i++)
        if (S.nodes[i].id == id)
            return &S.nodes[i];
    return NULL;
}

static void meta_base(Pskv__Meta *m, Pskv__MsgType type)
{
    wire_meta_init(m, type);
    m->has_job_id = 1;
    m->job_id = S.job_id;
    m->has_epoch = 1;
    m->epoch = S.epoch;
    m->has_sender = 1;
    m->sender = 0;
}

static int send_to(node *n, const Pskv__Meta *m)
{
    zmq_msg_t rid;
    zmq_msg_init_size(&rid, n->ridlen);
    memcpy(zmq_msg_data(&rid), n->rid, n->ridlen);
    int rc = wire_send(S.sock, &rid, m, NULL, NULL);
    zmq_msg_close(&rid);
    if (rc < 0)
        LOG_W("cannot send %s to node %u (%s:%d): %s", wire_type_name((int)m->type), n->id,
              n->host, n->port, zmq_strerror(errno));
    return rc;
}

/* Builds the view (or the status reply) into v; nodes[] must hold S.nnodes. */
static void fill_view(Pskv__View *v, Pskv__Node *nodes, Pskv__Node **ptrs, int status)
{
    int64_t now = tu_now_ms();
    pskv__view__init(v);
    v->has_epoch = v->has_heartbeat_ms = v->has_servers = v->has_workers = 1;
    v->epoch = S.epoch;
    v->heartbeat_ms = (uint32_t)S.heartbeat_ms;
    v->servers = (uint32_t)S.nservers;
    v->workers = (uint32_t)S.nworkers;
    v->has_partitions = v->has_replicas = v->has_lease_ms = v->has_vnodes = v->has_lost = 1;
    v->partitions = S.nparts;
    v->replicas = S.replicas;
    v->lease_ms = (uint32_t)S.lease_ms;
    v->vnodes = S.vnodes;
    v->lost = S.lost;
    if (S.chains) {
        v->n_chains = (size_t)S.nparts * S.replicas;
        v->chains = S.chains;
    }
    if (status) {
        static const char *const js[] = {"waiting", "running", "stopping"};
        v->state = (char *)js[S.state];
    }
    v->n_nodes = (size_t)S.nnodes;
    v->nodes = ptrs;
    for (int i = 0; i < S.nnodes; i++) {
        node *n = &S.nodes[i];
        Pskv__Node *p = &nodes[i];
        pskv__node__init(p);
        ptrs[i] = p;
        p->has_id = p->has_role = p->has_rank = p->has_port = p->has_pid = p->has_alive = 1;
        p->id = n->id;
        p->role = n->role;
        p->rank = n->rank;
        p->host = n->host;
        p->port = (uint32_t)n->port;
        p->pid = n->pid;
        p->alive = !n->dead;
        if (n->role == PSKV__ROLE__SERVER && S.chains) {
            p->has_heads = p->has_holds = 1;
            p->heads = n->heads;
            p->holds = n->holds;
        }
        p->state = (char *)state_name(n); /* servers take finished and dead workers out
                                             of the clock set */
        p->has_clock = n->role == PSKV__ROLE__WORKER;
        p->clock = n->clock;
        p->has_dropped = n->role == PSKV__ROLE__SERVER;
        p->dropped = n->dropped;
        if (status) {
            p->has_heartbeat_age_ms = 1;
            p->heartbeat_age_ms = now - n->last_hb_ms;
        }
    }
}

/* Sends the current view to `only`, or (NULL) to every node that still takes part. */
static void send_view_msg(node *only)
{
    Pskv__Node *nodes = calloc((size_t)S.nnodes, sizeof *nodes);
    Pskv__Node **ptrs = calloc((size_t)S.nnodes, sizeof *ptrs);
    if (!nodes || !ptrs) {
        LOG_E("out of memory publishing the view");
        exit(1);
    }
    Pskv__View v;
    fill_view(&v, nodes, ptrs, 0);
    Pskv__Meta m;
    meta_base(&m, PSKV__MSG_TYPE__VIEW);
    m.view = &v;
    for (int i = 0; i < S.nnodes; i++)
        if (only ? &S.nodes[i] == only : S.nodes[i].state != NODE_FINISHED)
            send_to(&S.nodes[i], &m);
    free(nodes);
    free(ptrs);
}

/* Publishes the view with a new epoch to every node that still takes part. */
static void send_view(void)
{
    S.epoch++;
    send_view_msg(NULL);
}

static void send_view_to(node *n) { send_view_msg(n); }

/* (Re)places the partitions on the live servers (ring.h owns how): the first
 * time from scratch, later keeping each chain's survivors in front so that only
 * the chains of a dead server change. */
static void place_partitions(void)
{
    uint32_t live[4096];
    size_t ns = 0;
    for (int i = 0; i < S.nnodes; i++)
        if (S.nodes[i].role == PSKV__ROLE__SERVER && !S.nodes[i].dead)
            live[ns++] = S.nodes[i].id;
    size_t cells = (size_t)S.nparts * S.replicas;
    uint32_t *next = calloc(cells, sizeof *next);
    if (!next || ring_chains(next, S.nparts, S.replicas, live, ns, S.vnodes, S.chains) < 0) {
        LOG_E("out of memory placing %u partitions", S.nparts);
        exit(1);
    }
    free(S.chains);
    S.chains = next;
    S.lost = 0;
    for (int i = 0; i < S.nnodes; i++)
        S.nodes[i].heads = S.nodes[i].holds = 0;
    for (uint32_t p = 0; p < S.nparts; p++) {
        const uint32_t *c = &S.chains[(size_t)p * S.replicas];
        if (!c[0]) {
            S.lost++;
            continue;
        }
        for (uint32_t j = 0; j < S.replicas && c[j]; j++) {
            node *n = find_node(c[j]);
            n->holds++;
            n->heads += j == 0;
        }
    }
}

static void publish_view(void)
{
    place_partitions();
    S.state = JOB_RUNNING;
    for (int i = 0; i < S.nnodes; i++)
        S.nodes[i].state = NODE_ACTIVE;
    send_view();
    LOG_I("cluster complete: %d servers, %d workers; view epoch %llu published", S.nservers,
          S.nworkers, (unsigned long long)S.epoch);
}

static void refuse(wire_msg *msg, int code, const char *reason)
{
    LOG_W("refused %s from %s: %s", wire_type_name((int)msg->meta->type), msg->peer, reason);
    wire_send_error(S.sock, &msg->rid, msg->meta, S.job_id, 0, code, reason);
}

static void ack_register(node *n)
{
    Pskv__Meta m;
    Pskv__View v;
    meta_base(&m, PSKV__MSG_TYPE__REGISTER_ACK);
    m.has_rank = 1;
    m.rank = n->rank;
    m.has_nonce = 1;
    m.nonce = n->nonce;
    m.has_request_id = 1;
    m.request_id = n->id; /* the node id assigned */
    pskv__view__init(&v);
    v.has_heartbeat_ms = 1;
    v.heartbeat_ms = (uint32_t)S.heartbeat_ms;
    m.view = &v;
    send_to(n, &m);
}

static void on_register(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    char why[400];
    for (int i = 0; i < S.nnodes; i++) {
        if (S.nodes[i].nonce == r->nonce && r->has_nonce) { /* a re-sent registration */
            ack_register(&S.nodes[i]);
            return;
        }
    }
    if (r->role != PSKV__ROLE__SERVER && r->role != PSKV__ROLE__WORKER) {
        refuse(msg, PSKV_EPROTO, "REGISTER with a role other than server or worker");
        return;
    }
    if (!r->host || !*r->host || strlen(r->host) >= sizeof S.nodes[0].host) {
        refuse(msg, PSKV_EPROTO, "REGISTER without a valid advertised host");
        return;
    }
    if (net_is_loopback(r->host) && strcmp(msg->peer, "?") && !net_is_loopback(msg->peer)) {
        snprintf(why, sizeof why,
                 "the node advertises the loopback address %s but connects from %s: other "
                 "hosts could not reach it (give it --advertise ADDR or --interface NAME)",
                 r->host, msg->peer);
        refuse(msg, PSKV_EREFUSED, why);
        return;
    }
    if (S.state != JOB_WAITING) {
        refuse(msg, PSKV_EREFUSED, "the cluster is complete; no more nodes can join this job");
        return;
    }
    int rank = -1;
    if (r->role == PSKV__ROLE__SERVER) {
        if (count_role(PSKV__ROLE__SERVER) >= S.nservers) {
            snprintf(why, sizeof why, "cluster full: %d servers already registered", S.nservers);
            refuse(msg, PSKV_EREFUSED, why);
            return;
        }
        rank = count_role(PSKV__ROLE__SERVER);
    } else {
        int want = r->has_rank ? r->rank : -1;
        if (want >= S.nworkers) {
            snprintf(why, sizeof why, "rank %d out of range 0..%d", want, S.nworkers - 1);
            refuse(msg, PSKV_EREFUSED, why);
            return;
        }
        for (int cand = want >= 0 ? want : 0; cand < S.nworkers && rank < 0; cand++) {
            int taken = 0;
            for (int i = 0; i < S.nnodes; i++)
                if (S.nodes[i].role == PSKV__ROLE__WORKER && S.nodes[i].rank == cand)
                    taken = (int)S.nodes[i].id;
            if (!taken) {
                rank = cand;
            } else if (want >= 0) {
                snprintf(why, sizeof why, "rank %d is taken by node %d", want, taken);
                refuse(msg, PSKV_EREFUSED, why);
                return;
            }
        }
        if (rank < 0) {
            snprintf(why, sizeof why, "cluster full: %d workers already registered", S.nworkers);
            refuse(msg, PSKV_EREFUSED, why);
            return;
        }
    }
    if (S.nnodes == S.cap) {
        int cap = S.cap ? S.cap * 2 : 16;
        node *grown = realloc(S.nodes, (size_t)cap * sizeof *grown);
        if (!grown) {
            refuse(msg, PSKV_ENOMEM, "scheduler out of memory");
            return;
        }
        S.nodes = grown;
        S.cap = cap;
    }
    node *n = &S.nodes[S.nnodes++];
    memset(n, 0, sizeof *n);
    n->id = (uint32_t)S.nnodes; /* ids start at 1; 0 is the scheduler */
    n->role = (int)r->role;
    n->rank = rank;
    snprintf(n->host, sizeof n->host, "%s", r->host);
    n->port = (int)r->port;
    n->pid = r->pid;
    n->nonce = r->nonce;
    n->ridlen = zmq_msg_size(&msg->rid);
    if (n->ridlen > sizeof n->rid)
        n->ridlen = sizeof n->rid;
    memcpy(n->rid, zmq_msg_data(&msg->rid), n->ridlen);
    n->last_hb_ms = tu_now_ms();
    n->state = NODE_JOINED;
    LOG_I("%s registered: node %u rank %d at %s:%d pid %u (%d/%d servers, %d/%d workers)",
          role_name(n->role), n->id, n->rank, n->host, n->port, n->pid,
          count_role(PSKV__ROLE__SERVER), S.nservers, count_role(PSKV__ROLE__WORKER),
          S.nworkers);
    ack_register(n);
    if (count_role(PSKV__ROLE__SERVER) == S.nservers &&
        count_role(PSKV__ROLE__WORKER) == S.nworkers)
        publish_view();
}

static int worker_counts(const node *n)
{
    return n->role == PSKV__ROLE__WORKER && n->state != NODE_FINISHED && !n->dead;
}

/* Releases barriers every counting worker has reached. */
static void check_barriers(void)
{
    for (;;) {
        uint64_t next = S.barrier_done + 1;
        int waiting = 0, all = 1;
        for (int i = 0; i < S.nnodes; i++) {
            node *n = &S.nodes[i];
            if (!worker_counts(n))
                continue;
            if (n->barrier >= next)
                waiting++;
            else
                all = 0;
        }
        if (!all || waiting == 0)
            return;
        S.barrier_done = next;
        Pskv__Meta m;
        meta_base(&m, PSKV__MSG_TYPE__BARRIER_DONE);
        m.has_seq = 1;
        m.seq = next;
        for (int i = 0; i < S.nnodes; i++)
            if (S.nodes[i].role == PSKV__ROLE__WORKER && S.nodes[i].barrier >= next)
                send_to(&S.nodes[i], &m);
        LOG_D("barrier %llu released (%d workers)", (unsigned long long)next, waiting);
    }
}

static void begin_stop(void)
{
    if (S.state == JOB_STOPPING)
        return;
    S.state = JOB_STOPPING;
    S.stop_deadline_ms = tu_now_ms() + 5000;
    Pskv__Meta m;
    meta_base(&m, PSKV__MSG_TYPE__STOP);
    for (int i = 0; i < S.nnodes; i++)
        if (S.nodes[i].role == PSKV__ROLE__SERVER)
            send_to(&S.nodes[i], &m);
    LOG_I("every worker is done; stopping the servers");
}

static void check_end(void)
{
    if (S.state != JOB_RUNNING)
        return;
    for (int i = 0; i < S.nnodes; i++)
        if (worker_counts(&S.nodes[i]))
            return;
    begin_stop();
}

static node *sender_node(wire_msg *msg)
{
    node *n = msg->meta->has_sender ? find_node(msg->meta->sender) : NULL;
    if (!n)
        refuse(msg, PSKV_EPROTO, "sender is not a registered node");
    return n;
}

static void on_status(wire_msg *msg)
{
    Pskv__Node *nodes = calloc((size_t)S.nnodes + 1, sizeof *nodes);
    Pskv__Node **ptrs = calloc((size_t)S.nnodes + 1, sizeof *ptrs);
    if (!nodes || !ptrs) {
        free(nodes);
        free(ptrs);
        refuse(msg, PSKV_ENOMEM, "scheduler out of memory");
        return;
    }
    Pskv__View v;
    fill_view(&v, nodes, ptrs, 1);
    Pskv__Meta m;
    meta_base(&m, PSKV__MSG_TYPE__STATUS_REPLY);
    m.view = &v;
    if (msg->meta->has_request_id) {
        m.has_request_id = 1;
        m.request_id = msg->meta->request_id;
    }
    wire_send(S.sock, &msg->rid, &m, NULL, NULL);
    free(nodes);
    free(ptrs);
}

static void handle(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    if (r->has_job_id && r->job_id != 0 && r->job_id != S.job_id) {
        char why[160];
        snprintf(why, sizeof why, "job id %llu is not this job's (%llu)",
                 (unsigned long long)r->job_id, (unsigned long long)S.job_id);
        refuse(msg, PSKV_EJOB, why);
        return;
    }
    node *n;
    switch (r->type) {
    case PSKV__MSG_TYPE__REGISTER:
        on_register(msg);
        break;
    case PSKV__MSG_TYPE__HEARTBEAT:
        /* no reply; an unknown sender is logged but not answered */
        if ((n = r->has_sender ? find_node(r->sender) : NULL)) {
            if (n->dead && n->role == PSKV__ROLE__SERVER) {
                /* replaced: its partitions have new owners; it must learn so and
                 * serve nothing (the view says it is dead) */
                LOG_W("heartbeat from server node %u, which was declared dead and replaced",
                      n->id);
                if (S.state == JOB_RUNNING)
                    send_view_to(n);
                break;
            }
            n->last_hb_ms = tu_now_ms();
            if (r->has_clock)
                n->clock = r->clock;
            if (r->has_dropped)
                n->dropped = r->dropped;
            if (n->role == PSKV__ROLE__SERVER) { /* renews its lease */
                Pskv__Meta a;
                meta_base(&a, PSKV__MSG_TYPE__HEARTBEAT_ACK);
                a.has_request_id = r->has_request_id;
                a.request_id = r->request_id;
                wire_send(S.sock, &msg->rid, &a, NULL, NULL);
            }
            if (n->dead) {
                n->dead = 0;
                LOG_I("node %u (%s) is alive again", n->id, role_name(n->role));
                if (S.state == JOB_RUNNING)
                    send_view(); /* back in the clock set */
            }
        } else {
            LOG_W("heartbeat from unknown node %u at %s", r->sender, msg->peer);
        }
        break;
    case PSKV__MSG_TYPE__BARRIER:
        if (!(n = sender_node(msg)))
            break;
        if (n->role != PSKV__ROLE__WORKER || !r->has_seq) {
            refuse(msg, PSKV_EPROTO, "BARRIER from a non-worker or without seq");
            break;
        }
        if (r->seq > n->barrier)
            n->barrier = r->seq;
        if (r->seq <= S.barrier_done) { /* a re-sent request for a released barrier */
            Pskv__Meta m;
            meta_base(&m, PSKV__MSG_TYPE__BARRIER_DONE);
            m.has_seq = 1;
            m.seq = r->seq;
            send_to(n, &m);
        }
        check_barriers();
        break;
    case PSKV__MSG_TYPE__FINISH: {
        if (!(n = sender_node(msg)))
            break;
        if (n->state != NODE_FINISHED)
            LOG_I("worker rank %d (node %u) finished", n->rank, n->id);
        int was = n->state;
        n->state = NODE_FINISHED;
        Pskv__Meta m;
        meta_base(&m, PSKV__MSG_TYPE__FINISH_ACK);
        send_to(n, &m);
        check_barriers();
        check_end();
        if (was != NODE_FINISHED && S.state == JOB_RUNNING)
            send_view(); /* out of the clock set: nobody waits for it */
        break;
    }
    case PSKV__MSG_TYPE__STOP_ACK:
        if ((n = sender_node(msg)))
            n->state = NODE_FINISHED;
        break;
    case PSKV__MSG_TYPE__STATUS:
        on_status(msg);
        break;
    default:
        refuse(msg, PSKV_EPROTO, "message type not served by the scheduler");
    }
}

static void tick(void)
{
    int64_t now = tu_now_ms();
    for (int i = 0; i < S.nnodes; i++) {
        node *n = &S.nodes[i];
        if (n->dead || n->state == NODE_FINISHED || now - n->last_hb_ms <= S.dead_after_ms)
            continue;
        n->dead = 1;
        LOG_W("node %u (%s rank %d at %s:%d) is silent for %lld ms: marked dead", n->id,
              role_name(n->role), n->rank, n->host, n->port, (long long)(now - n->last_hb_ms));
        check_barriers();
        check_end();
        if (S.state == JOB_RUNNING && n->role == PSKV__ROLE__SERVER) {
            int64_t t0 = tu_now_us();
            place_partitions();
            send_view();
            LOG_W("server node %u replaced: view epoch %llu published %.1f ms after it was "
                  "declared dead; %u partitions lost (every replica dead)", n->id,
                  (unsigned long long)S.epoch, (double)(tu_now_us() - t0) / 1e3, S.lost);
        } else if (S.state == JOB_RUNNING && n->role == PSKV__ROLE__WORKER) {
            send_view(); /* out of the clock set */
        }
    }
    if (S.state == JOB_WAITING && now - S.started_ms > (int64_t)(cfg_double(S.cfg, "join-timeout") * 1000)) {
        LOG_E("only %d of %d servers and %d of %d workers joined within %.0f s; giving up",
              count_role(PSKV__ROLE__SERVER), S.nservers, count_role(PSKV__ROLE__WORKER),
              S.nworkers, cfg_double(S.cfg, "join-timeout"));
        exit(1);
    }
}

static int servers_stopped(void)
{
    for (int i = 0; i < S.nnodes; i++)
        if (S.nodes[i].role == PSKV__ROLE__SERVER && S.nodes[i].state != NODE_FINISHED &&
            !S.nodes[i].dead)
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    S.cfg = config;
    int rc = cfg_start(config, "scheduler",
                       "pskv-scheduler [--port P] --servers S --workers W [flags]", argc, argv,
                       NULL);
    if (rc >= 0)
        return rc;
    log_set_node(0);
    S.nservers = (int)cfg_int(config, "servers");
    S.nworkers = (int)cfg_int(config, "workers");
    S.heartbeat_ms = (int)cfg_int(config, "heartbeat-ms");
    S.dead_after_ms = (int)cfg_int(config, "dead-after-ms");
    S.replicas = (uint32_t)cfg_int(config, "replicas");
    S.nparts = (uint32_t)cfg_int(config, "partitions");
    S.vnodes = (uint32_t)cfg_int(config, "vnodes");
    /* a lease counts from the send time of an acknowledged heartbeat and must end
     * before the scheduler could declare the server dead */
    S.lease_ms = S.dead_after_ms - 2 * S.heartbeat_ms;
    if (S.lease_ms < S.heartbeat_ms) {
        fprintf(stderr,
                "pskv-scheduler: --dead-after-ms %d must be at least 3 x --heartbeat-ms %d "
                "(a server's lease is dead-after minus two heartbeats and must outlast one)\n",
                S.dead_after_ms, S.heartbeat_ms);
        return 2;
    }
    if ((int)S.replicas > S.nservers) {
        fprintf(stderr, "pskv-scheduler: --replicas %u needs at least as many --servers (%d)\n",
                S.replicas, S.nservers);
        return 2;
    }
    S.job_id = (uint64_t)cfg_int(config, "job-id");
    while (S.job_id == 0 && getrandom(&S.job_id, sizeof S.job_id, 0) != sizeof S.job_id)
        ;
    S.job_id &= 0x7fffffffffffffffULL; /* printable as a signed flag value too */
    if (S.job_id == 0)
        S.job_id = 1;
    S.started_ms = tu_now_ms();

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);

    S.ctx = zmq_ctx_new();
    S.sock = net_socket(S.ctx, ZMQ_ROUTER, cfg_int(config, "max-message"), 0);
    char why[512];
    int port = net_bind(S.sock, cfg_str(config, "bind"), (int)cfg_int(config, "port"), why,
                        sizeof why);
    if (port < 0) {
        LOG_E("%s", why);
        return 1;
    }
    cfg_log(config);
    LOG_I("listening on port %d; job %llu; waiting for %d servers and %d workers", port,
          (unsigned long long)S.job_id, S.nservers, S.nworkers);
    printf("pskv-scheduler listening on port %d\n", port);
    fflush(stdout);

    int64_t next_tick = tu_now_ms();
    while (!stop_signal) {
        zmq_pollitem_t item = {S.sock, 0, ZMQ_POLLIN, 0};
        long wait = (long)(next_tick - tu_now_ms());
        if (wait < 0)
            wait = 0;
        if (zmq_poll(&item, 1, wait) < 0 && errno != EINTR) {
            LOG_E("poll failed: %s", zmq_strerror(errno));
            break;
        }
        for (int budget = 0; budget < 1000; budget++) {
            wire_msg msg;
            rc = wire_recv(S.sock, 1, &msg, why, sizeof why);
            if (rc == -PSKV_ETIMEDOUT) {
                wire_msg_close(&msg);
                break;
            }
            if (rc < 0) {
                LOG_W("dropped message from %s: %s", msg.peer, why);
                if (msg.has_rid)
                    wire_send_error(S.sock, &msg.rid, msg.meta, S.job_id, 0, rc, why);
            } else {
                handle(&msg);
            }
            wire_msg_close(&msg);
        }
        if (tu_now_ms() >= next_tick) {
            tick();
            next_tick = tu_now_ms() + (S.heartbeat_ms < 100 ? S.heartbeat_ms : 100);
        }
        if (S.state == JOB_STOPPING &&
            (servers_stopped() || tu_now_ms() >= S.stop_deadline_ms)) {
            if (!servers_stopped())
                LOG_W("not every server acknowledged STOP within 5 s; exiting anyway");
            break;
        }
    }
    if (stop_signal)
        LOG_I("terminated by signal %d", (int)stop_signal);
    else
        LOG_I("job %llu done", (unsigned long long)S.job_id);
    zmq_close(S.sock);
    zmq_ctx_term(S.ctx);
    free(S.nodes);
    free(S.chains);
    return 0;
}
