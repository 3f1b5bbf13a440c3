/* worker/apps/train/balsplit.c: the split --balance batch moves by. */
#include "train/balsplit.h"
#include "suites.h"

static int sum(const int *b, int W)
{
    int s = 0;
    for (int i = 0; i < W; i++)
        s += b[i];
    return s;
}

/* Feeds n clocks of times t[i] x (batch-independent) to s; returns the re-splits. */
static int feed(balsplit *s, const float *t, int n)
{
    int moves = 0;
    for (int k = 0; k < n; k++)
        moves += balsplit_observe(s, t);
    return moves;
}

START_TEST(even_start_and_sum_kept)
{
    balsplit *s = balsplit_new(3, 100);
    ck_assert_ptr_nonnull(s);
    const int *b = balsplit_cur(s);
    ck_assert_int_eq(b[0], 34);
    ck_assert_int_eq(b[1], 33);
    ck_assert_int_eq(b[2], 33);
    /* worker 2 three times slower: it ends near 100 / 7 = 14, the others near 43 */
    float t[] = {10, 10, 30};
    int moves = feed(s, t, 200);
    ck_assert_int_ge(moves, 1);
    ck_assert_int_eq(sum(b, 3), 100);
    ck_assert_int_le(b[2], 16);
    ck_assert_int_ge(b[2], 13);
    ck_assert_int_ge(b[0], 41);
    /* settled: no more moves */
    ck_assert_int_eq(feed(s, t, 100), 0);
    balsplit_destroy(&s);
    ck_assert_ptr_null(s);
    balsplit_destroy(&s); /* NULL-safe */
}
END_TEST

START_TEST(moves_capped_and_windowed)
{
    balsplit *s = balsplit_new(2, 64);
    const int *b = balsplit_cur(s);
    float t[] = {1, 100}; /* worker 1 a hundred times slower */
    /* nothing before a full window */
    ck_assert_int_eq(feed(s, t, BALSPLIT_WIN - 1), 0);
    ck_assert_int_eq(b[0], 32);
    /* then one move of at most B / (2W) = 16 per worker */
    ck_assert_int_eq(feed(s, t, 1), 1);
    ck_assert_int_eq(b[0], 48);
    ck_assert_int_eq(b[1], 16);
    /* the window restarts: the next move needs BALSPLIT_WIN clocks more */
    ck_assert_int_eq(feed(s, t, BALSPLIT_WIN - 1), 0);
    ck_assert_int_eq(feed(s, t, 1), 1);
    ck_assert_int_eq(b[1], 1); /* never below 1 */
    ck_assert_int_eq(sum(b, 2), 64);
    balsplit_destroy(&s);
}
END_TEST

START_TEST(alternating_speeds_do_not_swing)
{
    balsplit *s = balsplit_new(2, 32);
    const int *b = balsplit_cur(s);
    float a[] = {40, 10}, c[] = {10, 40};
    int moves = 0;
    for (int k = 0; k < 500; k++)
        moves += balsplit_observe(s, k % 2 ? a : c);
    ck_assert_int_eq(moves, 0);
    ck_assert_int_eq(b[0], 16);
    balsplit_destroy(&s);
    /* and noise under the gain rule (10% apart) moves nothing either */
    s = balsplit_new(2, 32);
    b = balsplit_cur(s);
    float n1[] = {100, 110}, n2[] = {110, 100};
    for (int k = 0; k < 500; k++)
        moves += balsplit_observe(s, k % 3 ? n1 : n2);
    ck_assert_int_eq(moves, 0);
    ck_assert_int_eq(b[0], 16);
    balsplit_destroy(&s);
}
END_TEST

START_TEST(unmeasured_and_set)
{
    balsplit *s = balsplit_new(2, 10);
    const int *b = balsplit_cur(s);
    float z[] = {5, 0}; /* worker 1 never measured: no move */
    ck_assert_int_eq(feed(s, z, 50), 0);
    int fixed[] = {7, 3};
    balsplit_set(s, fixed);
    ck_assert_int_eq(b[0], 7);
    /* a slowdown after a settled split is followed: worker 0 now 4x slower */
    float t[] = {40, 10};
    ck_assert_int_ge(feed(s, t, 3 * BALSPLIT_WIN), 1);
    ck_assert_int_lt(b[0], 7);
    balsplit_even(s);
    ck_assert_int_eq(b[0], 5);
    balsplit_destroy(&s);
}
END_TEST

