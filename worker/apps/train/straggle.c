/* straggle: slow steps on purpose (contract in straggle.h). */
#define _GNU_SOURCE
#include "straggle.h"

#include <errno.h>
#include <time.h>

#include <stdio.h>
#include <string.h>

#include "ring.h"
#include "timeutil.h"

int straggle_init(straggle *s, cfg_entry *cfg, uint64_t seed, int rank)
{
    s->slowdown = cfg_double(cfg, "slowdown");
    s->after = cfg_int(cfg, "slowdown-after");
    s->layer_ns = (int64_t)(cfg_double(cfg, "layer-delay-ms") * 1e6);
    s->steps = 0;
    s->jitter_p = 0;
    s->jitter_f = 1;
    s->rng = ring_mix64(seed ^ (uint64_t)(rank + 1) * 0x51ed27ULL);
    const char *j = cfg_str(cfg, "jitter");
    s->alt = !strncmp(j, "alt:", 4) ? 1 + rank % 2 : 0;
    if ((s->alt && (sscanf(j + 4, "%lf", &s->jitter_f) != 1 || !(s->jitter_f >= 1))) ||
        (!s->alt && *j && sscanf(j, "%lf:%lf", &s->jitter_p, &s->jitter_f) != 2)) {
        fprintf(stderr, "train: --jitter must be P:F (e.g. 0.1:5) or alt:F (F >= 1)\n");
        return 2;
    }
    return 0;
}

/* Sleeps ns nanoseconds (to the ns, not rounded to a millisecond: a balanced
 * straggler's step of a few examples computes for well under one). */
static void sleep_ns(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    while (ns > 0 && nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int64_t straggle_after(straggle *s, int64_t compute_ns)
{
    s->last = 1;
    if (s->steps++ < s->after)
        return 0;
    double factor = s->slowdown;
    if (s->alt && (s->steps + s->alt) % 2 == 0) /* the two parities of rank in turn */
        factor *= s->jitter_f;
    if (s->jitter_p > 0) {
        s->rng += 0x9e3779b97f4a7c15ULL;
        if ((double)(ring_mix64(s->rng) >> 11) / 9007199254740992.0 < s->jitter_p)
            factor *= s->jitter_f;
    }
    if (!(factor > 1))
        return 0;
    s->last = factor;
    int64_t z = tu_now_ns();
    sleep_ns((int64_t)((factor - 1) * (double)compute_ns));
    return tu_now_ns() - z;
}

void straggle_pass(const straggle *s, int64_t cpu_ns)
{
    if (!(s->last > 1) || cpu_ns <= 0)
        return;
    sleep_ns((int64_t)((s->last - 1) * (double)cpu_ns));
}

void straggle_layers(const straggle *s, int layers)
{
    if (s->layer_ns > 0 && layers > 0)
        sleep_ns(s->layer_ns * layers);
}
