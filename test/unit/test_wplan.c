/* Tests of the worker's request planning (worker/lib/wplan.c) without sockets: a
 * handle laid out by hand as a view would leave it (servers, partitions, the head
 * and tail of each), then the table checks, the run test, explicit keys grouped by
 * the server owning their partition, and dense runs cut by owner and chunk. Each
 * plan is checked against the placement computed here key by key (ring.h), so a
 * wrong owner, a key lost or sent twice, or a part over its chunk fails. */
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "suites.h"
#include "wplan.h"

enum { NSRV = 3, NPARTS = 16, MAXPARTS = 4096 };

/* A handle with NSRV servers and NPARTS partitions: partition p headed by server
 * p % NSRV and tailed by the next; one dense table (0) and one sparse (1). */
static pskv_worker *handle_new(uint64_t dense_size, uint32_t width, size_t chunk_bytes)
{
    pskv_worker *w = calloc(1, sizeof *w);
    ck_assert_ptr_nonnull(w);
    w->nservers = NSRV;
    w->nparts = NPARTS;
    w->chunk_bytes = chunk_bytes;
    w->head = calloc(NPARTS, sizeof *w->head);
    w->tail = calloc(NPARTS, sizeof *w->tail);
    w->count = calloc(NSRV, sizeof *w->count);
    w->pindex = calloc(NSRV, sizeof *w->pindex);
    w->tables = calloc(2, sizeof *w->tables);
    ck_assert(w->head && w->tail && w->count && w->pindex && w->tables);
    for (int p = 0; p < NPARTS; p++) {
        w->head[p] = p % NSRV;
        w->tail[p] = (p + 1) % NSRV;
    }
    w->ntables = 2;
    strcpy(w->tables[0].name, "dense");
    w->tables[0].dense = 1;
    w->tables[0].size = dense_size;
    w->tables[0].width = width;
    strcpy(w->tables[1].name, "sparse");
    w->tables[1].width = width;
    return w;
}

static void handle_free(pskv_worker *w)
{
    free(w->head);
    free(w->tail);
    free(w->count);
    free(w->pindex);
    free(w->owner);
    free(w->tables);
    free(w);
}

static req *req_new(void)
{
    req *r = calloc(1, sizeof *r);
    ck_assert_ptr_nonnull(r);
    r->parts = calloc(MAXPARTS, sizeof *r->parts);
    ck_assert_ptr_nonnull(r->parts);
    r->ts = 7;
    return r;
}

static void req_free(req *r)
{
    free(r->parts);
    free(r->segs);
    free(r->idx);
    free(r);
}

/* The server key goes to, computed here from the placement. */
static int owner_here(const pskv_worker *w, const tbl *t, uint64_t key, int pull)
{
    uint64_t pos = t->dense ? ring_dense_pos(key, t->size) : ring_mix64(key);
    uint32_t p = ring_partition_of(pos, w->nparts);
    return pull ? w->tail[p] : w->head[p];
}

START_TEST(check_table_refuses_bad_requests)
{
    pskv_worker *w = handle_new(100, 1, 1 << 20);
    uint64_t ok[2] = {3, 99}, far[2] = {3, 100};
    int err = 0;
    ck_assert_ptr_null(wplan_check_table(NULL, 0, ok, 2, &err));
    ck_assert_int_eq(err, -PSKV_EINVAL);
    ck_assert_ptr_null(wplan_check_table(w, 2, ok, 2, &err));
    ck_assert_int_eq(err, -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(w->last_error, "no table handle 2"));
    ck_assert_ptr_null(wplan_check_table(w, -1, ok, 2, &err));
    ck_assert_ptr_null(wplan_check_table(w, 0, ok, 0, &err));
    ck_assert_int_eq(err, -PSKV_EINVAL);
    ck_assert_ptr_nonnull(strstr(w->last_error, "'dense': 0 keys"));
    ck_assert_ptr_null(wplan_check_table(w, 0, far, 2, &err)); /* key == size */
    ck_assert_int_eq(err, -PSKV_ERANGE);
    ck_assert_ptr_nonnull(strstr(w->last_error, "key 100 outside 0..99"));
    ck_assert_ptr_null(wplan_check_table(w, 1, NULL, 5, &err)); /* NULL keys, sparse */
    ck_assert_int_eq(err, -PSKV_EINVAL);
    ck_assert_ptr_null(wplan_check_table(w, 0, NULL, 99, &err)); /* not the whole table */
    ck_assert_int_eq(err, -PSKV_EINVAL);
    ck_assert_ptr_eq(wplan_check_table(w, 0, NULL, 100, &err), &w->tables[0]);
    ck_assert_ptr_eq(wplan_check_table(w, 0, ok, 2, &err), &w->tables[0]);
    ck_assert_ptr_eq(wplan_check_table(w, 1, far, 2, &err), &w->tables[1]); /* no bound */
    handle_free(w);
}
END_TEST

