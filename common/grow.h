/* Growing arrays: one doubling helper instead of a copy per module.
 *
 * OWNS   nothing: the array and its capacity are the caller's.
 * THREAD any (no state of its own).
 * NEVER  shrinks or frees the array, never initialises the new elements, and
 *        leaves both untouched on failure. */
#ifndef PSKV_GROW_H
#define PSKV_GROW_H

#include <stddef.h>

/* Makes *buf hold at least `need` elements of `elem` bytes, doubling *cap (from 64)
 * and reallocating as needed. Returns 0, or -PSKV_ENOMEM with *buf and *cap as
 * they were. */
int grow_array(void **buf, size_t *cap, size_t need, size_t elem);

#endif
