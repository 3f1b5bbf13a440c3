/* scheduler/membership.c's rules without daemons: registration and ranks, a dead
 * worker's rank taken over, the lease expiry decision, barriers, FINISH before
 * STOP, and the node events and view fillers the policies hang on.
 *
 * The scheduler's own membership, view, events and sends run on a ROUTER socket
 * over inproc; each node is a DEALER that sends real REGISTER, HEARTBEAT, BARRIER,
 * FINISH and STOP_ACK messages and reads what the scheduler answers. check forks
 * each test, so the modules' state starts fresh in every one. */
#define _GNU_SOURCE
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "earlystop.h"
#include "events.h"
#include "group.h"
#include "membership.h"
#include "pskv_errors.h"
#include "sched_net.h"
#include "suites.h"
#include "timeutil.h"
#include "view.h"

static void *ctx, *router;
static void *socks[32];
static int nsocks;
static wire_msg got; /* the last message a node read (next_of) */

static void setup_job(int nservers, int nworkers)
{
    memset(&memb, 0, sizeof memb);
    memb.job_id = 7;
    memb.state = JOB_WAITING;
    memb.nservers = nservers;
    memb.nworkers = nworkers;
    memb.heartbeat_ms = 100;
    memb.dead_after_ms = 500;
    memb.lease_ms = 400;
    ck_assert_int_eq(detect_init(8, 800, 1), 0); /* --min-dead-after-ms follows: 500 */
    memb.join_timeout_s = 600;
    memb.started_ms = tu_now_ms();
    view_init(8, 1, 4);
    ctx = zmq_ctx_new();
    router = zmq_socket(ctx, ZMQ_ROUTER);
    int zero = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq(zmq_bind(router, "inproc://membership"), 0);
    sched_net_use(router);
}

static void teardown_job(void)
{
    wire_msg_close(&got);
    for (int i = 0; i < nsocks; i++)
        zmq_close(socks[i]);
    nsocks = 0;
    memb_free();
    view_free();
    events_reset();
    zmq_close(router);
    zmq_ctx_term(ctx);
}

static void *node_sock(void)
{
    ck_assert_int_lt(nsocks, 32);
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &zero, sizeof zero);
    ck_assert_int_eq(zmq_connect(d, "inproc://membership"), 0);
    socks[nsocks++] = d;
    return d;
}

/* Sends m from node socket d and hands it, as the scheduler received it, to the
 * membership call that serves its type. */
static void deliver(void *d, Pskv__Meta *m)
{
    ck_assert_int_eq(wire_send(d, NULL, m, NULL, NULL), 0);
    zmq_pollitem_t it = {router, 0, ZMQ_POLLIN, 0};
    ck_assert_int_eq(zmq_poll(&it, 1, 1000), 1);
    wire_msg msg;
    memset(&msg, 0, sizeof msg);
    char why[256];
    ck_assert_int_eq(wire_recv(router, 1, &msg, why, sizeof why), 0);
    switch (m->type) {
    case PSKV__MSG_TYPE__REGISTER: memb_on_register(&msg); break;
    case PSKV__MSG_TYPE__HEARTBEAT: memb_on_heartbeat(&msg); break;
    case PSKV__MSG_TYPE__BARRIER: memb_on_barrier(&msg); break;
    case PSKV__MSG_TYPE__FINISH: memb_on_finish(&msg); break;
    case PSKV__MSG_TYPE__STOP_ACK: memb_on_stop_ack(&msg); break;
    case PSKV__MSG_TYPE__EVAL_REPORT: estop_on_report(memb_find(m->sender), &msg); break;
    default: ck_abort_msg("no membership call for type %d", (int)m->type);
    }
    wire_msg_close(&msg);
}

/* The next message of `type` node socket d reads within ms (others skipped), or
 * NULL. Valid until the next call. */
static const Pskv__Meta *next_of(void *d, int type, int ms)
{
    int64_t end = tu_now_ms() + ms;
    for (;;) {
        wire_msg_close(&got);
        memset(&got, 0, sizeof got);
        int64_t left = end - tu_now_ms();
        zmq_pollitem_t it = {d, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, left > 0 ? (long)left : 0) <= 0)
            return NULL;
        char why[256];
        ck_assert_int_eq(wire_recv(d, 0, &got, why, sizeof why), 0);
        if ((int)got.meta->type == type)
            return got.meta;
    }
}

