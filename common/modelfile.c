#define _GNU_SOURCE
#include "modelfile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "pskv_errors.h"

#define MAGIC "PSKVMODL"
#define HEADER 40
#define EVAL_RECORD 32 /* flags bit 1: clock, epoch, val_loss, val_accuracy */
#define AUC_RECORD 8   /* flags bit 2 (with bit 1): val_auc */

typedef struct sink {
    FILE *f;
    uLong crc;
    int err;
} sink;

static void put(sink *s, const void *p, size_t n)
{
    if (s->err || fwrite(p, 1, n, s->f) != n)
        s->err = 1;
    s->crc = crc32(s->crc, p, (uInt)n);
}

static void put_u32(sink *s, uint32_t v) { put(s, &v, 4); } /* little-endian hosts */
static void put_u64(sink *s, uint64_t v) { put(s, &v, 8); }

int modelfile_save(const char *path, const modelfile *m, char *why, size_t whylen)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    sink s = {fopen(tmp, "wb"), crc32(0, NULL, 0), 0};
    if (!s.f) {
        snprintf(why, whylen, "cannot write %s: %s", tmp, strerror(errno));
        return -PSKV_EIO;
    }
    put(&s, MAGIC, 8);
    put_u32(&s, 1);
    put_u32(&s, m->kind);
    put_u32(&s, m->in);
    put_u32(&s, m->hidden);
    put_u32(&s, m->out);
    put_u64(&s, m->n);
    int auc = m->has_eval && m->has_auc;
    put_u32(&s, (m->keys ? 1u : 0u) | (m->has_eval ? 2u : 0u) | (auc ? 4u : 0u));
    if (m->has_eval) {
        double rec[4] = {m->epoch, m->val_loss, m->val_accuracy, m->val_auc};
        put_u64(&s, (uint64_t)m->clock);
        put(&s, rec, auc ? sizeof rec : 3 * sizeof rec[0]);
    }
    if (m->keys) {
        for (uint64_t i = 0; i < m->n; i++) {
            put_u64(&s, m->keys[i]);
            put(&s, &m->vals[i], 4);
        }
    } else {
        put(&s, m->vals, (size_t)m->n * 4);
    }
    uint32_t crc = (uint32_t)s.crc;
    put(&s, &crc, 4);
    if (fflush(s.f) != 0 || fsync(fileno(s.f)) != 0)
        s.err = 1;
    if (fclose(s.f) != 0)
        s.err = 1;
    if (s.err || rename(tmp, path) != 0) {
        snprintf(why, whylen, "cannot write %s: %s", path, strerror(errno ? errno : EIO));
        unlink(tmp);
        return -PSKV_EIO;
    }
    return 0;
}

void modelfile_free(modelfile *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

int modelfile_load(const char *path, modelfile *m, char *why, size_t whylen)
{
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(why, whylen, "cannot open %s: %s", path, strerror(errno));
        return -PSKV_ENOTFOUND;
    }
    int rc = -PSKV_EIO;
    unsigned char h[HEADER];
    uint32_t version, flags;
    if (fread(h, 1, HEADER, f) != HEADER || memcmp(h, MAGIC, 8) != 0) {
        snprintf(why, whylen, "%s is not a pskv model file (bad magic or too short)", path);
        goto out;
    }
    memcpy(&version, h + 8, 4);
    memcpy(&m->kind, h + 12, 4);
    memcpy(&m->in, h + 16, 4);
    memcpy(&m->hidden, h + 20, 4);
    memcpy(&m->out, h + 24, 4);
    memcpy(&m->n, h + 28, 8);
    memcpy(&flags, h + 36, 4);
    if (version != 1) {
        snprintf(why, whylen, "%s: model file version %u (this build reads 1)", path, version);
        goto out;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    size_t row = (flags & 1) ? 12 : 4;
    size_t extra = (flags & 2) ? EVAL_RECORD + ((flags & 4) ? AUC_RECORD : 0) : 0;
    if (m->n > (1ULL << 40) || size < 0 ||
        (unsigned long long)size != HEADER + extra + m->n * row + 4) {
        snprintf(why, whylen, "%s: %ld bytes, but the header announces %llu rows", path, size,
                 (unsigned long long)m->n);
        goto out;
    }
    fseek(f, HEADER, SEEK_SET); /* then the evaluation record, when there is one */
    m->vals = malloc(m->n ? m->n * 4 : 1);
    m->keys = (flags & 1) ? malloc(m->n ? m->n * 8 : 1) : NULL;
    if (!m->vals || ((flags & 1) && !m->keys)) {
        rc = -PSKV_ENOMEM;
        snprintf(why, whylen, "out of memory reading %s", path);
        goto out;
    }
    uLong crc = crc32(crc32(0, NULL, 0), h, HEADER);
    int bad = 0;
    if (extra) {
        unsigned char r[EVAL_RECORD + AUC_RECORD];
        bad = fread(r, 1, extra, f) != extra;
        crc = crc32(crc, r, (uInt)extra);
        m->has_eval = 1;
        memcpy(&m->clock, r, 8);
        memcpy(&m->epoch, r + 8, 8);
        memcpy(&m->val_loss, r + 16, 8);
        memcpy(&m->val_accuracy, r + 24, 8);
        m->has_auc = extra > EVAL_RECORD;
        if (m->has_auc)
            memcpy(&m->val_auc, r + 32, 8);
    }
    if (m->keys) {
        for (uint64_t i = 0; i < m->n && !bad; i++) {
            unsigned char r[12];
            bad = fread(r, 1, 12, f) != 12;
            crc = crc32(crc, r, 12);
            memcpy(&m->keys[i], r, 8);
            memcpy(&m->vals[i], r + 8, 4);
        }
    } else {
        bad = bad || fread(m->vals, 4, m->n, f) != m->n;
        crc = crc32(crc, (const Bytef *)m->vals, (uInt)(m->n * 4));
    }
    uint32_t stored;
    if (bad || fread(&stored, 4, 1, f) != 1 || stored != (uint32_t)crc) {
        snprintf(why, whylen, "%s: checksum mismatch (the file is corrupt or truncated)", path);
        goto out;
    }
    rc = 0;
out:
    fclose(f);
    if (rc < 0)
        modelfile_free(m);
    return rc;
}