START_TEST(is_run_only_for_ascending_runs)
{
    uint64_t run[4] = {5, 6, 7, 8}, gap[4] = {5, 6, 8, 9}, down[3] = {5, 4, 3}, one[1] = {9};
    ck_assert(wplan_is_run(run, 4));
    ck_assert(wplan_is_run(one, 1));
    ck_assert(!wplan_is_run(gap, 4));
    ck_assert(!wplan_is_run(down, 3));
}
END_TEST

/* Explicit keys: one part per owning server, in server order, each key in the
 * part of its owner exactly once, rows listed in the caller's order. */
static void check_keys_plan(const pskv_worker *w, const req *r, const tbl *t,
                            const uint64_t *keys, uint64_t n, int pull)
{
    char *seen = calloc(n, 1);
    ck_assert_ptr_nonnull(seen);
    uint64_t total = 0;
    for (int i = 0; i < r->nparts; i++) {
        const part *p = &r->parts[i];
        ck_assert_int_gt(p->n, 0);
        ck_assert_uint_eq(p->off, total);
        ck_assert_ptr_eq(p->idx, r->idx + total);
        ck_assert_uint_eq(p->dedupe_id, ((uint64_t)r->ts << 16) | (uint64_t)i);
        if (i)
            ck_assert_int_gt(p->server, r->parts[i - 1].server);
        for (uint64_t k = 0; k < p->n; k++) {
            uint32_t row = p->idx[k];
            LOOP_ASSERT(row < n, "row %u of %llu", row, (unsigned long long)n);
            LOOP_ASSERT(!seen[row], "row %u planned twice", row);
            LOOP_ASSERT(k == 0 || p->idx[k - 1] < row, "rows out of order in part %d", i);
            LOOP_ASSERT(owner_here(w, t, keys[row], pull) == p->server,
                        "key %llu in the part of server %d, owned by %d",
                        (unsigned long long)keys[row], p->server,
                        owner_here(w, t, keys[row], pull));
            seen[row] = 1;
        }
        total += p->n;
    }
    ck_assert_uint_eq(total, n);
    ck_assert_int_eq(r->pending, r->nparts);
    free(seen);
}

START_TEST(keys_grouped_by_partition_owner)
{
    pskv_worker *w = handle_new(100000, 2, 1 << 20);
    enum { N = 5000 };
    uint64_t *keys = malloc(N * sizeof *keys);
    ck_assert_ptr_nonnull(keys);
    for (int pull = 0; pull < 2; pull++)
        for (int ti = 0; ti < 2; ti++) {
            tbl *t = &w->tables[ti];
            for (uint64_t i = 0; i < N; i++)
                keys[i] = ti ? i * 2654435761u + 17 : (i * 7919) % t->size;
            req *r = req_new();
            ck_assert_int_eq(wplan_keys(w, r, t, keys, N, pull), 0);
            ck_assert_int_eq(r->nparts, NSRV); /* 5000 keys reach every server */
            check_keys_plan(w, r, t, keys, N, pull);
            req_free(r);
        }
    free(keys);
    handle_free(w);
}
END_TEST

