/* pipestats: what a pipeline stage (--app pipeline) measures about itself: its
 * time split (forward, backward, waiting for its neighbours, waiting on the
 * servers), the activations it holds for backward passes (count and bytes, and
 * their peaks), and the passes of one chosen mini-batch for a timeline. The
 * stages' numbers travel to their pipeline's first stage packed as floats
 * (pipestats_pack), which turns them into the pipeline's bubble fraction: the
 * mean over stages of each one's idle share, wait / (forward + backward + send +
 * wait).
 *
 * OWNS: the events of the chosen mini-batch (allocated by pipestats_init, freed
 * by pipestats_fini).
 * THREADS: the stage's thread only. NEVER: does I/O but the printing calls. */
#ifndef PSKV_PIPESTATS_H
#define PSKV_PIPESTATS_H

#include <stddef.h>
#include <stdint.h>

#define PIPESTATS_FLOATS 8  /* floats per stage in pipestats_pack */

typedef enum ps_kind {
    PS_FWD,  /* a forward pass (with --recompute, its first run) */
    PS_BWD,  /* a backward pass, the recomputed forward included */
    PS_WAIT, /* waiting for a neighbour's activations or gradients */
    PS_SRV,  /* a pull, or a push and its clock */
    PS_SEND, /* handing activations or gradients to ZeroMQ for a neighbour */
    PS_KINDS
} ps_kind;

typedef struct ps_event {
    uint8_t kind;
    int32_t micro;      /* micro-batch, -1 for the servers */
    int64_t t0_us, t1_us; /* CLOCK_MONOTONIC */
} ps_event;

typedef struct pipestats {
    double secs[PS_KINDS];
    int inflight, peak;          /* micro-batches held */
    size_t held, peak_bytes;     /* bytes of saved activations */
    double wall, cpu_thread, cpu_process; /* seconds of training: elapsed, on a core */
    int64_t t0[3];                        /* pipestats_run_begin's readings */
    int64_t record_step;         /* mini-batch whose passes are recorded, -1 none */
    int recording, nev, cap;
    ps_event *ev;
} pipestats;

/* Zeroes *s; with record_step >= 0, room for the events of that mini-batch of M
 * micro-batches (each pass, its wait and its send, and the servers). -1 out of memory. */
int pipestats_init(pipestats *s, int64_t record_step, int M);

/* Frees the events; NULL-safe, may be called again. */
void pipestats_fini(pipestats *s);

/* Adds [t0, t1) (CLOCK_MONOTONIC ns) to kind's time; records it as an event
 * while recording. */
void pipestats_add(pipestats *s, ps_kind kind, int micro, int64_t t0_ns, int64_t t1_ns);

/* A micro-batch of `bytes` saved activations is taken (hold) or let go (drop). */
void pipestats_hold(pipestats *s, size_t bytes);
void pipestats_drop(pipestats *s, size_t bytes);

/* Training begins / ends on the calling thread: ends adds the elapsed time and
 * the CPU time of the thread and of the process (every thread, ZeroMQ's too)
 * to wall, cpu_thread and cpu_process, which say how much of a core the stage
 * got on a loaded machine. */
void pipestats_run_begin(pipestats *s);
void pipestats_run_end(pipestats *s);

/* wait / (forward + backward + send + wait); 0 when nothing ran. */
double pipestats_idle(const pipestats *s);

/* The stage's numbers as PIPESTATS_FLOATS floats into out. */
void pipestats_pack(const pipestats *s, float *out);

/* Pipeline d's bubble line on stdout, from its S stages' packed numbers (S x
 * PIPESTATS_FLOATS floats in stage order), and the same with each stage's
 * seconds (forward, backward, sending, waiting, servers) as one JSON object (no
 * newline) into json (8 KiB are enough for 64 stages). Returns the bubble
 * fraction. */
double pipestats_summary(int d, int S, const float *all, char *json, size_t jlen);

/* Prints the recorded events, one line each:
 * "timeline pipeline D stage K KIND MICRO T0_US T1_US" (KIND F, B, W, S or X,
 * the kinds in order). */
void pipestats_print_timeline(const pipestats *s, int d, int k);

#endif
