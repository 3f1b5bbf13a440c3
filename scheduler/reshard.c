/* Resharding a checkpoint onto the servers registered now. See reshard.h. */
#include "reshard.h"

#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "pskv_errors.h"
#include "ring.h"

typedef struct plan_in {
    uint32_t nparts, R, vnodes;
    const uint32_t *old; /* the checkpoint's chains */
    const uint32_t *servers;
    size_t ns;
    reshard_reads_fn reads;
    void *ctx;
    uint32_t *olds;    /* the distinct old nodes, in order of first appearance */
    uint32_t *partner; /* per old node: the server that took it over (0 = none) */
    size_t nold;
} plan_in;

static uint32_t partner_of(const plan_in *in, uint32_t server)
{
    for (size_t k = 0; k < in->nold; k++)
        if (in->partner[k] == server)
            return in->olds[k];
    return 0;
}

/* The server that took over old node `old` (0 = none, or old is 0). */
static uint32_t taker_of(const plan_in *in, uint32_t old)
{
    for (size_t k = 0; k < in->nold; k++)
        if (in->olds[k] == old)
            return in->partner[k];
    return 0;
}

/* Step 1: the distinct old nodes, each paired with the first server (in
 * registration order) that reads its file and took over no other. */
static int pair_olds(plan_in *in)
{
    size_t cells = (size_t)in->nparts * in->R;
    in->olds = malloc(cells * sizeof *in->olds);
    in->partner = calloc(cells, sizeof *in->partner);
    if (!in->olds || !in->partner)
        return -PSKV_ENOMEM;
    for (size_t i = 0; i < cells; i++) {
        uint32_t o = in->old[i];
        size_t k = 0;
        while (k < in->nold && in->olds[k] != o)
            k++;
        if (o && k == in->nold)
            in->olds[in->nold++] = o;
    }
    for (size_t k = 0; k < in->nold; k++)
        for (size_t s = 0; s < in->ns && !in->partner[k]; s++)
            if (!partner_of(in, in->servers[s]) && in->reads(in->ctx, in->servers[s], in->olds[k]))
                in->partner[k] = in->servers[s];
    return 0;
}

/* The old node whose file server s loads partition p from: its partner when that
 * held p, else the first of p's old chain whose file s reads; 0 when none. */
static uint32_t source_for(const plan_in *in, uint32_t s, uint32_t p)
{
    const uint32_t *was = &in->old[(size_t)p * in->R];
    uint32_t mine = partner_of(in, s), first = 0;
    for (uint32_t j = 0; j < in->R; j++) {
        if (!was[j])
            continue;
        if (was[j] == mine)
            return mine;
        if (!first && in->reads(in->ctx, s, was[j]))
            first = was[j];
    }
    return first;
}

/* Steps 1 and 2: the old chains through the pairs into mapped; a partition left
 * empty gets the first server of its ring chain (fresh) that reads one of its
 * files, else its ring head. */
static void map_chains(const plan_in *in, const uint32_t *fresh, uint32_t *mapped)
{
    uint32_t R = in->R;
    for (uint32_t p = 0; p < in->nparts; p++) {
        uint32_t at = 0;
        for (uint32_t j = 0; j < R; j++) {
            uint32_t t = taker_of(in, in->old[(size_t)p * R + j]);
            if (t)
                mapped[(size_t)p * R + at++] = t;
        }
        if (at)
            continue;
        const uint32_t *ring = &fresh[(size_t)p * R];
        mapped[(size_t)p * R] = ring[0];
        for (uint32_t j = 0; j < R; j++)
            if (ring[j] && source_for(in, ring[j], p)) {
                mapped[(size_t)p * R] = ring[j];
                break;
            }
    }
}

/* Step 3: filled up to R on the ring, then each server in no chain joins. */
static int place(const plan_in *in, uint32_t *chains, const uint32_t *mapped)
{
    size_t cells = (size_t)in->nparts * in->R;
    uint64_t *held = malloc(cells * sizeof *held);
    if (!held ||
        ring_chains(chains, in->nparts, in->R, in->servers, in->ns, in->vnodes, mapped) < 0) {
        free(held);
        return -PSKV_ENOMEM;
    }
    for (size_t i = 0; i < cells; i++)
        held[i] = chains[i];
    size_t nheld = sort_unique_u64(held, cells);
    int rc = 0;
    for (size_t s = 0; s < in->ns && rc == 0; s++) {
        uint64_t id = in->servers[s];
        size_t at = lower_bound_u64(held, nheld, id);
        if ((at == nheld || held[at] != id) &&
            ring_join(chains, in->nparts, in->R, in->servers, in->ns, in->vnodes,
                      in->servers[s]) < 0)
            rc = -PSKV_ENOMEM;
    }
    free(held);
    return rc;
}

