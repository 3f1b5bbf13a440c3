/* train_ar: training by all-reduce (contract in train_ar.h). */
#include "train_ar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "updater.h"

#define COPY_TMO_MS 120000 /* the assign of a copy: as long as a step may take */

struct train_ar {
    upd_opts o;
    float *state;    /* the optimizer's planes, packed (stride P), or NULL */
    size_t P;
    long copy_every; /* --copy-every */
    long steps;
};

int train_ar_new(cfg_entry *cfg, const pskv_table_opts *o, size_t P, train_ar **out)
{
    *out = NULL;
    if (strcmp(cfg_str(cfg, "sync"), "allreduce"))
        return 0;
    int kind = upd_parse(o->updater);
    if (kind < 0 || kind == UPD_PLUGIN) {
        fprintf(stderr, "train: --sync allreduce needs a built-in --updater (got %s)\n",
                o->updater);
        return 1;
    }
    if (strcmp(o->consistency, "async")) {
        fprintf(stderr, "train: --sync allreduce keeps the servers' copy with async pushes: "
                "--consistency %s does not apply\n", o->consistency);
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
        fprintf(stderr, "train: --sync allreduce: %s\n", why);
        free(a);
        return 1;
    }
    a->P = P;
    a->copy_every = (long)cfg_int(cfg, "copy-every");
    int planes = upd_state_per_value(&a->o);
    if (planes > 0 && !(a->state = calloc((size_t)planes * P, sizeof(float)))) {
        free(a);
        goto oom;
    }
    *out = a;
    return 0;
oom:
    fprintf(stderr, "train: out of memory\n");
    return 1;
}

int train_ar_copy(train_ar *a, pskv_worker *w, int table, const float *weights)
{
    if (pskv_rank(w) != 0)
        return 0;
    int64_t ta = pskv_assign(w, table, NULL, a->P, weights);
    return ta < 0 ? (int)ta : pskv_wait(w, ta, COPY_TMO_MS);
}

int train_ar_step(train_ar *a, pskv_worker *w, int table, float *grad, float *weights)
{
    int rc = pskv_allreduce(w, table, grad, a->P, PSKV_OP_MEAN);
    if (rc < 0)
        return rc;
    upd_apply(&a->o, weights, a->state, grad, a->P);
    if (++a->steps % a->copy_every == 0)
        return train_ar_copy(a, w, table, weights);
    return 0;
}

void train_ar_destroy(train_ar **a_p)
{
    if (!a_p || !*a_p)
        return;
    free((*a_p)->state);
    free(*a_p);
    *a_p = NULL;
}
