/* Tests of the fault-ahead helper (server/store/prefault.c) and of a sparse shard's
 * growth with it (server/store/shard_map.c): the doubled map, records and dirty bits
 * faulted in off the push path, the growth waiting for the doubled map, and
 * every key found during and after the growth. */
#define _GNU_SOURCE /* mincore */
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "store/prefault.h"
#include "ring.h"
#include "store/shard.h"
#include "store/shard_impl.h"
#include "suites.h"
#include "timeutil.h"

static const upd_opts SUM = {.kind = UPD_SUM, .lr = 0, .momentum = 0, .l2 = 0, .eps = 0};

/* 1 when every page of [p, p + len) is resident (faulted in). */
static int resident(const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095, end = (uintptr_t)p + len;
    size_t pages = (end - a + 4095) / 4096;
    unsigned char *v = malloc(pages);
    ck_assert_ptr_nonnull(v);
    int all = mincore((void *)a, end - a, v) == 0;
    for (size_t i = 0; all && i < pages; i++)
        all = v[i] & 1;
    free(v);
    return all;
}

/* Waits (10 s at most) for the fault-ahead helper to finish what it was asked. */
static void wait_prefault(void)
{
    int64_t deadline = tu_now_ms() + 10000;
    while (!prefault_idle() && tu_now_ms() < deadline)
        tu_sleep_ms(1);
    ck_assert(prefault_idle());
}

/* The helper (server/store/prefault.c) faults a range in without changing a byte,
 * and unmaps a mapping handed to it. */
START_TEST(prefault_populate_release)
{
    size_t len = 8u << 20;
    char *p = shard_big_alloc(len);
    ck_assert_ptr_nonnull(p);
    p[12345] = 7; /* written before: kept */
    ck_assert(!resident(p + (4u << 20), 4096));
    ck_assert_int_eq(prefault_ask(p, len), 0);
    wait_prefault();
    ck_assert(resident(p, len));
    ck_assert_int_eq(p[12345], 7);
    for (size_t i = 0; i < len; i += 4096)
        LOOP_ASSERT(p[i] == 0, "byte %zu is %d", i, p[i]);
    prefault_release(p, len);
    wait_prefault();
    unsigned char v;
    ck_assert_int_ne(mincore(p, 4096, &v), 0); /* unmapped */
}
END_TEST

enum { BATCH = 8192 };

/* A sparse shard filled with keys ring_mix64(1 .. next - 1), each pushed 1. */
typedef struct filled {
    shard *s;
    uint64_t next;
    uint64_t keys[BATCH];
    float g[BATCH];
} filled;

/* One push of BATCH new keys. */
static void push_new(filled *f)
{
    for (int k = 0; k < BATCH; k++)
        f->keys[k] = ring_mix64(f->next++);
    ck_assert_int_eq(shard_push(f->s, f->keys, 0, BATCH, f->g), 0);
}

/* A shard of 2^20 slots just past 0.6 load: its doubled map mapped. */
static void fill_to_next(filled *f)
{
    shard_init init = {INIT_ZERO, 0, 0};
    f->s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &SUM, &init);
    ck_assert_ptr_nonnull(f->s);
    f->next = 1;
    for (int k = 0; k < BATCH; k++)
        f->g[k] = 1;
    while (!f->s->next_slots || f->s->cap < (1u << 20))
        push_new(f);
    ck_assert_uint_eq(f->s->cap, 1u << 20);
}

/* Every key pushed reads 1. */
static void all_found(const filled *f, const char *when)
{
    float v;
    for (uint64_t i = 1; i < f->next; i++) {
        uint64_t key = ring_mix64(i);
        shard_pull(f->s, &key, 0, 1, &v);
        LOOP_ASSERT(v == 1.0f, "key #%llu reads %g %s", (unsigned long long)i, (double)v, when);
    }
}

/* Growth with the helper (shard_map.c): past 0.6 load the doubled map is mapped
 * and faulted in by the helper, the records and dirty bits ahead of the rows in
 * use too; the map grows at 0.7 load once the doubled map is in (up to 0.8 while
 * it is not), taking it over. Every key is found before, during (rows still in
 * the old map) and after the growth. (White box: shard_impl.h.) */
START_TEST(sparse_prefault_growth)
{
    static filled f;
    fill_to_next(&f);
    shard *s = f.s;
    size_t bytes = s->next_cap * sizeof *s->next_slots;
    ck_assert(s->next_epoch); /* asked for */
    int64_t deadline = tu_now_ms() + 10000;
    while (!s->next_ready && tu_now_ms() < deadline) {
        tu_sleep_ms(1);
        shard_map_prepare(s, 0); /* asks again if a request was dropped; sees it done */
    }
    ck_assert(s->next_ready);
    ck_assert(resident(s->next_slots, bytes));
    wait_prefault();
    size_t rec = shard_rec_floats(s) * sizeof(float);
    ck_assert(resident(shard_rec(s, (uint32_t)s->used), (4u << 20) / rec * rec)); /* ahead */
    /* the rule: past 0.7 the growth waits for the helper, up to 0.8 */
    size_t used = s->used;
    s->used = s->cap * 3 / 4;
    ck_assert(shard_map_full(s));
    s->next_ready = 0;
    ck_assert(!shard_map_full(s));
    s->used = s->cap * 8 / 10;
    ck_assert(shard_map_full(s));
    s->used = used;
    s->next_ready = 1;
    uint32_t *prepared = s->next_slots;
    while (!s->old_slots) /* on to 0.7: the prepared map is taken over */
        push_new(&f);
    ck_assert_ptr_eq(s->slots, prepared);
    ck_assert_uint_le(s->used, (1u << 20) * 7 / 10 + BATCH);
    ck_assert_uint_lt(s->moved, s->to_move); /* rows are still in the old map */
    ck_assert_uint_eq(shard_size(s), f.next - 1);
    all_found(&f, "while growing");
    while (s->old_slots) /* the move ends */
        push_new(&f);
    all_found(&f, "after growing");
    shard_destroy(&f.s);
}
END_TEST

