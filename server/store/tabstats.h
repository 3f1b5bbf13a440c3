/* What the server's tables hold, for the operator: the end-of-run report lines
 * (keys, bytes, admission and eviction per table, rows the updater's NaN check
 * restored and ftrl rows left unstored, resident memory).
 *
 * THREAD: the server's loop thread only. NEVER changes a table. */
#ifndef PSKV_TABSTATS_H
#define PSKV_TABSTATS_H

#include "table.h"

/* Logs one line per table and one for the process's resident memory. */
void tabstats_log(table_set *ts);

#endif
