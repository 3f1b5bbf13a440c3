/* balance: batch sizes that follow the workers' speeds (balance.h has the design). */
#include "balance.h"

#include "balsplit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WARMUP 2 /* steps of a run not measured */
#define TMO 120000 /* ms: a pull of the speeds table */

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
    /* --sync ps: the speeds ride a bsp `sum` table instead of an all-reduce, so that
     * a worker's death is seen, the same clock, by every survivor (balance.h) */
    int ps, tab;           /* table handle (ps) */
    char tname[96];
    float *cnt, *prev;     /* 4W: the table pulled now, and the step before */
    char *live;            /* W: the ranks that pushed in the clock just pulled */
    int pulled;            /* prev holds a pull */
    float sent;            /* this rank's slot as last pushed */
    int64_t push;          /* the last push to the table, waited for at the next */
    int64_t pull;          /* the table's pull sent after this step's clock, 0: none */
    float mine;            /* this step's time per example, 0: not measured */
    /* a worker that took a dead one's rank over: no rows and no gradient pushed
     * (its clocks only) until every rank puts it back in the split, at its second
     * pull of the table (balance.h); join: its first push (the table's join slot) */
    int joining, join;
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

int balance_new(cfg_entry *cfg, int rank, int W, int took_over, balance **out)
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
    b->ps = b->mode == BAL_BATCH && !strcmp(cfg_str(cfg, "sync"), "ps");
    b->tab = -1;
    snprintf(b->tname, sizeof b->tname, "%s.balance", cfg_str(cfg, "app"));
    b->split = balsplit_new(W, b->B);
    b->ex = calloc((size_t)W, sizeof *b->ex);
    b->cnt = calloc(4 * (size_t)W, sizeof *b->cnt);
    b->prev = calloc(4 * (size_t)W, sizeof *b->prev);
    b->live = calloc((size_t)W, 1);
    if (!b->split || !b->ex || !b->cnt || !b->prev || !b->live) {
        balance_destroy(&b);
        return 1;
    }
    if (b->mode == BAL_FIXED && (rc = read_plan(b, mode + 6))) {
        balance_destroy(&b);
        return rc;
    }
    const char *log = cfg_str(cfg, "balance-log");
    /* a worker that took rank 0 over goes on with the dead one's log */
    if (rank == 0 && *log && !(b->log = fopen(log, took_over ? "a" : "w"))) {
        fprintf(stderr, "train: --balance-log %s: cannot write it\n", log);
        balance_destroy(&b);
        return 2;
    }
    b->cur = balsplit_cur(b->split);
    *out = b;
    return 0;
}

int balance_open(balance *b, pskv_worker *w)
{
    if (!b->ps)
        return 0;
    b->joining = b->join = pskv_took_over(w);
    /* per rank: its last time per example, its clocks pushed, its clocks measured,
     * its incarnations' first clocks (joins) */
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = 4 * (uint64_t)b->W;
    o.updater = "sum";
    o.consistency = "bsp";
    b->tab = pskv_table_open(w, b->tname, &o);
    if (b->tab < 0) {
        fprintf(stderr, "train: --balance: open table %s: %s\n", b->tname,
                pskv_strerror(b->tab));
        return 1;
    }
    return 0;
}

int balance_global(const balance *b)
{
    return b->B;
}

int balance_live(const balance *b)
{
    return balsplit_live(b->split);
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
    if (!b->joining) /* a worker taking a rank back logs the split it is put in */
        write_log(b, step);
}

int balance_pushes(const balance *b)
{
    return !b || !b->joining;
}

uint32_t balance_rows(const balance *b, int64_t in_epoch, uint32_t n, uint32_t *first,
                      uint32_t *count)
{
    uint64_t g = (uint64_t)in_epoch * (uint64_t)b->B, off = g;
    for (int i = 0; i < b->rank; i++)
        off += (uint64_t)b->cur[i];
    uint64_t end = off + (b->joining ? 0 : (uint64_t)b->cur[b->rank]);
    *first = (uint32_t)(off < n ? off : n);
    *count = (uint32_t)((end < n ? end : n) - *first);
    uint64_t gend = g + (uint64_t)b->B;
    return g >= n ? 0 : (uint32_t)((gend < n ? gend : n) - g);
}


/* The lowest rank still in the split: it prints the re-splits (rank 0 may be gone). */
static int balance_first_live(const balance *b)
{
    int i = 0;
    while (i + 1 < b->W && balsplit_gone(b->split, i))
        i++;
    return i;
}

static void announce(balance *b, report *rep, int64_t step)
{
    write_log(b, step);
    if (b->rank != balance_first_live(b))
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
    snprintf(js, sizeof js, "{\"balance_step\":%lld,\"batches\":[%s],\"us_per_example\":[%s],"
             "\"live\":%d}", (long long)step, bs, us, balsplit_live(b->split));
    report_json(rep, js);
}

int balance_push(balance *b, pskv_worker *w, int64_t step, uint32_t count, int64_t ns)
{
    /* an epoch's short last step is not measured (fixed costs over fewer rows), nor
     * the first steps of a run (cold caches and pages) */
    b->mine = step >= b->last_change + WARMUP && count && count == (uint32_t)b->cur[b->rank]
                  ? (float)((double)ns / 1e3 / count) : 0;
    if (b->mode == BAL_FIXED || !b->ps)
        return 0;
    uint64_t keys[4] = {(uint64_t)b->rank, (uint64_t)(b->W + b->rank),
                        (uint64_t)(2 * b->W + b->rank), (uint64_t)(3 * b->W + b->rank)};
    float v[4] = {b->mine > 0 ? b->mine - b->sent : 0, 1, b->mine > 0, (float)b->join};
    int rc;
    if (b->push > 0 && (rc = pskv_wait(w, b->push, TMO)) < 0 && rc != -PSKV_ELATE)
        return rc;
    b->push = pskv_push(w, b->tab, keys, 4, v);
    if (b->push < 0)
        return (int)b->push;
    b->join = 0;
    if (b->mine > 0)
        b->sent = b->mine;
    return 0;
}

