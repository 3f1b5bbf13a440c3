/* Tests of shards (server/store/shard.c): deterministic initial values that do not
 * depend on how the key space is split, push/pull for dense runs and key lists,
 * ownership checks, and the sparse hash map under growth (and while it grows). */
#include <malloc.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"
#include "store/shard.h"
#include "store/shard_impl.h"
#include "suites.h"

static const upd_opts SUM = {.kind = UPD_SUM, .lr = 0, .momentum = 0, .l2 = 0, .eps = 0};

static shard *dense_shard(uint64_t first, uint64_t count, uint32_t width, const upd_opts *u,
                          const shard_init *init)
{
    shard *s = shard_new(1, first, count, 0, UINT64_MAX, width, u, init);
    ck_assert_ptr_nonnull(s);
    return s;
}

START_TEST(init_parse)
{
    ck_assert_int_eq(shard_init_parse("zero"), INIT_ZERO);
    ck_assert_int_eq(shard_init_parse("const"), INIT_CONST);
    ck_assert_int_eq(shard_init_parse("uniform"), INIT_UNIFORM);
    ck_assert_int_eq(shard_init_parse("normal"), INIT_NORMAL);
    ck_assert_int_eq(shard_init_parse("xavier"), -1);
    ck_assert_int_eq(shard_init_parse(""), -1);
}
END_TEST

START_TEST(init_values)
{
    shard_init z = {INIT_ZERO, 3, 1}, c = {INIT_CONST, 0.75f, 1};
    for (uint64_t k = 0; k < 100; k++) {
        LOOP_ASSERT(shard_init_value(&z, k * 977, 0) == 0.0f, "zero init of %llu",
                    (unsigned long long)k);
        LOOP_ASSERT(shard_init_value(&c, k * 977, (uint32_t)k) == 0.75f, "const init of %llu",
                    (unsigned long long)k);
    }
    /* Uniform: inside [-scale, scale], centred, deterministic, varying with key,
     * column and seed. */
    enum { N = 20000 };
    shard_init u = {INIT_UNIFORM, 0.5f, 42}, u2 = {INIT_UNIFORM, 0.5f, 43};
    double sum = 0, sq = 0;
    int same_seed = 0, same_col = 0;
    for (uint64_t k = 0; k < N; k++) {
        float v = shard_init_value(&u, k, 0);
        LOOP_ASSERT(v >= -0.5f && v <= 0.5f, "uniform init %g of key %llu", (double)v,
                    (unsigned long long)k);
        LOOP_ASSERT(v == shard_init_value(&u, k, 0), "init of key %llu changed",
                    (unsigned long long)k);
        same_seed += v == shard_init_value(&u2, k, 0);
        same_col += v == shard_init_value(&u, k, 1);
        sum += v;
        sq += (double)v * v;
    }
    ck_assert_double_lt(fabs(sum / N), 0.01);
    ck_assert_double_eq_tol(sq / N, 0.25 / 3, 0.005); /* variance of U(-a, a) = a^2/3 */
    ck_assert_int_lt(same_seed, 10);
    ck_assert_int_lt(same_col, 10);
    /* Normal: mean 0, standard deviation = scale. */
    shard_init nrm = {INIT_NORMAL, 2.0f, 7};
    sum = sq = 0;
    for (uint64_t k = 0; k < N; k++) {
        float v = shard_init_value(&nrm, k * 0x10001, (uint32_t)(k % 3));
        LOOP_ASSERT(isfinite(v), "normal init of key %llu", (unsigned long long)k);
        sum += v;
        sq += (double)v * v;
    }
    ck_assert_double_lt(fabs(sum / N), 0.05);
    ck_assert_double_eq_tol(sqrt(sq / N), 2.0, 0.08);
}
END_TEST

/* A dense shard starts at shard_init_value of its global indices, so two shards
 * splitting 0..n-1 hold exactly what one shard over 0..n-1 holds. */
START_TEST(dense_init_independent_of_split)
{
    enum { N = 100, W = 3, CUT = 37 };
    shard_init init = {INIT_UNIFORM, 1.0f, 0x1234};
    shard *whole = dense_shard(0, N, W, &SUM, &init);
    shard *lo = dense_shard(0, CUT, W, &SUM, &init);
    shard *hi = dense_shard(CUT, N - CUT, W, &SUM, &init);
    float a[N * W], b[N * W];
    shard_pull(whole, NULL, 0, N, a);
    shard_pull(lo, NULL, 0, CUT, b);
    shard_pull(hi, NULL, CUT, N - CUT, b + CUT * W);
    ck_assert_mem_eq(a, b, sizeof a);
    for (uint64_t i = 0; i < N; i++)
        for (uint32_t j = 0; j < W; j++)
            ck_assert_float_eq(a[i * W + j], shard_init_value(&init, i, j));
    ck_assert_uint_eq(shard_size(whole), N);
    ck_assert_uint_eq(shard_size(hi), N - CUT);
    shard_destroy(&whole);
    shard_destroy(&lo);
    shard_destroy(&hi);
    ck_assert_ptr_null(whole);
    shard_destroy(&whole); /* NULL-safe */
    shard_destroy(NULL);
}
END_TEST