/* REGISTER of a new node of `role` wishing `rank` (-1: none) with `nonce`, from
 * socket d (NULL: a new one). Returns the socket. */
static void *reg_from(void *d, int role, int rank, uint64_t nonce)
{
    if (!d)
        d = node_sock();
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__REGISTER);
    m.has_role = 1;
    m.role = role;
    m.host = "127.0.0.1";
    m.has_port = m.has_pid = m.has_nonce = 1;
    m.port = 9000 + (uint32_t)nonce;
    m.pid = 100 + (uint32_t)nonce;
    m.nonce = nonce;
    if (rank >= 0) {
        m.has_rank = 1;
        m.rank = rank;
    }
    deliver(d, &m);
    return d;
}

static void *reg(int role, int rank, uint64_t nonce) { return reg_from(NULL, role, rank, nonce); }

/* The rank the node on d was given (REGISTER_ACK), its id in *id. */
static int acked_rank(void *d, uint32_t *id)
{
    const Pskv__Meta *a = next_of(d, PSKV__MSG_TYPE__REGISTER_ACK, 1000);
    ck_assert_msg(a != NULL, "no REGISTER_ACK");
    if (id)
        *id = (uint32_t)a->request_id;
    return a->rank;
}

/* The reason of the ERROR the node on d was sent. */
static const char *refusal(void *d)
{
    const Pskv__Meta *e = next_of(d, PSKV__MSG_TYPE__ERROR, 1000);
    ck_assert_msg(e != NULL, "no ERROR");
    return e->error ? e->error : "";
}

static void send_simple(void *d, int type, uint32_t sender, uint64_t seq)
{
    Pskv__Meta m;
    wire_meta_init(&m, type);
    m.has_sender = 1;
    m.sender = sender;
    if (seq) {
        m.has_seq = 1;
        m.seq = seq;
    }
    deliver(d, &m);
}

/* start_job's nodes: the server's socket and id, the workers' by rank. */
static void *srv, *w[2];
static uint32_t sid, wid[2];

/* A job of 1 server and 2 workers, running. */
static void start_job(void)
{
    setup_job(1, 2);
    srv = reg(PSKV__ROLE__SERVER, -1, 1);
    ck_assert_int_eq(acked_rank(srv, &sid), 0);
    for (int i = 0; i < 2; i++) {
        w[i] = reg(PSKV__ROLE__WORKER, i, 10 + (uint64_t)i);
        ck_assert_int_eq(acked_rank(w[i], &wid[i]), i);
    }
    ck_assert_int_eq(memb.state, JOB_RUNNING);
}

/* The lease check at now, node ids[i] last heard ago[i] ms before. */
static void expire_at(int64_t now, const uint32_t *ids, const int64_t *ago, int n)
{
    for (int i = 0; i < n; i++) {
        memb_node *m = memb_find(ids[i]);
        ck_assert_ptr_nonnull(m);
        m->last_hb_ms = now - ago[i];
        m->det.not_before_ms = 0; /* the promise of that (faked) heartbeat has run out */
    }
    memb_expire(now);
}

START_TEST(test_register_ranks)
{
    setup_job(1, 2);
    uint32_t id0, id1, again;
    void *a = reg(PSKV__ROLE__WORKER, -1, 1);
    ck_assert_int_eq(acked_rank(a, &id0), 0); /* the lowest free rank */
    void *b = reg(PSKV__ROLE__WORKER, 0, 2);
    ck_assert_ptr_nonnull(strstr(refusal(b), "rank 0 is taken by node"));
    void *c = reg(PSKV__ROLE__WORKER, 2, 3);
    ck_assert_str_eq(refusal(c), "rank 2 out of range 0..1");
    void *d = reg(PSKV__ROLE__WORKER, 1, 4);
    ck_assert_int_eq(acked_rank(d, &id1), 1);
    ck_assert_uint_ne(id0, id1);
    reg_from(a, PSKV__ROLE__WORKER, -1, 1); /* re-sent: the same node and rank */
    ck_assert_int_eq(acked_rank(a, &again), 0);
    ck_assert_uint_eq(again, id0);
    ck_assert_int_eq(memb_count_role(PSKV__ROLE__WORKER), 2);
    ck_assert_int_eq(memb.state, JOB_WAITING);
    void *e = reg(PSKV__ROLE__SCHEDULER, -1, 5);
    ck_assert_str_eq(refusal(e), "REGISTER with a role other than server, worker or evaluator");
    void *s = reg(PSKV__ROLE__SERVER, -1, 6);
    ck_assert_int_eq(acked_rank(s, NULL), 0);
    ck_assert_int_eq(memb.state, JOB_RUNNING); /* every expected node is in */
    const Pskv__Meta *v = next_of(a, PSKV__MSG_TYPE__VIEW, 1000);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(v->view->epoch, 1);
    ck_assert_uint_eq(v->view->n_nodes, 3);
}
END_TEST

