/* Tests of what a shard changed since the last checkpoint (server/store/shard_dirty.c):
 * the rows written, dense and sparse, the keys evicted (tombstones), a moved row
 * keeping its mark, the reset, and shard_remove (a delta's tombstones applied);
 * the followers' own bits and tombstones (server/follow.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pskv_errors.h"
#include "store/shard.h"
#include "suites.h"

static const upd_opts SUM = {.kind = UPD_SUM};
static const shard_init ZERO = {INIT_ZERO, 0, 0};

static int has(const uint64_t *keys, uint64_t n, uint64_t k)
{
    for (uint64_t i = 0; i < n; i++)
        if (keys[i] == k)
            return 1;
    return 0;
}

/* Dense: a run across 64-row words and one key; the rows come back in order
 * with their values; a reset forgets them. */
START_TEST(dense_changes)
{
    shard *s = shard_new(1, 0, 1000, 0, UINT64_MAX, 2, &SUM, &ZERO);
    ck_assert_ptr_nonnull(s);
    ck_assert_uint_eq(shard_changed(s, 0, 1000, NULL, NULL), 0);
    float g[2 * 140];
    for (int i = 0; i < 2 * 140; i++)
        g[i] = (float)i;
    ck_assert_int_eq(shard_push(s, NULL, 60, 140, g), 0); /* rows 60 .. 199 */
    uint64_t k = 700;
    ck_assert_int_eq(shard_push(s, &k, 0, 1, g), 0);
    ck_assert_uint_eq(shard_changed(s, 0, 1000, NULL, NULL), 141);
    ck_assert_uint_eq(shard_changed(s, 100, 50, NULL, NULL), 50); /* a held span only */
    uint64_t keys[141];
    float rows[2 * 141];
    ck_assert_uint_eq(shard_changed(s, 0, 1000, keys, rows), 141);
    ck_assert_uint_eq(keys[0], 60);
    ck_assert_uint_eq(keys[139], 199);
    ck_assert_uint_eq(keys[140], 700);
    ck_assert(rows[2 * 5] == 10.0f && rows[2 * 5 + 1] == 11.0f); /* row 65 */
    shard_changes_reset(s);
    ck_assert_uint_eq(shard_changed(s, 0, 1000, NULL, NULL), 0);
    const uint64_t *gone;
    ck_assert_int_eq(shard_removed(s, &gone), 0);
    shard_destroy(&s);
}
END_TEST

/* Sparse with eviction: rows pushed since the reset are the changes, even when the
 * sweep moves them into the holes of evicted rows; the evicted keys are the
 * tombstones. shard_remove then takes rows away as a delta's load does. */
START_TEST(sparse_changes_and_tombstones)
{
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &SUM, &ZERO);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(shard_admission(s, 0, 2), 0);
    uint64_t keys[100];
    float g[100];
    for (int i = 0; i < 100; i++)
        keys[i] = 1000 + (uint64_t)i, g[i] = 1.0f;
    shard_tag(s, 0, 0);
    ck_assert_int_eq(shard_push(s, keys, 0, 100, g), 0);
    shard_changes_reset(s);
    shard_tag(s, 1, 0);
    ck_assert_int_eq(shard_push(s, keys + 90, 0, 10, g), 0); /* the last rows: moved later */
    while (shard_sweep(s, 3, 1 << 20)) /* stamps < 1 go: the 90 not pushed at 1 */
        ;
    ck_assert_uint_eq(shard_size(s), 10);
    uint64_t ck[100];
    float cr[100];
    ck_assert_uint_eq(shard_changed(s, 0, 0, ck, cr), 10);
    for (int i = 90; i < 100; i++)
        LOOP_ASSERT(has(ck, 10, keys[i]), "key %d not among the changes", i);
    const uint64_t *gone;
    ck_assert_int_eq(shard_removed(s, &gone), 90);
    for (int i = 0; i < 90; i++)
        LOOP_ASSERT(has(gone, 90, keys[i]), "key %d has no tombstone", i);
    ck_assert_int_eq(shard_remove(s, keys + 95, 5), 0);
    ck_assert_uint_eq(shard_size(s), 5);
    ck_assert(!shard_has_row(s, keys[97]) && shard_has_row(s, keys[92]));
    shard_changes_reset(s);
    ck_assert_uint_eq(shard_changed(s, 0, 0, NULL, NULL), 0);
    ck_assert_int_eq(shard_removed(s, &gone), 0);
    shard_destroy(&s);
    s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &SUM, &ZERO); /* no eviction: no tombstones */
    ck_assert_int_eq(shard_remove(s, keys, 1), -PSKV_EINVAL);
    shard_destroy(&s);
}
END_TEST