START_TEST(dense_push_pull_run)
{
    enum { FIRST = 1000, N = 50, W = 4 };
    shard_init init = {INIT_CONST, 0.5f, 0};
    shard *s = dense_shard(FIRST, N, W, &SUM, &init);
    /* Push a run in the middle: indices FIRST+10 .. FIRST+29. */
    float g[20 * W];
    for (int i = 0; i < 20 * W; i++)
        g[i] = (float)(i + 1);
    ck_assert_int_eq(shard_push(s, NULL, FIRST + 10, 20, g), 0);
    ck_assert_int_eq(shard_push(s, NULL, FIRST + 10, 20, g), 0);
    float out[N * W];
    shard_pull(s, NULL, FIRST, N, out);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < W; j++) {
            float want = 0.5f;
            if (i >= 10 && i < 30)
                want += 2.0f * (float)((i - 10) * W + j + 1);
            ck_assert_float_eq(out[i * W + j], want);
        }
    /* Partial pull of the tail. */
    float tail[3 * W];
    shard_pull(s, NULL, FIRST + N - 3, 3, tail);
    ck_assert_mem_eq(tail, out + (N - 3) * W, sizeof tail);
    shard_destroy(&s);
}
END_TEST

START_TEST(dense_push_pull_keys)
{
    enum { FIRST = 20, N = 10, W = 2 };
    shard_init init = {INIT_ZERO, 0, 0};
    shard *s = dense_shard(FIRST, N, W, &SUM, &init);
    uint64_t keys[4] = {27, 20, 27, 29}; /* a repeated key gets both rows */
    float g[4 * W] = {1, 2, 10, 20, 100, 200, 1000, 2000};
    ck_assert_int_eq(shard_push(s, keys, 0, 4, g), 0);
    uint64_t want_keys[5] = {29, 21, 27, 20, 27};
    float out[5 * W];
    shard_pull(s, want_keys, 0, 5, out);
    const float want[5 * W] = {1000, 2000, 0, 0, 101, 202, 10, 20, 101, 202};
    ck_assert_mem_eq(out, want, sizeof want);
    shard_destroy(&s);
}
END_TEST

/* Optimizer state follows each key: momentum through a dense shard by key list. */
START_TEST(dense_momentum_state)
{
    upd_opts u = {.kind = UPD_SGD, .lr = 0.25f, .momentum = 0.5f, .l2 = 0, .eps = 0};
    shard_init init = {INIT_CONST, 1.0f, 0};
    shard *s = dense_shard(0, 4, 1, &u, &init);
    uint64_t k2 = 2;
    float g1 = 2, g2 = 4;
    ck_assert_int_eq(shard_push(s, &k2, 0, 1, &g1), 0);
    ck_assert_int_eq(shard_push(s, &k2, 0, 1, &g2), 0);
    float out[4];
    shard_pull(s, NULL, 0, 4, out);
    ck_assert_float_eq(out[2], -0.75f); /* see test_updater.c sgd_momentum_two_steps */
    ck_assert_float_eq(out[0], 1.0f);
    ck_assert_float_eq(out[3], 1.0f);
    shard_destroy(&s);
}
END_TEST

/* An assign of a dense run (one copy: bsp's accumulators take a worker's first
 * push of a clock so) overwrites its rows, clears their momentum and marks them
 * changed; the rows around keep their values and state. */
