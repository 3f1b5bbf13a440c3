/* Progress, resume point and epoch-end checkpoints of the training applications
 * (trainpos.h).
 *
 * What a checkpoint holds against the progress it records: the scheduler records
 * each worker's latest progress (heartbeats, and every barrier carries it) when
 * the checkpoint completes, while each server copies its values when the
 * request reaches it. At trainpos_checkpoint's barrier every push of every
 * worker has been answered and none is sent until rank 0's checkpoint is
 * complete, so values and progress agree exactly under every consistency model.
 * A checkpoint taken at any other moment (pskvctl checkpoint, --checkpoint-every)
 * is a cut through running training: a worker's progress is its latest
 * heartbeat's, which may lag the pushes in the files (steps then applied twice)
 * or run ahead of them (skipped); under bsp the servers hold the clocks closed
 * when the request reached them (an open clock's pushes are not in the file),
 * under async and ssp pushes in flight may be in a file or not. Resuming from
 * one repeats or skips a few steps' gradients. */
#include "trainpos.h"

#include <stdio.h>
#include <stdlib.h>

static int64_t position(const trainpos_plan *p, int64_t step)
{
    int64_t pos = (step % p->steps_per_epoch) * p->per_step;
    return pos < p->n ? pos : p->n;
}

void trainpos_report(pskv_worker *w, const trainpos_plan *p, int64_t step)
{
    pskv_set_progress(w, step / p->steps_per_epoch, step, position(p, step));
}

int trainpos_resume(pskv_worker *w, const char *app, const trainpos_plan *p, int64_t *step)
{
    int64_t epoch = 0, s = 0, pos = 0;
    *step = 0;
    if (!pskv_resume_progress(w, &epoch, &s, &pos))
        return 0;
    if (s < 0 || epoch != s / p->steps_per_epoch || pos != position(p, s)) {
        fprintf(stderr,
                "%s: the checkpoint's progress (epoch %lld, step %lld, position %lld) does not "
                "fit this run's %lld steps per epoch of %lld examples: resume with the "
                "checkpoint's --batch, --accumulate, --train-limit and number of workers\n",
                app, (long long)epoch, (long long)s, (long long)pos,
                (long long)p->steps_per_epoch, (long long)p->per_step);
        return -1;
    }
    if (s > p->total_steps) {
        fprintf(stderr,
                "%s: the checkpoint was taken at step %lld, outside this run's %lld steps: "
                "resume with the checkpoint's --epochs or more\n",
                app, (long long)s, (long long)p->total_steps);
        return -1;
    }
    *step = s;
    return 1;
}

int trainpos_agree(pskv_worker *w, const char *app, int64_t *step, int timeout_ms)
{
    size_t W = (size_t)pskv_num_workers(w);
    pskv_table_opts o;
    pskv_table_opts_init(&o);
    o.size = W;
    o.width = 2; /* a step in two floats of 24 bits: exact */
    char name[96];
    snprintf(name, sizeof name, "%s.resume", app);
    int t = pskv_table_open(w, name, &o);
    if (t < 0)
        return t;
    uint64_t key = (uint64_t)pskv_rank(w);
    float mine[2] = {(float)(*step >> 24), (float)(*step & 0xffffff)};
    int64_t ts = pskv_assign(w, t, &key, 1, mine);
    int rc = ts < 0 ? (int)ts : pskv_wait(w, ts, timeout_ms);
    if (rc < 0 || (rc = pskv_barrier(w, timeout_ms)) < 0) /* every step assigned */
        return rc;
    float *all = malloc(2 * W * sizeof *all);
    if (!all)
        return -PSKV_ENOMEM;
    ts = pskv_pull(w, t, NULL, W, all);
    rc = ts < 0 ? (int)ts : pskv_wait(w, ts, timeout_ms);
    for (size_t r = 0; r < W && rc == 0; r++) {
        int64_t s = (int64_t)all[2 * r] << 24 | (int64_t)all[2 * r + 1];
        *step = s < *step ? s : *step;
    }
    free(all);
    return rc;
}

int trainpos_due(const trainpos_plan *p, int every_epochs, int64_t step)
{
    return every_epochs > 0 && step > 0 && step % p->steps_per_epoch == 0 &&
           (step / p->steps_per_epoch) % every_epochs == 0;
}

int trainpos_checkpoint(pskv_worker *w, const trainpos_plan *p, int64_t step, int timeout_ms)
{
    trainpos_report(w, p, step);
    int rc = pskv_wait_all(w, timeout_ms);
    if (rc < 0 || (rc = pskv_barrier(w, timeout_ms)) < 0)
        return rc;
    int gone = p->every_rank ? pskv_rank_gone(w) : -1;
    if (gone >= 0) { /* the barrier let it go: no checkpoint without it */
        fprintf(stderr, "no checkpoint at step %lld: rank %d is gone\n", (long long)step, gone);
        return -PSKV_EPEERDEAD;
    }
    if (pskv_rank(w) == 0) {
        int64_t n = pskv_checkpoint(w, timeout_ms);
        if (n < 0)
            return (int)n;
        printf("checkpoint %lld at epoch %lld step %lld\n", (long long)n,
               (long long)(step / p->steps_per_epoch), (long long)step);
        fflush(stdout);
    }
    return pskv_barrier(w, timeout_ms);
}
