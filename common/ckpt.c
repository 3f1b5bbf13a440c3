/* Checkpoint writer and reader (format in ckpt.h).
 *
 * The writer streams every byte through one buffer and keeps a running CRC of
 * what it has appended, so a record bigger than the buffer goes to the file
 * straight from the caller's memory and is never copied. A held writer instead
 * grows its buffer to the whole file and leaves the CRC and every write to the
 * commit, which may then run on another thread. The reader maps the
 * file, finds the trailer in the last 32 bytes and checks the CRC before it
 * believes any length field; only a file that fails that check is walked
 * record by record, to say where it was cut off. */
#define _POSIX_C_SOURCE 200809L
#include "ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "log.h"
#include "pskv_errors.h"

#define MAGIC "PSKVCKP1"
#define MAGIC_LEN 8u
#define HDR_LEN 16u                    /* tag, reserved, len */
#define TRAILER_LEN (HDR_LEN + 16u)    /* header + count, crc, 0 */
#define BUF_SIZE ((size_t)1 << 20)     /* write buffer */
#define IO_CHUNK ((size_t)1 << 30)     /* largest single write() and crc32() */

struct ckpt_writer {
    int fd;         /* the temp file; -1 once closed */
    int failed;     /* an I/O error happened: the file is unusable */
    char *tmp;      /* <dir>/<name>.tmp */
    char *final;    /* <dir>/<name> */
    char *dir;      /* for the fsync after the rename */
    unsigned char *buf;
    size_t fill;    /* bytes waiting in buf */
    size_t cap;     /* held: bytes buf has room for */
    int held;       /* keep the whole file in buf until the commit */
    uint64_t off;   /* bytes appended so far (written or buffered) */
    uint64_t count; /* records appended */
    uLong crc;      /* CRC-32 of the off bytes appended */
};

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static uint64_t pad_of(uint64_t len)
{
    return (8 - (len & 7)) & 7;
}

static uLong crc_add(uLong crc, const unsigned char *p, uint64_t n)
{
    while (n > 0) {
        size_t step = n < IO_CHUNK ? (size_t)n : IO_CHUNK;
        crc = crc32(crc, p, (uInt)step);
        p += step;
        n -= step;
    }
    return crc;
}

static char *join(const char *a, const char *b, const char *c)
{
    size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
    char *s = malloc(n);
    if (s != NULL)
        snprintf(s, n, "%s%s%s", a, b, c);
    return s;
}

/* ---- writer ---------------------------------------------------------------- */

static int write_all(ckpt_writer *w, const unsigned char *p, uint64_t n, char *why,
                     size_t whylen)
{
    uint64_t at = w->off - w->fill; /* file offset of p[0] when flushing the buffer */
    while (n > 0) {
        size_t step = n < IO_CHUNK ? (size_t)n : IO_CHUNK;
        ssize_t k = write(w->fd, p, step);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            log_why(why, whylen, "write %s at byte %" PRIu64 ": %s", w->tmp, at,
                k < 0 ? strerror(errno) : "no progress");
            w->failed = 1;
            return -PSKV_EIO;
        }
        p += k;
        n -= (uint64_t)k;
        at += (uint64_t)k;
    }
    return 0;
}

static int flush(ckpt_writer *w, char *why, size_t whylen)
{
    if (w->fill == 0)
        return 0;
    int rc = write_all(w, w->buf, w->fill, why, whylen);
    w->fill = 0;
    return rc;
}

/* Appends n bytes to the file's logical contents: into the buffer, or straight
 * to the file when they would not fit in an empty buffer. */
