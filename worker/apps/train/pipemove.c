/* pipemove: the re-split rule of --balance stages (pipemove.h has the design). */
#include "pipemove.h"

#include <stdlib.h>
#include <string.h>

#include "pipesched.h"

#define CUT (PIPE_MAX_LAYERS + 1) /* entries of a cut */

enum {
    SETTLED,     /* the cut stands; the model and the explorer may move it */
    TRIAL_MODEL, /* the model's move, judged by this window */
    TRIAL_TRY,   /* a neighbour tried, judged by this window */
    CHECK,       /* moved back: this window measures the cut returned to again */
};

struct pipemove {
    int L, S, state;
    int from[CUT];       /* the cut before the move on trial; CHECK: the cut left */
    double w_from;       /* its wall in the window before the move; CHECK: the cut left's */
    double pred_gain;    /* TRIAL_MODEL: the model's slowest stage before over after */
    double err;          /* the model's error on its last judged move; 0: none, or a try lost: no trying */
    double ref[CUT];     /* the factors that began the regime */
    int regime;          /* 0: none yet */
    int rechecked;       /* a check forgot a cut in this regime */
    int nmem, head;      /* cuts remembered as worse, the oldest overwritten */
    struct {
        int cut[CUT], over[CUT]; /* measured slower than `over` */
        double ratio;            /* the model's slowest stage at cut over at over, then */
    } mem[PIPEMOVE_MEM];
    int tgt[CUT];        /* scratch */
    pipemove_note note;
};

pipemove *pipemove_new(int L, int S)
{
    if (S < 1 || L < S || L > PIPE_MAX_LAYERS)
        return NULL;
    pipemove *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->L = L;
    m->S = S;
    return m;
}

void pipemove_destroy(pipemove **m_p)
{
    free(*m_p);
    *m_p = NULL;
}

const pipemove_note *pipemove_last(const pipemove *m)
{
    return &m->note;
}

static int same(const pipemove *m, const int *a, const int *b)
{
    return !memcmp(a, b, ((size_t)m->S + 1) * sizeof *a);
}

static void copy(const pipemove *m, int *to, const int *from)
{
    memcpy(to, from, ((size_t)m->S + 1) * sizeof *to);
}

/* The model's slowest stage under cut first. */
static double slowest(const pipemove *m, const double *cost, const double *factor,
                      const int *first)
{
    double top = 0;
    for (int s = 0; s < m->S; s++) {
        double t = 0;
        for (int l = first[s]; l < first[s + 1]; l++)
            t += cost[l];
        t *= factor[s];
        top = t > top ? t : top;
    }
    return top;
}

/* cut is remembered as slower than another cut, and the model still ranks the
 * two as it did then (within CHANGE). */
static int known(const pipemove *m, const double *cost, const double *factor, const int *cut)
{
    for (int i = 0; i < m->nmem; i++) {
        if (!same(m, m->mem[i].cut, cut))
            continue;
        double r = slowest(m, cost, factor, cut) / slowest(m, cost, factor, m->mem[i].over);
        if (r < m->mem[i].ratio * PIPEMOVE_CHANGE && r * PIPEMOVE_CHANGE > m->mem[i].ratio)
            return 1;
    }
    return 0;
}

/* cut measured slower than over, under the model's current numbers. */
static void remember(pipemove *m, const double *cost, const double *factor, const int *cut,
                     const int *over)
{
    int i = -1;
    for (int k = 0; k < m->nmem; k++)
        if (same(m, m->mem[k].cut, cut))
            i = k; /* a cut measured again: its latest comparison */
    if (i < 0) {
        i = m->head;
        m->head = (m->head + 1) % PIPEMOVE_MEM;
        m->nmem += m->nmem < PIPEMOVE_MEM;
    }
    copy(m, m->mem[i].cut, cut);
    copy(m, m->mem[i].over, over);
    m->mem[i].ratio = slowest(m, cost, factor, cut) / slowest(m, cost, factor, over);
}

static void forget(pipemove *m, const int *cut)
{
    for (int i = 0; i < m->nmem; i++)
        if (same(m, m->mem[i].cut, cut))
            m->mem[i].cut[0] = -1; /* no cut starts at layer -1 */
}

static int moved(double now, double then)
{
    return now >= then * PIPEMOVE_CHANGE || now * PIPEMOVE_CHANGE <= then;
}

/* A new regime when a stage's factor moved materially since the last one began
 * (or none did): the memory, the model's error and any judgment under way are void. */
