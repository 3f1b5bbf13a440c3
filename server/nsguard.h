/* The namespace checks of a worker's request at a server, before anything of it is
 * applied: the sender key's binding (PSKV_EACCES, counted as a "namespace" refusal)
 * for TABLE_OPEN, PUSH, PULL and TABLE_LR (a write, like a push), and the
 * namespace's quota for a PUSH that would create rows (PSKV_EQUOTA). nspace.h holds the rules; this applies them to a
 * message. THREAD: the server's loop thread. NEVER answers or applies: the caller
 * refuses the message with the code and reason returned. */
#ifndef PSKV_NSGUARD_H
#define PSKV_NSGUARD_H

#include <stddef.h>

#include "store/table.h"
#include "wire.h"

/* Checks msg (its keys already resolved) against the tables of ts and the servers
 * of view (NULL: one). Returns 0, or -PSKV_EACCES / -PSKV_EQUOTA with the reason in
 * why; a message naming an unknown table passes (the caller answers that). */
int nsguard_request(table_set *ts, const wire_msg *msg, const Pskv__View *view, char *why,
                    size_t whylen);

#endif