static int emit(ckpt_writer *w, const void *p, uint64_t n, char *why, size_t whylen)
{
    if (n == 0)
        return 0;
    if (w->held) { /* the CRC is taken at the commit */
        if (n > w->cap - w->fill) {
            size_t cap = w->cap;
            while (n > cap - w->fill) {
                if (cap > SIZE_MAX / 2) {
                    log_why(why, whylen, "checkpoint %s: too large to hold", w->tmp);
                    w->failed = 1;
                    return -PSKV_ENOMEM;
                }
                cap *= 2;
            }
            unsigned char *g = realloc(w->buf, cap);
            if (g == NULL) {
                log_why(why, whylen, "checkpoint %s: out of memory holding %zu bytes", w->tmp,
                        cap);
                w->failed = 1;
                return -PSKV_ENOMEM;
            }
            w->buf = g;
            w->cap = cap;
        }
        memcpy(w->buf + w->fill, p, (size_t)n);
        w->fill += (size_t)n;
        w->off += n;
        return 0;
    }
    w->crc = crc_add(w->crc, p, n);
    if (n <= BUF_SIZE - w->fill) {
        memcpy(w->buf + w->fill, p, (size_t)n);
        w->fill += (size_t)n;
        w->off += n;
        return 0;
    }
    int rc = flush(w, why, whylen);
    if (rc < 0)
        return rc;
    if (n >= BUF_SIZE) {
        rc = write_all(w, p, n, why, whylen);
        w->off += n;
        return rc;
    }
    memcpy(w->buf, p, (size_t)n);
    w->fill = (size_t)n;
    w->off += n;
    return 0;
}

static void writer_free(ckpt_writer *w)
{
    if (w->fd >= 0)
        close(w->fd);
    free(w->tmp);
    free(w->final);
    free(w->dir);
    free(w->buf);
    free(w);
}

static int begin(ckpt_writer **out, const char *dir, const char *name, int held, char *why,
                 size_t whylen)
{
    *out = NULL;
    if (dir == NULL || name == NULL || dir[0] == '\0' || name[0] == '\0' ||
        strchr(name, '/') != NULL) {
        log_why(why, whylen, "checkpoint: bad directory or file name");
        return -PSKV_EINVAL;
    }
    ckpt_writer *w = calloc(1, sizeof *w);
    if (w == NULL) {
        log_why(why, whylen, "checkpoint %s/%s: out of memory", dir, name);
        return -PSKV_ENOMEM;
    }
    w->fd = -1;
    w->held = held;
    w->cap = BUF_SIZE;
    w->crc = crc32(0L, Z_NULL, 0);
    w->final = join(dir, "/", name);
    w->tmp = w->final != NULL ? join(w->final, ".tmp", "") : NULL;
    w->dir = join(dir, "", "");
    w->buf = malloc(BUF_SIZE);
    if (w->final == NULL || w->tmp == NULL || w->dir == NULL || w->buf == NULL) {
        log_why(why, whylen, "checkpoint %s/%s: out of memory", dir, name);
        writer_free(w);
        return -PSKV_ENOMEM;
    }
    w->fd = open(w->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        log_why(why, whylen, "open %s: %s", w->tmp, strerror(errno));
        writer_free(w);
        return -PSKV_EIO;
    }
    int rc = emit(w, MAGIC, MAGIC_LEN, why, whylen); /* buffered: cannot fail */
    if (rc < 0) {
        ckpt_abort(&w);
        return rc;
    }
    *out = w;
    return 0;
}

int ckpt_begin(ckpt_writer **out, const char *dir, const char *name, char *why, size_t whylen)
{
    return begin(out, dir, name, 0, why, whylen);
}

int ckpt_begin_held(ckpt_writer **out, const char *dir, const char *name, size_t size_hint,
                    char *why, size_t whylen)
{
    int rc = begin(out, dir, name, 1, why, whylen);
    if (rc == 0 && size_hint > (*out)->cap) {
        unsigned char *g = realloc((*out)->buf, size_hint);
        if (g) { /* else it grows as it goes */
            (*out)->buf = g;
            (*out)->cap = size_hint;
        }
    }
    return rc;
}

