/* upd_adam: adam, and adamw with decoupled weight decay (updater.h). State: m, v
 * and the row's step count t, three planes. Two rows share the code: adamw is
 * adam whose rules take weight_decay. eps = 0 can make NaN: may_fail. */
#include <math.h>

#include "updater.h"

static void adam(const upd_opts *o, float *w, float *m, float *v, float *t, const float *g,
                 size_t n)
{
    const float b1 = o->beta1, b2 = o->beta2;
    const float decay = o->kind == UPD_ADAMW ? 1.0f - o->lr * o->weight_decay : 1.0f;
    float last = -1.0f, c1 = 1.0f, c2 = 1.0f; /* the corrections of step `last` */
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] + o->l2 * w[i];
        t[i] += 1.0f;
        if (t[i] != last) { /* a row's values share t: two powf per row, not per value */
            last = t[i];
            c1 = 1.0f - powf(b1, last);
            c2 = 1.0f - powf(b2, last);
        }
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        w[i] = w[i] * decay - o->lr * (m[i] / c1) / (sqrtf(v[i] / c2) + o->eps);
    }
}

static int planes(const upd_opts *o)
{
    (void)o;
    return 3;
}

static void apply(const upd_opts *o, float *w, float *state, size_t stride, const float *g,
                  size_t n, size_t width)
{
    (void)width;
    adam(o, w, state, state + stride, state + 2 * stride, g, n);
}

const upd_ops upd_adam_ops = {
    .name = "adam",
    .state_planes = planes,
    .check = upd_check_own,
    .may_fail = 1,
    .apply = apply,
    .rules = {.takes = UPD_TAKES_BETAS, .eps = UPD_EPS_NONNEG},
};
const upd_ops upd_adamw_ops = {
    .name = "adamw",
    .state_planes = planes,
    .check = upd_check_own,
    .may_fail = 1,
    .apply = apply,
    .rules = {.takes = UPD_TAKES_BETAS | UPD_TAKES_DECAY, .eps = UPD_EPS_NONNEG},
};
