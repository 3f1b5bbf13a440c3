/* --app pipeline: an MLP (--layers) cut into --stages S stages on separate
 * workers, --pipelines D data-parallel copies of the pipeline; rank r is stage
 * r mod S of pipeline r div S.
 *
 * Each stage's parameters are one dense table of their own, shared by stage k of
 * every pipeline through the servers: a mini-batch is one pull of the stage's
 * weights, M micro-batches forward and backward, one push of the accumulated
 * gradient and a clock, so bsp/ssp/async apply across the pipelines as in the
 * mlp app. Activations go forward and their gradients back straight to the
 * neighbouring stage's worker (pskv_pipe_send/recv: a PIPE message naming the
 * pipeline, micro-batch and direction). The stage loop is single-threaded, so a
 * stage never runs two micro-batches at once; the order of its passes comes from
 * pipesched_ops (--schedule), and backward passes run in micro-batch order under
 * every schedule, so the accumulated gradient is the same bits under all three.
 *
 * A stage keeps, per micro-batch in flight, a slot with its layers' outputs and
 * gradients (at most the schedule's depth, capped by --max-inflight), and the
 * micro-batch's input (its inbox, until the backward pass has used it). With
 * --recompute a slot keeps only the gradient of the stage's output: the
 * backward pass runs the stage's forward again from the input into one scratch
 * slot, the same calls on the same inputs, so the gradient is the same bits.
 * Evaluation (pipeline 0, every epoch) sends the test set forward through the
 * stages; the last stage scores it and the result travels back to rank 0, which
 * writes the metrics.
 *
 * The weights do not depend on the cut: the first ones are drawn per parameter
 * of the whole model (pipesched_init), a short last step of an epoch weighs its
 * rows by its own size, and a bsp stage table averages over the pipelines only
 * (bsp_mean_pushed), so any S ends with --stages 1's bits. Progress, resume and
 * --checkpoint-epochs go through trainpos.h as in mlp; a stage cannot be
 * replaced alone, so every stage stops when one is gone (pskv_rank_gone) and
 * the job is resumed whole. */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps.h"
#include "idx.h"
#include "model.h"
#include "pipebal.h"
#include "pipeprobe.h"
#include "pipesched.h"
#include "pipestats.h"
#include "report.h"
#include "ring.h"
#include "straggle.h"
#include "timeutil.h"
#include "trainpos.h"

#define TMO 120000
#define EVAL_BIT (1ULL << 63)       /* micro ids of evaluation chunks */
#define EVAL_RESULT (EVAL_BIT | 0xffffffffULL) /* the score travelling back */
#define STATS_ID (EVAL_BIT | 0xfffffffeULL)    /* the stages' numbers travelling back */

typedef struct slot {
    int micro;  /* micro-batch index held, -1 = free */
    int got;    /* its output gradient came (stages before the last) */
    float *act; /* each layer's output, mrows x out_l one after another; NULL
                   with --recompute (the scratch slot's then) */
    float *dy;  /* their gradients, same layout; with --recompute the stage
                   output's gradient alone */
} slot;

typedef struct stage {
    pskv_worker *w;
    cfg_entry *cfg;
    int S, D, k, d, rank, prev, next, M, B, mrows, bound, depth, L;
    int b, m;   /* this step's rows (B, fewer where the data ends) and micro-batches */
    int ops_m;  /* the micro-batches ops[] is planned for */
    const char *schedule;
    int sizes[PIPE_MAX_LAYERS], nl, first[PIPE_MAX_LAYERS + 1], l0, l1;
    size_t poff[PIPE_MAX_LAYERS + 1]; /* parameter offset of each stage layer (l - l0) */
    size_t aoff[PIPE_MAX_LAYERS + 1]; /* activation offset per row, likewise */
    size_t P;
    int table, nops, peers[2], npeers, recompute;
    pipebal *bal;                /* --balance stages, else NULL */
    int ltab[PIPE_MAX_LAYERS];   /* --balance stages: a table per layer (pipebal.h) */
    int timing;                  /* passes' layer times go to bal */
    int pp;    /* a step ends with one pskv_pushpull (push, clock, the next weights):
                  one table, fp32, no filter, and --pushpull not turned off */
    int fresh; /* params hold the weights the next step would pull (its pushpull) */
    straggle sg;                 /* --slowdown, --jitter: each pass slowed */
    size_t saved_row; /* bytes of saved activations per row of a micro-batch */
    float *params, *grad, *inbox, *dx, *ones;
    slot scratch; /* --recompute: the layers' outputs and gradients of the pass */
    int *inbox_full, *slot_of;
    uint8_t *labels;
    slot *slots;
    pipe_op *ops;
    int acc;
    int64_t step, steps_epoch;
    trainpos_plan pos; /* progress, resume point and checkpoints (trainpos.h) */
    int ckpt_epochs, shuffled;
    idx_set train, test;
    uint32_t *order;
    double loss, rows_epoch; /* the epoch's summed loss and rows trained, this stage */
    pipestats ps;
    float *stats; /* S x PIPESTATS_FLOATS: this stage's and the later ones' */
    int stats_got;
    /* evaluation in progress */
    uint64_t eval_expect;
    float score[3]; /* right, summed test loss, the epoch's mean training loss */
    int score_got;
} stage;

/* A pipeline job stops when any stage is gone (dead, or failed and left): the
 * stages of its pipeline wait for it, and the other pipelines' copies of its
 * table would drift. Returns 1 after naming it, else 0. */
static int stage_gone(stage *st)
{
    int g = pskv_rank_gone(st->w);
    if (g < 0)
        return 0;
    fprintf(stderr, "pipeline: rank %d (stage %d of pipeline %d): rank %d (stage %d of pipeline "
            "%d) is gone (it died, or failed and left): the pipeline job stops; start it again "
            "(pskv-scheduler --resume) to go on from its last checkpoint\n", st->rank, st->k,
            st->d, g, g % st->S, g / st->S);
    return 1;
}