int ckpt_put2(ckpt_writer *w, uint32_t tag, const void *a, uint64_t alen, const void *b,
              uint64_t blen, char *why, size_t whylen)
{
    if (tag == CKPT_TAG_TRAILER || (a == NULL && alen > 0) || (b == NULL && blen > 0) ||
        alen > UINT64_MAX - 8 - blen) {
        log_why(why, whylen, "checkpoint %s: bad record (tag %" PRIu32 ")", w->tmp, tag);
        return -PSKV_EINVAL;
    }
    if (w->failed) {
        log_why(why, whylen, "checkpoint %s: an earlier write failed", w->tmp);
        return -PSKV_EIO;
    }
    static const unsigned char zero[8];
    unsigned char hdr[HDR_LEN];
    uint64_t len = alen + blen;
    put32(hdr, tag);
    put32(hdr + 4, 0);
    put64(hdr + 8, len);
    int rc = emit(w, hdr, sizeof hdr, why, whylen);
    if (rc == 0)
        rc = emit(w, a, alen, why, whylen);
    if (rc == 0)
        rc = emit(w, b, blen, why, whylen);
    if (rc == 0)
        rc = emit(w, zero, pad_of(len), why, whylen);
    if (rc == 0)
        w->count++;
    return rc;
}

int ckpt_put(ckpt_writer *w, uint32_t tag, const void *data, uint64_t len, char *why,
             size_t whylen)
{
    return ckpt_put2(w, tag, data, len, NULL, 0, why, whylen);
}

int ckpt_commit(ckpt_writer **w_p, char *why, size_t whylen)
{
    ckpt_writer *w = *w_p;
    *w_p = NULL;
    int rc = -PSKV_EIO;
    if (w->failed) {
        log_why(why, whylen, "checkpoint %s: not committed after a failed write", w->tmp);
        goto fail;
    }
    if (w->held) { /* all of it is in buf: checksum it, then write it as usual */
        w->crc = crc_add(w->crc, w->buf, w->fill);
        w->held = 0;
        if (flush(w, why, whylen) < 0)
            goto fail;
    }
    unsigned char tr[TRAILER_LEN];
    put32(tr, CKPT_TAG_TRAILER);
    put32(tr + 4, 0);
    put64(tr + 8, 16);
    put64(tr + 16, w->count);
    put32(tr + 24, (uint32_t)w->crc); /* covers everything before tr */
    put32(tr + 28, 0);
    if (emit(w, tr, sizeof tr, why, whylen) < 0 || flush(w, why, whylen) < 0)
        goto fail;
    if (fsync(w->fd) < 0) {
        log_why(why, whylen, "fsync %s: %s", w->tmp, strerror(errno));
        goto fail;
    }
    int fd = w->fd;
    w->fd = -1;
    if (close(fd) < 0) {
        log_why(why, whylen, "close %s: %s", w->tmp, strerror(errno));
        goto fail;
    }
    if (rename(w->tmp, w->final) < 0) {
        log_why(why, whylen, "rename %s to %s: %s", w->tmp, w->final, strerror(errno));
        goto fail;
    }
    /* The rename is durable only once the directory is: without this a crash
     * can bring back the old checkpoint, or no file at all. */
    rc = 0;
    int dfd = open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        log_why(why, whylen, "open directory %s: %s", w->dir, strerror(errno));
        rc = -PSKV_EIO;
    } else {
        /* EINVAL: the file system cannot sync directories; nothing to do. */
        if (fsync(dfd) < 0 && errno != EINVAL) {
            log_why(why, whylen, "fsync directory %s: %s", w->dir, strerror(errno));
            rc = -PSKV_EIO;
        }
        close(dfd);
    }
    writer_free(w);
    return rc;

fail:
    ckpt_abort(&w);
    return rc;
}

void ckpt_abort(ckpt_writer **w_p)
{
    if (w_p == NULL || *w_p == NULL)
        return;
    ckpt_writer *w = *w_p;
    *w_p = NULL;
    if (w->fd >= 0) {
        close(w->fd);
        w->fd = -1;
    }
    unlink(w->tmp);
    writer_free(w);
}

/* ---- reader ---------------------------------------------------------------- */

/* The fields of a well-formed trailer header at p (its count and CRC aside). */
static int trailer_header_ok(const unsigned char *p)
{
    return get32(p) == CKPT_TAG_TRAILER && get32(p + 4) == 0 && get64(p + 8) == 16;
}

