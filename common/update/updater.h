/* Updaters: how a pushed gradient (or increment) changes the stored values.
 *   sum      w += g                        (exact integer sums for tests and counters)
 *   sgd      v = momentum*v + g + l2*w; w -= lr*v   (no state when momentum is 0);
 *            with l1 > 0 then the proximal step w = sign(w) * max(|w| - lr*l1, 0)
 *   adagrad  g' = g + l2*w; h += g'*g'; w -= lr*g'/(sqrt(h)+eps)
 *   adam     g' = g + l2*w; t += 1; m = b1*m + (1-b1)*g'; v = b2*v + (1-b2)*g'^2;
 *            w -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)
 *   adamw    adam with decoupled weight decay: w -= lr*weight_decay*w first
 *   ftrl     FTRL-proximal (McMahan et al. 2013, Algorithm 1), per coordinate, lr = alpha:
 *            s = (sqrt(n + g^2) - sqrt(n))/alpha; z += g - s*w; n += g^2;
 *            w = 0 if |z| <= l1, else -(z - sign(z)*l1) / ((beta + sqrt(n))/alpha + l2)
 *   plugin   a shared object's apply (pskv_updater.h), loaded by upd_plugin.h
 * State is per value, in planes: plane k of a run of n values at state + k*stride.
 * adam keeps m, v and the step count t (3 planes): t counts the pushes that reached
 * the row, which is what lazy sparse Adam does (a row's bias correction follows its
 * own updates, not a table-wide step a rarely seen row never took). Every push
 * writes a whole row, so t is the same for each value of a row; as a float it
 * counts exactly to 2^24, where the bias correction is 1 long since. ftrl keeps z
 * and n (2 planes); the value w is kept equal to the closed form of z and n.
 * Dense runs of sum/sgd go through OpenBLAS (saxpy/sscal); the others are loops.
 *
 * Each updater is one row of one ops table (upd_ops, the plug-in ABI's shape:
 * name, state planes, check, may_fail, apply), in a file of its own: upd_sum.c,
 * upd_sgd.c, upd_adagrad.c, upd_adam.c (adam and adamw), upd_ftrl.c, and
 * upd_plugin.c for plug-ins. A new updater is a file, an upd_kind and a row in
 * updater.c's table; the server (store/shard*.c) and pskv-worker's all-reduce
 * (worker/apps/train/train_ar.c) both go through the table.
 *
 * OWNS nothing: pure functions over the caller's arrays (a plug-in's context is
 * the table's, upd_plugin.h).
 * THREAD: any (no state); on the server it is the loop thread, through
 * shard_push (OpenBLAS uses --blas-threads threads of its own for a call).
 * NEVER allocates, blocks or logs while applying: hyper-parameters are checked
 * once, by upd_check when a table is opened. adam with eps = 0, ftrl on overflow
 * and plug-ins can produce NaN: upd_may_fail says so and shard.c restores the rows. */
#ifndef PSKV_UPDATER_H
#define PSKV_UPDATER_H

#include <stddef.h>

typedef enum {
    UPD_SUM = 0,
    UPD_SGD = 1,
    UPD_ADAGRAD = 2,
    UPD_ADAM = 3,
    UPD_ADAMW = 4,
    UPD_FTRL = 5,
    UPD_PLUGIN = 6,
} upd_kind;

struct upd_plugin;

typedef struct upd_opts {
    upd_kind kind;
    float lr, momentum, l2, eps;
    float l1;                       /* sgd, ftrl: L1 strength (lambda1) */
    float beta1, beta2;             /* adam, adamw */
    float weight_decay;             /* adamw */
    float beta;                     /* ftrl */
    const struct upd_plugin *plug;  /* UPD_PLUGIN: the table's loaded plug-in */
} upd_opts;

/* What a row says it takes beside lr and l2 (upd_rules.takes). */
enum {
    UPD_TAKES_MOMENTUM = 1, /* sgd */
    UPD_TAKES_L1 = 2,       /* sgd, ftrl */
    UPD_TAKES_DECAY = 4,    /* adamw's weight_decay */
    UPD_TAKES_BETAS = 8,    /* adam's beta1 and beta2 */
    UPD_TAKES_BETA = 16,    /* ftrl's beta */
};