/* Past 0.7 load, a doubled map the helper has not faulted in yet (here one it
 * was never asked for) is faulted in by the pushes themselves, a huge page each
 * from its end (pushes that took 3 ms already only past 0.75 load), and the
 * growth waits for it: no push of the growth faults in more than that. Every
 * key is found during and after the growth. */
START_TEST(sparse_prefault_lagging)
{
    static filled f;
    fill_to_next(&f);
    shard *s = f.s;
    size_t bytes = s->next_cap * sizeof *s->next_slots;
    wait_prefault();
    shard_big_free(s->next_slots, bytes); /* a fresh one in its place: nothing in */
    s->next_slots = shard_big_alloc(bytes);
    ck_assert_ptr_nonnull(s->next_slots);
    s->next_back = bytes;
    s->next_ready = 0;
    int pushed_in = 0;
    while (!s->old_slots) {
        s->next_epoch = prefault_epoch() + 1; /* as asked: the helper is not to do it */
        size_t back = s->next_back;
        push_new(&f);
        ck_assert_uint_le(s->used, (1u << 20) * 8 / 10);
        if (!s->old_slots && s->next_back < back) {
            ck_assert_uint_eq(s->next_back, back - (2u << 20)); /* a huge page a push */
            ck_assert_uint_gt((s->used + 1) * 10, s->cap * 7);    /* past 0.7 only */
            pushed_in++;
        } else if (!s->old_slots && (s->used + 1) * 20 > s->cap * 15) {
            ck_assert(s->next_ready); /* past 0.75 a push faults in a page unless all is in */
        }
    }
    ck_assert_int_eq(pushed_in, (int)(bytes / (2u << 20))); /* then the next push grows */
    ck_assert(resident(s->slots, bytes));
    all_found(&f, "while growing");
    while (s->old_slots)
        push_new(&f);
    all_found(&f, "after growing");
    shard_destroy(&f.s);
}
END_TEST

/* The server's loop moves a doubling map's rows while no message waits
 * (shard_grow_step): exactly `budget` rows a step, 1 while rows are left, 0 and
 * the old map given back after the last; every key is found between steps and
 * after, pushes in between included; a shard not growing (or dense) moves
 * nothing. */
START_TEST(sparse_grow_idle_steps)
{
    static filled f;
    fill_to_next(&f);
    shard *s = f.s;
    ck_assert_int_eq(shard_grow_step(s, 1000), 0); /* not growing yet */
    while (!s->old_slots)
        push_new(&f);
    size_t moved = s->moved;
    ck_assert_int_eq(shard_grow_step(s, 0), 1);
    ck_assert_uint_eq(s->moved, moved);
    ck_assert_int_eq(shard_grow_step(s, 1000), 1);
    ck_assert_uint_eq(s->moved, moved + 1000);
    all_found(&f, "after an idle step");
    push_new(&f); /* a push between steps moves its share too */
    ck_assert_uint_gt(s->moved, moved + 1000);
    all_found(&f, "after a push between idle steps");
    int steps = 0;
    while (shard_grow_step(s, 16384))
        ck_assert_int_lt(++steps, 1000);
    ck_assert_ptr_null(s->old_slots);
    ck_assert_uint_eq(s->moved, s->to_move);
    ck_assert_int_eq(shard_grow_step(s, 16384), 0);
    all_found(&f, "after the idle steps");
    shard_destroy(&f.s);
    shard_init init = {INIT_ZERO, 0, 0};
    shard *d = shard_new(1, 0, 1000, 0, UINT64_MAX, 1, &SUM, &init); /* dense */
    ck_assert_ptr_nonnull(d);
    ck_assert_int_eq(shard_grow_step(d, 1000), 0);
    shard_destroy(&d);
}
END_TEST

Suite *prefault_suite(void)
{
    Suite *s = suite_create("prefault");
    TCase *tc = tcase_create("prefault");
    tcase_set_timeout(tc, 60); /* 2^20-slot maps grown, more under ASan */
    tcase_add_test(tc, prefault_populate_release);
    tcase_add_test(tc, sparse_prefault_growth);
    tcase_add_test(tc, sparse_prefault_lagging);
    tcase_add_test(tc, sparse_grow_idle_steps);
    suite_add_tcase(s, tc);
    return s;
}
