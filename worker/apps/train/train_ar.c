/* train_ar: training by all-reduce (contract in train_ar.h). */
#include "train_ar.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "lscale.h"
#include "report.h"
#include "update/updater.h"

#define COPY_TMO_MS 120000 /* the assign of a copy: as long as a step may take */
#define STEP_SPLIT 1048576L /* the copy's step as two floats, exact: lo + hi * 2^20 */

struct train_ar {
    upd_opts o;
    float *state;    /* the optimizer's planes, packed (stride P), or NULL */
    size_t P;
    long copy_every; /* --copy-every */
    long steps;
    lscale ls;       /* --loss-scale: the gradient's factor before the all-reduce */
    long plant;      /* --plant-overflow: rank 0 plants FLT_MAX at this step, 0 = never */
    int digests;     /* --print-digests: a line per step with the weights' digest */
    int zero;        /* --zero 1: update only [first, first+count), state for it only */
    int local;       /* --sync local: no all-reduce, each worker applies its own gradient */
    size_t first, count;
    int tcopy;       /* the small table holding the step of the servers' copy */
    int rejoin_ms;   /* --rejoin-timeout */
    double scale0;   /* the loss scale a job starts with (a re-formed ring starts again) */
};

int train_ar_new(cfg_entry *cfg, pskv_worker *w, const pskv_table_opts *o, size_t P,
                 train_ar **out)
{
    *out = NULL;
    const char *sync = cfg_str(cfg, "sync");
    if (strcmp(sync, "allreduce") && strcmp(sync, "local"))
        return 0;
    int kind = upd_parse(o->updater);
    if (kind < 0 || kind == UPD_PLUGIN) {
        fprintf(stderr, "train: --sync %s needs a built-in --updater (got %s)\n", sync,
                o->updater);
        return 1;
    }
    if (strcmp(o->consistency, "async")) {
        fprintf(stderr, "train: --sync %s keeps the servers' copy with async pushes: "
                "--consistency %s does not apply\n", sync, o->consistency);
        return 1;
    }
    train_ar *a = calloc(1, sizeof *a);
    if (!a)
        goto oom;
    a->o = (upd_opts){.kind = (upd_kind)kind, .lr = o->lr, .momentum = o->momentum,
                      .l2 = o->l2, .eps = o->eps, .l1 = o->l1, .beta1 = o->beta1,
                      .beta2 = o->beta2, .weight_decay = o->weight_decay, .beta = o->beta};
    char why[256];
    if (upd_check(&a->o, why, sizeof why) < 0) {
        fprintf(stderr, "train: --sync %s: %s\n", sync, why);
        free(a);
        return 1;
    }
    a->P = P;
    a->copy_every = (long)cfg_int(cfg, "copy-every");
    lscale_parse(&a->ls, cfg_str(cfg, "loss-scale"), (long)cfg_int(cfg, "scale-window")); /* checked */
    a->plant = (long)cfg_int(cfg, "plant-overflow");
    a->scale0 = a->ls.scale;
    a->rejoin_ms = (int)(cfg_double(cfg, "rejoin-timeout") * 1000);
    a->digests = (int)cfg_int(cfg, "print-digests");
    a->zero = (int)cfg_int(cfg, "zero");
    a->local = !strcmp(sync, "local");
    a->count = P;
    if (a->zero) {
        pskv_allreduce_slice(w, P, &a->first, &a->count);
        printf("zero 1: rank %d updates weights [%zu, %zu) of %zu: optimizer state %zu floats\n",
               pskv_rank(w), a->first, a->first + a->count, P,
               (size_t)upd_state_per_value(&a->o) * a->count);
    }
    int planes = upd_state_per_value(&a->o);
    if (planes > 0 && !(a->state = calloc((size_t)planes * (a->count ? a->count : 1),
                                          sizeof(float)))) {
        free(a);
        goto oom;
    }
    pskv_table_opts to;
    pskv_table_opts_init(&to);
    to.kind = PSKV_DENSE;
    to.size = 2;
    to.updater = "sum";
    char name[96];
    snprintf(name, sizeof name, "%s.copystep", cfg_str(cfg, "app"));
    if ((a->tcopy = pskv_table_open(w, name, &to)) < 0) {
        fprintf(stderr, "train: open the table %s: %s\n", name, pskv_last_error(w));
        train_ar_destroy(&a);
        return 1;
    }
    *out = a;
    return 0;
oom:
    fprintf(stderr, "train: out of memory\n");
    return 1;
}

/* Rank 0: the step the servers' copy of the weights is at. */
static int copy_step_write(train_ar *a, pskv_worker *w)
{
    float v[2] = {(float)(a->steps % STEP_SPLIT), (float)(a->steps / STEP_SPLIT)};
    int64_t t = pskv_assign(w, a->tcopy, NULL, 2, v);
    return t < 0 ? (int)t : pskv_wait(w, t, COPY_TMO_MS);
}

int train_ar_copy(train_ar *a, pskv_worker *w, int table, const float *weights)
{
    if (pskv_rank(w) != 0)
        return 0;
    /* the weights first: a rank 0 dying between the two leaves a step that is older
     * than the weights (steps done again), never newer (steps skipped) */
    int64_t ta = pskv_assign(w, table, NULL, a->P, weights);
    int rc = ta < 0 ? (int)ta : pskv_wait(w, ta, COPY_TMO_MS);
    return rc < 0 ? rc : copy_step_write(a, w);
}

