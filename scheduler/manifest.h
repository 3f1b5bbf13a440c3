/* The scheduler's checkpoint manifest: <data-dir>/manifest, one line per
 * complete checkpoint (every partition written by at least one server), rewritten
 * whole (temp file, fsync, rename) each time one completes:
 *   ckpt seq=N job=J time=UNIX partitions=P replicas=R vnodes=V chains=ID,ID,...
 *        workers=RANK:EPOCH:STEP:POS,... kind=full|delta bases=ID:SEQ,...
 *        clock=C best=METRIC:VALUE:EVALCLOCK of=ns:NS namespaces=NS,...
 * chains lists P x R server node ids of the job that wrote it (0 = none), head
 * first; a resumed job maps them to its new servers by the files each reports.
 * bases: for each server, the full checkpoint its file's chain starts at (SEQ =
 * N: a full file); kind is delta when some file is. A line without them (written
 * before incremental checkpoints) is all full files. clock: the slowest worker's
 * clock when the checkpoint completed (absent: not known). best: on at most one
 * line, the checkpoint marked best, whose clock is the nearest to the best
 * evaluation's (METRIC VALUE at EVALCLOCK; scheduler/checkpoint.c); retention
 * never removes it. of=ns:NS: a checkpoint of one namespace (a group's: pskvctl
 * checkpoint --group, or pskv_checkpoint from a worker of a service's group),
 * whose files hold only NS's tables and whose workers are that group's; absent:
 * every table. namespaces: those the servers reported holding when a checkpoint
 * of every table completed (absent: not known, read as every one). A worker of a
 * named group is RANK:EPOCH:STEP:POS:GROUP. Names are written with every byte but
 * [A-Za-z0-9._-] as %XX.
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

#define MANIFEST_NAME_MAX 64 /* a group's or namespace's name */
#define MANIFEST_MAX_NS 64   /* namespaces listed per checkpoint */

typedef struct manifest_progress {
    int rank;
    int64_t epoch, step, pos;
    char group[MANIFEST_NAME_MAX + 1]; /* "" = the unnamed group (a job's workers) */
} manifest_progress;

typedef struct manifest_entry {
    uint64_t seq, job;
    int64_t time;
    uint32_t partitions, replicas, vnodes;
    uint32_t *chains;            /* partitions x replicas */
    manifest_progress *workers;
    size_t nworkers;
    uint32_t *base_nodes;        /* nbases server node ids ... */
    uint64_t *bases;             /* ... and the full checkpoint each one's chain starts at */
    size_t nbases;
    int64_t clock;               /* the slowest worker's clock, -1 = not known */
    int best;                    /* marked best: ... */
    char best_metric[16];        /* ... nearest the best evaluation of this metric, */
    double best_value;           /* its value */
    int64_t best_clock;          /* and its snapshot's clock */
    int ns_only;                 /* of one namespace, ns (a group's checkpoint) */
    char ns[MANIFEST_NAME_MAX + 1];
    int nns;                     /* namespaces held: nns of them (-1: not known) */
    char (*nss)[MANIFEST_NAME_MAX + 1];
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

/* Rewrites dir/manifest from m (after a change of the mark best). Returns 0 or
 * -PSKV_EIO with why. */
int manifest_write(const char *dir, const manifest *m, char *why, size_t whylen);

/* The entry marked best, or NULL. */
manifest_entry *manifest_best(const manifest *m);

/* Retention: keeps the `keep` newest entries (keep 0 = all) and the one marked
 * best, frees the other older ones and rewrites dir/manifest atomically. Returns the number of entries removed
 * (0: none), or -PSKV_EIO with why (the entries are then gone from memory only:
 * the file still lists them). Entries move: pointers into m->e do not survive. */
int manifest_retain(const char *dir, manifest *m, size_t keep, char *why, size_t whylen);

/* The oldest checkpoint a file of e builds on: the smallest of its bases (e's
 * own seq when every file is full). Retention keeps every file from there on. */
uint64_t manifest_oldest_base(const manifest_entry *e);

/* 1 when e holds namespace ns: a checkpoint of ns, or of every table whose list
 * names ns (or has no list). */
int manifest_holds_ns(const manifest_entry *e, const char *ns);

/* 1 when some file of e is a delta. */
int manifest_is_delta(const manifest_entry *e);

/* Frees everything m holds (m itself is the caller's). */
void manifest_free(manifest *m);

#endif
