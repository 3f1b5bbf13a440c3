/* pskv-lr-change: pskv_table_set_lr through real daemons (a user's program).
 *
 *   pskv-lr-change [--scheduler HOST:PORT] [--keys DIR] [--namespace NS]
 *                  [--updater adam|adamw|adagrad] [--consistency async|bsp]
 *
 * Opens a dense table of 1000 keys (the updater's lr 0.01), refuses the lr values
 * NaN, 0, -1 and inf (each must fail PSKV_EINVAL naming the value), sets the lr
 * it has (a reader key fails here, PSKV_EACCES), pushes three
 * gradients, sets the lr to 0.0025, pushes three more, and compares every pulled
 * value with the same steps computed here (the updater's formulas of
 * common/update/updater.h, written out again, in double): each must match to 1e-6,
 * and the run would fail with the old lr kept (the difference that would make is
 * printed beside). A reopen with the first open's lr still succeeds. Last line:
 * "lr-change ok: ..." and exit 0; a failure prints "lr-change: ..." and exits 1.
 * Exit status 2: usage. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pskv.h"

#define N 1000
#define STEPS 6
#define LR0 0.01f
#define LR1 0.0025f

/* The gradient of step s for key i: varied in sign and size, never zero. */
static float grad(int s, int i) { return (float)(((i * 7 + s * 13) % 23) - 11) * 0.05f + 0.01f; }

/* The values after STEPS pushes from zero, lr LR0 for the first three and `later`
 * after: adam(w) with betas 0.9, 0.999, eps 1e-8 (adamw's weight decay 0.01), or
 * adagrad with eps 1e-8. */
static void expect(const char *upd, float later, double *w)
{
    for (int i = 0; i < N; i++) {
        double m = 0, v = 0, h = 0, x = 0;
        for (int s = 0; s < STEPS; s++) {
            double lr = s < 3 ? LR0 : later, g = grad(s, i);
            if (!strcmp(upd, "adagrad")) {
                h += g * g;
                x -= lr * g / (sqrt(h) + 1e-8);
                continue;
            }
            if (!strcmp(upd, "adamw"))
                x *= 1.0 - lr * 0.01;
            m = 0.9 * m + 0.1 * g;
            v = 0.999 * v + 0.001 * g * g;
            double c1 = 1 - pow(0.9, s + 1), c2 = 1 - pow(0.999, s + 1);
            x -= lr * (m / c1) / (sqrt(v / c2) + 1e-8);
        }
        w[i] = x;
    }
}

static int failed(pskv_worker *w, const char *what)
{
    fprintf(stderr, "lr-change: %s: %s\n", what, pskv_last_error(w));
    printf("lr-change: %s: %s\n", what, pskv_last_error(w));
    return 1;
}

int main(int argc, char **argv)
{
    pskv_config cfg;
    pskv_config_init(&cfg);
    const char *upd = "adam", *cons = "async";
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "usage: pskv-lr-change [--scheduler HOST:PORT] [--keys DIR] "
                            "[--namespace NS] [--updater adam|adamw|adagrad] "
                            "[--consistency async|bsp]\n");
            return 2;
        }
        if (!strcmp(argv[i], "--scheduler"))
            cfg.scheduler = v;
        else if (!strcmp(argv[i], "--keys"))
            cfg.keys = v;
        else if (!strcmp(argv[i], "--namespace"))
            cfg.table_namespace = v;
        else if (!strcmp(argv[i], "--updater"))
            upd = v;
        else if (!strcmp(argv[i], "--consistency"))
            cons = v;
        else {
            fprintf(stderr, "pskv-lr-change: unknown option %s\n", argv[i]);
            return 2;
        }
        i++;
    }
    pskv_worker *w = NULL;
    int rc = pskv_worker_open(&cfg, &w);
    if (rc < 0) {
        fprintf(stderr, "lr-change: open: %s\n", pskv_strerror(rc));
        return 1;
    }
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = N;
    o.updater = upd;
    o.lr = LR0;
    o.weight_decay = strcmp(upd, "adamw") ? 0.0f : 0.01f;
    o.consistency = cons;
    int t = pskv_table_open(w, "lr", &o);
    if (t < 0)
        return failed(w, "table open");
    const float bad[] = {NAN, 0.0f, -1.0f, INFINITY};
    const char *named[] = {"lr nan", "lr 0", "lr -1", "lr inf"};
    for (int k = 0; k < 4; k++) {
        rc = pskv_table_set_lr(w, t, bad[k]);
        if (rc != -PSKV_EINVAL || !strstr(pskv_last_error(w), named[k])) {
            printf("lr-change: lr %g gave %d (%s), not PSKV_EINVAL naming it\n", (double)bad[k],
                   rc, pskv_last_error(w));
            return 1;
        }
        printf("refused: %s\n", pskv_last_error(w));
    }
    if (pskv_table_set_lr(w, t, LR0) < 0) /* as opened: a change to the same lr */
        return failed(w, "set lr");
    static float g[N], got[N];
    static double want[N], old[N];
    for (int s = 0; s < STEPS; s++) {
        if (s == 3 && pskv_table_set_lr(w, t, LR1) < 0)
            return failed(w, "set lr");
        for (int i = 0; i < N; i++)
            g[i] = grad(s, i);
        int64_t ts = pskv_push(w, t, NULL, N, g);
        if (ts < 0 || pskv_clock(w) < 0 || pskv_wait(w, ts, 30000) < 0)
            return failed(w, "push");
    }
    int64_t ts = pskv_pull(w, t, NULL, N, got);
    if (ts < 0 || pskv_wait(w, ts, 30000) < 0)
        return failed(w, "pull");
    expect(upd, LR1, want);
    expect(upd, LR0, old);
    double diff = 0, dold = 0;
    for (int i = 0; i < N; i++) {
        diff = fmax(diff, fabs(got[i] - want[i]));
        dold = fmax(dold, fabs(old[i] - want[i]));
    }
    if (!(diff <= 1e-6)) {
        printf("lr-change: the pulled values differ from the local %s steps by %g (the old "
               "lr kept would differ by %g)\n", upd, diff, dold);
        return 1;
    }
    if (pskv_table_open(w, "lr", &o) != t) /* reopens compare the first open's lr */
        return failed(w, "reopen with the first lr");
    printf("lr-change ok: %d values match the local %s steps with lr %g then %g (max diff "
           "%.3g; keeping lr %g would differ by %.3g)\n", N, upd, (double)LR0, (double)LR1,
           diff, (double)LR0, dold);
    return pskv_worker_close(&w) < 0;
}
