/* Whole holders of each partition (holders.h). */
#include "holders.h"

#include <stdlib.h>
#include <string.h>

#define HOLDERS_MAX_R 64 /* --replicas allows 8 */

struct holders {
    uint32_t nparts, R;
    uint64_t *since; /* per chain cell: the view epoch its member must report whole
                        (HEARTBEAT whole_epoch) to count as a whole holder; 0 = whole */
    uint32_t *out;   /* per partition: a server out of its chain that still holds it
                        whole (handing it over), while no member does; 0 = none */
    size_t pending;  /* cells whose member is not yet whole */
    int placed;      /* holders_update has seen a placement */
};

holders *holders_new(uint32_t nparts, uint32_t R)
{
    if (!nparts || !R || R > HOLDERS_MAX_R)
        return NULL;
    holders *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->nparts = nparts;
    h->R = R;
    h->since = calloc((size_t)nparts * R, sizeof *h->since);
    h->out = calloc(nparts, sizeof *h->out);
    if (!h->since || !h->out)
        holders_destroy(&h);
    return h;
}

void holders_destroy(holders **self_p)
{
    if (!self_p || !*self_p)
        return;
    free((*self_p)->since);
    free((*self_p)->out);
    free(*self_p);
    *self_p = NULL;
}

/* A live whole holder of partition p under the old chain o (since s), or 0; *dead
 * gets a whole holder that is gone (the last one, when none lives). */
static uint32_t live_holder(const holders *h, uint32_t p, const uint32_t *o, const uint64_t *s,
                            holders_alive_fn alive, void *ctx, uint32_t *dead)
{
    *dead = 0;
    if (h->out[p]) {
        if (alive(ctx, h->out[p]))
            return h->out[p];
        *dead = h->out[p];
    }
    for (uint32_t j = 0; j < h->R && o[j]; j++) {
        if (s[j])
            continue;
        if (alive(ctx, o[j]))
            return o[j];
        if (!*dead)
            *dead = o[j];
    }
    return 0;
}

/* The live member of the old chain o that was still receiving p's copy, or 0. */
static uint32_t live_filler(const holders *h, const uint32_t *o, const uint64_t *s,
                            holders_alive_fn alive, void *ctx)
{
    for (uint32_t j = 0; j < h->R && o[j]; j++)
        if (s[j] && alive(ctx, o[j]))
            return o[j];
    return 0;
}

/* Carries p's cells from the old chain o over to the new one n: a member kept
 * keeps its epoch, a new one waits for `epoch`; a whole holder leaving the chain
 * alive stays p's holder until a member is whole. */
static void carry(holders *h, uint32_t p, const uint32_t *o, const uint32_t *n, uint64_t *s,
                  uint64_t epoch, holders_alive_fn alive, void *ctx)
{
    uint64_t ns[HOLDERS_MAX_R];
    int whole_in = 0;
    for (uint32_t j = 0; j < h->R; j++) {
        ns[j] = 0;
        if (!n[j])
            continue;
        ns[j] = epoch;
        for (uint32_t k = 0; k < h->R && o[k]; k++)
            if (o[k] == n[j])
                ns[j] = s[k];
        whole_in |= !ns[j];
        h->pending += ns[j] != 0;
    }
    if (whole_in) {
        h->out[p] = 0;
    } else if (!h->out[p] || !alive(ctx, h->out[p])) {
        h->out[p] = 0;
        for (uint32_t k = 0; k < h->R && o[k] && !h->out[p]; k++)
            if (!s[k] && alive(ctx, o[k]))
                h->out[p] = o[k];
    }
    memcpy(s, ns, h->R * sizeof *s);
}

uint32_t holders_update(holders *h, const uint32_t *old, uint32_t *next, uint64_t epoch,
                        holders_alive_fn alive, void *ctx, holders_loss *loss, size_t cap)
{
    uint32_t R = h->R, lost = 0;
    h->pending = 0;
    for (uint32_t p = 0; p < h->nparts; p++) {
        uint32_t *n = &next[(size_t)p * R];
        uint64_t *s = &h->since[(size_t)p * R];
        if (!old || !h->placed) { /* the first placement: every member is whole */
            memset(s, 0, R * sizeof *s);
            h->out[p] = 0;
            continue;
        }
        const uint32_t *o = &old[(size_t)p * R];
        uint32_t dead;
        if (o[0] && !live_holder(h, p, o, s, alive, ctx, &dead)) {
            if (n[0]) { /* members are left, but none holds it whole */
                if (lost < cap)
                    loss[lost] = (holders_loss){p, dead, live_filler(h, o, s, alive, ctx)};
                lost++;
                memset(n, 0, R * sizeof *n);
            }
            memset(s, 0, R * sizeof *s);
            h->out[p] = 0;
            continue;
        }
        carry(h, p, o, n, s, epoch, alive, ctx);
    }
    h->placed = 1;
    return lost;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

int holders_heard(holders *h, const uint32_t *chains, uint32_t id, uint64_t epoch,
                  const uint32_t *awaited, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (awaited[i] <= awaited[i - 1])
            return -1;
    if (!h->pending || !chains)
        return 0;
    size_t cells = (size_t)h->nparts * h->R;
    for (size_t c = 0; c < cells; c++) {
        uint32_t p = (uint32_t)(c / h->R);
        if (chains[c] != id || !h->since[c] || h->since[c] > epoch ||
            (n && bsearch(&p, awaited, n, sizeof *awaited, cmp_u32)))
            continue;
        h->since[c] = 0;
        h->out[p] = 0;
        h->pending--;
    }
    return 0;
}

int holders_is_whole(const holders *h, const uint32_t *chains, uint32_t p, uint32_t id)
{
    for (uint32_t j = 0; j < h->R; j++)
        if (chains[(size_t)p * h->R + j] == id)
            return !h->since[(size_t)p * h->R + j];
    return h->out[p] == id;
}