START_TEST(dropped_worker)
{
    balsplit *s = balsplit_new(3, 48);
    const int *b = balsplit_cur(s);
    int fixed[] = {20, 20, 8};
    balsplit_set(s, fixed);
    /* worker 2 dies: its 8 go to the others in proportion to theirs, the sum kept */
    ck_assert_int_eq(balsplit_drop(s, 2), 1);
    ck_assert_int_eq(balsplit_live(s), 2);
    ck_assert_int_eq(b[2], 0);
    ck_assert_int_eq(b[0], 24);
    ck_assert_int_eq(b[1], 24);
    ck_assert_int_eq(balsplit_drop(s, 2), 0); /* once */
    ck_assert_int_eq(balsplit_drop(s, 3), 0); /* out of range */
    /* the rule goes on over the live ones: worker 1 three times slower */
    float t[] = {10, 30, 0};
    ck_assert_int_ge(feed(s, t, 4 * BALSPLIT_WIN), 1);
    ck_assert_int_eq(b[2], 0);
    ck_assert_int_eq(sum(b, 3), 48);
    ck_assert_int_gt(b[0], 2 * b[1]);
    ck_assert_int_eq(balsplit_drop(s, 1), 1);
    ck_assert_int_eq(b[0], 48);
    ck_assert_int_eq(balsplit_drop(s, 0), 0); /* the last one stays */
    balsplit_even(s); /* a fresh start: all back */
    ck_assert_int_eq(balsplit_live(s), 3);
    ck_assert_int_eq(b[2], 16);
    balsplit_destroy(&s);
}
END_TEST

/* A dead rank taken back: every rank puts the same even split over the live set
 * (the rank back included, a rank still dead left out), and the rule goes on from
 * an empty window. */
START_TEST(taken_back)
{
    balsplit *s = balsplit_new(4, 50);
    const int *b = balsplit_cur(s);
    ck_assert_int_eq(balsplit_drop(s, 1), 1);
    ck_assert_int_eq(balsplit_drop(s, 3), 1);
    char live[] = {1, 1, 1, 0}; /* rank 1 back, rank 3 still dead */
    ck_assert_int_eq(balsplit_even_among(s, live), 0);
    ck_assert_int_eq(balsplit_live(s), 3);
    ck_assert_int_eq(b[0], 17);
    ck_assert_int_eq(b[1], 17);
    ck_assert_int_eq(b[2], 16);
    ck_assert_int_eq(b[3], 0);
    ck_assert_int_eq(balsplit_gone(s, 1), 0);
    ck_assert_int_eq(balsplit_gone(s, 3), 1);
    float t[] = {10, 10, 40, 0};
    ck_assert_int_eq(feed(s, t, BALSPLIT_WIN - 1), 0); /* the window starts again */
    ck_assert_int_ge(feed(s, t, 4 * BALSPLIT_WIN), 1);
    ck_assert_int_eq(b[3], 0);
    ck_assert_int_eq(sum(b, 4), 50);
    ck_assert_int_lt(b[2], b[0]);
    char none[] = {0, 0, 0, 0};
    ck_assert_int_eq(balsplit_even_among(s, none), -1);
    ck_assert_int_eq(sum(b, 4), 50);
    balsplit_destroy(&s);
}
END_TEST

/* Fixed costs a step (a straggler's --slowdown multiplies them too): worker 2's
 * step takes 2000 + 150 b us, the others' 300 + 50 b. Proportional to the time
 * per example, worker 2 would go down to 1 example and still be the slowest
 * (2150 us against 300 + 50 x 47 = 2650... and beyond); the line through two
 * splits' times keeps it where all finish together: b2 near 3-4, the clock near
 * the optimum 2.61 ms. */
START_TEST(fixed_costs)
{
    balsplit *s = balsplit_new(3, 96);
    const int *b = balsplit_cur(s);
    const double a[] = {300, 300, 2000}, c[] = {50, 50, 150};
    int moves = 0;
    for (int k = 0; k < 200 * BALSPLIT_WIN; k++) { /* long settled: the fixed costs kept */
        float us[3];
        for (int i = 0; i < 3; i++)
            us[i] = (float)((a[i] + c[i] * b[i]) / b[i]);
        moves += balsplit_observe(s, us);
    }
    ck_assert_int_ge(moves, 2);
    ck_assert_int_eq(sum(b, 3), 96);
    ck_assert_int_ge(b[2], 2);
    ck_assert_int_le(b[2], 6);
    double t = 0;
    for (int i = 0; i < 3; i++)
        t = a[i] + c[i] * b[i] > t ? a[i] + c[i] * b[i] : t;
    ck_assert_double_le(t, 2800); /* within 8% of the best, 2610 */
    balsplit_destroy(&s);
}
END_TEST

Suite *balsplit_suite(void)
{
    Suite *s = suite_create("balsplit");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, even_start_and_sum_kept);
    tcase_add_test(tc, moves_capped_and_windowed);
    tcase_add_test(tc, alternating_speeds_do_not_swing);
    tcase_add_test(tc, unmeasured_and_set);
    tcase_add_test(tc, dropped_worker);
    tcase_add_test(tc, taken_back);
    tcase_add_test(tc, fixed_costs);
    suite_add_tcase(s, tc);
    return s;
}