/* shard_remove while the map grows (a delta's tombstones loaded after rows that
 * grew it): keys still only in the old map are removed too, and every key kept
 * is still found with its own row. */
START_TEST(remove_while_growing)
{
    enum { N = 25000 }; /* the map grew to 65,536 slots at 22,938 rows, moves 4 a row */
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &SUM, &ZERO);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(shard_admission(s, 0, 2), 0);
    uint64_t *keys = malloc(N * sizeof *keys);
    float *rows = malloc(N * 2 * sizeof *rows); /* a value and the stamp */
    ck_assert(keys && rows);
    for (uint64_t i = 0; i < N; i++) {
        keys[i] = 7 + i * 1000003;
        rows[2 * i] = (float)i;
        rows[2 * i + 1] = 0.0f;
    }
    ck_assert_int_eq(shard_import(s, keys, 0, N, rows), 0);
    ck_assert_int_eq(shard_remove(s, keys, N / 2), 0); /* rows 0 .. N/2 - 1 */
    ck_assert_uint_eq(shard_size(s), N - N / 2);
    for (uint64_t i = 0; i < N; i++) {
        float v = -1.0f;
        if (i >= N / 2)
            shard_pull(s, &keys[i], 0, 1, &v);
        LOOP_ASSERT(shard_has_row(s, keys[i]) == (i >= N / 2), "key %d: row %s", (int)i,
                    i >= N / 2 ? "lost" : "not removed");
        LOOP_ASSERT(i < N / 2 || v == (float)i, "key %d: value %g", (int)i, (double)v);
    }
    free(keys);
    free(rows);
    shard_destroy(&s);
}
END_TEST

/* The followers' bits (shard_follow_on, shard_follow_taken): only rows written after
 * following began, each once; a checkpoint's reset leaves them; a take forgets them. */
static int take_key(void *ctx, uint64_t key, const float *row)
{
    uint64_t *seen = ctx;
    if (seen[0] < 16)
        seen[1 + seen[0]] = key;
    seen[0]++;
    (void)row;
    return 0;
}

START_TEST(follow_bits)
{
    shard *s = shard_new(1, 0, 1000, 0, UINT64_MAX, 1, &SUM, &ZERO);
    ck_assert_ptr_nonnull(s);
    uint64_t seen[17] = {0};
    ck_assert_int_eq(shard_follow_taken(s, take_key, seen), -PSKV_ENOMEM); /* not on */
    float g[3] = {1, 2, 3};
    uint64_t k = 5;
    ck_assert_int_eq(shard_push(s, &k, 0, 1, g), 0); /* before: not a follower's change */
    ck_assert_int_eq(shard_follow_on(s), 0);
    ck_assert_int_eq(shard_push(s, NULL, 62, 3, g), 0); /* rows 62..64, across a word */
    shard_changes_reset(s);                             /* a checkpoint: not the follower's */
    ck_assert_int_eq(shard_follow_taken(s, take_key, seen), 3);
    ck_assert_uint_eq(seen[0], 3);
    ck_assert_uint_eq(seen[1], 62);
    ck_assert_uint_eq(seen[3], 64);
    seen[0] = 0;
    ck_assert_int_eq(shard_follow_taken(s, take_key, seen), 0); /* taken: forgotten */
    /* counted only (fn NULL, a dense table's sync): rows 930..999, the last word cut */
    float g70[70];
    for (int i = 0; i < 70; i++)
        g70[i] = 1;
    ck_assert_int_eq(shard_push(s, NULL, 930, 70, g70), 0);
    ck_assert_int_eq(shard_follow_taken(s, NULL, NULL), 70);
    ck_assert_int_eq(shard_follow_taken(s, NULL, NULL), 0);
    shard_destroy(&s);
}
END_TEST

