/* wplan: keys to partitions to servers, a request's parts (contract in wplan.h).
 * Runs of a dense table stay runs (first key and span on the wire, no keys);
 * explicit keys are grouped by server, each part listing its caller rows. */
#include "wplan.h"

#include <stdlib.h>
#include <string.h>

int wplan_lost_error(pskv_worker *w, const tbl *t, uint64_t key)
{
    uint32_t p = ring_partition_of(wplan_key_pos(t, key), w->nparts);
    return wst_error(w, PSKV_ELOST, "table '%s': key %llu is in partition %u, whose every "
                     "replica died (view epoch %llu): its data is gone", t->name,
                     (unsigned long long)key, p, (unsigned long long)w->mb.epoch);
}

tbl *wplan_check_table(pskv_worker *w, int table, const uint64_t *keys, size_t nkeys, int *err)
{
    if (!w || table < 0 || table >= w->ntables) {
        *err = w ? wst_error(w, PSKV_EINVAL, "no table handle %d", table) : -PSKV_EINVAL;
        return NULL;
    }
    tbl *t = &w->tables[table];
    if (nkeys == 0 || nkeys > UINT32_MAX) {
        *err = wst_error(w, PSKV_EINVAL, "table '%s': %zu keys (1..2^32-1 allowed)", t->name, nkeys);
        return NULL;
    }
    if (!keys && (!t->dense || nkeys != t->size)) {
        *err = wst_error(w, PSKV_EINVAL,
                         "table '%s': keys may be NULL only for a whole dense table (size %llu)",
                         t->name, (unsigned long long)t->size);
        return NULL;
    }
    if (keys && t->dense)
        for (size_t i = 0; i < nkeys; i++)
            if (keys[i] >= t->size) {
                *err = wst_error(w, PSKV_ERANGE, "table '%s': key %llu outside 0..%llu", t->name,
                                 (unsigned long long)keys[i], (unsigned long long)(t->size - 1));
                return NULL;
            }
    return t;
}

/* A dense key list that is one ascending run is sent like a whole-table run. */
int wplan_is_run(const uint64_t *keys, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (keys[i] != keys[0] + i)
            return 0;
    return 1;
}

int wplan_run_server(const pskv_worker *w, const tbl *t, uint64_t first, uint64_t n)
{
    if (!t->dense || n == 0 || n * t->width * sizeof(float) > w->chunk_bytes)
        return -1;
    int si = -1;
    uint64_t lo, hi;
    ring_run it;
    ring_run_init(&it, first, first + n, t->size, w->nparts);
    for (uint32_t p; ring_run_next(&it, &p, &lo, &hi);) {
        if (w->head[p] < 0 || (si >= 0 && w->head[p] != si))
            return -1;
        si = w->head[p];
    }
    return si;
}

/* Dense run [first, first+n): the runs of each partition, their owners, then one
 * part per owner and chunk, each part's runs consecutive in r->segs. With `single`
 * a part holds one contiguous run (a new part starts at a gap), so its values can
 * be sent straight from the caller's array. */
