/* upd_sum: w += g, exact integer sums for tests and counters (updater.h). No
 * state, no hyper-parameters of its own; one OpenBLAS saxpy per run. */
#include <cblas.h>

#include "updater.h"

static int planes(const upd_opts *o)
{
    (void)o;
    return 0;
}

static void apply(const upd_opts *o, float *w, float *state, size_t stride, const float *g,
                  size_t n, size_t width)
{
    (void)o, (void)state, (void)stride, (void)width;
    cblas_saxpy((blasint)n, 1.0f, g, 1, w, 1);
}

const upd_ops upd_sum_ops = {
    .name = "sum",
    .state_planes = planes,
    .check = upd_check_own,
    .may_fail = 0,
    .apply = apply,
    .rules = {0},
    .bsp_sums = 1,
};
