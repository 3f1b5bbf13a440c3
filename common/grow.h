/* Arrays: one doubling helper instead of a copy per module, and one sort of a
 * key list into its distinct keys and one search in it.
 *
 * OWNS   nothing: the array and its capacity are the caller's.
 * THREAD any (no state of its own).
 * NEVER  shrinks or frees the array, never initialises the new elements, and
 *        leaves both untouched on failure. */
#ifndef PSKV_GROW_H
#define PSKV_GROW_H

#include <stddef.h>
#include <stdint.h>

/* Makes *buf hold at least `need` elements of `elem` bytes, doubling *cap (from 64)
 * and reallocating as needed. Returns 0, or -PSKV_ENOMEM with *buf and *cap as
 * they were. */
int grow_array(void **buf, size_t *cap, size_t need, size_t elem);

/* Sorts a[0..n-1] ascending and drops repeats; returns how many are left. */
size_t sort_unique_u64(uint64_t *a, size_t n);

/* The index of the first element >= k in sorted a[0..n) (n when above every one). */
size_t lower_bound_u64(const uint64_t *a, size_t n, uint64_t k);

#endif
