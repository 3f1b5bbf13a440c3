/* Tests of the consistency engine's rules (server/consist/): the models' rows
 * (model.h) over a real vector clock (vclock.h) fed views and CLOCK messages as
 * the server loop feeds them, without sockets or daemons. ssp's bound (a pull at
 * clock c waits until every worker of the set finished c - tau - 1), bsp's close
 * (clocks below the (W - backup)-th largest worker clock close), held pulls
 * released by the straggler's CLOCK or by a view without it, and a CLOCK sent
 * before its worker heard of a refused push, which must not count. */
#include <stdint.h>
#include <string.h>

#include "consist/model.h"
#include "consist/vclock.h"
#include "pskv_errors.h"
#include "suites.h"

#define NW 3

/* A view of NW workers, node ids 10 + rank; `gone` (or -1) is dead. */
typedef struct fake_view {
    Pskv__View view;
    Pskv__Node node[NW];
    Pskv__Node *nodes[NW];
} fake_view;

static void make_view(fake_view *f, int gone)
{
    pskv__view__init(&f->view);
    for (int r = 0; r < NW; r++) {
        pskv__node__init(&f->node[r]);
        f->node[r].id = 10 + (uint32_t)r;
        f->node[r].role = PSKV__ROLE__WORKER;
        f->node[r].rank = r;
        f->node[r].state = r == gone ? "dead" : "";
        f->nodes[r] = &f->node[r];
    }
    f->view.n_nodes = NW;
    f->view.nodes = f->nodes;
}

/* Worker `rank` has finished `done` iterations (its CLOCK names the last, done - 1),
 * having heard of `refused` refusals. Returns vclock_clock's answer. */
static int send_clock(vclock *v, int rank, int64_t done, uint64_t refused)
{
    Pskv__Meta m;
    pskv__meta__init(&m);
    m.sender = 10 + (uint32_t)rank;
    m.has_clock = 1;
    m.clock = done - 1;
    m.has_refused = refused > 0;
    m.refused = refused;
    wire_msg msg;
    memset(&msg, 0, sizeof msg);
    msg.meta = &m;
    return vclock_clock(v, &msg);
}

/* A clock whose three workers finished 5, 3 and 4 iterations. */
static vclock *clocks_534(void)
{
    vclock *v = vclock_new();
    ck_assert_ptr_nonnull(v);
    fake_view f;
    make_view(&f, -1);
    ck_assert_int_eq(vclock_view(v, &f.view), 0);
    ck_assert_int_eq(send_clock(v, 0, 5, 0), 0);
    ck_assert_int_eq(send_clock(v, 1, 3, 0), 1);
    ck_assert_int_eq(send_clock(v, 2, 4, 0), 2);
    return v;
}

START_TEST(rows_by_model)
{
    ck_assert_ptr_eq(cons_ops_of(CONS_ASYNC), &cons_async_ops);
    ck_assert_ptr_eq(cons_ops_of(CONS_SSP), &cons_ssp_ops);
    ck_assert_ptr_eq(cons_ops_of(CONS_BSP), &cons_bsp_ops);
    ck_assert_str_eq(cons_async_ops.name, "async");
    ck_assert_str_eq(cons_ssp_ops.name, "ssp");
    ck_assert_str_eq(cons_bsp_ops.name, "bsp");
    /* only bsp closes clocks; only ssp's replicas wait on forwarded clocks; only
     * async and ssp dedupe re-sends without replicas (bsp's closes record
     * the pushes they fold instead) */
    ck_assert_int_eq(cons_async_ops.closes + cons_ssp_ops.closes + cons_bsp_ops.closes, 1);
    ck_assert_int_eq(cons_bsp_ops.closes, 1);
    ck_assert_int_eq(cons_ssp_ops.chain_clocks, 1);
    ck_assert_int_eq(cons_async_ops.chain_clocks + cons_bsp_ops.chain_clocks, 0);
    ck_assert_int_eq(cons_async_ops.dedupes + cons_ssp_ops.dedupes, 2);
    ck_assert_int_eq(cons_bsp_ops.dedupes, 0);
}
END_TEST

/* The rows spell the models' names: each option string lands on its row, with
 * ssp's bound; ssp:inf is async; malformed and unknown names are refused naming
 * the option. */
