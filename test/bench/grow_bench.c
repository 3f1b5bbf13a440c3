/* pskv-grow-bench: the longest sparse pushes while a table grows, in process,
 * without messages or other daemons, and the machine's own bursts beside them
 * (docs/benchmarks.md, sparse growth).
 *
 *   pskv-grow-bench [--rows N] [--trace MS] [--witness]
 * fills a width-1 sgd shard (server/store/shard.c) with N random keys (default 10^8;
 * key i is ring_mix64(i), as sparse-bench's), 8,192 a push, each push timed by
 * the thread's CPU time as the server's exit report times it. Prints
 *   grow-bench rows= pushes= cpu_s= ns_per_key= over_8ms= over_10ms= p50_ms=
 *     p99_ms= p999_ms= longest_ms= longest_at_rows= longest_growing=
 *     wall_longest_ms=
 * (growing: rows were still moving to a doubled map in that push).
 * --trace MS prints a line for each push (and witness batch) over MS ms of CPU
 * or wall time: what it did (rows, map slots, growing, records grown) and what
 * the system did meanwhile (the thread's page faults, context switches, user
 * and system time, the machine's steal time).
 * --witness runs, after each push, a batch of the bare loop below and prints its
 * distribution too: a burst of the machine shows in the witness as in the push.
 *
 *   pskv-grow-bench --floor [--rows N] [--trace MS] [--pace MS --until FILE]
 * runs the bare loop alone: batches of 8,192 "keys" over bare arrays of the
 * shard's size at N rows (a map of 4-byte slots, 12-byte records) faulted in
 * before any clock starts; per key a random slot read and a random record
 * written, no map logic, no system call. Its longest batch is what the machine
 * alone does to a loop of random misses over gigabytes: the floor under the
 * longest push. With --pace it sleeps MS between batches (a few percent of a
 * core) until FILE exists (an hour at most), to run beside a server's
 * benchmark (scripts/bench-sparse-push.sh --witness). Prints
 *   grow-bench floor batches= p50_ms= p99_ms= p999_ms= longest_ms=
 *     over_10ms= */
#define _GNU_SOURCE /* RUSAGE_THREAD, MADV_POPULATE_WRITE */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#include "store/prefault.h"
#include "ring.h"
#include "store/shard.h"
#include "store/shard_impl.h"
#include "timeutil.h"

enum { BATCH = 8192, PACED_MAX = 1000000 };

typedef struct opts {
    uint64_t rows;
    double trace_ms, pace_ms;
    const char *until;
    int floor, witness;
} opts;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The per-mille-th smallest of v[0..n) (sorted: scratch of n). */
static double pct(const double *v, double *sorted, size_t n, size_t per_mille)
{
    memcpy(sorted, v, n * sizeof *v);
    qsort(sorted, n, sizeof *sorted, cmp_double);
    return sorted[n * per_mille / 1000];
}

/* The machine's steal time so far, ms (all CPUs; /proc/stat, 10 ms ticks). */
static double steal_ms(void)
{
    FILE *f = fopen("/proc/stat", "r");
    unsigned long long v[8] = {0};
    if (!f)
        return 0;
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    return n == 8 ? (double)v[7] * 10 : 0;
}

typedef struct sample {
    int64_t cpu, wall;
    struct rusage ru;
    double steal;
} sample;

static void take(sample *x, int traced)
{
    if (traced) {
        x->steal = steal_ms();
        getrusage(RUSAGE_THREAD, &x->ru);
    }
    x->wall = tu_now_ns();
    x->cpu = tu_thread_cpu_ns();
}

static double tv_ms(const struct timeval *t)
{
    return (double)t->tv_sec * 1e3 + (double)t->tv_usec / 1e3;
}

static double cpu_ms(const sample *a, const sample *b) { return (double)(b->cpu - a->cpu) / 1e6; }
static double wall_ms(const sample *a, const sample *b) { return (double)(b->wall - a->wall) / 1e6; }

