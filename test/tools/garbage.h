/* pskv-garbage's pieces (garbage.c: the options, the hand-made kinds and one
 * pass over them; garbage_live.c: the mutate kind, the --seconds loop and the
 * --listen fake scheduler a worker dials).
 *
 * OWNS   the options' keyset (loaded once in main).
 * THREAD one.
 * NEVER  waits without a time-out: every socket has linger 0 (or a bounded
 *        one) and every poll a deadline. */
#ifndef PSKV_GARBAGE_H
#define PSKV_GARBAGE_H

#include <stdint.h>

#include "keys.h"

typedef struct opts {
    const char *endpoint; /* tcp://HOST:PORT */
    const char *kind;     /* "all" or one kind name */
    int64_t max_message;  /* receiver's limit; 0 = skip the oversized kind */
    uint64_t job_id;      /* 0 = leave job_id unset */
    const char *table;    /* out-of-range: an existing dense table, else NO_SUCH_TABLE */
    uint32_t width;       /* out-of-range: that table's width */
    int timeout_ms;       /* wait for each reply */
    uint64_t seed;
    double seconds;       /* > 0: repeat the kinds until this long has passed */
    int rate;             /* loop: messages per second at most (0 = no limit) */
    int listen;           /* > 0: be a fake scheduler on this port instead */
    const char *server_key; /* keys: the daemon's public key (default: scheduler.pub) */
    int keyed;            /* --keys given: ks holds this tool's keypair */
    keyset ks;
} opts;

/* What the messages of one kind met. */
typedef struct tally {
    uint64_t sent, errors, others, silent, stalled, skipped;
} tally;

/* Monotonic milliseconds. */
int64_t garbage_now_ms(void);

/* A DEALER to o->endpoint (CURVE from o->ks when keyed), send and receive
 * time-outs of o->timeout_ms, the given linger. NULL after printing why. */
void *garbage_dealer(void *ctx, const opts *o, int linger_ms);

/* One mutated message of a random type on *sock (a DEALER made or renewed every
 * 64 messages; the caller closes it), replies drained without waiting. Counted
 * in t and, by the template's type, in per_type[type]. */
void garbage_mutate_one(void *ctx, const opts *o, void **sock, int *used, tally *t,
                        uint64_t *per_type);

/* --listen: a fake scheduler on 127.0.0.1:o->listen and a fake server beside it
 * (the view the fake sends lists it) for o->seconds; every message a worker sends
 * is answered with semi-valid and mutated messages. Returns 0, or 1 when it
 * cannot listen. */
int garbage_serve(void *ctx, const opts *o);

#endif
