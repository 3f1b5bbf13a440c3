/* Resharding a checkpoint onto the servers registered now: where each partition
 * of a resumed job is placed, and which server loads it from which checkpoint
 * file (docs/operations.md, "Checkpoints and resume").
 *
 * The checkpoint's chains name old server nodes; the servers registered now
 * have new ids, may be more or fewer, and each reports the files it can read.
 * Placement keeps as much as it can where a file already is and is otherwise
 * the ring's (ring.h):
 *   1. each old node is paired with one new server that reads its file (one old
 *      node per server, in registration order), and the checkpoint's chains are
 *      mapped through the pairs;
 *   2. a partition none of whose old nodes got a server (fewer servers than
 *      files) is headed by the first server of its ring chain that reads one of
 *      its files (else its ring head);
 *   3. the chains are filled up to R on the ring (ring_chains), and each server
 *      still in no chain joins as a server joining a running job does
 *      (ring_join): it takes the partitions its tokens win, so more servers than
 *      files leave none empty.
 * Then, per partition, every member that reads a file holding it loads it from
 * one such file (its paired old node's when that held it, else the first in the
 * old chain): a partition is loaded once per server, never from two files. The
 * other members get it copied down the chain (FILL). A partition no member can
 * read is loaded by another server that can, which hands it to the head and
 * lets it go. A partition no registered server can read makes the plan fail,
 * naming it.
 *
 * OWNS   the arrays of a plan (reshard_free frees them).
 * THREAD any (no state of its own).
 * NEVER  logs, sends or looks at the node table: what a server can read comes
 *        through the callback. */
#ifndef PSKV_RESHARD_H
#define PSKV_RESHARD_H

#include <stddef.h>
#include <stdint.h>

/* 1 when server `server` (a new node id) reads a valid file written by old node `old`. */
typedef int (*reshard_reads_fn)(void *ctx, uint32_t server, uint32_t old);

typedef struct reshard_plan {
    uint32_t *chains;  /* nparts x R: the placement the job starts with, head first */
    uint32_t *loaders; /* nparts x R: the servers that load each partition from a file,
                          in chain order, 0-padded (the View's prev_chains) */
    uint32_t *sources; /* nparts x R: the old node whose file loaders[i] loads it from */
    uint32_t *pairs;   /* npairs distinct (server, old node) pairs: the files each loads */
    size_t npairs;
    uint32_t olds;     /* the old servers that wrote the checkpoint (in its chains) */
    uint32_t missing;  /* reshard_make returned 1: the partition no server can read */
} reshard_plan;

/* Plans the resume of a checkpoint of nparts partitions in chains old_chains
 * (nparts x R old node ids, 0 = none) with vnodes tokens per server onto the
 * live servers[0..ns-1] (distinct non-zero ids, ns >= 1). Returns 0 with *pl
 * filled (free with reshard_free), 1 when partition pl->missing has no file any
 * server reads (nothing to free), or -PSKV_ENOMEM. */
int reshard_make(reshard_plan *pl, uint32_t nparts, uint32_t R, uint32_t vnodes,
                 const uint32_t *old_chains, const uint32_t *servers, size_t ns,
                 reshard_reads_fn reads, void *ctx);

/* Frees the plan's arrays and zeroes it; NULL-safe. */
void reshard_free(reshard_plan *pl);

#endif
