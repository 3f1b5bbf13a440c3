/* idx reader. Both files are opened and their headers checked before any data is
 * read; the labels are read first (small, and reading them proves the file really
 * holds the rows its header claims) so that the float matrix is allocated only for
 * a count backed by data. Images stream row by row through one scratch row: the
 * rows of other shards are decompressed and dropped, never stored. */
#define _POSIX_C_SOURCE 200809L
#include "idx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "log.h"
#include "pskv_errors.h"

enum {
    IDX_MAGIC_LABELS = 0x00000801,  /* idx1: unsigned bytes, one dimension */
    IDX_MAGIC_IMAGES = 0x00000803,  /* idx3: unsigned bytes, three dimensions */
    IDX_MAX_DIM = 1 << 20,          /* pixels per image we accept */
    IDX_MAX_LABEL = 9,
    LABEL_CHUNK = 1 << 16,
};

/* An open gzip file and its path, for messages. */
typedef struct gzin {
    gzFile gz;
    const char *path;
    uint64_t pos;   /* bytes of data read so far */
} gzin;

/* zlib's message, without the "<fd:N>: " that gzdopen puts before it. */
static const char *gz_msg(gzin *f, int *err)
{
    const char *msg = gzerror(f->gz, err);
    if (*err == Z_ERRNO)
        return strerror(errno);
    if (strncmp(msg, "<fd:", 4) == 0 && strstr(msg, ": ") != NULL)
        msg = strstr(msg, ": ") + 2;
    return msg;
}

static int gz_open(gzin *f, const char *path, char *why, size_t whylen)
{
    f->gz = NULL;
    f->path = path;
    f->pos = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        log_why(why, whylen, "%s: %s", path, strerror(e));
        return e == ENOENT || e == ENOTDIR ? -PSKV_ENOTFOUND : -PSKV_EIO;
    }
    f->gz = gzdopen(fd, "rb");
    if (f->gz == NULL) {
        close(fd);
        log_why(why, whylen, "%s: cannot start gzip decoding (out of memory)", path);
        return -PSKV_ENOMEM;
    }
    gzbuffer(f->gz, 1 << 17);
    return 0;
}

static void gz_close(gzin *f)
{
    if (f->gz != NULL)
        gzclose_r(f->gz);
    f->gz = NULL;
}