/* Sparse: rows created while the records grow keep their followers' bits. */
START_TEST(follow_bits_sparse_growth)
{
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &SUM, &ZERO);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(shard_follow_on(s), 0);
    enum { N = 5000 };
    uint64_t *keys = malloc(N * sizeof *keys);
    float *g = malloc(N * sizeof *g);
    for (int i = 0; i < N; i++)
        keys[i] = 1000003ULL * (uint64_t)(i + 1), g[i] = 1;
    ck_assert_int_eq(shard_push(s, keys, 0, N, g), 0);
    uint64_t seen[17] = {0};
    ck_assert_int_eq(shard_follow_taken(s, take_key, seen), N);
    seen[0] = 0;
    ck_assert_int_eq(shard_push(s, keys + 7, 0, 1, g), 0);
    ck_assert_int_eq(shard_follow_taken(s, take_key, seen), 1);
    ck_assert_uint_eq(seen[1], keys[7]);
    free(keys);
    free(g);
    shard_destroy(&s);
}
END_TEST

/* The followers' tombstones (shard_follow_gone): the keys eviction removed after
 * following began, once each, left by a checkpoint's reset; none before. */
static int take_gone(void *ctx, uint64_t key)
{
    return take_key(ctx, key, NULL);
}

START_TEST(follow_gone)
{
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &SUM, &ZERO);
    ck_assert_ptr_nonnull(s);
    ck_assert_int_eq(shard_admission(s, 0, 2), 0);
    uint64_t keys[4] = {11, 22, 33, 44}, seen[17] = {0};
    float g[4] = {1, 1, 1, 1};
    shard_tag(s, 0, 0);
    ck_assert_int_eq(shard_push(s, keys, 0, 1, g), 0); /* 11: evicted before following */
    while (shard_sweep(s, 3, 1 << 20))
        ;
    ck_assert_int_eq(shard_follow_on(s), 0);
    ck_assert_int_eq(shard_push(s, keys + 1, 0, 2, g), 0); /* 22, 33 at clock 0 */
    shard_tag(s, 2, 0);
    ck_assert_int_eq(shard_push(s, keys + 3, 0, 1, g), 0); /* 44 at clock 2 */
    while (shard_sweep(s, 3, 1 << 20)) /* stamps < 1 go: 22 and 33 */
        ;
    ck_assert_uint_eq(shard_size(s), 1);
    shard_changes_reset(s); /* a checkpoint: not the followers' */
    ck_assert_int_eq(shard_follow_gone(s, take_gone, seen), 2);
    ck_assert(has(seen + 1, 2, 22) && has(seen + 1, 2, 33) && !has(seen + 1, 2, 11));
    seen[0] = 0;
    ck_assert_int_eq(shard_follow_gone(s, take_gone, seen), 0); /* taken: forgotten */
    shard_destroy(&s);
}
END_TEST

/* shard_scan: a full copy in slices visits every row once, then says it is done. */
START_TEST(scan_in_slices)
{
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &SUM, &ZERO);
    ck_assert_ptr_nonnull(s);
    uint64_t keys[100];
    float g[100];
    for (int i = 0; i < 100; i++)
        keys[i] = 77ULL * (uint64_t)(i + 1), g[i] = 1;
    ck_assert_int_eq(shard_push(s, keys, 0, 100, g), 0);
    uint64_t pos = 0, seen[17] = {0};
    int calls = 0, rc;
    while ((rc = shard_scan(s, &pos, 30, take_key, seen)) == 0)
        calls++;
    ck_assert_int_eq(rc, 1);
    ck_assert_int_eq(calls, 3); /* 30, 60, 90: then the last 10 and done */
    ck_assert_uint_eq(seen[0], 100);
    ck_assert_uint_eq(pos, 100);
    ck_assert_int_eq(shard_scan(s, &pos, 30, take_key, seen), 1); /* nothing left */
    ck_assert_uint_eq(seen[0], 100);
    shard_destroy(&s);
}
END_TEST

Suite *dirty_suite(void)
{
    Suite *s = suite_create("dirty");
    TCase *tf = tcase_create("follow");
    tcase_add_test(tf, follow_bits);
    tcase_add_test(tf, follow_bits_sparse_growth);
    tcase_add_test(tf, follow_gone);
    tcase_add_test(tf, scan_in_slices);
    suite_add_tcase(s, tf);
    TCase *tc = tcase_create("changes");
    tcase_add_test(tc, dense_changes);
    tcase_add_test(tc, sparse_changes_and_tombstones);
    tcase_add_test(tc, remove_while_growing);
    suite_add_tcase(s, tc);
    return s;
}