START_TEST(test_rank_takeover)
{
    uint32_t nid;
    start_job();
    void *n = reg(PSKV__ROLE__WORKER, 0, 20);
    ck_assert_ptr_nonnull(strstr(refusal(n), "rank 0 is held by live node"));
    expire_at(tu_now_ms(), (uint32_t[]){sid, wid[0], wid[1]}, (int64_t[]){0, 5000, 0}, 3);
    ck_assert_int_eq(memb_find(wid[0])->dead, 1);
    reg_from(n, PSKV__ROLE__WORKER, 0, 21);
    ck_assert_int_eq(acked_rank(n, &nid), 0); /* the dead worker's rank */
    ck_assert_uint_ne(nid, wid[0]);
    ck_assert_int_eq(memb_find(wid[0])->replaced, 1);
    ck_assert_int_eq(memb_find(nid)->state, NODE_ACTIVE);
    send_simple(w[0], PSKV__MSG_TYPE__HEARTBEAT, wid[0], 0);
    ck_assert_int_eq(memb_find(wid[0])->dead, 1); /* replaced: never alive again */
    ck_assert_int_eq(memb.nworkers, 2);
}
END_TEST

START_TEST(test_lease_expiry)
{
    start_job();
    uint64_t epoch = view_epoch();
    /* silent exactly dead-after-ms: alive; 1 ms longer: dead */
    int64_t dead = memb.dead_after_ms;
    expire_at(tu_now_ms(), (uint32_t[]){sid, wid[0], wid[1]}, (int64_t[]){dead, dead + 1, 0}, 3);
    ck_assert_int_eq(memb_find(sid)->dead, 0);
    ck_assert_int_eq(memb_find(wid[0])->dead, 1);
    ck_assert_int_eq(memb_find(wid[1])->dead, 0);
    ck_assert_uint_eq(view_epoch(), epoch + 1); /* out of the clock set */
    send_simple(w[0], PSKV__MSG_TYPE__HEARTBEAT, wid[0], 0); /* heard again: alive */
    ck_assert_int_eq(memb_find(wid[0])->dead, 0);
    ck_assert_uint_eq(view_epoch(), epoch + 2);
}
END_TEST

START_TEST(test_barriers)
{
    start_job();
    send_simple(w[0], PSKV__MSG_TYPE__BARRIER, wid[0], 1);
    ck_assert_ptr_null(next_of(w[0], PSKV__MSG_TYPE__BARRIER_DONE, 100));
    send_simple(w[1], PSKV__MSG_TYPE__BARRIER, wid[1], 1);
    for (int i = 0; i < 2; i++) {
        const Pskv__Meta *d = next_of(w[i], PSKV__MSG_TYPE__BARRIER_DONE, 1000);
        ck_assert_ptr_nonnull(d);
        ck_assert_uint_eq(d->seq, 1);
    }
    ck_assert_uint_eq(group_find("")->barrier_done, 1);
    send_simple(w[0], PSKV__MSG_TYPE__BARRIER, wid[0], 1); /* re-sent: answered again */
    ck_assert_ptr_nonnull(next_of(w[0], PSKV__MSG_TYPE__BARRIER_DONE, 1000));
    /* worker 1 dies: barrier 2 waits for worker 0 alone */
    expire_at(tu_now_ms(), (uint32_t[]){sid, wid[0], wid[1]}, (int64_t[]){0, 0, 5000}, 3);
    send_simple(w[0], PSKV__MSG_TYPE__BARRIER, wid[0], 2);
    const Pskv__Meta *d = next_of(w[0], PSKV__MSG_TYPE__BARRIER_DONE, 1000);
    ck_assert_msg(d != NULL, "barrier 2 not released without the dead worker");
    ck_assert_uint_eq(d->seq, 2);
    ck_assert_uint_eq(group_find("")->barrier_done, 2);
}
END_TEST

