/* Tests of the servers' side of following a namespace (server/follow.c): which
 * parts of which tables go to a reader, and when. Everything is real but the
 * daemons: the tables and shards (store/), the consistency engine counting a
 * worker's CLOCKs (consist/), the chain on a view built here (repl/, R = 1, no
 * peer dialled), the follow registry on a ROUTER made as the server makes its
 * data socket, and readers as DEALERs on inproc sending real FOLLOW messages and
 * reading the FOLLOW_DATA sent back. The loop's calls are made as serve.c and
 * main.c make them: follow_tick once a turn (here every SYNC_MS and a bit),
 * follow_worker_clock and follow_clock after a CLOCK counted, nsdrop_tables for a
 * dropped namespace. Timing is the only thing slowed down: a sync period is the
 * shortest a reader may ask for (10 ms). */
#include <stdint.h>
#include <string.h>
#include <zmq.h>

#include "follow.h"
#include "net.h"
#include "nsdrop.h"
#include "pskv_errors.h"
#include "suites.h"
#include "timeutil.h"

#define ME 1u     /* this server */
#define OTHER 2u  /* the other server of the view */
#define WORKER 10u /* the one worker, rank 0 */
#define NPARTS 4u
#define SYNC_MS 10 /* the readers' sync period */

typedef struct fixture {
    void *ctx, *router;
    char ep[64];
    member mb;
    Pskv__View view;
    Pskv__Node node[3];
    Pskv__Node *nodes[3];
    uint32_t chains[NPARTS];
    table_set *ts;
    consist *cons;
    chain *ch;
    follow *f;
} fixture;

/* One FOLLOW_DATA as a reader received it. */
typedef struct got {
    char table[128];
    int dense, full;
    uint64_t n, seq, size;
    int64_t clock;
    int frames;     /* frames after the Meta */
    uint64_t key0;  /* the first row's key and values, when n > 0 */
    float v0[4];
} got;

/* Servers ME and OTHER and one worker; R = 1 with `head` heading every partition. */
static void setup(fixture *fx, uint32_t head)
{
    static int made;
    memset(fx, 0, sizeof *fx);
    fx->ctx = zmq_ctx_new();
    fx->router = net_socket(fx->ctx, ZMQ_ROUTER, 0, 0); /* as the server's data socket */
    ck_assert_ptr_nonnull(fx->router);
    snprintf(fx->ep, sizeof fx->ep, "inproc://follow-test-%d", made++);
    ck_assert_int_eq(zmq_bind(fx->router, fx->ep), 0);
    pskv__view__init(&fx->view);
    for (int i = 0; i < 3; i++) {
        pskv__node__init(&fx->node[i]);
        fx->node[i].id = i < 2 ? ME + (uint32_t)i : WORKER;
        fx->node[i].role = i < 2 ? PSKV__ROLE__SERVER : PSKV__ROLE__WORKER;
        fx->node[i].rank = 0;
        fx->node[i].host = "127.0.0.1";
        fx->node[i].port = 9; /* never dialled */
        fx->node[i].state = "";
        fx->nodes[i] = &fx->node[i];
    }
    fx->view.n_nodes = 3;
    fx->view.nodes = fx->nodes;
    fx->view.has_partitions = fx->view.has_replicas = 1;
    fx->view.partitions = NPARTS;
    fx->view.replicas = 1;
    for (uint32_t p = 0; p < NPARTS; p++)
        fx->chains[p] = head;
    fx->view.n_chains = NPARTS;
    fx->view.chains = fx->chains;
    fx->mb.node_id = ME;
    fx->mb.epoch = 1;
    fx->mb.view = &fx->view;
    fx->ts = tables_new();
    fx->cons = consist_new(fx->router, &fx->mb, fx->ts);
    fx->ch = chain_new(fx->ctx, fx->router, &fx->mb, fx->ts, 1 << 20);
    fx->f = follow_new(fx->router, &fx->mb, fx->ts, fx->ch, fx->cons);
    ck_assert(fx->ts && fx->cons && fx->ch && fx->f);
    consist_set_chain(fx->cons, fx->ch);
    ck_assert_int_eq(chain_view(fx->ch), 0);
    consist_view(fx->cons);
    for (uint32_t p = 0; p < NPARTS; p++)
        ck_assert_int_eq(chain_heads(fx->ch, p), head == ME);
}