static int fail(stage *st, const char *what, int rc)
{
    fprintf(stderr, "pipeline: rank %d (stage %d of pipeline %d): %s: %s (%s)\n", st->rank,
            st->k, st->d, what, pskv_strerror(rc), pskv_last_error(st->w));
    if (rc == -PSKV_EPEERDEAD) /* the neighbour may only have followed another stage */
        stage_gone(st);
    return 1;
}

/* Micro-batch i of the step: the full batch's rows B*i/M up to B*(i+1)/M, cut
 * where the step's b rows end (the data ends mid-batch). */
static int64_t first_of(const stage *st, int i)
{
    return (int64_t)st->B * i / st->M;
}

static int rows_of(const stage *st, int i)
{
    int64_t end = (int64_t)st->B * (i + 1) / st->M;
    return (int)((end < st->b ? end : st->b) - first_of(st, i));
}

static int relu_of(const stage *st, int l)
{
    return l < st->L - 1;
}

static float *inbox_at(stage *st, int i)
{
    return st->inbox + (size_t)i * (size_t)st->mrows * (size_t)st->sizes[st->l0];
}

/* Where the gradient of the stage's output for slot s goes. */
static float *out_grad(const stage *st, slot *s)
{
    return st->recompute ? s->dy : s->dy + st->aoff[st->l1 - st->l0 - 1] * (size_t)st->mrows;
}

/* The slot whose act/dy a pass of slot s computes in: s, or the scratch one. */
static slot *work_of(stage *st, slot *s)
{
    return st->recompute ? &st->scratch : s;
}

/* Where a received message's floats go (pskv_pipe_slot). */
static float *slot_for(void *arg, const pskv_pipe_msg *h)
{
    stage *st = arg;
    int in = st->sizes[st->l0], out = st->sizes[st->l1];
    if (h->pipeline != st->d)
        return NULL;
    if (h->micro == STATS_ID) {
        size_t n = (size_t)(st->S - st->k - 1) * PIPESTATS_FLOATS;
        if (h->dir != PSKV_PIPE_BWD || h->from_rank != st->next || st->stats_got || h->n != n)
            return NULL;
        st->stats_got = 1;
        return st->stats + (size_t)(st->k + 1) * PIPESTATS_FLOATS;
    }
    if (st->eval_expect) { /* evaluation: chunks in order forward, the score back */
        if (h->dir == PSKV_PIPE_FWD && h->micro == st->eval_expect && h->rows >= 1 &&
            h->rows <= st->mrows && h->n == (size_t)h->rows * (size_t)in)
            return inbox_at(st, 0);
        if (h->dir == PSKV_PIPE_BWD && h->micro == EVAL_RESULT && h->n == 3) {
            st->score_got = 1;
            return st->score;
        }
        return NULL;
    }
    uint64_t base = (uint64_t)st->step * (uint64_t)st->M;
    if (h->micro < base || h->micro >= base + (uint64_t)st->m)
        return NULL;
    int i = (int)(h->micro - base);
    if (h->rows != rows_of(st, i))
        return NULL;
    if (h->dir == PSKV_PIPE_FWD && st->k > 0 && h->from_rank == st->prev && !st->inbox_full[i] &&
        h->n == (size_t)h->rows * (size_t)in) {
        st->inbox_full[i] = 1;
        return inbox_at(st, i);
    }
    int s = st->slot_of[i];
    if (h->dir == PSKV_PIPE_BWD && h->from_rank == st->next && s >= 0 && !st->slots[s].got &&
        h->n == (size_t)h->rows * (size_t)out) {
        st->slots[s].got = 1;
        return out_grad(st, &st->slots[s]);
    }
    return NULL;
}

/* Receives from the neighbours until *flag is set (for micro-batch `micro`, or
 * -1, in the timeline). */
static int wait_flag(stage *st, const int *flag, int micro)
{
    if (*flag)
        return 0;
    int64_t t0 = tu_now_ns();
    int rc = 0;
    while (!*flag && rc == 0) {
        pskv_pipe_msg h;
        rc = pskv_pipe_recv(st->w, st->peers, st->npeers, slot_for, st, &h);
    }
    pipestats_add(&st->ps, PS_WAIT, micro, t0, tu_now_ns());
    return rc;
}

/* This stage's layers forward on rows of x; outputs into act. */
static void layers_fwd(stage *st, float *act, const float *x, int rows)
{
    for (int l = st->l0; l < st->l1; l++) {
        int j = l - st->l0;
        const float *xin = j ? act + st->aoff[j - 1] * (size_t)st->mrows : x;
        int64_t c0 = st->timing ? tu_thread_cpu_ns() : 0;
        model_dense_fwd(st->params + st->poff[j], st->sizes[l], st->sizes[l + 1], xin, rows,
                        relu_of(st, l), act + st->aoff[j] * (size_t)st->mrows);
        if (st->timing)
            pipebal_time(st->bal, l, tu_thread_cpu_ns() - c0);
    }
}

/* Micro-batch i's activations (dir forward) or gradients to a neighbour. */
static int send_pass(stage *st, int to, int dir, int i, int rows, const float *v, size_t n)
{
    int64_t t0 = tu_now_ns();
    pskv_pipe_msg h = {.pipeline = st->d, .micro = (uint64_t)st->step * st->M + i, .dir = dir,
                       .rows = rows};
    int rc = pskv_pipe_send(st->w, to, &h, v, n);
    pipestats_add(&st->ps, PS_SEND, i, t0, tu_now_ns());
    return rc;
}

