/* pskv-gen-sparse: synthetic sparse binary classification data in LIBSVM format,
 * shaped like click logs: a few hot features, a long tail, ids spread over 1..F.
 *
 * Features. A rank r in 1..F is drawn from a continuous power law with exponent
 * ZIPF_S on [1, F+1) by inverting its CDF, so rank 1 is the hottest. A fixed
 * bijection (a 4-round Feistel network on the next even power of two, walked until
 * it lands below F) maps rank r to feature id 1 + perm(r - 1), so hot ids are not the
 * small numbers. Each example draws ranks until it holds --nnz distinct ones; ids
 * are written ascending. One id in REAL_EVERY carries a real value in [0.05, 3.00]
 * with two decimals, the others the value 1.
 *
 * Labels come from a planted logistic model: w(id) is a standard normal derived
 * from (seed, id) alone, scaled by PLANT_SCALE / sqrt(nnz), plus a bias that
 * centres the scores (the hot features' weights would otherwise tilt the classes),
 * and the label is Bernoulli(sigmoid(w.x + b)). The score uses the value as
 * written, so the planted AUC printed at the end (exact, from sorted scores with
 * ties ranked alike, on the test part) is what a perfect learner could reach on
 * these files: about 0.86 with the defaults.
 *
 * Example i goes to the test file when floor((i+1) T) > floor(i T), computed in
 * 32-bit fixed point: for T = 0.1 that is every 10th example (i = 9, 19, ...).
 *
 * Speed: the hottest ranks (most draws) have their id, weight and value kind in a
 * table, ranks are drawn in batches whose table entries are prefetched, the
 * power law is inverted without exp or log, and lines are formatted by hand into
 * a large buffer. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auc.h"
#include "ring.h"

#define ZIPF_S 1.1          /* power-law exponent (draw_rank hard-codes 1/(1-s) = -10) */
#define PLANT_SCALE 2.0     /* score spread: sets the planted AUC */
#define MAX_FEATURES (1ULL << 52)
#define MAX_EXAMPLES (1ULL << 40)
#define MAX_NNZ 100000
enum {
    HOT = 1 << 16,          /* ranks whose id and weight are precomputed */
    REAL_EVERY = 8,         /* one id in this many is real-valued */
    OUTBUF = 1 << 22,
    PILOT = 4096,           /* examples drawn to centre the scores, at most */
    PILOT_FEATURES = 1 << 22,   /* features drawn for that, at most */
};

static const char usage[] =
    "usage: pskv-gen-sparse --examples N --features F --out PREFIX [--seed S] [--nnz K]\n"
    "                       [--test-fraction T]\n"
    "Writes PREFIX.train and PREFIX.test (LIBSVM format): N examples with about K\n"
    "(default 20) distinct binary or real features each, ids in 1..F with power-law\n"
    "frequencies, labels from a planted logistic model. Every example i with\n"
    "floor((i+1)T) > floor(iT) goes to the test file (T default 0.1: every 10th).\n"
    "Prints the counts and planted_auc=X, the planted model's AUC on the test part.\n";

/* ---- random numbers ---------------------------------------------------------- */

typedef struct rng {
    uint64_t s[4];   /* xoshiro256** */
} rng;

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(rng *r)
{
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

static void rng_seed(rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        seed += 0x9e3779b97f4a7c15ULL;
        r->s[i] = ring_mix64(seed);
    }
}

/* Uniform in (0, 1): never 0, so logs are finite. */
static double unit_open(uint64_t x)
{
    return ((double)(x >> 11) + 0.5) * 0x1.0p-53;
}

/* ---- the feature model -------------------------------------------------------- */

/* A precomputed hot rank, 16 bytes: one cache line holds four. */
struct hot {
    uint64_t bits;      /* id (52 bits) | HOT_REAL | HOT_SEEN */
    float w;
    uint32_t stamp;     /* the last example that drew it, to skip repeats */
};
#define HOT_ID_MASK ((1ULL << 52) - 1)
#define HOT_REAL (1ULL << 62)   /* the id carries real values */
#define HOT_SEEN (1ULL << 63)   /* drawn at least once (for the distinct count) */