START_TEST(dense_assign_run)
{
    upd_opts u = {.kind = UPD_SGD, .lr = 0.25f, .momentum = 0.5f, .l2 = 0, .eps = 0};
    shard_init init = {INIT_CONST, 1.0f, 0};
    shard *s = dense_shard(0, 6, 1, &u, &init);
    float g[6] = {2, 2, 2, 2, 2, 2}, v[3] = {7, -0.0f, 9}, out[6];
    ck_assert_int_eq(shard_push(s, NULL, 0, 6, g), 0); /* v = 2, w = 0.5 */
    shard_changes_reset(s);
    ck_assert_int_eq(shard_assign(s, NULL, 2, 3, v), 0);
    ck_assert_uint_eq(shard_changed(s, 0, 6, NULL, NULL), 3);
    shard_pull(s, NULL, 0, 6, out);
    ck_assert(out[0] == 0.5f && out[1] == 0.5f && out[5] == 0.5f);
    ck_assert(out[2] == 7.0f && out[4] == 9.0f);
    ck_assert(out[3] == 0.0f && signbit(out[3])); /* the bits copied */
    ck_assert_int_eq(shard_push(s, NULL, 0, 6, g), 0);
    shard_pull(s, NULL, 0, 6, out);
    ck_assert_float_eq(out[0], -0.25f); /* v = 0.5 * 2 + 2: w = 0.5 - 0.25 * 3 */
    ck_assert_float_eq(out[2], 6.5f);   /* v = 0 + 2: w = 7 - 0.25 * 2 */
    shard_destroy(&s);
}
END_TEST

/* A lent run never changes while lent: pushes and assigns move the shard to a
 * fresh buffer (a push copies the rows it does not write and updates
 * the rest, with momentum state); once the lend ends, updates are in place. */
START_TEST(dense_lend_copy_on_write)
{
    upd_opts sgd = {.kind = UPD_SGD, .lr = 0.5f, .momentum = 0.9f, .l2 = 0, .eps = 0};
    shard_init z = {INIT_CONST, 1.0f, 3};
    shard *s = dense_shard(10, 4000, 2, &sgd, &z);
    float g[8000], out[8000];
    for (int i = 0; i < 8000; i++)
        g[i] = (float)(i % 7);
    void *tok1, *tok2;
    const float *lent = shard_lend(s, 10, 4000, &tok1);
    const float *part = shard_lend(s, 1010, 1000, &tok2);
    ck_assert_ptr_eq(part, lent + 2000);
    ck_assert_int_eq(shard_push(s, NULL, 1010, 1000, g), 0); /* moves: lent twice */
    for (int i = 0; i < 8000; i++)
        LOOP_ASSERT(lent[i] == 1.0f, "lent value %d changed to %g", i, (double)lent[i]);
    shard_pull(s, NULL, 10, 4000, out);
    for (int i = 0; i < 8000; i++) {
        float want = (i >= 2000 && i < 4000) ? 1.0f - 0.5f * (float)((i - 2000) % 7) : 1.0f;
        LOOP_ASSERT(out[i] == want, "value %d = %g, want %g", i, (double)out[i], (double)want);
    }
    shard_lend_end(NULL, tok1);
    shard_lend_end(NULL, tok2); /* the old buffer is freed here (ASan checks) */
    const float *now = shard_lend(s, 10, 4000, &tok1);
    ck_assert_int_eq(shard_assign(s, NULL, 10, 1, g + 1), 0);
    ck_assert(now[0] == out[0] && now[1] == out[1]); /* the lent row as it was */
    shard_pull(s, NULL, 10, 1, out);
    ck_assert(out[0] == g[1] && out[1] == g[2]); /* the shard's row assigned */
    shard_pull(s, NULL, 11, 1, out);
    ck_assert(out[0] == now[2] && out[1] == now[3]); /* the rest copied */
    shard_lend_end(NULL, tok1);
    const float *before = shard_dense_values(s);
    ck_assert_int_eq(shard_push(s, NULL, 10, 4000, g), 0); /* not lent: in place */
    ck_assert_ptr_eq(shard_dense_values(s), before);
    /* the momentum kept across the move: float 2001 had v = 1 (w = 0.5), then
     * v = 0.9 + 6, w = 0.5 - 0.5 * 6.9; float 2000 had v = 0, then v = 5 */
    shard_pull(s, NULL, 1010, 1, out);
    ck_assert(fabsf(out[0] - -1.5f) < 1e-6f && fabsf(out[1] - -2.95f) < 1e-5f);
    shard_lend(s, 10, 4000, &tok1);
    shard_destroy(&s); /* the lent buffer outlives the shard */
    shard_lend_end(NULL, tok1);
}
END_TEST

/* Rows no reply is sending are updated in place while other rows are lent (the
 * parts of a combined push-and-pull: part k's reply on the wire while part k+1's
 * push is applied); a push of a lent row moves the shard, whose lent rows stay
 * as they were sent. At most LEND_SLOTS (64) runs of a buffer are lent at once:
 * past that shard_lend answers NULL (the caller copies), and an ended lend frees
 * its slot. */
