/* --app synth: a training run whose validation curve is a known function of its
 * flags, for pskv-tune's tests and overhead measurements. It trains nothing and
 * opens no table: each epoch it waits --synth-epoch-time seconds and prints
 *   synth: epoch E val_accuracy A val_loss L
 * with, for q = (log10 lr + 1.5)^2 and m = (momentum - 0.9)^2,
 *   final = max(0.15, 0.95 - 0.08 q - 0.5 m),  tau = 1 + q + 4 m,
 *   A(E) = 0.1 + (final - 0.1) (1 - exp(-E / tau)) + 0.002 sin(7 seed + E),
 * L = 1 - A. So lr 10^-1.5 and momentum 0.9 are the best, a larger q both lowers
 * the plateau and slows the climb (what ASHA's early rungs must see), and the
 * seed moves the curve by at most 0.002. --lr above 1 diverges: it prints
 * "synth: diverged at epoch 1 (lr above 1: NaN)" on stderr and exits 1, the
 * tuner's failed trial. Its checkpoint is its epoch: --save-model PATH writes
 * "synth epochs N" after its last epoch, and --init-from PATH of such a file goes
 * on from there (epoch E of this run prints A(N + E)), as the MLP goes on from
 * saved weights: what promotion-style ASHA pauses and resumes. A stop of its
 * group (pskvctl stop, pskv-tune's stop of a trial) or early stopping is seen
 * within 5 ms, also mid-epoch: it prints "stopped early at epoch E: WHY" and
 * exits 0, as the training apps do. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <time.h>

#include "apps.h"
#include "timeutil.h"

/* The curve above at epoch e (tests recompute it: keep the two in step). */
static double synth_accuracy(double lr, double momentum, long long seed, int e)
{
    double q = (log10(lr) + 1.5) * (log10(lr) + 1.5);
    double m = (momentum - 0.9) * (momentum - 0.9);
    double final = fmax(0.15, 0.95 - 0.08 * q - 0.5 * m);
    double tau = 1 + q + 4 * m;
    return 0.1 + (final - 0.1) * (1 - exp(-e / tau)) + 0.002 * sin(7.0 * (double)(seed % 1000) + e);
}

/* The epochs of the run a --init-from file saved; -1 after saying why not. */
static int synth_load(const char *path)
{
    FILE *f = fopen(path, "r");
    int n = -1;
    if (!f || fscanf(f, "synth epochs %d", &n) != 1 || n < 0 || n > 100000) {
        fprintf(stderr, "synth: --init-from %s: not a synth checkpoint (`synth epochs N`)\n",
                path);
        n = -1;
    }
    if (f)
        fclose(f);
    return n;
}

/* --save-model: written to PATH.tmp and renamed, so a reader sees all of it. */
static int synth_save(const char *path, int epochs)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fprintf(f, "synth epochs %d\n", epochs) < 0 || fclose(f) != 0 ||
        rename(tmp, path) != 0) {
        fprintf(stderr, "synth: --save-model %s: cannot write it\n", path);
        return 1;
    }
    return 0;
}

/* Whether the scheduler stopped this run (its views pumped first: synth has no
 * clock that would pump them). */
static int synth_stopped(pskv_worker *w, int e)
{
    char why[256];
    if (!w)
        return 0;
    pskv_workers_active(w);
    if (!pskv_stop_requested(w, why, sizeof why))
        return 0;
    printf("stopped early at epoch %d: %s\n", e, why);
    fflush(stdout);
    return 1;
}

int app_synth(pskv_worker *w, cfg_entry *cfg)
{
    const char *from = cfg_str(cfg, "init-from"), *save = cfg_str(cfg, "save-model");
    int base = *from ? synth_load(from) : 0;
    if (base < 0)
        return 1;
    double lr = cfg_double(cfg, "lr"), momentum = cfg_double(cfg, "momentum");
    long long seed = cfg_int(cfg, "seed");
    int epochs = (int)cfg_int(cfg, "epochs");
    int64_t step_ms = (int64_t)(cfg_double(cfg, "synth-epoch-time") * 1000);
    if (lr > 1 || lr <= 0) {
        fprintf(stderr, "synth: diverged at epoch 1 (lr above 1: NaN)\n");
        return 1;
    }
    for (int e = 1; e <= epochs; e++) {
        for (int64_t until = tu_now_ms() + step_ms, left; (left = until - tu_now_ms()) > 0;) {
            if (app_stop_signal)
                return app_stopped("synth");
            if (synth_stopped(w, base + e))
                return 0;
            /* 5 ms looks, the last one only as long as the epoch has left */
            struct timespec ts = {0, (left < 5 ? left : 5) * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (app_stop_signal)
            return app_stopped("synth");
        double a = synth_accuracy(lr, momentum, seed, base + e);
        printf("synth: epoch %d val_accuracy %.6f val_loss %.6f\n", e, a, 1 - a);
        fflush(stdout);
    }
    printf("synth: done after %d epochs\n", epochs);
    return *save ? synth_save(save, base + epochs) : 0;
}