static int forward(stage *st, int i)
{
    int rows = rows_of(st, i), in = st->sizes[st->l0], out = st->sizes[st->l1];
    int64_t first_row = st->step % st->steps_epoch * st->B + first_of(st, i);
    int64_t t0 = tu_now_ns(); /* the first stage's gathering of its rows is forward work */
    if (st->k == 0) {
        for (int r = 0; r < rows; r++)
            memcpy(inbox_at(st, i) + (size_t)r * (size_t)in,
                   st->train.x + (size_t)st->order[first_row + r] * in,
                   (size_t)in * sizeof(float));
    } else {
        int rc = wait_flag(st, &st->inbox_full[i], i);
        if (rc < 0)
            return fail(st, "waiting for activations", rc);
        t0 = tu_now_ns();
    }
    int si = 0;
    while (st->slots[si].micro >= 0)
        si++; /* a free slot exists: the schedule's depth is the slot count */
    slot *s = &st->slots[si];
    s->micro = i;
    s->got = 0;
    st->slot_of[i] = si;
    pipestats_hold(&st->ps, (size_t)rows * st->saved_row);
    slot *wk = work_of(st, s);
    int64_t c0 = tu_thread_cpu_ns();
    layers_fwd(st, wk->act, inbox_at(st, i), rows);
    straggle_pass(&st->sg, tu_thread_cpu_ns() - c0);
    straggle_layers(&st->sg, st->l1 - st->l0);
    float *z = wk->act + st->aoff[st->l1 - st->l0 - 1] * (size_t)st->mrows;
    float *dz = out_grad(st, s);
    int rc = 0;
    if (st->k == st->S - 1) {
        for (int r = 0; r < rows; r++)
            st->labels[r] = st->train.y[st->order[first_row + r]];
        memcpy(dz, z, (size_t)rows * (size_t)out * sizeof(float));
        /* each row weighs 1/b: the step's gradient is the mean over its b rows */
        st->loss += model_xent_grad(dz, st->labels, rows, out, 1.0f / (float)st->b);
        s->got = 1;
        pipestats_add(&st->ps, PS_FWD, i, t0, tu_now_ns());
    } else {
        pipestats_add(&st->ps, PS_FWD, i, t0, tu_now_ns());
        rc = send_pass(st, st->next, PSKV_PIPE_FWD, i, rows, z, (size_t)rows * (size_t)out);
    }
    return rc < 0 ? fail(st, "sending activations", rc) : 0;
}

static int backward(stage *st, int i)
{
    int si = st->slot_of[i], rows = rows_of(st, i);
    slot *s = &st->slots[si];
    int rc = wait_flag(st, &s->got, i);
    if (rc < 0)
        return fail(st, "waiting for gradients", rc);
    int64_t t0 = tu_now_ns();
    size_t m = (size_t)st->mrows;
    slot *wk = work_of(st, s);
    int64_t c0 = tu_thread_cpu_ns(), c1;
    if (st->recompute) { /* the forward again from the input, the output's gradient beside */
        layers_fwd(st, wk->act, inbox_at(st, i), rows);
        memcpy(wk->dy + st->aoff[st->l1 - st->l0 - 1] * m, s->dy,
               (size_t)rows * (size_t)st->sizes[st->l1] * sizeof(float));
    }
    for (int l = st->l1 - 1; l >= st->l0; l--) {
        int j = l - st->l0;
        const float *xin = j ? wk->act + st->aoff[j - 1] * m : inbox_at(st, i);
        float *dx = j ? wk->dy + st->aoff[j - 1] * m : st->k > 0 ? st->dx : NULL;
        c1 = st->timing ? tu_thread_cpu_ns() : 0;
        model_dense_bwd(st->params + st->poff[j], st->sizes[l], st->sizes[l + 1], xin,
                        wk->act + st->aoff[j] * m, wk->dy + st->aoff[j] * m, rows,
                        relu_of(st, l), st->ones, st->grad + st->poff[j], st->acc, dx);
        if (st->timing)
            pipebal_time(st->bal, l, tu_thread_cpu_ns() - c1);
    }
    straggle_pass(&st->sg, tu_thread_cpu_ns() - c0);
    straggle_layers(&st->sg, st->l1 - st->l0);
    st->acc = 1;
    s->micro = -1;
    st->slot_of[i] = -1;
    st->inbox_full[i] = 0;
    pipestats_drop(&st->ps, (size_t)rows * st->saved_row);
    pipestats_add(&st->ps, PS_BWD, i, t0, tu_now_ns());
    if (st->k > 0)
        rc = send_pass(st, st->prev, PSKV_PIPE_BWD, i, rows, st->dx,
                       (size_t)rows * (size_t)st->sizes[st->l0]);
    return rc < 0 ? fail(st, "sending gradients", rc) : 0;
}

/* The stage's weights into params: one pull of its table, or with --balance
 * stages one per layer (all sent, then waited for). Returns 0 or a negated error. */
static int stage_pull(stage *st)
{
    if (!st->bal) {
        int64_t tp = pskv_pull(st->w, st->table, NULL, st->P, st->params);
        return tp < 0 ? (int)tp : pskv_wait(st->w, tp, TMO);
    }
    int64_t ids[PIPE_MAX_LAYERS];
    int rc = 0, n = 0;
    for (int l = st->l0; l < st->l1 && rc == 0; l++) {
        int j = l - st->l0;
        ids[n] = pskv_pull(st->w, st->ltab[l], NULL, st->poff[j + 1] - st->poff[j],
                           st->params + st->poff[j]);
        rc = ids[n] < 0 ? (int)ids[n] : 0;
        n += rc == 0;
    }
    for (int i = 0; i < n; i++) {
        int r = pskv_wait(st->w, ids[i], TMO);
        rc = rc ? rc : r;
    }
    return rc;
}

