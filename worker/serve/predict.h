/* predict: the built-in models' scores for rows a client sent, from one snapshot
 * (snap.h): softmax and MLP (dense features, worker/apps/train/model.h's layout and
 * forward pass) give each class's probability; sparse-lr (`"id:value"` features,
 * the bias under SPARSE_BIAS_KEY) gives the probability of the positive class.
 *
 * OWNS: nothing; scratch is allocated per call and freed before it returns.
 * THREADS: any; calls share nothing (the snapshot is read-only).
 * NEVER: trusts the rows: every count and value is checked, and the first one
 * wrong is named in `why` (e.g. "rows[2]: 3 features, the model takes 4"). */
#ifndef PSKV_PREDICT_H
#define PSKV_PREDICT_H

#include <stddef.h>
#include <stdio.h>

#include "sjson.h"
#include "snap.h"

/* Writes the JSON array of the scores of `rows` (a JSON array of at most
 * max_rows rows) under model s to out. Returns 0, -PSKV_EINVAL with why naming
 * the field at fault, or -PSKV_ENOMEM. */
int predict_rows(const snap *s, const sjson *rows, size_t max_rows, FILE *out, char *why,
                 size_t whylen);

/* Parses one sparse feature "ID:VALUE" (ID a 64-bit integer, VALUE finite).
 * Returns 0, or -1 when malformed. */
int predict_feature(const char *text, uint64_t *id, double *value);

#endif