static void regime(pipemove *m, const double *factor)
{
    int change = !m->regime;
    for (int s = 0; s < m->S && !change; s++)
        change = moved(factor[s], m->ref[s]);
    if (!change)
        return;
    memcpy(m->ref, factor, (size_t)m->S * sizeof *factor);
    m->regime = 1;
    m->state = SETTLED;
    m->nmem = m->head = m->rechecked = 0;
    m->err = 0;
}

/* The neighbour of first (one boundary moved by one layer), not remembered as
 * worse, that the model ranks best, if the model ranks it at most `within` times
 * the current cut's time: into m->tgt. Returns 1 when found. */
static int neighbour(pipemove *m, const double *cost, const double *factor, const int *first,
                     double within)
{
    double cur = slowest(m, cost, factor, first), best = -1;
    int cand[CUT];
    for (int i = 1; i < m->S; i++)
        for (int d = -1; d <= 1; d += 2) {
            copy(m, cand, first);
            cand[i] += d;
            if (cand[i] <= cand[i - 1] || cand[i] >= cand[i + 1] ||
                known(m, cost, factor, cand))
                continue;
            double t = slowest(m, cost, factor, cand);
            if (t <= within * cur && (best < 0 || t < best)) {
                best = t;
                copy(m, m->tgt, cand);
            }
        }
    return best >= 0;
}

/* A move from first to m->tgt, on trial as `state`. */
static int move(pipemove *m, int state, const double *cost, const double *factor, double wall,
                int *first)
{
    m->note.pred_from = slowest(m, cost, factor, first);
    m->note.pred_to = slowest(m, cost, factor, m->tgt);
    m->pred_gain = m->note.pred_from / m->note.pred_to;
    copy(m, m->from, first);
    m->w_from = wall;
    copy(m, first, m->tgt);
    m->state = state;
    return state == TRIAL_MODEL ? PIPEMOVE_MODEL : PIPEMOVE_TRY;
}

/* The move on trial made the step slower (or, a try, not faster): back to the
 * cut before it, the cut left remembered; after the model's move the next window
 * checks (a try not faster needs no check: it was never found slower). */
static int back(pipemove *m, const double *cost, const double *factor, double wall, int *first)
{
    int check = m->state == TRIAL_MODEL;
    remember(m, cost, factor, first, m->from);
    m->note.wall_from = m->w_from;
    m->note.wall_to = wall;
    m->note.pred_from = m->note.pred_to = 0;
    int left[CUT];
    copy(m, left, first);
    copy(m, first, m->from);
    copy(m, m->from, left);
    m->w_from = wall;
    m->state = check ? CHECK : SETTLED;
    return PIPEMOVE_BACK;
}

int pipemove_window(pipemove *m, const double *cost, const double *factor, double wall,
                    int *first)
{
    memset(&m->note, 0, sizeof m->note);
    regime(m, factor);
    int measured = wall > 0 && m->w_from > 0;
    switch (m->state) {
    case TRIAL_MODEL:
        if (!measured) /* nothing to judge it by: it stands, as the model has it */
            break;
        m->err = m->note.err = m->pred_gain * wall / m->w_from; /* predicted over measured gain */
        if (wall > m->w_from * (1 + PIPEMOVE_MARGIN))
            return back(m, cost, factor, wall, first);
        remember(m, cost, factor, m->from, first); /* slower in the model, no faster measured */
        break;
    case TRIAL_TRY:
        m->note.err = m->err;
        if (!measured || !(wall * (1 + PIPEMOVE_MARGIN) < m->w_from)) {
            m->err = 0; /* a try lost: none more until the model's next move */
            return back(m, cost, factor, wall, first);
        }
        remember(m, cost, factor, m->from, first);
        break;
    case CHECK: /* the cut left was slower than this one before; is it still? */
        if (measured && !(m->w_from > wall * (1 + PIPEMOVE_MARGIN)) && !m->rechecked) {
            forget(m, m->from);
            m->rechecked = m->note.forgot = 1;
        }
        break;
    default:
        break;
    }
    m->state = SETTLED;
    m->note.err = m->err;
    double cur = slowest(m, cost, factor, first);
    pipesched_cut_speed(cost, m->L, m->S, factor, m->tgt);
    if (!same(m, m->tgt, first) && slowest(m, cost, factor, m->tgt) <= PIPEMOVE_GAIN * cur &&
        !known(m, cost, factor, m->tgt))
        return move(m, TRIAL_MODEL, cost, factor, wall, first);
    if (m->err > 1 + PIPEMOVE_MARGIN && wall > 0 &&
        neighbour(m, cost, factor, first, m->err < PIPEMOVE_EXPLORE ? m->err : PIPEMOVE_EXPLORE))
        return move(m, TRIAL_TRY, cost, factor, wall, first);
    return PIPEMOVE_STAY;
}
