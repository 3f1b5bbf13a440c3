/* Applications that pskv-worker runs on top of libpskv. Each returns the process
 * exit status (0 = success). */
#ifndef PSKV_APPS_H
#define PSKV_APPS_H

#include <signal.h>

#include "config.h"
#include "pskv.h"

/* Set by pskv-worker's SIGINT/SIGTERM handler: applications stop at the next step,
 * close their handle (so the scheduler hears FINISH at once) and exit 128 + it. */
extern volatile sig_atomic_t app_stop_signal;

/* The exit status for a stop by signal, after saying so on stderr. */
int app_stopped(const char *app);

/* --app check: exact integer sums over dense and sparse tables on every server. */
int app_check(pskv_worker *w, cfg_entry *cfg);

/* --app resume-check: checkpoint, kill, resume: values, optimizer state and
 * progress as they were (app_resume.c). */
int app_resume_check(pskv_worker *w, cfg_entry *cfg);

/* --app bench: push/pull step time and throughput for one value size. */
int app_bench(pskv_worker *w, cfg_entry *cfg);

/* --app softmax | mlp: Fashion-MNIST training (app_train.c). */
int app_train(pskv_worker *w, cfg_entry *cfg);

/* Checks, before joining, that the Fashion-MNIST files exist; prints which path
 * was tried and how to install the data when they do not. Returns 0 or -1. */
int app_train_check_data(cfg_entry *cfg);

/* --app sparse-lr: logistic regression on LIBSVM data (app_sparse_lr.c). */
int app_sparse_lr(pskv_worker *w, cfg_entry *cfg);

#endif