/* Reads exactly len bytes; `what` says what was being read for the message. */
static int gz_read_full(gzin *f, void *buf, size_t len, const char *what, char *why,
                        size_t whylen)
{
    unsigned char *p = buf;
    size_t got = 0;
    while (got < len) {
        size_t want = len - got;
        if (want > (1u << 30))
            want = 1u << 30;
        int r = gzread(f->gz, p + got, (unsigned)want);
        if (r <= 0) {
            int err = Z_OK;
            const char *msg = gz_msg(f, &err);
            if (r < 0 || (err != Z_OK && err != Z_STREAM_END))
                log_why(why, whylen, "%s: gzip error in %s: %s", f->path, what, msg);
            else
                log_why(why, whylen, "%s: truncated: the data ends at byte %llu, inside %s",
                    f->path, (unsigned long long)(f->pos + got), what);
            return -PSKV_EIO;
        }
        got += (size_t)r;
    }
    f->pos += got;
    return 0;
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* Reads the header of an idx file: magic, then `ndims` big-endian counts. zlib reads
 * a file without a gzip header as plain bytes; the header says gzip, so refuse it. */
static int read_header(gzin *f, uint32_t magic, uint32_t *dims, int ndims, char *why,
                       size_t whylen)
{
    unsigned char b[16];
    int rc = gz_read_full(f, b, 4 * (size_t)(ndims + 1), "the header", why, whylen);
    if (rc != 0)
        return rc;
    if (gzdirect(f->gz)) {
        log_why(why, whylen, "%s: not a gzip file", f->path);
        return -PSKV_EIO;
    }
    uint32_t m = be32(b);
    if (m != magic) {
        log_why(why, whylen, "%s: bad magic 0x%08x (want 0x%08x for idx%d)", f->path, (unsigned)m,
            (unsigned)magic, ndims);
        return -PSKV_EIO;
    }
    for (int i = 0; i < ndims; i++)
        dims[i] = be32(b + 4 * (i + 1));
    return 0;
}

/* After the last row of a file read in full, the stream must end there: a byte more
 * means the header lies, and reaching the end checks the gzip CRC and length. */
static int expect_end(gzin *f, const char *what, char *why, size_t whylen)
{
    unsigned char c;
    int r = gzread(f->gz, &c, 1);
    if (r > 0) {
        log_why(why, whylen, "%s: data after the last %s the header announces", f->path, what);
        return -PSKV_EIO;
    }
    int err = Z_OK;
    const char *msg = gz_msg(f, &err);
    if (r < 0 || (err != Z_OK && err != Z_STREAM_END)) {
        log_why(why, whylen, "%s: gzip error at the end of the data: %s", f->path, msg);
        return -PSKV_EIO;
    }
    return 0;
}

/* Rows i < m with i % nshards == shard. */
static uint32_t shard_rows(uint32_t m, uint32_t shard, uint32_t nshards)
{
    return m > shard ? (m - shard - 1) / nshards + 1 : 0;
}

/* The rows a load keeps: lo <= i < hi and (i - lo) % nshards == shard. */
typedef struct rowsel {
    uint32_t lo, hi, shard, nshards;
} rowsel;

static int kept(const rowsel *s, uint32_t i)
{
    return i >= s->lo && i < s->hi && (i - s->lo) % s->nshards == s->shard;
}

static int read_labels(gzin *f, uint32_t m, const rowsel *sel, uint8_t *y, char *why,
                       size_t whylen)
{
    unsigned char *buf = malloc(LABEL_CHUNK);
    if (buf == NULL) {
        log_why(why, whylen, "%s: out of memory", f->path);
        return -PSKV_ENOMEM;
    }
    int rc = 0;
    uint32_t nkept = 0;
    for (uint32_t base = 0; base < m && rc == 0;) {
        uint32_t len = m - base < LABEL_CHUNK ? m - base : LABEL_CHUNK;
        rc = gz_read_full(f, buf, len, "label data", why, whylen);
        for (uint32_t j = 0; j < len && rc == 0; j++) {
            uint32_t i = base + j;
            if (buf[j] > IDX_MAX_LABEL) {
                log_why(why, whylen, "%s: label %u of row %u is above %d", f->path,
                    (unsigned)buf[j], (unsigned)i, IDX_MAX_LABEL);
                rc = -PSKV_EIO;
            } else if (kept(sel, i)) {
                y[nkept++] = buf[j];
            }
        }
        base += len;
    }
    free(buf);
    return rc;
}

static int read_images(gzin *f, uint32_t m, uint32_t dim, const rowsel *sel, float *x,
                       char *why, size_t whylen)
{
    unsigned char *row = malloc(dim);
    if (row == NULL) {
        log_why(why, whylen, "%s: out of memory", f->path);
        return -PSKV_ENOMEM;
    }
    int rc = 0;
    float *out = x;
    for (uint32_t i = 0; i < m && rc == 0; i++) {
        rc = gz_read_full(f, row, dim, "image data", why, whylen);
        if (rc == 0 && kept(sel, i)) {
            for (uint32_t j = 0; j < dim; j++)
                out[j] = (float)row[j] / 255.0f;
            out += dim;
        }
    }
    free(row);
    return rc;
}

static int load(gzin *img, gzin *lab, uint32_t shard, uint32_t nshards, uint32_t limit,
                uint32_t holdout, int held, idx_set *out, char *why, size_t whylen)
{
    uint32_t idims[3], ldims[1];
    int rc = read_header(img, IDX_MAGIC_IMAGES, idims, 3, why, whylen);
    if (rc == 0)
        rc = read_header(lab, IDX_MAGIC_LABELS, ldims, 1, why, whylen);
    if (rc != 0)
        return rc;
    uint64_t dim = (uint64_t)idims[1] * idims[2];
    if (dim == 0 || dim > IDX_MAX_DIM) {
        log_why(why, whylen, "%s: bad image size %ux%u (pixels must be 1..%d)", img->path,
            (unsigned)idims[1], (unsigned)idims[2], IDX_MAX_DIM);
        return -PSKV_EIO;
    }
    if (idims[0] != ldims[0]) {
        log_why(why, whylen, "%s holds %u images but %s holds %u labels", img->path,
            (unsigned)idims[0], lab->path, (unsigned)ldims[0]);
        return -PSKV_EIO;
    }
    uint32_t m = idims[0];
    if (holdout >= m) {
        log_why(why, whylen, "%s holds %u rows: a hold-out of %u leaves none to train on",
                img->path, (unsigned)m, (unsigned)holdout);
        return -PSKV_EINVAL;
    }
    rowsel sel = {held ? m - holdout : 0, held ? m : m - holdout, shard, nshards};
    if (limit && limit < sel.hi - sel.lo)
        sel.hi = sel.lo + limit;
    int whole = sel.hi == m; /* read to the end: checked for data after the last row */
    m = sel.hi;
    uint32_t n = shard_rows(sel.hi - sel.lo, shard, nshards);

    /* One byte more so that an empty shard still gets a distinct, freeable pointer. */
    uint8_t *y = malloc((size_t)n + 1);
    if (y == NULL) {
        log_why(why, whylen, "%s: out of memory for %u labels", lab->path, (unsigned)n);
        return -PSKV_ENOMEM;
    }
    rc = read_labels(lab, m, &sel, y, why, whylen);
    if (rc == 0 && whole)
        rc = expect_end(lab, "label", why, whylen);
    if (rc != 0) {
        free(y);
        return rc;
    }
    if ((uint64_t)n * dim > (SIZE_MAX - sizeof(float)) / sizeof(float)) {
        free(y);
        log_why(why, whylen, "%s: %u rows of %u pixels do not fit in memory", img->path,
            (unsigned)n, (unsigned)dim);
        return -PSKV_ENOMEM;
    }
    float *x = malloc((size_t)((uint64_t)n * dim) * sizeof(float) + sizeof(float));
    if (x == NULL) {
        free(y);
        log_why(why, whylen, "%s: out of memory for %u rows of %u pixels", img->path,
            (unsigned)n, (unsigned)dim);
        return -PSKV_ENOMEM;
    }
    rc = read_images(img, m, (uint32_t)dim, &sel, x, why, whylen);
    if (rc == 0 && whole)
        rc = expect_end(img, "image", why, whylen);
    if (rc != 0) {
        free(x);
        free(y);
        return rc;
    }
    out->n = n;
    out->file_rows = idims[0];
    out->dim = (uint32_t)dim;
    out->x = x;
    out->y = y;
    return 0;
}

int idx_load(const char *dir, const char *prefix, uint32_t shard, uint32_t nshards,
             uint32_t limit, idx_set *out, char *why, size_t whylen)
{
    return idx_load_split(dir, prefix, shard, nshards, limit, 0, 0, out, why, whylen);
}

int idx_load_split(const char *dir, const char *prefix, uint32_t shard, uint32_t nshards,
                   uint32_t limit, uint32_t holdout, int held, idx_set *out, char *why,
                   size_t whylen)
{
    log_why(why, whylen, "%s", "");
    if (out == NULL || dir == NULL || prefix == NULL || nshards == 0 || shard >= nshards) {
        log_why(why, whylen, "idx_load: bad arguments (shard %u of %u)", (unsigned)shard,
            (unsigned)nshards);
        if (out != NULL)
            memset(out, 0, sizeof *out);
        return -PSKV_EINVAL;
    }
    memset(out, 0, sizeof *out);
    size_t plen = strlen(dir) + strlen(prefix) + 32;
    char *ipath = malloc(plen), *lpath = malloc(plen);
    if (ipath == NULL || lpath == NULL) {
        free(ipath);
        free(lpath);
        log_why(why, whylen, "%s: out of memory", dir);
        return -PSKV_ENOMEM;
    }
    snprintf(ipath, plen, "%s/%s-images-idx3-ubyte.gz", dir, prefix);
    snprintf(lpath, plen, "%s/%s-labels-idx1-ubyte.gz", dir, prefix);

    gzin img = {NULL, ipath, 0}, lab = {NULL, lpath, 0};
    int rc = gz_open(&img, ipath, why, whylen);
    if (rc == 0)
        rc = gz_open(&lab, lpath, why, whylen);
    if (rc == 0)
        rc = load(&img, &lab, shard, nshards, limit, holdout, held, out, why, whylen);
    gz_close(&img);
    gz_close(&lab);
    free(ipath);
    free(lpath);
    if (rc == 0)
        log_why(why, whylen, "%s", "");
    return rc;
}

void idx_free(idx_set *s)
{
    if (s == NULL)
        return;
    free(s->x);
    free(s->y);
    memset(s, 0, sizeof *s);
}

void idx_gather(const idx_set *s, const uint32_t *order, uint32_t n, float *x, uint8_t *y)
{
    for (uint32_t b = 0; b < n; b++) {
        memcpy(x + (size_t)b * s->dim, s->x + (size_t)order[b] * s->dim, s->dim * sizeof(float));
        y[b] = s->y[order[b]];
    }
}

void idx_prefetch(const idx_set *s, const uint32_t *order, uint32_t n)
{
    size_t bytes = s->dim * sizeof(float);
    for (uint32_t b = 0; b < n; b++) {
        const char *row = (const char *)(s->x + (size_t)order[b] * s->dim);
        for (size_t o = 0; o < bytes; o += 64)
            __builtin_prefetch(row + o, 0, 0);
    }
}
