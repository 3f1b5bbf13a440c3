/* sshm: the server's side of shared memory with workers on its host (a worker's
 * --shm; docs/protocol.md "Shared memory"). A PUSH may carry, instead of a values
 * frame, a reference (segment name, generation, offset, length) into a segment
 * its worker made; a PULL may name the region its reply's values go to. This
 * module maps each worker's segment once (keyed by the worker's node id, replaced
 * when a newer generation arrives), checks every reference against it, points a
 * push's values into it, and hands answer_pull the region to write to. The
 * worker's host (shm_host) is checked at its first reference and kept with its
 * entry, so later references need not carry it; the entry goes when the view no
 * longer lists the worker (a worker taking over its rank is a new node).
 *
 * OWNS   the mappings (unmapped when replaced and by sshm_destroy); never a
 *        segment's name (the worker unlinks it).
 * THREAD the server's loop thread only.
 * NEVER  maps a segment of another host (shm_host), another owner or mode
 *        (shmseg_open), and never lets a reference outside its segment through:
 *        the request is refused before anything is applied. */
#ifndef PSKV_SSHM_H
#define PSKV_SSHM_H

#include <stdint.h>

#include "wire.h"

typedef struct sshm sshm;

/* An empty set of mappings, or NULL when out of memory. */
sshm *sshm_new(void);

/* Unmaps everything and frees *self_p, then sets it NULL. NULL is fine. */
void sshm_destroy(sshm **self_p);

/* For a PUSH or PULL carrying a shared-memory reference: maps its segment if need
 * be and checks the region lies inside it; a PUSH's msg->vals then point at the
 * region. Returns 0 (also for a message without one), or, nothing applied and
 * `why` set: -PSKV_ENOSHM (another host, no host named by a worker without an
 * entry, cannot map: the worker falls back to TCP), -PSKV_ESTALE (an older generation than the one mapped: sent again),
 * -PSKV_ESHMREF (outside the segment, another segment under the same generation,
 * a malformed name). */
int sshm_resolve(sshm *s, wire_msg *msg, char *why, size_t whylen);

/* A new view: the segments (and the checked hosts) of workers it no longer lists
 * are unmapped and forgotten. */
void sshm_view(sshm *s, const Pskv__View *v);

/* The region [off, off + len) of worker `node`'s segment `gen`, as mapped here,
 * or NULL when that generation is no longer (or not) mapped. */
float *sshm_region(sshm *s, uint32_t node, uint64_t gen, uint64_t off, uint64_t len);

/* Segments mapped now (for the log at exit). */
int sshm_count(const sshm *s);

#endif
