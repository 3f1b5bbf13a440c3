/* Dense models on mini-batches with OpenBLAS; see model.h for the parameter layout.
 *
 * Row-major throughout: a batch X is B x in, W1 in x hidden, H B x hidden, W2
 * hidden x out, Z B x out. One step is
 *   H  = relu(X·W1 + b1)           Z  = H·W2 + b2      (X·W + b for softmax)
 *   dZ = (softmax(Z) - onehot(y)) / B
 *   dW2 = Hᵀ·dZ   db2 = colsum(dZ)   dH = (dZ·W2ᵀ) ⊙ [H > 0]
 *   dW1 = Xᵀ·dH   db1 = colsum(dH)
 * Biases enter the forward products as the initial C of sgemm (beta = 1) and
 * column sums are sgemv against a vector of ones, so every O(B·in·hidden) step is
 * one BLAS call. The workspace is sized for max_batch in model_new; model_grad and
 * model_eval allocate nothing. Z is turned into probabilities and then into dZ in
 * place. */
#include "model.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

/* Sizes past this many floats are refused in model_new: no pskv table or message
 * carries that much, and every product below stays far from size_t overflow. */
#define MODEL_MAX_FLOATS ((size_t)1 << 31)

struct model {
    int in, hidden, out, max_batch;
    size_t size;  /* parameters */
    float *ws;    /* one block holding the four buffers below */
    float *h;     /* max_batch x hidden: post-ReLU activations */
    float *dh;    /* max_batch x hidden */
    float *z;     /* max_batch x out: logits, then probabilities, then dZ */
    float *ones;  /* max_batch ones, for column sums */
};

/* a * b when both are non-negative and the product stays within MODEL_MAX_FLOATS;
 * SIZE_MAX otherwise, which every caller then refuses. */
static size_t mul_cap(size_t a, size_t b)
{
    if (a != 0 && b > MODEL_MAX_FLOATS / a)
        return SIZE_MAX;
    return a * b;
}

static size_t add_cap(size_t a, size_t b)
{
    if (a > MODEL_MAX_FLOATS || b > MODEL_MAX_FLOATS - a)
        return SIZE_MAX;
    return a + b;
}

model *model_new(int in, int hidden, int out, int max_batch)
{
    /* Labels are uint8_t, so more than 256 classes could never be named. */
    if (in < 1 || hidden < 0 || out < 2 || out > 256 || max_batch < 1)
        return NULL;
    size_t size;
    if (hidden == 0)
        size = add_cap(mul_cap((size_t)in, (size_t)out), (size_t)out);
    else
        size = add_cap(add_cap(mul_cap((size_t)in, (size_t)hidden), (size_t)hidden),
                       add_cap(mul_cap((size_t)hidden, (size_t)out), (size_t)out));
    size_t bh = mul_cap((size_t)max_batch, (size_t)hidden);
    size_t bo = mul_cap((size_t)max_batch, (size_t)out);
    size_t ws = add_cap(add_cap(bh, bh), add_cap(bo, (size_t)max_batch));
    if (size > MODEL_MAX_FLOATS || ws > MODEL_MAX_FLOATS)
        return NULL;

    model *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    /* 64-byte aligned rows help sgemm; aligned_alloc wants a multiple of 64. */
    size_t bytes = (ws * sizeof(float) + 63) & ~(size_t)63;
    m->ws = aligned_alloc(64, bytes);
    if (!m->ws) {
        free(m);
        return NULL;
    }
    memset(m->ws, 0, bytes);
    m->in = in;
    m->hidden = hidden;
    m->out = out;
    m->max_batch = max_batch;
    m->size = size;
    m->h = m->ws;
    m->dh = m->h + bh;
    m->z = m->dh + bh;
    m->ones = m->z + bo;
    for (int i = 0; i < max_batch; i++)
        m->ones[i] = 1.0f;
    return m;
}

void model_destroy(model **m_p)
{
    if (!m_p || !*m_p)
        return;
    free((*m_p)->ws);
    free(*m_p);
    *m_p = NULL;
}

size_t model_size(const model *m)
{
    return m->size;
}

/* dst (rows x cols) = each row a copy of bias: the C that sgemm then adds to. */
static void broadcast_rows(float *dst, const float *bias, int rows, int cols)
{
    for (int r = 0; r < rows; r++)
        memcpy(dst + (size_t)r * (size_t)cols, bias, (size_t)cols * sizeof(float));
}

/* y = max(y, 0) and dy = y > 0 ? dy : 0, four lanes at a time. Half the
 * activations are negative at random, so the scalar loops' branch was mispredicted
 * half the time: 45 µs of a worker's step of about 800 µs (a perf profile of the
 * MLP over TCP, docs/benchmarks.md). The lanes give the scalar loops' results bit
 * for bit: maxps returns its second operand (+0) for a NaN or -0 first, and the
 * compare is false for NaN. */