static void teardown(fixture *fx)
{
    follow_destroy(&fx->f);
    ck_assert_ptr_null(fx->f);
    consist_destroy(&fx->cons);
    chain_destroy(&fx->ch);
    tables_destroy(&fx->ts);
    zmq_close(fx->router);
    zmq_ctx_term(fx->ctx);
}

/* Opens table `name` (NS/NAME) as a TABLE_OPEN does: dense tables of `size` rows. */
static table *open_table(fixture *fx, const char *name, int dense, uint64_t size, uint32_t width)
{
    Pskv__TableOptions o;
    pskv__table_options__init(&o);
    o.name = (char *)name;
    o.has_kind = o.has_width = 1;
    o.kind = dense ? PSKV__TABLE_KIND__DENSE : PSKV__TABLE_KIND__SPARSE;
    o.width = width;
    o.has_size = dense;
    o.size = size;
    o.updater = "sum";
    o.consistency = "async";
    char why[256];
    ck_assert_msg(tables_open(fx->ts, wire_table_id(name), &o, 0, UINT64_MAX, why, sizeof why) ==
                  0, "%s", why);
    return tables_find(fx->ts, wire_table_id(name));
}

/* Adds g to every value of dense table t (a worker's push, applied). */
static void push_dense(table *t, float g)
{
    float v[64];
    ck_assert_uint_le(t->size * t->width, 64);
    for (uint64_t i = 0; i < t->size * t->width; i++)
        v[i] = g;
    ck_assert_int_eq(shard_push(t->sh, NULL, 0, t->size, v), 0);
}

/* Adds g to row `key` of sparse table t (width 1). */
static void push_sparse(table *t, uint64_t key, float g)
{
    ck_assert_int_eq(shard_push(t->sh, &key, 0, 1, &g), 0);
}

/* A reader's socket (pskv-serve's DEALER) with routing id `id`, connected. */
static void *reader(fixture *fx, const char *id)
{
    void *s = net_socket(fx->ctx, ZMQ_DEALER, 0, 0);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(zmq_setsockopt(s, ZMQ_ROUTING_ID, id, strlen(id)), 0);
    ck_assert_int_eq(zmq_connect(s, fx->ep), 0);
    return s;
}

/* Reader rd sends FOLLOW (namespace ns; a full copy when `full`; dense parts at
 * clock `target` or later, -1: none); the server receives it and hands it to
 * follow_request as on_follow does. Returns follow_request's answer. */
static int follow_as(fixture *fx, void *rd, const char *ns, int full, int64_t target)
{
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__FOLLOW);
    m.follow_ns = (char *)ns;
    m.has_follow_sync_ms = 1;
    m.follow_sync_ms = SYNC_MS;
    m.has_follow_full = m.follow_full = full;
    m.has_follow_target = target >= 0;
    m.follow_target = target;
    ck_assert_int_eq(wire_send(rd, NULL, &m, NULL, NULL), 0);
    zmq_pollitem_t it = {fx->router, 0, ZMQ_POLLIN, 0};
    ck_assert_int_eq(zmq_poll(&it, 1, 2000), 1);
    wire_msg msg;
    char why[256];
    ck_assert_msg(wire_recv(fx->router, 1, &msg, why, sizeof why) == 0, "%s", why);
    ck_assert_int_eq(msg.meta->type, PSKV__MSG_TYPE__FOLLOW);
    int rc = follow_request(fx->f, &msg, why, sizeof why);
    wire_msg_close(&msg);
    return rc;
}

/* What reader rd was sent: waits up to wait_ms for the first message, then takes
 * every one waiting. Returns how many (at most max recorded). */