START_TEST(test_finish_then_stop)
{
    start_job();
    send_simple(w[0], PSKV__MSG_TYPE__FINISH, wid[0], 0);
    ck_assert_ptr_nonnull(next_of(w[0], PSKV__MSG_TYPE__FINISH_ACK, 1000));
    ck_assert_ptr_null(next_of(srv, PSKV__MSG_TYPE__STOP, 100)); /* worker 1 still counts */
    ck_assert_int_eq(memb.state, JOB_RUNNING);
    send_simple(w[1], PSKV__MSG_TYPE__FINISH, wid[1], 0);
    ck_assert_ptr_nonnull(next_of(w[1], PSKV__MSG_TYPE__FINISH_ACK, 1000));
    ck_assert_ptr_nonnull(next_of(srv, PSKV__MSG_TYPE__STOP, 1000));
    ck_assert_int_eq(memb.state, JOB_STOPPING);
    void *late = reg(PSKV__ROLE__WORKER, -1, 30);
    ck_assert_str_eq(refusal(late), "job 7 finished; no node can join it");
    ck_assert_int_eq(memb_stopped(), 0); /* the server has not acknowledged STOP */
    send_simple(srv, PSKV__MSG_TYPE__STOP_ACK, sid, 0);
    ck_assert_int_eq(memb_stopped(), 1);
    ck_assert_int_eq(memb.state, JOB_FINISHED);
}
END_TEST

/* What a subscriber saw of each event, in order. */
static struct {
    int n;
    sched_event kind[32];
    uint64_t epoch[32]; /* view_epoch() when it came */
    int state[32];      /* memb.state when it came */
} seen;

static int record(void *c, const sched_ev *ev)
{
    (void)c;
    if (seen.n < 32) {
        seen.kind[seen.n] = ev->kind;
        seen.epoch[seen.n] = view_epoch();
        seen.state[seen.n] = memb.state;
        seen.n++;
    }
    return 0;
}

static int veto_evaluator(void *c, const sched_ev *ev)
{
    (void)c;
    if (ev->msg->meta->role != PSKV__ROLE__EVALUATOR)
        return 0;
    sched_refuse(ev->msg, PSKV_EREFUSED, "vetoed by the test");
    return 1;
}

static void fill_reason(void *c, Pskv__View *v, int status)
{
    (void)status;
    v->stop_reason = c;
}

START_TEST(test_events_and_fillers)
{
    setup_job(2, 1);
    for (int k = 0; k < SCHED_EV_COUNT; k++)
        ck_assert_int_eq(events_subscribe((sched_event)k, record, NULL), 0);
    ck_assert_int_eq(events_subscribe(SCHED_EV_REGISTERING, veto_evaluator, NULL), 0);
    ck_assert_int_eq(events_subscribe(SCHED_EV_COUNT, record, NULL), -PSKV_EINVAL);
    ck_assert_int_eq(view_add_filler(fill_reason, NULL, "from the filler"), 0);
    void *ev = reg(PSKV__ROLE__EVALUATOR, -1, 1);
    ck_assert_str_eq(refusal(ev), "vetoed by the test");
    ck_assert_int_eq(memb.nnodes, 0);
    uint32_t s0, s1, w0;
    void *a = reg(PSKV__ROLE__SERVER, -1, 2);
    acked_rank(a, &s0);
    void *b = reg(PSKV__ROLE__SERVER, -1, 3);
    acked_rank(b, &s1);
    void *wk = reg(PSKV__ROLE__WORKER, -1, 4);
    acked_rank(wk, &w0);
    /* registering (vetoed), then registering + joined for each node, then complete
     * before the first placement and view */
    sched_event want[] = {SCHED_EV_REGISTERING, SCHED_EV_REGISTERING, SCHED_EV_JOINED,
                          SCHED_EV_REGISTERING, SCHED_EV_JOINED,      SCHED_EV_REGISTERING,
                          SCHED_EV_JOINED,      SCHED_EV_COMPLETE};
    ck_assert_int_eq(seen.n, 8);
    for (int i = 0; i < 8; i++)
        ck_assert_int_eq(seen.kind[i], want[i]);
    ck_assert_uint_eq(seen.epoch[7], 0);
    ck_assert_int_eq(seen.state[7], JOB_WAITING);
    const Pskv__Meta *v = next_of(wk, PSKV__MSG_TYPE__VIEW, 1000);
    ck_assert_ptr_nonnull(v);
    ck_assert_str_eq(v->view->stop_reason, "from the filler");
    send_simple(a, PSKV__MSG_TYPE__HEARTBEAT, s0, 0);
    ck_assert_int_eq(seen.kind[seen.n - 1], SCHED_EV_HEARD);
    /* server 1 dies: its partitions move, then the event */
    expire_at(tu_now_ms(), (uint32_t[]){s0, s1, w0}, (int64_t[]){0, 5000, 0}, 3);
    ck_assert_int_eq(seen.kind[seen.n - 1], SCHED_EV_DIED);
    ck_assert_uint_eq(seen.epoch[seen.n - 1], 2); /* after the view without it */
    ck_assert_uint_eq(memb_find(s0)->heads + view_lost(), 8); /* R = 1: its own are lost */
}
END_TEST

