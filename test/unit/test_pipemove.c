/* worker/apps/train/pipemove.c: the rule --balance stages re-splits by: the CPU
 * model proposes, the measured wall time of a step judges. */
#include "train/pipemove.h"
#include "suites.h"

/* 5 layers (784,512,512,512,512,10 by parameters, in thousands), 2 stages: a cut
 * is first[1], the first stage's layer count. */
static const double cost5[5] = {401, 262, 262, 262, 5};

/* A host: a step's wall time (ms) at cut first[1] = 1..4, times a load factor. */
typedef struct host {
    double wall[5];
    double load;
} host;

/* n windows on host h; the acts into acts[], the cuts into cuts[]. Returns the
 * moves (any act but STAY). */
static int run(pipemove *m, const double *factor, const host *h, int *first, int n, int *acts,
               int *cuts)
{
    int moves = 0;
    for (int i = 0; i < n; i++) {
        int a = pipemove_window(m, cost5, factor, h->wall[first[1]] * h->load, first);
        moves += a != PIPEMOVE_STAY;
        if (acts)
            acts[i] = a;
        if (cuts)
            cuts[i] = first[1];
    }
    return moves;
}

START_TEST(bad_sizes)
{
    ck_assert_ptr_null(pipemove_new(5, 6));
    ck_assert_ptr_null(pipemove_new(5, 0));
    pipemove *m = NULL;
    pipemove_destroy(&m); /* NULL-safe */
    m = pipemove_new(5, 2);
    ck_assert_ptr_nonnull(m);
    pipemove_destroy(&m);
    ck_assert_ptr_null(m);
}
END_TEST

/* The model right about the host (wall in proportion to its slowest stage): one
 * move, kept, nothing tried after it. */
START_TEST(model_right_one_move)
{
    const double f[2] = {1, 1};
    host h = {{0, 5 * 788, 5 * 664, 5 * 926, 5 * 1188}, 1};
    pipemove *m = pipemove_new(5, 2);
    int first[3] = {0, 4, 5}, acts[20];
    ck_assert_int_eq(run(m, f, &h, first, 20, acts, NULL), 1);
    ck_assert_int_eq(acts[0], PIPEMOVE_MODEL);
    ck_assert_int_eq(first[1], 2);
    pipemove_destroy(&m);
}
END_TEST

/* The model's cut slower on the host (a cost the CPU times do not show): moved
 * back after one window, the check confirms it, and it is not proposed again
 * while the speeds stand; the one neighbour the model ranks near is tried once. */
START_TEST(model_wrong_moves_back)
{
    const double f[2] = {1, 1};
    host h = {{0, 900, 800, 700, 600}, 1}; /* each layer moved to stage 1 costs */
    pipemove *m = pipemove_new(5, 2);
    int first[3] = {0, 4, 5}, acts[30], cuts[30];
    run(m, f, &h, first, 30, acts, cuts);
    ck_assert_int_eq(acts[0], PIPEMOVE_MODEL);
    ck_assert_int_eq(cuts[0], 2);
    ck_assert_int_eq(acts[1], PIPEMOVE_BACK);
    ck_assert_int_eq(cuts[1], 4);
    ck_assert_int_eq(pipemove_last(m)->forgot, 0);
    int at2 = 0, backs = 0;
    for (int i = 0; i < 30; i++) {
        at2 += cuts[i] == 2;
        backs += acts[i] == PIPEMOVE_BACK;
    }
    ck_assert_int_eq(at2, 1);   /* the model's cut visited once */
    ck_assert_int_le(backs, 2); /* it, and at most the neighbour 3 tried */
    ck_assert_int_eq(first[1], 4);
    for (int i = 10; i < 30; i++)
        ck_assert_int_eq(acts[i], PIPEMOVE_STAY);
    pipemove_destroy(&m);
}
END_TEST

/* bench-stages' S=2 "slow": stage 1 x3; the model picks 3 (926 against 1,188 at
 * 4), but on the host 4 is faster (the sleeping straggler frees a core): the
 * model's move gains less than predicted, so its neighbour 4 is tried and kept. */
