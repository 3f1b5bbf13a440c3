/* Tests of the chain rules (server/repl/): which rows of a request this server
 * may serve (chain_rows: pushes at the head of each key's partition, pulls at the
 * tail, refused PSKV_ESTALE elsewhere, dense runs cut to this server's
 * partitions), and a re-sent push applied once (chain_record, then chain_push
 * with resend: the dedupe record skips what was applied). A real chain object on
 * a view built here, with an unconnected ROUTER and no peer ever dialled (R = 1
 * forwards nothing; the head and tail checks send nothing): no daemons. */
#include <stdint.h>
#include <string.h>
#include <zmq.h>

#include "pskv_errors.h"
#include "repl/chain.h"
#include "repl/chain_apply.h"
#include "suites.h"

#define ME 1u
#define NPARTS 4u

typedef struct fixture {
    void *ctx, *router;
    member mb;
    Pskv__View view;
    Pskv__Node node[2];
    Pskv__Node *nodes[2];
    uint32_t chains[NPARTS * 2];
    table_set *ts;
    table *t;
    chain *c;
} fixture;

/* Servers 1 (this one) and 2; R replicas per partition, `order` the chains (head
 * first); a dense sum table of 400 rows of width 1. */
static void setup(fixture *f, uint32_t R, const uint32_t *order)
{
    memset(f, 0, sizeof *f);
    f->ctx = zmq_ctx_new();
    f->router = zmq_socket(f->ctx, ZMQ_ROUTER);
    ck_assert_ptr_nonnull(f->router);
    pskv__view__init(&f->view);
    for (int i = 0; i < 2; i++) {
        pskv__node__init(&f->node[i]);
        f->node[i].id = 1 + (uint32_t)i;
        f->node[i].role = PSKV__ROLE__SERVER;
        f->node[i].host = "127.0.0.1";
        f->node[i].port = 9; /* never dialled in these tests */
        f->node[i].state = "";
        f->nodes[i] = &f->node[i];
    }
    f->view.n_nodes = 2;
    f->view.nodes = f->nodes;
    f->view.has_partitions = 1;
    f->view.partitions = NPARTS;
    f->view.has_replicas = 1;
    f->view.replicas = R;
    memcpy(f->chains, order, NPARTS * R * sizeof *order);
    f->view.n_chains = NPARTS * R;
    f->view.chains = f->chains;
    f->mb.node_id = ME;
    f->mb.epoch = 1;
    f->mb.view = &f->view;
    f->ts = tables_new();
    ck_assert_ptr_nonnull(f->ts);
    Pskv__TableOptions o;
    pskv__table_options__init(&o);
    o.name = "rules";
    o.has_kind = 1;
    o.kind = PSKV__TABLE_KIND__DENSE;
    o.has_size = 1;
    o.size = 400;
    o.has_width = 1;
    o.width = 1;
    o.updater = "sum";
    o.consistency = "async";
    char why[256];
    ck_assert_msg(tables_open(f->ts, wire_table_id("rules"), &o, 0, UINT64_MAX, why,
                              sizeof why) == 0, "%s", why);
    f->t = tables_find(f->ts, wire_table_id("rules"));
    f->c = chain_new(f->ctx, f->router, &f->mb, f->ts, 1 << 20);
    ck_assert_ptr_nonnull(f->c);
    ck_assert_int_eq(chain_view(f->c), 0);
    ck_assert_uint_eq(chain_replicas(f->c), R);
    ck_assert_uint_eq(chain_nparts(f->c), NPARTS);
}

static void teardown(fixture *f)
{
    chain_destroy(&f->c);
    tables_destroy(&f->ts);
    zmq_close(f->router);
    zmq_ctx_term(f->ctx);
}

