/* What pskv-worker's and pskv-evaluator's apps share (apps.h): the stop flag,
 * failure and stop reports, the tests' pauses, digests, and buffers freed after
 * the handle is closed. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps.h"
#include "ring.h"
#include "timeutil.h"

atomic_int app_stop_signal; /* an atomic: apps.h says why */

int app_stopped(const char *app)
{
    fprintf(stderr, "%s: stopped by signal %d\n", app, (int)app_stop_signal);
    return 128 + (int)app_stop_signal;
}

int app_fail(const char *app, pskv_worker *w, const char *what, int rc)
{
    if (app_stop_signal)
        return app_stopped(app);
    fprintf(stderr, "%s: %s: %s (%s)\n", app, what, pskv_strerror(rc),
            w ? pskv_last_error(w) : "");
    return 1;
}

int app_wait_file(const char *app, const char *path)
{
    printf("%s: waiting for %s\n", app, path);
    fflush(stdout);
    for (int64_t until = tu_now_ms() + 120000; !app_stop_signal && tu_now_ms() < until;) {
        if (access(path, F_OK) == 0)
            return 0;
        tu_sleep_ms(100);
    }
    if (!app_stop_signal)
        fprintf(stderr, "%s: %s did not appear within 120 s\n", app, path);
    return -1;
}

uint64_t app_digest_add(uint64_t h, const void *p, size_t bytes)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < bytes; i++)
        h = (h ^ c[i]) * 1099511628211ULL;
    return h;
}

uint64_t app_digest(const float *v, size_t n)
{
    return app_digest_add(APP_DIGEST_START, v, n * sizeof *v);
}

int app_wait_file_n(const char *app, const char *base, int n)
{
    if (!*base)
        return 0;
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", base, n);
    return app_wait_file(app, path);
}

/* What app_free_after_close was given; freed once pskv_worker_close returned. */
#define AFTER_CLOSE_MAX 16
static void *after_close[AFTER_CLOSE_MAX];
static int nafter_close;

void app_free_after_close(void *p)
{
    if (!p)
        return;
    if (nafter_close == AFTER_CLOSE_MAX)
        abort(); /* a bug in an app: more than it can ever hand over */
    after_close[nafter_close++] = p;
}

void app_free_closed(void)
{
    while (nafter_close > 0)
        free(after_close[--nafter_close]);
}

int app_pushpull_fits(cfg_entry *cfg)
{
    return !*cfg_str(cfg, "filter") && !strcmp(cfg_str(cfg, "wire"), "fp32");
}

void app_shuffle(uint32_t *a, uint32_t n, uint64_t seed)
{
    for (uint32_t i = n; i > 1; i--) {
        seed += 0x9e3779b97f4a7c15ULL; /* the train app's rng_next: the same orders */
        uint32_t j = (uint32_t)(ring_mix64(seed) % i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}
