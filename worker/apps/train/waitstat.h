/* waitstat: where a training worker's time goes beyond the wall clock. The CPU its
 * compute thread spends computing (gradients, evaluation) and inside the blocking
 * library calls of a step (push, clock, pull, wait), how often that thread slept
 * or was preempted, and its process's CPU over the loop (ZeroMQ's I/O thread
 * included): with the servers' CPU, the inputs of the waiting floor that
 * scripts/bench-train.sh and scripts/demo.sh print (docs/benchmarks.md, "The
 * waiting floor"). */
#ifndef PSKV_WAITSTAT_H
#define PSKV_WAITSTAT_H

#include <stdint.h>

typedef struct waitstat {
    int64_t compute_ns;      /* the thread's CPU computing */
    int64_t blocked_ns;      /* the thread's CPU inside the step's library calls */
    int64_t proc0_ns;        /* the process's CPU when the loop started */
    long slept0, preempted0; /* the thread's context switches when the loop started */
} waitstat;

/* Zeroes *ws and notes the process's CPU and the thread's context switches: call
 * it on the thread that trains, as its loop starts. */
void waitstat_start(waitstat *ws);

/* Prints "rank R cpu: compute C s (its thread), the process P s over the loop; ..."
 * (the line the scripts read), per step over nsteps. */
void waitstat_print(const waitstat *ws, int rank, int64_t nsteps);

#endif
