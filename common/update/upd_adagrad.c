/* upd_adagrad: g' = g + l2*w; h += g'*g'; w -= lr*g'/(sqrt(h)+eps) (updater.h).
 * State: h, one plane. */
#include <math.h>

#include "updater.h"

static int planes(const upd_opts *o)
{
    (void)o;
    return 1;
}

static void apply(const upd_opts *o, float *w, float *state, size_t stride, const float *g,
                  size_t n, size_t width)
{
    (void)stride, (void)width;
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] + o->l2 * w[i];
        state[i] += gi * gi;
        w[i] -= o->lr * gi / (sqrtf(state[i]) + o->eps);
    }
}

const upd_ops upd_adagrad_ops = {
    .name = "adagrad",
    .state_planes = planes,
    .check = upd_check_own,
    .may_fail = 0,
    .apply = apply,
    .rules = {.eps = UPD_EPS_POSITIVE},
};