/* vals (the stage's gradient, or its first weights with assign) to its table
 * or tables; the request ids into ids[] (one, or one per layer). Returns how
 * many, or a negated error. */
static int stage_send(stage *st, int assign, const float *vals, int64_t *ids)
{
    int n = st->bal ? st->l1 - st->l0 : 1;
    for (int j = 0; j < n; j++) {
        int t = st->bal ? st->ltab[st->l0 + j] : st->table;
        size_t len = st->bal ? st->poff[j + 1] - st->poff[j] : st->P;
        const float *v = vals + (st->bal ? st->poff[j] : 0);
        ids[j] = assign ? pskv_assign(st->w, t, NULL, len, v) : pskv_push(st->w, t, NULL, len, v);
        if (ids[j] < 0)
            return (int)ids[j];
    }
    return n;
}

/* Waits for the n requests of stage_send. Returns 0 or the first error. */
static int stage_wait(stage *st, const int64_t *ids, int n)
{
    int rc = 0;
    for (int i = 0; i < n; i++) {
        int r = pskv_wait(st->w, ids[i], TMO);
        rc = rc || r == 0 ? rc : r;
    }
    return rc;
}

/* The step's rows and micro-batches: B rows in M, except where this pipeline's
 * data ends mid-batch (the epoch's last step): its b rows cut at the full
 * batch's micro-batch boundaries, the last micro-batch the smaller, none at all
 * in a pipeline whose shard ended already. The schedule's passes are planned
 * again for fewer micro-batches. */
static void plan_step(stage *st)
{
    int64_t left = (int64_t)st->train.n - st->step % st->steps_epoch * st->B;
    st->b = left < st->B ? (int)(left > 0 ? left : 0) : st->B;
    for (st->m = 0; st->m < st->M && first_of(st, st->m) < st->b; st->m++)
        ;
    if (st->m != st->ops_m && st->m > 0) /* the depth is at most the one of M's plan */
        pipesched_ops(st->schedule, st->S, st->k, st->m, st->bound, st->ops);
    st->ops_m = st->m;
    st->nops = 2 * st->m;
    st->rows_epoch += st->b;
}

/* One mini-batch: pull the stage's weights (unless the step before brought them),
 * the schedule's passes, push the gradient (scaled to the mini-batch mean by the
 * loss), clock. With st->pp the push, the clock's end and the weights after it
 * (under bsp once the clock closed: the next step's pull) are one pskv_pushpull
 * into params, the gradient lent (waited for here). */
static int one_step(stage *st)
{
    if (stage_gone(st))
        return 1;
    plan_step(st);
    int rc = 0, fresh = st->fresh;
    st->fresh = 0; /* a step of the clock alone (below) brings none */
    if (st->m == 0) /* no row left: the clock alone (bsp_mean_pushed leaves it out of the mean) */
        return (rc = pskv_clock(st->w)) < 0 ? fail(st, "clock", rc) : 0;
    st->ps.recording = st->step == st->ps.record_step;
    int64_t t0 = tu_now_ns(), t_step = t0;
    if (!fresh && (rc = stage_pull(st)) < 0)
        return fail(st, "pull", rc);
    pipestats_add(&st->ps, PS_SRV, -1, t0, tu_now_ns());
    st->acc = 0;
    straggle_after(&st->sg, 0); /* the step's factor, for straggle_pass */
    st->timing = st->bal != NULL;
    for (int o = 0; o < st->nops; o++) {
        rc = st->ops[o].fwd ? forward(st, st->ops[o].micro) : backward(st, st->ops[o].micro);
        if (rc)
            return rc;
    }
    st->timing = 0;
    t0 = tu_now_ns();
    int64_t tp = st->pp ? pskv_pushpull(st->w, st->table, NULL, st->P, st->grad, st->params,
                                        PSKV_PP_CLOCK | PSKV_PP_NOCOPY) : 0;
    if (st->pp && (rc = tp < 0 ? (int)tp : pskv_wait(st->w, tp, TMO)) < 0)
        return fail(st, "pushpull", rc);
    st->fresh = st->pp;
    int64_t ids[PIPE_MAX_LAYERS];
    int n = st->pp ? 0 : stage_send(st, 0, st->grad, ids);
    if (n >= 0 && st->bal && (rc = pipebal_push(st->bal, st->w, st->step, st->l0, st->l1,
                                                st->m, st->sg.last)) < 0)
        return fail(st, "--balance stages: sharing the times", rc);
    /* under bsp a push is answered once every worker's clock closed the step */
    if (!st->pp && (n < 0 || (rc = pskv_clock(st->w)) < 0 || (rc = stage_wait(st, ids, n)) < 0))
        return fail(st, "push", n < 0 ? n : rc);
    pipestats_add(&st->ps, PS_SRV, -1, t0, tu_now_ns());
    if (st->bal)
        pipebal_wall(st->bal, st->step, tu_now_ns() - t_step);
    if (st->ps.recording)
        pipestats_print_timeline(&st->ps, st->d, st->k);
    st->ps.recording = 0;
    return 0;
}

/* Pipeline 0 scores the test set through its stages; rank 0 gets the number
 * right and the summed loss back in score[]. Returns 0 or 1 after saying why. */
