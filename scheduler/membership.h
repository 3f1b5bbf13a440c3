/* The scheduler's node table and the job's life: REGISTER (first registration,
 * a new node taking a dead worker's rank, joins into the running job), heartbeats
 * and server leases, lease expiry and deaths, barriers, FINISH and the orderly stop.
 *
 * OWNS   the node table and the job's state, both in `memb`: job id, life, the
 *        expected counts, heartbeat/lease timings, released barriers. Other modules
 *        read `memb`; they write only the per-node fields marked as theirs below.
 *        scheduler_main.c fills the job fields once, before the event loop.
 * THREAD the scheduler's one thread (its event loop); so do all scheduler modules.
 * NEVER  touches the socket (it sends through sched_send / sched_reply /
 *        sched_refuse), never places partitions itself (it tells view.c of a death or
 *        a join and asks for a new view), never names a policy (it publishes node
 *        events, events.h: registering, joined, complete, heard, died, and the
 *        policies subscribe), never waits but in those sends.
 *
 * A server's lease: it heartbeats every heartbeat-ms and each acknowledged
 * heartbeat renews its lease by what the ack grants (detect.h: the silence the
 * scheduler owes it now minus one heartbeat, so it ends before the scheduler can
 * declare the server dead). A node is declared dead by detect.c's detectors: its
 * connection closed and the probe confirmed (memb_declare_dead from the monitor),
 * or silent past its phi time-out (memb_expire); for a server of a running job
 * that means a new placement and a new view. */
#ifndef PSKV_SCHED_MEMBERSHIP_H
#define PSKV_SCHED_MEMBERSHIP_H

#include <stddef.h>
#include <stdint.h>

#include "detect.h"
#include "pskv.pb-c.h"
#include "refuse.h"
#include "wire.h"

enum job_state {
    JOB_WAITING,  /* nodes are registering; status works; no view yet */
    JOB_RUNNING,  /* every server and worker joined; view published, training */
    JOB_STOPPING, /* all workers done (or dead); STOP sent to the servers */
    JOB_FINISHED, /* every server stopped (or the grace ran out); the scheduler
                     lingers (--linger) to refuse late nodes and answer status */
};

enum node_state {
    NODE_JOINED,   /* registered, waiting for the view */
    NODE_ACTIVE,   /* has the view */
    NODE_FINISHED, /* worker: said FINISH; server: acknowledged STOP */
};

/* A server's planned removal (pskvctl drain, drain.c drives it). */
enum node_drain {
    DRAIN_NONE,     /* not being drained */
    DRAIN_HANDING,  /* draining: out of every chain, alive, its partitions being copied to
                       the others; shown "draining" */
    DRAIN_LEFT,     /* drained: the others hold its partitions whole, it was told to exit
                       (STOP, drained); out of the job, shown "left", forgotten later */
};

#define MEMB_MAX_TRAFFIC 32 /* tables per worker whose traffic status shows */

/* A worker's tables' traffic, from its latest heartbeat carrying it, held ready
 * for STATUS_REPLY (ptr[i] = &tt[i], tt[i].name = names[i]). */
typedef struct memb_traffic {
    size_t n;
    Pskv__TableTraffic tt[MEMB_MAX_TRAFFIC];
    Pskv__TableTraffic *ptr[MEMB_MAX_TRAFFIC];
    char names[MEMB_MAX_TRAFFIC][128];
} memb_traffic;

#define MEMB_MAX_NS 16 /* namespaces per server that status shows (lease.h's LEASE_MAX_NS) */

/* A server's namespaces, from its latest heartbeat carrying them, held ready for
 * STATUS_REPLY (ptr[i] = names[i]). */
typedef struct memb_ns {
    size_t n;
    char names[MEMB_MAX_NS][65];
    char *ptr[MEMB_MAX_NS];
    uint64_t bytes[MEMB_MAX_NS], quota[MEMB_MAX_NS];
} memb_ns;