START_TEST(names_parsed_by_rows)
{
    char why[160];
    cons_model m = CONS_BSP;
    int64_t tau = -1;
    ck_assert_int_eq(cons_parse("async", &m, &tau, why, sizeof why), 0);
    ck_assert_int_eq(m, CONS_ASYNC);
    ck_assert_int_eq(cons_parse("ssp:3", &m, &tau, why, sizeof why), 0);
    ck_assert_int_eq(m, CONS_SSP);
    ck_assert_int_eq(tau, 3);
    ck_assert_int_eq(cons_parse("ssp:inf", &m, &tau, why, sizeof why), 0);
    ck_assert_int_eq(m, CONS_ASYNC);
    ck_assert_int_eq(cons_parse("bsp", &m, &tau, why, sizeof why), 0);
    ck_assert_int_eq(m, CONS_BSP);
    ck_assert_int_eq(cons_parse("ssp:", &m, &tau, why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "needs a bound"));
    ck_assert_int_eq(cons_parse("ssp:1000001", &m, &tau, why, sizeof why), -PSKV_EINVAL);
    ck_assert_int_eq(cons_parse("bspx", &m, &tau, why, sizeof why), -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(why, "unknown 'bspx'"));
}
END_TEST

START_TEST(async_answers_at_once)
{
    vclock *v = clocks_534();
    table t = {.model = CONS_ASYNC};
    for (int64_t c = 0; c < 100; c += 7)
        ck_assert_int_eq(cons_of(&t)->pull_ready(v, NULL, &t, c), 1);
    ck_assert_int_eq(cons_of(&t)->values_clock(v, NULL, &t), 3); /* the slowest's */
    vclock_destroy(&v);
}
END_TEST

START_TEST(ssp_bound)
{
    vclock *v = clocks_534(); /* min 3 */
    for (int64_t tau = 0; tau <= 3; tau++) {
        table t = {.model = CONS_SSP, .tau = tau};
        const cons_ops *o = cons_of(&t);
        /* a pull at clock c may go once every worker finished c - tau - 1 */
        for (int64_t c = 0; c <= 3 + tau; c++)
            ck_assert_msg(o->pull_ready(v, NULL, &t, c), "tau %lld clock %lld held",
                          (long long)tau, (long long)c);
        ck_assert_msg(!o->pull_ready(v, NULL, &t, 4 + tau), "tau %lld: clock %lld answered "
                      "with the slowest worker at 3", (long long)tau, (long long)(4 + tau));
        ck_assert_int_eq(o->values_clock(v, NULL, &t), 3);
    }
    vclock_destroy(&v);
}
END_TEST

START_TEST(ssp_no_set_yet)
{
    vclock *v = vclock_new(); /* before the first view: nothing to wait on */
    table t = {.model = CONS_SSP, .tau = 0};
    ck_assert_int_eq(cons_of(&t)->pull_ready(v, NULL, &t, 1000), 1);
    vclock_destroy(&v);
}
END_TEST

START_TEST(held_pull_released_by_clock)
{
    vclock *v = clocks_534();
    table t = {.model = CONS_SSP, .tau = 1};
    const cons_ops *o = cons_of(&t);
    ck_assert_int_eq(o->pull_ready(v, NULL, &t, 5), 0); /* held: rank 1 is at 3 */
    ck_assert_int_eq(send_clock(v, 1, 4, 0), 1);
    ck_assert_int_eq(o->pull_ready(v, NULL, &t, 5), 1); /* the straggler moved on */
    ck_assert_int_eq(o->pull_ready(v, NULL, &t, 6), 0); /* rank 2 at 4 now */
    vclock_destroy(&v);
}
END_TEST

START_TEST(held_pull_released_by_view)
{
    vclock *v = clocks_534();
    table t = {.model = CONS_SSP, .tau = 0};
    const cons_ops *o = cons_of(&t);
    ck_assert_int_eq(o->pull_ready(v, NULL, &t, 4), 0);
    fake_view f;
    make_view(&f, 1); /* the straggler died: the set is ranks 0 and 2 */
    ck_assert_int_eq(vclock_view(v, &f.view), NW);
    ck_assert_int_eq(vclock_nset(v), 2);
    ck_assert_int_eq(o->pull_ready(v, NULL, &t, 4), 1);
    ck_assert_int_eq(o->pull_ready(v, NULL, &t, 5), 0);
    vclock_destroy(&v);
}
END_TEST

START_TEST(clock_before_refusal_ignored)
{
    vclock *v = clocks_534();
    table t = {.model = CONS_SSP, .tau = 0};
    ck_assert_uint_eq(vclock_refusal(v, 11, PSKV_ESTALE), 1); /* rank 1's push comes again */
    ck_assert_int_eq(send_clock(v, 1, 9, 0), -2); /* it had not heard: ignored */
    ck_assert_int_eq(cons_of(&t)->pull_ready(v, NULL, &t, 4), 0);
    ck_assert_int_eq(send_clock(v, 1, 9, 1), 1);
    ck_assert_int_eq(cons_of(&t)->pull_ready(v, NULL, &t, 4), 1);
    ck_assert_uint_eq(vclock_refusal(v, 11, PSKV_EINVAL), 0); /* final: not counted */
    vclock_destroy(&v);
}
END_TEST

