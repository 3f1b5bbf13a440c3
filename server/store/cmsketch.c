/* cmsketch: the count-min sketch of admission (contract in cmsketch.h). */
#include "cmsketch.h"

#include <stdlib.h>

#include "ring.h"

struct cms {
    uint8_t *cnt;      /* CMS_DEPTH rows of CMS_WIDTH counters */
    uint32_t added;    /* pushes counted since the last halving */
    uint64_t halvings;
};

cms *cms_new(void)
{
    cms *c = calloc(1, sizeof *c);
    if (c && !(c->cnt = calloc((size_t)CMS_DEPTH * CMS_WIDTH, 1))) {
        free(c);
        return NULL;
    }
    return c;
}

void cms_destroy(cms **c_p)
{
    if (!c_p || !*c_p)
        return;
    free((*c_p)->cnt);
    free(*c_p);
    *c_p = NULL;
}

size_t cms_bytes(void) { return sizeof(struct cms) + (size_t)CMS_DEPTH * CMS_WIDTH; }

uint64_t cms_halvings(const cms *c) { return c->halvings; }

/* The counter of key in row d: one 64-bit hash per key, split per row. */
static size_t cell(uint64_t key, int d)
{
    uint64_t h = ring_mix64(key ^ (0x9e3779b97f4a7c15ULL * (uint64_t)(d + 1)));
    return (size_t)d * CMS_WIDTH + (size_t)(h & (CMS_WIDTH - 1));
}

uint32_t cms_count(const cms *c, uint64_t key)
{
    uint32_t m = 255;
    for (int d = 0; d < CMS_DEPTH; d++) {
        uint8_t v = c->cnt[cell(key, d)];
        if (v < m)
            m = v;
    }
    return m;
}

static void halve(cms *c)
{
    uint64_t *w = (uint64_t *)(void *)c->cnt; /* eight counters at a time */
    for (size_t i = 0; i < (size_t)CMS_DEPTH * CMS_WIDTH / 8; i++)
        w[i] = (w[i] >> 1) & 0x7f7f7f7f7f7f7f7fULL;
    c->added = 0;
    c->halvings++;
}

uint32_t cms_add(cms *c, uint64_t key)
{
    size_t at[CMS_DEPTH];
    uint32_t m = 255;
    for (int d = 0; d < CMS_DEPTH; d++) {
        at[d] = cell(key, d);
        if (c->cnt[at[d]] < m)
            m = c->cnt[at[d]];
    }
    if (m < 255) {
        m++;
        for (int d = 0; d < CMS_DEPTH; d++) /* conservative update */
            if (c->cnt[at[d]] < m)
                c->cnt[at[d]] = (uint8_t)m;
    }
    if (++c->added >= CMS_HALVE_EVERY)
        halve(c);
    return m;
}
