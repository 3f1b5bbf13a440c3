/* Gaussian process (gp.h). The factor is LAPACK's: dpotrf_ and dpotrs_ from
 * OpenBLAS, declared here because Debian's OpenBLAS ships no lapacke.h we need.
 *
 * The fit: a grid over one shared length scale and the noise ratio (the signal
 * variance in closed form for each), then per-dimension length scales (ARD) by
 * coordinate steps from the shared one, each step kept only when it raises the
 * log marginal likelihood plus a weak log-normal prior on each length scale (the
 * prior keeps a handful of points from stretching a dimension to nothing). The
 * kernel's distances are kept per dimension (squared differences), so a shape
 * costs one pass over them and one dpotrf_. Past FIT_MAX points the shape is
 * chosen on an even subset of them, the GP itself conditioned on all. */
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
void dtrsm_(const char *side, const char *uplo, const char *transa, const char *diag,
            const int *m, const int *n, const double *alpha, const double *a, const int *lda,
            double *b, const int *ldb);

struct tune_gp {
    int n, d;
    double s2, noise, ymean, ystd;
    double *ell;           /* d length scales */
    double *x, *L, *alpha; /* points, lower Cholesky factor of K, K^-1 y */
    double *D;             /* squared differences per pair and dimension (j <= i) */
    double *k;             /* scratch: one row of cross covariances */
};

double gp_matern52(double r, double ell, double s2)
{
    double a = sqrt(5.0) * r / ell;
    return s2 * (1 + a + a * a / 3) * exp(-a);
}

/* Matérn-5/2 of unit variance at the scaled squared distance q = sum (dx/ell)^2. */
static double matern_q(double q)
{
    double a = sqrt(5.0 * q);
    return (1 + a + a * a / 3) * exp(-a);
}

static double scaled_q(const double *a, const double *b, const double *ell, int d)
{
    double s = 0;
    for (int i = 0; i < d; i++) {
        double t = (a[i] - b[i]) / ell[i];
        s += t * t;
    }
    return s;
}

/* Factors K0 = M(ell) + ratio I for M the unit Matérn-5/2 (K = s2 K0, so a shape
 * is factored once whatever s2) and solves alpha = K0^-1 y. Returns log det(K0)/2
 * = sum log diag L0, or NAN when K0 is not positive definite. */
static double factor0(tune_gp *g, const double *ell, double ratio, const double *y)
{
    int n = g->n, d = g->d, info = 0, one = 1;
    double inv[64];
    for (int k = 0; k < d; k++)
        inv[k] = 1 / (ell[k] * ell[k]);
    for (int j = 0; j < n; j++) {
        g->L[j * n + j] = 1 + ratio;
        for (int i = j + 1; i < n; i++) { /* column-major lower */
            const double *dd = g->D + ((size_t)j * n + i) * d;
            double q = 0;
            for (int k = 0; k < d; k++)
                q += dd[k] * inv[k];
            g->L[j * n + i] = matern_q(q);
        }
    }
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

/* K's factor and alpha from K0's (factor0's, done last): L times sqrt(s2),
 * alpha over s2. */
static void scale(tune_gp *g)
{
    int n = g->n;
    double r = sqrt(g->s2);
    for (int j = 0; j < n; j++)
        for (int i = j; i < n; i++)
            g->L[j * n + i] *= r;
    for (int i = 0; i < n; i++)
        g->alpha[i] /= g->s2;
}

/* The prior on each length scale: log-normal around 0.5 (the cube's scale). */
static double log_prior(const double *ell, int d)
{
    double lp = 0;
    for (int k = 0; k < d; k++) {
        double z = log(ell[k] / 0.5) / 1.5;
        lp -= 0.5 * z * z;
    }
    return lp;
}

/* The profile log likelihood (s2 at its maximum) plus the prior, for a shape;
 * -INFINITY when it cannot be factored. *s2hat gets the signal variance. */
static double score(tune_gp *g, const double *ell, double ratio, const double *ys, double *s2hat)
{
    int n = g->n;
    double half = factor0(g, ell, ratio, ys);
    if (isnan(half))
        return -INFINITY;
    double q = 0;
    for (int i = 0; i < n; i++)
        q += ys[i] * g->alpha[i];
    *s2hat = q / n > 1e-6 ? q / n : 1e-6;
    return -0.5 * n * (1 + log(2 * M_PI * *s2hat)) - half + log_prior(ell, g->d);
}

/* y standardised into ys (its mean and deviation kept to undo it). */
static void standardise(tune_gp *g, const double *y, double *ys)
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
}