START_TEST(dense_lend_disjoint_in_place)
{
    shard_init z = {INIT_CONST, 1.0f, 3};
    shard *s = dense_shard(0, 4000, 2, &SUM, &z);
    float g[8000], out[8000];
    for (int i = 0; i < 8000; i++)
        g[i] = 1.0f;
    void *tok[65];
    const float *lent = shard_lend(s, 0, 1000, &tok[0]); /* rows 0..999 on the wire */
    const float *before = shard_dense_values(s);
    ck_assert_ptr_eq(lent, before);
    ck_assert_int_eq(shard_push(s, NULL, 1000, 1000, g), 0); /* rows 1000..1999: not lent */
    ck_assert_ptr_eq(shard_dense_values(s), before);
    uint64_t lends, moves;
    shard_lend_stats(s, &lends, &moves);
    ck_assert_uint_eq(lends, 1);
    ck_assert_uint_eq(moves, 0);
    shard_pull(s, NULL, 1000, 1, out);
    ck_assert(out[0] == 2.0f && out[1] == 2.0f);
    ck_assert_int_eq(shard_push(s, NULL, 999, 2, g), 0); /* row 999 is lent: moves */
    ck_assert_ptr_ne(shard_dense_values(s), before);
    shard_lend_stats(s, &lends, &moves);
    ck_assert_uint_eq(moves, 1);
    for (int i = 0; i < 2000; i++)
        LOOP_ASSERT(lent[i] == 1.0f, "lent value %d changed to %g", i, (double)lent[i]);
    shard_pull(s, NULL, 998, 3, out);
    ck_assert(out[0] == 1.0f && out[2] == 2.0f && out[4] == 3.0f);
    shard_lend_end(NULL, tok[0]); /* the old buffer is freed here (ASan checks) */
    /* the slots: 64 lends of the new buffer, then none; one ended frees one */
    for (int i = 0; i < 64; i++)
        ck_assert_ptr_nonnull(shard_lend(s, (uint64_t)i * 10, 10, &tok[i]));
    ck_assert_ptr_null(shard_lend(s, 3000, 10, &tok[64]));
    shard_lend_end(NULL, tok[5]);
    ck_assert_ptr_nonnull(shard_lend(s, 3000, 10, &tok[5]));
    before = shard_dense_values(s);
    ck_assert_int_eq(shard_push(s, NULL, 3010, 990, g), 0); /* past every lend: in place */
    ck_assert_ptr_eq(shard_dense_values(s), before);
    for (int i = 0; i < 64; i++)
        shard_lend_end(NULL, tok[i]);
    shard_destroy(&s);
}
END_TEST

START_TEST(dense_ownership)
{
    shard_init init = {INIT_ZERO, 0, 0};
    shard *s = dense_shard(10, 20, 1, &SUM, &init); /* indices 10..29 */
    ck_assert_int_eq(shard_owns_key(s, 9), 0);
    ck_assert_int_eq(shard_owns_key(s, 10), 1);
    ck_assert_int_eq(shard_owns_key(s, 29), 1);
    ck_assert_int_eq(shard_owns_key(s, 30), 0);
    ck_assert_int_eq(shard_owns_key(s, 0), 0);
    ck_assert_int_eq(shard_owns_key(s, UINT64_MAX), 0);

    ck_assert_int_eq(shard_owns_run(s, 10, 20), 1);
    ck_assert_int_eq(shard_owns_run(s, 10, 1), 1);
    ck_assert_int_eq(shard_owns_run(s, 29, 1), 1);
    ck_assert_int_eq(shard_owns_run(s, 15, 15), 1);
    ck_assert_int_eq(shard_owns_run(s, 10, 21), 0);
    ck_assert_int_eq(shard_owns_run(s, 29, 2), 0);
    ck_assert_int_eq(shard_owns_run(s, 30, 1), 0);
    ck_assert_int_eq(shard_owns_run(s, 9, 1), 0);
    ck_assert_int_eq(shard_owns_run(s, 9, 5), 0);
    ck_assert_int_eq(shard_owns_run(s, 0, 30), 0);
    /* Counts that would wrap around 2^64 are not owned. */
    ck_assert_int_eq(shard_owns_run(s, 11, UINT64_MAX), 0);
    ck_assert_int_eq(shard_owns_run(s, 29, UINT64_MAX - 28), 0);
    ck_assert_int_eq(shard_owns_run(s, UINT64_MAX, 2), 0);
    shard_destroy(&s);

    /* A server whose range holds no index of a small table owns nothing. */
    s = dense_shard(5, 0, 1, &SUM, &init);
    ck_assert_int_eq(shard_owns_key(s, 5), 0);
    ck_assert_int_eq(shard_owns_run(s, 5, 1), 0);
    ck_assert_uint_eq(shard_size(s), 0);
    shard_destroy(&s);
}
END_TEST