typedef struct model {
    uint64_t F;
    uint64_t seed;
    double zipf_c;      /* 1 - (F+1)^(1-s) */
    int half;           /* Feistel half width in bits */
    uint64_t mask;
    uint64_t key[4];
    double wscale, bias;
    uint32_t nhot;
    struct hot *hot;    /* ranks 1..nhot */
    uint32_t stamp;     /* examples drawn so far (wraps; a stale match only redraws) */
} model;

static uint64_t feistel(const model *m, uint64_t x)
{
    uint64_t l = x >> m->half, r = x & m->mask;
    for (int i = 0; i < 4; i++) {
        uint64_t t = l ^ (ring_mix64(r ^ m->key[i]) & m->mask);
        l = r;
        r = t;
    }
    return l << m->half | r;
}

/* Rank 1..F to id 1..F, a bijection: cycle walking keeps the Feistel output in range. */
static uint64_t rank_to_id(const model *m, uint64_t rank)
{
    uint64_t x = rank - 1;
    do
        x = feistel(m, x);
    while (x >= m->F);
    return x + 1;
}

/* A standard normal from (seed, id) alone (Box-Muller on two hashed uniforms). */
static double id_normal(uint64_t seed, uint64_t id)
{
    uint64_t h1 = ring_mix64(ring_mix64(id) ^ seed);
    uint64_t h2 = ring_mix64(h1 ^ 0x632be59bd9b4e019ULL);
    return sqrt(-2.0 * log(unit_open(h1))) * cos(6.283185307179586 * unit_open(h2));
}

static int id_is_real(uint64_t seed, uint64_t id)
{
    return ring_mix64(id ^ ring_mix64(seed ^ 0x5851f42d4c957f2dULL)) % REAL_EVERY == 0;
}

/* The planted weight of a feature (a float, so hot and tail ids agree exactly). */
static float id_weight(const model *m, uint64_t id)
{
    return (float)(m->wscale * id_normal(m->seed, id));
}

static uint64_t draw_rank(const model *m, rng *r)
{
    /* x = y^(1/(1-s)) = y^-10 for s = 1.1: four multiplications, no exp or log. */
    double y = 1.0 - unit_open(rng_next(r)) * m->zipf_c;
    double y2 = y * y, y5 = y2 * y2 * y;
    double x = 1.0 / (y5 * y5);
    uint64_t rank = x < 1.0 ? 1 : (uint64_t)x;
    return rank > m->F ? m->F : rank;
}

static int model_init(model *m, uint64_t F, uint64_t seed, uint32_t nnz)
{
    memset(m, 0, sizeof *m);
    if (F == 0 || nnz == 0)
        return -1;
    m->F = F;
    m->seed = seed;
    m->zipf_c = -expm1((1.0 - ZIPF_S) * log((double)F + 1.0));
    int bits = 2;
    while (bits < 64 && (1ULL << bits) < F)
        bits += 2;
    m->half = bits / 2;
    m->mask = (1ULL << m->half) - 1;
    for (int i = 0; i < 4; i++)
        m->key[i] = ring_mix64(seed * 4 + (uint64_t)i + 0x243f6a8885a308d3ULL);
    m->wscale = PLANT_SCALE / sqrt((double)nnz);
    m->nhot = F < HOT ? (uint32_t)F : HOT;
    m->hot = calloc((size_t)m->nhot + 1, sizeof *m->hot);
    if (m->hot == NULL)
        return -1;
    for (uint32_t r = 1; r <= m->nhot; r++) {
        uint64_t id = rank_to_id(m, r);
        m->hot[r].bits = id | (id_is_real(seed, id) ? HOT_REAL : 0);
        m->hot[r].w = id_weight(m, id);
    }
    return 0;
}

static void model_fini(model *m)
{
    free(m->hot);
    m->hot = NULL;
}

/* ---- distinct tail ranks ----------------------------------------------------- */

/* The hot table flags its own ranks; the tail ranks drawn go to a bitmap over all
 * ranks while that is at most BITMAP_MAX_F bits (128 MiB, touched only where ranks
 * fall), else to an open-addressing hash set of the ranks (nonzero keys). */