/* The length scales e (d) and noise ratio that maximise the marginal likelihood
 * (plus the prior) of ys on g's points. */
static void fit(tune_gp *g, const double *ys, double *e, double *ratio)
{
    int d = g->d;
    /* one length scale on a grid, then the noise ratio at it. For a shape K0 =
     * M(ell) + ratio I the signal variance that maximises the likelihood is s2 =
     * y'K0^-1 y / n, where the log likelihood is -n/2 (1 + log(2 pi s2)) -
     * log det(K0)/2 */
    static const double ells[] = {0.05, 0.1, 0.2, 0.35, 0.6, 1.0, 1.7};
    static const double ratios[] = {1e-3, 1e-6, 1e-2, 1e-1};
    int nell = sizeof ells / sizeof ells[0], nratio = sizeof ratios / sizeof ratios[0];
    double best = -INFINITY, s2hat, t[64];
    *ratio = ratios[0];
    for (int k = 0; k < d; k++)
        e[k] = 0.35;
    for (int a = 0; a < nell + nratio; a++) {
        double r = a < nell ? ratios[0] : ratios[a - nell];
        for (int k = 0; k < d; k++)
            t[k] = a < nell ? ells[a] : e[k];
        double ll = a == nell ? -INFINITY : score(g, t, r, ys, &s2hat);
        if (ll > best) {
            best = ll;
            memcpy(e, t, sizeof(double) * d);
            *ratio = r;
        }
    }
    /* ARD: each dimension's length scale stretched or shrunk in turn, in coarse
     * steps then finer ones */
    static const double steps[2][2] = {{0.35, 2.8}, {0.6, 1.7}};
    for (int sweep = 0; d > 1 && sweep < 2; sweep++)
        for (int k = 0; k < d; k++) {
            double base = e[k];
            for (int st = 0; st < 2; st++) {
                double c = base * steps[sweep][st];
                if (c < 0.02 || c > 20)
                    continue;
                memcpy(t, e, sizeof(double) * d);
                t[k] = c;
                double ll = score(g, t, *ratio, ys, &s2hat);
                if (ll > best + 1e-9) {
                    best = ll;
                    e[k] = c;
                }
            }
        }
}

/* A GP's storage on n points x, with their squared differences (no factor). */
static tune_gp *alloc(int n, int d, const double *x)
{
    tune_gp *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->n = n;
    g->d = d;
    g->ymean = 0;
    g->ystd = 1;
    g->ell = malloc(sizeof(double) * d);
    g->x = malloc(sizeof(double) * n * d);
    g->L = malloc(sizeof(double) * n * n);
    g->alpha = malloc(sizeof(double) * n);
    g->k = malloc(sizeof(double) * n);
    g->D = malloc(sizeof(double) * n * n * d);
    if (!g->ell || !g->x || !g->L || !g->alpha || !g->k || !g->D) {
        gp_destroy(&g);
        return NULL;
    }
    memcpy(g->x, x, sizeof(double) * n * d);
    for (int j = 0; j < n; j++)
        for (int i = j + 1; i < n; i++)
            for (int k = 0; k < d; k++) {
                double t = g->x[i * d + k] - g->x[j * d + k];
                g->D[((size_t)j * n + i) * d + k] = t * t;
            }
    return g;
}