static int drain(void *rd, got *out, int max, int wait_ms)
{
    zmq_pollitem_t it = {rd, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, wait_ms) <= 0)
        return 0;
    int n = 0;
    for (;;) {
        wire_msg msg;
        char why[256];
        int rc = wire_recv(rd, 0, &msg, why, sizeof why);
        if (rc == -PSKV_ETIMEDOUT)
            return n;
        ck_assert_msg(rc == 0, "%s", why);
        const Pskv__Meta *m = msg.meta;
        ck_assert_int_eq(m->type, PSKV__MSG_TYPE__FOLLOW_DATA);
        ck_assert_int_lt(n, max);
        got *g = &out[n++];
        memset(g, 0, sizeof *g);
        snprintf(g->table, sizeof g->table, "%s", m->follow_table ? m->follow_table : "");
        g->dense = m->follow_dense;
        g->full = m->follow_full;
        g->n = m->num_keys;
        g->seq = m->follow_seq;
        g->size = m->follow_size;
        g->clock = m->clock;
        g->frames = msg.nframes - 1;
        if (g->n) {
            g->key0 = msg.keys[0];
            for (uint32_t i = 0; i < m->width && i < 4; i++)
                g->v0[i] = msg.vals[i];
        }
        wire_msg_close(&msg);
    }
}

/* Nothing was sent to rd (a send over inproc is in its queue when it returns). */
static void nothing_for(void *rd, const char *when)
{
    got g[4];
    int n = drain(rd, g, 4, 5);
    ck_assert_msg(n == 0, "%s: %d messages, the first of %s (dense %d, clock %lld)", when, n,
                  g[0].table, g[0].dense, (long long)g[0].clock);
}

/* One turn of the server's loop a sync period after the last: what waits on
 * the data socket is read (nothing here; the read also lets ZeroMQ finish closing
 * a connection the peer closed), then follow_tick. */
static void tick(fixture *fx)
{
    tu_sleep_ms(SYNC_MS + 2);
    wire_msg msg;
    char why[256];
    ck_assert_int_eq(wire_recv(fx->router, 1, &msg, why, sizeof why), -PSKV_ETIMEDOUT);
    follow_tick(fx->f);
}

/* The worker's CLOCK: it finished iteration `clock`; handled as on_clock does. */
static void worker_clock(fixture *fx, int64_t clock)
{
    Pskv__Meta m;
    wire_meta_init(&m, PSKV__MSG_TYPE__CLOCK);
    m.sender = WORKER;
    m.has_clock = 1;
    m.clock = clock;
    wire_msg msg;
    memset(&msg, 0, sizeof msg);
    msg.meta = &m;
    int rank = consist_clock(fx->cons, &msg);
    ck_assert_int_eq(rank, 0);
    follow_worker_clock(fx->f, rank);
    follow_clock(fx->f);
}

/* Expects exactly one FOLLOW_DATA: of table `name`, a full copy's or not,
 * dense or not, of n rows. Returns it. */
static got one_msg(void *rd, const char *name, int full, int dense, uint64_t n)
{
    got g[4];
    ck_assert_int_eq(drain(rd, g, 4, 1000), 1);
    ck_assert_str_eq(g[0].table, name);
    ck_assert_int_eq(g[0].full, full);
    ck_assert_int_eq(g[0].dense, dense);
    ck_assert_uint_eq(g[0].n, n);
    return g[0];
}

/* Expects exactly one dense part of table `name`: n rows, tagged `clock`, its
 * first value v. */
static void one_dense(void *rd, const char *name, uint64_t n, int64_t clock, float v)
{
    got g = one_msg(rd, name, 1, 1, n);
    ck_assert_int_eq(g.clock, clock);
    if (n)
        ck_assert_float_eq(g.v0[0], v);
}

/* A server heading every partition, dense table a/w (4 rows of width 1) and a
 * reader of namespace a past its full copy (no sparse table to send): its dense
 * part is owed at the next boundary. Returns the reader; *w is the table. */
