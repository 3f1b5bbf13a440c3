#include "ring.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "pskv_errors.h"

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

/* ceil(p * 2^64 / nparts) for p in 0..nparts; 2^64 for p == nparts. */
static unsigned __int128 part_begin(uint32_t p, uint32_t nparts)
{
    return (((unsigned __int128)p << 64) + nparts - 1) / nparts;
}

void ring_dense_span(uint64_t begin, uint64_t end, uint64_t n, uint64_t *first, uint64_t *count)
{
    uint64_t lo = count_below(begin, n);
    uint64_t hi = count_below((unsigned __int128)end + 1, n);
    *first = lo;
    *count = hi - lo;
}

void ring_run_init(ring_run *it, uint64_t first, uint64_t end, uint64_t n, uint32_t nparts)
{
    int shift = -1;
    if (n <= (uint64_t)1 << 47 && nparts && !(nparts & (nparts - 1)))
        for (shift = 0; (1u << shift) < nparts; shift++)
            ;
    *it = (ring_run){first, end, n, nparts, shift};
}

/* Each call costs two 128-bit divisions whatever the partitions between the run's
 * keys: a partition with none of them (more partitions than keys) is stepped over,
 * not looked at (a 4-row table's run crossed 49 of 64 partitions one by one). With
 * 2^s partitions (the default 64) the divisions are 64-bit: key i's partition,
 * floor(floor(i * 2^64 / n) / 2^(64 - s)), is floor(i * 2^s / n) (floors nest
 * when the inner divisor is an integer), and the keys of partitions up to q
 * number ceil((q + 1) * n / 2^s); n <= 2^47 keeps both products below 2^64. */
int ring_run_next(ring_run *it, uint32_t *p, uint64_t *lo, uint64_t *hi)
{
    if (it->first >= it->end)
        return 0;
    uint32_t q;
    uint64_t stop;
    if (it->shift >= 0) {
        q = (uint32_t)((it->first << it->shift) / it->n);
        stop = (((uint64_t)q + 1) * it->n + it->nparts - 1) >> it->shift;
    } else {
        q = ring_partition_of(ring_dense_pos(it->first, it->n), it->nparts);
        /* the first key past partition q: the count of keys below its end + 1 */
        stop = q + 1 < it->nparts ? count_below(part_begin(q + 1, it->nparts), it->n) : it->n;
    }
    assert(stop > it->first); /* ring_partition_of and the spans agree on every key */
    *p = q;
    *lo = it->first;
    *hi = stop < it->end ? stop : it->end;
    it->first = *hi;
    return 1;
}

uint32_t ring_partition_of(uint64_t pos, uint32_t nparts)
{
    assert(nparts >= 1 && nparts <= RING_MAX_PARTS);
    return (uint32_t)(((unsigned __int128)pos * nparts) >> 64);
}

uint64_t ring_partition_begin(uint32_t p, uint32_t nparts)
{
    assert(nparts >= 1 && nparts <= RING_MAX_PARTS && p < nparts);
    return (uint64_t)part_begin(p, nparts);
}

uint64_t ring_partition_end(uint32_t p, uint32_t nparts)
{
    assert(nparts >= 1 && nparts <= RING_MAX_PARTS && p < nparts);
    return (uint64_t)(part_begin(p + 1, nparts) - 1);
}

uint64_t ring_token(uint32_t id, uint32_t v)
{
    return ring_mix64(((uint64_t)id << 32) | v);
}

/* A virtual node: a token position and the index in `servers` of its owner. */
typedef struct token {
    uint64_t pos;
    uint32_t idx;
} token;

/* Server id and its index in `servers`, sorted by id to map ids of prev chains. */
typedef struct id_index {
    uint32_t id;
    uint32_t idx;
} id_index;