START_TEST(sparse_ownership)
{
    shard_init init = {INIT_ZERO, 0, 0};
    uint64_t half = (uint64_t)1 << 63;
    shard *lo = shard_new(0, 0, 0, 0, half - 1, 1, &SUM, &init);
    shard *hi = shard_new(0, 0, 0, half, UINT64_MAX, 1, &SUM, &init);
    ck_assert_ptr_nonnull(lo);
    ck_assert_ptr_nonnull(hi);
    for (uint64_t k = 0; k < 5000; k++) {
        int want_lo = ring_mix64(k) < half;
        LOOP_ASSERT(shard_owns_key(lo, k) == want_lo, "key %llu", (unsigned long long)k);
        LOOP_ASSERT(shard_owns_key(hi, k) == !want_lo, "key %llu", (unsigned long long)k);
    }
    /* Dense runs never address a sparse shard. */
    ck_assert_int_eq(shard_owns_run(lo, 0, 1), 0);
    ck_assert_uint_eq(shard_size(lo), 0);
    shard_destroy(&lo);
    shard_destroy(&hi);
}
END_TEST

static int odd_key(void *ctx, uint64_t key)
{
    (void)ctx;
    return (int)(key & 1);
}

START_TEST(sparse_retain)
{
    /* a partition let go: the rows it rejects go, the others keep values and state */
    enum { N = 3000 };
    upd_opts ada = {.kind = UPD_ADAGRAD, .lr = 0.1f, .momentum = 0, .l2 = 0, .eps = 1e-8f};
    shard_init init = {INIT_CONST, 0.5f, 0};
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &ada, &init);
    ck_assert_ptr_nonnull(s);
    uint64_t keys[N];
    float g[N], after[N];
    for (uint64_t i = 0; i < N; i++) {
        keys[i] = i * 7919 + 1;
        g[i] = (float)(i % 13) - 6.0f;
    }
    ck_assert_int_eq(shard_push(s, keys, 0, N, g), 0);
    ck_assert_int_eq(shard_retain(s, odd_key, NULL), N / 2);
    ck_assert_uint_eq(shard_size(s), N / 2);
    ck_assert_int_eq(shard_retain(s, odd_key, NULL), 0);
    ck_assert_int_eq(shard_push(s, keys, 0, N, g), 0); /* the state came along */
    shard_pull(s, keys, 0, N, after);
    shard *t = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &ada, &init);
    ck_assert_int_eq(shard_push(t, keys, 0, N, g), 0);
    ck_assert_int_eq(shard_push(t, keys, 0, N, g), 0);
    float twice[N], once[N];
    shard_pull(t, keys, 0, N, twice);
    shard_destroy(&t);
    t = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &ada, &init);
    ck_assert_int_eq(shard_push(t, keys, 0, N, g), 0);
    shard_pull(t, keys, 0, N, once);
    for (uint64_t i = 0; i < N; i++) /* kept rows: two steps; dropped ones: one, afresh */
        LOOP_ASSERT(after[i] == (odd_key(NULL, keys[i]) ? twice[i] : once[i]), "key #%llu",
                    (unsigned long long)i);
    shard_destroy(&t);
    shard_destroy(&s);
}
END_TEST

/* 100k distinct keys pushed in two rounds (the map grows many times): every key
 * reads back init + g1 + g2 exactly, and the size counts each key once. */
START_TEST(sparse_many_keys)
{
    enum { N = 100000, W = 2, BATCH = 4096 };
    shard_init init = {INIT_CONST, 0.5f, 0};
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, W, &SUM, &init);
    ck_assert_ptr_nonnull(s);
    uint64_t *keys = malloc(N * sizeof *keys);
    float *g = malloc((size_t)N * W * sizeof *g), *out = malloc((size_t)N * W * sizeof *out);
    ck_assert(keys && g && out);
    for (uint64_t i = 0; i < N; i++) {
        keys[i] = i * 0x9e3779b97f4a7c15ULL + 17; /* distinct, spread; includes large keys */
        g[i * W] = (float)(i % 1000);
        g[i * W + 1] = -(float)(i % 777);
    }
    for (int round = 0; round < 2; round++)
        for (uint64_t at = 0; at < N; at += BATCH) {
            uint64_t n = N - at < BATCH ? N - at : BATCH;
            ck_assert_int_eq(shard_push(s, keys + at, 0, n, g + at * W), 0);
        }
    ck_assert_uint_eq(shard_size(s), N);
    shard_pull(s, keys, 0, N, out);
    for (uint64_t i = 0; i < N; i++) {
        LOOP_ASSERT(out[i * W] == 0.5f + 2.0f * (float)(i % 1000), "key #%llu column 0: %g",
                    (unsigned long long)i, (double)out[i * W]);
        LOOP_ASSERT(out[i * W + 1] == 0.5f - 2.0f * (float)(i % 777), "key #%llu column 1: %g",
                    (unsigned long long)i, (double)out[i * W + 1]);
    }
    /* Pulling in another order gives the same rows. */
    uint64_t some[3] = {keys[N - 1], keys[0], keys[N / 2]};
    float three[3 * W];
    shard_pull(s, some, 0, 3, three);
    ck_assert_float_eq(three[0], out[(N - 1) * W]);
    ck_assert_float_eq(three[2], out[0]);
    ck_assert_float_eq(three[5], out[(N / 2) * W + 1]);
    free(keys);
    free(g);
    free(out);
    shard_destroy(&s);
}
END_TEST