/* Prints step p's line (a push or a bare batch, `kind`) when it took over
 * trace_ms of CPU or wall time. */
static void trace(const char *kind, size_t p, const sample *a, const sample *b, double trace_ms,
                  const char *what)
{
    double cpu = cpu_ms(a, b), wall = wall_ms(a, b);
    if (trace_ms <= 0 || (cpu <= trace_ms && wall <= trace_ms))
        return;
    printf("slow %s=%zu at_s=%.6f cpu_ms=%.2f wall_ms=%.2f user_ms=%.2f sys_ms=%.2f minflt=%ld "
           "majflt=%ld nvcsw=%ld nivcsw=%ld steal_ms=%.0f %s\n",
           kind, p, (double)a->wall / 1e9, cpu, wall,
           tv_ms(&b->ru.ru_utime) - tv_ms(&a->ru.ru_utime),
           tv_ms(&b->ru.ru_stime) - tv_ms(&a->ru.ru_stime), b->ru.ru_minflt - a->ru.ru_minflt,
           b->ru.ru_majflt - a->ru.ru_majflt, b->ru.ru_nvcsw - a->ru.ru_nvcsw,
           b->ru.ru_nivcsw - a->ru.ru_nivcsw, b->steal - a->steal, what);
    fflush(stdout);
}

/* The bare arrays of --floor and --witness: a map of 4-byte slots and 12-byte
 * records of a shard's size at `rows` rows, faulted in before any clock starts. */
typedef struct bare {
    uint32_t *map;
    char *rec;
    size_t cap, rows, mbytes, rbytes;
    uint64_t next;
} bare;

static int bare_new(bare *w, uint64_t rows)
{
    w->cap = 1024;
    while (w->cap * 7 < rows * 10)
        w->cap *= 2;
    w->rows = rows;
    w->mbytes = w->cap * 4;
    w->rbytes = rows * 12;
    w->next = 1;
    w->map = shard_big_alloc(w->mbytes);
    w->rec = shard_big_alloc(w->rbytes);
    if (!w->map || !w->rec)
        return -1;
    madvise(w->map, w->mbytes, MADV_POPULATE_WRITE);
    madvise(w->rec, w->rbytes, MADV_POPULATE_WRITE);
    return 0;
}

/* One batch of BATCH "keys": per key a random slot read and a random record
 * written, no map logic; traced as step p. Returns its thread CPU time, ms. */
static double bare_batch(bare *w, size_t p, double trace_ms)
{
    sample a, b;
    take(&a, trace_ms > 0);
    for (int k = 0; k < BATCH; k++) {
        uint64_t h = ring_mix64(w->next++);
        uint32_t v = w->map[h & (w->cap - 1)];
        float *r = (float *)(w->rec + ((h >> 32) % w->rows) * 12);
        r[2] += (float)v;
        w->map[h & (w->cap - 1)] = v + 1;
    }
    take(&b, trace_ms > 0);
    trace("batch", p, &a, &b, trace_ms, "bare");
    return cpu_ms(&a, &b);
}

static void bare_free(bare *w)
{
    shard_big_free(w->map, w->mbytes);
    shard_big_free(w->rec, w->rbytes);
}

/* Prints the distribution of n batch times. */
static void report_bare(const char *what, const double *ms, double *sorted, size_t n)
{
    size_t worst = 0, over10 = 0;
    for (size_t p = 0; p < n; p++) {
        worst = ms[p] > ms[worst] ? p : worst;
        over10 += ms[p] > 10;
    }
    printf("grow-bench %s batches=%zu p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f longest_ms=%.2f "
           "longest_at=%zu over_10ms=%zu\n",
           what, n, pct(ms, sorted, n, 500), pct(ms, sorted, n, 990), pct(ms, sorted, n, 999),
           ms[worst], worst, over10);
}