/* A PUSH or PULL message of one key (the frames are not needed by the checks). */
static void one_key(wire_msg *msg, Pskv__Meta *m, const uint64_t *key, const float *val)
{
    pskv__meta__init(m);
    m->type = val ? PSKV__MSG_TYPE__PUSH : PSKV__MSG_TYPE__PULL;
    m->sender = 7;
    m->has_num_keys = 1;
    m->num_keys = 1;
    memset(msg, 0, sizeof *msg);
    msg->meta = m;
    msg->keys = key;
    msg->nkeys = 1;
    msg->vals = val;
    msg->nvals = val ? 1 : 0;
}

START_TEST(head_and_tail)
{
    static const uint32_t order[] = {1, 2, 2, 1, 1, 2, 2, 1}; /* heads: 1, 2, 1, 2 */
    fixture f;
    setup(&f, 2, order);
    int heads = 0, tails = 0;
    for (uint64_t k = 0; k < 400; k++) {
        uint32_t p = chain_partition_of(f.c, f.t, k);
        ck_assert_uint_lt(p, NPARTS);
        int head = order[p * 2] == ME, tail = order[p * 2 + 1] == ME;
        wire_msg msg;
        Pskv__Meta m;
        float g = 1;
        rowset rs;
        char why[256];
        one_key(&msg, &m, &k, &g);
        int rc = chain_rows(f.c, f.t, &msg, 0, &rs, why, sizeof why);
        ck_assert_msg(rc == (head ? 0 : -PSKV_ESTALE), "push of key %llu (partition %u): %d",
                      (unsigned long long)k, p, rc);
        if (!head)
            ck_assert_msg(strstr(why, "not the head of partition"), "%s", why);
        one_key(&msg, &m, &k, NULL);
        rc = chain_rows(f.c, f.t, &msg, 1, &rs, why, sizeof why);
        ck_assert_msg(rc == (tail ? 0 : -PSKV_ESTALE), "pull of key %llu (partition %u): %d",
                      (unsigned long long)k, p, rc);
        if (!tail)
            ck_assert_msg(strstr(why, "not the tail of partition"), "%s", why);
        heads += head;
        tails += tail;
    }
    ck_assert_int_gt(heads, 0);
    ck_assert_int_lt(heads, 400);
    ck_assert_int_eq(heads, tails); /* here the heads' partitions are the tails' others */
    teardown(&f);
}
END_TEST

START_TEST(dense_run_cut)
{
    static const uint32_t order[] = {1, 2, 2, 1, 1, 2, 2, 1};
    fixture f;
    setup(&f, 2, order);
    uint64_t want_push = 0, want_pull = 0;
    for (uint64_t k = 0; k < 400; k++) {
        uint32_t p = chain_partition_of(f.c, f.t, k);
        want_push += order[p * 2] == ME;
        want_pull += order[p * 2 + 1] == ME;
    }
    for (int for_pull = 0; for_pull < 2; for_pull++) {
        Pskv__Meta m;
        pskv__meta__init(&m);
        m.type = for_pull ? PSKV__MSG_TYPE__PULL : PSKV__MSG_TYPE__PUSH;
        m.first_key = 0;
        m.has_span = 1;
        m.span = 400;
        wire_msg msg;
        memset(&msg, 0, sizeof msg);
        msg.meta = &m;
        msg.nkeys = for_pull ? want_pull : want_push; /* the rows the worker planned here */
        rowset rs;
        char why[256];
        int rc = chain_rows(f.c, f.t, &msg, for_pull, &rs, why, sizeof why);
        ck_assert_msg(rc == 0, "%d: %s", rc, why);
        ck_assert_uint_eq(rs.n, for_pull ? want_pull : want_push);
        uint64_t in_runs = 0;
        size_t nruns = rs.segs ? rs.nsegs : 1;
        for (size_t s = 0; s < nruns; s++) {
            uint64_t first = rs.segs ? rs.segs[2 * s] : rs.first;
            uint64_t n = rs.segs ? rs.segs[2 * s + 1] : rs.n;
            for (uint64_t k = first; k < first + n; k++) {
                uint32_t p = chain_partition_of(f.c, f.t, k);
                ck_assert_uint_eq(order[p * 2 + (for_pull ? 1 : 0)], ME);
            }
            in_runs += n;
        }
        ck_assert_uint_eq(in_runs, rs.n);
        msg.nkeys = 400; /* planned on a view where this server held all of it */
        ck_assert_int_eq(chain_rows(f.c, f.t, &msg, for_pull, &rs, why, sizeof why),
                         -PSKV_ESTALE);
        ck_assert_msg(strstr(why, "hold 200 rows"), "%s", why);
        m.span = 401; /* past the table's end */
        ck_assert_int_eq(chain_rows(f.c, f.t, &msg, for_pull, &rs, why, sizeof why),
                         -PSKV_ERANGE);
    }
    teardown(&f);
}
END_TEST

