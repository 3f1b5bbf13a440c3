/* Gaussian process (gp.h). The factor is LAPACK's: dpotrf_ and dpotrs_ from
 * OpenBLAS, declared here because Debian's OpenBLAS ships no lapacke.h we need. */
#define _GNU_SOURCE
#include "gp.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void dpotrf_(const char *uplo, const int *n, double *a, const int *lda, int *info);
void dpotrs_(const char *uplo, const int *n, const int *nrhs, const double *a, const int *lda,
             double *b, const int *ldb, int *info);
void dtrsv_(const char *uplo, const char *trans, const char *diag, const int *n,
            const double *a, const int *lda, double *x, const int *incx);

struct tune_gp {
    int n, d;
    double ell, s2, noise, ymean, ystd;
    double *x, *L, *alpha; /* points, lower Cholesky factor of K, K^-1 y */
    double *D;             /* pairwise distances, computed once for the fit's grid */
    double *k;             /* scratch: one row of cross covariances */
};

double gp_matern52(double r, double ell, double s2)
{
    double a = sqrt(5.0) * r / ell;
    return s2 * (1 + a + a * a / 3) * exp(-a);
}

static double dist(const double *a, const double *b, int d)
{
    double s = 0;
    for (int i = 0; i < d; i++)
        s += (a[i] - b[i]) * (a[i] - b[i]);
    return sqrt(s);
}

/* Factors K = s2 (M(ell) + ratio I) for M the unit Matérn-5/2 (as s2 * K0 with
 * K0's factor L0: L = sqrt(s2) L0, so the grid factors each shape once) and
 * solves alpha = K^-1 y. Returns log det(K0)/2 = sum log diag L0, or NAN when K0 is
 * not positive definite; alpha is K0^-1 y (divide by s2 for K's). */
static double factor0(tune_gp *g, double ratio, const double *y)
{
    int n = g->n, info = 0, one = 1;
    for (int j = 0; j < n; j++)
        for (int i = j; i < n; i++) /* column-major lower */
            g->L[j * n + i] = gp_matern52(g->D[j * n + i], g->ell, 1) + (i == j ? ratio : 0);
    dpotrf_("L", &n, g->L, &n, &info);
    if (info != 0)
        return NAN;
    memcpy(g->alpha, y, sizeof(double) * n);
    dpotrs_("L", &n, &one, g->L, &n, g->alpha, &n, &info);
    if (info != 0)
        return NAN;
    double half = 0;
    for (int i = 0; i < n; i++)
        half += log(g->L[i * n + i]);
    return half;
}

/* The factor for (ell, s2, noise) from factor0: L and alpha rescaled in place. */
static int factor(tune_gp *g, const double *y)
{
    if (isnan(factor0(g, g->noise / g->s2, y)))
        return -1;
    int n = g->n;
    double r = sqrt(g->s2);
    for (int j = 0; j < n; j++)
        for (int i = j; i < n; i++)
            g->L[j * n + i] *= r;
    for (int i = 0; i < n; i++)
        g->alpha[i] /= g->s2;
    return 0;
}

