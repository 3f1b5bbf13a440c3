/* upd_ftrl: FTRL-proximal, per coordinate, lr = alpha (updater.h). State: z and
 * n, two planes; w is kept equal to their closed form. Overflow can make NaN:
 * may_fail. */
#include <math.h>

#include "updater.h"

static void ftrl(const upd_opts *o, float *w, float *z, float *nn, const float *g, size_t n)
{
    const float a = o->lr, l1 = o->l1;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i], n1 = nn[i] + gi * gi;
        float sigma = (sqrtf(n1) - sqrtf(nn[i])) / a;
        z[i] += gi - sigma * w[i];
        nn[i] = n1;
        float zi = z[i];
        if (fabsf(zi) <= l1)
            w[i] = 0.0f;
        else
            w[i] = -(zi - copysignf(l1, zi)) / ((o->beta + sqrtf(n1)) / a + o->l2);
    }
}

static int planes(const upd_opts *o)
{
    (void)o;
    return 2;
}

static void apply(const upd_opts *o, float *w, float *state, size_t stride, const float *g,
                  size_t n, size_t width)
{
    (void)width;
    ftrl(o, w, state, state + stride, g, n);
}

const upd_ops upd_ftrl_ops = {
    .name = "ftrl",
    .state_planes = planes,
    .check = upd_check_own,
    .may_fail = 1,
    .apply = apply,
    .rules = {.takes = UPD_TAKES_L1 | UPD_TAKES_BETA, .lr_positive = 1},
    .closed_form = 1,
};