START_TEST(explore_finds_faster)
{
    const double f[2] = {1, 3};
    host h = {{0, 2500, 1590, 1300, 1050}, 1};
    pipemove *m = pipemove_new(5, 2);
    int first[3] = {0, 2, 5}, acts[12], cuts[12];
    ck_assert_int_eq(run(m, f, &h, first, 12, acts, cuts), 2);
    ck_assert_int_eq(acts[0], PIPEMOVE_MODEL);
    ck_assert_int_eq(cuts[0], 3);
    ck_assert_int_eq(acts[1], PIPEMOVE_TRY);
    ck_assert_int_eq(cuts[1], 4);
    ck_assert(pipemove_last(m)->err > 1 + PIPEMOVE_MARGIN);
    ck_assert_int_eq(first[1], 4);
    pipemove_destroy(&m);
}
END_TEST

/* A try no faster than the margin goes back, and the cut is not tried again. */
START_TEST(try_not_faster_goes_back)
{
    const double f[2] = {1, 3};
    host h = {{0, 2500, 1590, 1300, 1250}, 1}; /* 4 only 4% faster than 3 */
    pipemove *m = pipemove_new(5, 2);
    int first[3] = {0, 2, 5}, acts[20], cuts[20];
    run(m, f, &h, first, 20, acts, cuts);
    ck_assert_int_eq(acts[1], PIPEMOVE_TRY);
    ck_assert_int_eq(acts[2], PIPEMOVE_BACK);
    ck_assert_int_eq(cuts[2], 3);
    for (int i = 3; i < 20; i++)
        ck_assert_int_eq(acts[i], PIPEMOVE_STAY);
    pipemove_destroy(&m);
}
END_TEST

/* Noise: windows up to 9% apart around a model move's wall do not move it back,
 * and nothing swings over 60 windows. */
START_TEST(noise_no_swing)
{
    const double f[2] = {1, 1};
    static const double wobble[6] = {1.0, 1.09, 0.93, 1.05, 0.98, 1.08};
    host h = {{0, 5 * 788, 5 * 664, 5 * 926, 5 * 1188}, 1};
    pipemove *m = pipemove_new(5, 2);
    int first[3] = {0, 4, 5}, moves = 0;
    for (int i = 0; i < 60; i++) {
        h.load = wobble[i % 6];
        moves += run(m, f, &h, first, 1, NULL, NULL);
    }
    ck_assert_int_eq(moves, 1);
    ck_assert_int_eq(first[1], 2);
    pipemove_destroy(&m);
}
END_TEST

/* The host slowed during the model's move: moved back, but the cut returned to is
 * as slow now, so the cut is forgotten and proposed again (once: not a swing). */
START_TEST(check_forgets_on_host_change)
{
    const double f[2] = {1, 1};
    host h = {{0, 5 * 788, 5 * 664, 5 * 926, 5 * 1188}, 1};
    pipemove *m = pipemove_new(5, 2);
    int first[3] = {0, 4, 5};
    ck_assert_int_eq(pipemove_window(m, cost5, f, 5 * 1188, first), PIPEMOVE_MODEL);
    h.load = 2; /* every cut twice as slow from here */
    ck_assert_int_eq(pipemove_window(m, cost5, f, h.wall[first[1]] * h.load, first),
                     PIPEMOVE_BACK);
    ck_assert_int_eq(first[1], 4);
    ck_assert_int_eq(pipemove_window(m, cost5, f, h.wall[first[1]] * h.load, first),
                     PIPEMOVE_MODEL);
    ck_assert_int_eq(pipemove_last(m)->forgot, 1);
    ck_assert_int_eq(first[1], 2);
    ck_assert_int_eq(run(m, f, &h, first, 20, NULL, NULL), 0);
    pipemove_destroy(&m);
}
END_TEST

/* The speeds change (a stage's factor 3x): the memory of cuts measured worse
 * empties, and the model may propose one of them again. */
