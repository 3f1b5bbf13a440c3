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
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "config.h"
#include "log.h"
#include "manifest.h"
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
    int replaced; /* a dead worker whose rank a new node took: never alive again */
    enum node_state state;
    uint64_t barrier; /* highest barrier entered */
    uint32_t heads, holds; /* servers: partitions headed, replicas held */
    int64_t clock;    /* workers: clocks finished, from heartbeats */
    uint64_t dropped; /* servers: late pushes dropped, from heartbeats */
    int64_t progress[3];  /* workers: epoch, step, data position, from heartbeats */
    uint64_t ckpt_acked;  /* servers: the last checkpoint written */
    char **ckpts;         /* servers: valid checkpoint files they hold, "JOB:SEQ:NODE" */
    size_t nckpts;
} node;

typedef struct requester { /* who asked for the checkpoint in progress */
    unsigned char rid[256];
    size_t ridlen;
    uint64_t request_id;
} requester;

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
    const char *data_dir;
    manifest man;       /* complete checkpoints */
    uint64_t ckpt_seq;  /* the last checkpoint started */
    int ckpt_busy;      /* one in progress */
    int64_t ckpt_started_ms, next_ckpt_ms;
    requester *reqs;
    size_t nreqs;
    int resume;
    manifest_entry *resume_from; /* the checkpoint a resumed job starts from */
    uint32_t *prev_chains;       /* its chains mapped to this job's servers */
    uint32_t *resume_pairs;      /* (new node, old node) pairs */
    uint32_t *join_prev;         /* while the view that lets a server join is built: the
                                    chains before it, where its partitions come from */
    size_t npairs;
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
    {"data-dir", CFG_STR, "", "PSKV_SCHEDULER_DATA_DIR", 0, 0, NULL,
     "directory of the checkpoint manifest (empty = no checkpoints)", 0, 0, NULL, NULL},
    {"checkpoint-every", CFG_DOUBLE, "0", "PSKV_SCHEDULER_CHECKPOINT_EVERY", 0, 1e7, "s",
     "take a checkpoint this often while the job runs (0 = only on request)", 0, 0, NULL,
     NULL},
    {"resume", CFG_BOOL, "false", "PSKV_SCHEDULER_RESUME", 0, 0, NULL,
     "continue the job of the newest complete checkpoint in --data-dir", 0, 0, NULL, NULL},
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
    if (S.resume_from) {
        v->has_resume_seq = 1;
        v->resume_seq = S.resume_from->seq;
        v->n_resume_from = 2 * S.npairs;
        v->resume_from = S.resume_pairs;
        v->n_prev_chains = (size_t)S.nparts * S.replicas;
        v->prev_chains = S.prev_chains;
    }
    if (S.join_prev) { /* a joining server's first view: where its partitions come from */
        v->n_prev_chains = (size_t)S.nparts * S.replicas;
        v->prev_chains = S.join_prev;
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
        for (size_t k = 0; S.resume_from && n->role == PSKV__ROLE__WORKER &&
                           k < S.resume_from->nworkers; k++) {
            const manifest_progress *g = &S.resume_from->workers[k];
            if (g->rank != n->rank)
                continue;
            /* a resumed job: the worker continues where the checkpoint left it */
            p->has_resume_epoch = p->has_resume_step = p->has_resume_pos = 1;
            p->resume_epoch = g->epoch;
            p->resume_step = g->step;
            p->resume_pos = g->pos;
        }
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

static void count_holds(void);

/* Live server ids into out (room for 4096); returns how many. */
static size_t live_servers(uint32_t *out)
{
    size_t ns = 0;
    for (int i = 0; i < S.nnodes && ns < 4096; i++)
        if (S.nodes[i].role == PSKV__ROLE__SERVER && !S.nodes[i].dead)
            out[ns++] = S.nodes[i].id;
    return ns;
}

/* (Re)places the partitions on the live servers (ring.h owns how): the first
 * time from scratch, later keeping each chain's survivors in front so that only
 * the chains of a dead server change. */
static void place_partitions(void)
{
    uint32_t live[4096];
    size_t ns = live_servers(live);
    size_t cells = (size_t)S.nparts * S.replicas;
    uint32_t *next = calloc(cells, sizeof *next);
    if (!next || ring_chains(next, S.nparts, S.replicas, live, ns, S.vnodes, S.chains) < 0) {
        LOG_E("out of memory placing %u partitions", S.nparts);
        exit(1);
    }
    free(S.chains);
    S.chains = next;
    count_holds();
}

/* Partitions lost, and headed and held by each server, from S.chains. */
static void count_holds(void)
{
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

/* 1 when server n reported a valid file of checkpoint e written by node old. */
static int has_file(const node *n, const manifest_entry *e, uint32_t old)
{
    char want[96];
    snprintf(want, sizeof want, "%llu:%llu:%u", (unsigned long long)e->job,
             (unsigned long long)e->seq, old);
    for (size_t i = 0; i < n->nckpts; i++)
        if (!strcmp(n->ckpts[i], want))
            return 1;
    return 0;
}

/* A resumed job: the newest complete checkpoint of which every partition has a
 * valid copy on a registered server. Its chains, mapped to the new servers, are
 * where the data is; place_partitions fills the chains up from there. */
static void plan_resume(void)
{
    for (size_t k = S.man.n; k-- > 0;) {
        manifest_entry *e = &S.man.e[k];
        if (e->job != S.job_id)
            continue;
        size_t cells = (size_t)e->partitions * e->replicas;
        uint32_t *mapped = calloc(cells, sizeof *mapped);
        uint32_t *pairs = calloc(2 * (size_t)S.nnodes, sizeof *pairs);
        if (!mapped || !pairs) {
            LOG_E("out of memory planning the resume");
            exit(1);
        }
        size_t npairs = 0;
        uint32_t missing_p = UINT32_MAX, missing_old = 0;
        for (uint32_t p = 0; p < e->partitions; p++) {
            uint32_t at = 0;
            for (uint32_t j = 0; j < e->replicas; j++) {
                uint32_t old = e->chains[(size_t)p * e->replicas + j];
                if (!old)
                    continue;
                node *holder = NULL;
                for (int i = 0; i < S.nnodes && !holder; i++)
                    if (S.nodes[i].role == PSKV__ROLE__SERVER && !S.nodes[i].dead &&
                        has_file(&S.nodes[i], e, old)) {
                        /* one old node per new one */
                        int taken = 0;
                        for (size_t q = 0; q < npairs; q++)
                            if (pairs[2 * q] == S.nodes[i].id && pairs[2 * q + 1] != old)
                                taken = 1;
                        if (!taken)
                            holder = &S.nodes[i];
                    }
                if (!holder)
                    continue;
                int known = 0;
                for (size_t q = 0; q < npairs; q++)
                    known |= pairs[2 * q] == holder->id;
                if (!known) {
                    pairs[2 * npairs] = holder->id;
                    pairs[2 * npairs + 1] = old;
                    npairs++;
                }
                mapped[(size_t)p * e->replicas + at++] = holder->id;
            }
            if (!at && missing_p == UINT32_MAX) {
                missing_p = p;
                missing_old = e->chains[(size_t)p * e->replicas];
            }
        }
        if (missing_p != UINT32_MAX) {
            LOG_W("checkpoint %llu cannot be used: partition %u (ring positions %016llx..%016llx) "
                  "has no valid copy: the file of its server node %u is missing or was refused",
                  (unsigned long long)e->seq, missing_p,
                  (unsigned long long)ring_partition_begin(missing_p, e->partitions),
                  (unsigned long long)ring_partition_end(missing_p, e->partitions), missing_old);
            free(mapped);
            free(pairs);
            continue;
        }
        S.resume_from = e;
        S.nparts = e->partitions;
        S.replicas = e->replicas;
        S.vnodes = e->vnodes;
        S.prev_chains = mapped;
        S.resume_pairs = pairs;
        S.npairs = npairs;
        S.chains = malloc(cells * sizeof *S.chains);
        if (!S.chains) {
            LOG_E("out of memory planning the resume");
            exit(1);
        }
        memcpy(S.chains, mapped, cells * sizeof *S.chains);
        LOG_I("resuming job %llu from checkpoint %llu (%u partitions, %u replicas)",
              (unsigned long long)S.job_id, (unsigned long long)e->seq, S.nparts, S.replicas);
        return;
    }
    LOG_E("no complete checkpoint of job %llu in %s/manifest has a valid copy of every "
          "partition on the registered servers; cannot resume", (unsigned long long)S.job_id,
          S.data_dir);
    exit(1);
}

static void publish_view(void)
{
    if (S.resume)
        plan_resume();
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
    wire_send_error(S.sock, &msg->rid, msg->meta, S.job_id, 0, code, reason, 0);
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
    m.has_seq = 1;
    m.seq = S.barrier_done; /* barriers already passed: a rejoining worker counts on */
    pskv__view__init(&v);
    v.has_heartbeat_ms = 1;
    v.heartbeat_ms = (uint32_t)S.heartbeat_ms;
    m.view = &v;
    send_to(n, &m);
}

/* 1 when the node of msg may join the running job; else refuses it. A worker
 * takes the next rank (or a dead one, handled by the caller); a server takes the
 * partitions its ring tokens win. */
static int join_allowed(wire_msg *msg)
{
    Pskv__Meta *r = msg->meta;
    char why[300];
    if (S.state != JOB_RUNNING) {
        refuse(msg, PSKV_EREFUSED, "the job is stopping; no node can join it");
        return 0;
    }
    if (r->role == PSKV__ROLE__WORKER) {
        if (r->has_rank && r->rank >= 0 && r->rank != S.nworkers) {
            snprintf(why, sizeof why, "rank %d is not free: a worker joining the running job "
                     "takes the next rank (%d) or a dead worker's", r->rank, S.nworkers);
            refuse(msg, PSKV_EREFUSED, why);
            return 0;
        }
        if (S.nworkers >= 65536) {
            refuse(msg, PSKV_EREFUSED, "cluster full: 65536 workers");
            return 0;
        }
        return 1;
    }
    if (count_role(PSKV__ROLE__SERVER) >= 4096) {
        refuse(msg, PSKV_EREFUSED, "cluster full: 4096 servers");
        return 0;
    }
    return 1;
}

/* Node n (just registered) joins the running job: a new view takes it in. */
static void join(node *n)
{
    n->state = NODE_ACTIVE;
    ack_register(n);
    if (n->role == PSKV__ROLE__WORKER) {
        S.nworkers++;
        n->barrier = S.barrier_done; /* it starts after the barriers already passed */
        LOG_I("worker node %u joined the running job as rank %d at %s pid %u (%d workers)",
              n->id, n->rank, n->host, n->pid, S.nworkers);
        send_view(); /* in the clock set, at the slowest live worker's clock */
        return;
    }
    S.nservers++;
    size_t cells = (size_t)S.nparts * S.replicas;
    uint32_t live[4096];
    size_t ns = live_servers(live);
    S.join_prev = malloc(cells * sizeof *S.join_prev);
    if (!S.join_prev) {
        LOG_E("out of memory placing a joining server");
        exit(1);
    }
    memcpy(S.join_prev, S.chains, cells * sizeof *S.join_prev);
    int moved = ring_join(S.chains, S.nparts, S.replicas, live, ns, S.vnodes, n->id);
    if (moved < 0) {
        LOG_E("out of memory placing a joining server");
        exit(1);
    }
    count_holds();
    send_view(); /* the joiner's first view: with the chains before it joined */
    free(S.join_prev);
    S.join_prev = NULL;
    LOG_I("server node %u joined the running job at %s:%d pid %u: view epoch %llu moves %d "
          "partitions to it (heads %u, holds %u)", n->id, n->host, n->port, n->pid,
          (unsigned long long)S.epoch, moved, n->heads, n->holds);
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
    node *replaced = NULL; /* a dead worker whose rank the new one takes over */
    if (S.state != JOB_WAITING) {
        for (int i = 0; S.state == JOB_RUNNING && r->role == PSKV__ROLE__WORKER && r->has_rank &&
                        r->rank >= 0 && i < S.nnodes; i++) {
            node *o = &S.nodes[i];
            if (o->role != PSKV__ROLE__WORKER || o->rank != r->rank || o->replaced)
                continue;
            if (o->dead) {
                replaced = o;
            } else {
                snprintf(why, sizeof why, "rank %d is held by live node %u (%s)", r->rank, o->id,
                         state_name(o));
                refuse(msg, PSKV_EREFUSED, why);
                return;
            }
        }
        if (!replaced && !join_allowed(msg))
            return;
    }
    int rank = -1, joining = S.state == JOB_RUNNING && !replaced;
    if (replaced) {
        rank = replaced->rank;
    } else if (joining) {
        rank = r->role == PSKV__ROLE__SERVER ? count_role(PSKV__ROLE__SERVER) : S.nworkers;
    } else if (r->role == PSKV__ROLE__SERVER) {
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
    n->state = NODE_JOINED;
    if (replaced) {
        /* the node array may have moved: find the old one again by rank */
        for (int i = 0; i < S.nnodes - 1; i++)
            if (S.nodes[i].role == PSKV__ROLE__WORKER && S.nodes[i].rank == rank &&
                S.nodes[i].dead && !S.nodes[i].replaced)
                S.nodes[i].replaced = 1;
        n->state = NODE_ACTIVE;
        n->barrier = S.barrier_done; /* it starts after the barriers already passed */
        LOG_I("worker rank %d rejoined as node %u at %s pid %u", rank, n->id, n->host, n->pid);
        ack_register(n);
        send_view(); /* back in the clock set, at the slowest live worker's clock */
        return;
    }
    if (joining) {
        join(n);
        return;
    }
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

/* ---- checkpoints ------------------------------------------------------------ */

static void answer_requesters(int code, const char *why)
{
    Pskv__Meta m;
    for (size_t i = 0; i < S.nreqs; i++) {
        meta_base(&m, code ? PSKV__MSG_TYPE__ERROR : PSKV__MSG_TYPE__CHECKPOINT_ACK);
        m.has_seq = 1;
        m.seq = S.ckpt_seq;
        m.has_request_id = 1;
        m.request_id = S.reqs[i].request_id;
        if (code) {
            m.has_error_code = 1;
            m.error_code = code;
            m.error = (char *)why;
        }
        zmq_msg_t rid;
        zmq_msg_init_size(&rid, S.reqs[i].ridlen);
        memcpy(zmq_msg_data(&rid), S.reqs[i].rid, S.reqs[i].ridlen);
        wire_send(S.sock, &rid, &m, NULL, NULL);
        zmq_msg_close(&rid);
    }
    free(S.reqs);
    S.reqs = NULL;
    S.nreqs = 0;
}

static void ckpt_fail(int code, const char *why)
{
    LOG_E("checkpoint %llu failed: %s", (unsigned long long)S.ckpt_seq, why);
    S.ckpt_busy = 0;
    answer_requesters(code, why);
}

/* Every live server wrote checkpoint S.ckpt_seq: the manifest records it. */
static void ckpt_complete(void)
{
    manifest_entry e;
    memset(&e, 0, sizeof e);
    e.seq = S.ckpt_seq;
    e.job = S.job_id;
    e.time = (int64_t)time(NULL);
    e.partitions = S.nparts;
    e.replicas = S.replicas;
    e.vnodes = S.vnodes;
    e.chains = S.chains;
    manifest_progress *g = calloc((size_t)S.nnodes + 1, sizeof *g);
    if (!g) {
        ckpt_fail(PSKV_ENOMEM, "scheduler out of memory");
        return;
    }
    for (int i = 0; i < S.nnodes; i++) {
        node *n = &S.nodes[i];
        if (n->role != PSKV__ROLE__WORKER)
            continue;
        g[e.nworkers].rank = n->rank;
        memcpy(&g[e.nworkers].epoch, n->progress, sizeof n->progress);
        e.nworkers++;
    }
    e.workers = g;
    char why[600];
    int rc = manifest_append(S.data_dir, &S.man, &e, why, sizeof why);
    free(g);
    if (rc < 0) {
        ckpt_fail(-rc, why);
        return;
    }
    LOG_I("checkpoint %llu complete in %lld ms: recorded in %s/manifest",
          (unsigned long long)S.ckpt_seq, (long long)(tu_now_ms() - S.ckpt_started_ms),
          S.data_dir);
    S.ckpt_busy = 0;
    answer_requesters(0, NULL);
}

static void ckpt_check_done(void)
{
    if (!S.ckpt_busy)
        return;
    for (int i = 0; i < S.nnodes; i++) {
        node *n = &S.nodes[i];
        if (n->role == PSKV__ROLE__SERVER && !n->dead && n->state != NODE_FINISHED &&
            n->ckpt_acked != S.ckpt_seq)
            return;
    }
    if (S.lost) {
        ckpt_fail(PSKV_ELOST, "partitions were lost (every replica died): no complete copy");
        return;
    }
    ckpt_complete();
}

/* Starts a checkpoint (requested by msg, or by --checkpoint-every when NULL). */
static void ckpt_start(wire_msg *msg)
{
    const char *no = !*S.data_dir ? "the scheduler has no --data-dir"
                     : S.state != JOB_RUNNING ? "the job is not running"
                                              : NULL;
    if (no) {
        if (msg)
            refuse(msg, PSKV_EINVAL, no);
        return;
    }
    if (msg) {
        requester *g = realloc(S.reqs, (S.nreqs + 1) * sizeof *g);
        if (!g) {
            refuse(msg, PSKV_ENOMEM, "scheduler out of memory");
            return;
        }
        S.reqs = g;
        requester *q = &g[S.nreqs++];
        q->ridlen = zmq_msg_size(&msg->rid) < sizeof q->rid ? zmq_msg_size(&msg->rid) : sizeof q->rid;
        memcpy(q->rid, zmq_msg_data(&msg->rid), q->ridlen);
        q->request_id = msg->meta->request_id;
    }
    if (S.ckpt_busy)
        return; /* answered when the one in progress completes */
    S.ckpt_busy = 1;
    S.ckpt_seq++;
    S.ckpt_started_ms = tu_now_ms();
    Pskv__Meta m;
    meta_base(&m, PSKV__MSG_TYPE__CHECKPOINT);
    m.has_seq = 1;
    m.seq = S.ckpt_seq;
    for (int i = 0; i < S.nnodes; i++)
        if (S.nodes[i].role == PSKV__ROLE__SERVER && !S.nodes[i].dead)
            send_to(&S.nodes[i], &m);
    LOG_I("checkpoint %llu started", (unsigned long long)S.ckpt_seq);
}

/* A worker's progress, from heartbeats and barriers (which travel on different
 * sockets): it only moves forward. */
static void note_progress(node *n, const Pskv__Meta *r)
{
    if (!r->has_progress_step || r->progress_step < n->progress[1])
        return;
    n->progress[0] = r->progress_epoch;
    n->progress[1] = r->progress_step;
    n->progress[2] = r->progress_pos;
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
            if (n->replaced) {
                LOG_W("heartbeat from worker node %u, whose rank %d another node took over",
                      n->id, n->rank);
                break;
            }
            if (n->dead && n->role == PSKV__ROLE__SERVER && S.state != JOB_WAITING) {
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
            note_progress(n, r);
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
        note_progress(n, r);
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
    case PSKV__MSG_TYPE__CHECKPOINT:
        ckpt_start(msg);
        break;
    case PSKV__MSG_TYPE__CHECKPOINT_ACK:
        if ((n = sender_node(msg)) && r->has_seq) {
            n->ckpt_acked = r->seq;
            ckpt_check_done();
        }
        break;
    case PSKV__MSG_TYPE__ERROR:
        if (S.ckpt_busy && r->has_seq && r->seq == S.ckpt_seq && r->has_sender) {
            char why[700];
            snprintf(why, sizeof why, "server node %u: %s", r->sender,
                     r->error ? r->error : pskv_strerror(r->error_code));
            ckpt_fail(r->error_code ? r->error_code : PSKV_EIO, why);
        } else {
            LOG_W("error from %s: %s", msg->peer, r->error ? r->error : "?");
        }
        break;
    default:
        refuse(msg, PSKV_EPROTO, "message type not served by the scheduler");
    }
}

static void tick(void)
{
    int64_t now = tu_now_ms();
    double every = cfg_double(S.cfg, "checkpoint-every");
    if (every > 0 && S.state == JOB_RUNNING && now >= S.next_ckpt_ms) {
        if (S.next_ckpt_ms)
            ckpt_start(NULL);
        S.next_ckpt_ms = now + (int64_t)(every * 1000);
    }
    if (S.ckpt_busy && now - S.ckpt_started_ms > 120000)
        ckpt_fail(PSKV_ETIMEDOUT, "not every server wrote its file within 120 s");
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
            ckpt_check_done();
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
    S.lease_ms = S.dead_after_ms - S.heartbeat_ms;
    if (S.lease_ms < S.heartbeat_ms) {
        fprintf(stderr,
                "pskv-scheduler: --dead-after-ms %d must be at least 2 x --heartbeat-ms %d "
                "(a server's lease is dead-after minus one heartbeat and must outlast one)\n",
                S.dead_after_ms, S.heartbeat_ms);
        return 2;
    }
    if ((int)S.replicas > S.nservers) {
        fprintf(stderr, "pskv-scheduler: --replicas %u needs at least as many --servers (%d)\n",
                S.replicas, S.nservers);
        return 2;
    }
    S.data_dir = cfg_str(config, "data-dir");
    S.resume = (int)cfg_int(config, "resume");
    char mwhy[600];
    if (*S.data_dir && manifest_read(S.data_dir, &S.man, mwhy, sizeof mwhy) < 0) {
        fprintf(stderr, "pskv-scheduler: %s\n", mwhy);
        return 1;
    }
    if (S.resume && (!*S.data_dir || S.man.n == 0)) {
        fprintf(stderr, "pskv-scheduler: --resume needs a --data-dir whose manifest records a "
                "complete checkpoint (%s has none)\n", *S.data_dir ? S.data_dir : "no --data-dir");
        return 2;
    }
    for (size_t i = 0; i < S.man.n; i++)
        if (S.man.e[i].seq > S.ckpt_seq)
            S.ckpt_seq = S.man.e[i].seq; /* numbers keep growing across resumes */
    S.job_id = S.resume ? S.man.e[S.man.n - 1].job : (uint64_t)cfg_int(config, "job-id");
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
                    wire_send_error(S.sock, &msg.rid, msg.meta, S.job_id, 0, rc, why, 0);
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
    for (int i = 0; i < S.nnodes; i++) {
        for (size_t k = 0; k < S.nodes[i].nckpts; k++)
            free(S.nodes[i].ckpts[k]);
        free(S.nodes[i].ckpts);
    }
    free(S.nodes);
    free(S.chains);
    free(S.prev_chains);
    free(S.resume_pairs);
    free(S.reqs);
    manifest_free(&S.man);
    return 0;
}
