/* mload: a model file (common/modelfile.h) as a snapshot pskv-serve can answer
 * from (snap.h): the table named as the training app names it (softmax-IN-H-OUT,
 * mlp-IN-H-OUT, sparse-lr.w), sparse keys sorted, the version taken from the
 * file's evaluation record (clock) and its modification time (wall).
 *
 * OWNS: nothing; the snapshot it returns is the caller's.
 * THREADS: any.
 * NEVER: trusts the file: the kind, the sizes and the row count must agree. */
#ifndef PSKV_MLOAD_H
#define PSKV_MLOAD_H

#include <stddef.h>

#include "snap.h"

/* Loads path into a new snapshot in *out (caller publishes or frees it). Returns
 * 0, or a negated PSKV_E* with why (-PSKV_ENOTFOUND, -PSKV_EIO for a bad file or
 * a model pskv-serve cannot answer for, -PSKV_ENOMEM). */
int mload_file(const char *path, snap **out, char *why, size_t whylen);

#endif
