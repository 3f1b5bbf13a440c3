/* straggle: a training worker made slow on purpose (--slowdown F: every step's
 * compute followed by a sleep of (F - 1) times it, to the nanosecond: a slow
 * machine of its own, holding no core of the shared host while it waits; --jitter P:F: with probability P
 * a step F times slower; --jitter alt:F: every other step F times slower, even
 * ranks on odd steps and odd ranks on even ones; all from the worker's step
 * --slowdown-after on; --layer-delay-ms D: a pipeline stage sleeps D ms per layer
 * of each pass, unseen by its CPU time), for the
 * straggler benchmarks and tests.
 *
 * OWNS   nothing (the caller's straggle value).
 * THREAD the training thread.
 * NEVER  sleeps when none of the flags is set. */
#ifndef PSKV_STRAGGLE_H
#define PSKV_STRAGGLE_H

#include <stdint.h>

#include "config.h"

typedef struct straggle {
    double slowdown, jitter_p, jitter_f;
    uint64_t rng;
    int64_t after, steps; /* --slowdown-after; steps so far */
    int alt;              /* --jitter alt:F: 1 + rank % 2, else 0 */
    double last;          /* the factor of the latest step (1 = not slowed) */
    int64_t layer_ns;     /* --layer-delay-ms, ns */
} straggle;

/* Reads --slowdown, --jitter, --slowdown-after and --layer-delay-ms from cfg; seeds the jitter with (seed, rank).
 * Returns 0, or 2 after saying what is wrong (a malformed --jitter). */
int straggle_init(straggle *s, cfg_entry *cfg, uint64_t seed, int rank);

/* After a step whose compute took compute_ns: sleeps as the flags say, and
 * records the step's factor in s->last. Returns the nanoseconds slept. */
int64_t straggle_after(straggle *s, int64_t compute_ns);

/* A pipeline's pass (--app pipeline) that took cpu_ns: sleeps (F - 1) times it,
 * F the factor of the step straggle_after rolled last (s->last), to the ns. */
void straggle_pass(const straggle *s, int64_t cpu_ns);

/* A pipeline's pass over `layers` layers (--app pipeline): sleeps --layer-delay-ms
 * per layer, from the first step on: a wall-time cost of the layers that their CPU
 * time (what --balance stages models) does not show, for its tests. */
void straggle_layers(const straggle *s, int layers);

#endif
