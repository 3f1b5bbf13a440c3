#include "grow.h"

#include <stdint.h>
#include <stdlib.h>

#include "pskv_errors.h"

int grow_array(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2 / elem)
            return -PSKV_ENOMEM;
        c *= 2;
    }
    void *g = realloc(*buf, c * elem);
    if (!g)
        return -PSKV_ENOMEM;
    *buf = g;
    *cap = c;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

size_t sort_unique_u64(uint64_t *a, size_t n)
{
    qsort(a, n, sizeof *a, cmp_u64);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (k == 0 || a[i] != a[k - 1])
            a[k++] = a[i];
    return k;
}

size_t lower_bound_u64(const uint64_t *a, size_t n, uint64_t k)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid] < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