/* Standardises y into ys and picks the hyper-parameters by marginal likelihood. */
static void fit(tune_gp *g, const double *y, double *ys)
{
    int n = g->n;
    double m = 0, v = 0;
    for (int i = 0; i < n; i++)
        m += y[i];
    m /= n;
    for (int i = 0; i < n; i++)
        v += (y[i] - m) * (y[i] - m);
    g->ymean = m;
    g->ystd = n > 1 && v > 0 ? sqrt(v / n) : 1;
    for (int i = 0; i < n; i++)
        ys[i] = (y[i] - m) / g->ystd;
    /* the grid: length scales and noise ratios. For a shape K0 = M(ell) + ratio I
     * the signal variance that maximises the likelihood is s2 = y'K0^-1 y / n,
     * where the log likelihood is -n/2 (1 + log(2 pi s2)) - log det(K0)/2 */
    static const double ells[] = {0.05, 0.1, 0.2, 0.35, 0.6, 1.0, 1.7};
    static const double ratios[] = {1e-6, 1e-3, 1e-2, 1e-1};
    double best = -INFINITY, bell = 0.35, bs2 = 1, bnoise = 1e-3;
    for (size_t a = 0; a < sizeof ells / sizeof ells[0]; a++)
        for (size_t b = 0; b < sizeof ratios / sizeof ratios[0]; b++) {
            g->ell = ells[a];
            double half = factor0(g, ratios[b], ys);
            if (isnan(half))
                continue;
            double q = 0;
            for (int i = 0; i < n; i++)
                q += ys[i] * g->alpha[i];
            double s2hat = q / n > 1e-6 ? q / n : 1e-6;
            double ll = -0.5 * n * (1 + log(2 * M_PI * s2hat)) - half;
            if (ll > best) {
                best = ll;
                bell = ells[a];
                bs2 = s2hat;
                bnoise = ratios[b] * s2hat;
            }
        }
    g->ell = bell;
    g->s2 = bs2;
    g->noise = bnoise;
}

tune_gp *gp_new(int n, int d, const double *x, const double *y, double ell, double s2,
                double noise)
{
    if (n < 1 || d < 1)
        return NULL;
    tune_gp *g = calloc(1, sizeof *g);
    double *ys = malloc(sizeof(double) * n);
    if (!g || !ys)
        goto fail;
    g->n = n;
    g->d = d;
    g->x = malloc(sizeof(double) * n * d);
    g->L = malloc(sizeof(double) * n * n);
    g->alpha = malloc(sizeof(double) * n);
    g->k = malloc(sizeof(double) * n);
    g->D = malloc(sizeof(double) * n * n);
    if (!g->x || !g->L || !g->alpha || !g->k || !g->D)
        goto fail;
    memcpy(g->x, x, sizeof(double) * n * d);
    for (int j = 0; j < n; j++)
        for (int i = j; i < n; i++)
            g->D[j * n + i] = dist(g->x + i * d, g->x + j * d, d);
    g->ymean = 0;
    g->ystd = 1;
    if (ell > 0) { /* fixed hyper-parameters, y as given */
        memcpy(ys, y, sizeof(double) * n);
        g->ell = ell;
        g->s2 = s2;
        g->noise = noise;
    } else
        fit(g, y, ys);
    if (factor(g, ys) < 0)
        goto fail;
    free(ys);
    return g;
fail:
    free(ys);
    gp_destroy(&g);
    return NULL;
}

void gp_destroy(tune_gp **self_p)
{
    if (!self_p || !*self_p)
        return;
    tune_gp *g = *self_p;
    free(g->x);
    free(g->L);
    free(g->alpha);
    free(g->k);
    free(g->D);
    free(g);
    *self_p = NULL;
}

void gp_predict(const tune_gp *g, const double *x, double *mean, double *var)
{
    int n = g->n, inc = 1;
    double mu = 0;
    for (int i = 0; i < n; i++) {
        g->k[i] = gp_matern52(dist(x, g->x + i * g->d, g->d), g->ell, g->s2);
        mu += g->k[i] * g->alpha[i];
    }
    dtrsv_("L", "N", "N", &n, g->L, &n, g->k, &inc); /* v = L^-1 k */
    double v = g->s2;
    for (int i = 0; i < n; i++)
        v -= g->k[i] * g->k[i];
    if (v < 1e-12 * g->s2)
        v = 1e-12 * g->s2;
    *mean = g->ymean + g->ystd * mu;
    *var = v * g->ystd * g->ystd;
}

double gp_ell(const tune_gp *g)
{
    return g->ell;
}

double gp_ei(double mu, double sigma, double best)
{
    if (!(sigma > 0))
        return mu > best ? mu - best : 0;
    double z = (mu - best) / sigma;
    double cdf = 0.5 * erfc(-z / sqrt(2.0));
    double pdf = exp(-0.5 * z * z) / sqrt(2 * M_PI);
    return (mu - best) * cdf + sigma * pdf;
}