int train_ar_resume(train_ar *a, pskv_worker *w, int table, float *weights, int64_t *step)
{
    float v[2];
    int64_t tv = pskv_pull(w, a->tcopy, NULL, 2, v);
    int rc = tv < 0 ? (int)tv : pskv_wait(w, tv, COPY_TMO_MS);
    int64_t tw = rc < 0 ? 0 : pskv_pull(w, table, NULL, a->P, weights);
    if (rc == 0)
        rc = tw < 0 ? (int)tw : pskv_wait(w, tw, COPY_TMO_MS);
    if (rc < 0)
        return rc;
    if (!(v[0] >= 0 && v[0] < (float)STEP_SPLIT && v[1] >= 0 && v[1] < 16777216.0f)) {
        fprintf(stderr, "train: the servers' copy of the weights holds no step (%g, %g)\n",
                v[0], v[1]);
        return -PSKV_EPROTO;
    }
    a->steps = (long)v[0] + (long)v[1] * STEP_SPLIT;
    *step = a->steps;
    /* momentum and the like are not in the copy: every rank starts them afresh */
    memset(a->state, 0, a->state ? (size_t)upd_state_per_value(&a->o) * a->count * sizeof(float)
                                 : 0);
    a->ls.scale = a->scale0;
    a->ls.clean = 0;
    printf("allreduce: rank %d goes on at step %lld from the servers' copy of the weights "
           "(digest %016llx); optimizer state reset\n", pskv_rank(w), (long long)*step,
           (unsigned long long)app_digest(weights, a->P));
    fflush(stdout);
    return 0;
}

int train_ar_begin(train_ar *a, pskv_worker *w, int table, float *weights, int64_t *step)
{
    if (pskv_took_over(w) && !a->local)
        return train_ar_resume(a, w, table, weights, step);
    a->steps = (long)*step;
    return pskv_rank(w) == 0 ? copy_step_write(a, w) : 0;
}

int train_ar_recover(train_ar *a, pskv_worker *w, int table, float *weights, int64_t *step)
{
    printf("allreduce: %s; waiting up to %d ms (--rejoin-timeout) for a worker to take the "
           "rank over\n", pskv_last_error(w), a->rejoin_ms);
    fflush(stdout);
    /* its barrier (the new worker's first) puts every rank past the copy rank 0 made last */
    int rc = pskv_allreduce_rejoin(w, a->rejoin_ms);
    return rc < 0 ? rc : train_ar_resume(a, w, table, weights, step);
}

static void scale_by(float *v, size_t n, float f)
{
    for (size_t i = 0; i < n; i++)
        v[i] *= f;
}

/* With a loss scale: unscales the mean gradient, or returns 0 when it holds an
 * inf or NaN (every rank has the same bits, so every rank decides alike): the
 * step is skipped and a dynamic scale halved. A dynamic scale doubles after
 * --scale-window clean steps. Without one: 1. */
static int unscale(train_ar *a, float *grad, int overflow, size_t n)
{
    if (!(a->ls.scale > 0))
        return 1;
    if (overflow || !upd_all_finite(grad, n)) {
        lscale_skip(&a->ls);
        return 0;
    }
    scale_by(grad, n, (float)(1.0 / a->ls.scale));
    lscale_clean(&a->ls);
    return 1;
}

/* --zero 1: reduce-scatters grad; the slice [first, first+count) is then the
 * mean. With a loss scale the ranks agree on an overflow in any slice by a
 * one-float all-reduce: returns 1 then (the step is skipped), else 0. */
static int zero_step(train_ar *a, pskv_worker *w, int table, float *grad)
{
    int rc = pskv_reduce_scatter(w, table, grad, a->P, PSKV_OP_MEAN);
    if (rc < 0 || !(a->ls.scale > 0))
        return rc;
    float bad = !upd_all_finite(grad + a->first, a->count);
    if ((rc = pskv_allreduce(w, -1, &bad, 1, PSKV_OP_SUM)) < 0)
        return rc;
    if (bad > 0) {
        unscale(a, grad, 1, 0);
        return 1;
    }
    return 0;
}

int train_ar_step(train_ar *a, pskv_worker *w, int table, float *grad, float *weights)
{
    long step = ++a->steps;
    if (a->plant == step && pskv_rank(w) == 0)
        grad[0] = FLT_MAX; /* a planted overflow (tests) */
    if (a->ls.scale > 0)
        scale_by(grad, a->P, (float)a->ls.scale);
    int rc = a->local  ? 0
             : a->zero ? zero_step(a, w, table, grad)
                       : pskv_allreduce(w, table, grad, a->P, PSKV_OP_MEAN);
    if (rc < 0)
        return rc;
    /* [first, first+count): the whole gradient, or with --zero 1 this rank's slice */
    int apply = rc == 0 && unscale(a, grad + a->first, 0, a->count);
    if (a->zero && apply) /* the slice's update, then every slice to every rank */
        upd_apply(&a->o, weights + a->first, a->state, grad + a->first, a->count);
    if (a->zero && apply && (rc = pskv_allgather(w, table, weights, a->P)) < 0)
        return rc;
    if (!a->zero && apply)
        upd_apply(&a->o, weights, a->state, grad, a->P);
    if (a->digests)
        printf("allreduce step %ld %s scale %g skipped %ld weights %016llx\n", step,
               apply ? "applied" : "skipped", a->ls.scale, a->ls.skipped,
               (unsigned long long)app_digest(weights, a->P));
    if (step % a->copy_every == 0)
        return train_ar_copy(a, w, table, weights);
    return 0;
}

void train_ar_report(const train_ar *a, report_line *l)
{
    lscale_report(&a->ls, l);
    if (a->zero)
        l->opt_state = (int64_t)((size_t)upd_state_per_value(&a->o) * a->count);
}

void train_ar_destroy(train_ar **a_p)
{
    if (!a_p || !*a_p)
        return;
    free((*a_p)->state);
    free(*a_p);
    *a_p = NULL;
}
