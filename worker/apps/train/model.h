/* Dense models for Fashion-MNIST: softmax regression (in -> out) and a one-hidden
 * layer MLP (in -> hidden ReLU -> out), mean cross-entropy loss, forward and
 * backward with OpenBLAS sgemm on mini-batches. All parameters live in one flat
 * float vector (one pskv table) laid out as
 *   softmax: W[in][out] b[out]
 *   mlp:     W1[in][hidden] b1[hidden] W2[hidden][out] b2[out]
 * (row-major).
 *
 * OWNS: a model owns its workspace (activations, gradients of the hidden layer,
 * logits), sized for max_batch at creation; the parameters, batches and gradient
 * buffers are the caller's.
 * THREADS: one thread at a time per model (the workspace is shared by its calls);
 * separate models may run on separate threads. OpenBLAS may use threads of its own.
 * NEVER: model_grad and model_eval never allocate, do I/O or touch pskv; sizes
 * are validated once, by model_new (the hot calls only assert their batch and
 * labels: the readers reject labels outside 0..out-1). */
#ifndef PSKV_MODEL_H
#define PSKV_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct model model;

/* hidden == 0 makes a softmax model. NULL when out of memory or sizes invalid. */
model *model_new(int in, int hidden, int out, int max_batch);

/* Frees *m_p and nulls it; NULL-safe. */
void model_destroy(model **m_p);

/* Number of parameters (floats in the flat vector). */
size_t model_size(const model *m);

/* Mean cross-entropy over the batch (batch <= max_batch) at params; writes the
 * mean gradient times scale (model_size floats) into grad: the scale is folded
 * into the logits' gradient, so it costs no pass of its own over grad. */
float model_grad(model *m, const float *params, const float *x, const uint8_t *y, int batch,
                 float scale, float *grad);

/* Evaluates n examples in batches of max_batch: adds the summed cross-entropy to
 * *loss_sum and the number of correct argmax predictions to *correct. */
void model_eval(model *m, const float *params, const float *x, const uint8_t *y, int n,
                double *loss_sum, long *correct);

/* Layer primitives, shared by the models above and --app pipeline's stages. A
 * dense layer's parameters p are W[in][out] then b[out].
 * y (b x out) = x·W + b, then ReLU when relu. */
void model_dense_fwd(const float *p, int in, int out, const float *x, int b, int relu, float *y);

/* The layer's backward on b rows: masks dy (b x out, in place) by ReLU of y (the
 * layer's output) when relu, writes (acc: adds to) its gradient g (the layout
 * of p) and, when dx is not NULL, dx = dy·Wᵀ (b x in). ones: b ones. */
void model_dense_bwd(const float *p, int in, int out, const float *x, const float *y, float *dy,
                     int b, int relu, const float *ones, float *g, int acc, float *dx);

/* Cross-entropy of b rows of logits z against labels y: replaces z by
 * (softmax(z) - onehot(y)) * scale and returns the summed loss. */
double model_xent_grad(float *z, const uint8_t *y, int b, int out, float scale);

/* Correct argmax predictions among b rows of logits z; adds their summed
 * cross-entropy to *loss_sum (z is left as it was). */
long model_score(float *z, const uint8_t *y, int b, int out, double *loss_sum);

/* Turns on flush-to-zero and denormals-are-zero for the calling thread (x86 SSE;
 * a no-op elsewhere): denormals were measured to double an MLP epoch here. */
void model_set_ftz(void);

#endif