START_TEST(sparse_unpushed_keys)
{
    enum { W = 3 };
    shard_init init = {INIT_UNIFORM, 0.1f, 99};
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, W, &SUM, &init);
    ck_assert_ptr_nonnull(s);
    /* Before any push (the map does not exist yet). */
    uint64_t never[4] = {0, 1, 123456789, UINT64_MAX};
    float out[4 * W];
    shard_pull(s, never, 0, 4, out);
    for (int i = 0; i < 4; i++)
        for (uint32_t j = 0; j < W; j++)
            ck_assert_float_eq(out[i * W + j], shard_init_value(&init, never[i], j));
    ck_assert_uint_eq(shard_size(s), 0);

    /* After a push: the pushed key starts from its init value, others stay init. */
    uint64_t k = 555;
    float g[W] = {1, 2, 3};
    ck_assert_int_eq(shard_push(s, &k, 0, 1, g), 0);
    float row[W];
    shard_pull(s, &k, 0, 1, row);
    for (uint32_t j = 0; j < W; j++)
        ck_assert_float_eq(row[j], shard_init_value(&init, k, j) + g[j]);
    shard_pull(s, never, 0, 4, out);
    for (int i = 0; i < 4; i++)
        for (uint32_t j = 0; j < W; j++)
            ck_assert_float_eq(out[i * W + j], shard_init_value(&init, never[i], j));
    ck_assert_uint_eq(shard_size(s), 1);

    /* Same init rule, same key: a dense shard and a sparse shard agree. */
    shard *d = dense_shard(0, 2, W, &SUM, &init);
    uint64_t one = 1;
    float dv[W], sv[W];
    shard_pull(d, &one, 0, 1, dv);
    shard_pull(s, &one, 0, 1, sv);
    ck_assert_mem_eq(dv, sv, sizeof dv);
    shard_destroy(&d);
    shard_destroy(&s);
}
END_TEST

/* Adagrad state travels with each sparse row across map growth, and starts at 0. */
START_TEST(sparse_state_survives_growth)
{
    enum { N = 3000 };
    upd_opts u = {.kind = UPD_ADAGRAD, .lr = 0.5f, .momentum = 0, .l2 = 0, .eps = 1e-3f};
    shard_init init = {INIT_CONST, 1.0f, 0};
#ifdef M_PERTURB
    /* glibc: fill fresh allocations with 0x7f bytes, so state that is not zeroed
     * on creation shows as huge values. */
    mallopt(M_PERTURB, 0x80);
#endif
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &u, &init);
    ck_assert_ptr_nonnull(s);
    float g1 = 2, g2 = 1;
    for (uint64_t k = 1000; k < 1000 + N; k++) /* grows the map past 1024 and 2048 slots */
        ck_assert_int_eq(shard_push(s, &k, 0, 1, &g1), 0);
    for (uint64_t k = 1000; k < 1000 + N; k++)
        ck_assert_int_eq(shard_push(s, &k, 0, 1, &g2), 0);
    /* Reference: the same two steps on one float with its own zeroed state. */
    float w = 1, h = 0;
    upd_apply(&u, &w, &h, &g1, 1);
    upd_apply(&u, &w, &h, &g2, 1);
    for (uint64_t k = 1000; k < 1000 + N; k++) {
        float got;
        shard_pull(s, &k, 0, 1, &got);
        LOOP_ASSERT(got == w, "key %llu holds %g, expected %g", (unsigned long long)k,
                    (double)got, (double)w);
    }
    ck_assert_uint_eq(shard_size(s), N);
    shard_destroy(&s);
#ifdef M_PERTURB
    mallopt(M_PERTURB, 0);
#endif
}
END_TEST