static int evaluate(stage *st)
{
    int rc = 0, in = st->sizes[st->l0], out = st->sizes[st->l1];
    if ((rc = stage_pull(st)) < 0)
        return fail(st, "pull", rc);
    int n = (int)st->test.n, chunks = (n + st->mrows - 1) / st->mrows;
    double loss = 0;
    long right = 0;
    slot *s = work_of(st, &st->slots[0]); /* nothing in flight between mini-batches */
    for (int c = 0; c < chunks && rc == 0; c++) {
        int rows = n - c * st->mrows < st->mrows ? n - c * st->mrows : st->mrows;
        const float *x = st->test.x + (size_t)c * (size_t)st->mrows * (size_t)in;
        if (st->k > 0) {
            st->eval_expect = EVAL_BIT | (uint64_t)c;
            int got = 0;
            while (!got && rc == 0) {
                pskv_pipe_msg h;
                rc = pskv_pipe_recv(st->w, &st->prev, 1, slot_for, st, &h);
                got = rc == 0 && h.micro == st->eval_expect;
            }
            x = inbox_at(st, 0);
        }
        if (rc < 0)
            break;
        layers_fwd(st, s->act, x, rows);
        float *z = s->act + st->aoff[st->l1 - st->l0 - 1] * (size_t)st->mrows;
        if (st->k == st->S - 1) {
            right += model_score(z, st->test.y + (size_t)c * (size_t)st->mrows, rows, out, &loss);
        } else {
            pskv_pipe_msg h = {.pipeline = st->d, .micro = EVAL_BIT | (uint64_t)c,
                               .dir = PSKV_PIPE_FWD, .rows = rows};
            rc = pskv_pipe_send(st->w, st->next, &h, z, (size_t)rows * (size_t)out);
        }
    }
    st->eval_expect = EVAL_BIT; /* only the score from now on */
    if (rc == 0 && st->k == st->S - 1) {
        st->score[0] = (float)right;
        st->score[1] = (float)loss;
        st->score[2] = (float)(st->loss / st->rows_epoch);
    } else if (rc == 0) {
        st->score_got = 0;
        rc = wait_flag(st, &st->score_got, -1);
    }
    if (rc == 0 && st->k > 0) {
        pskv_pipe_msg h = {.pipeline = st->d, .micro = EVAL_RESULT, .dir = PSKV_PIPE_BWD};
        rc = pskv_pipe_send(st->w, st->prev, &h, st->score, 3);
    }
    st->eval_expect = 0;
    return rc < 0 ? fail(st, "evaluation", rc) : 0;
}

/* Flags, the stage's place and layers, its schedule. Returns 0, or 2 after a
 * usage error naming the flag. */
static int read_options(stage *st)
{
    cfg_entry *cfg = st->cfg;
    char why[300];
    int W = pskv_num_workers(st->w);
    st->rank = pskv_rank(st->w);
    st->S = (int)cfg_int(cfg, "stages");
    st->D = (int)cfg_int(cfg, "pipelines");
    if (W % st->S) {
        fprintf(stderr, "pipeline: --stages %d does not divide the %d workers of the job\n",
                st->S, W);
        return 2;
    }
    if (st->D && st->D * st->S != W) {
        fprintf(stderr, "pipeline: --pipelines %d x --stages %d is not the %d workers of the "
                "job\n", st->D, st->S, W);
        return 2;
    }
    st->D = W / st->S;
    st->k = st->rank % st->S;
    st->d = st->rank / st->S;
    pskv_set_stage(st->w, st->d, st->k);
    st->prev = st->k > 0 ? st->rank - 1 : -1;
    st->next = st->k < st->S - 1 ? st->rank + 1 : -1;
    st->npeers = 0;
    if (st->prev >= 0)
        st->peers[st->npeers++] = st->prev;
    if (st->next >= 0)
        st->peers[st->npeers++] = st->next;
    if ((st->nl = pipesched_layers(cfg_str(cfg, "layers"), st->sizes, why, sizeof why)) < 0 ||
        pipesched_split(st->sizes, st->nl, st->S, cfg_str(cfg, "split"), st->first, why,
                        sizeof why) < 0) {
        fprintf(stderr, "pipeline: %s\n", why);
        return 2;
    }
    if (st->sizes[st->nl - 1] > 256 || st->sizes[st->nl - 1] < 2) {
        fprintf(stderr, "pipeline: --layers: the last size is the classes, 2..256\n");
        return 2;
    }
    st->L = st->nl - 1;
    int rc = pipebal_new(cfg, st->L, st->S, st->k, &st->bal);
    if (rc || (rc = straggle_init(&st->sg, cfg, (uint64_t)cfg_int(cfg, "seed"), st->rank)))
        return rc;
    /* --pushpull left unset or set: on where pskv_pushpull applies (not with a table
     * per layer, a wire filter or a 16-bit wire); --pushpull=false: push, then pull */
    const cfg_entry *ppf = cfg_find(cfg, "pushpull");
    st->pp = !st->bal && (!strcmp(ppf->from, "default") || ppf->i) && app_pushpull_fits(cfg);
    st->B = (int)cfg_int(cfg, "batch");
    st->M = (int)cfg_int(cfg, "micro-batches");
    if (st->M > st->B) {
        fprintf(stderr, "pipeline: --micro-batches %d exceeds --batch %d\n", st->M, st->B);
        return 2;
    }
    st->mrows = (st->B + st->M - 1) / st->M;
    st->bound = (int)cfg_int(cfg, "max-inflight");
    if (!st->bound)
        st->bound = st->M;
    st->schedule = cfg_str(cfg, "schedule");
    st->ops = calloc(2 * (size_t)st->M, sizeof *st->ops);
    if (!st->ops)
        return 1;
    st->depth = pipesched_ops(st->schedule, st->S, st->k, st->M, st->bound, st->ops);
    if (st->depth < 0) {
        fprintf(stderr, "pipeline: --schedule must be sequential, gpipe or 1f1b (got '%s')\n",
                st->schedule);
        return 2;
    }
    st->nops = 2 * st->M;
    st->ops_m = st->M;
    st->recompute = (int)cfg_int(cfg, "recompute");
    st->ckpt_epochs = (int)cfg_int(cfg, "checkpoint-epochs");
    if (pipestats_init(&st->ps, cfg_int(cfg, "timeline-step"), st->M) < 0)
        return 1;
    return 0;
}