/* A dense run names its span and row count, not its rows. After a view that swaps
 * every partition's head and tail, this server tails as many rows of the span as
 * before, but other ones: a run planned on the old view must be refused as stale
 * (answered, its values would land on the rows the worker planned, which are not
 * the ones read: a bsp pull read another key's sum), and one planned on the new
 * view served. */
START_TEST(dense_run_old_view)
{
    static const uint32_t order[] = {1, 2, 2, 1, 1, 2, 2, 1};
    static const uint32_t swapped[] = {2, 1, 1, 2, 2, 1, 1, 2};
    fixture f;
    setup(&f, 2, order);
    uint64_t before = 0, after = 0;
    for (uint64_t k = 0; k < 400; k++) {
        uint32_t p = chain_partition_of(f.c, f.t, k);
        before += order[p * 2 + 1] == ME;
        after += swapped[p * 2 + 1] == ME;
    }
    ck_assert_uint_eq(before, after); /* the same count: it cannot tell the two apart */
    memcpy(f.chains, swapped, sizeof swapped);
    f.mb.epoch = 2;
    ck_assert_int_eq(chain_view(f.c), 0);
    ck_assert_uint_eq(chain_place_epoch(f.c), 2);
    for (int for_pull = 0; for_pull < 2; for_pull++) {
        Pskv__Meta m;
        pskv__meta__init(&m);
        m.type = for_pull ? PSKV__MSG_TYPE__PULL : PSKV__MSG_TYPE__PUSH;
        m.has_span = 1;
        m.span = 400;
        m.has_epoch = 1;
        m.epoch = 1;
        wire_msg msg;
        memset(&msg, 0, sizeof msg);
        msg.meta = &m;
        msg.nkeys = before;
        rowset rs;
        char why[256];
        ck_assert_int_eq(chain_rows(f.c, f.t, &msg, for_pull, &rs, why, sizeof why),
                         -PSKV_ESTALE);
        ck_assert_msg(strstr(why, "planned on view epoch 1, before the placement changed in "
                              "epoch 2"), "%s", why);
        m.epoch = 2;
        ck_assert_int_eq(chain_rows(f.c, f.t, &msg, for_pull, &rs, why, sizeof why), 0);
        ck_assert_uint_eq(rs.n, before);
    }
    teardown(&f);
}
END_TEST

/* The value of row `k` of the table. */
static float row(const fixture *f, uint64_t k)
{
    float v;
    shard_pull(f->t->sh, &k, 0, 1, &v);
    return v;
}

