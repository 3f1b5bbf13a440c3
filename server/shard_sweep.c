/* Admission and eviction for a sparse shard (shard.h): the settings, the sweep
 * that removes rows left unpushed for evict_after clocks (a bounded number of
 * map slots per call, on the server's loop between messages), and giving the
 * memory back: a freed row takes the last row, and the arrays move to smaller
 * ones when they are less than a quarter full. */
#include <stdlib.h>
#include <string.h>

#include "cmsketch.h"
#include "pskv_errors.h"
#include "shard_impl.h"

int shard_admission(shard *s, uint32_t admit_after, uint32_t evict_after)
{
    if (s->dense || s->used)
        return -PSKV_EINVAL;
    if (admit_after > 1 && !s->sketch && !(s->sketch = cms_new()))
        return -PSKV_ENOMEM;
    s->admit_after = admit_after;
    s->evict_after = evict_after; /* rows one float longer: drop any of the old size */
    free(s->rows);
    free(s->dirty);
    s->rows = NULL;
    s->dirty = NULL;
    s->rows_cap = 0;
    return 0;
}

void shard_tag(shard *s, int64_t clock, int replica)
{
    s->tag = clock < 0 ? 0 : clock > (int64_t)UINT32_MAX ? (int64_t)UINT32_MAX : clock;
    s->replica = replica;
}

int shard_has_row(const shard *s, uint64_t key)
{
    if (s->dense)
        return shard_owns_key(s, key);
    return s->cap && s->slots[shard_probe(s, key)] != EMPTY;
}

int shard_rows_resize(shard *s, size_t ncap)
{
    size_t rf = shard_row_floats(s);
    float *nrows = realloc(s->rows, ncap * rf * sizeof(float));
    if (!nrows)
        return -PSKV_ENOMEM;
    s->rows = nrows;
    if (s->evict_after) {
        uint64_t *nk = realloc(s->row_key, ncap * sizeof *nk);
        if (!nk) /* rows kept at their old capacity's use */
            return ncap > s->rows_cap ? -PSKV_ENOMEM : 0;
        s->row_key = nk;
    }
    /* last: when it fails, the bits still cover rows_cap (rows >= used have none set) */
    size_t ow = s->dirty ? s->rows_cap / 64 + 1 : 0, nw = ncap / 64 + 1;
    uint64_t *nd = realloc(s->dirty, nw * sizeof *nd);
    if (!nd)
        return ncap > s->rows_cap ? -PSKV_ENOMEM : 0;
    if (nw > ow)
        memset(nd + ow, 0, (nw - ow) * sizeof *nd);
    s->dirty = nd;
    s->rows_cap = ncap;
    return 0;
}

/* Removes map slot i (linear probing: the entries after it that would no longer
 * be found move back), then fills row r's hole with the last row. */
static void remove_slot(shard *s, size_t i)
{
    size_t mask = s->cap - 1, rf = shard_row_floats(s);
    uint32_t r = s->slots[i];
    for (size_t j = (i + 1) & mask; s->slots[j] != EMPTY; j = (j + 1) & mask) {
        size_t home = shard_home(s, s->keys[j]);
        /* j's entry stays when its home lies cyclically in (i, j] */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays)
            continue;
        s->keys[i] = s->keys[j];
        s->slots[i] = s->slots[j];
        i = j;
    }
    s->slots[i] = EMPTY;
    shard_note_gone(s, s->row_key[r]);
    uint32_t last = (uint32_t)(s->used - 1);
    s->dirty[r >> 6] &= ~(1ULL << (r & 63));
    if (r != last) {
        memcpy(s->rows + (size_t)r * rf, s->rows + (size_t)last * rf, rf * sizeof(float));
        s->row_key[r] = s->row_key[last];
        s->slots[shard_probe(s, s->row_key[r])] = r;
        if ((s->dirty[last >> 6] >> (last & 63)) & 1) /* its change moves along */
            shard_mark(s, r);
        s->dirty[last >> 6] &= ~(1ULL << (last & 63));
    }
    s->used--;
}

int shard_remove(shard *s, const uint64_t *keys, uint64_t n)
{
    if (s->dense || !s->evict_after)
        return -PSKV_EINVAL; /* only eviction removes rows: no row_key to move them by */
    for (uint64_t k = 0; k < n && s->cap; k++) {
        size_t i = shard_probe(s, keys[k]);
        if (s->slots[i] != EMPTY)
            remove_slot(s, i);
    }
    return 0;
}

/* After a full pass: smaller arrays when they are less than a quarter full. */
static void shrink(shard *s)
{
    size_t rcap = 1024;
    while (rcap < s->used * 2)
        rcap *= 2;
    if (s->rows_cap > rcap && s->used * 4 <= s->rows_cap)
        shard_rows_resize(s, rcap); /* out of memory: kept as they were */
    size_t mcap = 1024;
    while (mcap * 7 < s->used * 20) /* load 0.35 at most */
        mcap *= 2;
    if (s->cap > mcap && s->used * 40 <= s->cap * 7)
        shard_rehash(s, mcap);
}

uint64_t shard_sweep(shard *s, int64_t now, size_t budget)
{
    if (s->dense || !s->evict_after || !s->cap)
        return 0;
    uint64_t removed = 0;
    /* every worker finished clocks < now: a row last pushed at clock s saw no push
     * in s+1 .. s+evict_after once s + evict_after < now */
    int64_t before = now - (int64_t)s->evict_after; /* stamps < before go */
    size_t rf = shard_row_floats(s);
    for (size_t k = 0; k < budget; k++) {
        if (s->sweep_at >= s->cap) {
            s->sweep_at = 0;
            shrink(s);
            break;
        }
        size_t i = s->sweep_at;
        if (s->slots[i] != EMPTY &&
            (int64_t)shard_stamp(s->rows + (size_t)s->slots[i] * rf, rf) < before) {
            remove_slot(s, i); /* slot i may hold a moved entry now: looked at again */
            removed++;
            continue;
        }
        s->sweep_at++;
    }
    s->evicted += removed;
    return removed;
}

void shard_mem_add(const shard *s, shard_mem *m)
{
    size_t rf = shard_row_floats(s);
    m->admitted += s->admitted;
    m->not_admitted += s->not_admitted;
    m->evicted += s->evicted;
    if (s->dense) {
        m->rows += s->count;
        m->bytes += s->count * rf * sizeof(float);
        return;
    }
    m->rows += s->used;
    m->bytes += s->cap * (sizeof *s->keys + sizeof *s->slots) + s->rows_cap * rf * sizeof(float);
    if (s->evict_after)
        m->bytes += s->rows_cap * sizeof *s->row_key; /* the stamps are in the rows */
    if (s->sketch)
        m->bytes += cms_bytes();
}
