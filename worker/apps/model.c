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

/* Logits of a batch of b examples into m->z; for an MLP also the post-ReLU
 * activations into m->h. */
static void forward(model *m, const float *p, const float *x, int b)
{
    const int in = m->in, hid = m->hidden, out = m->out;
    if (hid == 0) {
        const float *w = p, *bias = p + (size_t)in * (size_t)out;
        broadcast_rows(m->z, bias, b, out);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, out, in, 1.0f, x, in, w,
                    out, 1.0f, m->z, out);
        return;
    }
    const float *w1 = p, *b1 = w1 + (size_t)in * (size_t)hid;
    const float *w2 = b1 + hid, *b2 = w2 + (size_t)hid * (size_t)out;
    broadcast_rows(m->h, b1, b, hid);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, hid, in, 1.0f, x, in, w1, hid,
                1.0f, m->h, hid);
    size_t nh = (size_t)b * (size_t)hid;
    for (size_t i = 0; i < nh; i++)
        m->h[i] = m->h[i] > 0.0f ? m->h[i] : 0.0f;
    broadcast_rows(m->z, b2, b, out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, b, out, hid, 1.0f, m->h, hid, w2,
                out, 1.0f, m->z, out);
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

float model_grad(model *m, const float *params, const float *x, const uint8_t *y, int batch,
                 float *grad)
{
    assert(batch >= 0 && batch <= m->max_batch);
    if (batch <= 0) {
        memset(grad, 0, m->size * sizeof(float));
        return 0.0f;
    }
    const int in = m->in, hid = m->hidden, out = m->out, b = batch;
    forward(m, params, x, b);

    /* Softmax in place, then dZ = (P - onehot) / B in place. */
    double loss = 0.0;
    const float inv_b = 1.0f / (float)b;
    for (int r = 0; r < b; r++) {
        float *z = m->z + (size_t)r * (size_t)out;
        loss += row_xent(z, out, y[r], 1);
        z[y[r]] -= 1.0f;
        for (int j = 0; j < out; j++)
            z[j] *= inv_b;
    }
    const float *dz = m->z;

    if (hid == 0) {
        float *gw = grad, *gb = grad + (size_t)in * (size_t)out;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, out, b, 1.0f, x, in, dz, out,
                    0.0f, gw, out);
        cblas_sgemv(CblasRowMajor, CblasTrans, b, out, 1.0f, dz, out, m->ones, 1, 0.0f, gb, 1);
        return (float)(loss / b);
    }

    const float *w2 = params + (size_t)in * (size_t)hid + (size_t)hid;
    float *gw1 = grad, *gb1 = gw1 + (size_t)in * (size_t)hid;
    float *gw2 = gb1 + hid, *gb2 = gw2 + (size_t)hid * (size_t)out;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, hid, out, b, 1.0f, m->h, hid, dz, out,
                0.0f, gw2, out);
    cblas_sgemv(CblasRowMajor, CblasTrans, b, out, 1.0f, dz, out, m->ones, 1, 0.0f, gb2, 1);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, b, hid, out, 1.0f, dz, out, w2, out,
                0.0f, m->dh, hid);
    /* ReLU passes the gradient only where it passed the activation. */
    size_t nh = (size_t)b * (size_t)hid;
    for (size_t i = 0; i < nh; i++)
        m->dh[i] = m->h[i] > 0.0f ? m->dh[i] : 0.0f;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, hid, b, 1.0f, x, in, m->dh, hid,
                0.0f, gw1, hid);
    cblas_sgemv(CblasRowMajor, CblasTrans, b, hid, 1.0f, m->dh, hid, m->ones, 1, 0.0f, gb1, 1);
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
        for (int r = 0; r < b; r++) {
            float *z = m->z + (size_t)r * (size_t)m->out;
            int best = 0; /* the first of tied maxima, as argmax conventionally does */
            for (int j = 1; j < m->out; j++)
                if (z[j] > z[best])
                    best = j;
            right += best == y[start + r];
            loss += row_xent(z, m->out, y[start + r], 0);
        }
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
