/* pipestats: a pipeline stage's own measurements (contract in pipestats.h). */
#define _POSIX_C_SOURCE 200809L
#include "pipestats.h"

#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

int pipestats_init(pipestats *s, int64_t record_step, int M)
{
    memset(s, 0, sizeof *s);
    s->record_step = record_step;
    if (record_step < 0)
        return 0;
    s->cap = 6 * M + 8; /* per micro-batch two waits, two passes, two sends */
    s->ev = calloc((size_t)s->cap, sizeof *s->ev);
    return s->ev ? 0 : -1;
}

void pipestats_fini(pipestats *s)
{
    if (!s)
        return;
    free(s->ev);
    s->ev = NULL;
    s->cap = s->nev = 0;
}

void pipestats_add(pipestats *s, ps_kind kind, int micro, int64_t t0_ns, int64_t t1_ns)
{
    s->secs[kind] += (double)(t1_ns - t0_ns) / 1e9;
    if (!s->recording || s->nev == s->cap)
        return;
    s->ev[s->nev++] = (ps_event){.kind = (uint8_t)kind, .micro = micro, .t0_us = t0_ns / 1000,
                                 .t1_us = t1_ns / 1000};
}

static int64_t clock_ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

void pipestats_run_begin(pipestats *s)
{
    s->t0[0] = clock_ns(CLOCK_MONOTONIC);
    s->t0[1] = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    s->t0[2] = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
}

void pipestats_run_end(pipestats *s)
{
    s->wall += (double)(clock_ns(CLOCK_MONOTONIC) - s->t0[0]) / 1e9;
    s->cpu_thread += (double)(clock_ns(CLOCK_THREAD_CPUTIME_ID) - s->t0[1]) / 1e9;
    s->cpu_process += (double)(clock_ns(CLOCK_PROCESS_CPUTIME_ID) - s->t0[2]) / 1e9;
}

void pipestats_hold(pipestats *s, size_t bytes)
{
    if (++s->inflight > s->peak)
        s->peak = s->inflight;
    s->held += bytes;
    if (s->held > s->peak_bytes)
        s->peak_bytes = s->held;
}

void pipestats_drop(pipestats *s, size_t bytes)
{
    s->inflight--;
    s->held -= bytes;
}

double pipestats_idle(const pipestats *s)
{
    double busy = s->secs[PS_FWD] + s->secs[PS_BWD] + s->secs[PS_SEND] + s->secs[PS_WAIT];
    return busy > 0 ? s->secs[PS_WAIT] / busy : 0;
}

void pipestats_pack(const pipestats *s, float *out)
{
    for (int i = 0; i < PS_KINDS; i++)
        out[i] = (float)s->secs[i];
    out[PS_KINDS] = (float)s->peak;
    out[PS_KINDS + 1] = (float)s->peak_bytes;
    out[PS_KINDS + 2] = (float)pipestats_idle(s);
}

double pipestats_summary(int d, int S, const float *all, char *json, size_t jlen)
{
    double sum = 0;
    char shares[1024] = "", peaks[1024] = "", bytes[1024] = "", secs[4096] = "";
    size_t a = 0, b = 0, c = 0, e = 0;
    for (int k = 0; k < S; k++) {
        const float *x = all + (size_t)k * PIPESTATS_FLOATS;
        double idle = x[PS_KINDS + 2];
        sum += idle;
        const char *sep = k ? "," : "";
        if (a < sizeof shares)
            a += (size_t)snprintf(shares + a, sizeof shares - a, "%s%.4f", sep, idle);
        if (b < sizeof peaks)
            b += (size_t)snprintf(peaks + b, sizeof peaks - b, "%s%.0f", sep, x[PS_KINDS]);
        if (c < sizeof bytes)
            c += (size_t)snprintf(bytes + c, sizeof bytes - c, "%s%.0f", sep, x[PS_KINDS + 1]);
        if (e < sizeof secs)
            e += (size_t)snprintf(secs + e, sizeof secs - e, "%s[%.3f,%.3f,%.3f,%.3f,%.3f]", sep,
                                  x[PS_FWD], x[PS_BWD], x[PS_SEND], x[PS_WAIT], x[PS_SRV]);
    }
    double bubble = S ? sum / S : 0;
    printf("pipeline %d: bubble fraction %.4f (idle share per stage %s; peak saved "
           "activations per stage %s micro-batches, %s bytes)\n", d, bubble, shares, peaks,
           bytes);
    fflush(stdout);
    snprintf(json, jlen, "{\"pipeline\":%d,\"bubble_fraction\":%.4f,\"stage_idle\":[%s],"
             "\"stage_peak_inflight\":[%s],\"stage_peak_saved_bytes\":[%s],\"stage_seconds\":[%s]}",
             d, bubble, shares, peaks, bytes, secs);
    return bubble;
}

void pipestats_print_timeline(const pipestats *s, int d, int k)
{
    static const char kinds[PS_KINDS] = {'F', 'B', 'W', 'S', 'X'};
    for (int i = 0; i < s->nev; i++)
        printf("timeline pipeline %d stage %d %c %d %lld %lld\n", d, k, kinds[s->ev[i].kind],
               s->ev[i].micro, (long long)s->ev[i].t0_us, (long long)s->ev[i].t1_us);
    fflush(stdout);
}