/* A worker of group `name` of `size` (0: none given) wishing `rank`, on a new
 * socket, its tables in namespace ns (NULL: none named) and asking to drop it at
 * its group's end (drop). */
static void *reg_group_ns(const char *name, uint32_t size, int rank, uint64_t nonce,
                          const char *ns, int drop)
{
    void *d = node_sock();
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__REGISTER);
    m.has_role = m.has_port = m.has_pid = m.has_nonce = 1;
    m.role = PSKV__ROLE__WORKER;
    m.host = "127.0.0.1";
    m.port = 9000 + (uint32_t)nonce;
    m.pid = 100 + (uint32_t)nonce;
    m.nonce = nonce;
    m.has_rank = rank >= 0;
    m.rank = rank;
    m.group = (char *)name;
    m.has_group_size = size > 0;
    m.group_size = size;
    m.table_ns = (char *)ns;
    m.has_drop_namespace = m.drop_namespace = drop;
    deliver(d, &m);
    return d;
}

static void *reg_group(const char *name, uint32_t size, int rank, uint64_t nonce)
{
    return reg_group_ns(name, size, rank, nonce, NULL, 0);
}

/* A service: it runs with its server alone; two groups rank, start, see and
 * release barriers on their own; one ends and the service goes on; a shutdown
 * stops the server. Refusals name the group and the field. */
START_TEST(test_service_groups)
{
    setup_job(1, 1);
    memb.service = 1;
    uint32_t sv, a0id, a1id, b0id;
    void *s = reg(PSKV__ROLE__SERVER, -1, 1);
    acked_rank(s, &sv);
    ck_assert_int_eq(memb.state, JOB_RUNNING); /* no worker needed */
    void *a0 = reg_group("A", 2, -1, 2);
    ck_assert_int_eq(acked_rank(a0, &a0id), 0);
    ck_assert_ptr_null(next_of(a0, PSKV__MSG_TYPE__VIEW, 100)); /* A waits for its second */
    void *b0 = reg_group("B", 1, -1, 3);
    ck_assert_int_eq(acked_rank(b0, &b0id), 0); /* B's own rank 0 */
    const Pskv__Meta *v = next_of(b0, PSKV__MSG_TYPE__VIEW, 1000);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(v->view->n_nodes, 2); /* the server and B's worker, not A's */
    ck_assert_uint_eq(v->view->workers, 1);
    ck_assert_str_eq(refusal(reg_group("A", 3, -1, 4)),
                     "group A: field group_size: 3 differs from its workers' (2)");
    ck_assert_ptr_nonnull(strstr(refusal(reg_group("A", 2, 0, 5)), "group A: rank 0 is taken by node"));
    ck_assert_ptr_nonnull(strstr(refusal(reg_group("a/b", 1, -1, 6)), "field group"));
    ck_assert_ptr_nonnull(strstr(refusal(reg_group("C", 0, -1, 7)), "group C: field group_size"));
    void *a1 = reg_group("A", 2, -1, 8);
    ck_assert_int_eq(acked_rank(a1, &a1id), 1);
    v = next_of(a0, PSKV__MSG_TYPE__VIEW, 1000);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(v->view->n_nodes, 3); /* the server, A's two */
    ck_assert_uint_eq(v->view->workers, 2);
    for (size_t i = 0; i < v->view->n_nodes; i++)
        ck_assert_uint_ne(v->view->nodes[i]->id, b0id);
    /* B's barrier is B's alone */
    send_simple(b0, PSKV__MSG_TYPE__BARRIER, b0id, 1);
    ck_assert_ptr_nonnull(next_of(b0, PSKV__MSG_TYPE__BARRIER_DONE, 1000));
    send_simple(a0, PSKV__MSG_TYPE__BARRIER, a0id, 1);
    ck_assert_ptr_null(next_of(a0, PSKV__MSG_TYPE__BARRIER_DONE, 100));
    send_simple(a1, PSKV__MSG_TYPE__BARRIER, a1id, 1);
    ck_assert_ptr_nonnull(next_of(a0, PSKV__MSG_TYPE__BARRIER_DONE, 1000));
    /* B ends: the service and A go on, the server is not stopped */
    send_simple(b0, PSKV__MSG_TYPE__FINISH, b0id, 0);
    ck_assert_ptr_null(group_find("B"));
    ck_assert_ptr_nonnull(group_find("A"));
    ck_assert_int_eq(memb.state, JOB_RUNNING);
    ck_assert_ptr_null(next_of(s, PSKV__MSG_TYPE__STOP, 100));
    void *b1 = reg_group("B", 2, -1, 9); /* the name is free again: a new group */
    ck_assert_int_eq(acked_rank(b1, NULL), 0);
    ck_assert_int_eq(group_find("B")->size, 2);
    memb_on_shutdown(NULL);
    ck_assert_int_eq(memb.state, JOB_STOPPING);
    ck_assert_ptr_nonnull(next_of(s, PSKV__MSG_TYPE__STOP, 1000));
}
END_TEST

