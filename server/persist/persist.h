/* A server's checkpoint: everything it holds, in one file of its --data-dir,
 *   ckpt-<job>-<seq>-<node>.pskv
 * written with ckpt.h (temp file, fsync, rename, CRC-32): every table's options,
 * the rows of the partitions this server holds (values and optimizer state), the
 * dedupe record of each of those partitions, the vector clock and each bsp
 * table's closed clocks. A delta file (--full-every on the scheduler) holds only
 * the rows changed since the node's previous file, and the keys of the rows
 * removed since; its chain starts at a full file. A resumed server loads its
 * partitions from the files of the old nodes the scheduler names (one, or several
 * when resharded), each with the files a delta builds on.
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

#include "repl/chain.h"
#include "consist/consist.h"
#include "store/table.h"

#include "ckpt.h"

/* A delta checkpoint: what it builds on. */
typedef struct persist_delta {
    uint64_t base; /* the full checkpoint the chain starts at */
    uint64_t prev; /* this node's previous file, the one this delta is over */
} persist_delta;

/* Snapshots checkpoint `seq` of job `job` for node `node` into memory (a held
 * ckpt writer, *out): a copy of the state at this instant, so serving may go on
 * while the caller writes it with ckpt_commit, on another thread if it likes.
 * delta NULL: a full file; else only the rows changed since the previous
 * snapshot (shard_changed, with tombstones), which the caller vouches is the
 * file delta->prev of this node with the same partitions held; tables, dedupe
 * records and clocks are whole in both. The caller resets the changes
 * (shard_changes_reset) once it took the snapshot. ns non-NULL: a namespace's
 * checkpoint (a group's), only the tables of namespace ns ("" = the unnamed one)
 * and no dedupe records; such a snapshot is full (delta NULL) and the caller
 * leaves the changes alone. Returns 0, or a negated error with the reason
 * (naming the file) in why and *out NULL. */
int persist_snapshot(const char *dir, uint64_t job, uint64_t seq, uint32_t node, table_set *ts,
                     chain *c, consist *cons, const char *ns, const persist_delta *delta,
                     ckpt_writer **out, char *why, size_t whylen);

/* Checks every checkpoint file in dir (whole-file checksum) and returns the ones
 * that can be loaded as "JOB:SEQ:NODE" strings in *out (caller frees each and
 * the array): valid, and for a delta every file it builds on too. A corrupt or
 * partial file is logged, naming it, and left out, and so is a delta over a
 * file missing or left out (naming both). */
size_t persist_scan(const char *dir, char ***out);

/* Retention: deletes every finished checkpoint file in dir numbered below
 * `below` (any job, any node: the manifest, which numbers them, no longer lists
 * them). Returns the number deleted, or -PSKV_EIO with why naming the first file
 * (or dir) that could not be (the others are still deleted). */
int persist_prune(const char *dir, uint64_t below, uint64_t keep_from, uint64_t keep_to, char *why,
                  size_t whylen);

/* Clocks read from a file, applied once the view set up the clock set. */
typedef struct persist_clocks {
    int64_t *vc;
    int nranks;
} persist_clocks;

/* Loads checkpoint (job, seq) written by node `old` into the tables (created with
 * their saved options), the chain's dedupe records (nparts of the view) and
 * *clocks (caller frees clocks->vc); bsp closed clocks go to cons. parts (nparts
 * flags, or NULL for every partition): only the rows, tombstones and dedupe
 * records of the partitions flagged are taken (a resharded resume loads from
 * several files). A delta's whole chain is verified first, then applied from its
 * full file on. ns non-NULL (a group's resume into a running service): only the
 * tables of namespace ns are created and filled, and no dedupe record, clock or
 * bsp clock is taken (the group's workers start their clocks afresh). Returns 0
 * or a negated error with why naming the file. */
int persist_load(const char *dir, uint64_t job, uint64_t seq, uint32_t old, uint32_t nparts,
                 const uint8_t *parts, const char *ns, table_set *ts, chain *c, consist *cons,
                 persist_clocks *clocks, char *why, size_t whylen);

#endif
