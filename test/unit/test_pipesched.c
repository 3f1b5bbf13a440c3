/* worker/apps/train/pipesched.c: --layers, the cut into stages, the order of passes. */
#include <string.h>

#include "train/pipesched.h"
#include "suites.h"

START_TEST(layers_parsed_and_refused)
{
    int s[PIPE_MAX_LAYERS];
    char why[200];
    ck_assert_int_eq(pipesched_layers("784,1024,10", s, why, sizeof why), 3);
    ck_assert_int_eq(s[0], 784);
    ck_assert_int_eq(s[2], 10);
    const char *bad[] = {"", "784", "784,,10", "784,0,10", "784,x", "784,10,", "784,70000"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ck_assert_msg(pipesched_layers(bad[i], s, why, sizeof why) < 0, "'%s' taken", bad[i]);
    ck_assert_ptr_nonnull(strstr(why, "--layers"));
}
END_TEST

START_TEST(split_balanced_and_explicit)
{
    int s[] = {784, 1024, 1024, 1024, 10}, f[PIPE_MAX_LAYERS + 1];
    char why[200];
    /* 803840, 1049600, 1049600, 10250 parameters: two stages cut after layer 1 */
    ck_assert_int_eq(pipesched_split(s, 5, 2, "", f, why, sizeof why), 0);
    ck_assert_int_eq(f[0], 0);
    ck_assert_int_eq(f[1], 2);
    ck_assert_int_eq(f[2], 4);
    ck_assert_int_eq(pipesched_split(s, 5, 4, "", f, why, sizeof why), 0);
    for (int k = 0; k <= 4; k++)
        ck_assert_int_eq(f[k], k);
    ck_assert_int_eq(pipesched_split(s, 5, 2, "3,1", f, why, sizeof why), 0);
    ck_assert_int_eq(f[1], 3);
    ck_assert_int_lt(pipesched_split(s, 5, 2, "2,1", f, why, sizeof why), 0);
    ck_assert_ptr_nonnull(strstr(why, "--split"));
    ck_assert_int_lt(pipesched_split(s, 5, 2, "4,0", f, why, sizeof why), 0);
    ck_assert_int_lt(pipesched_split(s, 5, 2, "1,1,2", f, why, sizeof why), 0);
    ck_assert_int_lt(pipesched_split(s, 5, 5, "", f, why, sizeof why), 0);
    ck_assert_ptr_nonnull(strstr(why, "--stages"));
}
END_TEST

/* The cut by measured costs (--suggest-split): the costliest stage is as cheap
 * as it can be, whichever layer carries the weight. */
START_TEST(cut_by_cost)
{
    int f[PIPE_MAX_LAYERS + 1];
    double c1[] = {1, 1, 1, 10};
    pipesched_cut(c1, 4, 2, f);
    ck_assert_int_eq(f[0], 0);
    ck_assert_int_eq(f[1], 3);
    ck_assert_int_eq(f[2], 4);
    double c2[] = {4, 1, 1, 1, 1, 4};
    pipesched_cut(c2, 6, 3, f); /* {4} {1,1,1,1} {4} */
    ck_assert_int_eq(f[0], 0);
    ck_assert_int_eq(f[1], 1);
    ck_assert_int_eq(f[2], 5);
    ck_assert_int_eq(f[3], 6);
    double c3[] = {2, 3, 3, 2};
    pipesched_cut(c3, 4, 4, f);
    for (int k = 0; k <= 4; k++)
        ck_assert_int_eq(f[k], k);
    pipesched_cut(c3, 4, 1, f);
    ck_assert_int_eq(f[0], 0);
    ck_assert_int_eq(f[1], 4);
    /* --balance stages: stage 1 three times slower takes fewer layers */
    double c4[] = {1, 1, 1, 1, 1, 1}, even[] = {1, 1}, slow[] = {1, 3};
    pipesched_cut_speed(c4, 6, 2, even, f);
    ck_assert_int_eq(f[1], 3);
    pipesched_cut_speed(c4, 6, 2, slow, f); /* 5 layers against 1 x 3: 5 (4 against 2 x 3: 6) */
    ck_assert_int_eq(f[1], 5);
    ck_assert_int_eq(f[2], 6);
    pipesched_cut_speed(c4, 6, 2, NULL, f);
    ck_assert_int_eq(f[1], 3);
}
END_TEST

/* Every schedule: each micro-batch forward once, then backward once, backward
 * passes in micro-batch order, and the returned depth the most in flight. */
START_TEST(schedules_well_formed)
{
    const char *names[] = {"sequential", "gpipe", "1f1b"};
    pipe_op ops[64];
    for (int n = 0; n < 3; n++)
        for (int S = 1; S <= 4; S++)
            for (int k = 0; k < S; k++)
                for (int M = 1; M <= 8; M++)
                    for (int K = 1; K <= 9; K++) {
                        int depth = pipesched_ops(names[n], S, k, M, K, ops);
                        ck_assert_int_ge(depth, 1);
                        int fwd[8] = {0}, held = 0, peak = 0, nextb = 0;
                        for (int o = 0; o < 2 * M; o++) {
                            int i = ops[o].micro;
                            LOOP_ASSERT(i >= 0 && i < M, "micro %d", i);
                            if (ops[o].fwd) {
                                LOOP_ASSERT(!fwd[i], "%s: %d forward twice", names[n], i);
                                fwd[i] = 1;
                                peak = ++held > peak ? held : peak;
                            } else {
                                LOOP_ASSERT(fwd[i] && i == nextb, "%s: backward out of order",
                                            names[n]);
                                nextb++;
                                held--;
                            }
                        }
                        /* the depth returned is the peak, and what each schedule holds:
                         * sequential one, gpipe all M (within the bound), 1f1b S-k */
                        int want = n == 0 ? 1 : M < K ? M : K;
                        if (n == 2 && S - k < want)
                            want = S - k;
                        LOOP_ASSERT(nextb == M && peak == depth && depth == want,
                                    "%s S=%d k=%d M=%d K=%d: peak %d depth %d, want %d",
                                    names[n], S, k, M, K, peak, depth, want);
                    }
    ck_assert_int_lt(pipesched_ops("zigzag", 2, 0, 4, 4, ops), 0);
}
END_TEST

/* Every cut starts from the whole model's weights: stages' draws laid end to end
 * are the one-stage draw; within +-1/sqrt(inputs), of both signs, and another
 * seed draws others. */
START_TEST(init_independent_of_cut)
{
    int sizes[] = {20, 6, 5, 3};
    enum { P = 20 * 6 + 6 + 6 * 5 + 5 + 5 * 3 + 3 };
    float whole[P], parts[P], other[P];
    pipesched_init(sizes, 0, 3, 7, whole);
    pipesched_init(sizes, 0, 1, 7, parts);
    pipesched_init(sizes, 1, 2, 7, parts + 126);
    pipesched_init(sizes, 2, 3, 7, parts + 161);
    ck_assert_int_eq(memcmp(whole, parts, sizeof whole), 0);
    pipesched_init(sizes, 0, 3, 8, other);
    int neg = 0, same = 0;
    for (int i = 0; i < P; i++) {
        ck_assert(whole[i] >= -0.2237f && whole[i] <= 0.2237f); /* 1/sqrt(20) */
        neg += whole[i] < 0;
        same += whole[i] == other[i];
    }
    ck_assert(neg > P / 4 && neg < 3 * P / 4);
    ck_assert_int_eq(same, 0);
}
END_TEST

Suite *pipesched_suite(void)
{
    Suite *s = suite_create("pipesched");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, layers_parsed_and_refused);
    tcase_add_test(tc, split_balanced_and_explicit);
    tcase_add_test(tc, cut_by_cost);
    tcase_add_test(tc, schedules_well_formed);
    tcase_add_test(tc, init_independent_of_cut);
    suite_add_tcase(s, tc);
    return s;
}
