/* lscale: a dynamic loss scale, after PyTorch AMP's GradScaler, for the training
 * apps' --loss-scale (all-reduce and parameter-server modes alike): the gradient
 * is multiplied by the scale before it goes on the wire; a step whose scaled
 * gradient holds an inf or NaN is skipped and a dynamic scale halved; after
 * --scale-window clean steps in a row a dynamic scale doubles. The scale stays a
 * power of two within 2^-24 .. 2^24 when dynamic (exact to divide by).
 *
 * OWNS nothing (a plain value). THREAD: the app's. NEVER touches a gradient. */
#ifndef PSKV_LSCALE_H
#define PSKV_LSCALE_H

#include <stddef.h>
#include <stdint.h>

#include "pskv.h"
#include "report.h"

typedef struct lscale {
    double scale; /* the gradient's factor, 0 = no loss scaling */
    int dynamic;  /* halved on a skipped step, doubled after `window` clean ones */
    long window;  /* --scale-window */
    long clean;   /* steps since the scale last changed or a step was skipped */
    long skipped; /* steps skipped for an inf or NaN */
    long plant;   /* --plant-overflow (lscale_push): rank 0's step that holds FLT_MAX */
    long steps;   /* lscale_push's calls */
} lscale;

/* --loss-scale's value into *ls (window: --scale-window): "" (none), "dynamic"
 * (the scale starts at 65536) or a number > 0. Returns 0, or -1 for anything else. */
int lscale_parse(lscale *ls, const char *s, long window);

/* The step held an inf or NaN: it is skipped; a dynamic scale halves (not below
 * 2^-24). */
void lscale_skip(lscale *ls);

/* A clean step: a dynamic scale doubles after `window` of them (not past 2^24). */
void lscale_clean(lscale *ls);

/* --sync ps: pushes the whole dense table's gradient grad (n floats) without a
 * copy (pskv_push_nocopy: grad stays untouched until the push is answered) with
 * the loss scale (pskv_set_loss_scale; none when ls->scale is 0). A step whose scaled
 * gradient is not finite on the wire pushes nothing (lscale_skip). At step
 * ls->plant rank 0's grad[0] is first set to FLT_MAX (tests). Returns the push's
 * timestamp, 0 when the step was skipped, or a negated error. */
int64_t lscale_push(lscale *ls, pskv_worker *w, int table, float *grad, size_t n);

/* Adds the scale and the steps skipped to a metrics line (nothing without a scale). */
void lscale_report(const lscale *ls, report_line *l);

#endif