/* The push pipeline (shard_push.c) reads a key's slots some keys ahead of
 * applying it: pushes mixing keys with rows, new keys, a new key twice in one
 * push and keys far from their home slot, in pushes that grow the map past
 * 65,536 slots (where it prefetches) and move rows while they run, must sum
 * exactly as one key at a time would. */
START_TEST(sparse_push_pipeline)
{
    enum { NK = 150000, PUSHES = 60, PER = 6000 };
    shard_init init = {INIT_ZERO, 0, 0};
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &SUM, &init);
    ck_assert_ptr_nonnull(s);
    uint64_t *keys = malloc(PER * sizeof *keys), *all = malloc(NK * sizeof *all);
    float *g = malloc(PER * sizeof *g), *out = malloc(NK * sizeof *out);
    double *want = calloc(NK, sizeof *want);
    ck_assert(keys && all && g && out && want);
    for (uint64_t i = 0; i < NK; i++)
        all[i] = ring_mix64(i + 1);
    uint64_t x = 88172645463325252ULL, made = 0;
    for (int p = 0; p < PUSHES; p++) {
        for (int k = 0; k < PER; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            uint64_t i;
            if (made < NK && (made < 64 || x % 8 < 5))
                i = made++; /* a new key */
            else if (k > 0 && x % 8 == 5)
                i = (uint64_t)(keys[k - 1] == all[made - 1] ? made - 1 : x % made); /* again */
            else
                i = (x >> 8) % made;
            keys[k] = all[i];
            g[k] = (float)(1 + x % 7);
            want[i] += g[k];
        }
        ck_assert_int_eq(shard_push(s, keys, 0, PER, g), 0);
    }
    ck_assert_uint_eq(shard_size(s), made);
    ck_assert_uint_eq(made, NK);
    shard_pull(s, all, 0, NK, out);
    for (uint64_t i = 0; i < NK; i++)
        LOOP_ASSERT(out[i] == (float)want[i], "key #%llu reads %g, pushed %g in all",
                    (unsigned long long)i, (double)out[i], want[i]);
    free(keys);
    free(all);
    free(g);
    free(out);
    free(want);
    shard_destroy(&s);
}
END_TEST

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t sum_ctx_n;
static double sum_ctx_v;
static void sum_rows(void *ctx, uint64_t key, const float *row)
{
    (void)ctx;
    (void)key;
    sum_ctx_n++;
    sum_ctx_v += row[0];
}

/* A large map grows by moving its rows to the doubled map a few at a time
 * (shard_map.c): one push of 50,000 new keys doubles a 65,536-slot map past
 * 45,875 rows and ends with most rows still in the old map. Every key must
 * read back, be listed once by foreach and export, take a second push, and
 * an eviction sweep must wait for the move, then remove every row. */
START_TEST(sparse_lookup_while_growing)
{
    enum { N = 50000 };
    shard_init init = {INIT_ZERO, 0, 0};
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &SUM, &init);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(shard_admission(s, 0, 2), 0);
    shard_tag(s, 1, 0);
    uint64_t *keys = malloc(N * sizeof *keys), *ek = malloc(N * sizeof *ek);
    float *g = malloc(N * sizeof *g), *out = malloc(N * sizeof *out);
    float *er = malloc((size_t)N * shard_row_floats(s) * sizeof *er);
    ck_assert(keys && ek && g && out && er);
    double want = 0;
    for (uint64_t i = 0; i < N; i++) {
        keys[i] = i * 0x9e3779b97f4a7c15ULL + 17;
        g[i] = (float)(i % 1000 + 1);
        want += g[i];
    }
    ck_assert_int_eq(shard_push(s, keys, 0, N, g), 0);
    shard_mem m = {0};
    shard_mem_add(s, &m); /* both maps (64 Ki and 128 Ki slots) are held while rows move */
    ck_assert_uint_ge(m.bytes, (65536 + 131072) * 4);
    shard_pull(s, keys, 0, N, out);
    for (uint64_t i = 0; i < N; i++)
        LOOP_ASSERT(out[i] == g[i], "key #%llu reads %g, pushed %g", (unsigned long long)i,
                    (double)out[i], (double)g[i]);
    sum_ctx_n = 0;
    sum_ctx_v = 0;
    shard_foreach(s, sum_rows, NULL);
    ck_assert_uint_eq(sum_ctx_n, N);
    ck_assert(sum_ctx_v == want);
    ck_assert_uint_eq(shard_export(s, NULL, NULL, ek, er), N);
    qsort(ek, N, sizeof *ek, cmp_u64);
    uint64_t *sorted = malloc(N * sizeof *sorted);
    ck_assert_ptr_nonnull(sorted);
    memcpy(sorted, keys, N * sizeof *sorted);
    qsort(sorted, N, sizeof *sorted, cmp_u64);
    for (uint64_t i = 0; i < N; i++) /* each key once */
        LOOP_ASSERT(ek[i] == sorted[i], "export #%llu", (unsigned long long)i);
    free(sorted);
    /* the sweep moves rows while the map grows and removes nothing */
    ck_assert_uint_eq(shard_sweep(s, 100, 16), 0);
    ck_assert_uint_eq(shard_size(s), N);
    for (uint64_t i = 0; i < N; i++)
        ck_assert(shard_has_row(s, keys[i]));
    ck_assert_int_eq(shard_push(s, keys, 0, N, g), 0); /* a second push ends the move */
    shard_pull(s, keys, 0, N, out);
    for (uint64_t i = 0; i < N; i++)
        LOOP_ASSERT(out[i] == 2 * g[i], "key #%llu reads %g after two pushes of %g",
                    (unsigned long long)i, (double)out[i], (double)g[i]);
    uint64_t removed = 0;
    for (int k = 0; k < 100 && shard_size(s); k++)
        removed += shard_sweep(s, 100, 1u << 20);
    ck_assert_uint_eq(removed, N);
    ck_assert_uint_eq(shard_size(s), 0);
    free(keys);
    free(ek);
    free(g);
    free(out);
    free(er);
    shard_destroy(&s);
}
END_TEST

