/* pipeprobe: --suggest-split's measurement (--app pipeline). Times each dense
 * layer of the MLP --layers on one micro-batch on the calling thread: its
 * forward pass and its backward pass (weight gradient, and the input gradient
 * for every layer but the first, as a stage computes them), the forward again
 * under --recompute. Arbitrary weights; the median of a few steps per layer, in
 * the thread's CPU time (a loaded machine's preemptions left out).
 *
 * pipeprobe_suggest prints the layers' times, each stage's under the suggested
 * and the current cut, and `suggested split: 2,3` (the line --split takes).
 *
 * OWNS: its buffers, for the call only.
 * THREADS: any. NEVER: talks to pskv; prints only in pipeprobe_suggest. */
#ifndef PSKV_PIPEPROBE_H
#define PSKV_PIPEPROBE_H

/* The nl-1 layers between nl sizes on `rows` input rows x (rows x sizes[0]),
 * `steps` timed steps after one untimed: ms[l] the median milliseconds of layer
 * l's passes. Returns 0, or -1 out of memory. */
int pipeprobe_layers(const int *sizes, int nl, const float *x, int rows, int steps,
                     int recompute, double *ms);

/* --suggest-split on `rows` rows of pixel-like input: times the layers
 * (pipeprobe_layers, 7 steps), prints them, each stage's time under the cut
 * minimising the slowest stage (pipesched_cut) and under first[] (--split when
 * split_given, else the cut balancing parameters), and the suggested split.
 * Returns 0, or -1 out of memory. */
int pipeprobe_suggest(const int *sizes, int nl, int S, const int *first, int rows, int recompute,
                      int split_given);

#endif