/* Walks the records of a file whose CRC matched, from the magic to the trailer
 * at `end`: checks what the CRC cannot (that the writer framed them right),
 * counts them, and calls fn when it is not NULL. */
static int walk(const unsigned char *b, size_t end, const char *path,
                int (*fn)(void *ctx, uint32_t tag, const void *data, uint64_t len),
                void *ctx, uint64_t *count, char *why, size_t whylen)
{
    size_t pos = MAGIC_LEN;
    uint64_t k = 0;
    while (pos < end) {
        if (end - pos < HDR_LEN) {
            log_why(why, whylen, "%s: corrupt record header at byte %zu", path, pos);
            return -PSKV_EPROTO;
        }
        uint32_t tag = get32(b + pos);
        uint64_t len = get64(b + pos + 8);
        size_t avail = end - pos - HDR_LEN;
        if (tag == CKPT_TAG_TRAILER || get32(b + pos + 4) != 0) {
            log_why(why, whylen, "%s: corrupt record header at byte %zu", path, pos);
            return -PSKV_EPROTO;
        }
        if (len > avail || len + pad_of(len) > avail) {
            log_why(why, whylen, "%s: record %" PRIu64 " at byte %zu: length %" PRIu64
                " runs past the trailer", path, k, pos, len);
            return -PSKV_EPROTO;
        }
        const unsigned char *data = b + pos + HDR_LEN;
        for (uint64_t i = len; i < len + pad_of(len); i++)
            if (data[i] != 0) {
                log_why(why, whylen, "%s: record %" PRIu64 " at byte %zu: padding not zero",
                    path, k, pos);
                return -PSKV_EPROTO;
            }
        if (fn != NULL) {
            int rc = fn(ctx, tag, data, len);
            if (rc < 0)
                return rc;
        }
        pos += HDR_LEN + (size_t)(len + pad_of(len));
        k++;
    }
    *count = k;
    return 0;
}

/* Says why a file with the magic but no valid trailer at its end is refused:
 * a damaged trailer (the stored CRC still matches), data after a trailer, or
 * (usually) a file cut short, with where. */
static int diagnose(const unsigned char *b, size_t size, const char *path, char *why,
                    size_t whylen)
{
    if (size >= MAGIC_LEN + TRAILER_LEN && size % 8 == 0 &&
        get32(b + size - 8) == (uint32_t)crc_add(crc32(0L, Z_NULL, 0), b, size - TRAILER_LEN)) {
        log_why(why, whylen, "%s: corrupt trailer at byte %zu", path, size - TRAILER_LEN);
        return -PSKV_EPROTO;
    }
    size_t pos = MAGIC_LEN;
    uint64_t k = 0;
    while (pos < size) {
        if (size - pos < HDR_LEN) {
            log_why(why, whylen, "%s: truncated at byte %zu (partial record header at byte %zu)",
                path, size, pos);
            return -PSKV_EPROTO;
        }
        uint32_t tag = get32(b + pos);
        uint64_t len = get64(b + pos + 8);
        size_t avail = size - pos - HDR_LEN;
        if (get32(b + pos + 4) != 0) {
            log_why(why, whylen, "%s: corrupt record header at byte %zu", path, pos);
            return -PSKV_EPROTO;
        }
        if (len > avail || len + pad_of(len) > avail) {
            if (tag == CKPT_TAG_TRAILER)
                log_why(why, whylen, "%s: truncated at byte %zu (partial trailer at byte %zu)",
                    path, size, pos);
            else
                log_why(why, whylen, "%s: truncated at byte %zu (record %" PRIu64 " at byte %zu"
                    " has %" PRIu64 " bytes)", path, size, k, pos, len);
            return -PSKV_EPROTO;
        }
        if (tag == CKPT_TAG_TRAILER) {
            if (len == 16)
                log_why(why, whylen, "%s: %zu bytes after the trailer at byte %zu", path,
                    size - pos - TRAILER_LEN, pos);
            else
                log_why(why, whylen, "%s: corrupt trailer at byte %zu", path, pos);
            return -PSKV_EPROTO;
        }
        pos += HDR_LEN + (size_t)(len + pad_of(len));
        k++;
    }
    log_why(why, whylen, "%s: truncated at byte %zu (partial file: no trailer)", path, size);
    return -PSKV_EPROTO;
}

