#define _GNU_SOURCE
#include "report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "timeutil.h"

struct report {
    FILE *f;
    int tty;
    int64_t last_progress_ms;
    int progress_shown;
};

report *report_new(const char *metrics_path, int append, char *why, unsigned long whylen)
{
    report *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(why, whylen, "out of memory");
        return NULL;
    }
    r->tty = isatty(STDOUT_FILENO);
    if (metrics_path && *metrics_path) {
        r->f = fopen(metrics_path, append ? "a" : "w");
        if (!r->f) {
            snprintf(why, whylen, "cannot write metrics file %s: %s", metrics_path,
                     strerror(errno));
            free(r);
            return NULL;
        }
    }
    return r;
}

void report_destroy(report **r_p)
{
    if (!r_p || !*r_p)
        return;
    report *r = *r_p;
    if (r->progress_shown)
        putchar('\n');
    if (r->f)
        fclose(r->f);
    free(r);
    *r_p = NULL;
}

void report_progress(report *r, double epoch, double pct, double samples_per_s, double loss)
{
    if (!r->tty)
        return;
    int64_t now = tu_now_ms();
    if (now - r->last_progress_ms < 200)
        return;
    r->last_progress_ms = now;
    printf("\repoch %.0f  %5.1f%%  %9.0f samples/s  loss %.4f   ", epoch, pct, samples_per_s,
           loss);
    fflush(stdout);
    r->progress_shown = 1;
}

void report_eval(report *r, const report_line *l)
{
    if (r->progress_shown) {
        putchar('\n');
        r->progress_shown = 0;
    }
    if (isnan(l->auc))
        printf("epoch %.2f  step %lld  train_loss %.4f  test_loss %.4f  accuracy %.4f  "
               "samples/s %.0f  time %.1f s",
               l->epoch, (long long)l->step, l->train_loss, l->test_loss, l->accuracy,
               l->samples_per_s, l->time);
    else
        printf("epoch %.2f  step %lld  train_loss %.4f  logloss %.4f  auc %.4f  accuracy %.4f  "
               "samples/s %.0f  time %.1f s",
               l->epoch, (long long)l->step, l->train_loss, l->test_loss, l->auc, l->accuracy,
               l->samples_per_s, l->time);
    if (l->clipped_steps >= 0)
        printf("  clipped_steps %lld", (long long)l->clipped_steps);
    putchar('\n');
    fflush(stdout);
    if (!r->f)
        return;
    fprintf(r->f,
            "{\"epoch\":%.4f,\"step\":%lld,\"time\":%.3f,\"train_loss\":%.6f,\"test_loss\":%.6f,"
            "\"accuracy\":%.6f,\"samples_per_s\":%.1f",
            l->epoch, (long long)l->step, l->time, l->train_loss, l->test_loss, l->accuracy,
            l->samples_per_s);
    if (!isnan(l->auc))
        fprintf(r->f, ",\"auc\":%.6f", l->auc);
    if (l->clipped_steps >= 0)
        fprintf(r->f, ",\"clipped_steps\":%lld", (long long)l->clipped_steps);
    if (l->bytes_per_step > 0)
        fprintf(r->f, ",\"bytes_per_step\":%.0f", l->bytes_per_step);
    if (l->train_time > 0)
        fprintf(r->f, ",\"train_time\":%.3f", l->train_time);
    if (l->samples > 0)
        fprintf(r->f, ",\"samples\":%.0f", l->samples);
    if (l->loss_scale > 0)
        fprintf(r->f, ",\"loss_scale\":%g,\"skipped_steps\":%lld", l->loss_scale,
                (long long)l->skipped_steps);
    if (l->opt_state > 0)
        fprintf(r->f, ",\"opt_state_floats\":%lld", (long long)l->opt_state);
    fputs("}\n", r->f);
    fflush(r->f);
}

void report_resumed(report *r, int64_t epoch, int64_t step, int64_t total_steps)
{
    printf("resumed at epoch %lld step %lld of %lld\n", (long long)epoch, (long long)step,
           (long long)total_steps);
    fflush(stdout);
    if (!r || !r->f)
        return;
    fprintf(r->f, "{\"resumed_at_epoch\":%lld,\"resumed_at_step\":%lld}\n", (long long)epoch,
            (long long)step);
    fflush(r->f);
}

void report_json(report *r, const char *json)
{
    if (!r || !r->f)
        return;
    fprintf(r->f, "%s\n", json);
    fflush(r->f);
}