/* The stage's layers l0..l1-1 (first[]), their parameters' and outputs'
 * offsets, and the bytes saved per row; with --balance stages again after each
 * re-split (the buffers have room for any cut). Returns the outputs per row. */
static size_t layout(stage *st)
{
    st->l0 = st->first[st->k];
    st->l1 = st->first[st->k + 1];
    size_t P = 0, A = 0;
    for (int l = st->l0; l < st->l1; l++) {
        st->poff[l - st->l0] = P;
        st->aoff[l - st->l0] = A;
        P += (size_t)st->sizes[l] * st->sizes[l + 1] + st->sizes[l + 1];
        A += (size_t)st->sizes[l + 1];
    }
    st->P = st->poff[st->l1 - st->l0] = P;
    /* saved per row: the input, and without --recompute every layer's output */
    st->saved_row = ((size_t)st->sizes[st->l0] + (st->recompute ? 0 : A)) * sizeof(float);
    return A;
}

/* --balance stages: a table per layer (pipebal.h), and the exchange table. */
static int open_layer_tables(stage *st)
{
    for (int l = 0; l < st->L; l++) {
        pskv_table_opts o;
        size_t n = (size_t)st->sizes[l] * st->sizes[l + 1] + st->sizes[l + 1];
        app_train_table_opts(st->cfg, (uint32_t)st->sizes[l], n, &o);
        o.init = "zero"; /* as the stage tables (first_weights) */
        o.bsp_mean_pushed = 1;
        char name[96];
        snprintf(name, sizeof name, "pipeline-%s-l%dof%d", cfg_str(st->cfg, "layers"), l, st->L);
        if ((st->ltab[l] = pskv_table_open(st->w, name, &o)) < 0)
            return fail(st, "open table", st->ltab[l]);
    }
    return pipebal_open(st->bal, st->w, cfg_str(st->cfg, "layers"));
}

/* Data, the table and the buffers. Returns 0, 2 when --layers does not fit the
 * images, or 1 after saying why. */
static int open_stage(stage *st)
{
    cfg_entry *cfg = st->cfg;
    char why[512];
    int rc = idx_load_split(cfg_str(cfg, "data"), "train", (uint32_t)st->d, (uint32_t)st->D,
                            (uint32_t)cfg_int(cfg, "train-limit"), 0, 0, &st->train, why,
                            sizeof why);
    if (rc == 0 && st->d == 0)
        rc = idx_load(cfg_str(cfg, "data"), "t10k", 0, 1, (uint32_t)cfg_int(cfg, "test-limit"),
                      &st->test, why, sizeof why);
    if (rc < 0 || st->train.n == 0) {
        fprintf(stderr, "pipeline: data: %s\n", rc < 0 ? why : "no training rows");
        return 1;
    }
    if ((int)st->train.dim != st->sizes[0]) {
        fprintf(stderr, "pipeline: --layers starts at %d inputs; the images have %u\n",
                st->sizes[0], st->train.dim);
        return 2;
    }
    size_t A = layout(st), P = st->P;
    int in = st->sizes[st->l0], out = st->sizes[st->l1];
    if (st->bal) { /* room for any cut: every layer, the widest input and output */
        A = P = 0;
        for (int l = 0; l < st->L; l++) {
            P += (size_t)st->sizes[l] * st->sizes[l + 1] + st->sizes[l + 1];
            A += (size_t)st->sizes[l + 1];
            in = st->sizes[l] > in ? st->sizes[l] : in;
            out = st->sizes[l + 1] > out ? st->sizes[l + 1] : out;
        }
        if (open_layer_tables(st))
            return 1;
    } else {
        pskv_table_opts o;
        app_train_table_opts(cfg, (uint32_t)st->sizes[st->l0], P, &o);
        o.init = "zero"; /* pipeline 0's stage assigns the first weights (first_weights) */
        o.bsp_mean_pushed = 1; /* the mean over the pipelines, not over every stage */
        char name[96];
        snprintf(name, sizeof name, "pipeline-%s-s%dof%d", cfg_str(cfg, "layers"), st->k, st->S);
        if ((st->table = pskv_table_open(st->w, name, &o)) < 0)
            return fail(st, "open table", st->table);
    }
    size_t m = (size_t)st->mrows, M = (size_t)st->M;
    st->params = malloc(P * sizeof(float));
    st->grad = malloc(P * sizeof(float));
    st->inbox = malloc(M * m * (size_t)in * sizeof(float));
    st->dx = malloc(m * (size_t)in * sizeof(float));
    st->ones = malloc(m * sizeof(float));
    st->inbox_full = calloc(M, sizeof(int));
    st->slot_of = malloc(M * sizeof(int));
    st->labels = malloc(m);
    st->order = malloc(st->train.n * sizeof(uint32_t));
    st->slots = calloc((size_t)st->depth, sizeof *st->slots);
    st->stats = calloc((size_t)st->S * PIPESTATS_FLOATS, sizeof(float));
    if (!st->params || !st->grad || !st->inbox || !st->dx || !st->ones || !st->inbox_full ||
        !st->slot_of || !st->labels || !st->order || !st->slots || !st->stats)
        return fail(st, "buffers", -PSKV_ENOMEM);
    /* --recompute: each slot keeps the output's gradient; the scratch slot the rest */
    size_t keep = st->recompute ? 0 : A, dkeep = st->recompute ? (size_t)out : A;
    if (st->recompute && (!(st->scratch.act = malloc(m * A * sizeof(float))) ||
                          !(st->scratch.dy = malloc(m * A * sizeof(float)))))
        return fail(st, "buffers", -PSKV_ENOMEM);
    for (int s = 0; s < st->depth; s++) {
        st->slots[s].micro = -1;
        st->slots[s].act = keep ? malloc(m * keep * sizeof(float)) : NULL;
        st->slots[s].dy = malloc(m * dkeep * sizeof(float));
        if ((keep && !st->slots[s].act) || !st->slots[s].dy)
            return fail(st, "buffers", -PSKV_ENOMEM);
    }
    for (size_t i = 0; i < m; i++)
        st->ones[i] = 1.0f;
    for (size_t i = 0; i < M; i++)
        st->slot_of[i] = -1;
    for (uint32_t i = 0; i < st->train.n; i++)
        st->order[i] = i;
    return 0;
}

