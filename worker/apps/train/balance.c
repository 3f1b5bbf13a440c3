/* balance: batch sizes that follow the workers' speeds (balance.h has the design). */
#include "balance.h"

#include "balsplit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 2 /* steps of a run not measured */

enum { BAL_BATCH, BAL_FIXED };

typedef struct plan_entry {
    int64_t step; /* from this step on */
    int *b;       /* W batches */
} plan_entry;

struct balance {
    int mode, rank, W, B;
    balsplit *split;    /* this step's batch per rank, and the rule that moves it */
    const int *cur;     /* balsplit_cur(split) */
    float *ex;          /* the exchange's W floats */
    int64_t last_change, resplits;
    plan_entry *plan;   /* fixed: sorted by step */
    size_t nplan;
    FILE *log;          /* rank 0: --balance-log */
};


/* A plan file: lines "STEP b0,b1,...", steps rising, each split of W batches
 * >= 0 summing to B. Returns 0, or 2 after naming the line. */
static int read_plan(balance *b, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "train: --balance fixed:%s: cannot open it\n", path);
        return 2;
    }
    char line[4096];
    int lno = 0, rc = 0;
    while (!rc && fgets(line, sizeof line, f)) {
        lno++;
        if (line[0] == '\n' || line[0] == '#')
            continue;
        plan_entry *p = realloc(b->plan, (b->nplan + 1) * sizeof *p);
        int *v = malloc((size_t)b->W * sizeof *v);
        if (!p || !v) {
            free(v);
            if (p)
                b->plan = p;
            rc = 1;
            break;
        }
        b->plan = p;
        p[b->nplan].b = v;
        char *s = line, *end;
        long long step = strtoll(s, &end, 10);
        int ok = end != s && step >= 0 &&
                 (b->nplan == 0 || step > b->plan[b->nplan - 1].step);
        long sum = 0;
        s = end;
        for (int i = 0; ok && i < b->W; i++) {
            long x = strtol(s + (i > 0 && *s == ','), &end, 10);
            ok = end != s && x >= 0 && x <= b->B;
            v[i] = (int)x;
            sum += x;
            s = end;
        }
        p[b->nplan].step = step;
        b->nplan++;
        if (!ok || sum != b->B || (*s != '\n' && *s != '\0')) {
            fprintf(stderr, "train: --balance fixed:%s line %d: want STEP b0,...,b%d (steps "
                    "rising, batches >= 0 summing to --batch x workers = %d)\n", path, lno,
                    b->W - 1, b->B);
            rc = 2;
        }
    }
    fclose(f);
    if (!rc && b->nplan == 0) {
        fprintf(stderr, "train: --balance fixed:%s holds no split\n", path);
        rc = 2;
    }
    return rc;
}

static int check_flags(cfg_entry *cfg, int W, const char *mode)
{
    const char *sync = cfg_str(cfg, "sync"), *cons = cfg_str(cfg, "consistency");
    const char *bad = NULL;
    char why[256];
    if (strcmp(mode, "batch") && strncmp(mode, "fixed:", 6))
        bad = "--balance must be none, batch or fixed:FILE";
    else if (!strcmp(sync, "local"))
        bad = "--balance applies to --sync ps under bsp or --sync allreduce, not --sync local";
    else if (!strcmp(sync, "ps") && strcmp(cons, "bsp")) {
        snprintf(why, sizeof why, "--balance needs --consistency bsp with --sync ps (with %s "
                 "no worker waits for another: nothing to balance)", cons);
        bad = why;
    } else if (cfg_int(cfg, "batch") * W < 2 * W)
        bad = "--balance needs a global batch (--batch x workers) of at least twice the "
              "workers: --batch 2 or more";
    else if (cfg_int(cfg, "accumulate") != 1)
        bad = "--balance needs --accumulate 1";
    else if (cfg_int(cfg, "backup") != 0)
        bad = "--balance needs --backup 0 (a clock's mean must hold every worker's share)";
    if (bad)
        fprintf(stderr, "train: %s (got --balance %s)\n", bad, mode);
    return bad ? 2 : 0;
}

int balance_new(cfg_entry *cfg, int rank, int W, balance **out)
{
    *out = NULL;
    const char *mode = cfg_str(cfg, "balance");
    if (!strcmp(mode, "none"))
        return 0;
    int rc = check_flags(cfg, W, mode);
    if (rc)
        return rc;
    balance *b = calloc(1, sizeof *b);
    if (!b)
        return 1;
    b->rank = rank;
    b->W = W;
    b->B = (int)cfg_int(cfg, "batch") * W;
    b->mode = strcmp(mode, "batch") ? BAL_FIXED : BAL_BATCH;
    b->split = balsplit_new(W, b->B);
    b->ex = calloc((size_t)W, sizeof *b->ex);
    if (!b->split || !b->ex) {
        balance_destroy(&b);
        return 1;
    }
    if (b->mode == BAL_FIXED && (rc = read_plan(b, mode + 6))) {
        balance_destroy(&b);
        return rc;
    }
    const char *log = cfg_str(cfg, "balance-log");
    if (rank == 0 && *log && !(b->log = fopen(log, "w"))) {
        fprintf(stderr, "train: --balance-log %s: cannot write it\n", log);
        balance_destroy(&b);
        return 2;
    }
    b->cur = balsplit_cur(b->split);
    *out = b;
    return 0;
}