/* The distinct (loader, source) pairs of the plan into pl->pairs. */
static int collect_pairs(reshard_plan *pl, size_t cells)
{
    uint64_t *all = malloc((cells ? cells : 1) * sizeof *all);
    size_t n = 0;
    if (!all)
        return -PSKV_ENOMEM;
    for (size_t i = 0; i < cells; i++)
        if (pl->loaders[i])
            all[n++] = (uint64_t)pl->loaders[i] << 32 | pl->sources[i];
    n = sort_unique_u64(all, n);
    pl->pairs = malloc((n ? n : 1) * 2 * sizeof *pl->pairs);
    if (!pl->pairs) {
        free(all);
        return -PSKV_ENOMEM;
    }
    for (size_t q = 0; q < n; q++) {
        pl->pairs[2 * q] = (uint32_t)(all[q] >> 32);
        pl->pairs[2 * q + 1] = (uint32_t)all[q];
    }
    pl->npairs = n;
    free(all);
    return 0;
}

/* Who loads each partition from which file. Returns 0, 1 (pl->missing: no server
 * reads a file of it) or -PSKV_ENOMEM. */
static int choose_loaders(const plan_in *in, reshard_plan *pl)
{
    uint32_t R = in->R;
    for (uint32_t p = 0; p < in->nparts; p++) {
        uint32_t *ld = &pl->loaders[(size_t)p * R], *src = &pl->sources[(size_t)p * R];
        uint32_t at = 0;
        for (uint32_t j = 0; j < R; j++) {
            uint32_t s = pl->chains[(size_t)p * R + j], o = s ? source_for(in, s, p) : 0;
            if (o) {
                ld[at] = s;
                src[at++] = o;
            }
        }
        /* no member reads a file of p: another server loads it and hands it over */
        for (size_t k = 0; !at && k < in->ns; k++) {
            uint32_t o = source_for(in, in->servers[k], p);
            if (o) {
                ld[at] = in->servers[k];
                src[at++] = o;
            }
        }
        if (!at) {
            pl->missing = p;
            return 1;
        }
    }
    return collect_pairs(pl, (size_t)in->nparts * R);
}

int reshard_make(reshard_plan *pl, uint32_t nparts, uint32_t R, uint32_t vnodes,
                 const uint32_t *old_chains, const uint32_t *servers, size_t ns,
                 reshard_reads_fn reads, void *ctx)
{
    memset(pl, 0, sizeof *pl);
    plan_in in = {nparts, R, vnodes, old_chains, servers, ns, reads, ctx, NULL, NULL, 0};
    size_t cells = (size_t)nparts * R;
    uint32_t *fresh = calloc(cells, sizeof *fresh), *mapped = calloc(cells, sizeof *mapped);
    pl->chains = calloc(cells, sizeof *pl->chains);
    pl->loaders = calloc(cells, sizeof *pl->loaders);
    pl->sources = calloc(cells, sizeof *pl->sources);
    int rc = -PSKV_ENOMEM;
    if (fresh && mapped && pl->chains && pl->loaders && pl->sources && pair_olds(&in) == 0 &&
        ring_chains(fresh, nparts, R, servers, ns, vnodes, NULL) == 0) {
        pl->olds = (uint32_t)in.nold;
        map_chains(&in, fresh, mapped);
        rc = place(&in, pl->chains, mapped);
        if (rc == 0)
            rc = choose_loaders(&in, pl);
    }
    free(fresh);
    free(mapped);
    free(in.olds);
    free(in.partner);
    if (rc != 0) {
        uint32_t missing = pl->missing;
        reshard_free(pl);
        pl->missing = missing;
    }
    return rc;
}

void reshard_free(reshard_plan *pl)
{
    if (!pl)
        return;
    free(pl->chains);
    free(pl->loaders);
    free(pl->sources);
    free(pl->pairs);
    memset(pl, 0, sizeof *pl);
}
