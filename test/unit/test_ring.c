/* Tests of key placement and the range map (common/ring.c): the even split
 * covers the ring exactly, and the dense spans of the split ranges partition the
 * indices of a table so that every index is stored by exactly one server.
 * Partitions tile the ring consistently with ring_partition_of; replica chains
 * are distinct, deterministic, balanced, and change only where a server left. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pskv_errors.h"
#include "ring.h"
#include "suites.h"

enum { MAX_SERVERS = 7 };

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct span_range { /* ring positions [begin, end], inclusive */
    uint64_t begin, end;
} span_range;

/* The bounds of n partitions, the ranges dense spans are cut at. */
static void split(span_range *r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        r[i].begin = ring_partition_begin((uint32_t)i, (uint32_t)n);
        r[i].end = ring_partition_end((uint32_t)i, (uint32_t)n);
    }
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

/* Checks that the spans of `r` partition 0..n-1 and agree with ring_dense_pos. */
static void check_partition(const span_range *r, size_t ns, uint64_t n)
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
    span_range r[MAX_SERVERS];
    for (size_t servers = 1; servers <= MAX_SERVERS; servers++) {
        split(r, servers);
        for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++)
            check_partition(r, servers, ns[k]);
    }
}
END_TEST

/* Each index of small tables is in the span of the partition its position falls in. */
START_TEST(dense_span_agrees_with_find)
{
    span_range r[MAX_SERVERS];
    for (size_t servers = 1; servers <= MAX_SERVERS; servers++) {
        split(r, servers);
        for (uint64_t n = 1; n <= 1000; n += (n < 20 ? 1 : 37)) {
            uint64_t first[MAX_SERVERS], count[MAX_SERVERS];
            for (size_t s = 0; s < servers; s++)
                ring_dense_span(r[s].begin, r[s].end, n, &first[s], &count[s]);
            for (uint64_t i = 0; i < n; i++) {
                size_t s = ring_partition_of(ring_dense_pos(i, n), (uint32_t)servers);
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
    span_range r[4] = {{0, 0},
                       {1, 1000},
                       {1001, (uint64_t)1 << 62},
                       {((uint64_t)1 << 62) + 1, UINT64_MAX}};
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

/* Partition bounds tile the ring and agree with ring_partition_of at every edge. */
/* ring_run: the partitions a dense run meets, in order, each with the run's keys
 * in it; together they are the run, every key in the partition given; an empty
 * run meets none. */
START_TEST(run_walks_partitions)
{
    const uint64_t sizes[] = {1, 7, 1000, 65536 + 3};
    const uint32_t parts[] = {1, 3, 16, 64};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++) {
            uint64_t n = sizes[a];
            uint64_t first = n / 3, end = n - n / 5;
            ring_run it;
            ring_run_init(&it, first, end, n, parts[b]);
            uint64_t at = first, lo, hi;
            uint32_t p, prev = 0;
            int k = 0;
            while (ring_run_next(&it, &p, &lo, &hi)) {
                ck_assert_uint_eq(lo, at); /* consecutive, never empty */
                ck_assert_uint_lt(lo, hi);
                ck_assert(k == 0 || p > prev);
                for (uint64_t i = lo; i < hi; i++)
                    ck_assert_uint_eq(ring_partition_of(ring_dense_pos(i, n), parts[b]), p);
                at = hi;
                prev = p;
                k++;
            }
            ck_assert_uint_eq(at, end);
            ring_run_init(&it, first, first, n, parts[b]);
            ck_assert_int_eq(ring_run_next(&it, &p, &lo, &hi), 0);
        }
}
END_TEST

/* With 2^s partitions ring_run walks in 64-bit integers (ring.c): the same
 * partitions and bounds as the 128-bit walk, over sizes around the partition
 * count and large ones, every start key of the small tables. */
START_TEST(run_pow2_matches_general)
{
    const uint64_t sizes[] = {1, 2, 63, 64, 65, 100, 1000, 1024, 4099, 65536 + 3,
                              ((uint64_t)1 << 40) + 12345, (uint64_t)1 << 47};
    const uint32_t parts[] = {1, 2, 64, 1024, 65536};
    long walks = 0, steps = 0;
    for (size_t a = 0; a < sizeof sizes / sizeof sizes[0]; a++)
        for (size_t b = 0; b < sizeof parts / sizeof parts[0]; b++) {
            uint64_t n = sizes[a];
            uint64_t step = n <= 5000 ? 1 : n / 7 + 1;
            for (uint64_t first = 0; first < n; first += step) {
                uint64_t end = first + (n - first) / 2 + 1;
                ring_run fast, slow;
                ring_run_init(&fast, first, end, n, parts[b]);
                ring_run_init(&slow, first, end, n, parts[b]);
                slow.shift = -1; /* the 128-bit walk */
                uint64_t lo1, hi1, lo2, hi2;
                uint32_t p1, p2;
                int more;
                do { /* checked without ck_assert per step: each one costs a write */
                    more = ring_run_next(&fast, &p1, &lo1, &hi1);
                    int more2 = ring_run_next(&slow, &p2, &lo2, &hi2);
                    steps++;
                    LOOP_ASSERT(fast.shift >= 0 && more == more2 &&
                                    (!more || (p1 == p2 && lo1 == lo2 && hi1 == hi2)),
                                "n=%llu parts=%u first=%llu: partition %u [%llu, %llu) against "
                                "%u [%llu, %llu)", (unsigned long long)n, parts[b],
                                (unsigned long long)first, p1, (unsigned long long)lo1,
                                (unsigned long long)hi1, p2, (unsigned long long)lo2,
                                (unsigned long long)hi2);
                } while (more);
                walks++;
            }
        }
    ck_assert_int_gt(walks, 1000);
    ck_assert_int_gt(steps, walks);
}
END_TEST

START_TEST(partition_bounds)
{
    static const uint32_t nps[] = {1, 2, 3, 7, 64, 1000, 65535, 65536};
    for (size_t k = 0; k < sizeof nps / sizeof nps[0]; k++) {
        uint32_t np = nps[k];
        ck_assert_uint_eq(ring_partition_begin(0, np), 0);
        ck_assert_uint_eq(ring_partition_end(np - 1, np), UINT64_MAX);
        ck_assert_uint_eq(ring_partition_of(0, np), 0);
        ck_assert_uint_eq(ring_partition_of(UINT64_MAX, np), np - 1);
        uint64_t min = UINT64_MAX, max = 0;
        for (uint32_t p = 0; p < np; p++) {
            uint64_t b = ring_partition_begin(p, np), e = ring_partition_end(p, np);
            LOOP_ASSERT(b <= e, "np=%u p=%u empty", np, p);
            if (p + 1 < np)
                LOOP_ASSERT(ring_partition_begin(p + 1, np) == e + 1, "np=%u p=%u gap", np, p);
            LOOP_ASSERT(ring_partition_of(b, np) == p, "np=%u: begin of %u", np, p);
            LOOP_ASSERT(ring_partition_of(e, np) == p, "np=%u: end of %u", np, p);
            LOOP_ASSERT(ring_partition_of(b + (e - b) / 2, np) == p, "np=%u: mid of %u", np, p);
            if (p > 0)
                LOOP_ASSERT(ring_partition_of(b - 1, np) == p - 1, "np=%u: before %u", np, p);
            if (p + 1 < np)
                LOOP_ASSERT(ring_partition_of(e + 1, np) == p + 1, "np=%u: after %u", np, p);
            min = e - b < min ? e - b : min;
            max = e - b > max ? e - b : max;
        }
        ck_assert_uint_le(max - min, 1); /* equal */
    }
    /* Exact values: begin is the ceiling of p * 2^64 / nparts. */
    ck_assert_uint_eq(ring_partition_begin(1, 3), 0x5555555555555556ULL);
    ck_assert_uint_eq(ring_partition_end(0, 3), 0x5555555555555555ULL);
    ck_assert_uint_eq(ring_partition_begin(2, 3), 0xaaaaaaaaaaaaaaabULL);
    ck_assert_uint_eq(ring_partition_begin(1, 64), (uint64_t)1 << 58);
    ck_assert_uint_eq(ring_partition_end(0, 65536), ((uint64_t)1 << 48) - 1);
    ck_assert_uint_eq(ring_partition_of(0x5555555555555555ULL, 3), 0);
    ck_assert_uint_eq(ring_partition_of(0x5555555555555556ULL, 3), 1);
    /* Random positions land inside the bounds of their partition. */
    for (uint64_t i = 0; i < 20000; i++) {
        uint64_t pos = ring_mix64(i);
        uint32_t np = nps[i % (sizeof nps / sizeof nps[0])];
        uint32_t p = ring_partition_of(pos, np);
        LOOP_ASSERT(p < np && ring_partition_begin(p, np) <= pos && pos <= ring_partition_end(p, np),
                    "np=%u pos %llx", np, (unsigned long long)pos);
    }
}
END_TEST

START_TEST(token_reference)
{
    ck_assert_uint_eq(ring_token(7, 3), ring_mix64(((uint64_t)7 << 32) | 3));
    ck_assert_uint_eq(ring_token(UINT32_MAX, UINT32_MAX), ring_mix64(UINT64_MAX));
    ck_assert_uint_ne(ring_token(1, 0), ring_token(0, 1));
}
END_TEST

enum { NP = 256, R3 = 3, VN = 16, NS = 8 };

/* Checks every chain in c (nparts x R) has `len` distinct live members then 0s. */
static void check_chains(const uint32_t *c, uint32_t np, uint32_t R, const uint32_t *servers,
                         size_t ns, size_t len)
{
    for (uint32_t p = 0; p < np; p++) {
        const uint32_t *ch = &c[(size_t)p * R];
        for (size_t j = 0; j < R; j++) {
            if (j >= len) {
                LOOP_ASSERT(ch[j] == 0, "p=%u j=%zu not padded", p, j);
                continue;
            }
            int live = 0;
            for (size_t i = 0; i < ns; i++)
                live |= ch[j] == servers[i];
            LOOP_ASSERT(ch[j] != 0 && live, "p=%u j=%zu: %u not a live server", p, j, ch[j]);
            for (size_t m = 0; m < j; m++)
                LOOP_ASSERT(ch[m] != ch[j], "p=%u: %u twice", p, ch[j]);
        }
    }
}

static int in_chain(const uint32_t *ch, uint32_t R, uint32_t id)
{
    for (uint32_t j = 0; j < R; j++)
        if (ch[j] == id)
            return 1;
    return 0;
}

/* Reference walk for one partition: the first R distinct ids clockwise from begin. */
static void naive_chain(uint32_t *out, uint32_t p, uint32_t np, uint32_t R, const uint32_t *servers,
                        size_t ns, uint32_t vnodes)
{
    uint64_t begin = ring_partition_begin(p, np);
    size_t n = 0;
    memset(out, 0, R * sizeof *out);
    while (n < R && n < ns) {
        /* Next-closest unused server: smallest clockwise distance over its tokens. */
        uint64_t best = UINT64_MAX;
        uint32_t who = 0;
        for (size_t i = 0; i < ns; i++) {
            if (in_chain(out, R, servers[i]))
                continue;
            for (uint32_t v = 0; v < vnodes; v++) {
                uint64_t d = ring_token(servers[i], v) - begin; /* wraps: clockwise distance */
                if (d < best || who == 0) {
                    best = d;
                    who = servers[i];
                }
            }
        }
        out[n++] = who;
    }
}

START_TEST(chains_fresh)
{
    uint32_t servers[NS] = {11, 5, 42, 7, 1000, 3, 77, 19};
    uint32_t *a = malloc(NP * R3 * sizeof *a), *b = malloc(NP * R3 * sizeof *b);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(ring_chains(a, NP, R3, servers, NS, VN, NULL), 0);
    check_chains(a, NP, R3, servers, NS, R3);
    /* Deterministic, and independent of the order servers are listed in. */
    ck_assert_int_eq(ring_chains(b, NP, R3, servers, NS, VN, NULL), 0);
    ck_assert_mem_eq(a, b, NP * R3 * sizeof *a);
    uint32_t rev[NS];
    for (size_t i = 0; i < NS; i++)
        rev[i] = servers[NS - 1 - i];
    ck_assert_int_eq(ring_chains(b, NP, R3, rev, NS, VN, NULL), 0);
    ck_assert_mem_eq(a, b, NP * R3 * sizeof *a);
    /* Agrees with a brute-force walk. */
    uint32_t ref[R3];
    for (uint32_t p = 0; p < NP; p++) {
        naive_chain(ref, p, NP, R3, servers, NS, VN);
        LOOP_ASSERT(memcmp(ref, &a[p * R3], sizeof ref) == 0, "p=%u differs from the reference", p);
    }
    /* A token exactly at a partition's begin heads it: one partition, begin 0. */
    uint32_t one;
    uint32_t only[2] = {servers[0], servers[1]};
    ck_assert_int_eq(ring_chains(&one, 1, 1, only, 2, 1, NULL), 0);
    naive_chain(ref, 0, 1, 1, only, 2, 1);
    ck_assert_uint_eq(one, ref[0]);
    free(a);
    free(b);
}
END_TEST

START_TEST(chains_big)
{
    /* The largest sizes the scheduler allows: must stay fast and well formed. */
    enum { BNP = 65536, BNS = 4096, BVN = 256 };
    uint32_t *servers = malloc(BNS * sizeof *servers);
    uint32_t *c = malloc((size_t)BNP * R3 * sizeof *c);
    ck_assert_ptr_nonnull(servers);
    ck_assert_ptr_nonnull(c);
    for (uint32_t i = 0; i < BNS; i++)
        servers[i] = i + 1;
    ck_assert_int_eq(ring_chains(c, BNP, R3, servers, BNS, BVN, NULL), 0);
    for (uint32_t p = 0; p < BNP; p++) {
        const uint32_t *ch = &c[(size_t)p * R3];
        LOOP_ASSERT(ch[0] >= 1 && ch[0] <= BNS && ch[1] >= 1 && ch[1] <= BNS && ch[2] >= 1 &&
                        ch[2] <= BNS && ch[0] != ch[1] && ch[1] != ch[2] && ch[0] != ch[2],
                    "p=%u bad chain", p);
    }
    /* Remove one server in place. */
    servers[17] = servers[BNS - 1];
    ck_assert_int_eq(ring_chains(c, BNP, R3, servers, BNS - 1, BVN, c), 0);
    for (uint32_t p = 0; p < BNP; p++)
        LOOP_ASSERT(!in_chain(&c[(size_t)p * R3], R3, 18), "p=%u still holds 18", p);
    free(servers);
    free(c);
}
END_TEST

/* Loop test over which server (index into the list) leaves. */
START_TEST(chains_remove_one)
{
    uint32_t servers[NS] = {11, 5, 42, 7, 1000, 3, 77, 19};
    uint32_t gone = servers[_i];
    uint32_t left[NS - 1];
    for (size_t i = 0, n = 0; i < NS; i++)
        if (servers[i] != gone)
            left[n++] = servers[i];
    uint32_t *a = malloc(NP * R3 * sizeof *a), *b = malloc(NP * R3 * sizeof *b);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(ring_chains(a, NP, R3, servers, NS, VN, NULL), 0);
    ck_assert_int_eq(ring_chains(b, NP, R3, left, NS - 1, VN, a), 0);
    check_chains(b, NP, R3, left, NS - 1, R3);
    size_t moved = 0;
    for (uint32_t p = 0; p < NP; p++) {
        const uint32_t *old = &a[p * R3], *now = &b[p * R3];
        if (!in_chain(old, R3, gone)) {
            LOOP_ASSERT(memcmp(old, now, R3 * sizeof *old) == 0, "p=%u changed", p);
            continue;
        }
        moved++;
        /* Survivors first, in order; then one newcomer that was not in the chain. */
        size_t n = 0;
        for (size_t j = 0; j < R3; j++)
            if (old[j] != gone)
                LOOP_ASSERT(now[n++] == old[j], "p=%u survivor %u moved", p, old[j]);
        LOOP_ASSERT(n == R3 - 1, "p=%u", p);
        LOOP_ASSERT(!in_chain(old, R3, now[R3 - 1]), "p=%u newcomer %u was there", p, now[R3 - 1]);
    }
    ck_assert_uint_gt(moved, 0);
    /* In place gives the same answer. */
    ck_assert_int_eq(ring_chains(a, NP, R3, left, NS - 1, VN, a), 0);
    ck_assert_mem_eq(a, b, NP * R3 * sizeof *a);
    /* Passing prev with nobody gone changes nothing. */
    ck_assert_int_eq(ring_chains(a, NP, R3, left, NS - 1, VN, b), 0);
    ck_assert_mem_eq(a, b, NP * R3 * sizeof *a);
    free(a);
    free(b);
}
END_TEST

START_TEST(chains_lost_and_added)
{
    uint32_t servers[NS] = {11, 5, 42, 7, 1000, 3, 77, 19};
    uint32_t *a = malloc(NP * R3 * sizeof *a), *b = malloc(NP * R3 * sizeof *b);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(ring_chains(a, NP, R3, servers, NS, VN, NULL), 0);
    /* Kill the whole chain of partition 0: it is lost, others keep survivors. */
    uint32_t dead[R3];
    memcpy(dead, a, sizeof dead);
    uint32_t left[NS];
    size_t nl = 0;
    for (size_t i = 0; i < NS; i++)
        if (!in_chain(dead, R3, servers[i]))
            left[nl++] = servers[i];
    ck_assert_uint_eq(nl, NS - R3);
    ck_assert_int_eq(ring_chains(b, NP, R3, left, nl, VN, a), 0);
    size_t lost = 0;
    for (uint32_t p = 0; p < NP; p++) {
        const uint32_t *old = &a[p * R3], *now = &b[p * R3];
        int all_dead = in_chain(dead, R3, old[0]) && in_chain(dead, R3, old[1]) &&
                       in_chain(dead, R3, old[2]);
        if (all_dead) {
            lost++;
            LOOP_ASSERT(now[0] == 0 && now[1] == 0 && now[2] == 0, "p=%u not lost", p);
        } else {
            LOOP_ASSERT(now[0] != 0 && now[1] != 0 && now[2] != 0, "p=%u lost", p);
            size_t first = 0;
            while (in_chain(dead, R3, old[first]))
                first++;
            LOOP_ASSERT(now[0] == old[first], "p=%u first survivor not head", p);
        }
    }
    ck_assert_uint_ge(lost, 1);
    /* A lost partition stays lost even once servers come back. */
    ck_assert_int_eq(ring_chains(a, NP, R3, servers, NS, VN, b), 0);
    for (uint32_t p = 0; p < NP; p++) {
        const uint32_t *was = &b[p * R3], *now = &a[p * R3];
        if (was[0] == 0)
            LOOP_ASSERT(now[0] == 0 && now[1] == 0 && now[2] == 0, "p=%u revived", p);
        else
            LOOP_ASSERT(memcmp(was, now, sizeof dead) == 0, "p=%u full chain changed", p);
    }
    /* No servers at all: every chain is empty, with or without prev. */
    ck_assert_int_eq(ring_chains(a, NP, R3, servers, 0, VN, NULL), 0);
    for (size_t k = 0; k < NP * R3; k++)
        LOOP_ASSERT(a[k] == 0, "k=%zu", k);
    free(a);
    free(b);
}
END_TEST

START_TEST(chains_short)
{
    uint32_t servers[2] = {9, 4};
    uint32_t c[64 * 4];
    ck_assert_int_eq(ring_chains(c, 64, 4, servers, 2, VN, NULL), 0);
    check_chains(c, 64, 4, servers, 2, 2);
    ck_assert_int_eq(ring_chains(c, 64, 4, servers, 1, VN, NULL), 0);
    check_chains(c, 64, 4, servers, 1, 1);
    /* Going from 2 to 1 server with prev: the survivor stays, the rest pads. */
    uint32_t d[64 * 4];
    ck_assert_int_eq(ring_chains(c, 64, 4, servers, 2, VN, NULL), 0);
    ck_assert_int_eq(ring_chains(d, 64, 4, &servers[1], 1, VN, c), 0);
    check_chains(d, 64, 4, &servers[1], 1, 1);
    /* And back up to 3: chains grow behind their members. */
    uint32_t three[3] = {9, 4, 6};
    ck_assert_int_eq(ring_chains(c, 64, 4, three, 3, VN, d), 0);
    check_chains(c, 64, 4, three, 3, 3);
    for (uint32_t p = 0; p < 64; p++)
        LOOP_ASSERT(c[p * 4] == 4, "p=%u head moved", p);
}
END_TEST

/* A server joins: on a fresh placement, ring_join gives exactly the fresh
 * placement with the joiner (consistent hashing moves nothing else), for R = 1
 * and R = 3; lost partitions stay lost; a joiner already placed changes nothing. */
START_TEST(chains_join)
{
    uint32_t servers[NS + 1] = {11, 5, 42, 7, 1000, 3, 77, 19, 500};
    const uint32_t joiner = 500;
    const uint32_t rs[2] = {1, R3};
    for (int k = 0; k < 2; k++) {
        uint32_t R = rs[k];
        uint32_t *a = malloc(NP * R * sizeof *a), *b = malloc(NP * R * sizeof *b);
        ck_assert_ptr_nonnull(a);
        ck_assert_ptr_nonnull(b);
        ck_assert_int_eq(ring_chains(a, NP, R, servers, NS, VN, NULL), 0);
        ck_assert_int_eq(ring_chains(b, NP, R, servers, NS + 1, VN, NULL), 0);
        int want = 0;
        for (uint32_t p = 0; p < NP; p++)
            want += in_chain(&b[p * R], R, joiner);
        int moved = ring_join(a, NP, R, servers, NS + 1, VN, joiner);
        ck_assert_int_eq(moved, want);
        ck_assert_mem_eq(a, b, NP * R * sizeof *a);
        /* about R/(NS+1) of the partitions move, not most of them */
        ck_assert_int_gt(moved, 0);
        ck_assert_int_lt(moved, (int)NP / 2);
        ck_assert_int_eq(ring_join(a, NP, R, servers, NS + 1, VN, joiner), 0);
        free(a);
        free(b);
    }
    /* chains after a death (not a fresh placement) and a lost partition */
    uint32_t *a = malloc(NP * R3 * sizeof *a), *b = malloc(NP * R3 * sizeof *b);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(ring_chains(a, NP, R3, servers, NS, VN, NULL), 0);
    memset(a, 0, R3 * sizeof *a); /* partition 0 lost */
    memcpy(b, a, NP * R3 * sizeof *a);
    ck_assert_int_ge(ring_join(a, NP, R3, servers, NS + 1, VN, joiner), 1);
    ck_assert(a[0] == 0 && a[1] == 0 && a[2] == 0);
    for (uint32_t p = 1; p < NP; p++) {
        const uint32_t *old = &b[p * R3], *now = &a[p * R3];
        if (!in_chain(now, R3, joiner)) {
            LOOP_ASSERT(memcmp(old, now, R3 * sizeof *old) == 0, "p=%u changed", p);
            continue;
        }
        /* the others keep their order; only the last may drop out */
        for (size_t j = 0, n = 0; j < R3; j++) {
            if (now[j] == joiner)
                continue;
            LOOP_ASSERT(now[j] == old[n], "p=%u member %zu reordered", p, j);
            n++;
        }
    }
    /* a short chain (fewer servers than R) grows by the joiner */
    uint32_t two[3] = {9, 4, 6}, c[64 * 4];
    ck_assert_int_eq(ring_chains(c, 64, 4, two, 2, VN, NULL), 0);
    ck_assert_int_eq(ring_join(c, 64, 4, two, 3, VN, 6), 64);
    check_chains(c, 64, 4, two, 3, 3);
    free(a);
    free(b);
}
END_TEST

START_TEST(chains_balance)
{
    uint32_t servers[4] = {1, 2, 3, 4};
    uint32_t c[NP * 2];
    ck_assert_int_eq(ring_chains(c, NP, 2, servers, 4, VN, NULL), 0);
    size_t heads[5] = {0};
    for (uint32_t p = 0; p < NP; p++)
        heads[c[p * 2]]++;
    for (size_t s = 1; s <= 4; s++)
        ck_assert_msg(heads[s] >= 20 && heads[s] <= 120, "server %zu heads %zu of %d", s, heads[s],
                      NP);
}
END_TEST

Suite *ring_suite(void)
{
    Suite *s = suite_create("ring");
    TCase *tc = tcase_create("placement");
    tcase_add_test(tc, mix64_reference_and_distinct);
    tcase_add_test(tc, dense_pos_monotone);
    tcase_add_test(tc, dense_span_partitions);
    tcase_add_test(tc, dense_span_agrees_with_find);
    tcase_add_test(tc, dense_span_uneven_ranges);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("partitions");
    tcase_add_test(tp, partition_bounds);
    tcase_add_test(tp, run_walks_partitions);
    tcase_add_test(tp, run_pow2_matches_general);
    tcase_add_test(tp, token_reference);
    tcase_add_test(tp, chains_fresh);
    tcase_add_loop_test(tp, chains_remove_one, 0, NS);
    tcase_add_test(tp, chains_lost_and_added);
    tcase_add_test(tp, chains_short);
    tcase_add_test(tp, chains_join);
    tcase_add_test(tp, chains_balance);
    tcase_add_test(tp, chains_big);
    suite_add_tcase(s, tp);
    return s;
}
