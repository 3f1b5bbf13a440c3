/* balance: per-worker batch sizes that follow each worker's measured speed
 * (--balance batch on --app softmax and mlp, under --consistency bsp with --sync
 * ps, or --sync allreduce), and their replay from a plan file (--balance
 * fixed:FILE).
 *
 * The global batch B = --batch x workers stays what the user asked; worker i
 * takes b_i of it (sum b_i = B, each b_i >= 1). Data: every worker holds the
 * whole training set and the same shuffled order of it per epoch (seeded by
 * --seed and the epoch, not the rank); clock c of an epoch takes rows
 * [c B, c B + B) of that order, worker i the b_i of them after the b_j of the
 * ranks before it, so every example is trained once per epoch whatever the split.
 * Exactness: each worker's mean gradient is multiplied by W b_i / n (n: the
 * step's rows, B but in an epoch's last step); the bsp servers and
 * pskv_allreduce's PSKV_OP_MEAN both divide the sum of the W pushes by W, so
 * the update is sum_i b_i g_i / n, the mean over the global batch.
 * Speeds: after each clock every worker gives its compute time per example (its
 * thread's CPU time in the gradient, times the planted --slowdown or --jitter
 * factor of the step: wall time on a shared host varied 2-5x between windows
 * and swung the split; a worker slowed by CPU contention alone is therefore not
 * seen, docs/operations.md says so): with --sync allreduce into its slot of a
 * W-float pskv_allreduce (the sum: the same bits on every rank); with --sync ps
 * as a push to a bsp `sum` table of 4W floats in the step's clock (per rank its
 * last time, its clocks pushed, its clocks measured and its incarnations' first
 * clocks), pulled once the clock closed: the same bits on every rank. Every rank keeps the last 8 per
 * worker and takes their median. Every rank computes the same split from the same numbers:
 * batches proportional to speed, the move from the current split capped at
 * B / (2W) examples per worker per re-split, taken only when it cuts the
 * predicted clock time (the slowest b_i x t_i) by 15% or more, and only from 8
 * clocks measured at the current split (the window restarts after a re-split):
 * no swing on noise or on a speed that alternates clock by clock, and a worker
 * that slows is followed within about 8 clocks a re-split.
 * A worker that dies (--sync ps): the bsp clocks close without it once the
 * scheduler declares it dead, so the first clock it did not push to the speeds
 * table is the same for every survivor; they drop it there, its batch goes to
 * them in proportion to theirs (the global batch kept), and each scales by the
 * live count W'. The parameter table takes a clock's mean over the workers that
 * pushed to it (bsp_mean_pushed), which is W' then. The clock it died in misses
 * its share. A worker that takes the dead rank over (--rank R, as under bsp
 * without balancing) starts at the others' clock and for two clocks pushes no
 * gradient (its clock alone: not in the mean) and its speeds-table row with a
 * join mark in the first: the first pull is its baseline, and at the second
 * every rank sees the same table, takes the ranks that pushed in that clock
 * (less any on its own first clock) as live, and puts the batches even over them
 * from the next step, the window restarted. With --sync allreduce the ring
 * re-forms around a worker that takes the rank over (train_ar.h) and the split
 * starts even again.
 *
 * OWNS: its arrays and the --balance-log file (rank 0).
 * THREAD: the app's main thread. NEVER: allocates after balance_new. */
#ifndef PSKV_BALANCE_H
#define PSKV_BALANCE_H

#include <stdint.h>

#include "config.h"
#include "pskv.h"
#include "report.h"

typedef struct balance balance;

/* Reads --balance (none, batch or fixed:FILE) and --balance-log and checks them
 * against --consistency, --sync, --batch, --accumulate, --backup and --prefetch;
 * took_over: this worker took a dead one's rank over (rank 0 appends to the log).
 * *out = NULL with --balance none. Returns 0, 2 after saying on stderr which flag
 * is wrong (or which line of the plan file), or 1 out of memory. */
int balance_new(cfg_entry *cfg, int rank, int W, int took_over, balance **out);

/* --sync ps with --balance batch: opens the speeds table (`APP.balance`); a
 * worker that took a dead one's rank over joins (balance_pushes). Returns 0, or
 * 1 after naming the table's error. */
int balance_open(balance *b, pskv_worker *w);

/* 0 while this worker, taking a dead one's rank back, is not in the split yet
 * (no rows: it clocks without pushing its gradient); else 1 (also for NULL). */
int balance_pushes(const balance *b);

/* The global batch B. */
int balance_global(const balance *b);

/* The split at step `step` (0-based), for a run that starts or resumes there:
 * even (the first ranks one more), or the plan file's. */
void balance_start(balance *b, int64_t step);

/* The workers still sharing the global batch: W less those that died (the count
 * the bsp servers divide a clock's sum by). */
int balance_live(const balance *b);

/* This rank's rows of step `in_epoch` of an epoch of n rows: *first and *count
 * (0 at an epoch's end that does not reach it). Returns the step's rows in all. */
uint32_t balance_rows(const balance *b, int64_t in_epoch, uint32_t n, uint32_t *first,
                      uint32_t *count);

/* Step `step`'s measure, before its clock: this worker spent `ns` computing its
 * `count` rows. With --sync ps it is pushed to the speeds table in this clock.
 * Every rank calls it every step. Returns 0 or the negated error of the push. */
int balance_push(balance *b, pskv_worker *w, int64_t step, uint32_t count, int64_t ns);

/* --sync ps (else a no-op), right after the worker's clock of a step: sends the
 * speeds table's pull, which the servers answer once the clock closed, with the
 * parameters' (no round trip of its own); balance_after waits for it. Returns 0 or
 * the negated error of the pull. */
int balance_pull_send(balance *b, pskv_worker *w);

/* After step `step`'s clock: the speeds shared (--balance batch) and the split
 * of step + 1 chosen; a re-split (or a dead worker dropped, --sync ps) is printed
 * (by the lowest live rank), written to the metrics file (rep) and to
 * --balance-log. Every rank calls it after every step. Returns 0 or the negated
 * error of pskv_allreduce or of the speeds table's pull. */
int balance_after(balance *b, pskv_worker *w, report *rep, int64_t step);

/* Re-splits so far. */
int64_t balance_resplits(const balance *b);

/* Frees b and closes its log; NULL-safe, nulls *b_p. */
void balance_destroy(balance **b_p);

#endif
