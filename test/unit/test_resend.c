/* Tests of the re-send rule (common/resend.c) on times worked out by hand, base
 * 100 ms: a request sent at s with k copies so far is due at s + 100 * 2^min(k,3),
 * so copies of one request sent at 0 go at 100, 300, 700, 1500, 2300, 3100 (gaps
 * 100, 200, 400, 800, then 800 for ever); none goes while the peer, heard within
 * that wait, last answered a request sent no later than this one. */
#include <stdint.h>

#include "resend.h"
#include "suites.h"

#define BASE 100

START_TEST(first_copy_at_exactly_base)
{
    resend_peer never = {0, 0};
    ck_assert_int_eq(resend_due(&never, 1000, 0, BASE, 1000), 0);
    ck_assert_int_eq(resend_due(&never, 1000, 0, BASE, 1099), 0);
    ck_assert_int_eq(resend_due(&never, 1000, 0, BASE, 1100), 1);
    ck_assert_int_eq(resend_due(&never, 1000, 0, BASE, 5000), 1);
    /* the base is the caller's: --retry-ms 1000, CHAIN_RESEND_MS */
    ck_assert_int_eq(resend_due(&never, 1000, 0, 1000, 1999), 0);
    ck_assert_int_eq(resend_due(&never, 1000, 0, 1000, 2000), 1);
}
END_TEST

START_TEST(backoff_1_2_4_8_then_capped)
{
    resend_peer never = {0, 0};
    /* after k copies: due at 100, 200, 400, 800, 800, ... ms from the last send */
    static const int64_t wait[] = {100, 200, 400, 800, 800, 800, 800};
    for (int k = 0; k < 7; k++) {
        ck_assert_int_eq(resend_due(&never, 0, k, BASE, wait[k] - 1), 0);
        ck_assert_int_eq(resend_due(&never, 0, k, BASE, wait[k]), 1);
    }
    /* many copies later still 8 x, never a wider shift */
    ck_assert_int_eq(resend_due(&never, 0, 1000, BASE, 799), 0);
    ck_assert_int_eq(resend_due(&never, 0, 1000, BASE, 800), 1);
    ck_assert_int_eq(resend_due(&never, 0, 3, 1000, 7999), 0);
    ck_assert_int_eq(resend_due(&never, 0, 3, 1000, 8000), 1);
}
END_TEST

START_TEST(copies_of_a_silent_request_over_time)
{
    /* what a caller does: look every millisecond, send again when due */
    resend_peer never = {0, 0};
    static const int64_t at[] = {100, 300, 700, 1500, 2300, 3100};
    int64_t sent = 0;
    int tries = 0;
    for (int64_t now = 0; now <= 3100; now++) {
        if (!resend_due(&never, sent, tries, BASE, now))
            continue;
        ck_assert_int_lt(tries, 6);
        ck_assert_int_eq(now, at[tries]);
        sent = now;
        tries++;
    }
    ck_assert_int_eq(tries, 6);
}
END_TEST

START_TEST(heard_keeps_latest_send_time)
{
    resend_peer p = {0, 0};
    resend_heard(&p, 900, 1000);
    ck_assert_int_eq(p.heard_ms, 1000);
    ck_assert_int_eq(p.heard_sent_ms, 900);
    resend_heard(&p, 800, 1010); /* an older request answered later: heard, no step back */
    ck_assert_int_eq(p.heard_ms, 1010);
    ck_assert_int_eq(p.heard_sent_ms, 900);
    resend_heard(&p, 950, 1020);
    ck_assert_int_eq(p.heard_ms, 1020);
    ck_assert_int_eq(p.heard_sent_ms, 950);
    resend_heard(&p, RESEND_NOTHING, 1030); /* an answer to nothing awaited */
    ck_assert_int_eq(p.heard_ms, 1030);
    ck_assert_int_eq(p.heard_sent_ms, 950);
}
END_TEST

START_TEST(behind_not_lost)
{
    /* request sent at 1000; the peer answered one sent at 900, at 1050 */
    resend_peer p = {0, 0};
    resend_heard(&p, 900, 1050);
    ck_assert_int_eq(resend_due(&p, 1000, 0, BASE, 1100), 0); /* heard 50 ms ago */
    ck_assert_int_eq(resend_due(&p, 1000, 0, BASE, 1149), 0); /* heard 99 ms ago */
    /* answered one sent in the same millisecond: still not past this one */
    resend_peer same = {0, 0};
    resend_heard(&same, 1000, 1050);
    ck_assert_int_eq(resend_due(&same, 1000, 0, BASE, 1100), 0);
    /* answers to nothing awaited keep it heard (chain_fwd's stale acks) */
    resend_heard(&p, RESEND_NOTHING, 1140);
    ck_assert_int_eq(resend_due(&p, 1000, 0, BASE, 1200), 0);
    ck_assert_int_eq(resend_due(&p, 1000, 0, BASE, 1239), 0);
}
END_TEST

