/* LIBSVM reader. The file streams through getline, one reused buffer; each line of
 * this shard is parsed in place into CSR arrays that grow geometrically, so nothing
 * is allocated per feature. Lines of other shards are only checked for being blank
 * or a comment (that decides the example count), not parsed: a malformed line is
 * reported by the worker whose shard holds it.
 *
 * Numbers: indices are parsed by hand (strtoull would accept spaces, '+' and a '-'
 * that wraps around). Values like "1", "-0.25" or "3.5e-3" take Clinger's fast
 * path: with at most 15 significant digits and a decimal exponent within +-22, the
 * mantissa and the power of ten are exact doubles and one multiplication or
 * division rounds correctly, which is what strtod returns. Anything else (long
 * mantissas, big exponents, hex, "nan") goes to strtod itself.
 * strtod reads the decimal point of LC_NUMERIC; pskv never calls setlocale, so that
 * is the C locale's '.'. */
#define _POSIX_C_SOURCE 200809L
#include "libsvm.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "grow.h"
#include "log.h"
#include "pskv_errors.h"

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Where the parse of a line stands, for messages. */
typedef struct where {
    const char *path;
    size_t line;        /* 1-based */
    const char *start;  /* first byte of the line */
    char *why;
    size_t whylen;
} where;

static int bad(const where *w, const char *at, const char *fmt, ...)
{
    if (w->why != NULL && w->whylen > 0) {
        int k = snprintf(w->why, w->whylen, "%s:%zu:%zu: ", w->path, w->line,
                         (size_t)(at - w->start) + 1);
        if (k >= 0 && (size_t)k < w->whylen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(w->why + k, w->whylen - (size_t)k, fmt, ap);
            va_end(ap);
        }
    }
    return -PSKV_EIO;
}

static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Parses a number starting at p that must end at whitespace or `end`. Returns the
 * byte after it, or NULL when it is not a number. */
static const char *parse_double(const char *p, const char *end, double *out)
{
    const char *q = p;
    int neg = 0;
    if (q < end && (*q == '-' || *q == '+'))
        neg = *q++ == '-';
    uint64_t m = 0;
    int digits = 0, sig = 0, decimals = 0;
    for (; q < end && *q >= '0' && *q <= '9'; q++, digits++) {
        m = m * 10 + (uint64_t)(*q - '0');
        sig += m != 0;
    }
    if (q < end && *q == '.')
        for (q++; q < end && *q >= '0' && *q <= '9'; q++, digits++, decimals++) {
            m = m * 10 + (uint64_t)(*q - '0');
            sig += m != 0;
        }
    int exp10 = 0, exp_ok = 1;
    if (digits > 0 && q < end && (*q == 'e' || *q == 'E')) {
        const char *x = q + 1;
        int eneg = 0, edigits = 0;
        if (x < end && (*x == '-' || *x == '+'))
            eneg = *x++ == '-';
        for (; x < end && *x >= '0' && *x <= '9'; x++, edigits++)
            if (exp10 < 10000)
                exp10 = exp10 * 10 + (*x - '0');
        exp_ok = edigits > 0;
        exp10 = eneg ? -exp10 : exp10;
        q = x;
    }
    /* Clinger's fast path: mantissa and power of ten exact, one rounding. */
    int e = exp10 - decimals;
    if (digits > 0 && exp_ok && sig <= 15 && e >= -22 && e <= 22 && (q == end || is_ws(*q))) {
        double v = e >= 0 ? (double)m * pow10_exact[e] : (double)m / pow10_exact[-e];
        *out = neg ? -v : v;
        return q;
    }
    /* strtod stops at whitespace, '#' or the NUL getline puts after the line. */
    char *stop;
    errno = 0;
    double v = strtod(p, &stop);
    if (stop == p || (stop < end && !is_ws(*stop)))
        return NULL;
    *out = v;
    return stop;
}

/* CSR arrays under construction, with their capacities. */
typedef struct csr {
    libsvm_set s;
    size_t cap_n;    /* entries of y */
    size_t cap_off;  /* entries of off (one more than examples) */
    size_t cap_nnz;  /* entries of idx and of val */
} csr;

static int grow_nnz(csr *c, size_t need)
{
    size_t cap = c->cap_nnz;
    int rc = grow_array((void **)&c->s.idx, &cap, need, sizeof *c->s.idx);
    if (rc == 0) {
        cap = c->cap_nnz;
        rc = grow_array((void **)&c->s.val, &cap, need, sizeof *c->s.val);
    }
    if (rc == 0)
        c->cap_nnz = cap;
    return rc;
}

