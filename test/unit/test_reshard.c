/* Tests of the resharding plan (scheduler/reshard.c): a checkpoint written by 3
 * servers, placed on 2, 3 and 4 servers with R = 1, 2 and 3, servers sharing
 * one directory or each reading only its own files. Every chain has distinct
 * members, every server holds partitions, every partition is loaded at least
 * once and at most once per server, each load from a file that server reads of
 * an old node that held the partition, and a partition no server can read is
 * named. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reshard.h"
#include "ring.h"
#include "suites.h"

enum { NPARTS = 64, VNODES = 16, OLD_BASE = 100 };

typedef struct reads_ctx {
    int shared;       /* every server reads every file */
    uint32_t own[8];  /* else: server id -> the old node whose file it reads (0: none) */
    uint32_t extra[8]; /* and a second file copied in (0: none) */
} reads_ctx;

static int reads(void *ctx, uint32_t server, uint32_t old)
{
    const reads_ctx *r = ctx;
    if (r->shared)
        return 1;
    return server < 8 && old && (r->own[server] == old || r->extra[server] == old);
}

/* The old job's chains: 3 servers OLD_BASE+1..3 placed on the ring. */
static void old_chains(uint32_t *chains, uint32_t R)
{
    uint32_t olds[3] = {OLD_BASE + 1, OLD_BASE + 2, OLD_BASE + 3};
    ck_assert_int_eq(ring_chains(chains, NPARTS, R, olds, 3, VNODES, NULL), 0);
}

static int in_chain(const uint32_t *c, uint32_t R, uint32_t id)
{
    for (uint32_t j = 0; j < R; j++)
        if (c[j] == id)
            return 1;
    return 0;
}

/* The invariants of a plan of old (R) onto servers 1..ns. */
static void check_plan(const reshard_plan *pl, const uint32_t *old, uint32_t R, size_t ns,
                       reads_ctx *rc)
{
    uint32_t holds[8] = {0};
    for (uint32_t p = 0; p < NPARTS; p++) {
        const uint32_t *c = &pl->chains[(size_t)p * R];
        const uint32_t *ld = &pl->loaders[(size_t)p * R], *src = &pl->sources[(size_t)p * R];
        uint32_t want = R < ns ? R : (uint32_t)ns;
        for (uint32_t j = 0; j < R; j++) {
            LOOP_ASSERT((j < want) == (c[j] != 0), "partition %u: chain of %u members", p, want);
            for (uint32_t k = 0; k < j; k++)
                LOOP_ASSERT(!c[j] || c[j] != c[k], "partition %u: server %u twice", p, c[j]);
            if (c[j])
                holds[c[j]]++;
        }
        LOOP_ASSERT(ld[0] != 0, "partition %u: loaded by no server", p);
        for (uint32_t j = 0; j < R && ld[j]; j++) {
            LOOP_ASSERT(in_chain(&old[(size_t)p * R], R, src[j]),
                        "partition %u: loaded from node %u, which did not hold it", p, src[j]);
            LOOP_ASSERT(reads(rc, ld[j], src[j]), "partition %u: server %u cannot read it", p,
                        ld[j]);
            for (uint32_t k = 0; k < j; k++)
                LOOP_ASSERT(ld[k] != ld[j], "partition %u: server %u loads it twice", p, ld[j]);
            /* a loader outside the chain only when no member can read a file of p */
            if (!in_chain(c, R, ld[j]))
                for (uint32_t k = 0; k < R; k++)
                    for (uint32_t q = 0; c[k] && q < R; q++)
                        LOOP_ASSERT(!old[(size_t)p * R + q] ||
                                        !reads(rc, c[k], old[(size_t)p * R + q]),
                                    "partition %u: loaded outside its chain, member %u reads", p,
                                    c[k]);
            int paired = 0;
            for (size_t q = 0; q < pl->npairs; q++)
                paired |= pl->pairs[2 * q] == ld[j] && pl->pairs[2 * q + 1] == src[j];
            LOOP_ASSERT(paired, "partition %u: load (%u, %u) not among the pairs", p, ld[j],
                        src[j]);
        }
    }
    for (uint32_t s = 1; s <= ns; s++)
        ck_assert_msg(holds[s] > 0, "server %u holds no partition", s);
}

/* The old job's chains (R) into old, then a plan of them onto servers[0..ns),
 * made and checked for the invariants above; the caller frees pl. */