static void *reader_of_a(fixture *fx, table **w)
{
    setup(fx, ME);
    *w = open_table(fx, "a/w", 1, 4, 1);
    void *rd = reader(fx, "r1");
    ck_assert_int_eq(follow_as(fx, rd, "a", 1, -1), 0);
    tick(fx);
    return rd;
}

/* A table first seen by a sync counts as written then, at a boundary: a dense
 * table nobody writes any more (training over, no CLOCK will come) is sent once
 * quiet for a sync period, with what it holds. Writes before the reader came are
 * not writes of a round in progress. */
START_TEST(first_seen_is_sendable)
{
    fixture fx;
    setup(&fx, ME);
    table *w = open_table(&fx, "a/w", 1, 8, 2);
    push_dense(w, 1.5f);
    void *rd = reader(&fx, "r1");
    ck_assert_int_eq(follow_as(&fx, rd, "a", 1, -1), 0);
    tick(&fx); /* the full copy: no sparse table; the dense part at the next boundary */
    nothing_for(rd, "the sync that first saw the table");
    tick(&fx); /* quiet since it was first seen: sent as it is */
    got g = one_msg(rd, "a/w", 1, 1, 8);
    ck_assert_uint_eq(g.size, 8);
    ck_assert_int_eq(g.clock, 0);
    ck_assert_uint_eq(g.seq, 1);
    ck_assert_uint_eq(g.key0, 0);
    ck_assert_float_eq(g.v0[0], 1.5f);
    ck_assert_float_eq(g.v0[1], 1.5f);
    tick(&fx);
    nothing_for(rd, "after the part went");
    zmq_close(rd);
    teardown(&fx);
}
END_TEST

/* A dense table written after the last CLOCK holds part of a round: however long
 * it then stays quiet (a slow worker between its pushes), it is not sent as
 * "training paused"; the worker's CLOCK closes the round and the part goes then,
 * tagged with the clock that covers the write. */
START_TEST(mid_round_waits_for_clock)
{
    fixture fx;
    table *w;
    void *rd = reader_of_a(&fx, &w);
    push_dense(w, 2); /* a round begins */
    tick(&fx);
    nothing_for(rd, "the sync that saw the write");
    for (int i = 0; i < 4; i++) { /* quiet for sync periods, in the middle of a round */
        tick(&fx);
        nothing_for(rd, "quiet in the middle of a round");
    }
    worker_clock(&fx, 0);
    one_dense(rd, "a/w", 4, 1, 2);
    zmq_close(rd);
    teardown(&fx);
}
END_TEST

/* After a CLOCK the values are at a boundary: a write the round before it made,
 * then quiet for a sync period, is "training paused" and goes to a reader
 * waiting for a later clock, tagged with the clock it has. A reader that holds
 * those very parts (nothing written, the same clock) is not sent them again. */
START_TEST(boundary_after_clock)
{
    fixture fx;
    table *w;
    void *rd = reader_of_a(&fx, &w);
    push_dense(w, 1);
    worker_clock(&fx, 0); /* the boundary the reader waits for: sent at once */
    one_dense(rd, "a/w", 4, 1, 1);
    ck_assert_int_eq(follow_as(&fx, rd, "a", 0, 3), 0); /* parts at clock 3 or later */
    push_dense(w, 1);
    tick(&fx);
    nothing_for(rd, "a write in the middle of a round");
    worker_clock(&fx, 1); /* clock 2: short of 3, nothing sent by the CLOCK */
    nothing_for(rd, "a CLOCK short of the target");
    tick(&fx); /* quiet for a sync period since the boundary: paused */
    one_dense(rd, "a/w", 4, 2, 2);
    ck_assert_int_eq(follow_as(&fx, rd, "a", 0, 3), 0);
    tick(&fx);
    tick(&fx);
    nothing_for(rd, "parts the reader holds already");
    zmq_close(rd);
    teardown(&fx);
}
END_TEST

