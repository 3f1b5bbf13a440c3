/* status, export and plot of a study (tune_out.h). */
#define _GNU_SOURCE
#include "tune_out.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "study.h"

typedef struct shown {
    tune_study *st;
    study_trial *t;
    int n;
    char metric[64];
    double sign;
} shown;

static int open_shown(const char *path, shown *s)
{
    char err[512];
    memset(s, 0, sizeof *s);
    if (study_open(path, 0, &s->st, err, sizeof err) < 0 || study_trials(s->st, &s->t, &s->n) < 0) {
        fprintf(stderr, "pskv-tune: %s\n", s->st ? "cannot read the trials" : err);
        study_close(&s->st);
        return -1;
    }
    if (study_get(s->st, "metric", s->metric, sizeof s->metric) < 0)
        snprintf(s->metric, sizeof s->metric, "val_accuracy:max");
    char *colon = strchr(s->metric, ':');
    s->sign = colon && !strcmp(colon, ":min") ? -1 : 1;
    if (colon)
        *colon = '\0';
    return 0;
}

static void close_shown(shown *s)
{
    free(s->t);
    study_close(&s->st);
}

/* The trial's flags on one line. */
static const char *flat(const char *params, char *buf, size_t len)
{
    snprintf(buf, len, "%s", params);
    for (char *p = buf; *p; p++)
        if (*p == '\n')
            *p = ' ';
    return buf;
}

int tune_status(const char *path, void *stream)
{
    FILE *f = stream;
    shown s;
    if (open_shown(path, &s) < 0)
        return 1;
    int count[TRIAL_NSTATES] = {0}, best = -1;
    long epochs = 0;
    char buf[1024];
    fprintf(f, "%-5s %-9s %-7s %-6s %-12s %s\n", "trial", "state", "attempt", "epochs",
            s.metric, "params (reason)");
    for (int i = 0; i < s.n; i++) {
        study_trial *t = &s.t[i];
        count[t->state]++;
        epochs += t->epochs;
        if (!isnan(t->best) && (best < 0 || s.sign * t->best > s.sign * s.t[best].best))
            best = i;
        fprintf(f, "%-5ld %-9s %-7d %-6d %-12.6g %s%s%s%s\n", t->id, study_state_name(t->state),
                t->attempt, t->epochs, t->best, flat(t->params, buf, sizeof buf),
                *t->reason ? " (" : "", t->reason, *t->reason ? ")" : "");
    }
    fprintf(f, "%d trials:", s.n);
    for (int k = 0; k < TRIAL_NSTATES; k++)
        if (count[k])
            fprintf(f, " %d %s", count[k], study_state_name((trial_state)k));
    fprintf(f, "; %ld epochs spent\n", epochs);
    if (best >= 0)
        fprintf(f, "best: trial %ld %s %.6g with %s\n", s.t[best].id, s.metric, s.t[best].best,
                flat(s.t[best].params, buf, sizeof buf));
    close_shown(&s);
    return 0;
}

int tune_export_csv(const char *path, void *stream)
{
    FILE *f = stream;
    shown s;
    if (open_shown(path, &s) < 0)
        return 1;
    /* the columns: the flags of the first trial, in its order */
    char names[16][64];
    int nn = 0;
    if (s.n > 0) {
        char buf[1024], *save = NULL;
        snprintf(buf, sizeof buf, "%s", s.t[0].params);
        int k = 0;
        for (char *w = strtok_r(buf, "\n", &save); w && nn < 16; w = strtok_r(NULL, "\n", &save))
            if (k++ % 2 == 0)
                snprintf(names[nn++], sizeof names[0], "%s", w + 2);
    }
    fprintf(f, "id,state");
    for (int k = 0; k < nn; k++)
        fprintf(f, ",%s", names[k]);
    fprintf(f, ",best_%s,epochs,attempts,reason\n", s.metric);
    for (int i = 0; i < s.n; i++) {
        study_trial *t = &s.t[i];
        char buf[1024], *save = NULL;
        fprintf(f, "%ld,%s", t->id, study_state_name(t->state));
        snprintf(buf, sizeof buf, "%s", t->params);
        int k = 0;
        for (char *w = strtok_r(buf, "\n", &save); w; w = strtok_r(NULL, "\n", &save))
            if (k++ % 2 == 1)
                fprintf(f, ",%s", w);
        fprintf(f, ",");
        if (!isnan(t->best))
            fprintf(f, "%.6g", t->best);
        fprintf(f, ",%d,%d,\"", t->epochs, t->attempt);
        for (const char *p = t->reason; *p; p++)
            fprintf(f, *p == '"' ? "\"\"" : "%c", *p);
        fprintf(f, "\"\n");
    }
    close_shown(&s);
    return 0;
}

/* The colour of a trial's fate. */
static const char *colour(trial_state st)
{
    return st == TRIAL_COMPLETE  ? "#1a9850"
           : st == TRIAL_STOPPED ? "#fdae61"
           : st == TRIAL_FAILED  ? "#d73027"
           : st == TRIAL_PAUSED  ? "#abd9e9"
                                 : "#4575b4";
}