START_TEST(answered_a_later_one)
{
    /* the peer answered a request sent after this one: this one may be lost */
    resend_peer p = {0, 0};
    resend_heard(&p, 1001, 1090);
    ck_assert_int_eq(resend_due(&p, 1000, 0, BASE, 1099), 0); /* still young */
    ck_assert_int_eq(resend_due(&p, 1000, 0, BASE, 1100), 1);
}
END_TEST

START_TEST(heard_goes_stale)
{
    /* heard at 1050 about a request sent at 900; request sent at 1000 */
    resend_peer p = {0, 0};
    resend_heard(&p, 900, 1050);
    ck_assert_int_eq(resend_due(&p, 1000, 0, BASE, 1149), 0);
    ck_assert_int_eq(resend_due(&p, 1000, 0, BASE, 1150), 1); /* silent 100 ms: the wait */
    /* the staleness is measured by the same backoff: after 2 copies, 400 ms */
    ck_assert_int_eq(resend_due(&p, 1000, 2, BASE, 1399), 0); /* young: 400 from 1000 */
    ck_assert_int_eq(resend_due(&p, 1000, 2, BASE, 1449), 0); /* heard 399 ago */
    ck_assert_int_eq(resend_due(&p, 1000, 2, BASE, 1450), 1);
    /* heard before the request was sent and long ago: due at the plain wait */
    resend_peer old = {0, 0};
    resend_heard(&old, 100, 200);
    ck_assert_int_eq(resend_due(&old, 1000, 0, BASE, 1099), 0);
    ck_assert_int_eq(resend_due(&old, 1000, 0, BASE, 1100), 1);
}
END_TEST

START_TEST(clock_near_zero)
{
    /* a request sent at clock 0 is due at base */
    resend_peer never = {0, 0};
    ck_assert_int_eq(resend_due(&never, 0, 0, BASE, 99), 0);
    ck_assert_int_eq(resend_due(&never, 0, 0, BASE, 100), 1);
    /* heard_ms 0 is "never heard": a peer heard at clock 0 holds nothing back (the
     * rule of wsend.c and chain_fwd.c before it; CLOCK_MONOTONIC ms are 0 only in the
     * boot's first millisecond) */
    resend_peer at0 = {0, 0};
    resend_heard(&at0, 0, 0);
    ck_assert_int_eq(resend_due(&at0, 0, 0, BASE, 100), 1);
    /* heard at 1 ms counts */
    resend_peer at1 = {0, 0};
    resend_heard(&at1, 0, 1);
    ck_assert_int_eq(resend_due(&at1, 0, 0, BASE, 100), 0);
    ck_assert_int_eq(resend_due(&at1, 0, 0, BASE, 101), 1);
}
END_TEST

START_TEST(clock_near_its_top)
{
    /* int64 ms wrap after 292 million years: none is ever seen, but the top works */
    const int64_t top = INT64_MAX;
    resend_peer never = {0, 0};
    ck_assert_int_eq(resend_due(&never, top - 800, 3, BASE, top - 1), 0);
    ck_assert_int_eq(resend_due(&never, top - 800, 3, BASE, top), 1);
    resend_peer p = {0, 0};
    resend_heard(&p, top - 900, top - 50);
    ck_assert_int_eq(resend_due(&p, top - 800, 3, BASE, top), 0); /* behind */
    resend_heard(&p, top - 700, top - 40);
    ck_assert_int_eq(resend_due(&p, top - 800, 3, BASE, top), 1); /* a later one answered */
}
END_TEST

Suite *resend_suite(void)
{
    Suite *s = suite_create("resend");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, first_copy_at_exactly_base);
    tcase_add_test(tc, backoff_1_2_4_8_then_capped);
    tcase_add_test(tc, copies_of_a_silent_request_over_time);
    tcase_add_test(tc, heard_keeps_latest_send_time);
    tcase_add_test(tc, behind_not_lost);
    tcase_add_test(tc, answered_a_later_one);
    tcase_add_test(tc, heard_goes_stale);
    tcase_add_test(tc, clock_near_zero);
    tcase_add_test(tc, clock_near_its_top);
    suite_add_tcase(s, tc);
    return s;
}
