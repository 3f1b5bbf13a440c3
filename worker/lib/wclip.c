/* wclip: gradient clipping by global norm, pskv_clip_norm (contract in pskv.h).
 * The sum of squares is taken in double, so that finite float values cannot
 * overflow it (FLT_MAX squared is about 1e77, far inside double's range): only a
 * NaN or an infinity among the values makes it non-finite, and then nothing is
 * scaled and the server's refusal of non-finite values names the table as
 * before. A step's gradient is a pass over every parameter (an MLP's 814 KB):
 * eight independent sums let the adds overlap (one sum waits on each add), and
 * the scaling multiplies in float, so that both loops run at memory speed. */
#include <float.h>
#include <math.h>

#include "pskv.h"

/* The sum of squares of v[0..n), in double. */
static double sum_sq(const float *v, size_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        double a0 = v[i], a1 = v[i + 1], a2 = v[i + 2], a3 = v[i + 3];
        double a4 = v[i + 4], a5 = v[i + 5], a6 = v[i + 6], a7 = v[i + 7];
        s0 += a0 * a0;
        s1 += a1 * a1;
        s2 += a2 * a2;
        s3 += a3 * a3;
        s4 += a4 * a4;
        s5 += a5 * a5;
        s6 += a6 * a6;
        s7 += a7 * a7;
    }
    for (; i < n; i++)
        s0 += (double)v[i] * (double)v[i];
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
}

/* v[0..n) times scale: in float when the factor is a normal float, else (values
 * near FLT_MAX scaled to a small norm) in double. */
static void scale_by(float *v, size_t n, double scale)
{
    float f = (float)scale;
    if (f >= FLT_MIN) {
        for (size_t i = 0; i < n; i++)
            v[i] *= f;
    } else {
        for (size_t i = 0; i < n; i++)
            v[i] = (float)((double)v[i] * scale);
    }
}

int pskv_clip_norm(float *const *parts, const size_t *lens, size_t nparts, double max_norm,
                   double *norm)
{
    if (!isfinite(max_norm) || max_norm <= 0)
        return -PSKV_EINVAL;
    double sq = 0;
    for (size_t p = 0; p < nparts; p++)
        sq += sum_sq(parts[p], lens[p]);
    double n = sqrt(sq);
    if (norm)
        *norm = n;
    if (!isfinite(n) || n <= max_norm)
        return 0;
    for (size_t p = 0; p < nparts; p++)
        scale_by(parts[p], lens[p], max_norm / n);
    return 1;
}
