/* Tests of who holds each partition whole (scheduler/holders.c): a partition whose
 * last whole replica dies while another member still awaits its copy is lost (its
 * chain all 0); one with a whole survivor is not; a member counts as whole once
 * its HEARTBEAT's whole_epoch reaches the view that added it, or its awaited list
 * of that view omits the partition; a server that left
 * a chain alive (a join's or drain's hand-over) holds it until a member is whole. */
#include <stdint.h>
#include <string.h>

#include "holders.h"
#include "suites.h"

static int dead[16]; /* by server id */

static int alive(void *ctx, uint32_t id)
{
    (void)ctx;
    return id < 16 && !dead[id];
}

/* R = 2, 2 partitions: p0 on [1, 2], p1 on [2, 3], all whole (first placement). */
static holders *first(uint32_t *chains)
{
    memset(dead, 0, sizeof dead);
    holders *h = holders_new(2, 2);
    ck_assert_ptr_nonnull(h);
    const uint32_t c[] = {1, 2, 2, 3};
    memcpy(chains, c, sizeof c);
    holders_loss loss[4];
    ck_assert_uint_eq(holders_update(h, NULL, chains, 1, alive, NULL, loss, 4), 0);
    ck_assert(holders_is_whole(h, chains, 0, 1) && holders_is_whole(h, chains, 0, 2));
    return h;
}

/* Server 1 dies: p0 becomes [2, 3] (3 new, awaiting 2's copy) in view 2. */
static void first_death(holders *h, uint32_t *chains)
{
    dead[1] = 1;
    uint32_t next[] = {2, 3, 2, 3};
    holders_loss loss[4];
    ck_assert_uint_eq(holders_update(h, chains, next, 2, alive, NULL, loss, 4), 0);
    memcpy(chains, next, sizeof next);
    ck_assert(!holders_is_whole(h, chains, 0, 3));
    ck_assert(holders_is_whole(h, chains, 0, 2) && holders_is_whole(h, chains, 1, 3));
}

START_TEST(sender_dies_during_copy)
{
    uint32_t chains[4];
    holders *h = first(chains);
    first_death(h, chains);
    holders_heard(h, chains, 3, 1, NULL, 0); /* whole for view 1 only: not for p0 */
    ck_assert(!holders_is_whole(h, chains, 0, 3));
    dead[2] = 1; /* the sender dies before 3 holds p0 whole */
    uint32_t next[] = {3, 0, 3, 0};
    holders_loss loss[4];
    ck_assert_uint_eq(holders_update(h, chains, next, 3, alive, NULL, loss, 4), 1);
    ck_assert_uint_eq(loss[0].p, 0);
    ck_assert_uint_eq(loss[0].whole, 2);
    ck_assert_uint_eq(loss[0].filling, 3);
    const uint32_t want[] = {0, 0, 3, 0}; /* p0 lost; p1 kept on its whole survivor */
    ck_assert_mem_eq(next, want, sizeof want);
    holders_destroy(&h);
    ck_assert_ptr_null(h);
    holders_destroy(NULL);
}
END_TEST

START_TEST(whole_survivor_keeps_it)
{
    uint32_t chains[4];
    holders *h = first(chains);
    first_death(h, chains);
    holders_heard(h, chains, 3, 2, NULL, 0); /* 3 holds view 2's placement whole */
    ck_assert(holders_is_whole(h, chains, 0, 3));
    dead[2] = 1;
    uint32_t next[] = {3, 0, 3, 0};
    holders_loss loss[4];
    ck_assert_uint_eq(holders_update(h, chains, next, 3, alive, NULL, loss, 4), 0);
    const uint32_t want[] = {3, 0, 3, 0};
    ck_assert_mem_eq(next, want, sizeof want);
    holders_destroy(&h);
}
END_TEST

START_TEST(every_member_dead_is_not_listed)
{
    /* ring.h already empties a chain with no live member: not counted again */
    uint32_t chains[4];
    holders *h = first(chains);
    dead[1] = dead[2] = 1;
    uint32_t next[] = {0, 0, 3, 0};
    holders_loss loss[4];
    ck_assert_uint_eq(holders_update(h, chains, next, 2, alive, NULL, loss, 4), 0);
    memcpy(chains, next, sizeof next);
    /* and a lost partition stays lost, whatever comes later */
    dead[1] = dead[2] = 0;
    uint32_t again[] = {0, 0, 3, 4};
    ck_assert_uint_eq(holders_update(h, chains, again, 3, alive, NULL, loss, 4), 0);
    ck_assert_uint_eq(again[0], 0);
    holders_destroy(&h);
}
END_TEST

/* R = 1: p0 on [1] moves to a joiner [5] in view 2; 1 stays alive, handing it over. */
static holders *handed_over(uint32_t *joined)
{
    memset(dead, 0, sizeof dead);
    holders *h = holders_new(1, 1);
    ck_assert_ptr_nonnull(h);
    uint32_t chains[] = {1};
    holders_loss loss[2];
    holders_update(h, NULL, chains, 1, alive, NULL, loss, 2);
    joined[0] = 5;
    ck_assert_uint_eq(holders_update(h, chains, joined, 2, alive, NULL, loss, 2), 0);
    ck_assert(holders_is_whole(h, joined, 0, 1) && !holders_is_whole(h, joined, 0, 5));
    return h;
}

