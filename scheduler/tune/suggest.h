/* The search algorithms: where trial i goes in the unit cube. Grid (every point
 * of the levels' product, shuffled by the seed), random (a stream per trial from
 * the seed, so parallel trials draw the same points in any order) and GP-based
 * Bayesian search (gp.h): d+1 random trials first, then a GP on the normal scores
 * of the trials' ranks and expected improvement maximised over every point of a
 * small discrete space, or over quasi-random candidates and perturbations of the
 * incumbent refined on the real dimensions, never a point that ran or runs while
 * another is left, with pending trials imputed by the GP's own mean (kriging
 * believer).
 *
 * OWNS nothing. THREAD: one caller. NEVER blocks. */
#ifndef PSKV_TUNE_SUGGEST_H
#define PSKV_TUNE_SUGGEST_H

#include <stdint.h>

#include "space.h"

typedef enum { ALGO_GRID, ALGO_RANDOM, ALGO_GP } suggest_algo;

/* What the GP learns from: n points (n x d) with values y (larger is better; NAN
 * for pending trials, which the believer fills). */
typedef struct suggest_obs {
    int n;
    const double *x;
    const double *y;
} suggest_obs;

/* Parses "grid", "random" or "gp": 0, or -1. */
int suggest_algo_parse(const char *text, suggest_algo *a);
const char *suggest_algo_name(suggest_algo a);

/* The number of grid points with `levels` per real dimension. */
long suggest_grid_size(const tune_space *s, int levels);

/* Writes trial i's point (s->dims values, snapped) into u. Returns 0, 1 when the
 * grid is exhausted (i past its size), -PSKV_ENOMEM. */
int suggest_point(const tune_space *s, suggest_algo a, uint64_t seed, long i, int levels,
                  const suggest_obs *obs, double *u);

/* A uniform double in [0,1) from the stream (seed, i, j): splitmix64. */
double suggest_uniform(uint64_t seed, uint64_t i, uint64_t j);

#endif