/* shard_retain while the map grows (rows still in the old map): the kept rows
 * read back, the others are gone, and keys pushed after find their rows. */
START_TEST(sparse_retain_while_growing)
{
    enum { N = 50000 };
    shard_init init = {INIT_ZERO, 0, 0};
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &SUM, &init);
    ck_assert_ptr_nonnull(s);
    uint64_t *keys = malloc(N * sizeof *keys);
    float *g = malloc(N * sizeof *g), *out = malloc(N * sizeof *out);
    ck_assert(keys && g && out);
    for (uint64_t i = 0; i < N; i++) {
        keys[i] = i * 0x9e3779b97f4a7c15ULL + 17;
        g[i] = (float)(i % 1000 + 1);
    }
    ck_assert_int_eq(shard_push(s, keys, 0, N, g), 0);
    uint64_t odd = 0;
    for (uint64_t i = 0; i < N; i++)
        odd += keys[i] & 1;
    ck_assert_uint_eq(shard_retain(s, odd_key, NULL), N - odd);
    ck_assert_uint_eq(shard_size(s), odd);
    ck_assert_int_eq(shard_push(s, keys, 0, N, g), 0);
    shard_pull(s, keys, 0, N, out);
    for (uint64_t i = 0; i < N; i++) /* kept: two pushes; dropped: one, afresh */
        LOOP_ASSERT(out[i] == ((keys[i] & 1) ? 2 : 1) * g[i], "key #%llu reads %g",
                    (unsigned long long)i, (double)out[i]);
    ck_assert_uint_eq(shard_size(s), N);
    free(keys);
    free(g);
    free(out);
    shard_destroy(&s);
}
END_TEST

Suite *shard_suite(void)
{
    Suite *s = suite_create("shard");
    TCase *init = tcase_create("init");
    tcase_add_test(init, init_parse);
    tcase_add_test(init, init_values);
    tcase_add_test(init, dense_init_independent_of_split);
    suite_add_tcase(s, init);
    TCase *dense = tcase_create("dense");
    tcase_add_test(dense, dense_push_pull_run);
    tcase_add_test(dense, dense_push_pull_keys);
    tcase_add_test(dense, dense_momentum_state);
    tcase_add_test(dense, dense_assign_run);
    tcase_add_test(dense, dense_ownership);
    tcase_add_test(dense, dense_lend_copy_on_write);
    tcase_add_test(dense, dense_lend_disjoint_in_place);
    suite_add_tcase(s, dense);
    TCase *sparse = tcase_create("sparse");
    tcase_set_timeout(sparse, 30); /* 100k keys take well under a second, more under ASan */
    tcase_add_test(sparse, sparse_ownership);
    tcase_add_test(sparse, sparse_many_keys);
    tcase_add_test(sparse, sparse_retain);
    tcase_add_test(sparse, sparse_unpushed_keys);
    tcase_add_test(sparse, sparse_state_survives_growth);
    tcase_add_test(sparse, sparse_lookup_while_growing);
    tcase_add_test(sparse, sparse_push_pipeline);
    tcase_add_test(sparse, sparse_retain_while_growing);
    suite_add_tcase(s, sparse);
    return s;
}
