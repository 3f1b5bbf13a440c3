/* sfilter: the server's side of a table's filters (common/filter.h): the key
 * lists of the `keycache` filter, resolved and stored as a push or pull arrives.
 * Frames are unpacked by wire.c before this runs; pull replies are packed with
 * filter_pack (consist.c).
 *
 * OWNS nothing beyond each table's keycache (table.h holds it; created here on
 * first use). THREAD: the server's loop thread. NEVER applies or answers anything:
 * the caller refuses a message this refuses. */
#ifndef PSKV_SFILTER_H
#define PSKV_SFILTER_H

#include <stddef.h>

#include "store/table.h"
#include "wire.h"

/* For a PUSH or PULL to a table with keycache: stores a key list it carries under
 * its signature (after checking the signature), or gives a message that carries
 * only the signature its keys (msg->keys, owned by msg). Returns 0 (also for any
 * other message), -PSKV_EKEYMISS (the list is not held: the worker sends it
 * again) or -PSKV_EPROTO (a wrong signature, or keycache not on for the table),
 * with the reason naming table and filter in why. */
int sfilter_keys(table_set *ts, wire_msg *msg, char *why, size_t whylen);

#endif
