/* filter: the per-table filters of the wire (docs/protocol.md, "Filters"): what a
 * table's TableOptions.filters ask for, parsed and checked once, and the
 * lossless packing of a key or value frame both sides apply.
 *
 *   keycache[:MB]  a key list the receiver holds goes as a 64-bit signature
 *                  (keycache.h); MB bounds each side's cache (default 64)
 *   lz4            key and value frames of FILTER_MIN_BYTES or more compressed
 *   zstd[:LEVEL]   likewise with zstd at LEVEL 1..19 (default 1)
 *   int8, sign     lossy: a dense table's pushed values quantised per block of 256
 *                  (fquant.h), what is lost kept by the worker for the next push
 *   significant:T  lossy: only a dense table's rows with some |x| > T pushed (as
 *                  keyed rows), the others kept by the worker for the next push
 *   kkt[:MARGIN]   a sparse sgd table with l1 > 0: the worker skips a row whose
 *                  weight it last pulled as zero and whose gradient lies within
 *                  the L1 band, |g| <= (1 - MARGIN) * l1 (worker/lib/wkkt.h)
 *
 * Compression is per frame: a frame is sent compressed only when that makes it
 * smaller, and Meta.zframes says which frames are (wire.c unpacks them).
 *
 * OWNS nothing: a filter_set is a plain value. THREAD any. NEVER allocates except
 * the packed frame filter_pack hands to ZeroMQ. */
#ifndef PSKV_FILTER_H
#define PSKV_FILTER_H

#include <stddef.h>
#include <stdint.h>
#include <zmq.h>

#include "pskv.pb-c.h"

#define FILTER_MIN_BYTES 512   /* smaller frames go as they are */
#define FILTER_MAX 8           /* filters per table */
#define FILTER_ZKEYS 1u        /* Meta.zframes bits */
#define FILTER_ZVALS 2u

typedef enum { FCODEC_NONE = 0, FCODEC_LZ4 = 1, FCODEC_ZSTD = 2 } fcodec;

typedef struct filter_set {
    fcodec codec;          /* compression of key and value frames */
    int level;             /* zstd level */
    uint32_t keycache_mb;  /* 0: no key caching */
    uint32_t quant;        /* FQUANT_* (fquant.h): lossy pushes with error feedback */
    int significant;       /* significant:T: rows with some |x| > sig_thresh only */
    float sig_thresh;
    int kkt;               /* kkt[:MARGIN]: rows at zero inside the L1 band not pushed */
    float kkt_margin;      /* ... the band is (1 - kkt_margin) * l1, 0 <= margin < 1 */
    char names[FILTER_MAX][32]; /* the canonical NAME[:ARGS] of each, in order */
    int n;
} filter_set;

/* Traffic of one table through its filters: bytes before (raw) and after (wire)
 * them, each way, key hits of the keycache, and the time spent in filters. */
typedef struct filter_stats {
    uint64_t raw_out, wire_out, raw_in, wire_in;
    uint64_t sig_hits, sig_misses;
    uint64_t kkt_rows, kkt_skipped, kkt_zeroed; /* kkt: rows given to push, those skipped,
                                                    and of those the ones sent as zeros */
    int64_t ns;
} filter_stats;

/* What filter_check_table needs to know of a table. */
typedef struct filter_table {
    const char *name;
    int dense;
    const char *updater;   /* "sum", "sgd", ... or "plugin:..." */
    float l1, momentum;
    int bsp;               /* consistency bsp: a clock's pushes averaged, then applied */
    uint32_t admit_after, evict_after;
} filter_table;

/* Parses the filters specs[0..n-1] (NAME[:ARGS] each) into fs, refusing an unknown
 * name, a bad argument, a repeated filter, two compressions, or more than
 * FILTER_MAX. Returns 0 or -PSKV_EINVAL with the reason, naming the filter, in why. */
int filter_parse(filter_set *fs, char *const *specs, size_t n, char *why, size_t whylen);

/* Refuses (-PSKV_EINVAL, why naming the table and filter) a lossy filter on a
 * sparse table or on a `sum` table (exact counts), and `kkt` wherever skipping a
 * gradient is not provably a no-op: a dense table, any updater but sgd with l1 > 0
 * and no momentum (ftrl included: its z and n take every gradient), bsp, admission
 * (admit_after > 1) and eviction (both count pushes). 0 otherwise. */
int filter_check_table(const filter_set *fs, const filter_table *ft, char *why, size_t whylen);

/* Like filter_parse, from a comma-separated list ("keycache,lz4"; NULL or "" is no
 * filter): the library's pskv_table_opts.filters and the apps' --filter. */
int filter_parse_list(filter_set *fs, const char *list, char *why, size_t whylen);

/* The filters as a comma-separated list, for logs and reopen checks ("none" when
 * empty). */
void filter_format(const filter_set *fs, char *out, size_t len);

/* Packs frame `bit` (FILTER_ZKEYS or FILTER_ZVALS) of len bytes at data with fs's
 * compression into *out (a new frame ZeroMQ frees) when it has one, len is at least
 * FILTER_MIN_BYTES and the result is smaller; then stamps m->codec and the bit in
 * m->zframes. Returns 1 (send *out; data is untouched), 0 (send data as it is), or
 * -PSKV_ENOMEM. */
int filter_pack(const filter_set *fs, uint32_t bit, const void *data, size_t len,
                Pskv__Meta *m, zmq_msg_t *out);

/* Unpacks n bytes at src compressed with `codec` into exactly raw bytes at dst.
 * Returns 0, or -PSKV_EPROTO (an unknown codec, a corrupt frame, or one that does
 * not hold exactly raw bytes) with the reason in why. */
int filter_unpack(uint32_t codec, const void *src, size_t n, void *dst, size_t raw, char *why,
                  size_t whylen);

/* "lz4", "zstd" or "codec N", for errors. */
const char *filter_codec_name(uint32_t codec);

#endif