/* A dropped namespace's readers are unsubscribed: when a namespace of that name
 * is made again they get nothing of it (their FOLLOW is refused while no table
 * of it is here, and makes them new readers after). The others' bookkeeping follows the table set's new order: a
 * reader of another namespace is sent its quiet dense part, not held back by the
 * dropped table's write in the middle of a round. */
START_TEST(dropped_namespace_reader)
{
    fixture fx;
    setup(&fx, ME);
    table *aw = open_table(&fx, "a/w", 1, 4, 1); /* index 0, then dropped */
    table *bw = open_table(&fx, "b/w", 1, 4, 1);
    void *ra = reader(&fx, "ra"), *rb = reader(&fx, "rb");
    ck_assert_int_eq(follow_as(&fx, ra, "a", 1, -1), 0);
    ck_assert_int_eq(follow_as(&fx, rb, "b", 1, -1), 0);
    tick(&fx);
    push_dense(aw, 1);
    push_dense(bw, 1);
    worker_clock(&fx, 0);
    one_dense(ra, "a/w", 4, 1, 1);
    one_dense(rb, "b/w", 4, 1, 1);
    worker_clock(&fx, 1); /* b/w's tag moves on, nobody waits */
    push_dense(aw, 1);
    tick(&fx); /* a/w: written in the middle of round 2 */
    nothing_for(rb, "no target");
    ck_assert_int_eq(follow_as(&fx, rb, "b", 0, 5), 0);
    serve_state ss = {.tables = fx.ts, .cons = fx.cons, .chain = fx.ch, .follow = fx.f};
    uint64_t rows, bytes;
    ck_assert_uint_eq(nsdrop_tables(&ss, "a", "dropped by the test", &rows, &bytes), 1);
    ck_assert_uint_eq(rows, 4);
    tick(&fx);
    one_dense(rb, "b/w", 4, 2, 1);
    nothing_for(ra, "its namespace dropped");
    ck_assert_int_eq(follow_as(&fx, ra, "a", 0, -1), -PSKV_ENOTABLE);
    table *as = open_table(&fx, "a/s", 0, 0, 1); /* namespace a made again */
    push_sparse(as, 7, 1);
    tick(&fx);
    tick(&fx);
    nothing_for(ra, "a namespace of the same name");
    nothing_for(rb, "another namespace made");
    zmq_close(ra);
    zmq_close(rb);
    teardown(&fx);
}
END_TEST

/* A reader whose connection closed is unsubscribed once a send finds it gone:
 * from then on no sync copies its namespace's changes for it. Its reconnect (a
 * new socket, a new routing id) is a new reader: a full copy, numbered from 1. */
START_TEST(closed_reader_unsubscribed)
{
    fixture fx;
    setup(&fx, ME);
    table *s = open_table(&fx, "b/s", 0, 0, 1);
    push_sparse(s, 3, 1);
    push_sparse(s, 9, 1);
    void *rd = reader(&fx, "r1");
    ck_assert_int_eq(follow_as(&fx, rd, "b", 1, -1), 0);
    tick(&fx);
    ck_assert_uint_eq(one_msg(rd, "b/s", 1, 0, 2).seq, 1);
    push_sparse(s, 3, 1);
    tick(&fx);
    got g = one_msg(rd, "b/s", 0, 0, 1);
    ck_assert_uint_eq(g.key0, 3);
    ck_assert_float_eq(g.v0[0], 2);
    ck_assert_uint_eq(g.seq, 2);
    zmq_close(rd);
    /* ZeroMQ closes the connection on the socket's next calls; the send after that
     * finds it gone and the turn after unsubscribes the reader. A sync takes the
     * table's changes while someone follows it: once nobody does, they stay. */
    int copied = 1, turns = 0;
    while (copied && turns++ < 100) {
        push_sparse(s, 3, 1);
        tick(&fx);
        copied = shard_follow_taken(s->sh, NULL, NULL) == 0;
    }
    ck_assert_msg(!copied, "a reader whose connection closed is still followed");
    rd = reader(&fx, "r2");
    ck_assert_int_eq(follow_as(&fx, rd, "b", 1, -1), 0);
    tick(&fx);
    ck_assert_uint_eq(one_msg(rd, "b/s", 1, 0, 2).seq, 1);
    zmq_close(rd);
    teardown(&fx);
}
END_TEST