static int grow_n(csr *c, size_t need)
{
    int rc = grow_array((void **)&c->s.y, &c->cap_n, need, sizeof *c->s.y);
    if (rc == 0)
        rc = grow_array((void **)&c->s.off, &c->cap_off, need + 1, sizeof *c->s.off);
    return rc;
}

/* Parses one example: p..end holds the line without its comment, and p is at its
 * first non-blank byte. */
static int parse_line(csr *c, const where *w, const char *p, const char *end,
                      uint64_t max_idx)
{
    double label;
    const char *q = parse_double(p, end, &label);
    if (q == NULL || !isfinite(label))
        return bad(w, p, "bad label (want a number such as 1, -1 or 0)");
    if (grow_n(c, c->s.n + 1) != 0)
        return -PSKV_ENOMEM;
    size_t nnz = c->s.nnz;
    uint64_t top = c->s.max_idx;
    for (p = q;;) {
        while (p < end && is_ws(*p))
            p++;
        if (p == end)
            break;
        const char *tok = p;
        uint64_t id = 0;
        for (; p < end && *p >= '0' && *p <= '9'; p++) {
            unsigned d = (unsigned)(*p - '0');
            if (id > (UINT64_MAX - d) / 10)
                return bad(w, tok, "feature index too large");
            id = id * 10 + d;
        }
        if (p == end || *p != ':') {
            if (p > tok && (p == end || is_ws(*p)))
                return bad(w, tok, "missing ':' after the feature index");
            return bad(w, tok, "bad feature index (want idx:value with idx a positive "
                               "integer)");
        }
        if (p == tok)
            return bad(w, tok, "missing feature index before ':'");
        if (id == 0)
            return bad(w, tok, "feature index 0 (indices start at 1)");
        if (max_idx > 0 && id > max_idx)
            return bad(w, tok, "feature index %llu above the maximum %llu",
                       (unsigned long long)id, (unsigned long long)max_idx);
        const char *vs = ++p;
        if (p == end || is_ws(*p))
            return bad(w, vs, "missing value after ':'");
        double v;
        p = parse_double(p, end, &v);
        if (p == NULL)
            return bad(w, vs, "bad feature value");
        float f = (float)v;
        if (!isfinite(v))
            return bad(w, vs, "non-finite feature value");
        if (!isfinite(f))
            return bad(w, vs, "feature value out of float range");
        if (nnz + 1 > c->cap_nnz && grow_nnz(c, nnz + 1) != 0)
            return -PSKV_ENOMEM;
        c->s.idx[nnz] = id;
        c->s.val[nnz] = f;
        nnz++;
        if (id > top)
            top = id;
    }
    c->s.y[c->s.n] = label > 0 ? 1.0f : 0.0f;
    c->s.n++;
    c->s.off[c->s.n] = nnz;
    c->s.nnz = nnz;
    c->s.max_idx = top;
    return 0;
}

/* Gives back the spare capacity; a failing shrink keeps the larger block. */
static void shrink(void **p, size_t count, size_t elem)
{
    void *np = realloc(*p, (count > 0 ? count : 1) * elem);
    if (np != NULL)
        *p = np;
}

/* Opens path for reading, with a large stdio buffer (getline reads through it: it
 * saves read calls). NULL with *rc and why on failure. */
static FILE *open_svm(const char *path, int *rc, char *why, size_t whylen)
{
    FILE *fp = fopen(path, "r");
    if (fp == NULL) {
        int e = errno;
        log_why(why, whylen, "%s: %s", path, strerror(e));
        *rc = e == ENOENT || e == ENOTDIR ? -PSKV_ENOTFOUND : -PSKV_EIO;
        return NULL;
    }
    setvbuf(fp, NULL, _IOFBF, 1 << 20);
    return fp;
}

/* The example in line[0..len): *p and *end around it, the comment and leading
 * blanks left out. 0 for a blank or comment-only line (not an example). */
static int example_text(const char *line, ssize_t len, const char **p, const char **end)
{
    const char *hash = memchr(line, '#', (size_t)len);
    *p = line;
    *end = hash != NULL ? hash : line + len;
    while (*p < *end && is_ws(**p))
        (*p)++;
    return *p < *end;
}