static void make_checked(reshard_plan *pl, uint32_t *old, uint32_t R, const uint32_t *servers,
                         size_t ns, reads_ctx *rc)
{
    old_chains(old, R);
    ck_assert_int_eq(reshard_make(pl, NPARTS, R, VNODES, old, servers, ns, reads, rc), 0);
    check_plan(pl, old, R, ns, rc);
}

START_TEST(shared_dir_more_and_fewer)
{
    uint32_t servers[4] = {1, 2, 3, 4};
    reads_ctx rc = {.shared = 1};
    for (uint32_t R = 1; R <= 3; R++)
        for (size_t ns = 2; ns <= 4; ns++) {
            uint32_t old[NPARTS * 3];
            reshard_plan pl;
            make_checked(&pl, old, R, servers, ns, &rc);
            /* a shared directory: every member loads, nothing is copied */
            for (size_t i = 0; i < (size_t)NPARTS * R; i++)
                ck_assert_uint_eq(pl.loaders[i], pl.chains[i]);
            reshard_free(&pl);
        }
}
END_TEST

START_TEST(same_count_keeps_the_chains)
{
    uint32_t servers[3] = {1, 2, 3};
    reads_ctx rc = {.own = {0, OLD_BASE + 1, OLD_BASE + 2, OLD_BASE + 3}};
    for (uint32_t R = 1; R <= 3; R++) {
        uint32_t old[NPARTS * 3];
        reshard_plan pl;
        make_checked(&pl, old, R, servers, 3, &rc);
        for (size_t i = 0; i < (size_t)NPARTS * R; i++)
            ck_assert_uint_eq(pl.chains[i], old[i] - OLD_BASE); /* server k took node 100+k */
        ck_assert_uint_eq(pl.npairs, 3);
        reshard_free(&pl);
    }
}
END_TEST

START_TEST(own_dirs_a_new_server_is_filled)
{
    /* 4 servers, the 4th with an empty directory: it still takes partitions, and
     * with R = 1 those are loaded by their old holder's new server and handed over */
    uint32_t servers[4] = {1, 2, 3, 4};
    reads_ctx rc = {.own = {0, OLD_BASE + 1, OLD_BASE + 2, OLD_BASE + 3, 0}};
    for (uint32_t R = 1; R <= 3; R++) {
        uint32_t old[NPARTS * 3];
        reshard_plan pl;
        make_checked(&pl, old, R, servers, 4, &rc);
        for (size_t i = 0; i < (size_t)NPARTS * R; i++)
            ck_assert_uint_ne(pl.loaders[i], 4);
        reshard_free(&pl);
    }
}
END_TEST

START_TEST(fewer_servers_need_every_file)
{
    uint32_t servers[2] = {1, 2}, old[NPARTS];
    old_chains(old, 1);
    /* node 103's file is nowhere: its first partition is named */
    reads_ctx rc = {.own = {0, OLD_BASE + 1, OLD_BASE + 2}};
    reshard_plan pl;
    ck_assert_int_eq(reshard_make(&pl, NPARTS, 1, VNODES, old, servers, 2, reads, &rc), 1);
    uint32_t first = 0;
    while (old[first] != OLD_BASE + 3)
        first++;
    ck_assert_uint_eq(pl.missing, first);
    ck_assert_ptr_null(pl.chains);
    /* copied into server 1's directory: planned, server 1 loads two files */
    rc.extra[1] = OLD_BASE + 3;
    ck_assert_int_eq(reshard_make(&pl, NPARTS, 1, VNODES, old, servers, 2, reads, &rc), 0);
    check_plan(&pl, old, 1, 2, &rc);
    size_t mine = 0;
    for (size_t q = 0; q < pl.npairs; q++)
        mine += pl.pairs[2 * q] == 1;
    ck_assert_uint_eq(mine, 2);
    reshard_free(&pl);
}
END_TEST

Suite *reshard_suite(void)
{
    Suite *s = suite_create("reshard");
    TCase *tc = tcase_create("plan");
    tcase_add_test(tc, shared_dir_more_and_fewer);
    tcase_add_test(tc, same_count_keeps_the_chains);
    tcase_add_test(tc, own_dirs_a_new_server_is_filled);
    tcase_add_test(tc, fewer_servers_need_every_file);
    suite_add_tcase(s, tc);
    return s;
}