/* Edge sizes on a server heading every partition: an empty sparse table's full
 * copy is one message of no rows and no frames; a one-row dense table's part is
 * that row. */
START_TEST(empty_and_one_row)
{
    fixture fx;
    setup(&fx, ME);
    open_table(&fx, "e/s", 0, 0, 1);
    table *w = open_table(&fx, "e/w", 1, 1, 3);
    push_dense(w, 0.25f);
    void *rd = reader(&fx, "r1");
    ck_assert_int_eq(follow_as(&fx, rd, "e", 1, -1), 0);
    tick(&fx);
    ck_assert_int_eq(one_msg(rd, "e/s", 1, 0, 0).frames, 0);
    tick(&fx);
    got g = one_msg(rd, "e/w", 1, 1, 1);
    ck_assert_uint_eq(g.size, 1);
    ck_assert_int_eq(g.frames, 2);
    ck_assert_uint_eq(g.key0, 0);
    for (int i = 0; i < 3; i++)
        ck_assert_float_eq(g.v0[i], 0.25f);
    zmq_close(rd);
    teardown(&fx);
}
END_TEST

/* The same on a server heading no partition: its part of the one-row table is
 * empty but sent (the reader assembles a part from every server), and a sparse
 * row written elsewhere's partition sends nothing. */
START_TEST(one_row_headed_elsewhere)
{
    fixture fx;
    setup(&fx, OTHER);
    table *s = open_table(&fx, "e/s", 0, 0, 1);
    table *w = open_table(&fx, "e/w", 1, 1, 3);
    void *rd = reader(&fx, "r1");
    ck_assert_int_eq(follow_as(&fx, rd, "e", 1, -1), 0);
    tick(&fx);
    ck_assert_int_eq(one_msg(rd, "e/s", 1, 0, 0).frames, 0);
    tick(&fx);
    got g = one_msg(rd, "e/w", 1, 1, 0);
    ck_assert_uint_eq(g.size, 1);
    ck_assert_int_eq(g.frames, 0);
    push_sparse(s, 5, 1);
    push_dense(w, 1);
    tick(&fx);
    nothing_for(rd, "rows of partitions headed elsewhere");
    zmq_close(rd);
    teardown(&fx);
}
END_TEST

/* After a placement change the dense parts wait until every worker has sent two
 * CLOCKs on the new placement: the first may come in the middle of a round. */
START_TEST(placement_waits_two_clocks)
{
    fixture fx;
    table *w;
    void *rd = reader_of_a(&fx, &w);
    push_dense(w, 1);
    worker_clock(&fx, 0);
    one_dense(rd, "a/w", 4, 1, 1);
    follow_placement(fx.f);
    tick(&fx); /* the full copy again: no sparse table, the dense part owed */
    push_dense(w, 1);
    worker_clock(&fx, 1);
    nothing_for(rd, "the first CLOCK on the new placement");
    tick(&fx);
    tick(&fx);
    nothing_for(rd, "quiet after the first CLOCK on the new placement");
    worker_clock(&fx, 2);
    one_dense(rd, "a/w", 4, 3, 2);
    zmq_close(rd);
    teardown(&fx);
}
END_TEST

Suite *follow_suite(void)
{
    Suite *s = suite_create("follow");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, first_seen_is_sendable);
    tcase_add_test(tc, mid_round_waits_for_clock);
    tcase_add_test(tc, boundary_after_clock);
    tcase_add_test(tc, dropped_namespace_reader);
    tcase_add_test(tc, closed_reader_unsubscribed);
    tcase_add_test(tc, empty_and_one_row);
    tcase_add_test(tc, one_row_headed_elsewhere);
    tcase_add_test(tc, placement_waits_two_clocks);
    suite_add_tcase(s, tc);
    return s;
}
