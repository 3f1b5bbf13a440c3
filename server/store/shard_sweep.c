/* Admission and eviction for a sparse shard (shard.h): the settings, the sweep
 * that removes rows left unpushed for evict_after clocks (a bounded number of
 * map slots per call, on the server's loop between messages), and giving the
 * memory back: a freed record takes the last record, and the arrays move to
 * smaller ones when they are less than a quarter full. */
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
    /* records one float longer: drop any of the old size */
    shard_big_free(s->dirty, shard_dirty_bytes(s));
    shard_big_free(s->fdirty, shard_dirty_bytes(s));
    shard_big_free(s->rows, s->rows_cap * shard_rec_floats(s) * sizeof(float));
    s->evict_after = evict_after;
    s->rows = NULL;
    s->dirty = s->fdirty = NULL;
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
    return shard_lookup(s, key, NULL) != EMPTY;
}

int shard_rows_resize(shard *s, size_t ncap)
{
    size_t rec = shard_rec_floats(s) * sizeof(float), bytes = ncap * rec;
    float *nrows = shard_big_resize(s->rows, s->rows_cap * rec, bytes);
    if (!nrows)
        return -PSKV_ENOMEM;
    s->rows = nrows;
    /* last: when it fails, the bits still cover rows_cap (rows >= used have none
     * set). Grown, the new words are zero pages: nothing to clear or copy. */
    size_t ob = shard_dirty_bytes(s), nb = shard_bits_bytes(ncap);
    uint64_t *nd = shard_big_resize(s->dirty, ob, nb);
    if (!nd)
        return ncap > s->rows_cap ? -PSKV_ENOMEM : 0;
    s->dirty = nd;
    if (s->fdirty) { /* the followers' bits: failing, they are dropped (a full copy next) */
        uint64_t *nf = shard_big_resize(s->fdirty, ob, nb);
        if (!nf)
            shard_big_free(s->fdirty, ob);
        s->fdirty = nf;
    }
    s->rows_cap = ncap;
    return 0;
}

/* Removes map slot i (linear probing: the entries after it that would no longer
 * be found move back), then fills record r's hole with the last record. */
static void remove_slot(shard *s, size_t i)
{
    size_t mask = s->cap - 1, rec = shard_rec_floats(s);
    uint32_t r = s->slots[i] - 1;
    for (size_t j = (i + 1) & mask; s->slots[j] != EMPTY; j = (j + 1) & mask) {
        size_t home = shard_home(s, shard_rec_key(shard_slot_rec(s, s->slots[j])));
        /* j's entry stays when its home lies cyclically in (i, j] */
        int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays)
            continue;
        s->slots[i] = s->slots[j];
        i = j;
    }
    s->slots[i] = EMPTY;
    shard_note_gone(s, shard_rec_key(shard_rec(s, r)));
    uint32_t last = (uint32_t)(s->used - 1);
    s->dirty[r >> 6] &= ~(1ULL << (r & 63));
    if (r != last) { /* the last record's slot names r instead */
        size_t j = shard_probe(s, shard_rec_key(shard_rec(s, last)));
        memcpy(shard_rec(s, r), shard_rec(s, last), rec * sizeof(float));
        s->slots[j] = r + 1;
        if ((s->dirty[last >> 6] >> (last & 63)) & 1) /* its change moves along */
            shard_mark(s, r);
        if (s->fdirty) /* a moved row is sent to followers again */
            s->fdirty[r >> 6] |= 1ULL << (r & 63);
        s->dirty[last >> 6] &= ~(1ULL << (last & 63));
    }
    s->used--;
}

int shard_remove(shard *s, const uint64_t *keys, uint64_t n)
{
    if (s->dense || !s->evict_after)
        return -PSKV_EINVAL; /* only eviction removes rows: no row_key to move them by */
    shard_map_migrate(s, SIZE_MAX); /* remove_slot needs one map: a key may be in the old */
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
    if (s->old_slots) { /* the map grows: rows move first (remove_slot needs one map) */
        shard_map_migrate(s, budget);
        return 0;
    }
    uint64_t removed = 0;
    /* every worker finished clocks < now: a row last pushed at clock s saw no push
     * in s+1 .. s+evict_after once s + evict_after < now */
    int64_t before = now - (int64_t)s->evict_after; /* stamps < before go */
    size_t rf = shard_rf(s);
    for (size_t k = 0; k < budget; k++) {
        if (s->sweep_at >= s->cap) {
            s->sweep_at = 0;
            shrink(s);
            break;
        }
        size_t i = s->sweep_at;
        if (s->slots[i] != EMPTY &&
            (int64_t)shard_stamp(shard_slot_rec(s, s->slots[i]) + KEY_FLOATS, rf) < before) {
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
    size_t rf = shard_rf(s);
    m->admitted += s->admitted;
    m->not_admitted += s->not_admitted;
    m->evicted += s->evicted;
    if (s->dense) {
        m->rows += s->count;
        m->bytes += s->count * rf * sizeof(float);
        return;
    }
    m->rows += s->used;
    /* records: key, row and stamp */
    m->bytes += (s->cap + s->old_cap + s->next_cap) * sizeof *s->slots +
                s->rows_cap * shard_rec_floats(s) * sizeof(float);
    if (s->sketch)
        m->bytes += cms_bytes();
}