START_TEST(resend_applied_once)
{
    static const uint32_t order[] = {1, 1, 1, 1}; /* R = 1: every partition here */
    fixture f;
    setup(&f, 1, order);
    uint64_t k = 5, other = 6;
    float g = 2;
    wire_msg msg;
    Pskv__Meta m;
    rowset rs;
    char why[256];
    /* the first copy: applied on arrival (consist) and its id recorded */
    one_key(&msg, &m, &k, &g);
    ck_assert_int_eq(chain_rows(f.c, f.t, &msg, 0, &rs, why, sizeof why), 0);
    ck_assert_int_eq(shard_push_rows(f.t->sh, &rs, &g), 0);
    ck_assert_int_eq(chain_record(f.c, f.t, &rs, 7, 100, 0), 0);
    ck_assert_float_eq(row(&f, k), 2);
    /* the worker heard nothing and sends it again: not applied twice */
    one_key(&msg, &m, &k, &g);
    m.has_resend = m.resend = 1;
    m.has_origin_id = 1;
    m.origin_id = 100;
    ck_assert_int_eq(chain_rows(f.c, f.t, &msg, 0, &rs, why, sizeof why), 0);
    chain_push(f.c, f.t, &msg, &rs);
    ck_assert_float_eq(row(&f, k), 2);
    /* another id of the same worker, re-sent: applied (its first arrival) */
    one_key(&msg, &m, &other, &g);
    m.has_resend = m.resend = 1;
    m.has_origin_id = 1;
    m.origin_id = 101;
    ck_assert_int_eq(chain_rows(f.c, f.t, &msg, 0, &rs, why, sizeof why), 0);
    chain_push(f.c, f.t, &msg, &rs);
    ck_assert_float_eq(row(&f, other), 2);
    chain_push(f.c, f.t, &msg, &rs); /* and again: recorded by the first */
    ck_assert_float_eq(row(&f, other), 2);
    /* the same id from another worker is another push */
    m.sender = 8;
    chain_push(f.c, f.t, &msg, &rs);
    ck_assert_float_eq(row(&f, other), 4);
    teardown(&f);
}
END_TEST

/* A bsp push re-sent after its clock closed here, as head: dropped as late unless
 * the close recorded it as folded in (chain_record_folded, which a head calls on
 * its own closes as a replica does on the ones it receives): a pushpull part
 * whose parked pull a placement change refused comes again whole. */
START_TEST(own_close_folded)
{
    static const uint32_t order[] = {1, 2, 1, 2, 1, 2, 1, 2}; /* head of every partition */
    fixture f;
    setup(&f, 2, order);
    uint64_t k = 5;
    float g = 1;
    wire_msg msg;
    Pskv__Meta m;
    rowset rs;
    char why[256];
    one_key(&msg, &m, &k, &g);
    ck_assert_int_eq(chain_rows(f.c, f.t, &msg, 0, &rs, why, sizeof why), 0);
    uint32_t p = chain_partition_of(f.c, f.t, k);
    table_closed(f.t, NPARTS)[p] = 6; /* clock 5 closed on k's partition */
    int folded = -1;
    ck_assert_int_eq(chain_push_closed(f.c, f.t, &rs, 5, 7, 100, &folded), 1);
    ck_assert_int_eq(folded, 0); /* not recorded: late */
    const uint32_t nodes[] = {7};
    const uint64_t ids[] = {100}, floors[] = {0};
    ck_assert_int_eq(chain_record_folded(f.c, &p, 1, nodes, ids, floors, 1), 0);
    ck_assert_int_eq(chain_push_closed(f.c, f.t, &rs, 5, 7, 100, &folded), 1);
    ck_assert_int_eq(folded, 1); /* acknowledged, not applied again */
    ck_assert_int_eq(chain_push_closed(f.c, f.t, &rs, 5, 7, 101, &folded), 1);
    ck_assert_int_eq(folded, 0); /* another push of that worker: late */
    ck_assert_int_eq(chain_push_closed(f.c, f.t, &rs, 6, 7, 100, &folded), 0); /* open */
    teardown(&f);
}
END_TEST

Suite *chain_suite(void)
{
    Suite *s = suite_create("chain");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, head_and_tail);
    tcase_add_test(tc, dense_run_cut);
    tcase_add_test(tc, dense_run_old_view);
    tcase_add_test(tc, resend_applied_once);
    tcase_add_test(tc, own_close_folded);
    suite_add_tcase(s, tc);
    return s;
}