START_TEST(keys_of_a_lost_partition_fail)
{
    pskv_worker *w = handle_new(1000, 1, 1 << 20);
    tbl *t = &w->tables[1];
    uint64_t keys[64];
    for (int i = 0; i < 64; i++)
        keys[i] = (uint64_t)i * 31 + 1;
    uint32_t lost = ring_partition_of(ring_mix64(keys[40]), w->nparts);
    w->head[lost] = -1;
    req *r = req_new();
    ck_assert_int_eq(wplan_keys(w, r, t, keys, 64, 0), -PSKV_ELOST);
    ck_assert_ptr_nonnull(strstr(w->last_error, "whose every replica died"));
    req_free(r);
    r = req_new(); /* pulls read the tails: still placed */
    ck_assert_int_eq(wplan_keys(w, r, t, keys, 64, 1), 0);
    check_keys_plan(w, r, t, keys, 64, 1);
    req_free(r);
    handle_free(w);
}
END_TEST

/* A dense run [first, first+n): the parts' runs cover it once, each run's rows
 * owned by its part's server, no part over the chunk, one run a part when single. */
static void check_run_plan(const pskv_worker *w, const req *r, const tbl *t, uint64_t first,
                           uint64_t n, int pull, int single, uint64_t chunk)
{
    char *seen = calloc(n, 1);
    ck_assert_ptr_nonnull(seen);
    uint64_t total = 0, segs = 0;
    for (int i = 0; i < r->nparts; i++) {
        const part *p = &r->parts[i];
        ck_assert_int_gt(p->n, 0);
        ck_assert_uint_le(p->n, chunk);
        ck_assert_uint_eq(p->seg0, segs);
        ck_assert_uint_eq(p->off, total);
        if (single)
            ck_assert_uint_eq(p->nseg, 1);
        uint64_t rows = 0;
        for (uint64_t s = p->seg0; s < p->seg0 + p->nseg; s++) {
            uint64_t f = r->segs[2 * s], c = r->segs[2 * s + 1];
            ck_assert_uint_ge(f, first);
            ck_assert_uint_le(f + c, first + n);
            for (uint64_t k = f; k < f + c; k++) {
                LOOP_ASSERT(!seen[k - first], "key %llu planned twice", (unsigned long long)k);
                LOOP_ASSERT(owner_here(w, t, k, pull) == p->server,
                            "key %llu in the part of server %d, owned by %d",
                            (unsigned long long)k, p->server, owner_here(w, t, k, pull));
                seen[k - first] = 1;
            }
            rows += c;
        }
        ck_assert_uint_eq(rows, p->n);
        segs += p->nseg;
        total += p->n;
    }
    ck_assert_uint_eq(total, n);
    ck_assert_uint_eq(r->first, first);
    ck_assert_int_eq(r->pending, r->nparts);
    free(seen);
}

START_TEST(runs_cut_by_owner_and_chunk)
{
    /* width 4, 1 KiB chunks: 64 rows a part */
    pskv_worker *w = handle_new(10000, 4, 1024);
    tbl *t = &w->tables[0];
    const uint64_t cases[][2] = {{0, 10000}, {1234, 3000}, {9990, 10}, {17, 1}, {600, 64}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int pull = 0; pull < 2; pull++)
            for (int single = 0; single < 2; single++) {
                req *r = req_new();
                ck_assert_int_eq(
                    wplan_run(w, r, t, cases[c][0], cases[c][1], pull, single), 0);
                check_run_plan(w, r, t, cases[c][0], cases[c][1], pull, single, 64);
                req_free(r);
            }
    /* more partitions than keys: empty partitions make no part */
    pskv_worker *tiny = handle_new(5, 1, 1 << 20);
    req *r = req_new();
    ck_assert_int_eq(wplan_run(tiny, r, &tiny->tables[0], 0, 5, 0, 0), 0);
    check_run_plan(tiny, r, &tiny->tables[0], 0, 5, 0, 0, 5);
    ck_assert_int_le(r->nparts, NSRV);
    req_free(r);
    handle_free(tiny);
    handle_free(w);
}
END_TEST

