/* Messages for pskv-garbage: multipart messages built frame by frame, a valid
 * message of every type as its sender would build it, and seeded mutations of
 * those (the `mutate` kind and the fake scheduler of --listen).
 *
 * OWNS   the frames of a gmsg (malloc) until gmsg_free.
 * THREAD one: the random state is the tool's, seeded once by gmsg_seed.
 * NEVER  touches a socket (garbage.c sends); never builds a message that names a
 *        table a real job could use (every table is "pskv-garbage/...") */
#ifndef PSKV_GARBAGE_MSG_H
#define PSKV_GARBAGE_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "pskv.pb-c.h"

#define GMSG_MAX_PARTS 5
#define GMSG_TABLE "pskv-garbage/t" /* + a digit: the tool's own tables */

/* One multipart message being built; the frames are owned (malloc). */
typedef struct gmsg {
    int n;
    void *data[GMSG_MAX_PARTS];
    size_t len[GMSG_MAX_PARTS];
} gmsg;

/* Seeds the generator (any value; 0 is taken as 1). */
void gmsg_seed(uint64_t seed);

/* The next pseudo-random number (xorshift64*: reproducible from the seed). */
uint64_t gmsg_rnd(void);

/* Fills p with n pseudo-random bytes. */
void gmsg_fill_random(void *p, size_t n);

/* Appends a copy of len bytes as a frame (aborts past GMSG_MAX_PARTS: a bug). */
void gmsg_add(gmsg *m, const void *data, size_t len);

/* Appends meta, packed, as a frame. */
void gmsg_add_meta(gmsg *m, const Pskv__Meta *meta);

/* Appends a keys frame first..first+n-1 (little-endian uint64). */
void gmsg_add_keys(gmsg *m, uint64_t first, uint64_t n);

/* Appends a values frame of n floats 0, 0.25, 0.5, ... */
void gmsg_add_vals(gmsg *m, uint64_t n);

/* Frees every frame; m is empty again. */
void gmsg_free(gmsg *m);

/* 1 when len bytes decode as a Meta. */
int gmsg_meta_parses(const void *data, size_t len);

/* The message types a template exists for (every type but MSG_NONE). */
extern const int gmsg_types[];
extern const int gmsg_ntypes;

/* m (empty) becomes a valid message of `type` with job id `job` (0 = unset),
 * its fields and payload picked at random. */
void gmsg_template(gmsg *m, int type, uint64_t job);

/* m (empty) becomes a VIEW of job `job` at `epoch` listing two servers, both at
 * 127.0.0.1:port with public key pub (NULL: keys off), and a worker: node id 3,
 * rank 0. */
void gmsg_view(gmsg *m, uint64_t job, uint64_t epoch, int port, const char *pub);

/* Applies 1 to 4 random mutations to m (bytes, fields appended to the Meta,
 * frames cut, dropped, duplicated, swapped, values made non-finite, keys made
 * wild, the Meta of another type spliced in). */
void gmsg_mutate(gmsg *m);

/* 1 when frame 0 of m decodes as a REGISTER of a worker: a well-formed join, which
 * a scheduler rightly accepts and which would take a rank from the job the
 * daemons are kept for; the tool does not send those. */
int gmsg_registers_worker(const gmsg *m);

/* The type frame 0 of m decodes to, or -1 when it does not decode. */
int gmsg_type(const gmsg *m);

#endif