/* Examples e in [lo, hi) with e % nshards == shard. */
static int load_range(const char *path, uint32_t shard, uint32_t nshards, uint64_t max_idx,
                      uint64_t lo, uint64_t hi, libsvm_set *out, char *why, size_t whylen)
{
    log_why(why, whylen, "%s", "");
    if (out == NULL || path == NULL || nshards == 0 || shard >= nshards) {
        log_why(why, whylen, "libsvm_load: bad arguments (shard %u of %u)", (unsigned)shard,
            (unsigned)nshards);
        if (out != NULL)
            memset(out, 0, sizeof *out);
        return -PSKV_EINVAL;
    }
    memset(out, 0, sizeof *out);
    int rc = 0;
    FILE *fp = open_svm(path, &rc, why, whylen);
    if (fp == NULL)
        return rc;

    csr c;
    memset(&c, 0, sizeof c);
    rc = grow_n(&c, 1);
    if (rc == 0)
        c.s.off[0] = 0;
    char *line = NULL;
    size_t cap = 0;
    uint64_t example = 0;
    where w = {path, 0, NULL, why, whylen};
    while (rc == 0) {
        errno = 0;
        ssize_t len = getline(&line, &cap, fp);
        if (len < 0) {
            if (ferror(fp)) {
                int e = errno != 0 ? errno : EIO;
                rc = e == ENOMEM ? -PSKV_ENOMEM : -PSKV_EIO;
                log_why(why, whylen, "%s:%zu: read error: %s", path, w.line + 1, strerror(e));
            }
            break;
        }
        w.line++;
        const char *p, *end;
        if (!example_text(line, len, &p, &end))
            continue;
        uint64_t e = example++;
        if (e < lo || e >= hi || e % nshards != shard)
            continue;
        w.start = line;
        rc = parse_line(&c, &w, p, end, max_idx);
        if (rc == -PSKV_ENOMEM)
            log_why(why, whylen, "%s:%zu: out of memory after %zu examples", path, w.line,
                c.s.n);
    }
    if (rc == -PSKV_ENOMEM && why != NULL && why[0] == '\0')
        log_why(why, whylen, "%s: out of memory", path);
    free(line);
    fclose(fp);
    if (rc != 0) {
        libsvm_free(&c.s);
        return rc;
    }
    shrink((void **)&c.s.off, c.s.n + 1, sizeof *c.s.off);
    shrink((void **)&c.s.y, c.s.n, sizeof *c.s.y);
    shrink((void **)&c.s.idx, c.s.nnz, sizeof *c.s.idx);
    shrink((void **)&c.s.val, c.s.nnz, sizeof *c.s.val);
    c.s.lines = w.line;
    c.s.examples = example;
    *out = c.s;
    return 0;
}

int libsvm_load(const char *path, uint32_t shard, uint32_t nshards, uint64_t max_idx,
                libsvm_set *out, char *why, size_t whylen)
{
    return load_range(path, shard, nshards, max_idx, 0, UINT64_MAX, out, why, whylen);
}

int libsvm_count(const char *path, uint64_t *n, char *why, size_t whylen)
{
    int rc = 0;
    FILE *fp = open_svm(path, &rc, why, whylen);
    if (fp == NULL)
        return rc;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    *n = 0;
    while ((len = getline(&line, &cap, fp)) >= 0) {
        const char *p, *end;
        *n += example_text(line, len, &p, &end);
    }
    rc = ferror(fp) ? -PSKV_EIO : 0;
    if (rc)
        log_why(why, whylen, "%s: read error", path);
    free(line);
    fclose(fp);
    return rc;
}

int libsvm_load_split(const char *path, uint32_t shard, uint32_t nshards, uint64_t max_idx,
                      uint64_t holdout, int held, libsvm_set *out, char *why, size_t whylen)
{
    if (holdout == 0)
        return held ? load_range(path, 0, 1, max_idx, 0, 0, out, why, whylen)
                    : libsvm_load(path, shard, nshards, max_idx, out, why, whylen);
    uint64_t n;
    memset(out, 0, sizeof *out);
    int rc = libsvm_count(path, &n, why, whylen);
    if (rc < 0)
        return rc;
    if (holdout >= n) {
        log_why(why, whylen, "%s holds %llu examples: cannot hold out the last %llu", path,
                (unsigned long long)n, (unsigned long long)holdout);
        return -PSKV_EINVAL;
    }
    return held ? load_range(path, 0, 1, max_idx, n - holdout, n, out, why, whylen)
                : load_range(path, shard, nshards, max_idx, 0, n - holdout, out, why, whylen);
}

void libsvm_free(libsvm_set *s)
{
    if (s == NULL)
        return;
    free(s->off);
    free(s->y);
    free(s->idx);
    free(s->val);
    memset(s, 0, sizeof *s);
}
