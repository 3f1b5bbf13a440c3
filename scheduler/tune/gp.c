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

/* Factors K for (ell, s2, noise) and solves alpha; returns the log marginal
 * likelihood, or -INFINITY when K is not positive definite. */
static double factor(tune_gp *g, const double *y)
{
    int n = g->n, info = 0, one = 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j <= i; j++) {
            double v = gp_matern52(dist(g->x + i * g->d, g->x + j * g->d, g->d), g->ell, g->s2);
            g->L[j * n + i] = v + (i == j ? g->noise : 0); /* column-major lower */
        }
    dpotrf_("L", &n, g->L, &n, &info);
    if (info != 0)
        return -INFINITY;
    memcpy(g->alpha, y, sizeof(double) * n);
    dpotrs_("L", &n, &one, g->L, &n, g->alpha, &n, &info);
    if (info != 0)
        return -INFINITY;
    double ll = 0;
    for (int i = 0; i < n; i++)
        ll -= 0.5 * y[i] * g->alpha[i] + log(g->L[i * n + i]);
    return ll - 0.5 * n * log(2 * M_PI);
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
    if (!g->x || !g->L || !g->alpha || !g->k)
        goto fail;
    memcpy(g->x, x, sizeof(double) * n * d);
    g->ymean = 0;
    g->ystd = 1;
    if (ell > 0) {
        memcpy(ys, y, sizeof(double) * n);
        g->ell = ell;
        g->s2 = s2;
        g->noise = noise;
        if (!isfinite(factor(g, ys)))
            goto fail;
        free(ys);
        return g;
    }
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
    /* the grid: length scales and noise ratios; the signal variance that
     * maximises the likelihood for a shape is y'K0^-1 y / n (K0 at s2 = 1) */
    static const double ells[] = {0.05, 0.1, 0.2, 0.35, 0.6, 1.0, 1.7};
    static const double ratios[] = {1e-6, 1e-3, 1e-2, 1e-1};
    double best = -INFINITY, bell = 0.35, bs2 = 1, bnoise = 1e-3;
    for (size_t a = 0; a < sizeof ells / sizeof ells[0]; a++)
        for (size_t b = 0; b < sizeof ratios / sizeof ratios[0]; b++) {
            g->ell = ells[a];
            g->s2 = 1;
            g->noise = ratios[b];
            if (!isfinite(factor(g, ys)))
                continue;
            double q = 0;
            for (int i = 0; i < n; i++)
                q += ys[i] * g->alpha[i];
            double s2hat = q / n > 1e-6 ? q / n : 1e-6;
            g->s2 = s2hat;
            g->noise = ratios[b] * s2hat;
            double ll = factor(g, ys);
            if (ll > best) {
                best = ll;
                bell = g->ell;
                bs2 = g->s2;
                bnoise = g->noise;
            }
        }
    g->ell = bell;
    g->s2 = bs2;
    g->noise = bnoise;
    if (!isfinite(factor(g, ys)))
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
