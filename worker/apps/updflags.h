/* The updater flags the training apps share (softmax, mlp, sparse-lr): --updater
 * and its hyper-parameters, checked before joining and turned into table options.
 *
 * Defaults follow the updater when a flag is left at its default: --lr is 0.01 for
 * sgd and adagrad, 0.001 for adam and adamw (Kingma and Ba), 0.1 for ftrl (its
 * alpha). ftrl's beta is 1 per example (McMahan et al. 2013: "beta = 1 is usually
 * good enough") and lambda1 1/16 per example (pskv-tune's study, docs/benchmarks.md),
 * so 1/--batch and 1/(16 x --batch) for the mean gradients the apps push.
 * docs/operations.md lists them.
 *
 * OWNS nothing: reads the worker's config table (these flags: train/train_flags.c).
 * THREAD: the main thread. NEVER allocates or blocks. */
#ifndef PSKV_UPDFLAGS_H
#define PSKV_UPDFLAGS_H

#include "config.h"
#include "pskv.h"

/* Checks --updater and the hyper-parameter flags for the chosen updater; prints
 * the reason naming the flag to stderr and returns -1 (exit 2), or returns 0. */
int updflags_check(cfg_entry *cfg);

/* Fills o's updater and hyper-parameters from the flags (after updflags_check). */
void updflags_apply(cfg_entry *cfg, pskv_table_opts *o);

#endif
