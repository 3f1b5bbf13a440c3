/* Tests of key placement and the range map (common/ring.c): the even split
 * covers the ring exactly, and the dense spans of the split ranges partition the
 * indices of a table so that every index is stored by exactly one server. */
#include <stdint.h>
#include <stdlib.h>

#include "ring.h"
#include "suites.h"

enum { MAX_SERVERS = 7 };

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void split(ring_range *r, size_t n)
{
    uint32_t owners[MAX_SERVERS + 1];
    for (size_t i = 0; i < n; i++)
        owners[i] = (uint32_t)(100 + i);
    ring_split_even(r, owners, n);
}

START_TEST(mix64_reference_and_distinct)
{
    /* splitmix64 seeded with 0: its first output is mix(0x9e3779b97f4a7c15). Workers
     * in any language must place sparse keys the same way. */
    ck_assert_uint_eq(ring_mix64(0x9e3779b97f4a7c15ULL), 0xe220a8397b1dcdafULL);
    ck_assert_uint_eq(ring_mix64(0), 0);

    enum { N = 200000 };
    uint64_t *out = malloc(N * sizeof *out);
    ck_assert_ptr_nonnull(out);
    for (uint64_t i = 0; i < N / 2; i++) {
        out[i] = ring_mix64(i);                               /* small keys */
        out[N / 2 + i] = ring_mix64(i << 40 | 0xabcdefULL);   /* keys differing high */
    }
    qsort(out, N, sizeof *out, cmp_u64);
    for (size_t i = 1; i < N; i++)
        LOOP_ASSERT(out[i] != out[i - 1], "mix64 collision at sorted index %zu", i);
    /* Consecutive keys spread over the ring: both halves get about half. */
    size_t low = 0;
    for (uint64_t i = 0; i < 10000; i++)
        low += ring_mix64(i) < ((uint64_t)1 << 63);
    ck_assert_uint_gt(low, 4700);
    ck_assert_uint_lt(low, 5300);
    free(out);
}
END_TEST

START_TEST(dense_pos_monotone)
{
    static const uint64_t ns[] = {1, 2, 3, 7, 10, 1000, ((uint64_t)1 << 33) + 7, UINT64_MAX};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        uint64_t n = ns[k];
        ck_assert_uint_eq(ring_dense_pos(0, n), 0);
        /* Every index in small tables, the two ends and a stride in big ones. */
        uint64_t samples = n <= 1000 ? n - 1 : 999, stride = n <= 1000 ? 1 : n / 1000;
        uint64_t prev = 0;
        for (uint64_t q = 1; q <= samples; q++) {
            uint64_t i = q * stride;
            uint64_t p = ring_dense_pos(i, n);
            LOOP_ASSERT(p > prev, "n=%llu: pos(%llu) not above the previous",
                          (unsigned long long)n, (unsigned long long)i);
            prev = p;
        }
        if (n > 1) {
            ck_assert_uint_gt(ring_dense_pos(n - 1, n), ring_dense_pos(n - 2, n));
            /* The last index sits one spacing before the end of the ring. */
            uint64_t gap = UINT64_MAX - ring_dense_pos(n - 1, n);
            ck_assert_uint_le(gap, UINT64_MAX / n + 1);
        }
    }
    ck_assert_uint_eq(ring_dense_pos(1, 2), (uint64_t)1 << 63);
    ck_assert_uint_eq(ring_dense_pos(3, 4), (uint64_t)3 << 62);
    ck_assert_uint_eq(ring_dense_pos(1, 3), 0x5555555555555555ULL);
}
END_TEST

/* Loop test over the number of servers, 1..7. */
START_TEST(split_even_covers_ring)
{
    size_t n = (size_t)_i;
    ring_range r[MAX_SERVERS];
    split(r, n);
    ck_assert_uint_eq(r[0].begin, 0);
    ck_assert_uint_eq(r[n - 1].end, UINT64_MAX);
    uint64_t min = UINT64_MAX, max = 0;
    for (size_t i = 0; i < n; i++) {
        ck_assert_uint_eq(r[i].owner, 100 + i);
        ck_assert_uint_le(r[i].begin, r[i].end);
        if (i + 1 < n)
            ck_assert_uint_eq(r[i + 1].begin, r[i].end + 1);
        uint64_t len = r[i].end - r[i].begin; /* size - 1 */
        min = len < min ? len : min;
        max = len > max ? len : max;
    }
    ck_assert_uint_le(max - min, 1); /* even */
}
END_TEST