START_TEST(ssp_head_reads_own_stream)
{
    /* replicated: pulls at a replica wait on the clocks head 1 forwarded; a pull
     * at this server as head (pskv_pushpull's) on those it counted itself (head 2) */
    vclock *v = clocks_534();
    table t = {.model = CONS_SSP, .tau = 0};
    const cons_ops *o = cons_of(&t);
    uint32_t src = 1;
    vclock_set_sources(v, &src, 1, 0);
    for (int r = 0; r < NW; r++) {
        vclock_from(v, 1, r, 6);     /* head 1 forwarded: each finished 7 */
        vclock_from(v, 2, r, r + 1); /* head 2 counted: 2, 3, 4 */
    }
    ck_assert_int_eq(o->pull_ready(v, NULL, &t, 7), 1);
    vclock_read_at(v, 2);
    ck_assert_int_eq(o->pull_ready(v, NULL, &t, 2), 1);
    ck_assert_int_eq(o->pull_ready(v, NULL, &t, 3), 0); /* rank 0 finished 2 there */
    vclock_read_at(v, 3); /* a head with no stream yet: nothing vouched for */
    ck_assert_int_eq(o->pull_ready(v, NULL, &t, 1), 0);
    vclock_read_at(v, 0);
    ck_assert_int_eq(o->pull_ready(v, NULL, &t, 7), 1);
    vclock_set_sources(v, &src, 1, 1); /* the placement changed: streams start again */
    vclock_read_at(v, 2);
    ck_assert_int_eq(o->pull_ready(v, NULL, &t, 1), 0);
    vclock_read_at(v, 0);
    vclock_destroy(&v);
}
END_TEST

START_TEST(bsp_close)
{
    vclock *v = clocks_534();
    /* clocks below the (W - backup)-th largest worker clock may close */
    ck_assert_int_eq(vclock_closable(v, 0, -7), 3);
    ck_assert_int_eq(vclock_closable(v, 1, -7), 4);
    ck_assert_int_eq(vclock_closable(v, 2, -7), 5);
    ck_assert_int_eq(vclock_closable(v, 9, -7), 5); /* at least one worker */
    ck_assert_int_eq(vclock_finished(v, 1, 2), 1);
    ck_assert_int_eq(vclock_finished(v, 1, 3), 0); /* finished 3 iterations: 0..2 */
    ck_assert_int_eq(vclock_finished(v, 7, 0), 0);
    ck_assert_int_eq(send_clock(v, 1, 6, 0), 1);
    ck_assert_int_eq(vclock_closable(v, 0, -7), 4);
    fake_view f;
    make_view(&f, 2); /* rank 2 died: closes wait on ranks 0 and 1 only */
    vclock_view(v, &f.view);
    ck_assert_int_eq(vclock_closable(v, 0, -7), 5);
    vclock_destroy(&v);
    v = vclock_new(); /* no workers: `none` */
    ck_assert_int_eq(vclock_closable(v, 0, -7), -7);
    vclock_destroy(&v);
}
END_TEST

START_TEST(clock_drops_unknown)
{
    vclock *v = clocks_534();
    Pskv__Meta m;
    pskv__meta__init(&m);
    m.sender = 99; /* not in the view */
    m.has_clock = 1;
    m.clock = 50;
    wire_msg msg;
    memset(&msg, 0, sizeof msg);
    msg.meta = &m;
    ck_assert_int_eq(vclock_clock(v, &msg), -1);
    m.sender = 10;
    m.clock = -1; /* no valid clock */
    ck_assert_int_eq(vclock_clock(v, &msg), -1);
    ck_assert_int_eq(vclock_min(v), 3);
    vclock_destroy(&v);
}
END_TEST

Suite *consist_suite(void)
{
    Suite *s = suite_create("consist");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, rows_by_model);
    tcase_add_test(tc, names_parsed_by_rows);
    tcase_add_test(tc, async_answers_at_once);
    tcase_add_test(tc, ssp_bound);
    tcase_add_test(tc, ssp_no_set_yet);
    tcase_add_test(tc, held_pull_released_by_clock);
    tcase_add_test(tc, held_pull_released_by_view);
    tcase_add_test(tc, clock_before_refusal_ignored);
    tcase_add_test(tc, ssp_head_reads_own_stream);
    tcase_add_test(tc, bsp_close);
    tcase_add_test(tc, clock_drops_unknown);
    suite_add_tcase(s, tc);
    return s;
}