static char dropped[2][80]; /* the group ends naming a namespace: "NS by GROUP" */
static int ndropped;

static int on_drop(void *arg, const sched_ev *ev)
{
    (void)arg;
    if (ev->ns && ndropped < 2)
        snprintf(dropped[ndropped], sizeof dropped[0], "%s by %s", ev->ns, ev->group);
    ndropped += ev->ns != NULL;
    return 0;
}

/* Which live groups use a namespace (pskvctl drop's refusal): named after it, or a
 * worker registered in it (REGISTER table_ns); a bad table_ns is refused naming the
 * field; a group whose worker asked --drop-namespace ends (SCHED_EV_GROUP_ENDED)
 * naming its namespace, one without names none. */
START_TEST(test_group_namespaces)
{
    setup_job(1, 1);
    memb.service = 1;
    ndropped = 0;
    events_subscribe(SCHED_EV_GROUP_ENDED, on_drop, NULL);
    uint32_t aid, bid;
    acked_rank(reg(PSKV__ROLE__SERVER, -1, 1), NULL);
    void *a = reg_group_ns("A", 1, -1, 2, "S", 1);
    ck_assert_int_eq(acked_rank(a, &aid), 0);
    void *b = reg_group("B", 1, -1, 3);
    ck_assert_int_eq(acked_rank(b, &bid), 0);
    ck_assert_ptr_nonnull(strstr(refusal(reg_group_ns("C", 1, -1, 4, "x/y", 0)),
                                 "group C: field table_ns"));
    char names[100];
    ck_assert_int_eq(group_users("S", names, sizeof names), 1);
    ck_assert_str_eq(names, "A");
    ck_assert_int_eq(group_users("A", names, sizeof names), 1); /* named after it */
    ck_assert_int_eq(group_users("B", names, sizeof names), 1); /* its own name, no table_ns */
    ck_assert_int_eq(group_users("Z", names, sizeof names), 0);
    ck_assert_str_eq(names, "");
    send_simple(a, PSKV__MSG_TYPE__FINISH, aid, 0);
    ck_assert_int_eq(ndropped, 1);
    ck_assert_str_eq(dropped[0], "S by A");
    ck_assert_int_eq(group_users("S", names, sizeof names), 0);
    send_simple(b, PSKV__MSG_TYPE__FINISH, bid, 0);
    ck_assert_int_eq(ndropped, 1); /* B did not ask */
    events_reset();
}
END_TEST

/* An evaluator of group `name` (NULL: none named), on a new socket. */
static void *reg_eval(const char *name, uint64_t nonce)
{
    void *d = node_sock();
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__REGISTER);
    m.has_role = m.has_port = m.has_pid = m.has_nonce = m.has_rank = 1;
    m.role = PSKV__ROLE__EVALUATOR;
    m.rank = -1;
    m.host = "127.0.0.1";
    m.port = 9000 + (uint32_t)nonce;
    m.pid = 100 + (uint32_t)nonce;
    m.nonce = nonce;
    m.group = (char *)name;
    deliver(d, &m);
    return d;
}