/* --floor: the bare loop alone, n batches or, paced, until o->until exists. */
static int run_floor(const opts *o, bare *w)
{
    size_t n = o->pace_ms > 0 ? PACED_MAX : (size_t)(o->rows / BATCH), done = 0;
    double *ms = calloc(n, sizeof *ms), *sorted = malloc(n * sizeof *sorted);
    if (!ms || !sorted) {
        fprintf(stderr, "pskv-grow-bench: out of memory\n");
        return 1;
    }
    int64_t stop = tu_now_ns() + 3600LL * 1000000000;
    struct stat st;
    struct timespec pause = {0, (long)(o->pace_ms * 1e6)};
    for (; done < n; done++) {
        if (o->pace_ms > 0 && (stat(o->until, &st) == 0 || tu_now_ns() > stop))
            break;
        ms[done] = bare_batch(w, done, o->trace_ms);
        if (o->pace_ms > 0)
            nanosleep(&pause, NULL);
    }
    if (done)
        report_bare("floor", ms, sorted, done);
    free(ms);
    free(sorted);
    return 0;
}

/* Fills the shard, 8,192 keys a push; with a witness, a bare batch after each. */
static int run_pushes(const opts *o, bare *w)
{
    upd_opts u = {.kind = UPD_SGD, .lr = 0.01f};
    shard_init init = {INIT_ZERO, 0, 0};
    shard *s = shard_new(0, 0, 0, 0, UINT64_MAX, 1, &u, &init);
    size_t np = (size_t)(o->rows / BATCH), worst = 0, worst_rows = 0;
    double *ms = calloc(np, sizeof *ms), *sorted = malloc(np * sizeof *sorted);
    double *wit = calloc(np, sizeof *wit), wall_worst = 0, total = 0;
    double *wbusy = calloc(np, sizeof *wbusy), *widle = calloc(np, sizeof *widle);
    size_t nbusy = 0, nidle = 0;
    uint64_t *keys = malloc(BATCH * sizeof *keys), next = 1;
    float *g = malloc(BATCH * sizeof *g);
    if (!s || !ms || !sorted || !wit || !wbusy || !widle || !keys || !g) {
        fprintf(stderr, "pskv-grow-bench: out of memory\n");
        return 1;
    }
    for (int k = 0; k < BATCH; k++)
        g[k] = 1;
    int worst_growing = 0, over8 = 0, over10 = 0;
    for (size_t p = 0; p < np; p++) {
        for (int k = 0; k < BATCH; k++)
            keys[k] = ring_mix64(next++);
        int growing = s->old_slots != NULL;
        size_t rows_cap = s->rows_cap, cap = s->cap;
        sample a, b;
        take(&a, o->trace_ms > 0);
        if (shard_push(s, keys, 0, BATCH, g) < 0) {
            fprintf(stderr, "pskv-grow-bench: push %zu failed: out of memory\n", p);
            return 1;
        }
        take(&b, o->trace_ms > 0);
        growing = growing || s->old_slots != NULL;
        char what[200];
        snprintf(what, sizeof what,
                 "rows=%zu cap=%zu growing=%d map_grew=%d records_grew=%d helper_idle=%d "
                 "witness_before_ms=%.2f",
                 shard_size(s), s->cap, growing, s->cap != cap, s->rows_cap != rows_cap,
                 prefault_idle(), p ? wit[p - 1] : 0.0);
        trace("push", p, &a, &b, o->trace_ms, what);
        if (o->witness) { /* split by whether the helper is faulting pages in meanwhile */
            int busy = !prefault_idle();
            wit[p] = bare_batch(w, p, o->trace_ms);
            if (busy && !prefault_idle())
                wbusy[nbusy++] = wit[p];
            else if (!busy && prefault_idle())
                widle[nidle++] = wit[p];
        }
        ms[p] = cpu_ms(&a, &b);
        total += ms[p];
        over8 += ms[p] > 8;
        over10 += ms[p] > 10;
        if (ms[p] > ms[worst] || !p) {
            worst = p;
            worst_rows = shard_size(s);
            worst_growing = growing;
        }
        wall_worst = wall_ms(&a, &b) > wall_worst ? wall_ms(&a, &b) : wall_worst;
    }
    printf("grow-bench rows=%zu pushes=%zu cpu_s=%.2f ns_per_key=%.1f over_8ms=%d "
           "over_10ms=%d p50_ms=%.2f p99_ms=%.2f p999_ms=%.2f longest_ms=%.2f longest_at_rows=%zu "
           "longest_growing=%d wall_longest_ms=%.2f\n",
           np * BATCH, np, total / 1e3, total * 1e6 / (double)(np * BATCH), over8, over10,
           pct(ms, sorted, np, 500), pct(ms, sorted, np, 990), pct(ms, sorted, np, 999), ms[worst],
           worst_rows, worst_growing, wall_worst);
    if (o->witness) {
        report_bare("witness", wit, sorted, np);
        if (nbusy)
            report_bare("witness_helper_busy", wbusy, sorted, nbusy);
        if (nidle)
            report_bare("witness_helper_idle", widle, sorted, nidle);
    }
    shard_destroy(&s);
    free(ms);
    free(wit);
    free(wbusy);
    free(widle);
    free(sorted);
    free(keys);
    free(g);
    return 0;
}

