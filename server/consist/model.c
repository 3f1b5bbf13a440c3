/* model: the consistency models' ops table (model.h), and the rows of the two
 * models that keep no state beyond the vector clock, async and ssp. */
#include "model.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bsp.h"
#include "pskv_errors.h"
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

int cons_parse(const char *spec, cons_model *m, int64_t *tau, char *why, size_t whylen)
{
    for (cons_model k = CONS_ASYNC; k <= CONS_BSP; k++) {
        int rc = rows[k]->parse(spec, tau, why, whylen);
        if (rc < 0)
            return rc;
        if (rc > 0) {
            *m = k;
            return 0;
        }
    }
    snprintf(why, whylen, "option 'consistency': unknown '%s' (async, bsp, ssp:TAU)", spec);
    return -PSKV_EINVAL;
}

/* The values every model but bsp reflects: the smallest clock every worker of the
 * clock set finished (of the group the table's namespace is named after, if any:
 * vclock_group). */
static int64_t min_clock(const vclock *vc, bsp *b, table *t)
{
    (void)b;
    return vclock_min_in(vc, vclock_group(vc, t->ns));
}

/* async: eventual, pushes applied on arrival and pulls answered at once. */
static int async_ready(const vclock *vc, bsp *b, table *t, int64_t clock)
{
    (void)vc, (void)b, (void)t, (void)clock;
    return 1;
}

/* "async", and ssp:inf (a bound of infinity is eventual). */
static int async_parse(const char *spec, int64_t *tau, char *why, size_t whylen)
{
    (void)tau, (void)why, (void)whylen;
    return !strcmp(spec, "async") || !strcmp(spec, "ssp:inf");
}

const cons_ops cons_async_ops = {
    .name = "async",
    .parse = async_parse,
    .pull_ready = async_ready,
    .values_clock = min_clock,
    .dedupes = 1,
};

/* ssp:TAU: a pull at clock c waits until every worker of the clock set (of the
 * table's group, vclock_group) finished clock c - tau - 1 (or there is no clock
 * set yet). */
static int ssp_ready(const vclock *vc, bsp *b, table *t, int64_t clock)
{
    (void)b;
    return vclock_nset(vc) == 0 ||
           vclock_min_in(vc, vclock_group(vc, t->ns)) >= clock - t->tau; /* its group's */
}

/* ssp:TAU, TAU 0..1000000 (ssp:inf is async's) */
static int ssp_parse(const char *spec, int64_t *tau, char *why, size_t whylen)
{
    if (strncmp(spec, "ssp:", 4))
        return 0;
    char *end;
    long long v = strtoll(spec + 4, &end, 10);
    if (end == spec + 4 || *end || v < 0 || v > 1000000) {
        snprintf(why, whylen, "option 'consistency': '%s' needs a bound, ssp:TAU with TAU "
                 "0..1000000 or inf", spec);
        return -PSKV_EINVAL;
    }
    *tau = v;
    return 1;
}

const cons_ops cons_ssp_ops = {
    .name = "ssp",
    .parse = ssp_parse,
    .pull_ready = ssp_ready,
    .values_clock = min_clock,
    .chain_clocks = 1,
    .dedupes = 1,
};
