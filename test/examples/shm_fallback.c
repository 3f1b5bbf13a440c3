/* pskv-shm-fallback: a held pskv_pushpull whose shared-memory segment was retired
 * before its answer gets its values in a frame (a user's program; test
 * pushpull_shm_fallback).
 *
 *   pskv-shm-fallback --scheduler HOST:PORT --rank 0|1 --go FILE
 *
 * Two workers on one bsp table "fb" (dense, N keys, 128 KiB, sum) of a job of one
 * server on this host. Rank 0 (--shm, a request time-out of 3 s): pushes 1 (its
 * region in segment G) and ends clock 0, then 1.5 s later pskv_pushpull(2, clock):
 * both held, since rank 1 has not pushed. The push of clock 0 times out (3 s: the
 * worker gives up on it, its region not heard from: G is retired), and a pull of
 * an async table "fa" (also 128 KiB) goes in a new segment G+1, which the server
 * maps in place of G. The pushpull is still pending then (checked); rank 0 writes
 * FILE, and rank 1 (no --shm), waiting for it, pushes 10, ends clock 0, and
 * pskv_pushpull(20, clock). Clock 1 closes: the server cannot write the pushpull's
 * reply into G (unmapped) and, its push applied, answers with a values frame
 * (server/consist/consist.c answer_pull_shm). Both ranks' values must be exactly
 * 1 + 10 + 2 + 20 = 33. Last line "shm-fallback ok: ..." and exit 0; else
 * "shm-fallback: ..." and exit 1 (2: usage). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pskv.h"

#define N 32768 /* 128 KiB of floats: over the 64 KiB that go through shared memory */
#define TIMEOUT_MS 3000
#define GAP_MS 1500 /* between the push of clock 0 and the pushpull (before its time-out) */

static int failed(pskv_worker *w, const char *what)
{
    printf("shm-fallback: %s: %s\n", what, w ? pskv_last_error(w) : "");
    fflush(stdout);
    return 1;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int open_table(pskv_worker *w, const char *name, const char *cons)
{
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.kind = PSKV_DENSE;
    o.size = N;
    o.updater = "sum";
    o.consistency = cons;
    return pskv_table_open(w, name, &o);
}

/* Every value of out is want; else prints the first that is not. */
static int exact(const float *out, float want, int rank)
{
    for (int i = 0; i < N; i++)
        if (out[i] != want) {
            printf("shm-fallback: rank %d: key %d is %g, not %g\n", rank, i, (double)out[i],
                   (double)want);
            return 0;
        }
    return 1;
}

static int rank0(pskv_worker *w, int fb, const char *go)
{
    static float ones[N], twos[N], out[N], other[N];
    for (int i = 0; i < N; i++)
        ones[i] = 1, twos[i] = 2;
    int fa = open_table(w, "fa", "async");
    if (fa < 0)
        return failed(w, "open fa");
    int64_t q = pskv_push(w, fb, NULL, N, ones);
    if (q < 0 || pskv_clock(w) < 0)
        return failed(w, "push of clock 0");
    int rc = pskv_wait(w, q, GAP_MS);
    if (rc != -PSKV_ETIMEDOUT || pskv_request_pending(w, q) != 1)
        return failed(w, "the push of clock 0 was answered before rank 1 pushed");
    int64_t p = pskv_pushpull(w, fb, NULL, N, twos, out, PSKV_PP_CLOCK);
    if (p < 0)
        return failed(w, "pushpull");
    rc = pskv_wait(w, q, 2 * TIMEOUT_MS); /* ends with the request time-out */
    if (rc != -PSKV_ETIMEDOUT || pskv_request_pending(w, q) != 0)
        return failed(w, "the push of clock 0 did not time out");
    int64_t r = pskv_pull(w, fa, NULL, N, other); /* names the next segment */
    if (r < 0 || pskv_wait(w, r, TIMEOUT_MS) < 0)
        return failed(w, "pull of fa");
    if (pskv_request_pending(w, p) != 1)
        return failed(w, "the pushpull was answered before the new segment was mapped");
    FILE *f = fopen(go, "w");
    if (!f || fclose(f) != 0)
        return failed(w, "cannot write the go file");
    if (pskv_wait(w, p, TIMEOUT_MS) < 0)
        return failed(w, "pushpull's answer");
    if (!exact(out, 33, 0))
        return 1;
    printf("shm-fallback ok: rank 0's pushpull, held while its segment was replaced, "
           "answered %d values of 33\n", N);
    return 0;
}

static int rank1(pskv_worker *w, int fb, const char *go)
{
    static float tens[N], twenties[N], out[N];
    for (int i = 0; i < N; i++)
        tens[i] = 10, twenties[i] = 20;
    for (int k = 0; access(go, F_OK) != 0; k++) {
        if (k == 3000)
            return failed(w, "no go file within 30 s");
        sleep_ms(10);
    }
    int64_t q = pskv_push(w, fb, NULL, N, tens);
    if (q < 0 || pskv_clock(w) < 0)
        return failed(w, "push of clock 0");
    int64_t p = pskv_pushpull(w, fb, NULL, N, twenties, out, PSKV_PP_CLOCK);
    if (p < 0 || pskv_wait(w, q, TIMEOUT_MS) < 0 || pskv_wait(w, p, TIMEOUT_MS) < 0)
        return failed(w, "pushpull");
    if (!exact(out, 33, 1))
        return 1;
    printf("shm-fallback ok: rank 1 pulled %d values of 33\n", N);
    return 0;
}

int main(int argc, char **argv)
{
    pskv_config cfg;
    pskv_config_init(&cfg);
    const char *go = NULL;
    int rank = -1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--scheduler"))
            cfg.scheduler = argv[i + 1];
        else if (!strcmp(argv[i], "--rank"))
            rank = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--go"))
            go = argv[i + 1];
    }
    if (argc % 2 == 0 || !go || (rank != 0 && rank != 1)) {
        fprintf(stderr, "usage: pskv-shm-fallback --scheduler HOST:PORT --rank 0|1 --go FILE\n");
        return 2;
    }
    cfg.rank = rank;
    cfg.shm = rank == 0;
    cfg.request_timeout_ms = TIMEOUT_MS;
    pskv_worker *w = NULL;
    int rc = pskv_worker_open(&cfg, &w);
    if (rc < 0) {
        printf("shm-fallback: open: %s\n", pskv_strerror(rc));
        return 1;
    }
    int fb = open_table(w, "fb", "bsp");
    if (fb < 0)
        return failed(w, "open fb");
    rc = rank == 0 ? rank0(w, fb, go) : rank1(w, fb, go);
    fflush(stdout);
    return pskv_worker_close(&w) < 0 || rc;
}
