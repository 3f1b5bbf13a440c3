/* wclip: gradient clipping by global norm, pskv_clip_norm (contract in pskv.h).
 * The norm is summed in double, so that finite float values cannot overflow it
 * (FLT_MAX squared is about 1e77, far inside double's range): only a NaN or an
 * infinity among the values makes it non-finite, and then nothing is scaled and
 * the server's refusal of non-finite values names the table as before. */
#include <math.h>

#include "pskv.h"

int pskv_clip_norm(float *const *parts, const size_t *lens, size_t nparts, double max_norm,
                   double *norm)
{
    if (!isfinite(max_norm) || max_norm <= 0)
        return -PSKV_EINVAL;
    double sq = 0;
    for (size_t p = 0; p < nparts; p++)
        for (size_t i = 0; i < lens[p]; i++)
            sq += (double)parts[p][i] * (double)parts[p][i];
    double n = sqrt(sq);
    if (norm)
        *norm = n;
    if (!isfinite(n) || n <= max_norm)
        return 0;
    double scale = max_norm / n;
    for (size_t p = 0; p < nparts; p++)
        for (size_t i = 0; i < lens[p]; i++)
            parts[p][i] = (float)((double)parts[p][i] * scale);
    return 1;
}