/* EVAL_REPORT from evaluator node id on d: val_loss `loss` at `clock`. */
static void report(void *d, uint32_t id, int64_t clock, double loss)
{
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__EVAL_REPORT);
    m.has_sender = m.has_clock = m.has_val_loss = m.has_val_accuracy = 1;
    m.sender = id;
    m.clock = clock;
    m.val_loss = loss;
    m.val_accuracy = 0.5;
    deliver(d, &m);
}

/* A service's evaluators, one per group: an evaluator of A waits for A's start
 * for its view, which is A's (A's workers and size, not B's); a second one of A
 * is refused naming the group; A's early stopping stops A only, and A's end tells
 * its evaluator STOP. A job refuses a named group's evaluator. */
START_TEST(test_group_evaluators)
{
    setup_job(1, 1);
    memb.service = 1;
    ck_assert_int_eq(estop_init(1, "val_loss", 2, 0, 0), -1);
    estop_hooks();
    uint32_t eid, aid, bid;
    acked_rank(reg(PSKV__ROLE__SERVER, -1, 1), NULL);
    void *e = reg_eval("A", 2);
    acked_rank(e, &eid);
    ck_assert_ptr_null(next_of(e, PSKV__MSG_TYPE__VIEW, 100)); /* no group A yet */
    ck_assert_ptr_nonnull(strstr(refusal(reg_eval("A", 3)),
                                 "group A: the group's evaluator is node"));
    void *b = reg_group("B", 2, -1, 4); /* B waits for its second worker: no view */
    acked_rank(b, &bid);
    void *a = reg_group("A", 1, -1, 5);
    acked_rank(a, &aid);
    const Pskv__Meta *v = next_of(e, PSKV__MSG_TYPE__VIEW, 1000);
    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(v->view->workers, 1);
    int workers = 0;
    for (size_t i = 0; i < v->view->n_nodes; i++) {
        workers += v->view->nodes[i]->role == PSKV__ROLE__WORKER;
        ck_assert_uint_ne(v->view->nodes[i]->id, bid);
    }
    ck_assert_int_eq(workers, 1);
    report(e, eid, 10, 1.0); /* the best */
    report(e, eid, 20, 1.0); /* 1 of 2 */
    ck_assert_int_eq(group_find("A")->state, GROUP_RUNNING);
    report(e, eid, 20, 0.5); /* the same snapshot again: not counted */
    report(e, eid, 30, 1.0); /* 2 of 2: A stops */
    ck_assert_int_eq(group_find("A")->state, GROUP_STOPPING);
    v = next_of(a, PSKV__MSG_TYPE__VIEW, 1000);
    while (v && !v->view->stop_early)
        v = next_of(a, PSKV__MSG_TYPE__VIEW, 1000);
    ck_assert_ptr_nonnull(v);
    ck_assert_str_eq(v->view->stop_reason, "group A: val_loss did not improve by 0 for 2 "
                                           "evaluations");
    ck_assert_int_eq(memb.state, JOB_RUNNING);
    send_simple(a, PSKV__MSG_TYPE__FINISH, aid, 0);
    ck_assert_ptr_null(group_find("A"));
    ck_assert_ptr_nonnull(next_of(e, PSKV__MSG_TYPE__STOP, 1000));
    ck_assert_ptr_nonnull(group_find("B")); /* the other group is untouched */
    memb.service = 0; /* a job: a named group's evaluator is refused */
    ck_assert_ptr_nonnull(strstr(refusal(reg_eval("C", 6)),
                                 "group C: field group: this scheduler runs one job"));
    events_reset();
}
END_TEST

Suite *membership_suite(void)
{
    Suite *s = suite_create("membership");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_register_ranks);
    tcase_add_test(tc, test_rank_takeover);
    tcase_add_test(tc, test_lease_expiry);
    tcase_add_test(tc, test_barriers);
    tcase_add_test(tc, test_finish_then_stop);
    tcase_add_test(tc, test_events_and_fillers);
    tcase_add_test(tc, test_service_groups);
    tcase_add_test(tc, test_group_namespaces);
    tcase_add_test(tc, test_group_evaluators);
    tcase_add_checked_fixture(tc, NULL, teardown_job);
    suite_add_tcase(s, tc);
    return s;
}