int tune_plot(const char *path, const char *out)
{
    shown s;
    if (open_shown(path, &s) < 0)
        return 1;
    char png[4096], data[4200], script[4200];
    snprintf(png, sizeof png, "%s", *out ? out : "");
    if (!*out)
        snprintf(png, sizeof png, "%s.png", path);
    snprintf(data, sizeof data, "%s.plot.dat", png);
    snprintf(script, sizeof script, "%s.gp", png);
    FILE *d = fopen(data, "w"), *g = fopen(script, "w");
    if (!d || !g) {
        fprintf(stderr, "pskv-tune plot: cannot write %s\n", d ? script : data);
        if (d)
            fclose(d);
        if (g)
            fclose(g);
        close_shown(&s);
        return 1;
    }
    /* block i: trial i's curve (epoch, value); then the best-so-far against the
     * epochs spent and the wall time, in the order the metrics arrived */
    double v[1000];
    for (int i = 0; i < s.n; i++) {
        int top = study_metrics(s.st, s.t[i].id, v, 1000);
        for (int e = 0; e < top; e++)
            if (!isnan(v[e]))
                fprintf(d, "%d %.6g\n", e + 1, v[e]);
        fprintf(d, "\n\n");
    }
    double best = NAN, t0 = s.n ? s.t[0].started : 0;
    long spent = 0;
    for (int i = 0; i < s.n; i++) {
        spent += s.t[i].epochs;
        if (!isnan(s.t[i].best) && (isnan(best) || s.sign * s.t[i].best > s.sign * best))
            best = s.t[i].best;
        if (!isnan(best))
            fprintf(d, "%ld %.6g %.3f\n", spent, best, s.t[i].ended > 0 ? s.t[i].ended - t0 : 0);
    }
    /* then the parallel coordinates drawn as polylines: per trial, its unit-cube
     * coordinates on axes 1..dims and its best, scaled to [0,1] over the trials,
     * on axis dims+1, with its fate's colour (a blank line between trials) */
    fprintf(d, "\n\n");
    int dims = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < s.n; i++)
        if (!isnan(s.t[i].best)) {
            lo = fmin(lo, s.t[i].best);
            hi = fmax(hi, s.t[i].best);
        }
    for (int i = 0; i < s.n; i++) {
        if (isnan(s.t[i].best))
            continue;
        char copy[512], *save = NULL;
        int rgb = (int)strtol(colour(s.t[i].state) + 1, NULL, 16), k = 0;
        snprintf(copy, sizeof copy, "%s", s.t[i].u);
        for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save), k++)
            fprintf(d, "%d %s %d\n", k + 1, w, rgb);
        dims = k;
        fprintf(d, "%d %.6g %d\n\n", k + 1, hi > lo ? (s.t[i].best - lo) / (hi - lo) : 0.5, rgb);
    }
    fclose(d);
    fprintf(g, "set terminal pngcairo size 2000,500 noenhanced\nset output '%s'\n"
               "set multiplot layout 1,4\n"
               "set title 'validation curves (green complete, orange stopped, red failed)'\n"
               "set xlabel 'epoch'\nset ylabel '%s'\nunset key\nplot ",
            png, s.metric);
    for (int i = 0; i < s.n; i++)
        fprintf(g, "%s'%s' index %d with linespoints lc rgb '%s'", i ? ", " : "", data, i,
                colour(s.t[i].state));
    if (s.n == 0)
        fprintf(g, "0");
    fprintf(g, "\nset title 'best so far'\nset xlabel 'epochs spent'\n"
               "plot '%s' index %d using 1:2 with steps lw 2\n"
               "set xlabel 'wall time (s)'\nplot '%s' index %d using 3:2 with steps lw 2\n",
            data, s.n, data, s.n);
    if (dims > 0) { /* parallel coordinates: the unit-cube axes, then the metric */
        fprintf(g, "set title 'parameters (unit scale) and best (min to max)'\nunset xlabel\nunset ylabel\n"
                   "unset ytics\nset xtics (");
        char names[1024], *save = NULL, *w;
        snprintf(names, sizeof names, "%s", s.t[0].params);
        w = strtok_r(names, "\n", &save);
        for (int k = 0; k <= dims; k++) {
            fprintf(g, "%s'%s' %d", k ? ", " : "", k < dims && w ? w : s.metric, k + 1);
            if (w && strtok_r(NULL, "\n", &save)) /* the value: skipped */
                w = strtok_r(NULL, "\n", &save);
        }
        fprintf(g, ")\nset xrange [1:%d]\nset yrange [0:1]\n"
                   "plot '%s' index %d using 1:2:3 with linespoints lw 2 lc rgb variable\n",
                dims + 1, data, s.n + 1);
    }
    fprintf(g, "unset multiplot\n");
    fclose(g);
    close_shown(&s);
    char cmd[8300];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>&1", script);
    if (strchr(script, '\'') || system(cmd) != 0) {
        fprintf(stderr, "pskv-tune plot: gnuplot failed (is it installed? scripts/install-deps.sh "
                "gnuplot-nox) on %s\n", script);
        return 1;
    }
    printf("wrote %s\n", png);
    return 0;
}