#define BITMAP_MAX_F (1ULL << 30)

typedef struct tailset {
    uint64_t *bits;
    uint64_t *slot;
    uint64_t mask;
    uint64_t count;
} tailset;

static int tail_init(tailset *t, uint64_t F)
{
    memset(t, 0, sizeof *t);
    if (F <= BITMAP_MAX_F) {
        t->bits = calloc(F / 64 + 1, sizeof *t->bits);
        return t->bits ? 0 : -1;
    }
    t->mask = (1 << 16) - 1;
    t->slot = calloc(t->mask + 1, sizeof *t->slot);
    return t->slot ? 0 : -1;
}

static void tail_fini(tailset *t)
{
    free(t->bits);
    free(t->slot);
    memset(t, 0, sizeof *t);
}

static void slot_put(uint64_t *slot, uint64_t mask, uint64_t *count, uint64_t key)
{
    for (uint64_t i = ring_mix64(key) & mask;; i = (i + 1) & mask) {
        if (slot[i] == key)
            return;
        if (slot[i] == 0) {
            slot[i] = key;
            (*count)++;
            return;
        }
    }
}

static int tail_add(tailset *t, uint64_t rank)
{
    if (t->bits != NULL) {
        uint64_t bit = 1ULL << (rank & 63);
        t->count += (t->bits[rank >> 6] & bit) == 0;
        t->bits[rank >> 6] |= bit;
        return 0;
    }
    if ((t->count + 1) * 2 > t->mask + 1) {
        uint64_t mask = t->mask * 2 + 1, count = 0;
        uint64_t *slot = calloc(mask + 1, sizeof *slot);
        if (slot == NULL)
            return -1;
        for (uint64_t i = 0; i <= t->mask; i++)
            if (t->slot[i] != 0)
                slot_put(slot, mask, &count, t->slot[i]);
        free(t->slot);
        t->slot = slot;
        t->mask = mask;
    }
    slot_put(t->slot, t->mask, &t->count, rank);
    return 0;
}

/* ---- output ------------------------------------------------------------------ */

typedef struct out {
    FILE *fp;
    const char *path;
    char *buf;
    size_t len;
    int failed;
    int err;        /* errno of the first failed write */
} out;

static void out_flush(out *o)
{
    if (o->len > 0 && fwrite(o->buf, 1, o->len, o->fp) != o->len && !o->failed) {
        o->failed = 1;
        o->err = errno;
    }
    o->len = 0;
}

static char *put_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    while (n > 0)
        *p++ = tmp[--n];
    return p;
}

/* ---- flags ------------------------------------------------------------------- */

static int bad_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "pskv-gen-sparse: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage);
    return 2;
}

