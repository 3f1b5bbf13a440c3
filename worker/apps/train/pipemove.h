/* pipemove: the rule --balance stages moves the layer boundaries by (pipebal.h
 * measures and shares the numbers): a pure function of each window's numbers, so
 * every rank that feeds it the same bits takes the same decision.
 *
 * A window brings the model's inputs (each layer's CPU cost per micro-batch c_l,
 * each stage's planted factor f_k) and the measured wall time of a step (under
 * bsp every stage's step takes the same wall time).
 * Propose: the cut minimising the slowest stage's f_k x sum c_l
 * (pipesched_cut_speed), when it cuts that time by 15% or more (GAIN).
 * Judge: the model does not see what a step costs on a shared host besides the
 * layers' CPU time (contention for the cores, transfers, a sleeping straggler
 * that frees a core), so the window after a move is compared with the window
 * before it. The model's move stands unless the step got slower by more than
 * MARGIN; then the boundaries move back and the cut is remembered as worse.
 * Explore: when the model's move gained less than it predicted by more than
 * MARGIN (or lost), the model may misrank cuts on this host: the neighbouring
 * cut (one boundary moved by one layer) that the model ranks best among those it
 * ranks at most that error slower (at most EXPLORE) is tried; a try stands only
 * when the step got faster by more than MARGIN, and the next neighbour is tried
 * from there; else it is moved back and remembered, and the trying ends until
 * the model's next move (a try costs a window at a cut the model ranks slower:
 * one lost try per move at most).
 * Check: the window after a move back from the model's cut measures the cut
 * returned to again; when it is not faster by MARGIN than the cut left, the host
 * slowed during the trial rather than the cut: that cut is forgotten (once per
 * regime), and the model may propose it again.
 * Memory: a cut measured slower than another (the last MEM of them) is not
 * proposed nor tried again while the model ranks the two as it did then (their
 * ratio within CHANGE: the CPU times of the layers swing with the host's load,
 * their ratios much less); a stage's factor moving by CHANGE or more begins a
 * new regime: the memory and the model's error empty, a move on trial stands
 * unjudged.
 *
 * OWNS: its state (no allocation after pipemove_new). THREAD: one. */
#ifndef PSKV_PIPEMOVE_H
#define PSKV_PIPEMOVE_H

#define PIPEMOVE_GAIN 0.85   /* the model's move must cut the slowest stage's time to this */
#define PIPEMOVE_MARGIN 0.10 /* window means of a step's wall time differing by less: noise */
#define PIPEMOVE_EXPLORE 1.5 /* neighbours tried: ranked at most this much slower by the model */
#define PIPEMOVE_CHANGE 1.25 /* a factor, or the model's ratio of two cuts, moved this much */
#define PIPEMOVE_MEM 16      /* cuts remembered as worse */

typedef enum pipemove_act {
    PIPEMOVE_STAY,  /* the cut stands */
    PIPEMOVE_MODEL, /* to the model's cut */
    PIPEMOVE_TRY,   /* to a neighbouring cut, on trial */
    PIPEMOVE_BACK,  /* back to the cut before a move that made the step slower */
} pipemove_act;

/* What the last window decided, for the log. */
typedef struct pipemove_note {
    double pred_from, pred_to; /* the model's slowest stage (cost units) at the cut left, taken */
    double wall_from, wall_to; /* BACK: ms per step before the move and after it */
    double err;                /* the model's error measured (0: none yet) */
    int forgot;                /* 1: a check forgot the cut moved back from */
} pipemove_note;

typedef struct pipemove pipemove;

/* The rule for L layers in S stages (1 <= S <= L <= PIPE_MAX_LAYERS). NULL: out
 * of memory or bad sizes. */
pipemove *pipemove_new(int L, int S);

/* One window: cost[L] (> 0), factor[S] (> 0), wall (ms per step, <= 0: not
 * measured), first[] the current cut (S + 1 entries), set to the next one.
 * Returns the pipemove_act taken. */
int pipemove_window(pipemove *m, const double *cost, const double *factor, double wall,
                    int *first);

/* The last window's numbers. */
const pipemove_note *pipemove_last(const pipemove *m);

/* Frees m; NULL-safe, nulls *m_p. */
void pipemove_destroy(pipemove **m_p);

#endif