/* How an updater's eps is bounded (upd_rules.eps): finite always, and more. */
typedef enum { UPD_EPS_ANY = 0, UPD_EPS_POSITIVE, UPD_EPS_NONNEG } upd_eps_rule;

/* The hyper-parameter rules a row's check hands to upd_check_rules. */
typedef struct upd_rules {
    unsigned takes;   /* UPD_TAKES_* */
    upd_eps_rule eps;
    int lr_positive;  /* lr > 0, not >= 0 (ftrl's alpha) */
} upd_rules;

/* One updater: a row of the ops table, in the plug-in ABI's shape (pskv_updater.h).
 * Every call takes the table's options; none allocates, blocks or logs. */
typedef struct upd_ops {
    const char *name; /* as --updater and TABLE_OPEN spell it ("plugin" for plug-ins) */
    /* optimizer state floats per value (0..3, or the plug-in's) */
    int (*state_planes)(const upd_opts *o);
    /* validates hyper-parameters: 0, or -PSKV_EINVAL with the reason in why */
    int (*check)(const upd_opts *o, char *why, size_t whylen);
    int may_fail; /* applying can make NaN or infinity from finite inputs */
    /* applies g to n values of rows `width` wide, state plane k at state + k*stride */
    void (*apply)(const upd_opts *o, float *w, float *state, size_t stride, const float *g,
                  size_t n, size_t width);
    upd_rules rules; /* what it takes and how lr and eps are bounded (upd_check_own) */
    /* w is the closed form of the state (ftrl): a table's init must be zero, and a
     * new key's row that comes out all zero is not stored (store/shard_push.c) */
    int closed_form;
    int bsp_sums; /* a BSP clock's pushes are added, not averaged (sum; consist/bsp.c) */
} upd_ops;

/* The rows, one per file (upd_sum.c ... upd_plugin.c), gathered in updater.c. */
extern const upd_ops upd_sum_ops, upd_sgd_ops, upd_adagrad_ops, upd_adam_ops, upd_adamw_ops,
    upd_ftrl_ops, upd_plugin_ops;

/* The row of `kind` (never NULL for a valid kind; asserts on a bug). */
const upd_ops *upd_ops_of(upd_kind kind);

/* The checks every updater shares, in one order, with `r` saying what this one
 * takes and how its lr and eps are bounded: a row's check calls it. Returns 0 or
 * -PSKV_EINVAL with the reason, naming the parameter, in why. */
int upd_check_rules(const upd_opts *o, const upd_rules *r, char *why, size_t whylen);

/* A row's check when its rules say all: upd_check_rules with the row's own rules. */
int upd_check_own(const upd_opts *o, char *why, size_t whylen);

/* Parses an updater name (not a plug-in spec); returns its kind or -1. */
int upd_parse(const char *name);

/* The updater's name ("sgd", ..., "plugin"). */
const char *upd_name(upd_kind kind);

/* Validates hyper-parameters; returns 0 or -PSKV_EINVAL with the reason, naming
 * the parameter, in why. */
int upd_check(const upd_opts *o, char *why, size_t whylen);

/* Optimizer state floats per value (0..3, or the plug-in's). */
int upd_state_per_value(const upd_opts *o);

/* 1 when applying can turn finite inputs into NaN or infinity that shard.c must
 * catch (adam, adamw, ftrl, plug-ins). */
int upd_may_fail(const upd_opts *o);

/* Applies gradient g to n values w with their state planes (state NULL when the
 * updater keeps none): plane k at state + k*stride. `width` is the row width
 * (n a multiple of it; plug-ins get n/width rows). */
void upd_apply_planes(const upd_opts *o, float *w, float *state, size_t stride, const float *g,
                      size_t n, size_t width);

/* upd_apply_planes with the planes packed (stride n) and one row of n values. */
void upd_apply(const upd_opts *o, float *w, float *state, const float *g, size_t n);

/* 1 when every one of the n floats is finite (no NaN or infinity). */
int upd_all_finite(const float *v, size_t n);

#endif