/* Returns 0, or 2 after printing what was wrong. */
static int parse(int argc, char **argv, opts *o)
{
    for (int a = 1; a < argc; a++) {
        char *end = NULL;
        if (!strcmp(argv[a], "--rows") && a + 1 < argc) {
            o->rows = strtoull(argv[++a], &end, 10);
            if (*end || o->rows < BATCH || o->rows > 1000000000) {
                fprintf(stderr, "pskv-grow-bench: --rows must be 8192 .. 10^9\n");
                return 2;
            }
        } else if (!strcmp(argv[a], "--trace") && a + 1 < argc) {
            o->trace_ms = strtod(argv[++a], &end);
            if (*end || !(o->trace_ms > 0)) {
                fprintf(stderr, "pskv-grow-bench: --trace must be a number of ms above 0\n");
                return 2;
            }
        } else if (!strcmp(argv[a], "--pace") && a + 1 < argc) {
            o->pace_ms = strtod(argv[++a], &end);
            if (*end || !(o->pace_ms > 0 && o->pace_ms < 1000)) {
                fprintf(stderr, "pskv-grow-bench: --pace must be a number of ms in (0, 1000)\n");
                return 2;
            }
        } else if (!strcmp(argv[a], "--until") && a + 1 < argc) {
            o->until = argv[++a];
        } else if (!strcmp(argv[a], "--floor")) {
            o->floor = 1;
        } else if (!strcmp(argv[a], "--witness")) {
            o->witness = 1;
        } else {
            fprintf(stderr, "usage: pskv-grow-bench [--rows N] [--trace MS] [--witness]\n"
                            "       pskv-grow-bench --floor [--rows N] [--trace MS] "
                            "[--pace MS --until FILE]\n");
            return 2;
        }
    }
    if (o->floor && o->witness) {
        fprintf(stderr, "pskv-grow-bench: --floor and --witness exclude each other\n");
        return 2;
    }
    if ((o->pace_ms > 0) != (o->until != NULL) || (o->pace_ms > 0 && !o->floor)) {
        fprintf(stderr, "pskv-grow-bench: --pace and --until go together, with --floor\n");
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    opts o = {.rows = 100000000};
    int rc = parse(argc, argv, &o);
    if (rc)
        return rc;
    bare w = {0};
    if ((o.floor || o.witness) && bare_new(&w, o.rows) < 0) {
        fprintf(stderr, "pskv-grow-bench: out of memory for the bare arrays\n");
        return 1;
    }
    rc = o.floor ? run_floor(&o, &w) : run_pushes(&o, &w);
    if (o.floor || o.witness)
        bare_free(&w);
    return rc;
}
