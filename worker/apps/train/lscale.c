/* lscale: a dynamic loss scale (contract in lscale.h). */
#include "lscale.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SCALE_START 65536.0 /* --loss-scale dynamic: the first scale */
#define SCALE_MIN 0x1p-24   /* halving stops here */
#define SCALE_MAX 0x1p24    /* doubling stops here (a scale the servers accept) */

int lscale_parse(lscale *ls, const char *s, long window)
{
    memset(ls, 0, sizeof *ls);
    ls->window = window;
    if (!s || !*s)
        return 0;
    if (!strcmp(s, "dynamic")) {
        ls->scale = SCALE_START;
        ls->dynamic = 1;
        return 0;
    }
    char *end;
    double v = strtod(s, &end);
    if (*end || !(v > 0) || !isfinite(v))
        return -1;
    ls->scale = v;
    return 0;
}

void lscale_skip(lscale *ls)
{
    ls->skipped++;
    ls->clean = 0;
    if (ls->dynamic && ls->scale > SCALE_MIN)
        ls->scale /= 2;
}

void lscale_clean(lscale *ls)
{
    if (ls->dynamic && ++ls->clean >= ls->window) {
        if (ls->scale < SCALE_MAX)
            ls->scale *= 2;
        ls->clean = 0;
    }
}

int64_t lscale_push(lscale *ls, pskv_worker *w, int table, float *grad, size_t n)
{
    if (++ls->steps == ls->plant && pskv_rank(w) == 0)
        grad[0] = FLT_MAX; /* a planted overflow (tests) */
    if (!(ls->scale > 0))
        return pskv_push_nocopy(w, table, NULL, n, grad);
    int rc = pskv_set_loss_scale(w, table, (float)ls->scale);
    if (rc < 0)
        return rc;
    int64_t ts = pskv_push_nocopy(w, table, NULL, n, grad);
    if (ts == -PSKV_EBADVALUE)
        lscale_skip(ls);
    else if (ts > 0)
        lscale_clean(ls);
    return ts == -PSKV_EBADVALUE ? 0 : ts;
}

void lscale_report(const lscale *ls, report_line *l)
{
    if (!(ls->scale > 0))
        return;
    l->loss_scale = ls->scale;
    l->skipped_steps = ls->skipped;
}