static void relu_fwd(float *y, size_t n)
{
    size_t i = 0;
#if defined(__SSE2__)
    const __m128 zero = _mm_setzero_ps();
    for (; i + 4 <= n; i += 4)
        _mm_storeu_ps(y + i, _mm_max_ps(_mm_loadu_ps(y + i), zero));
#endif
    for (; i < n; i++)
        y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

static void relu_bwd(float *dy, const float *y, size_t n)
{
    size_t i = 0;
#if defined(__SSE2__)
    const __m128 zero = _mm_setzero_ps();
    for (; i + 4 <= n; i += 4)
        _mm_storeu_ps(dy + i, _mm_and_ps(_mm_cmpgt_ps(_mm_loadu_ps(y + i), zero),
                                         _mm_loadu_ps(dy + i)));
#endif
    for (; i < n; i++)
        dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void model_dense_fwd(const float *p, int in, int out, const float *x, int b, int relu, float *y)
{
    const float *w = p, *bias = p + (size_t)in * (size_t)out;
    broadcast_rows(y, bias, b, out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, out, in, 1.0f, x, in, w, out,
                1.0f, y, out);
    if (relu)
        relu_fwd(y, (size_t)b * (size_t)out);
}

void model_dense_bwd(const float *p, int in, int out, const float *x, const float *y, float *dy,
                     int b, int relu, const float *ones, float *g, int acc, float *dx)
{
    const float beta = acc ? 1.0f : 0.0f;
    if (relu) /* ReLU passes the gradient only where it passed the activation. */
        relu_bwd(dy, y, (size_t)b * (size_t)out);
    float *gw = g, *gb = g + (size_t)in * (size_t)out;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, out, b, 1.0f, x, in, dy, out, beta,
                gw, out);
    cblas_sgemv(CblasRowMajor, CblasTrans, b, out, 1.0f, dy, out, ones, 1, beta, gb, 1);
    if (dx)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, in, out, 1.0f, dy, out, p, out,
                    0.0f, dx, in);
}

/* Logits of a batch of b examples into m->z; for an MLP also the post-ReLU
 * activations into m->h. */
static void forward(model *m, const float *p, const float *x, int b)
{
    const int in = m->in, hid = m->hidden, out = m->out;
    if (hid == 0) {
        model_dense_fwd(p, in, out, x, b, 0, m->z);
        return;
    }
    model_dense_fwd(p, in, hid, x, b, 1, m->h);
    model_dense_fwd(p + (size_t)in * (size_t)hid + (size_t)hid, hid, out, m->h, b, 0, m->z);
}

static float row_max(const float *z, int out)
{
    float mx = z[0];
    for (int j = 1; j < out; j++)
        if (z[j] > mx)
            mx = z[j];
    return mx;
}

/* Cross-entropy of one row of logits against label y, as log-sum-exp shifted by
 * the row's maximum so that no exp overflows. With probs, the row is replaced by
 * its softmax on the way. */
static float row_xent(float *z, int out, int y, int probs)
{
    assert(y >= 0 && y < out); /* the readers reject labels >= classes */
    float mx = row_max(z, out);
    float zy = z[y], sum = 0.0f;
    if (probs) {
        for (int j = 0; j < out; j++) {
            z[j] = expf(z[j] - mx);
            sum += z[j];
        }
        float inv = 1.0f / sum;
        for (int j = 0; j < out; j++)
            z[j] *= inv;
    } else {
        for (int j = 0; j < out; j++)
            sum += expf(z[j] - mx);
    }
    return logf(sum) - (zy - mx);
}

double model_xent_grad(float *z, const uint8_t *y, int b, int out, float scale)
{
    /* Softmax in place, then dZ = (P - onehot) * scale in place. */
    double loss = 0.0;
    for (int r = 0; r < b; r++) {
        float *zr = z + (size_t)r * (size_t)out;
        loss += row_xent(zr, out, y[r], 1);
        zr[y[r]] -= 1.0f;
        for (int j = 0; j < out; j++)
            zr[j] *= scale;
    }
    return loss;
}

long model_score(float *z, const uint8_t *y, int b, int out, double *loss_sum)
{
    long right = 0;
    for (int r = 0; r < b; r++) {
        float *zr = z + (size_t)r * (size_t)out;
        int best = 0; /* the first of tied maxima, as argmax conventionally does */
        for (int j = 1; j < out; j++)
            if (zr[j] > zr[best])
                best = j;
        right += best == y[r];
        *loss_sum += row_xent(zr, out, y[r], 0); /* row by row: the order of model_eval's sum */
    }
    return right;
}

float model_grad(model *m, const float *params, const float *x, const uint8_t *y, int batch,
                 float scale, float *grad)
{
    assert(batch >= 0 && batch <= m->max_batch);
    if (batch <= 0) {
        memset(grad, 0, m->size * sizeof(float));
        return 0.0f;
    }
    const int in = m->in, hid = m->hidden, out = m->out, b = batch;
    forward(m, params, x, b);
    double loss = model_xent_grad(m->z, y, b, out, scale / (float)b);
    if (hid == 0) {
        model_dense_bwd(params, in, out, x, NULL, m->z, b, 0, m->ones, grad, 0, NULL);
        return (float)(loss / b);
    }
    size_t l1 = (size_t)in * (size_t)hid + (size_t)hid;
    model_dense_bwd(params + l1, hid, out, m->h, NULL, m->z, b, 0, m->ones, grad + l1, 0, m->dh);
    model_dense_bwd(params, in, hid, x, m->h, m->dh, b, 1, m->ones, grad, 0, NULL);
    return (float)(loss / b);
}

void model_eval(model *m, const float *params, const float *x, const uint8_t *y, int n,
                double *loss_sum, long *correct)
{
    double loss = 0.0;
    long right = 0;
    /* start + b <= n, so start never overflows even for n near INT_MAX. */
    for (int start = 0, b; start < n; start += b) {
        b = n - start < m->max_batch ? n - start : m->max_batch;
        forward(m, params, x + (size_t)start * (size_t)m->in, b);
        right += model_score(m->z, y + start, b, m->out, &loss);
    }
    *loss_sum += loss;
    *correct += right;
}

void model_set_ftz(void)
{
#if defined(__SSE2__)
    /* MXCSR bit 15 is flush-to-zero, bit 6 denormals-are-zero. */
    _mm_setcsr(_mm_getcsr() | 0x8040);
#endif
}
