/* LIBSVM / SVMlight text format, streamed: one example per line,
 *   label idx:val idx:val ...   (# starts a comment; blank lines are skipped)
 * idx are positive integers (uint64), val floats; labels > 0 map to 1, others
 * (0, -1) to 0. CRLF line endings are accepted. A worker keeps only its shard:
 * example lines e (counted from 0 over lines that are neither blank nor only a
 * comment) with e % nshards == shard. Stored as CSR.
 *
 * OWNS: nothing between calls: libsvm_load opens, streams and closes the file in
 * one call; the arrays of a libsvm_set are the caller's once loaded.
 * THREADS: any thread; no global state (numbers parse in the C locale: pskv never
 * calls setlocale).
 * NEVER: logs or prints (failures come back in `why`), allocates per feature (the
 * CSR arrays grow geometrically), or parses another shard's lines. */
#ifndef PSKV_LIBSVM_H
#define PSKV_LIBSVM_H

#include <stddef.h>
#include <stdint.h>

typedef struct libsvm_set {
    size_t n;           /* examples kept */
    size_t nnz;         /* features kept */
    size_t *off;        /* n + 1 offsets into idx/val */
    uint64_t *idx;      /* feature ids as written in the file */
    float *val;
    float *y;           /* labels, 0 or 1 */
    uint64_t max_idx;   /* largest feature id seen in the kept examples */
    size_t lines;       /* lines read in the whole file */
    uint64_t examples;  /* examples in the whole file (every shard's, held out or not) */
} libsvm_set;

/* Reads `path`, keeping the shard's examples. max_idx > 0 refuses a feature id
 * above it. Returns 0, -PSKV_ENOTFOUND (why names the path), -PSKV_EIO with
 * "PATH:LINE:COLUMN: reason" in why (1-based; the column of the bad token) for a
 * line that does not parse (bad label, missing ':', bad index or value, index 0 or
 * above max_idx, value not finite as a float), -PSKV_EIO for a read error,
 * -PSKV_EINVAL for nshards == 0 or shard >= nshards, or -PSKV_ENOMEM. Only this
 * shard's lines are parsed: a bad line fails the worker whose shard holds it. On
 * failure out holds nothing (zeroed); on success free it with libsvm_free. */
int libsvm_load(const char *path, uint32_t shard, uint32_t nshards, uint64_t max_idx,
                libsvm_set *out, char *why, size_t whylen);

/* The examples in `path` (lines neither blank nor only a comment) into *n.
 * Returns 0, -PSKV_ENOTFOUND or -PSKV_EIO (why says so). */
int libsvm_count(const char *path, uint64_t *n, char *why, size_t whylen);

/* As libsvm_load, with the last `holdout` examples of the file held out (a
 * validation set): held == 0 keeps the shard of the others, held == 1 the held-out
 * examples themselves (shard and nshards then unused). The file is read twice
 * (first counted). -PSKV_EINVAL (why says so) when holdout is not below the
 * file's examples. holdout == 0 is libsvm_load (held == 1: no examples). */
int libsvm_load_split(const char *path, uint32_t shard, uint32_t nshards, uint64_t max_idx,
                      uint64_t holdout, int held, libsvm_set *out, char *why, size_t whylen);

/* Frees the arrays of s and zeroes it; safe on a zeroed set. */
void libsvm_free(libsvm_set *s);

#endif