int balance_global(const balance *b)
{
    return b->B;
}

/* --balance fixed: the plan's split for `step`. */
static void from_plan(balance *b, int64_t step)
{
    size_t k = 0;
    while (k + 1 < b->nplan && b->plan[k + 1].step <= step)
        k++;
    if (b->nplan && b->plan[k].step <= step)
        balsplit_set(b->split, b->plan[k].b);
}

static void write_log(balance *b, int64_t step)
{
    if (!b->log)
        return;
    fprintf(b->log, "%lld", (long long)step);
    for (int i = 0; i < b->W; i++)
        fprintf(b->log, "%c%d", i ? ',' : ' ', b->cur[i]);
    fputc('\n', b->log);
    fflush(b->log);
}

void balance_start(balance *b, int64_t step)
{
    b->last_change = step;
    if (b->mode == BAL_FIXED)
        from_plan(b, step);
    else
        balsplit_even(b->split);
    write_log(b, step);
}

uint32_t balance_rows(const balance *b, int64_t in_epoch, uint32_t n, uint32_t *first,
                      uint32_t *count)
{
    uint64_t g = (uint64_t)in_epoch * (uint64_t)b->B, off = g;
    for (int i = 0; i < b->rank; i++)
        off += (uint64_t)b->cur[i];
    uint64_t end = off + (uint64_t)b->cur[b->rank];
    *first = (uint32_t)(off < n ? off : n);
    *count = (uint32_t)((end < n ? end : n) - *first);
    uint64_t gend = g + (uint64_t)b->B;
    return g >= n ? 0 : (uint32_t)((gend < n ? gend : n) - g);
}


static void announce(balance *b, report *rep, int64_t step)
{
    write_log(b, step);
    if (b->rank != 0)
        return;
    char bs[1024], us[1024], js[2400];
    size_t nb = 0, nu = 0;
    for (int i = 0; i < b->W && nb < sizeof bs - 24 && nu < sizeof us - 24; i++) {
        nb += (size_t)snprintf(bs + nb, sizeof bs - nb, "%s%d", i ? "," : "", b->cur[i]);
        nu += (size_t)snprintf(us + nu, sizeof us - nu, "%s%.1f", i ? "," : "",
                               balsplit_est(b->split)[i]);
    }
    printf("balance: step %lld batches %s (us per example %s), re-split %lld\n",
           (long long)step, bs, us, (long long)b->resplits);
    fflush(stdout);
    snprintf(js, sizeof js, "{\"balance_step\":%lld,\"batches\":[%s],\"us_per_example\":[%s]}",
             (long long)step, bs, us);
    report_json(rep, js);
}

int balance_after(balance *b, pskv_worker *w, report *rep, int64_t step, uint32_t count,
                  int64_t ns)
{
    if (b->mode == BAL_FIXED) {
        from_plan(b, step + 1);
        pskv_set_balance(w, b->cur[b->rank], 0);
        return 0;
    }
    if (step < b->last_change + WARMUP)
        return 0; /* every rank alike: the first steps of a run are cold (caches, pages) */
    memset(b->ex, 0, (size_t)b->W * sizeof *b->ex);
    /* an epoch's short last step is not measured (fixed costs over fewer rows) */
    b->ex[b->rank] = count && count == (uint32_t)b->cur[b->rank] ? (float)((double)ns / 1e3 / count)
                                                                  : 0;
    float mine = b->ex[b->rank];
    int rc = pskv_allreduce(w, -1, b->ex, (size_t)b->W, PSKV_OP_SUM);
    if (rc < 0)
        return rc;
    pskv_set_balance(w, b->cur[b->rank], mine > 0 ? mine : 0); /* pskvctl status, top */
    if (!balsplit_observe(b->split, b->ex))
        return 0;
    b->last_change = step + 1 - WARMUP; /* a re-split is measured at once */
    b->resplits++;
    announce(b, rep, step + 1);
    return 0;
}

int64_t balance_resplits(const balance *b)
{
    return b ? b->resplits : 0;
}

void balance_destroy(balance **b_p)
{
    balance *b = *b_p;
    if (!b)
        return;
    for (size_t i = 0; i < b->nplan; i++)
        free(b->plan[i].b);
    free(b->plan);
    if (b->log)
        fclose(b->log);
    balsplit_destroy(&b->split);
    free(b->ex);
    free(b);
    *b_p = NULL;
}