typedef struct memb_node {
    uint32_t id;
    int role;
    int rank; /* workers: 0..W-1; servers: registration order */
    char host[128];
    int port;
    uint32_t pid;
    uint64_t nonce;
    unsigned char rid[256]; /* the routing id it registered with: replies go there */
    size_t ridlen;
    int64_t last_hb_ms;
    int dead; /* declared dead: its connection closed and its port refuses, or silent
                 past its time-out (detect.h) */
    detect_node det; /* detect.c's: heartbeat gaps, connections, why it died */
    int replaced; /* a dead worker whose rank a new node took: never alive again */
    int64_t gone_ms; /* when it left the job for good (a server declared dead in a
                        running job, a worker replaced), else 0: forgotten
                        MEMB_FORGET_MS later */
    enum node_state state;
    uint64_t barrier; /* highest barrier entered */
    uint32_t heads, holds; /* servers: partitions headed, replicas held (view.c's) */
    int64_t clock;    /* workers: clocks finished, from heartbeats */
    uint64_t dropped; /* servers: late pushes dropped, from heartbeats */
    uint64_t pushes, pulls, rss, wait_ns; /* from heartbeats (pskvctl top): servers' pushes
                                            and pulls served, resident memory, workers'
                                            time waiting in libpskv */
    uint32_t ar_waiting; /* workers: 1 + the all-reduce rank waited for (heartbeats), 0 = none */
    int64_t pipe_place; /* --app pipeline workers: d << 32 | k, + 1 (0 = none), heartbeats */
    uint32_t bal_batch; /* --balance batch workers: the batch (0 = none), heartbeats */
    float bal_us;       /* ... and the time per example, us */
    uint32_t stage_layers; /* --balance stages: first << 16 | last + 1 (0 = none), heartbeats */
    float stage_ms;        /* ... and the time per micro-batch, ms */
    uint64_t rows, admitted, not_admitted, evicted, bytes; /* servers: their tables, from
                                                              heartbeats (STATUS_REPLY) */
    int64_t progress[3];  /* workers: epoch, step, data position, from heartbeats */
    uint64_t ckpt_acked;  /* servers: the last checkpoint written (checkpoint.c's) */
    uint64_t ckpt_base, ckpt_bytes; /* servers: its file's chain's full checkpoint, its size */
    char **ckpts;         /* servers: valid checkpoint files they hold, "JOB:SEQ:NODE" */
    size_t nckpts;
    char key[41];         /* the public key it registered with (CURVE), else "" */
    int insecure;         /* it runs with --insecure */
    uint64_t refusals[REFUSE_COUNT]; /* its refusals of peers, from heartbeats */
    struct met_series *lag;  /* workers: its clock-lag metric (sched_metrics.c), or NULL */
    uint64_t whole_epoch; /* servers: the latest view epoch whose placement they hold whole
                             (no copy awaited), from heartbeats */
    enum node_drain drain; /* servers: drain.c's, with the three fields below */
    uint64_t drain_epoch;  /* the view that took its partitions from it */
    uint32_t drain_parts;  /* partitions it held then */
    int64_t drain_ms;      /* when the drain began (DRAIN_HANDING), or when it was last
                              told to exit (DRAIN_LEFT) */
    memb_traffic *traffic; /* workers: their tables' traffic (heartbeats), or NULL; owned */
    memb_ns *ns;           /* servers: their tables' namespaces (heartbeats), or NULL; owned */
    char group[65];        /* workers: their group's name ("" = unnamed; group.h);
                              evaluators: the group they evaluate (--group) */
    uint32_t group_gen;    /* workers: their group's instance (group.c's) */
    char table_ns[65];     /* workers: the namespace their tables live in (REGISTER
                              table_ns; else their group's name) */
    int drop_ns;           /* workers: drop table_ns when the group ends (--drop-namespace) */
    int slot;              /* workers: the rank the servers' views give it, unique over
                              the groups of a service (its clock's index there); a
                              job's workers: their rank */
} memb_node;

typedef struct memb_state {
    uint64_t job_id;
    enum job_state state;
    int nservers, nworkers; /* expected; a node joining the running job adds one; in a
                               service, nworkers is the unnamed group's size */
    int service;           /* --service: the servers outlive the worker groups, until
                              pskvctl shutdown or SIGTERM (group.h) */
    int heartbeat_ms, dead_after_ms, lease_ms;
    double join_timeout_s; /* give up when the cluster is not complete by then */
    int64_t started_ms, stop_deadline_ms;
    double linger_s;       /* stay up this long once the job finished */
    int64_t finished_ms;   /* when it finished (JOB_FINISHED) */
    memb_node *nodes;      /* registration order; ids start at 1 (0 is the scheduler) */
    int nnodes, cap;
    uint32_t last_id;      /* the last id given: ids are never given twice */
    int servers_seen;      /* servers ever registered: the next server's rank */
    uint64_t forgotten;    /* nodes dropped from the table (MEMB_FORGET_MS) */
} memb_state;

