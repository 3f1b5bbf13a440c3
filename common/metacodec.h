/* metacodec: Meta (frame 0 of every message) to and from its protobuf bytes, fast.
 *
 * protobuf-c's generic pack and unpack walk all of Meta's 130-odd fields through
 * its descriptor, twice to pack (size, then bytes) and again to free: about 10,000
 * instructions a message each way, more than the rest of a 4 KiB step's work on
 * either side (docs/benchmarks.md, issue 38's small-message profile). A data
 * message sets a dozen scalars. This codec reads the descriptor once into a flat
 * table (one entry a field: its tag, type and offsets) and packs or unpacks the
 * scalar fields from it. A message with anything else (a string, bytes, a
 * repeated or message field, unknown fields) goes through protobuf-c as before,
 * so the bytes and the accepted inputs are protobuf-c's: the fast pack writes the
 * fields in the descriptor's order, as protobuf-c does (test_metacodec checks
 * them byte for byte), and the fast unpack accepts only messages protobuf-c
 * accepts with the same result, handing every other one to it to decide.
 *
 * OWNS   the field table (static, built on first use; thread-safe: a once-only
 *        initialisation).
 * THREAD any.
 * NEVER  changes what goes on the wire or what is refused. */
#ifndef PSKV_METACODEC_H
#define PSKV_METACODEC_H

#include <stddef.h>
#include <stdint.h>

#include "pskv.pb-c.h"

/* The largest Meta the fast pack writes (each scalar field at most 13 bytes). */
#define METACODEC_MAX_FAST 2048

/* Packs m into out (cap bytes, at least METACODEC_MAX_FAST): its length, or 0
 * when m carries more than scalars (the caller packs it with protobuf-c). */
size_t metacodec_pack(const Pskv__Meta *m, uint8_t *out, size_t cap);

/* Decodes len bytes into a new Meta (free with metacodec_free, or with
 * pskv__meta__free_unpacked). NULL when the bytes are not a valid Meta (as
 * protobuf-c decides) or out of memory. *plain is set to 1 when the Meta holds
 * no allocation but itself (free() frees it), 0 when protobuf-c decoded it. */
Pskv__Meta *metacodec_unpack(const uint8_t *data, size_t len, int *plain);

/* Frees a Meta from metacodec_unpack; plain as it said. NULL is a no-op. */
void metacodec_free(Pskv__Meta *m, int plain);

#endif