/* --sync ps, after clock `step` closed: the speeds table holds every clock up to
 * it, the same on every rank. The ranks that pushed in clock `step` are live,
 * less those for which it was a first clock (a worker that took a dead rank over:
 * its join; it cannot act on a baseline pull): a rank left out (dead: a bsp
 * clock closes without a worker only once it is declared dead) is dropped by all
 * alike; a dropped rank live again, or this worker's own first pull after its
 * join, puts the batches even over the live ranks, every rank alike (2). The
 * others' times of this step feed the window. Returns 2, 1 when the split
 * changed otherwise, 0, or a negated error of the pull. */
static int pull_ps(balance *b, pskv_worker *w, int64_t step)
{
    int W = b->W, rc;
    int64_t tp = b->pull > 0 ? b->pull : pskv_pull(w, b->tab, NULL, 4 * (size_t)W, b->cnt);
    b->pull = 0;
    if (tp < 0 || (rc = pskv_wait(w, tp, TMO)) < 0)
        return tp < 0 ? (int)tp : rc;
    if (!b->pulled) { /* the first pull holds the clocks before this run: a baseline */
        memcpy(b->prev, b->cnt, 4 * (size_t)W * sizeof *b->prev);
        b->sent = b->cnt[b->rank]; /* a resumed job's table (or a dead worker's) holds an older time */
        b->pulled = 1;
        return 0;
    }
    int back = 0, dropped = 0, first = -1;
    char names[256];
    size_t nn = 0;
    names[0] = '\0';
    for (int i = 0; i < W; i++) {
        b->live[i] = b->cnt[W + i] > b->prev[W + i] && !(b->cnt[3 * W + i] > b->prev[3 * W + i]);
        b->ex[i] = b->cnt[2 * W + i] > b->prev[2 * W + i] ? b->cnt[i] : 0;
        first = first < 0 && b->live[i] ? i : first;
        /* a rank back: one this rank had dropped, or this worker itself (its view
         * of the others starts here) */
        int is_back = b->live[i] && (balsplit_gone(b->split, i) || (b->joining && i == b->rank));
        back += is_back;
        if (is_back && nn < sizeof names - 16)
            nn += (size_t)snprintf(names + nn, sizeof names - nn, "%s%d", nn ? "," : "", i);
    }
    memcpy(b->prev, b->cnt, 4 * (size_t)W * sizeof *b->prev);
    if (back && balsplit_even_among(b->split, b->live) == 0) {
        b->joining = 0;
        b->last_change = step + 1; /* the worker back warms up like a fresh start */
        if (b->rank == first) {
            printf("balance: step %lld: rank %s taken back (it pushed in clock %lld); the "
                   "batches even again over the %d live workers\n", (long long)step + 1, names,
                   (long long)step, balsplit_live(b->split));
            fflush(stdout);
        }
        return 2;
    }
    for (int i = 0; i < W; i++) {
        if (balsplit_gone(b->split, i) || b->live[i] || !balsplit_drop(b->split, i))
            continue;
        dropped = 1;
        if (b->rank == balance_first_live(b)) {
            printf("balance: step %lld: rank %d is gone (nothing from it in clock %lld); its "
                   "batch goes to the other %d workers\n", (long long)step + 1, i,
                   (long long)step, balsplit_live(b->split));
            fflush(stdout);
        }
    }
    if (dropped)
        return 1;
    return step >= b->last_change + WARMUP && balsplit_observe(b->split, b->ex);
}

int balance_pull_send(balance *b, pskv_worker *w)
{
    if (!b || !b->ps || b->mode == BAL_FIXED)
        return 0;
    b->pull = pskv_pull(w, b->tab, NULL, 4 * (size_t)b->W, b->cnt);
    return b->pull < 0 ? (int)b->pull : 0;
}

int balance_after(balance *b, pskv_worker *w, report *rep, int64_t step)
{
    int rc;
    if (b->mode == BAL_FIXED) {
        from_plan(b, step + 1);
        pskv_set_balance(w, b->cur[b->rank], 0);
        return 0;
    }
    pskv_set_balance(w, b->joining ? 0 : b->cur[b->rank], b->mine > 0 ? b->mine : 0); /* pskvctl status, top */
    if (b->ps) {
        if ((rc = pull_ps(b, w, step)) <= 0)
            return rc;
        if (rc == 2) { /* even again, with a rank taken back: measured after a warm-up */
            b->resplits++;
            announce(b, rep, step + 1);
            return 0;
        }
    } else {
        if (step < b->last_change + WARMUP)
            return 0; /* every rank alike */
        memset(b->ex, 0, (size_t)b->W * sizeof *b->ex);
        b->ex[b->rank] = b->mine;
        if ((rc = pskv_allreduce(w, -1, b->ex, (size_t)b->W, PSKV_OP_SUM)) < 0)
            return rc;
        if (!balsplit_observe(b->split, b->ex))
            return 0;
    }
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
    free(b->cnt);
    free(b->prev);
    free(b->live);
    free(b);
    *b_p = NULL;
}
