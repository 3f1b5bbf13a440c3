/* The records of a server's checkpoint file (ckpt.h frames them; protocol.md,
 * Checkpoints, documents them): shared by the server that writes and loads them
 * (server/persist/persist.c, persist_read.c) and pskvctl export (scheduler/ctl/export.c),
 * which reads them, with the walk of a delta's chain (ckptrec.c). Integers are
 * little-endian, as the structs lie in memory on the hosts pskv runs on. */
#ifndef PSKV_CKPTREC_H
#define PSKV_CKPTREC_H

#include <inttypes.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ckpt-<job>-<seq>-<node>.pskv, in a server's --data-dir */
#define CKPTREC_NAME_FMT "ckpt-%" PRIu64 "-%" PRIu64 "-%u.pskv"

/* 1 when name is a finished checkpoint file (CKPTREC_NAME_FMT, not a temp file),
 * with its job, seq and node; else 0. */
static inline int ckptrec_parse_name(const char *name, uint64_t *job, uint64_t *seq,
                                     unsigned *node)
{
    int end = 0;
    return sscanf(name, "ckpt-%" SCNu64 "-%" SCNu64 "-%u.pskv%n", job, seq, node, &end) == 3 &&
           end > 0 && name[end] == '\0';
}

enum {
    REC_HEADER = 1, /* ckptrec_hdr */
    REC_TABLE = 2,  /* uint64 table id, then the packed TableOptions */
    REC_DENSE = 3,  /* ckptrec_rows, then n rows of rowfloats floats (values, then state) */
    REC_SPARSE = 4, /* ckptrec_rows, then n keys; the next REC_SPARSE holds the n rows */
    REC_DEDUPE = 5, /* uint64 partition, then the dedupe record */
    REC_CLOCKS = 6, /* int64 per worker rank */
    REC_BSP = 7,    /* uint64 table id, int64 closed clocks */
    REC_DELTA = 8,  /* uint64 base seq, uint64 prev seq: the file is a delta over the file
                       of checkpoint prev of the same node, whose chain starts at base */
    REC_TOMB = 9,   /* uint64 table id, then n keys: sparse rows removed (a delta's) */
    REC_DENSE_AT = 10, /* ckptrec_rows (first 0), then n row indices; the next
                          REC_DENSE_AT holds the n rows (a delta's dense rows) */
};

typedef struct ckptrec_delta {
    uint64_t base, prev;
} ckptrec_delta;

typedef struct ckptrec_hdr {
    uint64_t job, seq;
    uint32_t node, nparts;
} ckptrec_hdr;

typedef struct ckptrec_rows {
    uint64_t table_id, first, n;
    uint64_t rowfloats;
} ckptrec_rows;

#define CKPTREC_CHAIN_MAX 10000 /* files in one chain: --full-every's bound */

/* What a file says it is: its header and, for a delta, what it builds on. */
typedef struct ckptrec_peek {
    ckptrec_hdr h;
    int have_hdr, delta;
    ckptrec_delta d;
} ckptrec_peek;

/* Verifies the file at path whole (ckpt_read) and reads what it is into *k.
 * Returns 0 or a negated error with why naming the file (also: no header, or a
 * delta over a later checkpoint). */
int ckptrec_peek_file(const char *path, ckptrec_peek *k, char *why, size_t whylen);

/* The files of checkpoint seq of node `node` in dir, newest first: seq's, then
 * the one each delta builds on, down to a full file, each verified whole.
 * Returns their count with their seqs in *seqs (the caller frees it), or a
 * negated error with why naming the file that cannot be used. */
int ckptrec_chain(const char *dir, uint64_t job, uint64_t seq, uint32_t node, uint64_t **seqs,
                  char *why, size_t whylen);

#endif
