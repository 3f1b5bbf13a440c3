#include "ring.h"

uint64_t ring_mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return z;
}

uint64_t ring_dense_pos(uint64_t i, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)i << 64) / n);
}

/* Number of dense indices i < n with position < x, for x in [0, 2^64]. */
static uint64_t count_below(unsigned __int128 x, uint64_t n)
{
    unsigned __int128 num = x * n + (((unsigned __int128)1 << 64) - 1);
    return (uint64_t)(num >> 64);
}

void ring_dense_span(uint64_t begin, uint64_t end, uint64_t n, uint64_t *first, uint64_t *count)
{
    uint64_t lo = count_below(begin, n);
    uint64_t hi = count_below((unsigned __int128)end + 1, n);
    *first = lo;
    *count = hi - lo;
}

void ring_split_even(ring_range *out, const uint32_t *owners, size_t nservers)
{
    for (size_t s = 0; s < nservers; s++) {
        unsigned __int128 b = ((unsigned __int128)s << 64) / nservers;
        unsigned __int128 e = ((unsigned __int128)(s + 1) << 64) / nservers;
        out[s].begin = (uint64_t)b;
        out[s].end = (uint64_t)(e - 1);
        out[s].owner = owners[s];
    }
}

size_t ring_find(const ring_range *ranges, size_t n, uint64_t pos)
{
    size_t lo = 0, hi = n;
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (ranges[mid].begin <= pos)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}
