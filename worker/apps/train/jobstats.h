/* jobstats: the job-wide counters of a training application (softmax, mlp,
 * sparse-lr), kept in a small dense `sum` table APP.samples of 2 x W entries:
 * entry r counts rank r's examples trained, entry W + r its steps clipped by
 * --clip-norm. Each worker adds to its own two entries; rank 0 reads the sums for
 * the job's rate and clipped steps; a checkpoint carries them, so a resumed job
 * goes on from them.
 *
 * OWNS nothing (the table is the handle's). THREADS: the application's thread.
 * NEVER: waits, except jobstats_read (bounded by its time-out). */
#ifndef PSKV_JOBSTATS_H
#define PSKV_JOBSTATS_H

#include <stdint.h>

#include "pskv.h"

/* Opens APP.samples. Returns the table or a negated PSKV_E* (pskv_last_error). */
int jobstats_open(pskv_worker *w, const char *app);

/* Adds this rank's examples and clipped steps since its last call (not waited
 * for). Returns the push's timestamp or a negated PSKV_E*. */
int64_t jobstats_add(pskv_worker *w, int t, double samples, double clipped);

/* The sums over every rank: examples trained and steps clipped. Waits at most
 * timeout_ms. Returns 0 or a negated PSKV_E*. */
int jobstats_read(pskv_worker *w, int t, int timeout_ms, double *samples, double *clipped);

#endif