START_TEST(new_regime_forgets)
{
    const double f1[2] = {1, 1}, f3[2] = {3, 1};
    host h = {{0, 900, 800, 700, 600}, 1};
    pipemove *m = pipemove_new(5, 2);
    int first[3] = {0, 4, 5};
    run(m, f1, &h, first, 10, NULL, NULL);
    ck_assert_int_eq(first[1], 4);
    /* stage 0 three times slower: the model's cut 1 (401 x 3 against 791) */
    ck_assert_int_eq(pipemove_window(m, cost5, f3, 600, first), PIPEMOVE_MODEL);
    ck_assert_int_eq(first[1], 1);
    pipemove_destroy(&m);
}
END_TEST

/* No wall time measured: the model's move stands unjudged (the rule before). */
START_TEST(unmeasured_stands)
{
    const double f[2] = {1, 1};
    pipemove *m = pipemove_new(5, 2);
    int first[3] = {0, 4, 5};
    ck_assert_int_eq(pipemove_window(m, cost5, f, 0, first), PIPEMOVE_MODEL);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(pipemove_window(m, cost5, f, 0, first), PIPEMOVE_STAY);
    ck_assert_int_eq(first[1], 2);
    pipemove_destroy(&m);
}
END_TEST

/* Three stages: a move back restores every boundary. */
START_TEST(three_stages_back)
{
    const double f[3] = {1, 1, 1};
    pipemove *m = pipemove_new(5, 3);
    int first[4] = {0, 3, 4, 5};
    ck_assert_int_eq(pipemove_window(m, cost5, f, 100, first), PIPEMOVE_MODEL);
    ck_assert_int_ne(first[1], 3);
    ck_assert_int_eq(pipemove_window(m, cost5, f, 150, first), PIPEMOVE_BACK);
    ck_assert_int_eq(first[0], 0);
    ck_assert_int_eq(first[1], 3);
    ck_assert_int_eq(first[2], 4);
    ck_assert_int_eq(first[3], 5);
    const pipemove_note *n = pipemove_last(m);
    ck_assert(n->wall_from == 100 && n->wall_to == 150);
    pipemove_destroy(&m);
}
END_TEST

/* The model right in its ranking, but a fixed cost in every step (transfers, the
 * servers) makes its moves gain less than predicted: one neighbour is tried,
 * loses, and the trying ends (one lost window per model move, not one per
 * neighbour). */
START_TEST(one_lost_try_per_move)
{
    const double f[3] = {1, 1, 1};
    pipemove *m = pipemove_new(5, 3);
    int first[4] = {0, 3, 4, 5}, acts = 0, tries = 0, backs = 0;
    for (int i = 0; i < 30; i++) {
        double pred = 0;
        for (int s = 0; s < 3; s++) {
            double t = 0;
            for (int l = first[s]; l < first[s + 1]; l++)
                t += cost5[l];
            pred = t > pred ? t : pred;
        }
        int a = pipemove_window(m, cost5, f, 2000 + pred, first);
        acts += a != PIPEMOVE_STAY;
        tries += a == PIPEMOVE_TRY;
        backs += a == PIPEMOVE_BACK;
    }
    ck_assert_int_eq(tries, 1);
    ck_assert_int_eq(backs, 1);
    ck_assert_int_eq(acts, 3);
    ck_assert_int_eq(first[1], 1); /* the model's 1,2,2 */
    ck_assert_int_eq(first[2], 3);
    pipemove_destroy(&m);
}
END_TEST

Suite *pipemove_suite(void)
{
    Suite *s = suite_create("pipemove");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, bad_sizes);
    tcase_add_test(tc, model_right_one_move);
    tcase_add_test(tc, model_wrong_moves_back);
    tcase_add_test(tc, explore_finds_faster);
    tcase_add_test(tc, try_not_faster_goes_back);
    tcase_add_test(tc, noise_no_swing);
    tcase_add_test(tc, check_forgets_on_host_change);
    tcase_add_test(tc, new_regime_forgets);
    tcase_add_test(tc, unmeasured_stands);
    tcase_add_test(tc, three_stages_back);
    tcase_add_test(tc, one_lost_try_per_move);
    suite_add_tcase(s, tc);
    return s;
}
