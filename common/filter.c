/* filter: parsing a table's filters and packing frames (contract in filter.h). */
#define _POSIX_C_SOURCE 200809L
#include "filter.h"

#include <lz4.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "fquant.h"
#include "pskv_errors.h"
#include "wire.h"

#define KNOWN "keycache[:MB], lz4, zstd[:LEVEL], int8, sign, significant:THRESH, kkt[:MARGIN]"

/* zstd's contexts, one of each per thread that packs or unpacks (ZSTD_compress and
 * ZSTD_decompress would allocate and free one per frame), freed when the thread
 * ends. */
static pthread_key_t zkey_c, zkey_d;
static pthread_once_t zkeys_once = PTHREAD_ONCE_INIT;

static void free_cctx(void *c) { ZSTD_freeCCtx(c); }
static void free_dctx(void *d) { ZSTD_freeDCtx(d); }

static void make_zkeys(void)
{
    pthread_key_create(&zkey_c, free_cctx);
    pthread_key_create(&zkey_d, free_dctx);
}

/* This thread's compression context (with_c) or decompression context; NULL when
 * out of memory. */
static void *zctx(int with_c)
{
    pthread_once(&zkeys_once, make_zkeys);
    pthread_key_t k = with_c ? zkey_c : zkey_d;
    void *x = pthread_getspecific(k);
    if (!x) {
        x = with_c ? (void *)ZSTD_createCCtx() : (void *)ZSTD_createDCtx();
        if (x && pthread_setspecific(k, x) != 0) {
            (with_c ? free_cctx : free_dctx)(x);
            x = NULL;
        }
    }
    return x;
}

/* An integer argument lo..hi of filter `name`, or the default when arg is NULL. */
static int int_arg(const char *name, const char *arg, long lo, long hi, long def, long *out,
                   char *why, size_t whylen)
{
    if (!arg) {
        *out = def;
        return 0;
    }
    char *end;
    long v = strtol(arg, &end, 10);
    if (end == arg || *end || v < lo || v > hi) {
        snprintf(why, whylen, "filter '%s': argument '%s' must be an integer %ld..%ld", name,
                 arg, lo, hi);
        return -PSKV_EINVAL;
    }
    *out = v;
    return 0;
}

/* Parses one NAME[:ARGS] into fs. */
static int parse_one(filter_set *fs, const char *spec, char *why, size_t whylen)
{
    char name[32];
    const char *colon = strchr(spec, ':');
    size_t nl = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *arg = colon ? colon + 1 : NULL;
    if (nl == 0 || nl >= sizeof name) {
        snprintf(why, whylen, "filter '%s': no such filter (" KNOWN ")", spec);
        return -PSKV_EINVAL;
    }
    memcpy(name, spec, nl);
    name[nl] = 0;
    long v;
    if (fs->n == FILTER_MAX) {
        snprintf(why, whylen, "more than %d filters", FILTER_MAX);
        return -PSKV_EINVAL;
    }
    for (int i = 0; i < fs->n; i++)
        if (!strncmp(fs->names[i], name, nl) && (fs->names[i][nl] == 0 || fs->names[i][nl] == ':')) {
            snprintf(why, whylen, "filter '%s' given twice", name);
            return -PSKV_EINVAL;
        }
    if (!strcmp(name, "keycache")) {
        if (int_arg(name, arg, 1, 65536, 64, &v, why, whylen) < 0)
            return -PSKV_EINVAL;
        fs->keycache_mb = (uint32_t)v;
        snprintf(fs->names[fs->n++], sizeof fs->names[0], "keycache:%ld", v);
        return 0;
    }
    int q = !strcmp(name, "int8") ? FQUANT_INT8 : !strcmp(name, "sign") ? FQUANT_SIGN : 0;
    int sig = !strcmp(name, "significant");
    if ((q || sig) && (fs->quant || fs->significant)) {
        snprintf(why, whylen, "filter '%s': the table has a lossy filter already; one only",
                 name);
        return -PSKV_EINVAL;
    }
    if (sig) {
        char *end = NULL;
        float th = arg ? strtof(arg, &end) : -1.0f;
        if (!arg || end == arg || *end || !(th >= 0) || th > 1e30f) {
            snprintf(why, whylen, "filter 'significant' needs a threshold, significant:THRESH "
                     "with THRESH >= 0 (got '%s')", arg ? arg : "");
            return -PSKV_EINVAL;
        }
        fs->significant = 1;
        fs->sig_thresh = th;
        snprintf(fs->names[fs->n++], sizeof fs->names[0], "significant:%g", (double)th);
        return 0;
    }
    if (!strcmp(name, "kkt")) {
        char *end = NULL;
        float mg = arg ? strtof(arg, &end) : 0.0f;
        if (arg && (end == arg || *end || !(mg >= 0) || !(mg < 1))) {
            snprintf(why, whylen, "filter 'kkt': the margin must be a number in [0, 1), "
                     "kkt:MARGIN (got '%s')", arg);
            return -PSKV_EINVAL;
        }
        fs->kkt = 1;
        fs->kkt_margin = mg;
        snprintf(fs->names[fs->n++], sizeof fs->names[0], "kkt:%g", (double)mg);
        return 0;
    }
    if (q) {
        if (arg) {
            snprintf(why, whylen, "filter '%s' takes no argument", name);
            return -PSKV_EINVAL;
        }
        fs->quant = (uint32_t)q;
        snprintf(fs->names[fs->n++], sizeof fs->names[0], "%s", name);
        return 0;
    }
    int lz4 = !strcmp(name, "lz4"), zstd = !strcmp(name, "zstd");
    if (!lz4 && !zstd) {
        snprintf(why, whylen, "filter '%s': no such filter (" KNOWN ")", name);
        return -PSKV_EINVAL;
    }
    if (fs->codec != FCODEC_NONE) {
        snprintf(why, whylen, "filter '%s': the table has a compression already (%s); one only",
                 name, filter_codec_name(fs->codec));
        return -PSKV_EINVAL;
    }
    if (lz4 && arg) {
        snprintf(why, whylen, "filter 'lz4' takes no argument (got '%s')", arg);
        return -PSKV_EINVAL;
    }
    if (zstd && int_arg(name, arg, 1, 19, 1, &v, why, whylen) < 0)
        return -PSKV_EINVAL;
    fs->codec = lz4 ? FCODEC_LZ4 : FCODEC_ZSTD;
    fs->level = zstd ? (int)v : 0;
    if (lz4)
        snprintf(fs->names[fs->n++], sizeof fs->names[0], "lz4");
    else
        snprintf(fs->names[fs->n++], sizeof fs->names[0], "zstd:%ld", v);
    return 0;
}

