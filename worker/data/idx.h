/* Fashion-MNIST / MNIST idx files, gzip-compressed, read with zlib.
 * Images (idx3, magic 0x00000803) become float rows scaled to [0,1]; labels (idx1,
 * magic 0x00000801) bytes 0..9. A worker keeps only its shard: rows i with
 * i % nshards == shard, so no worker holds a full copy.
 *
 * OWNS: nothing between calls: idx_load opens, reads and closes both files in one
 * call; the arrays of an idx_set are the caller's once loaded.
 * THREADS: any thread; no global state, so calls on different sets may run at once.
 * NEVER: logs or prints (failures come back in `why`), trusts a header (sizes and
 * counts are checked against the data), or keeps another shard's rows. */
#ifndef PSKV_IDX_H
#define PSKV_IDX_H

#include <stddef.h>
#include <stdint.h>

typedef struct idx_set {
    uint32_t n;     /* rows kept */
    uint32_t dim;   /* floats per row (rows x cols of the images: 784) */
    float *x;       /* n * dim, row-major, in [0,1] */
    uint8_t *y;     /* n labels */
    uint32_t file_rows; /* rows the files hold */
} idx_set;

/* Loads DIR/PREFIX-images-idx3-ubyte.gz and DIR/PREFIX-labels-idx1-ubyte.gz
 * (PREFIX "train" or "t10k"), considering only the first `limit` rows of the files
 * (0 = all) and keeping rows i % nshards == shard. Returns 0, -PSKV_ENOTFOUND (a
 * file is missing: why names the path), -PSKV_EIO (corrupt: why names the file
 * and what is wrong: gzip error, not gzip, bad magic, image size 0 or above 2^20
 * pixels, truncated data, data after the last row, image and label counts that
 * differ, a label above 9), -PSKV_EINVAL (nshards == 0 or shard >= nshards), or
 * -PSKV_ENOMEM. On failure out holds nothing (zeroed); on success free it with
 * idx_free (x and y are allocated even for an empty shard). */
int idx_load(const char *dir, const char *prefix, uint32_t shard, uint32_t nshards,
             uint32_t limit, idx_set *out, char *why, size_t whylen);

/* As idx_load, with the last `holdout` rows of the files set apart (a validation
 * set): held == 0 considers the rows before them (then the first `limit`), held
 * == 1 only them (then the first `limit` of them). Rows are sharded from the first
 * row considered. -PSKV_EINVAL (why says so) when holdout leaves no row before. */
int idx_load_split(const char *dir, const char *prefix, uint32_t shard, uint32_t nshards,
                   uint32_t limit, uint32_t holdout, int held, idx_set *out, char *why,
                   size_t whylen);

/* Copies rows order[0..n) of s into x (n * dim floats) and their labels into y: a
 * mini-batch. The orders are the caller's, each below s->n. */
void idx_gather(const idx_set *s, const uint32_t *order, uint32_t n, float *x, uint8_t *y);

/* Asks the CPU for rows order[0..n) ahead of an idx_gather: the rows lie at random
 * in a set far larger than the caches, and a gather waited on memory for each
 * (15.5 of an MLP step's us against 6 with them fetched during the step before). */
void idx_prefetch(const idx_set *s, const uint32_t *order, uint32_t n);

/* Frees the arrays of s and zeroes it; safe on a zeroed set. */
void idx_free(idx_set *s);

#endif
