/* pskv-wire-pattern: the encryption test's two halves.
 *
 *   pskv-wire-pattern push [--scheduler HOST:PORT] [--keys DIR] [--rounds N]
 *       joins as a worker (a user program linking libpskv), opens a dense `sum`
 *       table of 64 keys and pushes a recognisable 64-byte pattern (16 floats
 *       that no other pskv traffic carries) N times, then pulls it back once and
 *       checks the sum. Exit 0 when every push was acknowledged and the sum holds.
 *   pskv-wire-pattern find FILE
 *       prints how many times the pattern's 64 bytes occur in FILE (a byte stream
 *       recorded by pskv-faultproxy --record); exit 0 when found, 1 when not.
 * Exit status 2: usage. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pskv.h"

#define NPAT 16
#define KEYS 64

static void pattern(float *p)
{
    /* values whose bytes no counter, id or header would hold */
    for (int i = 0; i < NPAT; i++)
        p[i] = 1234.5678f + 0.0625f * (float)i * (float)(i + 7);
}

static int find(const char *path)
{
    float pat[NPAT];
    pattern(pat);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "pskv-wire-pattern: cannot read %s\n", path);
        return 2;
    }
    size_t cap = 1 << 20, len = 0, hits = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (len == cap) {
            unsigned char *nb = realloc(buf, cap *= 2);
            if (!nb)
                break;
            buf = nb;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        if (n == 0)
            break;
        len += n;
    }
    fclose(f);
    for (size_t i = 0; buf && i + sizeof pat <= len; i++)
        if (buf[i] == ((unsigned char *)pat)[0] && !memcmp(buf + i, pat, sizeof pat))
            hits++;
    free(buf);
    printf("%zu occurrences of the pattern in %zu bytes of %s\n", hits, len, path);
    return hits ? 0 : 1;
}

static int push(int argc, char **argv)
{
    pskv_config cfg;
    pskv_config_init(&cfg);
    int rounds = 20;
    for (int i = 2; i < argc; i++) {
        if (i + 1 < argc && !strcmp(argv[i], "--scheduler"))
            cfg.scheduler = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--keys"))
            cfg.keys = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--rounds"))
            rounds = atoi(argv[++i]);
        else {
            fprintf(stderr, "pskv-wire-pattern: unknown argument '%s'\n", argv[i]);
            return 2;
        }
    }
    pskv_worker *w;
    int rc = pskv_worker_open(&cfg, &w);
    if (rc < 0) {
        fprintf(stderr, "pskv-wire-pattern: open: %s\n", pskv_strerror(rc));
        return 1;
    }
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.size = KEYS;
    o.updater = "sum";
    int t = pskv_table_open(w, "wire.pattern", &o);
    float vals[KEYS], out[KEYS];
    memset(vals, 0, sizeof vals);
    pattern(vals + 16); /* keys 16..31, 16-byte aligned inside the frame */
    int bad = t < 0;
    for (int r = 0; !bad && r < rounds; r++) {
        int64_t ts = pskv_push(w, t, NULL, KEYS, vals);
        bad = ts < 0 || pskv_wait(w, ts, 30000) < 0;
    }
    if (!bad) {
        int64_t ts = pskv_pull(w, t, NULL, KEYS, out);
        bad = ts < 0 || pskv_wait(w, ts, 30000) < 0;
        for (int i = 0; !bad && i < KEYS; i++)
            bad = fabsf(out[i] - vals[i] * (float)rounds) > 1e-4f * fabsf(vals[i] * (float)rounds);
    }
    if (bad)
        fprintf(stderr, "pskv-wire-pattern: push/pull failed: %s\n", pskv_last_error(w));
    else
        printf("pushed the pattern %d times; the sum holds\n", rounds);
    pskv_worker_close(&w);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "push"))
        return push(argc, argv);
    if (argc == 3 && !strcmp(argv[1], "find"))
        return find(argv[2]);
    fprintf(stderr, "usage: pskv-wire-pattern push [--scheduler HOST:PORT] [--keys DIR] "
                    "[--rounds N] | find FILE\n");
    return 2;
}