int filter_parse(filter_set *fs, char *const *specs, size_t n, char *why, size_t whylen)
{
    memset(fs, 0, sizeof *fs);
    for (size_t i = 0; i < n; i++) {
        int rc = parse_one(fs, specs[i] ? specs[i] : "", why, whylen);
        if (rc < 0)
            return rc;
    }
    return 0;
}

/* kkt's conditions: where a gradient inside the band at a zero weight is not
 * provably a no-op of the server's update, the filter is refused. */
static int check_kkt(const filter_table *ft, char *why, size_t whylen)
{
    const char *u = ft->updater ? ft->updater : "sgd";
    const char *no = NULL;
    char buf[160];
    if (ft->dense)
        no = "it skips rows of sparse pushes: not on a dense table";
    else if (!strcmp(u, "ftrl"))
        no = "not exact with ftrl: ftrl adds every gradient to its state (z, n), so a "
             "skipped one changes later weights even while this one stays zero; use sgd "
             "with l1";
    else if (strcmp(u, "sgd")) {
        snprintf(buf, sizeof buf, "needs the L1-proximal update, sgd with l1 > 0 (the table's "
                 "updater is '%s')", u);
        no = buf;
    } else if (!(ft->l1 > 0))
        no = "needs sgd with l1 > 0 (the L1 band |g| <= l1); the table has no l1";
    else if (ft->momentum > 0)
        no = "not with momentum: a skipped gradient would still have entered the momentum";
    else if (ft->bsp)
        no = "not with consistency bsp: a clock's pushes are averaged before the update, "
             "and a skipped gradient changes the mean";
    else if (ft->admit_after > 1)
        no = "not with admit_after: admission counts pushes, and a skipped one would not count";
    else if (ft->evict_after)
        no = "not with evict_after: eviction counts pushes as use, and a skipped one would not";
    if (!no)
        return 0;
    snprintf(why, whylen, "table '%s', filter 'kkt': %s", ft->name ? ft->name : "?", no);
    return -PSKV_EINVAL;
}

int filter_check_table(const filter_set *fs, const filter_table *ft, char *why, size_t whylen)
{
    if (fs->kkt && check_kkt(ft, why, whylen) < 0)
        return -PSKV_EINVAL;
    if (!fs->quant && !fs->significant)
        return 0;
    const char *name = fs->quant ? fquant_name(fs->quant) : "significant";
    if (!ft->dense) {
        snprintf(why, whylen, "filter '%s' filters dense pushes: not on a sparse table", name);
        return -PSKV_EINVAL;
    }
    if (ft->updater && !strcmp(ft->updater, "sum")) {
        snprintf(why, whylen, "filter '%s' is lossy: not on a 'sum' table (exact counts)", name);
        return -PSKV_EINVAL;
    }
    return 0;
}