int wplan_run(pskv_worker *w, req *r, tbl *t, uint64_t first, uint64_t n, int pull,
              int single)
{
    uint64_t chunk = w->chunk_bytes / ((uint64_t)t->width * sizeof(float));
    if (chunk == 0)
        chunk = 1;
    /* at most one run per partition the run meets, and per key */
    size_t maxruns = n < w->nparts ? (size_t)n : w->nparts;
    uint64_t lo, hi;
    /* runs: one per partition, plus one per chunk cut */
    size_t cap = maxruns + n / chunk + (size_t)w->nservers + 1;
    r->segs = malloc(cap * 2 * sizeof *r->segs);
    uint64_t *runs = malloc(maxruns * 3 * sizeof *runs); /* first, count, owner */
    if (!r->segs || !runs) {
        free(runs);
        return wst_error(w, PSKV_ENOMEM, "out of memory");
    }
    size_t nruns = 0;
    ring_run it;
    ring_run_init(&it, first, first + n, t->size, w->nparts);
    for (uint32_t p; nruns < maxruns && ring_run_next(&it, &p, &lo, &hi);) {
        int o = pull ? w->tail[p] : w->head[p];
        if (o < 0) {
            free(runs);
            return wplan_lost_error(w, t, lo);
        }
        runs[3 * nruns] = lo;
        runs[3 * nruns + 1] = hi - lo;
        runs[3 * nruns + 2] = (uint64_t)o;
        nruns++;
    }
    int np = 0;
    uint64_t nseg = 0, off = 0;
    for (int si = 0; si < w->nservers; si++) {
        part *cur = NULL;
        for (size_t k = 0; k < nruns; k++) {
            if (runs[3 * k + 2] != (uint64_t)si)
                continue;
            uint64_t f = runs[3 * k], c = runs[3 * k + 1];
            while (c > 0) {
                int gap = cur && cur->nseg &&
                          r->segs[2 * (nseg - 1)] + r->segs[2 * nseg - 1] != f;
                if (!cur || cur->n == chunk || (single && gap)) {
                    cur = &r->parts[np];
                    cur->server = si;
                    cur->seg0 = nseg;
                    cur->off = off;
                    cur->dedupe_id = ((uint64_t)r->ts << 16) | (uint64_t)np;
                    np++;
                }
                uint64_t take = chunk - cur->n < c ? chunk - cur->n : c;
                if (cur->nseg && r->segs[2 * (nseg - 1)] + r->segs[2 * nseg - 1] == f) {
                    r->segs[2 * nseg - 1] += take; /* adjacent partitions: one run */
                } else {
                    r->segs[2 * nseg] = f;
                    r->segs[2 * nseg + 1] = take;
                    nseg++;
                    cur->nseg++;
                }
                cur->n += take;
                off += take;
                f += take;
                c -= take;
            }
        }
    }
    free(runs);
    r->first = first;
    r->nparts = r->pending = np;
    return 0;
}

int wplan_run_lend(pskv_worker *w, req *r, tbl *t, uint64_t first, uint64_t n)
{
    int rc = wplan_run(w, r, t, first, n, 0, 0);
    if (rc < 0)
        return rc;
    uint64_t runs = 0;
    for (int i = 0; i < r->nparts; i++)
        runs += r->parts[i].nseg;
    if (runs == (uint64_t)r->nparts) /* a run a part already: as `single` plans it */
        return 1;
    if (n * t->width * sizeof(float) / runs < WPLAN_LEND_MIN_RUN)
        return 0;
    free(r->segs); /* long runs: planned again, one contiguous run a part */
    r->segs = NULL;
    memset(r->parts, 0, (size_t)r->nparts * sizeof *r->parts);
    rc = wplan_run(w, r, t, first, n, 0, 1);
    return rc < 0 ? rc : 1;
}

/* Explicit keys: one part per owning server. */
int wplan_keys(pskv_worker *w, req *r, tbl *t, const uint64_t *keys, uint64_t n, int pull)
{
    if (n > w->owner_cap) {
        uint32_t *grown = realloc(w->owner, n * sizeof *grown);
        if (!grown)
            return wst_error(w, PSKV_ENOMEM, "out of memory");
        w->owner = grown;
        w->owner_cap = n;
    }
    uint32_t *owner = w->owner;
    uint64_t *count = w->count;
    int *pindex = w->pindex;
    r->idx = malloc(n * sizeof *r->idx);
    if (!r->idx)
        return wst_error(w, PSKV_ENOMEM, "out of memory");
    memset(count, 0, (size_t)w->nservers * sizeof *count);
    for (uint64_t i = 0; i < n; i++) {
        int o = wplan_owner_of(w, wplan_key_pos(t, keys[i]), pull);
        if (o < 0)
            return wplan_lost_error(w, t, keys[i]);
        owner[i] = (uint32_t)o;
        count[o]++;
    }
    int np = 0;
    uint64_t at = 0;
    for (int si = 0; si < w->nservers; si++) {
        pindex[si] = -1;
        if (!count[si])
            continue;
        part *p = &r->parts[np];
        pindex[si] = np;
        p->server = si;
        p->idx = r->idx + at;
        p->off = at; /* offset of this part in the gathered arrays */
        p->dedupe_id = ((uint64_t)r->ts << 16) | (uint64_t)np;
        np++;
        at += count[si];
    }
    for (uint64_t i = 0; i < n; i++) {
        part *p = &r->parts[pindex[owner[i]]];
        p->idx[p->n++] = (uint32_t)i;
    }
    r->nparts = r->pending = np;
    return 0;
}
