/* A server's checkpoint: everything it holds, in one file of its --data-dir,
 *   ckpt-<job>-<seq>-<node>.pskv
 * written with ckpt.h (temp file, fsync, rename, CRC-32): every table's options,
 * the rows of the partitions this server holds (values and optimizer state), the
 * dedupe record of each of those partitions, the vector clock and each bsp
 * table's closed clocks. A resumed server loads its partitions from the files of
 * the old nodes the scheduler names (one, or several when resharded).
 *
 * OWNS nothing lasting: the record layout and the file names. It reads (snapshot)
 * or fills (load) the state the tables, the chain and the consistency engine own.
 * THREAD: the server's loop thread: persist_scan before the loop starts,
 * persist_load on the first view of a resumed job, persist_snapshot between two
 * messages (serving pauses for the copy); the writer it returns may then be
 * committed on another thread.
 * NEVER writes or syncs the file itself when snapshotting (the caller commits);
 * never trusts a file before ckpt_read has checked it whole; logs a refused file
 * (scan) and a load, nothing else. */
#ifndef PSKV_PERSIST_H
#define PSKV_PERSIST_H

#include <stddef.h>
#include <stdint.h>

#include "chain.h"
#include "consist.h"
#include "table.h"

#include "ckpt.h"

/* Snapshots checkpoint `seq` of job `job` for node `node` into memory (a held
 * ckpt writer, *out): a copy of the state at this instant, so serving may go on
 * while the caller writes it with ckpt_commit, on another thread if it likes.
 * Returns 0, or a negated error with the reason (naming the file) in why and
 * *out NULL. */
int persist_snapshot(const char *dir, uint64_t job, uint64_t seq, uint32_t node, table_set *ts,
                     chain *c, consist *cons, ckpt_writer **out, char *why, size_t whylen);

/* Checks every checkpoint file in dir (whole-file checksum) and returns the valid
 * ones as "JOB:SEQ:NODE" strings in *out (caller frees each and the array);
 * a corrupt or partial file is logged, naming it, and left out. */
size_t persist_scan(const char *dir, char ***out);

/* Retention: deletes every finished checkpoint file in dir numbered below
 * `below` (any job, any node: the manifest, which numbers them, no longer lists
 * them). Returns the number deleted, or -PSKV_EIO with why naming the first file
 * (or dir) that could not be (the others are still deleted). */
int persist_prune(const char *dir, uint64_t below, char *why, size_t whylen);

/* Clocks read from a file, applied once the view set up the clock set. */
typedef struct persist_clocks {
    int64_t *vc;
    int nranks;
} persist_clocks;

/* Loads checkpoint (job, seq) written by node `old` into the tables (created with
 * their saved options), the chain's dedupe records (nparts of the view) and
 * *clocks (caller frees clocks->vc); bsp closed clocks go to cons. parts (nparts
 * flags, or NULL for every partition): only the rows and dedupe records of the
 * partitions flagged are taken (a resharded resume loads from several files).
 * Returns 0 or a negated error with why naming the file. */
int persist_load(const char *dir, uint64_t job, uint64_t seq, uint32_t old, uint32_t nparts,
                 const uint8_t *parts, table_set *ts, chain *c, consist *cons, persist_clocks *clocks, char *why,
                 size_t whylen);

#endif