int filter_parse_list(filter_set *fs, const char *list, char *why, size_t whylen)
{
    memset(fs, 0, sizeof *fs);
    if (!list || !*list)
        return 0;
    char buf[512];
    if (strlen(list) >= sizeof buf) {
        snprintf(why, whylen, "filter list longer than %zu characters", sizeof buf - 1);
        return -PSKV_EINVAL;
    }
    snprintf(buf, sizeof buf, "%s", list);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int rc = parse_one(fs, tok, why, whylen);
        if (rc < 0)
            return rc;
    }
    return 0;
}

void filter_format(const filter_set *fs, char *out, size_t len)
{
    size_t used = 0;
    out[0] = 0;
    if (!fs->n)
        snprintf(out, len, "none");
    for (int i = 0; i < fs->n && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, "%s%s", i ? "," : "", fs->names[i]);
}

const char *filter_codec_name(uint32_t codec)
{
    return codec == FCODEC_LZ4 ? "lz4" : codec == FCODEC_ZSTD ? "zstd" : "unknown codec";
}

int filter_pack(const filter_set *fs, uint32_t bit, const void *data, size_t len,
                Pskv__Meta *m, zmq_msg_t *out)
{
    if (fs->codec == FCODEC_NONE || len < FILTER_MIN_BYTES || len > (size_t)LZ4_MAX_INPUT_SIZE)
        return 0;
    size_t cap = fs->codec == FCODEC_LZ4 ? (size_t)LZ4_compressBound((int)len)
                                         : ZSTD_compressBound(len);
    char *buf = malloc(cap);
    if (!buf)
        return -PSKV_ENOMEM;
    size_t got;
    if (fs->codec == FCODEC_LZ4) {
        int r = LZ4_compress_default(data, buf, (int)len, (int)cap);
        got = r > 0 ? (size_t)r : len;
    } else {
        ZSTD_CCtx *c = zctx(1);
        got = c ? ZSTD_compressCCtx(c, buf, cap, data, len, fs->level) : len;
        if (ZSTD_isError(got))
            got = len; /* sent raw */
    }
    if (got >= len) { /* incompressible: raw is smaller */
        free(buf);
        return 0;
    }
    char *fit = realloc(buf, got); /* the frame keeps only what it holds */
    if (fit)
        buf = fit;
    if (wire_frame_lend(out, buf, got, wire_frame_free, NULL) < 0)
        return -PSKV_ENOMEM;
    m->has_codec = m->has_zframes = 1;
    m->codec = fs->codec;
    m->zframes |= bit;
    return 1;
}

int filter_unpack(uint32_t codec, const void *src, size_t n, void *dst, size_t raw, char *why,
                  size_t whylen)
{
    if (codec == FCODEC_LZ4) {
        if (n > (size_t)LZ4_MAX_INPUT_SIZE || raw > (size_t)LZ4_MAX_INPUT_SIZE) {
            snprintf(why, whylen, "lz4 frame of %zu bytes for %zu: too large", n, raw);
            return -PSKV_EPROTO;
        }
        int r = LZ4_decompress_safe(src, dst, (int)n, (int)raw);
        if (r != (int)raw) {
            snprintf(why, whylen, "corrupt lz4 frame (%zu bytes; %s, expected %zu bytes)", n,
                     r < 0 ? "does not decode" : "decodes short", raw);
            return -PSKV_EPROTO;
        }
        return 0;
    }
    if (codec == FCODEC_ZSTD) {
        unsigned long long want = ZSTD_getFrameContentSize(src, n);
        if (want != raw) {
            snprintf(why, whylen, "corrupt zstd frame (%zu bytes; holds %s, expected %zu "
                     "bytes)", n, want == ZSTD_CONTENTSIZE_ERROR ? "no frame" : "another size",
                     raw);
            return -PSKV_EPROTO;
        }
        ZSTD_DCtx *d = zctx(0);
        if (!d) {
            snprintf(why, whylen, "out of memory for a zstd context");
            return -PSKV_ENOMEM;
        }
        size_t r = ZSTD_decompressDCtx(d, dst, raw, src, n);
        if (ZSTD_isError(r) || r != raw) {
            snprintf(why, whylen, "corrupt zstd frame (%zu bytes): %s", n,
                     ZSTD_isError(r) ? ZSTD_getErrorName(r) : "decodes short");
            return -PSKV_EPROTO;
        }
        return 0;
    }
    snprintf(why, whylen, "unknown codec %u", codec);
    return -PSKV_EPROTO;
}
