/* pipeprobe: --suggest-split's measurement (--app pipeline). Times each dense
 * layer of the MLP --layers on one micro-batch on the calling thread: its
 * forward pass and its backward pass (weight gradient, and the input gradient
 * for every layer but the first, as a stage computes them), the forward again
 * under --recompute. Arbitrary weights; the median of a few steps per layer, in
 * the thread's CPU time (a loaded machine's preemptions left out).
 *
 * OWNS: its buffers, for the call only.
 * THREADS: any. NEVER: talks to pskv or prints. */
#ifndef PSKV_PIPEPROBE_H
#define PSKV_PIPEPROBE_H

/* The nl-1 layers between nl sizes on `rows` input rows x (rows x sizes[0]),
 * `steps` timed steps after one untimed: ms[l] the median milliseconds of layer
 * l's passes. Returns 0, or -1 out of memory. */
int pipeprobe_layers(const int *sizes, int nl, const float *x, int rows, int steps,
                     int recompute, double *ms);

#endif