static int parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *v)
{
    if (s == NULL || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

typedef struct opts {
    uint64_t examples, features, seed, nnz;
    double test_fraction;
    const char *prefix;
} opts;

static int parse_flags(int argc, char **argv, opts *o)
{
    o->examples = 0;
    o->features = 0;
    o->seed = 1;
    o->nnz = 20;
    o->test_fraction = 0.1;
    o->prefix = NULL;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        if (strcmp(f, "-h") == 0 || strcmp(f, "--help") == 0) {
            fputs(usage, stdout);
            return 1;
        }
        if (i + 1 >= argc)
            return bad_usage("%s needs a value", f);
        const char *v = argv[++i];
        if (strcmp(f, "--examples") == 0) {
            if (parse_u64(v, 1, MAX_EXAMPLES, &o->examples) != 0)
                return bad_usage("--examples: want an integer in 1..2^40, not '%s'", v);
        } else if (strcmp(f, "--features") == 0) {
            if (parse_u64(v, 1, MAX_FEATURES, &o->features) != 0)
                return bad_usage("--features: want an integer in 1..2^52, not '%s'", v);
        } else if (strcmp(f, "--seed") == 0) {
            if (parse_u64(v, 0, UINT64_MAX, &o->seed) != 0)
                return bad_usage("--seed: want a non-negative integer, not '%s'", v);
        } else if (strcmp(f, "--nnz") == 0) {
            if (parse_u64(v, 1, MAX_NNZ, &o->nnz) != 0)
                return bad_usage("--nnz: want an integer in 1..100000, not '%s'", v);
        } else if (strcmp(f, "--test-fraction") == 0) {
            char *end;
            errno = 0;
            double t = strtod(v, &end);
            if (errno != 0 || end == v || *end != '\0' || !(t >= 0.0 && t <= 1.0))
                return bad_usage("--test-fraction: want a number in [0, 1], not '%s'", v);
            o->test_fraction = t;
        } else if (strcmp(f, "--out") == 0) {
            if (*v == '\0')
                return bad_usage("--out: want a file name prefix%s", "");
            o->prefix = v;
        } else {
            return bad_usage("unknown flag '%s'", f);
        }
    }
    if (o->examples == 0 || o->features == 0 || o->prefix == NULL)
        return bad_usage("--examples, --features and --out are required%s", "");
    if (o->nnz > o->features)
        return bad_usage("--nnz cannot exceed --features%s", "");
    return 0;
}

/* ---- generation -------------------------------------------------------------- */

static int open_out(out *o, const char *prefix, const char *suffix, char **path)
{
    size_t len = strlen(prefix) + strlen(suffix) + 1;
    *path = malloc(len);
    o->buf = malloc(OUTBUF);
    o->len = 0;
    o->failed = 0;
    o->err = 0;
    o->fp = NULL;
    if (*path == NULL || o->buf == NULL) {
        fprintf(stderr, "pskv-gen-sparse: out of memory\n");
        return -1;
    }
    snprintf(*path, len, "%s%s", prefix, suffix);
    o->path = *path;
    o->fp = fopen(*path, "w");
    if (o->fp == NULL) {
        fprintf(stderr, "pskv-gen-sparse: cannot write %s: %s\n", *path, strerror(errno));
        return -1;
    }
    return 0;
}

static int close_out(out *o)
{
    int bad = 0;
    if (o->fp != NULL) {
        out_flush(o);
        if (fclose(o->fp) != 0 && !o->failed) {
            o->failed = 1;
            o->err = errno;
        }
        bad = o->failed;
        if (bad)
            fprintf(stderr, "pskv-gen-sparse: cannot write %s: %s\n", o->path,
                    strerror(o->err != 0 ? o->err : EIO));
    }
    free(o->buf);
    o->fp = NULL;
    o->buf = NULL;
    return bad ? -1 : 0;
}

/* One drawn feature of the current example. */
typedef struct feat {
    uint64_t id;
    uint32_t hundredths;    /* value x 100 (100 for a binary feature) */
    float w;
} feat;

static int cmp_feat(const void *a, const void *b)
{
    uint64_t x = ((const feat *)a)->id, y = ((const feat *)b)->id;
    return x < y ? -1 : x > y;
}

/* Sorts f[0..n) by id, f[0..sorted) being sorted and distinct already, and drops
 * repeated ids; returns the new count. Insertion for the usual few features; for
 * many, the new ones are sorted apart and merged through tmp (room for n). */
static uint32_t sort_unique(feat *f, uint32_t sorted, uint32_t n, feat *tmp)
{
    if (n <= 64) {
        for (uint32_t i = sorted; i < n; i++) {
            feat x = f[i];
            uint32_t j = i;
            for (; j > 0 && f[j - 1].id > x.id; j--)
                f[j] = f[j - 1];
            f[j] = x;
        }
        uint32_t u = 0;
        for (uint32_t i = 0; i < n; i++)
            if (u == 0 || f[u - 1].id != f[i].id)
                f[u++] = f[i];
        return u;
    }
    qsort(f + sorted, n - sorted, sizeof *f, cmp_feat);
    uint32_t i = 0, j = sorted, u = 0;
    while (i < sorted || j < n) {
        const feat *x = j >= n || (i < sorted && f[i].id <= f[j].id) ? &f[i++] : &f[j++];
        if (u == 0 || tmp[u - 1].id != x->id)
            tmp[u++] = *x;
    }
    memcpy(f, tmp, u * sizeof *f);
    return u;
}

/* Fills f (room for k; tmp is scratch as big) with k distinct features sorted by id, fewer if F is so
 * small that k distinct ones take too many draws; returns how many, or -1 out of
 * memory. The ranks go to the distinct count unless tail is NULL. Ranks are drawn
 * a batch at a time and their table entries prefetched: the hot table and the
 * bitmap are too big for the caches and each draw lands at random. */
static int draw_example(model *m, tailset *tail, rng *r, uint32_t k, uint64_t *ranks,
                        feat *f, feat *tmp)
{
    uint32_t n = 0, tries = 0, max_tries = 64 * k + 1000;
    uint32_t stamp = ++m->stamp;
    while (n < k && tries < max_tries) {
        uint32_t batch = k - n, added = 0;
        for (uint32_t b = 0; b < batch; b++) {
            uint64_t rank = draw_rank(m, r);
            ranks[b] = rank;
            if (rank <= m->nhot)
                __builtin_prefetch(&m->hot[rank], 1);
            else if (tail != NULL && tail->bits != NULL)
                __builtin_prefetch(&tail->bits[rank >> 6], 1);
        }
        tries += batch;
        for (uint32_t b = 0; b < batch; b++) {
            uint64_t rank = ranks[b];
            feat *x = &f[n + added];
            int real;
            if (rank <= m->nhot) {
                /* Hot ranks repeat often: the stamp drops a repeat before any sort. */
                struct hot *h = &m->hot[rank];
                if (h->stamp == stamp)
                    continue;
                h->stamp = stamp;
                x->id = h->bits & HOT_ID_MASK;
                x->w = h->w;
                real = (h->bits & HOT_REAL) != 0;
                if (tail != NULL)
                    h->bits |= HOT_SEEN;
            } else {
                x->id = rank_to_id(m, rank);
                x->w = id_weight(m, x->id);
                real = id_is_real(m->seed, x->id);
                if (tail != NULL && tail_add(tail, rank) != 0)
                    return -1;
            }
            x->hundredths = real ? 5 + (uint32_t)(rng_next(r) % 296) : 100;
            added++;
        }
        n = sort_unique(f, n, n + added, tmp);
    }
    return (int)n;
}

/* Appends one LIBSVM line; the caller made room for it. */
static void put_line(out *dst, int label, const feat *f, int n)
{
    char *p = dst->buf + dst->len;
    *p++ = label ? '+' : '-';
    *p++ = '1';
    for (int j = 0; j < n; j++) {
        *p++ = ' ';
        p = put_u64(p, f[j].id);
        *p++ = ':';
        uint32_t h = f[j].hundredths;
        if (h == 100) {
            *p++ = '1';
        } else {
            p = put_u64(p, h / 100);
            *p++ = '.';
            *p++ = (char)('0' + h / 10 % 10);
            *p++ = (char)('0' + h % 10);
        }
    }
    *p++ = '\n';
    dst->len = (size_t)(p - dst->buf);
}

static double planted_score(const model *m, const feat *f, int n)
{
    double z = m->bias;
    for (int j = 0; j < n; j++)
        z += f[j].w * (f[j].hundredths / 100.0);
    return z;
}

/* Writes every example; test scores and labels go to *sc for the AUC. Returns 0,
 * or -1 out of memory (said on stderr); write errors are left in train and test. */
static int generate(const opts *o, model *m, out *train, out *test, tailset *tail,
                    uint64_t *ntrain, uint64_t *ntest, auc_item **sc, size_t *nsc)
{
    uint32_t k = (uint32_t)o->nnz;
    feat *f = malloc((k + 1) * sizeof *f), *tmp = malloc((k + 1) * sizeof *tmp);
    uint64_t *ranks = malloc(k * sizeof *ranks);
    uint64_t t32 = (uint64_t)ceil(o->test_fraction * 4294967296.0);
    size_t cap_sc = (size_t)((double)o->examples * o->test_fraction) + 16;
    *sc = malloc(cap_sc * sizeof **sc);
    *nsc = 0;
    int rc = -1;
    if (f == NULL || tmp == NULL || ranks == NULL || *sc == NULL)
        goto done;
    /* space, up to 16 digits of id (F <= 2^52), ':' and up to 4 of value */
    size_t line_max = 8 + (size_t)k * 24;

    /* The hot features' weights shift every score alike; a pilot sample, from its own
     * stream and not counted, measures that shift so the bias can cancel it and the
     * classes come out roughly balanced. */
    rng pilot;
    rng_seed(&pilot, o->seed ^ 0x8cb92ba72f3d8dd7ULL);
    double sum = 0;
    int pilot_n = PILOT_FEATURES / (int)k;
    pilot_n = pilot_n > PILOT ? PILOT : pilot_n < 16 ? 16 : pilot_n;
    for (int e = 0; e < pilot_n; e++) {
        int n = draw_example(m, NULL, &pilot, k, ranks, f, tmp);
        sum += planted_score(m, f, n) - m->bias;
    }
    m->bias = 0.25 * id_normal(o->seed, 0) - sum / pilot_n;

    rng r;
    rng_seed(&r, o->seed ^ 0xd1b54a32d192ed03ULL);
    for (uint64_t e = 0; e < o->examples && !train->failed && !test->failed; e++) {
        int n = draw_example(m, tail, &r, k, ranks, f, tmp);
        if (n < 0)
            goto done;
        double z = planted_score(m, f, n);
        int label = unit_open(rng_next(&r)) < 1.0 / (1.0 + exp(-z));
        int is_test = (uint64_t)(((unsigned __int128)(e + 1) * t32) >> 32) >
                      (uint64_t)(((unsigned __int128)e * t32) >> 32);
        if (is_test) {
            if (*nsc == cap_sc) {
                auc_item *g = realloc(*sc, 2 * cap_sc * sizeof *g);
                if (g == NULL)
                    goto done;
                *sc = g;
                cap_sc *= 2;
            }
            (*sc)[(*nsc)++] = (auc_item){z, label};
            (*ntest)++;
        } else {
            (*ntrain)++;
        }
        out *dst = is_test ? test : train;
        if (dst->len + line_max > OUTBUF)
            out_flush(dst);
        put_line(dst, label, f, n);
    }
    rc = 0;
done:
    if (rc != 0)
        fprintf(stderr, "pskv-gen-sparse: out of memory\n");
    free(f);
    free(tmp);
    free(ranks);
    return rc;
}

int main(int argc, char **argv)
{
    opts o;
    int rc = parse_flags(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : rc;

    model m;
    tailset tail = {NULL, NULL, 0, 0};
    out train = {0}, test = {0};
    char *train_path = NULL, *test_path = NULL;
    auc_item *sc = NULL;
    size_t nsc = 0;
    uint64_t ntrain = 0, ntest = 0;
    int status = 1;
    if (model_init(&m, o.features, o.seed, (uint32_t)o.nnz) != 0 || tail_init(&tail, o.features)) {
        fprintf(stderr, "pskv-gen-sparse: out of memory\n");
        goto done;
    }
    if (open_out(&train, o.prefix, ".train", &train_path) != 0 ||
        open_out(&test, o.prefix, ".test", &test_path) != 0)
        goto done;
    if (generate(&o, &m, &train, &test, &tail, &ntrain, &ntest, &sc, &nsc) != 0)
        goto done;
    int wrote = close_out(&train);
    wrote |= close_out(&test);
    if (wrote != 0)
        goto done;

    uint64_t distinct = tail.count;
    for (uint32_t r = 1; r <= m.nhot; r++)
        distinct += (m.hot[r].bits & HOT_SEEN) != 0;
    printf("train_examples=%llu test_examples=%llu distinct_features=%llu\n",
           (unsigned long long)ntrain, (unsigned long long)ntest, (unsigned long long)distinct);
    printf("planted_auc=%.4f\n", auc_rank_sum(sc, nsc));
    status = fflush(stdout) == 0 ? 0 : 1;
done:
    close_out(&train);
    close_out(&test);
    free(train_path);
    free(test_path);
    free(sc);
    tail_fini(&tail);
    model_fini(&m);
    return status;
}