/* Checks that the spans of `r` partition 0..n-1 and agree with ring_dense_pos. */
static void check_partition(const ring_range *r, size_t ns, uint64_t n)
{
    uint64_t next = 0;
    for (size_t s = 0; s < ns; s++) {
        uint64_t first, count;
        ring_dense_span(r[s].begin, r[s].end, n, &first, &count);
        ck_assert_msg(first == next, "n=%llu servers=%zu: range %zu starts at %llu, expected %llu",
                      (unsigned long long)n, ns, s, (unsigned long long)first,
                      (unsigned long long)next);
        ck_assert_uint_le(count, n - first);
        if (count > 0) {
            ck_assert_uint_ge(ring_dense_pos(first, n), r[s].begin);
            ck_assert_uint_le(ring_dense_pos(first + count - 1, n), r[s].end);
        }
        if (first > 0)
            ck_assert_uint_lt(ring_dense_pos(first - 1, n), r[s].begin);
        if (first + count < n)
            ck_assert_uint_gt(ring_dense_pos(first + count, n), r[s].end);
        next = first + count;
    }
    ck_assert_msg(next == n, "n=%llu servers=%zu: spans cover %llu indices",
                  (unsigned long long)n, ns, (unsigned long long)next);
}

START_TEST(dense_span_partitions)
{
    static const uint64_t ns[] = {1, 2, 3, 5, 7, 10, 1000, 1001, ((uint64_t)1 << 33) + 7,
                                  (uint64_t)1 << 40, UINT64_MAX - 1, UINT64_MAX};
    ring_range r[MAX_SERVERS];
    for (size_t servers = 1; servers <= MAX_SERVERS; servers++) {
        split(r, servers);
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            check_partition(r, servers, ns[k]);
    }
}
END_TEST

/* Each index of small tables is claimed by the range ring_find gives for its position. */
START_TEST(dense_span_agrees_with_find)
{
    ring_range r[MAX_SERVERS];
    for (size_t servers = 1; servers <= MAX_SERVERS; servers++) {
        split(r, servers);
        for (uint64_t n = 1; n <= 1000; n += (n < 20 ? 1 : 37)) {
            uint64_t first[MAX_SERVERS], count[MAX_SERVERS];
            for (size_t s = 0; s < servers; s++)
                ring_dense_span(r[s].begin, r[s].end, n, &first[s], &count[s]);
            for (uint64_t i = 0; i < n; i++) {
                size_t s = ring_find(r, servers, ring_dense_pos(i, n));
                LOOP_ASSERT(i >= first[s] && i - first[s] < count[s],
                              "n=%llu: index %llu found on %zu but not in its span",
                              (unsigned long long)n, (unsigned long long)i, s);
            }
        }
    }
}
END_TEST

/* Spans of arbitrary (uneven) ranges partition too: the ring is not always split evenly. */
START_TEST(dense_span_uneven_ranges)
{
    ring_range r[4] = {{0, 0, 1},
                       {1, 1000, 2},
                       {1001, (uint64_t)1 << 62, 3},
                       {((uint64_t)1 << 62) + 1, UINT64_MAX, 4}};
    for (uint64_t n = 1; n < 50; n++)
        check_partition(r, 4, n);
    check_partition(r, 4, (uint64_t)1 << 61);
    check_partition(r, 4, UINT64_MAX);
    uint64_t first, count;
    ring_dense_span(0, UINT64_MAX, 12345, &first, &count);
    ck_assert_uint_eq(first, 0);
    ck_assert_uint_eq(count, 12345);
}
END_TEST

START_TEST(find_range)
{
    ring_range r[MAX_SERVERS];
    for (size_t servers = 1; servers <= MAX_SERVERS; servers++) {
        split(r, servers);
        for (size_t s = 0; s < servers; s++) {
            ck_assert_uint_eq(ring_find(r, servers, r[s].begin), s);
            ck_assert_uint_eq(ring_find(r, servers, r[s].end), s);
            ck_assert_uint_eq(ring_find(r, servers, r[s].begin + (r[s].end - r[s].begin) / 2), s);
        }
        ck_assert_uint_eq(ring_find(r, servers, 0), 0);
        ck_assert_uint_eq(ring_find(r, servers, UINT64_MAX), servers - 1);
        for (uint64_t k = 0; k < 2000; k++) {
            uint64_t pos = ring_mix64(k);
            size_t s = ring_find(r, servers, pos);
            LOOP_ASSERT(pos >= r[s].begin && pos <= r[s].end, "pos %llx", (unsigned long long)pos);
        }
    }
    ring_range u[3] = {{0, 9, 1}, {10, 99, 2}, {100, UINT64_MAX, 3}};
    ck_assert_uint_eq(ring_find(u, 3, 9), 0);
    ck_assert_uint_eq(ring_find(u, 3, 10), 1);
    ck_assert_uint_eq(ring_find(u, 3, 99), 1);
    ck_assert_uint_eq(ring_find(u, 3, 100), 2);
}
END_TEST

Suite *ring_suite(void)
{
    Suite *s = suite_create("ring");
    TCase *tc = tcase_create("placement");
    tcase_add_test(tc, mix64_reference_and_distinct);
    tcase_add_test(tc, dense_pos_monotone);
    tcase_add_loop_test(tc, split_even_covers_ring, 1, MAX_SERVERS + 1);
    tcase_add_test(tc, dense_span_partitions);
    tcase_add_test(tc, dense_span_agrees_with_find);
    tcase_add_test(tc, dense_span_uneven_ranges);
    tcase_add_test(tc, find_range);
    suite_add_tcase(s, tc);
    return s;
}
