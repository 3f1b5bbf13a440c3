/* eta: the job's predicted wall time and scaling efficiency (eta.h). */
#include "eta.h"

#include <stdio.h>
#include <string.h>

#include "timeutil.h"

void eta_init(eta *e, int64_t total_steps, int64_t steps_per_epoch, int64_t evals, int W,
              double per_step, int64_t app_t0_ns)
{
    memset(e, 0, sizeof *e);
    e->total_steps = total_steps;
    e->steps_per_epoch = steps_per_epoch > 0 ? steps_per_epoch : 1;
    e->evals = evals;
    e->W = W > 0 ? W : 1;
    e->per_step = per_step;
    e->app_t0_ns = app_t0_ns;
    e->loop_t0_ns = tu_now_ns();
    e->next_print = e->steps_per_epoch / 10 > 0 ? e->steps_per_epoch / 10 : 1;
    e->block_len = eta_estimate_steps(total_steps) / ETA_BLOCKS;
}

int64_t eta_estimate_steps(int64_t total_steps)
{
    int64_t n = total_steps / 5;
    return n < ETA_ESTIMATE_MIN ? ETA_ESTIMATE_MIN : n > ETA_ESTIMATE_MAX ? ETA_ESTIMATE_MAX : n;
}

int64_t eta_estimate_warmup(int64_t total_steps)
{
    int64_t n = total_steps / 10;
    return n < ETA_ESTIMATE_WARMUP_MIN ? ETA_ESTIMATE_WARMUP_MIN
           : n > ETA_ESTIMATE_WARMUP_MAX ? ETA_ESTIMATE_WARMUP_MAX : n;
}

void eta_start(eta *e)
{
    e->warm_steps += e->steps;
    e->loop_t0_ns = tu_now_ns();
    e->steps = 0;
    e->compute_ns = 0;
    e->eval_ns = 0;
    e->nevals = 0;
    e->block_t0_ns = e->loop_t0_ns;
    e->block_eval0_ns = 0;
    e->nblocks = 0;
}

void eta_step(eta *e, int64_t compute_ns)
{
    e->steps++;
    e->compute_ns += compute_ns;
    if (e->block_len > 0 && e->steps % e->block_len == 0 && e->nblocks < ETA_BLOCKS) {
        int64_t now = tu_now_ns();
        e->block_ns[e->nblocks++] = now - e->block_t0_ns - (e->eval_ns - e->block_eval0_ns);
        e->block_t0_ns = now;
        e->block_eval0_ns = e->eval_ns;
    }
}

void eta_eval(eta *e, int64_t ns)
{
    e->eval_ns += ns;
    e->nevals++;
    e->last_eval_ns = ns;
}

int eta_due(eta *e, int64_t done)
{
    if (done < e->next_print || e->steps == 0)
        return 0;
    int64_t spe = e->steps_per_epoch;
    if (done < spe) /* the first epoch: at a tenth, at half, then its end */
        e->next_print = done < spe / 10 ? spe / 10 : done < spe / 2 ? spe / 2 : spe;
    else
        e->next_print = (done / spe + 1) * spe;
    if (e->next_print <= done)
        e->next_print = done + 1;
    return 1;
}

/* Seconds per step of wall time (evaluations left out) and of compute only. */
static void per_step_s(const eta *e, double *step_s, double *compute_s)
{
    double n = e->steps > 0 ? (double)e->steps : 1;
    double wall = (double)(tu_now_ns() - e->loop_t0_ns - e->eval_ns) / 1e9;
    *step_s = wall / n;
    *compute_s = (double)e->compute_ns / 1e9 / n;
}

static double eval_s(const eta *e)
{
    return e->nevals ? (double)e->eval_ns / 1e9 / (double)e->nevals : 0;
}

