/* updater: the ops table of the updaters and the calls that go through it
 * (updater.h); each row lives in a file of its own. */
#include "updater.h"

#include <assert.h>
#include <math.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define UPD_X86 1 /* upd_all_finite's AVX2 kernel, chosen at run time (halfvec_on) */
#define TGT __attribute__((target("avx,avx2")))
#endif
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "halfvec.h"
#include "pskv_errors.h"

/* The table: one row per upd_kind, in the enum's order. */
static const upd_ops *const rows[] = {
    [UPD_SUM] = &upd_sum_ops,   [UPD_SGD] = &upd_sgd_ops,   [UPD_ADAGRAD] = &upd_adagrad_ops,
    [UPD_ADAM] = &upd_adam_ops, [UPD_ADAMW] = &upd_adamw_ops, [UPD_FTRL] = &upd_ftrl_ops,
    [UPD_PLUGIN] = &upd_plugin_ops,
};

const upd_ops *upd_ops_of(upd_kind kind)
{
    assert(kind >= UPD_SUM && kind <= UPD_PLUGIN);
    return rows[kind];
}

int upd_parse(const char *name)
{
    for (int k = UPD_SUM; k < UPD_PLUGIN; k++) /* a plug-in is plugin:PATH (upd_plugin.h) */
        if (!strcmp(name, rows[k]->name))
            return k;
    return -1;
}

const char *upd_name(upd_kind kind)
{
    return kind >= UPD_SUM && kind <= UPD_PLUGIN ? rows[kind]->name : "?";
}

#define REFUSE(...)                                                                          \
    do {                                                                                     \
        snprintf(why, whylen, __VA_ARGS__);                                                  \
        return -PSKV_EINVAL;                                                                 \
    } while (0)

static int nonneg(float x) { return isfinite(x) && x >= 0; }

int upd_check_rules(const upd_opts *o, const upd_rules *r, char *why, size_t whylen)
{
    const char *name = upd_name(o->kind);
    if (!nonneg(o->lr))
        REFUSE("lr must be a finite number >= 0 (got %g)", (double)o->lr);
    if (r->lr_positive && !(o->lr > 0))
        REFUSE("lr (%s's alpha) must be > 0 (got %g)", name, (double)o->lr);
    if (!isfinite(o->momentum) || o->momentum < 0 || o->momentum >= 1)
        REFUSE("momentum must be in [0, 1) (got %g)", (double)o->momentum);
    if (o->momentum > 0 && !(r->takes & UPD_TAKES_MOMENTUM))
        REFUSE("momentum applies to sgd only (got %g for %s)", (double)o->momentum, name);
    if (!nonneg(o->l2))
        REFUSE("l2 must be >= 0 (got %g)", (double)o->l2);
    if (!nonneg(o->l1))
        REFUSE("l1 must be >= 0 (got %g)", (double)o->l1);
    if (o->l1 > 0 && !(r->takes & UPD_TAKES_L1))
        REFUSE("l1 applies to sgd and ftrl only (got %g for %s)", (double)o->l1, name);
    if (!isfinite(o->eps) || (r->eps == UPD_EPS_POSITIVE && o->eps <= 0) ||
        (r->eps == UPD_EPS_NONNEG && o->eps < 0))
        REFUSE("eps must be finite (> 0 for adagrad, >= 0 for adam; got %g)", (double)o->eps);
    if ((r->takes & UPD_TAKES_BETAS) && (!isfinite(o->beta1) || o->beta1 < 0 || o->beta1 >= 1))
        REFUSE("beta1 must be in [0, 1) (got %g)", (double)o->beta1);
    if ((r->takes & UPD_TAKES_BETAS) && (!isfinite(o->beta2) || o->beta2 < 0 || o->beta2 >= 1))
        REFUSE("beta2 must be in [0, 1) (got %g)", (double)o->beta2);
    if (!nonneg(o->weight_decay))
        REFUSE("weight_decay must be >= 0 (got %g)", (double)o->weight_decay);
    if (o->weight_decay > 0 && !(r->takes & UPD_TAKES_DECAY))
        REFUSE("weight_decay applies to adamw only (got %g for %s; adam and sgd take l2)",
               (double)o->weight_decay, name);
    if ((r->takes & UPD_TAKES_BETA) && !nonneg(o->beta))
        REFUSE("beta (%s) must be >= 0 (got %g)", name, (double)o->beta);
    return 0;
}

int upd_check_own(const upd_opts *o, char *why, size_t whylen)
{
    return upd_check_rules(o, &upd_ops_of(o->kind)->rules, why, whylen);
}

int upd_check(const upd_opts *o, char *why, size_t whylen)
{
    return upd_ops_of(o->kind)->check(o, why, whylen);
}

int upd_state_per_value(const upd_opts *o) { return upd_ops_of(o->kind)->state_planes(o); }

int upd_may_fail(const upd_opts *o) { return upd_ops_of(o->kind)->may_fail; }

void upd_apply_planes(const upd_opts *o, float *w, float *state, size_t stride, const float *g,
                      size_t n, size_t width)
{
    upd_ops_of(o->kind)->apply(o, w, state, stride, g, n, width);
}

void upd_apply(const upd_opts *o, float *w, float *state, const float *g, size_t n)
{
    upd_apply_planes(o, w, state, n, g, n, n ? n : 1);
}

/* An exponent of all ones (NaN or infinity) carries into bit 31 when 2^23 is added
 * to the masked exponent. Blocks of 16 with no early exit let the compiler keep it
 * in vector registers: about twice the speed of a compare. The bits are read
 * through a type that may alias the floats: with the caller inlined (LTO), plain
 * uint32_t reads could move before its float writes. */
static int all_finite_base(const float *v, size_t n)
{
    typedef uint32_t __attribute__((may_alias)) bits32;
    const bits32 *u = (const bits32 *)(const void *)v;
    uint32_t bad = 0;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        uint32_t b = 0;
        for (int k = 0; k < 16; k++)
            b |= (u[i + k] & 0x7f800000u) + 0x00800000u;
        bad |= b;
    }
    for (; i < n; i++)
        bad |= (u[i] & 0x7f800000u) + 0x00800000u;
    return !(bad & 0x80000000u);
}

#ifdef UPD_X86
/* The same test 16 values at a time in two vector accumulators, looked at once at
 * the end; the tail by the portable code. */
TGT static int all_finite_avx2(const float *v, size_t n)
{
    const __m256i mask = _mm256_set1_epi32(0x7f800000), one = _mm256_set1_epi32(0x00800000);
    __m256i a0 = _mm256_setzero_si256(), a1 = _mm256_setzero_si256();
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(v + i));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(v + i + 8));
        a0 = _mm256_or_si256(a0, _mm256_add_epi32(_mm256_and_si256(x0, mask), one));
        a1 = _mm256_or_si256(a1, _mm256_add_epi32(_mm256_and_si256(x1, mask), one));
    }
    if (_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_or_si256(a0, a1))))
        return 0;
    return all_finite_base(v + i, n - i);
}
#endif

int upd_all_finite(const float *v, size_t n)
{
#ifdef UPD_X86
    if (halfvec_on())
        return all_finite_avx2(v, n);
#endif
    return all_finite_base(v, n);
}
