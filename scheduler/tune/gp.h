/* A Gaussian process on the unit cube for Bayesian search: a Matérn-5/2 kernel
 * with a length scale per dimension (ARD), the length scales and noise chosen by
 * the marginal likelihood (a grid, then coordinate steps per dimension; the
 * signal variance in closed form), Cholesky by LAPACK's dpotrf_ (OpenBLAS), the
 * posterior mean and variance (one point, or many by one triangular solve), and
 * expected improvement for a maximised objective.
 *
 * OWNS a copy of the observations and its factor. THREAD: one caller. NEVER
 * blocks. */
#ifndef PSKV_TUNE_GP_H
#define PSKV_TUNE_GP_H

typedef struct tune_gp tune_gp;

/* A GP on n points x (n x d, row-major, copied; d <= 64) with values y (copied).
 * ell > 0 fixes every dimension's length scale, signal variance s2 and noise
 * variance noise, y used as given; ell <= 0 standardises y and picks the
 * hyper-parameters by marginal likelihood. Returns NULL on out of memory or a
 * factor that fails. Free with gp_destroy. */
tune_gp *gp_new(int n, int d, const double *x, const double *y, double ell, double s2,
                double noise);

/* Frees the GP and nulls *self_p; NULL or *NULL is fine. */
void gp_destroy(tune_gp **self_p);

/* Posterior mean and variance at x (d values), in y's units. */
void gp_predict(const tune_gp *g, const double *x, double *mean, double *var);

/* Posterior means and variances at c points x (c x d, row-major) at once (one
 * triangular solve for all): 0, or -1 on out of memory. */
int gp_predict_many(const tune_gp *g, int c, const double *x, double *mean, double *var);

/* The length scales it took (for tests and logs): their geometric mean, and
 * dimension k's. */
double gp_ell(const tune_gp *g);
double gp_ell_dim(const tune_gp *g, int k);

/* Matérn-5/2 at distance r with length scale ell and variance s2. */
double gp_matern52(double r, double ell, double s2);

/* Expected improvement over best of a maximised objective with posterior mean mu
 * and standard deviation sigma (0 at sigma 0 unless mu > best). */
double gp_ei(double mu, double sigma, double best);

#endif