static void close_stage(stage *st)
{
    for (int s = 0; st->slots && s < st->depth; s++) {
        free(st->slots[s].act);
        free(st->slots[s].dy);
    }
    free(st->slots);
    free(st->scratch.act);
    free(st->scratch.dy);
    free(st->stats);
    pipebal_destroy(&st->bal);
    pipestats_fini(&st->ps);
    free(st->ops);
    free(st->params);
    free(st->grad);
    free(st->inbox);
    free(st->dx);
    free(st->ones);
    free(st->inbox_full);
    free(st->slot_of);
    free(st->labels);
    free(st->order);
    idx_free(&st->train);
    idx_free(&st->test);
}

/* Pipeline 0's stage assigns its layers' first weights (pipesched_init: those
 * of --stages 1 whatever the cut) before the job's first barrier; a resumed job's
 * come from its checkpoint. Returns 0, or 1 after saying why. */
static int first_weights(stage *st)
{
    if (st->d != 0 || pskv_resume_progress(st->w, NULL, NULL, NULL))
        return 0;
    pipesched_init(st->sizes, st->l0, st->l1, (uint64_t)cfg_int(st->cfg, "seed"), st->params);
    int64_t ids[PIPE_MAX_LAYERS];
    int n = stage_send(st, 1, st->params, ids), rc = n < 0 ? n : stage_wait(st, ids, n);
    return rc < 0 ? fail(st, "assigning the first weights", rc) : 0;
}

/* The same shuffle on every stage of a pipeline: seeded by pipeline and epoch. */
static void shuffle_epoch(stage *st, int epoch)
{
    app_shuffle(st->order, st->train.n,
                ring_mix64((uint64_t)cfg_int(st->cfg, "seed") * 1000003 + (uint64_t)st->d * 7919 +
                           (uint64_t)epoch));
}

/* Steps per epoch, the same in every pipeline (the batches of the largest
 * shard, pipeline 0's, the last one short where the data ends mid-batch), and
 * in a resumed job the step to go on from (trainpos.h); rank 0 notes it in the
 * metrics. Returns 0, or 1 after saying why. */
static int plan_run(stage *st, report *rep)
{
    uint32_t limit = (uint32_t)cfg_int(st->cfg, "train-limit"), all = st->train.file_rows;
    int64_t largest = ((int64_t)(limit && limit < all ? limit : all) + st->D - 1) / st->D;
    st->steps_epoch = (largest + st->B - 1) / st->B;
    st->pos = (trainpos_plan){st->steps_epoch, st->steps_epoch * cfg_int(st->cfg, "epochs"),
                              st->B, st->train.n, 1};
    int rc = trainpos_resume(st->w, "pipeline", &st->pos, &st->step), arc;
    int64_t own = st->step;
    if (rc < 0)
        return 1;
    if (rc && (arc = trainpos_agree(st->w, "pipeline", &st->step, TMO)) < 0)
        return fail(st, "agreeing on the step to resume at", arc);
    if (st->step < own) /* a checkpoint cut through training: this stage repeats a step */
        printf("pipeline: rank %d recorded step %lld; resuming with the others at %lld\n",
               st->rank, (long long)own, (long long)st->step);
    if (rc) /* every stage says so; rank 0 in its metrics too (rep NULL elsewhere) */
        report_resumed(rep, st->step / st->steps_epoch, st->step, st->pos.total_steps);
    trainpos_report(st->w, &st->pos, st->step); /* a checkpoint before the first step keeps it */
    return 0;
}

/* The epochs from the step planned (0, or a resumed job's), each ending with
 * pipeline 0's evaluation and, every --checkpoint-epochs, a checkpoint. */
static int train(stage *st, report *rep)
{
    int epochs = (int)cfg_int(st->cfg, "epochs"), rc;
    int64_t t_start = tu_now_ns(), per = st->steps_epoch;
    for (int e = (int)(st->step / per); e < epochs; e++) {
        for (; st->shuffled <= e; st->shuffled++) /* each epoch shuffles the one before's order */
            shuffle_epoch(st, st->shuffled);
        int64_t t0 = tu_now_ns();
        st->loss = st->rows_epoch = 0;
        pipestats_run_begin(&st->ps);
        while (st->step < (int64_t)(e + 1) * per) {
            if (one_step(st))
                return 1;
            trainpos_report(st->w, &st->pos, ++st->step);
            if (st->bal && (rc = pipebal_after(st->bal, st->w, rep, st->rank == 0, st->step - 1,
                                               st->first)) < 0)
                return fail(st, "--balance stages: reading the times", rc);
            if (st->bal && rc == 1)
                layout(st); /* the next step pulls its new layers' tables */
            if (st->bal) /* pskvctl status, top */
                pskv_set_stage_layers(st->w, st->l0, st->l1 - 1,
                                      (float)pipebal_stage_ms(st->bal, st->k));
        }
        pipestats_run_end(&st->ps);
        double secs = (double)(tu_now_ns() - t0) / 1e9;
        if (st->d == 0 && evaluate(st))
            return 1;
        if (st->rank == 0) {
            double nt = (double)st->test.n;
            report_line l = {.epoch = e + 1,
                             .step = st->step,
                             .time = (double)(tu_now_ns() - t_start) / 1e9,
                             .train_loss = st->score[2],
                             .test_loss = st->score[1] / nt,
                             .accuracy = st->score[0] / nt,
                             .samples_per_s = st->rows_epoch * st->D / secs,
                             .auc = NAN,
                             .clipped_steps = -1};
            report_eval(rep, &l);
        }
        if (st->k == st->S - 1)
            printf("pipeline %d: epoch %d train loss %.4f\n", st->d, e + 1,
                   st->loss / st->rows_epoch);
        if (trainpos_due(&st->pos, st->ckpt_epochs, st->step) &&
            (rc = trainpos_checkpoint(st->w, &st->pos, st->step, TMO)) < 0)
            return fail(st, "checkpoint", rc);
    }
    return 0;
}

