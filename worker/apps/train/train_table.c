/* What the dense training apps (softmax, mlp) share with the evaluator and the
 * resume check: the data's presence, the parameter table's options and name, and
 * its weights loaded from --init-from. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "apps.h"
#include "modelfile.h"
#include "updflags.h"

int app_train_check_data(cfg_entry *cfg)
{
    const char *dir = cfg_str(cfg, "data");
    const char *files[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                           "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
    for (int i = 0; i < 4; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        if (stat(path, &st) != 0) {
            fprintf(stderr,
                    "pskv-worker: Fashion-MNIST not found: %s does not exist.\n"
                    "  Install it with: apt-get install dataset-fashion-mnist (or run "
                    "scripts/install-deps.sh),\n  or point --data DIR at a folder holding the "
                    "four idx .gz files.\n",
                    path);
            return -1;
        }
    }
    return 0;
}

void app_train_table_opts(cfg_entry *cfg, uint32_t dim, size_t P, pskv_table_opts *o)
{
    pskv_table_opts_init(o);
    o->kind = PSKV_DENSE;
    o->size = P;
    o->width = 1;
    updflags_apply(cfg, o);
    o->init = "uniform";
    o->init_scale = (float)(1.0 / sqrt((double)dim)); /* PyTorch's Linear bound */
    o->seed = (uint64_t)cfg_int(cfg, "seed");
    o->consistency = cfg_str(cfg, "consistency");
    o->filters = cfg_str(cfg, "filter");
    /* --sync allreduce or local: the table is a copy, assigned in fp32 (--wire is the
     * ring's) */
    o->wire = strcmp(cfg_str(cfg, "sync"), "ps") ? NULL : cfg_str(cfg, "wire");
    o->backup = (uint32_t)cfg_int(cfg, "backup");
    /* --balance batch or fixed under bsp: a clock's mean over the workers that
     * pushed, so that a worker taking a dead rank back is out of it until every
     * rank counts it (balance.h) */
    const char *bal = cfg_str(cfg, "balance");
    o->bsp_mean_pushed = !strcmp(cfg_str(cfg, "sync"), "ps") &&
                         (!strcmp(bal, "batch") || !strncmp(bal, "fixed:", 6));
}

/* The parameter table (one dense run of P floats, named for the model): its
 * handle, or a negated error. */
int app_train_table(pskv_worker *w, cfg_entry *cfg, uint32_t dim, int hidden, size_t P)
{
    pskv_table_opts o;
    app_train_table_opts(cfg, dim, P, &o);
    char name[96];
    snprintf(name, sizeof name, "%s-%u-%d-10", cfg_str(cfg, "app"), dim, hidden);
    return pskv_table_open(w, name, &o);
}

int app_train_init_from(pskv_worker *w, cfg_entry *cfg, int t, int rank, uint32_t dim, int hidden,
                        size_t P)
{
    const char *init_from = cfg_str(cfg, "init-from"), *app = cfg_str(cfg, "app");
    if (rank != 0 || !*init_from || pskv_took_over(w)) /* a taken-over rank 0 */
        return 0;
    char why[512];
    modelfile mf;
    int rc = modelfile_load(init_from, &mf, why, sizeof why);
    if (rc == 0 && (mf.kind != (uint32_t)(hidden > 0 ? 2 : 1) || mf.in != dim ||
                    mf.hidden != (uint32_t)hidden || mf.out != 10 || mf.n != P)) {
        snprintf(why, sizeof why,
                 "%s holds a %s %u-%u-%u model; this run trains %s %u-%d-10", init_from,
                 mf.kind == 2 ? "mlp" : mf.kind == 1 ? "softmax" : "non-dense", mf.in,
                 mf.hidden, mf.out, app, dim, hidden);
        rc = -PSKV_EINVAL;
    }
    if (rc < 0) {
        fprintf(stderr, "train: --init-from: %s\n", why);
        modelfile_free(&mf);
        return 1;
    }
    int64_t ta = pskv_assign(w, t, NULL, P, mf.vals);
    modelfile_free(&mf);
    if (ta < 0 || (rc = pskv_wait(w, ta, 120000)) < 0)
        return app_fail("train", w, "load --init-from weights", ta < 0 ? (int)ta : rc);
    printf("loaded weights from %s\n", init_from);
    return 0;
}
