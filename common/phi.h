/* phi: the phi-accrual failure detector (Hayashibara et al., 2004), in the form
 * Akka uses: over a window of a node's recent heartbeat gaps (their mean and
 * standard deviation), phi(t) = -log10 P(a gap longer than t), with the normal
 * distribution's tail approximated by a logistic:
 *   y = (t - mean) / sd,  z = y (1.5976 + 0.070566 y^2),  phi = log10(1 + e^z).
 * phi 1 means a 10% chance that the node is merely late, phi 8 one in 10^8.
 * A node whose gaps jitter (a loaded host) gets a larger sd, so more time before
 * its phi climbs; a steady one is judged quickly.
 *
 * The window is a plain struct, not an opaque object: it lives inside the
 * scheduler's node table, which moves by value (realloc, compaction), and it
 * allocates nothing.
 *
 * OWNS   nothing beyond the struct. THREAD any (no shared state).
 * NEVER  fails: no samples yet means the prior (the expected period, sd floor). */
#ifndef PSKV_PHI_H
#define PSKV_PHI_H

#include <stdint.h>

#define PHI_WINDOW 64 /* gaps remembered: at 100 ms heartbeats, the last 6.4 s */

typedef struct phi_window {
    double gaps[PHI_WINDOW]; /* ring of the latest gaps, ms */
    uint32_t n;              /* gaps held (<= PHI_WINDOW) */
    uint32_t next;           /* where the next gap goes */
    uint64_t total;          /* gaps ever added */
    double prior_ms;         /* the mean before any gap: the heartbeat period */
    double min_sd_ms;        /* sd never below this: a perfectly steady node would
                                otherwise be judged dead one jitter late */
} phi_window;

/* An empty window: mean prior_ms (> 0), sd at least min_sd_ms (> 0). */
__attribute__((visibility("hidden"))) void phi_init(phi_window *w, double prior_ms, double min_sd_ms);

/* Adds one heartbeat gap (ms, >= 0); the oldest of a full window drops out. */
__attribute__((visibility("hidden"))) void phi_add(phi_window *w, double gap_ms);

/* The window's mean gap (the prior when empty) and standard deviation (population,
 * at least min_sd_ms), in ms. */
__attribute__((visibility("hidden"))) double phi_mean(const phi_window *w);
__attribute__((visibility("hidden"))) double phi_sd(const phi_window *w);

/* phi after `elapsed_ms` of silence since the last heartbeat (0 and up; large
 * silences give large, finite values). */
__attribute__((visibility("hidden"))) double phi_value(const phi_window *w, double elapsed_ms);

/* The silence (ms) at which phi reaches `threshold` (> 0): the inverse of
 * phi_value, solved in closed form (the cubic in y has one real root). */
__attribute__((visibility("hidden"))) double phi_time_to(const phi_window *w, double threshold);

#endif
