/* Checkpoints and resume, the scheduler's side. A checkpoint: CHECKPOINT (seq N)
 * goes to every live server, each writes its partitions and answers
 * CHECKPOINT_ACK (or ERROR); when every live server has, the checkpoint is
 * recorded in <data-dir>/manifest (manifest.h) and whoever asked is answered. A
 * resumed job (--resume): once its servers registered (each listing the valid
 * checkpoint files it holds), the newest checkpoint of which every partition has
 * a copy is planned onto the new servers, more or fewer than wrote it
 * (reshard.h), and its chains, loads and the workers' progress travel in the
 * first view.
 *
 * OWNS   the manifest, the checkpoint in progress (seq, start time, requesters),
 *        the --checkpoint-every timer, and the resume plan (the checkpoint resumed
 *        from, who loads each partition from which old node's file, the (new, old)
 *        node pairs).
 *        Writes each server's ckpt_acked in the node table.
 * THREAD the scheduler's thread only.
 * NEVER  writes checkpoint data (the servers do); never changes the placement but
 *        once, handing a resumed job's chains to view.c before the first view; never
 *        waits but in rewriting the manifest (fsync) when a checkpoint completes,
 *        and in its sends (sched_net.h). */
#ifndef PSKV_SCHED_CHECKPOINT_H
#define PSKV_SCHED_CHECKPOINT_H

#include <stdint.h>

#include "manifest.h"
#include "membership.h"
#include "wire.h"

/* Reads data_dir's manifest (an empty data_dir: no checkpoints) and checks that
 * a resume has a checkpoint to start from; every_s > 0 starts one that often while
 * the job runs; keep > 0 keeps only the keep newest complete checkpoints (older
 * ones leave the manifest, and the servers delete their files, as each new one
 * completes, but never a file a kept delta builds on); full_every K > 1: of each K
 * checkpoints the first is full and the others deltas (servers that cannot write
 * a delta write a full file). Returns 0, or the process's exit status after
 * printing why on stderr: 1 when the manifest cannot be read, 2 when --resume has
 * nothing to use. data_dir must outlive the module. */
enum { RESUME_NONE, RESUME_NEWEST, RESUME_BEST }; /* --resume, --resume-best */
int ckpt_init(const char *data_dir, int resume, double every_s, int keep, int full_every);

/* A resumed job: 1 and *job = the job of the newest checkpoint (--resume-best:
 * of the one marked best); else 0. */
int ckpt_resume_job(uint64_t *job);

/* Starts a checkpoint: requested by msg (CHECKPOINT, from pskvctl or a worker;
 * answered CHECKPOINT_ACK or ERROR when it completes or fails), or by the timer
 * when msg is NULL. Full or a delta as --full-every says; msg with delta false
 * (pskvctl) asks for a full one and starts the cycle again. In a service, a request
 * naming a group (pskvctl checkpoint --group G) or from a worker of a group is a
 * checkpoint of that group's namespace only (servers write its tables alone, the
 * manifest records its workers alone: of=ns:NS); else of every table. A request
 * while one of its scope is in progress is answered with it; of another scope, it
 * starts when that one ends. Refuses msg without --data-dir, when the job is not
 * running, or naming a group that is not running. */
void ckpt_start(wire_msg *msg);

/* CHECKPOINT_ACK from a server: it wrote checkpoint seq; completes the checkpoint
 * when it was the last live server. */
void ckpt_on_ack(wire_msg *msg);

/* ERROR carrying the seq of the checkpoint in progress: it failed (1). Returns 0
 * for any other error (the caller logs it). */
int ckpt_on_error(const Pskv__Meta *r);

/* Subscribes to the node events (events.h) and adds the view fillers (view.h):
 * the resume is planned when the cluster is complete; the checkpoint in progress
 * completes (or fails) without a server that died in the running job or was let
 * go after a drain; each evaluation may mark the best checkpoint; VIEW carries a
 * resumed job's loaders and workers' progress, STATUS_REPLY the best checkpoint.
 * Once, before the event loop, before the other policies' hooks. */
void ckpt_hooks(void);

/* The periodic tick at `now` (ms): starts the --checkpoint-every checkpoint when
 * due; fails one that is not done after 120 s. */
void ckpt_tick(int64_t now);

/* The newest complete checkpoint that holds namespace ns (a checkpoint of ns, or
 * of every table while the servers held ns), for a group's resume; NULL with why
 * (no --data-dir, or none holds it). The pointer lasts until the next checkpoint
 * completes. */
const manifest_entry *ckpt_newest_holding(const char *ns, char *why, size_t whylen);

/* Frees the manifest, the resume plan and any requesters. */
void ckpt_free(void);

#endif
