/* jobstats: the job-wide counters of the training applications (jobstats.h). */
#include "jobstats.h"

#include <stdio.h>
#include <stdlib.h>

int jobstats_open(pskv_worker *w, const char *app)
{
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = 2 * (uint64_t)pskv_num_workers(w);
    o.updater = "sum";
    char name[96];
    snprintf(name, sizeof name, "%s.samples", app);
    return pskv_table_open(w, name, &o);
}

int64_t jobstats_add(pskv_worker *w, int t, double samples, double clipped)
{
    int rank = pskv_rank(w), nw = pskv_num_workers(w);
    uint64_t keys[2] = {(uint64_t)rank, (uint64_t)(nw + rank)};
    float v[2] = {(float)samples, (float)clipped};
    return pskv_push(w, t, keys, 2, v);
}

int jobstats_read(pskv_worker *w, int t, int timeout_ms, double *samples, double *clipped)
{
    size_t nw = (size_t)pskv_num_workers(w);
    float *counts = malloc(2 * nw * sizeof *counts);
    if (!counts)
        return -PSKV_ENOMEM;
    int64_t tp = pskv_pull(w, t, NULL, 2 * nw, counts);
    int rc = tp < 0 ? (int)tp : pskv_wait(w, tp, timeout_ms);
    *samples = *clipped = 0;
    for (size_t i = 0; i < nw && rc == 0; i++) {
        *samples += counts[i];
        *clipped += counts[nw + i];
    }
    free(counts);
    return rc;
}
