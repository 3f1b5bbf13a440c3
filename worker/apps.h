/* Applications that pskv-worker runs on top of libpskv. Each returns the process
 * exit status (0 = success). */
#ifndef PSKV_APPS_H
#define PSKV_APPS_H

#include "config.h"
#include "pskv.h"

/* --app check: exact integer sums over dense and sparse tables on every server. */
int app_check(pskv_worker *w, cfg_entry *cfg);

/* --app bench: push/pull step time and throughput for one value size. */
int app_bench(pskv_worker *w, cfg_entry *cfg);

#endif