static int cmp_token(const void *a, const void *b)
{
    const token *x = a, *y = b;
    /* Positions are distinct (mix64 is a bijection on distinct id:v); idx only
     * makes the order total should a caller pass a duplicate id. */
    if (x->pos != y->pos)
        return x->pos < y->pos ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static int cmp_id(const void *a, const void *b)
{
    const id_index *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

/* Index of the first token at or after pos; ntok (wrap to 0) if none. */
static size_t token_lower_bound(const token *tok, size_t ntok, uint64_t pos)
{
    size_t lo = 0, hi = ntok;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (tok[mid].pos < pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Index in `servers` of id, or -1 if it is not live. */
static int64_t live_index(const id_index *ids, size_t ns, uint32_t id)
{
    size_t lo = 0, hi = ns;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ids[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < ns && ids[lo].id == id ? (int64_t)ids[lo].idx : -1;
}

int ring_chains(uint32_t *chains, uint32_t nparts, uint32_t R, const uint32_t *servers, size_t ns,
                uint32_t vnodes, const uint32_t *prev)
{
    assert(nparts >= 1 && nparts <= RING_MAX_PARTS);
    assert(ns <= UINT32_MAX);
    if (R == 0)
        return 0;
    if (vnodes != 0 && ns > SIZE_MAX / sizeof(token) / vnodes)
        return -PSKV_ENOMEM;
    size_t ntok = ns * vnodes;
    token *tok = malloc(ntok ? ntok * sizeof *tok : 1);
    id_index *ids = malloc(ns ? ns * sizeof *ids : 1);
    /* seen[i] == p + 1 once servers[i] is in partition p's chain. */
    uint32_t *seen = calloc(ns ? ns : 1, sizeof *seen);
    if (!tok || !ids || !seen) {
        free(tok);
        free(ids);
        free(seen);
        return -PSKV_ENOMEM;
    }
    for (size_t i = 0; i < ns; i++) {
        assert(servers[i] != 0);
        ids[i] = (id_index){servers[i], (uint32_t)i};
        for (uint32_t v = 0; v < vnodes; v++)
            tok[i * vnodes + v] = (token){ring_token(servers[i], v), (uint32_t)i};
    }
    qsort(tok, ntok, sizeof *tok, cmp_token);
    qsort(ids, ns, sizeof *ids, cmp_id);
    for (size_t i = 1; i < ns; i++)
        assert(ids[i].id != ids[i - 1].id);

    /* Only so many distinct servers exist; stop the walk once all are met. */
    size_t want = R < ns ? R : ns;
    for (uint32_t p = 0; p < nparts; p++) {
        uint32_t *chain = &chains[(size_t)p * R];
        uint32_t stamp = p + 1;
        size_t n = 0;
        if (prev) {
            /* Writes land at or before the read index, so chains == prev is safe. */
            const uint32_t *old = &prev[(size_t)p * R];
            for (size_t j = 0; j < R; j++) {
                int64_t i = old[j] ? live_index(ids, ns, old[j]) : -1;
                if (i >= 0 && seen[i] != stamp) {
                    seen[i] = stamp;
                    chain[n++] = old[j];
                }
            }
            if (n == 0) {
                memset(chain, 0, R * sizeof *chain); /* lost: no survivor holds its data */
                continue;
            }
        }
        if (n < want && ntok > 0) {
            size_t t = token_lower_bound(tok, ntok, ring_partition_begin(p, nparts));
            for (size_t k = 0; k < ntok && n < want; k++, t++) {
                if (t == ntok)
                    t = 0;
                uint32_t i = tok[t].idx;
                if (seen[i] != stamp) {
                    seen[i] = stamp;
                    chain[n++] = servers[i];
                }
            }
        }
        for (; n < R; n++)
            chain[n] = 0;
    }
    free(tok);
    free(ids);
    free(seen);
    return 0;
}

int ring_join(uint32_t *chains, uint32_t nparts, uint32_t R, const uint32_t *servers, size_t ns,
              uint32_t vnodes, uint32_t joiner)
{
    uint32_t *ideal = malloc((size_t)nparts * R * sizeof *ideal);
    if (!ideal || ring_chains(ideal, nparts, R, servers, ns, vnodes, NULL) < 0) {
        free(ideal);
        return -PSKV_ENOMEM;
    }
    int moved = 0;
    for (uint32_t p = 0; p < nparts; p++) {
        uint32_t *chain = &chains[(size_t)p * R];
        const uint32_t *want = &ideal[(size_t)p * R];
        uint32_t at = R, len = 0, has = 0;
        for (uint32_t j = 0; j < R; j++) {
            if (want[j] == joiner)
                at = j;
            if (chain[j]) {
                len = j + 1;
                has |= chain[j] == joiner;
            }
        }
        if (at == R || has || len == 0)
            continue; /* not the joiner's, already its, or lost */
        if (at > len)
            at = len;
        for (uint32_t j = R - 1; j > at; j--) /* a full chain drops its last member */
            chain[j] = chain[j - 1];
        chain[at] = joiner;
        moved++;
    }
    free(ideal);
    return moved;
}
