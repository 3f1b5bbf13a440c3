/* The app table (apptab.h): pskv-worker's apps, one row each, in the order the
 * usage line and --help list them. */
#include "apptab.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "apps.h"

/* The defaults of softmax and mlp are the settings docs/benchmarks.md shows
 * reaching 0.84 (softmax) and 0.87 (mlp) test accuracy in 5 epochs with sgd;
 * adam and ftrl keep their own (updflags.h). The flags' help texts name them. */
static const app_row rows[] = {
    {"check", app_check, NULL, APP_PS_WIRE | APP_PUSH_BUFFER, {{0}}},
    {"resume-check", app_resume_check, NULL, 0, {{0}}},
    {"incr-check", app_incr_check, NULL, APP_EVICT, {{0}}},
    {"bench", app_bench, app_bench_flags, APP_PS_WIRE | APP_OP, {{0}}},
    {"sparse-bench", app_sparse_bench, NULL, 0, {{0}}},
    {"softmax", app_train, NULL,
     APP_DENSE | APP_PS_WIRE | APP_PREFETCH | APP_TRAFFIC | APP_EVALUATED | APP_BALANCE,
     {{"lr", "0.02", 1}, {"lr-schedule", "linear", 1}}},
    {"mlp", app_train, NULL,
     APP_DENSE | APP_PS_WIRE | APP_PREFETCH | APP_TRAFFIC | APP_EVALUATED | APP_BALANCE,
     {{"lr", "0.0075", 1}, {"lr-schedule", "linear", 1}, {"batch", "16", 0}}},
    {"sparse-lr", app_sparse_lr, app_sparse_lr_flags,
     APP_PS_WIRE | APP_PREFETCH | APP_ADMIT | APP_TRAFFIC | APP_EVALUATED | APP_AUC, {{0}}},
    {"replay", app_replay, NULL, 0, {{0}}},
    {"admit", app_admit, NULL, APP_ADMIT, {{0}}},
    {"allreduce-check", app_allreduce_check, NULL, APP_ALLREDUCE, {{0}}},
    {"filter-check", app_filter_check, NULL, 0, {{0}}},
    {"synth", app_synth, NULL, 0, {{0}}},
    {"pipeline", app_pipeline, NULL, APP_BALANCE, {{"lr", "0.01", 1}, {"lr-schedule", "const", 1}}},
};
#define NROWS (sizeof rows / sizeof rows[0])

/* The usage errors' words for the apps with a need (apptab_phrase). */
static const struct {
    unsigned need;
    const char *phrase;
} phrases[] = {
    {APP_DENSE, "mlp and softmax"},
    {APP_PS_WIRE, "check, bench, mlp, softmax and sparse-lr"},
    {APP_ALLREDUCE, "allreduce-check"},
    {APP_PREFETCH, "mlp, softmax and sparse-lr"},
    {APP_ADMIT, "sparse-lr or admit"},
    {APP_EVICT, "incr-check"},
    {APP_PUSH_BUFFER, "check"},
    {APP_BALANCE, "mlp, softmax and pipeline"},
};

const app_row *apptab_find(const char *name)
{
    for (size_t i = 0; i < NROWS; i++)
        if (!strcmp(rows[i].name, name))
            return &rows[i];
    return NULL;
}

char *apptab_names(char *buf, size_t len, unsigned needs, const char *sep, const char *last)
{
    size_t n = 0, k = 0, used = 0;
    for (size_t i = 0; i < NROWS; i++)
        n += (rows[i].needs & needs) == needs;
    buf[0] = '\0';
    for (size_t i = 0; i < NROWS; i++) {
        if ((rows[i].needs & needs) != needs)
            continue;
        int w = snprintf(buf + used, len - used, "%s%s", k == 0 ? "" : k + 1 == n ? last : sep,
                         rows[i].name);
        assert(w >= 0 && (size_t)w < len - used);
        used += (size_t)w;
        k++;
    }
    return buf;
}

const char *apptab_phrase(unsigned need)
{
    for (size_t i = 0; i < sizeof phrases / sizeof phrases[0]; i++)
        if (phrases[i].need == need)
            return phrases[i].phrase;
    assert(!"a need without a phrase");
    return "";
}

void apptab_verify(void)
{
    for (size_t i = 0; i < NROWS; i++)
        for (size_t j = i + 1; j < NROWS; j++)
            assert(strcmp(rows[i].name, rows[j].name) && "two rows with one name");
    for (size_t p = 0; p < sizeof phrases / sizeof phrases[0]; p++) {
        size_t named = 0, have = 0;
        for (size_t i = 0; i < NROWS; i++) {
            have += (rows[i].needs & phrases[p].need) != 0;
            /* a name in the phrase: bounded by its start or ' ', and ',' or ' ' or its end */
            size_t nl = strlen(rows[i].name);
            for (const char *s = strstr(phrases[p].phrase, rows[i].name); s;
                 s = strstr(s + 1, rows[i].name))
                if ((s == phrases[p].phrase || s[-1] == ' ') &&
                    (s[nl] == '\0' || s[nl] == ',' || s[nl] == ' ')) {
                    assert((rows[i].needs & phrases[p].need) && "a phrase names an app without the need");
                    named++;
                    break;
                }
        }
        assert(named == have && "a phrase misses an app with the need");
    }
}

void apptab_apply_defaults(const app_row *row, cfg_entry *cfg)
{
    char err[200];
    const char *upd = cfg_str(cfg, "updater");
    int sgd = !strcmp(upd, "sgd") || !strcmp(upd, "adagrad");
    for (const app_default *d = row->defaults; d < row->defaults + APP_DEFAULTS_MAX && d->flag;
         d++)
        if ((sgd || !d->sgd) && cfg_set_default(cfg, d->flag, d->value, err, sizeof err) < 0)
            assert(!"bad value in an app row's defaults");
}
