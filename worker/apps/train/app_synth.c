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
 * tuner's failed trial. */
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

int app_synth(pskv_worker *w, cfg_entry *cfg)
{
    (void)w;
    double lr = cfg_double(cfg, "lr"), momentum = cfg_double(cfg, "momentum");
    long long seed = cfg_int(cfg, "seed");
    int epochs = (int)cfg_int(cfg, "epochs");
    int64_t step_ms = (int64_t)(cfg_double(cfg, "synth-epoch-time") * 1000);
    if (lr > 1 || lr <= 0) {
        fprintf(stderr, "synth: diverged at epoch 1 (lr above 1: NaN)\n");
        return 1;
    }
    for (int e = 1; e <= epochs; e++) {
        for (int64_t until = tu_now_ms() + step_ms; tu_now_ms() < until;) {
            if (app_stop_signal)
                return app_stopped("synth");
            struct timespec ts = {0, 5 * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (app_stop_signal)
            return app_stopped("synth");
        double a = synth_accuracy(lr, momentum, seed, e);
        printf("synth: epoch %d val_accuracy %.6f val_loss %.6f\n", e, a, 1 - a);
        fflush(stdout);
    }
    printf("synth: done after %d epochs\n", epochs);
    return 0;
}
