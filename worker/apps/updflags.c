/* updflags: --updater and its hyper-parameter flags (updflags.h). */
#include "updflags.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "apps.h"
#include "update/upd_plugin.h"
#include "update/updater.h"

/* The flag's value, or def when the flag was left at its table default. */
static double flag_or(cfg_entry *cfg, const char *name, double def)
{
    cfg_entry *e = cfg_find(cfg, name);
    return strcmp(e->from, "default") ? e->d : def;
}

static int is(const char *upd, const char *name) { return !strcmp(upd, name); }

/* What --updater u takes (updater.h's rows; a plug-in takes none of them). */
static unsigned takes(const char *u)
{
    int k = upd_plugin_is_spec(u) ? (int)UPD_PLUGIN : upd_parse(u);
    return k < 0 ? 0 : upd_ops_of((upd_kind)k)->rules.takes;
}

int updflags_check(cfg_entry *cfg)
{
    const char *u = cfg_str(cfg, "updater");
    int adam = is(u, "adam") || is(u, "adamw"), ftrl = is(u, "ftrl");
    /* every row of updater.h's table trains but sum (exact sums, for the checks) */
    if (upd_parse(u) <= (int)UPD_SUM && !upd_plugin_is_spec(u)) {
        char names[128] = "";
        for (int k = UPD_SUM + 1; k < UPD_PLUGIN; k++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                     k > UPD_SUM + 1 ? ", " : "", upd_name((upd_kind)k));
        fprintf(stderr, "pskv-worker: --updater must be %s or plugin:PATH[:ARGS] (got '%s')\n",
                names, u);
        return -1;
    }
    if (strcmp(cfg_find(cfg, "l1")->from, "default") && !(takes(u) & UPD_TAKES_L1)) {
        fprintf(stderr, "pskv-worker: --l1 applies to --updater sgd and ftrl only (got %s)\n", u);
        return -1;
    }
    if (strcmp(cfg_find(cfg, "weight-decay")->from, "default") && !(takes(u) & UPD_TAKES_DECAY)) {
        fprintf(stderr, "pskv-worker: --weight-decay applies to --updater adamw only (adam and "
                "sgd take --l2)\n");
        return -1;
    }
    if (adam && strcmp(cfg_str(cfg, "lr-schedule"), "const")) {
        fprintf(stderr, "pskv-worker: --lr-schedule scales the pushed gradients, which adam "
                "does not see (its step is scale-free): use const with --updater %s\n", u);
        return -1;
    }
    if (adam && cfg_double(cfg, "lr-warmup") > 0) {
        fprintf(stderr, "pskv-worker: --lr-warmup scales the pushed gradients, which adam does "
                "not see (its step is scale-free): leave it 0 with --updater %s\n", u);
        return -1;
    }
    if (ftrl && flag_or(cfg, "lr", 0.1) <= 0) {
        fprintf(stderr, "pskv-worker: --lr (ftrl's alpha) must be > 0\n");
        return -1;
    }
    return 0;
}

void updflags_apply(cfg_entry *cfg, pskv_table_opts *o)
{
    const char *u = cfg_str(cfg, "updater");
    int adam = is(u, "adam") || is(u, "adamw"), ftrl = is(u, "ftrl");
    o->updater = u;
    /* sgd, adagrad, plug-ins: the effective --lr (the app's default when unset) */
    o->lr = (float)(adam || ftrl ? flag_or(cfg, "lr", adam ? 0.001 : 0.1) : cfg_double(cfg, "lr"));
    o->momentum = takes(u) & UPD_TAKES_MOMENTUM ? (float)cfg_double(cfg, "momentum") : 0.0f;
    o->l2 = (float)cfg_double(cfg, "l2");
    /* ftrl's beta of 1 (McMahan et al. 2013) is for one example's gradient; the apps
     * push the mean over --batch examples, so beta and lambda1, which meet gradient
     * sums, are divided by the batch. lambda1 is 1/16 per example, not the reference
     * code's 1: pskv-tune's studies on gen-sparse data (docs/benchmarks.md,
     * 2026-11-29) found AUC 0.7946 at 1 and 0.8094-0.8095 from 1/130 to 1/4 */
    double per = 1.0 / (double)cfg_int(cfg, "batch");
    o->l1 = takes(u) & UPD_TAKES_L1 ? (float)flag_or(cfg, "l1", ftrl ? per / 16 : 0) : 0.0f;
    if (adam) {
        o->beta1 = (float)cfg_double(cfg, "beta1");
        o->beta2 = (float)cfg_double(cfg, "beta2");
        o->eps = (float)cfg_double(cfg, "eps");
    }
    o->weight_decay = takes(u) & UPD_TAKES_DECAY ? (float)cfg_double(cfg, "weight-decay") : 0.0f;
    o->beta = (float)flag_or(cfg, "ftrl-beta", per);
}
