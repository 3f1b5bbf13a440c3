/* model: the consistency models' ops table (model.h), and the rows of the two
 * models that keep no state beyond the vector clock, async and ssp. */
#include "model.h"

#include <assert.h>

#include "bsp.h"
#include "vclock.h"

static const cons_ops *const rows[] = {
    [CONS_ASYNC] = &cons_async_ops,
    [CONS_SSP] = &cons_ssp_ops,
    [CONS_BSP] = &cons_bsp_ops,
};

const cons_ops *cons_ops_of(cons_model m)
{
    assert(m >= CONS_ASYNC && m <= CONS_BSP);
    return rows[m];
}

const cons_ops *cons_of(const table *t) { return cons_ops_of(t->model); }

/* The values every model but bsp reflects: the smallest clock every worker of the
 * clock set finished. */
static int64_t min_clock(const vclock *vc, bsp *b, table *t)
{
    (void)b, (void)t;
    return vclock_min(vc);
}

/* async: eventual, pushes applied on arrival and pulls answered at once. */
static int async_ready(const vclock *vc, bsp *b, table *t, int64_t clock)
{
    (void)vc, (void)b, (void)t, (void)clock;
    return 1;
}

const cons_ops cons_async_ops = {
    .name = "async",
    .pull_ready = async_ready,
    .values_clock = min_clock,
    .dedupes = 1,
};

/* ssp:TAU: a pull at clock c waits until every worker of the clock set finished
 * clock c - tau - 1 (or there is no clock set yet). */
static int ssp_ready(const vclock *vc, bsp *b, table *t, int64_t clock)
{
    (void)b;
    return vclock_nset(vc) == 0 || vclock_min(vc) >= clock - t->tau;
}

const cons_ops cons_ssp_ops = {
    .name = "ssp",
    .pull_ready = ssp_ready,
    .values_clock = min_clock,
    .chain_clocks = 1,
};