/* The hyper-parameters of a GP on many points come from an even subset of
 * FIT_MAX of them (every (n/FIT_MAX)-th): the fit's forty-odd factors then cost
 * an eighth each, and the GP itself still conditions on all n. */
#define FIT_MAX 100

tune_gp *gp_new(int n, int d, const double *x, const double *y, double ell, double s2,
                double noise)
{
    if (n < 1 || d < 1 || d > 64)
        return NULL;
    tune_gp *g = alloc(n, d, x), *sub = NULL;
    double *ys = malloc(sizeof(double) * n), *xs = NULL, *yss = NULL, ratio, s2hat;
    if (!g || !ys)
        goto fail;
    if (ell > 0) { /* fixed hyper-parameters, y as given */
        for (int k = 0; k < d; k++)
            g->ell[k] = ell;
        g->s2 = s2;
        g->noise = noise;
        if (isnan(factor0(g, g->ell, noise / s2, y)))
            goto fail;
        scale(g);
        free(ys);
        return g;
    }
    standardise(g, y, ys);
    if (n > FIT_MAX) {
        xs = malloc(sizeof(double) * FIT_MAX * d);
        yss = malloc(sizeof(double) * FIT_MAX);
        for (int i = 0; xs && yss && i < FIT_MAX; i++) {
            int j = (int)((long)i * n / FIT_MAX);
            memcpy(xs + i * d, x + (size_t)j * d, sizeof(double) * d);
            yss[i] = ys[j];
        }
        sub = xs && yss ? alloc(FIT_MAX, d, xs) : NULL;
        if (!sub)
            goto fail;
        fit(sub, yss, g->ell, &ratio);
    } else
        fit(g, ys, g->ell, &ratio);
    /* the signal variance on all n (closed form), the factor kept */
    if (score(g, g->ell, ratio, ys, &s2hat) == -INFINITY)
        goto fail;
    g->s2 = s2hat;
    g->noise = ratio * s2hat;
    scale(g);
    gp_destroy(&sub);
    free(xs), free(yss), free(ys);
    return g;
fail:
    gp_destroy(&sub);
    free(xs), free(yss), free(ys);
    gp_destroy(&g);
    return NULL;
}

void gp_destroy(tune_gp **self_p)
{
    if (!self_p || !*self_p)
        return;
    tune_gp *g = *self_p;
    free(g->ell);
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
        g->k[i] = g->s2 * matern_q(scaled_q(x, g->x + i * g->d, g->ell, g->d));
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

int gp_predict_many(const tune_gp *g, int c, const double *x, double *mean, double *var)
{
    int n = g->n, d = g->d;
    double one = 1, *kx = malloc(sizeof(double) * n * c);
    if (!kx)
        return -1;
    for (int j = 0; j < c; j++) { /* column j: candidate j's cross covariances */
        double mu = 0;
        for (int i = 0; i < n; i++) {
            double kv = g->s2 * matern_q(scaled_q(x + (size_t)j * d, g->x + i * d, g->ell, d));
            kx[(size_t)j * n + i] = kv;
            mu += kv * g->alpha[i];
        }
        mean[j] = g->ymean + g->ystd * mu;
    }
    dtrsm_("L", "L", "N", "N", &n, &c, &one, g->L, &n, kx, &n); /* L^-1 K* */
    for (int j = 0; j < c; j++) {
        double v = g->s2;
        for (int i = 0; i < n; i++)
            v -= kx[(size_t)j * n + i] * kx[(size_t)j * n + i];
        if (v < 1e-12 * g->s2)
            v = 1e-12 * g->s2;
        var[j] = v * g->ystd * g->ystd;
    }
    free(kx);
    return 0;
}

double gp_ell(const tune_gp *g)
{
    double s = 0;
    for (int k = 0; k < g->d; k++)
        s += log(g->ell[k]);
    return exp(s / g->d);
}

double gp_ell_dim(const tune_gp *g, int k)
{
    return g->ell[k];
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