/* --suggest-split: rank 0 times every layer on a micro-batch and prints the cut
 * that minimises the slowest stage (pipeprobe_suggest); no training. */
static int suggest_split(stage *st)
{
    if (st->rank == 0 && pipeprobe_suggest(st->sizes, st->nl, st->S, st->first, st->mrows,
                                           st->recompute, *cfg_str(st->cfg, "split")) < 0)
        return fail(st, "buffers", -PSKV_ENOMEM);
    return 0;
}

/* The stage's end line; the stages' numbers travel back to the first stage,
 * which prints its pipeline's bubble fraction (and rank 0 writes it into the
 * metrics). Returns 0 or 1 after saying why. */
static int end_report(stage *st, report *rep)
{
    const pipestats *p = &st->ps;
    printf("stage %d of pipeline %d (rank %d, layers %d..%d, %zu parameters, %s%s): "
           "forward %.2f s, backward %.2f s, sending %.2f s, waiting for neighbours %.2f s, "
           "on the servers %.2f s; idle share %.4f; peak %d micro-batches in flight (%zu "
           "bytes of saved activations); on a core %.2f s of %.2f s training (the process's "
           "threads %.2f s)\n",
           st->k, st->d, st->rank, st->l0, st->l1 - 1, st->P, st->schedule,
           st->recompute ? ", recompute" : "", p->secs[PS_FWD], p->secs[PS_BWD],
           p->secs[PS_SEND], p->secs[PS_WAIT], p->secs[PS_SRV], pipestats_idle(p), p->peak,
           p->peak_bytes, p->cpu_thread, p->wall, p->cpu_process);
    printf("stage %d of pipeline %d exchange: %s\n", st->k, st->d, st->pp ? "one pskv_pushpull "
           "a step (push, clock, the next step's weights)" : "push, clock, then the next step's pull");
    fflush(stdout);
    pipestats_pack(p, st->stats + (size_t)st->k * PIPESTATS_FLOATS);
    int rc = st->k < st->S - 1 ? wait_flag(st, &st->stats_got, -1) : 0;
    if (rc == 0 && st->k > 0) {
        pskv_pipe_msg h = {.pipeline = st->d, .micro = STATS_ID, .dir = PSKV_PIPE_BWD};
        rc = pskv_pipe_send(st->w, st->prev, &h, st->stats + (size_t)st->k * PIPESTATS_FLOATS,
                            (size_t)(st->S - st->k) * PIPESTATS_FLOATS);
    }
    if (rc < 0)
        return fail(st, "the stages' numbers", rc);
    if (st->k == 0) {
        char json[8192];
        pipestats_summary(st->d, st->S, st->stats, json, sizeof json);
        report_json(rep, json);
    }
    return 0;
}

int app_pipeline(pskv_worker *w, cfg_entry *cfg)
{
    stage st = {.w = w, .cfg = cfg};
    int rc = read_options(&st);
    report *rep = NULL;
    char why[300];
    if (!rc && cfg_int(cfg, "suggest-split")) {
        rc = suggest_split(&st);
        close_stage(&st);
        return rc;
    }
    if (!rc)
        rc = open_stage(&st);
    if (!rc)
        rc = first_weights(&st);
    if (!rc && st.rank == 0 &&
        !(rep = report_new(cfg_str(cfg, "metrics"), pskv_resume_progress(w, NULL, NULL, NULL),
                           why, sizeof why))) {
        fprintf(stderr, "pipeline: --metrics: %s\n", why);
        rc = 1;
    }
    if (!rc && (rc = pskv_barrier(w, TMO)) < 0)
        rc = fail(&st, "barrier", rc);
    model_set_ftz(); /* denormal gradients cost as much here as in mlp (model.h) */
    if (!rc)
        rc = plan_run(&st, rep);
    if (!rc)
        rc = train(&st, rep);
    if (!rc)
        rc = end_report(&st, rep);
    if (!rc) {
        int brc = pskv_wait_all(w, TMO);
        if (brc == 0)
            brc = pskv_barrier(w, TMO);
        int tp = brc == 0 && cfg_int(cfg, "print-digests");
        if (tp)
            brc = stage_pull(&st);
        if (tp && brc == 0) { /* the layers' too: to compare any two cuts */
            printf("stage %d final digest %016llx\n", st.k,
                   (unsigned long long)app_digest(st.params, st.P));
            for (int l = st.l0; l < st.l1; l++)
                printf("layer %d final digest %016llx\n", l,
                       (unsigned long long)app_digest(st.params + st.poff[l - st.l0],
                                                      st.poff[l - st.l0 + 1] - st.poff[l - st.l0]));
        }
        if (brc < 0)
            rc = fail(&st, "end", brc);
    }
    report_destroy(&rep);
    close_stage(&st);
    return rc;
}
