/* --app replay: one worker pushes a fixed schedule of gradients to a dense and a
 * sparse table with the chosen --updater, waiting for each push's answer, and
 * prints the final values: the same flags give the same output, so a run can be
 * compared with another (a server killed halfway, another build) or with values
 * computed by hand. Gradient j of key k at step s is ((7k + 3j + 5s) mod 11 - 5)/8,
 * exact in float32; 16 dense keys and 16 sparse keys, width 3, --steps steps
 * (0 = 10).
 *
 * --replay-wait FILE: after half the steps the worker prints "replay: waiting" and
 * waits (at most 120 s) for FILE to exist, so a test can kill a server while no
 * push is in flight, then let the rest run on the survivors. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "apps.h"
#include "updflags.h"

enum { KEYS = 16, WIDTH = 3 };

static float grad(uint64_t k, int j, int64_t s)
{
    return (float)((int)((7 * k + 3 * (uint64_t)j + 5 * (uint64_t)s) % 11) - 5) / 8.0f;
}

static int fail(pskv_worker *w, const char *what, int rc)
{
    return app_fail("replay", w, what, rc);
}

int app_replay(pskv_worker *w, cfg_entry *cfg)
{
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    updflags_apply(cfg, &o);
    o.width = WIDTH;
    o.kind = PSKV_DENSE;
    o.size = KEYS;
    int td = pskv_table_open(w, "replay.dense", &o);
    if (td < 0)
        return fail(w, "open the dense table", td);
    o.kind = PSKV_SPARSE;
    o.size = 0;
    int ts = pskv_table_open(w, "replay.sparse", &o);
    if (ts < 0)
        return fail(w, "open the sparse table", ts);
    int64_t steps = cfg_int(cfg, "steps") ? cfg_int(cfg, "steps") : 10;
    const char *wait = cfg_str(cfg, "replay-wait");
    uint64_t skeys[KEYS];
    for (uint64_t k = 0; k < KEYS; k++)
        skeys[k] = 0x9e3779b97f4a7c15ULL * (k + 1);
    float g[KEYS * WIDTH], dv[KEYS * WIDTH], sv[KEYS * WIDTH];
    for (int64_t s = 0; s < steps; s++) {
        if (*wait && s == steps / 2 && app_wait_file("replay", wait) < 0)
            return 1;
        if (app_stop_signal)
            return app_stopped("replay");
        for (uint64_t k = 0; k < KEYS; k++)
            for (int j = 0; j < WIDTH; j++)
                g[k * WIDTH + j] = grad(k, j, s);
        int64_t a = pskv_push(w, td, NULL, KEYS, g);
        int rc = a < 0 ? (int)a : pskv_wait(w, a, 60000);
        if (rc < 0)
            return fail(w, "push to the dense table", rc);
        int64_t b = pskv_push(w, ts, skeys, KEYS, g);
        rc = b < 0 ? (int)b : pskv_wait(w, b, 60000);
        if (rc < 0)
            return fail(w, "push to the sparse table", rc);
    }
    int64_t a = pskv_pull(w, td, NULL, KEYS, dv);
    int rc = a < 0 ? (int)a : pskv_wait(w, a, 60000);
    int64_t b = rc < 0 ? rc : pskv_pull(w, ts, skeys, KEYS, sv);
    rc = b < 0 ? (int)b : pskv_wait(w, b, 60000);
    if (rc < 0)
        return fail(w, "pull the final values", rc);
    for (uint64_t k = 0; k < KEYS; k++)
        printf("replay dense %" PRIu64 ": %.9g %.9g %.9g\n", k, (double)dv[k * WIDTH],
               (double)dv[k * WIDTH + 1], (double)dv[k * WIDTH + 2]);
    for (uint64_t k = 0; k < KEYS; k++)
        printf("replay sparse %" PRIu64 ": %.9g %.9g %.9g\n", k, (double)sv[k * WIDTH],
               (double)sv[k * WIDTH + 1], (double)sv[k * WIDTH + 2]);
    printf("replay ok: %s, %" PRId64 " steps\n", o.updater, steps);
    return 0;
}