START_TEST(hand_over_holds_until_whole)
{
    uint32_t joined[1];
    holders *h = handed_over(joined);
    holders_loss loss[2];
    /* another server dies (no change to p0): 1 still holds it */
    uint32_t same[] = {5};
    ck_assert_uint_eq(holders_update(h, joined, same, 3, alive, NULL, loss, 2), 0);
    /* 1 dies before 5's copy is whole: lost */
    dead[1] = 1;
    uint32_t after[] = {5};
    ck_assert_uint_eq(holders_update(h, same, after, 4, alive, NULL, loss, 2), 1);
    ck_assert_uint_eq(loss[0].whole, 1);
    ck_assert_uint_eq(loss[0].filling, 5);
    ck_assert_uint_eq(after[0], 0);
    holders_destroy(&h);
}
END_TEST

START_TEST(hand_over_done)
{
    /* the same, but 5 reports the join's view whole first: 1's death loses nothing */
    uint32_t joined[1];
    holders *h = handed_over(joined);
    holders_loss loss[2];
    holders_heard(h, joined, 5, 2, NULL, 0);
    ck_assert(holders_is_whole(h, joined, 0, 5) && !holders_is_whole(h, joined, 0, 1));
    dead[1] = 1;
    uint32_t after[] = {5};
    ck_assert_uint_eq(holders_update(h, joined, after, 3, alive, NULL, loss, 2), 0);
    ck_assert_uint_eq(after[0], 5);
    holders_destroy(&h);
}
END_TEST

START_TEST(losses_past_cap_counted)
{
    /* 3 partitions on [1, 2] with 2 new in each; 1 dies: all 3 lost, 2 listed */
    memset(dead, 0, sizeof dead);
    holders *h = holders_new(3, 2);
    uint32_t c0[] = {1, 3, 1, 3, 1, 3};
    holders_loss loss[2];
    holders_update(h, NULL, c0, 1, alive, NULL, loss, 2);
    dead[3] = 1;
    uint32_t c1[] = {1, 2, 1, 2, 1, 2};
    ck_assert_uint_eq(holders_update(h, c0, c1, 2, alive, NULL, loss, 2), 0);
    dead[1] = 1;
    uint32_t c2[] = {2, 0, 2, 0, 2, 0};
    ck_assert_uint_eq(holders_update(h, c1, c2, 3, alive, NULL, loss, 2), 3);
    ck_assert_uint_eq(loss[1].p, 1);
    ck_assert_uint_eq(c2[4], 0);
    holders_destroy(&h);
}
END_TEST

START_TEST(awaited_per_partition)
{
    /* p0 on [1, 4], p1 on [3, 4]; 4 dies: 2 joins both chains, copied from 1 and 3 */
    memset(dead, 0, sizeof dead);
    holders *h = holders_new(2, 2);
    uint32_t c0[] = {1, 4, 3, 4};
    holders_loss loss[2];
    holders_update(h, NULL, c0, 1, alive, NULL, loss, 2);
    dead[4] = 1;
    uint32_t c1[] = {1, 2, 3, 2};
    ck_assert_uint_eq(holders_update(h, c0, c1, 2, alive, NULL, loss, 2), 0);
    /* a malformed list changes nothing */
    const uint32_t bad[] = {1, 0};
    ck_assert_int_eq(holders_heard(h, c1, 2, 2, bad, 2), -1);
    ck_assert(!holders_is_whole(h, c1, 0, 2));
    /* 2 has p0's copy, still awaits p1's (whole_epoch would say neither) */
    const uint32_t awaited[] = {1};
    ck_assert_int_eq(holders_heard(h, c1, 2, 2, awaited, 1), 0);
    ck_assert(holders_is_whole(h, c1, 0, 2) && !holders_is_whole(h, c1, 1, 2));
    /* 1 dies: p0 keeps its whole survivor; 3 dies: p1 is lost */
    dead[1] = 1;
    uint32_t c2[] = {2, 0, 3, 2};
    ck_assert_uint_eq(holders_update(h, c1, c2, 3, alive, NULL, loss, 2), 0);
    ck_assert_uint_eq(c2[0], 2);
    dead[3] = 1;
    uint32_t c3[] = {2, 0, 2, 0};
    ck_assert_uint_eq(holders_update(h, c2, c3, 4, alive, NULL, loss, 2), 1);
    ck_assert_uint_eq(loss[0].p, 1);
    ck_assert_uint_eq(loss[0].whole, 3);
    ck_assert_uint_eq(loss[0].filling, 2);
    const uint32_t want[] = {2, 0, 0, 0};
    ck_assert_mem_eq(c3, want, sizeof want);
    holders_destroy(&h);
}
END_TEST

Suite *holders_suite(void)
{
    Suite *s = suite_create("holders");
    TCase *tc = tcase_create("lost");
    tcase_add_test(tc, sender_dies_during_copy);
    tcase_add_test(tc, whole_survivor_keeps_it);
    tcase_add_test(tc, every_member_dead_is_not_listed);
    tcase_add_test(tc, hand_over_holds_until_whole);
    tcase_add_test(tc, hand_over_done);
    tcase_add_test(tc, losses_past_cap_counted);
    tcase_add_test(tc, awaited_per_partition);
    suite_add_tcase(s, tc);
    return s;
}