void eta_print(const eta *e, int64_t done)
{
    double step_s, compute_s;
    per_step_s(e, &step_s, &compute_s);
    int64_t left = e->total_steps > done ? e->total_steps - done : 0;
    /* the evaluations still to come: in proportion to the steps left, and the final one */
    double evals_left = (double)(e->evals > 1 ? e->evals - 1 : 0) * (double)left /
                            (double)(e->total_steps > 0 ? e->total_steps : 1) + 1;
    double remain = (double)left * step_s + evals_left * eval_s(e);
    double elapsed = (double)(tu_now_ns() - e->app_t0_ns) / 1e9;
    double job_rate = step_s > 0 ? e->W * e->per_step / step_s : 0;
    double ceiling = compute_s > 0 ? e->W * e->per_step / compute_s : 0;
    printf("eta: epoch %.2f of %lld: %.1f s left, the job %.1f s in all; step %.3f ms "
           "(compute-only %.3f ms); scaling efficiency %.3f (%.0f samples/s of %d x %.0f "
           "compute-only)\n",
           (double)done / (double)e->steps_per_epoch,
           (long long)(e->total_steps / e->steps_per_epoch), remain, elapsed + remain,
           step_s * 1e3, compute_s * 1e3, ceiling > 0 ? job_rate / ceiling : 0, job_rate, e->W,
           ceiling / e->W);
    fflush(stdout);
}

/* The timed steps' trimmed mean over their mean: their blocks' times without the
 * slowest and the fastest block (a stall of the shared machine, a fraction of a
 * second, weighs on a tenth of the steps timed as on a fiftieth of the job's), 1
 * with fewer than 3 blocks. */
static double trim_ratio(const eta *e)
{
    if (e->nblocks < 3)
        return 1;
    int64_t sum = 0, lo = e->block_ns[0], hi = e->block_ns[0];
    for (int i = 0; i < e->nblocks; i++) {
        sum += e->block_ns[i];
        lo = e->block_ns[i] < lo ? e->block_ns[i] : lo;
        hi = e->block_ns[i] > hi ? e->block_ns[i] : hi;
    }
    double mean = (double)sum / e->nblocks, trimmed = (double)(sum - lo - hi) / (e->nblocks - 2);
    return mean > 0 ? trimmed / mean : 1;
}

void eta_estimate(const eta *e, int64_t setup_ns, int64_t mine_ns, int64_t slowest_ns)
{
    double n = e->steps > 0 ? (double)e->steps : 1;
    /* the final evaluation, and the ones among the timed steps (not steps' time) */
    double final_s = e->nevals ? (double)e->last_eval_ns / 1e9 : 0;
    int64_t nloop = e->nevals > 1 ? e->nevals - 1 : 0;
    double loop_ev_s = (double)(e->eval_ns - (e->nevals ? e->last_eval_ns : 0)) / 1e9;
    double ev = nloop ? loop_ev_s / (double)nloop : final_s;
    double trim = trim_ratio(e);
    double step_s = ((double)mine_ns / 1e9 - loop_ev_s) / n * trim;
    double compute_s = (double)e->compute_ns / 1e9 / n;
    /* the others do not wait for rank 0's evaluations: they are left out of the
     * slowest worker's time as of rank 0's (else counted twice, in the steps too) */
    double slow_s = ((double)slowest_ns / 1e9 - loop_ev_s) / n * trim;
    double setup = (double)setup_ns / 1e9;
    int64_t left = e->total_steps > e->warm_steps ? e->total_steps - e->warm_steps : 0;
    double train = (double)left * step_s;
    /* rank 0 evaluates while the others train: the loop ends with the later of the
     * two, its own steps and evaluations, or the slowest worker's steps (their pace
     * taken while rank 0 evaluated in the same proportion as in the job) */
    int64_t loop_evals = e->evals > 1 ? e->evals - 1 : 0;
    double mine = train + (double)loop_evals * ev, slowest = (double)left * slow_s;
    double total = setup + (mine > slowest ? mine : slowest) + final_s;
    double job_rate = step_s > 0 ? e->W * e->per_step / step_s : 0;
    double ceiling = compute_s > 0 ? e->W * e->per_step / compute_s : 0;
    printf("estimate: predicted wall time %.2f s (setup %.2f s with %lld warm-up steps, %lld steps "
           "x %.3f ms = %.1f s, %lld evaluations x %.3f s, the final one %.3f s); compute-only "
           "step %.3f ms; scaling efficiency %.3f (from %lld steps timed); the slowest worker's "
           "step %.3f ms\n",
           total, setup, (long long)e->warm_steps, (long long)left, step_s * 1e3, train,
           (long long)loop_evals, ev,
           final_s, compute_s * 1e3, ceiling > 0 ? job_rate / ceiling : 0, (long long)e->steps,
           slow_s * 1e3);
    printf("estimate blocks: step ms");
    for (int i = 0; i < e->nblocks; i++)
        printf(" %.3f", (double)e->block_ns[i] / 1e6 / (double)e->block_len);
    printf("\n");
    fflush(stdout);
}