/* A node that left the job for good (a server declared dead while the job runs,
 * whose partitions have new owners; a drained server; a dead worker whose rank a
 * new node took) is dropped from the table, and so from every later view and
 * status, this long after it left. Until then views and status show it dead (a
 * drained server: left). Bounds what the scheduler
 * (and every node, through the view) keeps over a long job with many replacements.
 * Nodes treat a server absent from the view as dead. */
#define MEMB_FORGET_MS 30000

extern memb_state memb;

/* "scheduler", "server", "worker" or "control", for logs. */
const char *memb_role_name(int role);

/* The node's state as the view and status show it: dead, joined, active,
 * finished (workers) or stopped (servers), draining or left (a drained server). */
const char *memb_state_name(const memb_node *n);

/* Registered nodes of `role`, dead ones included. */
int memb_count_role(int role);

/* The node with id `id`, or NULL. The pointer lasts until the next registration
 * or memb_expire (the table may move). */
memb_node *memb_find(uint32_t id);

/* The registered node that sent msg (by Meta's sender), or NULL after refusing
 * msg with PSKV_EPROTO. */
memb_node *memb_sender(wire_msg *msg);

/* Appends the node of msg to the table with `rank` (state NODE_JOINED, alive
 * now). Returns it, or NULL after refusing msg when out of memory. The pointer
 * lasts as memb_find's. */
memb_node *memb_add_node(wire_msg *msg, int rank);

/* REGISTER_ACK to node n: its id, rank and the barriers its group passed. */
void memb_ack_register(memb_node *n);

/* Every expected server (and, for a job, every worker of its group) registered:
 * the job starts with the first view. Does nothing otherwise. */
void memb_check_complete(void);

/* The job ends (`why` logged): STOP goes to the servers and the evaluator
 * (JOB_STOPPING). Once only. */
void memb_begin_stop(const char *why);

/* SHUTDOWN from pskvctl, or SIGTERM (msg NULL): a service stops its servers
 * (memb_begin_stop) and answers SHUTDOWN_ACK; a job refuses (its end is its
 * workers'). */
void memb_on_shutdown(wire_msg *msg);

/* REGISTER: validates it (role, advertised host, rank, room, job life: a node
 * registering once the job is stopping or finished is refused with "job J
 * finished"), then
 * acknowledges a re-sent registration, lets a new node take a dead worker's rank,
 * takes a node into the running job, or registers it and, once every expected
 * node is in, starts the job with the first view. Refuses with a reason otherwise. */
void memb_on_register(wire_msg *msg);

/* HEARTBEAT: renews the node's liveness (and a server's lease, acknowledged with
 * HEARTBEAT_ACK), takes its clock, dropped count and progress; a dead node heard
 * again is alive again, except a replaced server, which is sent the view that
 * shows it dead (or, once forgotten, the view without it, which it also takes as
 * its death). No reply to an unknown sender (logged). */
void memb_on_heartbeat(wire_msg *msg);

/* BARRIER from a worker: releases every barrier all counting workers reached
 * (BARRIER_DONE), and answers a re-sent request for a released one. */
void memb_on_barrier(wire_msg *msg);

/* FINISH from a worker: FINISH_ACK; once no worker counts any more, STOP goes to
 * the servers (JOB_STOPPING). */
void memb_on_finish(wire_msg *msg);

/* STOP_ACK from a server: it is finished. */
void memb_on_stop_ack(wire_msg *msg);

/* n is dead (n->det.why says which detector found it, at `now`): it leaves the
 * barrier and clock sets; a server of a running job has its partitions re-placed
 * and a new view goes out. */
void memb_declare_dead(memb_node *n, int64_t now);

/* The periodic lease check at time `now` (ms): declares dead every node silent
 * past its time-out (detect_silent) (a server of a running job gets its partitions re-placed and
 * a new view goes out) and forgets the nodes gone for MEMB_FORGET_MS; time the
 * scheduler itself did not run (a gap since the previous check of more than two
 * heartbeats, at least 200 ms) does not count as
 * silence (logged); exits the process (1) when the cluster is still incomplete
 * after join-timeout. */
void memb_expire(int64_t now);

/* 1 when the scheduler may exit: the job finished (every server acknowledged
 * STOP, or the 5 s grace ran out, logged) and --linger has passed since. A job
 * that finishes enters JOB_FINISHED here. 0 while the job runs or lingers. */
int memb_stopped(void);

/* Frees the node table. */
void memb_free(void);

#endif