/* Everything ckpt_read checks before it calls fn. */
static int verify(const unsigned char *b, size_t size, const char *path, char *why,
                  size_t whylen)
{
    if (size < MAGIC_LEN || memcmp(b, MAGIC, MAGIC_LEN) != 0) {
        if (size < MAGIC_LEN && memcmp(b, MAGIC, size) == 0)
            log_why(why, whylen, "%s: truncated at byte %zu (partial magic)", path, size);
        else
            log_why(why, whylen, "%s: not a pskv checkpoint (bad magic)", path);
        return -PSKV_EPROTO;
    }
    if (size < MAGIC_LEN + TRAILER_LEN || size % 8 != 0 ||
        !trailer_header_ok(b + size - TRAILER_LEN))
        return diagnose(b, size, path, why, whylen);
    size_t end = size - TRAILER_LEN;
    uint32_t stored = get32(b + size - 8);
    uint32_t computed = (uint32_t)crc_add(crc32(0L, Z_NULL, 0), b, end);
    if (stored != computed) {
        log_why(why, whylen, "%s: checksum mismatch (trailer has %08" PRIx32 ", contents %08"
            PRIx32 ")", path, stored, computed);
        return -PSKV_EPROTO;
    }
    if (get32(b + size - 4) != 0) {
        log_why(why, whylen, "%s: corrupt trailer at byte %zu", path, end);
        return -PSKV_EPROTO;
    }
    uint64_t count = 0;
    int rc = walk(b, end, path, NULL, NULL, &count, why, whylen);
    if (rc < 0)
        return rc;
    if (count != get64(b + size - 16)) {
        log_why(why, whylen, "%s: record count mismatch (trailer says %" PRIu64 ", file holds %"
            PRIu64 ")", path, get64(b + size - 16), count);
        return -PSKV_EPROTO;
    }
    return 0;
}

int ckpt_read(const char *path,
              int (*fn)(void *ctx, uint32_t tag, const void *data, uint64_t len), void *ctx,
              char *why, size_t whylen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        log_why(why, whylen, "open %s: %s", path, strerror(errno));
        return -PSKV_EIO;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        log_why(why, whylen, "stat %s: %s", path, strerror(errno));
        close(fd);
        return -PSKV_EIO;
    }
    if (!S_ISREG(st.st_mode)) {
        log_why(why, whylen, "%s: not a regular file", path);
        close(fd);
        return -PSKV_EIO;
    }
    if (st.st_size == 0) {
        log_why(why, whylen, "%s: truncated at byte 0 (empty file)", path);
        close(fd);
        return -PSKV_EPROTO;
    }
    if ((uintmax_t)st.st_size > SIZE_MAX) {
        log_why(why, whylen, "%s: too large to map (%jd bytes)", path, (intmax_t)st.st_size);
        close(fd);
        return -PSKV_EIO;
    }
    size_t size = (size_t)st.st_size;
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    close(fd); /* the mapping keeps the file */
    if (map == MAP_FAILED) {
        log_why(why, whylen, "mmap %s: %s", path, strerror(err));
        return -PSKV_EIO;
    }
    posix_madvise(map, size, POSIX_MADV_SEQUENTIAL);
    const unsigned char *b = map; /* page-aligned, so every record's data is 8-aligned */
    int rc = verify(b, size, path, why, whylen);
    if (rc == 0 && fn != NULL) {
        uint64_t count = 0;
        rc = walk(b, size - TRAILER_LEN, path, fn, ctx, &count, why, whylen);
    }
    munmap(map, size);
    return rc;
}

uint64_t ckpt_size(const ckpt_writer *w) { return w ? w->off : 0; }
