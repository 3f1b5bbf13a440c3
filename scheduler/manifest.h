/* The scheduler's checkpoint manifest: <data-dir>/manifest, one line per
 * complete checkpoint (every partition written by at least one server), rewritten
 * whole (temp file, fsync, rename) each time one completes:
 *   ckpt seq=N job=J time=UNIX partitions=P replicas=R vnodes=V chains=ID,ID,...
 *        workers=RANK:EPOCH:STEP:POS,...
 * chains lists P x R server node ids of the job that wrote it (0 = none), head
 * first; a resumed job maps them to its new servers by the files each reports.
 *
 * OWNS   a manifest owns its entries and their arrays (manifest_free frees them).
 * THREAD the scheduler's thread (nothing here is locked).
 * NEVER  keeps the file open, never edits it in place: the file is replaced whole,
 *        so a failed write leaves the previous one (the new entry then stays in
 *        memory only). manifest_append reallocates m->e: pointers into it do not
 *        survive the call. */
#ifndef PSKV_MANIFEST_H
#define PSKV_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

typedef struct manifest_progress {
    int rank;
    int64_t epoch, step, pos;
} manifest_progress;

typedef struct manifest_entry {
    uint64_t seq, job;
    int64_t time;
    uint32_t partitions, replicas, vnodes;
    uint32_t *chains;            /* partitions x replicas */
    manifest_progress *workers;
    size_t nworkers;
} manifest_entry;

typedef struct manifest {
    manifest_entry *e;           /* oldest first */
    size_t n;
} manifest;

/* Reads dir/manifest. A missing file is an empty manifest (0). Returns 0, or
 * -PSKV_EIO / -PSKV_EPROTO with why naming the file and line. */
int manifest_read(const char *dir, manifest *m, char *why, size_t whylen);

/* Appends e (copied) and rewrites dir/manifest atomically. Returns 0 or
 * -PSKV_EIO / -PSKV_ENOMEM with why. */
int manifest_append(const char *dir, manifest *m, const manifest_entry *e, char *why,
                    size_t whylen);

/* Retention: keeps the `keep` newest entries (keep 0 = all), frees the older ones
 * and rewrites dir/manifest atomically. Returns the number of entries removed
 * (0: none), or -PSKV_EIO with why (the entries are then gone from memory only:
 * the file still lists them). Entries move: pointers into m->e do not survive. */
int manifest_retain(const char *dir, manifest *m, size_t keep, char *why, size_t whylen);

/* Frees everything m holds (m itself is the caller's). */
void manifest_free(manifest *m);

#endif