START_TEST(run_server_only_when_one_head)
{
    pskv_worker *w = handle_new(16000, 1, 1 << 20); /* 1000 keys a partition */
    tbl *t = &w->tables[0];
    uint64_t lo, cnt;
    ring_dense_span(ring_partition_begin(5, NPARTS), ring_partition_end(5, NPARTS), t->size, &lo,
                    &cnt);
    ck_assert_int_eq(wplan_run_server(w, t, lo, cnt), 5 % NSRV);
    ck_assert_int_eq(wplan_run_server(w, t, lo + 1, 10), 5 % NSRV);
    ck_assert_int_eq(wplan_run_server(w, t, lo, cnt + 1), -1); /* into partition 6 */
    ck_assert_int_eq(wplan_run_server(w, t, lo, 0), -1);
    w->chunk_bytes = 8 * sizeof(float); /* larger than one part */
    ck_assert_int_eq(wplan_run_server(w, t, lo, 9), -1);
    ck_assert_int_eq(wplan_run_server(w, t, lo, 8), 5 % NSRV);
    w->head[5] = -1; /* its head lost */
    ck_assert_int_eq(wplan_run_server(w, t, lo, 8), -1);
    handle_free(w);
}
END_TEST

/* A lent push: gathered (0, one part a server and chunk) while its runs are short,
 * one run a part (1) when they are long or already one a part. */
START_TEST(lent_runs_gathered_when_short)
{
    /* 16 partitions, heads alternating over 3 servers: 16 runs in a whole table */
    pskv_worker *w = handle_new(16 * 1024, 1, 1 << 30); /* 4 KiB runs */
    tbl *t = &w->tables[0];
    req *r = req_new();
    ck_assert_int_eq(wplan_run_lend(w, r, t, 0, t->size), 0);
    check_run_plan(w, r, t, 0, t->size, 0, 0, t->size);
    ck_assert_int_eq(r->nparts, NSRV); /* one message a server */
    req_free(r);
    handle_free(w);

    w = handle_new(16 * (WPLAN_LEND_MIN_RUN / 4), 1, 1 << 30); /* runs of the threshold */
    t = &w->tables[0];
    r = req_new();
    ck_assert_int_eq(wplan_run_lend(w, r, t, 0, t->size), 1);
    check_run_plan(w, r, t, 0, t->size, 0, 1, t->size);
    ck_assert_int_eq(r->nparts, NPARTS);
    req_free(r);
    /* a run inside one partition: one part, lent */
    r = req_new();
    ck_assert_int_eq(wplan_run_lend(w, r, t, 10, 100), 1);
    check_run_plan(w, r, t, 10, 100, 0, 1, t->size);
    ck_assert_int_eq(r->nparts, 1);
    req_free(r);
    handle_free(w);

    w = handle_new(16 * 1024, 1, 1 << 30);
    for (int p = 0; p < NPARTS; p++) /* one server heads them all: one run */
        w->head[p] = 1;
    t = &w->tables[0];
    r = req_new();
    ck_assert_int_eq(wplan_run_lend(w, r, t, 0, t->size), 1);
    check_run_plan(w, r, t, 0, t->size, 0, 1, t->size);
    ck_assert_int_eq(r->nparts, 1);
    req_free(r);
    w->head[3] = -1; /* a lost partition fails as wplan_run does */
    r = req_new();
    ck_assert_int_eq(wplan_run_lend(w, r, t, 0, t->size), -PSKV_ELOST);
    req_free(r);
    handle_free(w);
}
END_TEST

Suite *wplan_suite(void)
{
    Suite *s = suite_create("wplan");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, check_table_refuses_bad_requests);
    tcase_add_test(tc, is_run_only_for_ascending_runs);
    tcase_add_test(tc, keys_grouped_by_partition_owner);
    tcase_add_test(tc, keys_of_a_lost_partition_fail);
    tcase_add_test(tc, runs_cut_by_owner_and_chunk);
    tcase_add_test(tc, run_server_only_when_one_head);
    tcase_add_test(tc, lent_runs_gathered_when_short);
    suite_add_tcase(s, tc);
    return s;
}
