/* --app check with --backup B (bsp) or --count-acked: one dense table of
 * min(--check-keys, 16) keys, +1 per key per clock, pushed as one push per ring
 * partition the keys fall in, so that each push lives on one server whatever the
 * view (a push over several servers could be late on one and applied on another,
 * which a per-push count cannot tell). Each worker counts its acknowledged pushes
 * per partition and reports them; at the end every key must equal the pushes to
 * it that the servers acknowledged.
 *   bsp --backup B: values grow by W - B to W per clock; late pushes are answered
 *       "dropped: late" and never applied;
 *   --leave: the worker closes right after reporting;
 *   --dead-ok: a rank that died before reporting, or was taken over mid-job
 *       without --acked-log, is allowed up to --rounds pushes per key.
 *
 * --acked-log FILE keeps the count across kill -9: a worker started again with
 * the same --rank and FILE replays it and goes on. Push slot s (counted over every
 * incarnation of the rank) goes to run s % runs. The worker appends "s" before a
 * clock's pushes are sent, and after each pass over the answers "x SLOT ERR" for
 * each push not acknowledged, then "t SLOT" (outcomes counted below SLOT); each
 * incarnation starts with "i". write(2) reaches the page cache, which outlives a
 * killed process (not a crashed machine: that would need fsync). What a dead
 * incarnation sent but had not counted is of unknown fate: each such push was
 * applied once or not at all (servers drop a re-sent push they applied), and so
 * was a push answered by an error other than late. So every key ends between the
 * pushes to it acknowledged to any incarnation (each in exactly once) and those
 * plus the pushes to it of unknown fate; the check asserts both bounds.
 *
 * --stop-file FILE: the rounds end at the first clock after FILE exists (async
 * and ssp: under bsp the workers could stop a clock apart and the last clock
 * would never close); under ssp:T the worker then clocks T + 1 more times without
 * pushing, so that one further ahead, waiting in a pull for its clock, ends its
 * round and stops too. The final values are read with pskv_pull_all after a
 * barrier, so workers may end at different clocks. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app_check.h"
#include "apps.h"
#include "ring.h"
#include "timeutil.h"

#define BACKUP_KEYS 16  /* keys of the backup check: a push per partition they fall in */
#define RING_CLOCKS 256 /* clocks of pushes whose outcome is not counted yet, at most */
#define RING_MAX (RING_CLOCKS * BACKUP_KEYS)
#define EXACT_MAX 16777216.0 /* 2^24: float32 sums of +1 are exact below it */
#define LOG_MAGIC "pskv-acked 1"
/* The report table, per rank q at row * ACK_RANKS + q: acknowledged pushes, a flag
 * (took a dead rank over without a log), acknowledged pushes per run, pushes of
 * unknown fate per run. */
#define REP_FLAG 1
#define REP_RUN(j) (2 + (j))
#define REP_UNKNOWN(j) (2 + BACKUP_KEYS + (j))
#define REP_ROWS (2 + 2 * BACKUP_KEYS)

/* The backup check's state: its two tables, the runs of keys that fall in one
 * ring partition each, the pushes sent and what became of them. */
typedef struct bk {
    int tb, ta;          /* the counted table; the report table (async) */
    uint64_t n;          /* keys of tb */
    int B;               /* backup workers */
    int nruns;
    uint64_t keys[BACKUP_KEYS], first[BACKUP_KEYS], cnt[BACKUP_KEYS];
    int run_of[BACKUP_KEYS];
    float ones[BACKUP_KEYS], vals[BACKUP_KEYS];
    int64_t ring[RING_MAX]; /* the timestamps of slots [tallied, sent), at slot % ring_n */
    uint64_t ring_n;
    uint64_t sent;       /* push slots of this rank sent (every incarnation in the log) */
    uint64_t tallied;    /* slots whose outcome is counted, or known to be unknown */
    int nts;             /* clocks this incarnation pushed */
    double aj[BACKUP_KEYS];      /* acknowledged pushes per run */
    double unknown[BACKUP_KEYS]; /* pushes of unknown fate per run */
    double acked, acked0; /* acknowledged pushes in all; of them, before this incarnation */
    uint64_t failed;     /* answered by an error other than late (every incarnation) */
    int incarnations;    /* earlier incarnations of this rank in the log */
    int started_late;    /* took over a dead worker's rank without a log */
    int log;             /* --acked-log's descriptor; -1 = none */
    const char *log_path;
    const char *stop;    /* --stop-file; "" = none */
    int mode;            /* how a run's push goes: MODE_* below */
    float ppout[BACKUP_KEYS]; /* MODE_PUSHPULL: the values after the pushes (unread) */
    float *per;          /* the report table, pulled at the end */
    uint64_t per_n;
} bk;

/* How each clock's pushes go: pskv_push, then pskv_clock (--push copy or nocopy);
 * pskv_pushpull, the clock ending on the last run's (--pull pushpull); push
 * buffers, then pskv_clock (--push buffer); push buffers, the clock ending on the
 * last run's (--push buffer-clock, pskv_push_buffer_send_clock). An acknowledged
 * combined call is an acknowledged push: it counts as one. */
enum { MODE_PUSH, MODE_PUSHPULL, MODE_BUFFER, MODE_BUFFER_CLOCK };

/* Opens check.backup and check.acked and splits the keys into runs of one
 * partition each. Returns 0, or 1 after saying why. */
static int backup_open(ck *c, const pskv_table_opts *base, bk *b)
{
    pskv_table_opts o = *base;
    b->n = c->n < BACKUP_KEYS ? c->n : BACKUP_KEYS;
    o.kind = PSKV_DENSE;
    o.size = b->n;
    o.width = 1;
    b->tb = pskv_table_open(c->w, "check.backup", &o);
    if (b->tb < 0)
        return ck_fail(c->w, "open check.backup", b->tb);
    /* the runs of keys one partition each */
    uint32_t P = (uint32_t)pskv_num_partitions(c->w);
    for (uint64_t i = 0, last = UINT32_MAX; i < b->n; i++) {
        b->keys[i] = i;
        uint32_t p = ring_partition_of(ring_dense_pos(i, b->n), P ? P : 1);
        if (p != last) {
            b->first[b->nruns] = i;
            b->cnt[b->nruns++] = 0;
            last = p;
        }
        b->cnt[b->nruns - 1]++;
        b->run_of[i] = b->nruns - 1;
    }
    b->ring_n = (uint64_t)RING_CLOCKS * (uint64_t)b->nruns;
    pskv_table_opts a;
    pskv_table_opts_init(&a);
    a.kind = PSKV_DENSE;
    a.size = REP_ROWS * ACK_RANKS;
    b->per_n = a.size;
    if (c->r >= ACK_RANKS)
        return ck_fail(c->w, "--count-acked takes ranks below 256", -PSKV_EINVAL);
    a.updater = "sum";
    b->ta = pskv_table_open(c->w, "check.acked", &a); /* async: the report channel */
    if (b->ta < 0)
        return ck_fail(c->w, "open check.acked", b->ta);
    b->per = malloc((size_t)a.size * sizeof(float));
    if (!b->per)
        return ck_fail(c->w, "memory", -PSKV_ENOMEM);
    for (uint64_t i = 0; i < b->n; i++)
        b->ones[i] = 1.0f;
    b->B = (int)o.backup;
    b->started_late = !b->log_path[0] && pskv_current_clock(c->w) > 0;
    return 0;
}

/* ---- the acked log ----------------------------------------------------------- */

/* Appends len bytes to the acked log. Returns 0, or 1 after saying why. */
static int log_put(const bk *b, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(b->log, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            printf("check FAILED: cannot write the acked log %s: %s\n", b->log_path,
                   n < 0 ? strerror(errno) : "nothing written");
            return 1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* A new incarnation: what the one before had sent and not counted is of unknown fate. */
static void skip_unknown(bk *b)
{
    for (; b->tallied < b->sent; b->tallied++)
        b->unknown[b->tallied % (uint64_t)b->nruns]++;
}

/* Counts one slot's outcome (pskv_wait's result); with a buffer, logs a push not
 * acknowledged there ("x SLOT ERR"). */
static void count_outcome(bk *b, uint64_t slot, int out, char *buf, size_t *len)
{
    int j = (int)(slot % (uint64_t)b->nruns);
    if (out == 0) {
        b->aj[j]++;
        b->acked++;
        return;
    }
    if (out != -PSKV_ELATE) { /* applied or not: nobody can tell */
        b->unknown[j]++;
        b->failed++;
    }
    if (buf)
        *len += (size_t)snprintf(buf + *len, 64, "x %" PRIu64 " %d\n", slot, -out);
}

/* One line of the log, replayed. The "x" lines of a pass wait in pend until the
 * "t" line that ends it (without one, their slots are of unknown fate). Returns
 * 0, or -1 when the line does not fit what came before. */
static int replay_line(bk *b, const char *line, uint64_t *pend, int *pend_err, int *npend)
{
    unsigned long long slot;
    int err;
    if (!strcmp(line, "s")) {
        b->sent += (uint64_t)b->nruns;
    } else if (!strcmp(line, "i")) {
        skip_unknown(b);
        *npend = 0;
        b->incarnations++;
    } else if (sscanf(line, "x %llu %d", &slot, &err) == 2) {
        if (*npend >= RING_MAX || slot < b->tallied || slot >= b->sent || err <= 0)
            return -1;
        pend[*npend] = slot;
        pend_err[(*npend)++] = err;
    } else if (sscanf(line, "t %llu", &slot) == 1) {
        if (slot < b->tallied || slot > b->sent)
            return -1;
        for (int k = 0; k < *npend; k++)
            if (pend[k] >= slot)
                return -1;
        for (; b->tallied < slot; b->tallied++) /* every push of the pass acknowledged ... */
            count_outcome(b, b->tallied, 0, NULL, NULL);
        for (int k = 0; k < *npend; k++) { /* ... but those it logged as not */
            b->aj[pend[k] % (uint64_t)b->nruns]--;
            b->acked--;
            count_outcome(b, pend[k], -pend_err[k], NULL, NULL);
        }
        *npend = 0;
    } else {
        return -1;
    }
    return 0;
}

/* Replays the lines after the header from f; cuts a last line left without its
 * newline (a write cut short) off the file. Returns 0, or 1 after saying why. */
static int replay(bk *b, FILE *f, off_t off)
{
    uint64_t *pend = malloc(RING_MAX * sizeof *pend);
    int *pend_err = malloc(RING_MAX * sizeof *pend_err), npend = 0, lineno = 1, rc = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    if (!pend || !pend_err) {
        printf("check FAILED: out of memory replaying %s\n", b->log_path);
        rc = 1;
    }
    while (!rc && (len = getline(&line, &cap, f)) > 0) {
        lineno++;
        if (line[len - 1] != '\n') {
            if (ftruncate(b->log, off) < 0) {
                printf("check FAILED: cannot cut the partial last line off %s: %s\n",
                       b->log_path, strerror(errno));
                rc = 1;
            }
            break;
        }
        off += len;
        line[len - 1] = '\0';
        if (replay_line(b, line, pend, pend_err, &npend) < 0) {
            printf("check FAILED: the acked log %s is damaged at line %d: '%s'\n", b->log_path,
                   lineno, line);
            rc = 1;
        }
    }
    free(line);
    free(pend);
    free(pend_err);
    return rc;
}

/* Opens --acked-log (made when missing), replays what earlier incarnations of
 * this rank wrote, and appends "i". Returns 0, or 1 after saying why. */
static int log_open(ck *c, bk *b)
{
    char head[128];
    snprintf(head, sizeof head, LOG_MAGIC " rank %d runs %d keys %" PRIu64 "\n", c->r, b->nruns,
             b->n);
    b->log = open(b->log_path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    FILE *f = b->log < 0 ? NULL : fopen(b->log_path, "r");
    if (!f) {
        printf("check FAILED: cannot open the acked log %s: %s\n", b->log_path, strerror(errno));
        return 1;
    }
    char *first = NULL;
    size_t cap = 0;
    ssize_t len = getline(&first, &cap, f);
    int rc = 0;
    if (len <= 0 || first[len - 1] != '\n') { /* new, or its header was cut short */
        rc = ftruncate(b->log, 0) < 0 || log_put(b, head, strlen(head));
        if (rc)
            printf("check FAILED: cannot start the acked log %s\n", b->log_path);
    } else if (strcmp(first, head)) {
        first[len - 1] = '\0';
        head[strlen(head) - 1] = '\0';
        printf("check FAILED: the acked log %s belongs to another check: it starts '%s', this "
               "worker would write '%s'\n", b->log_path, first, head);
        rc = 1;
    } else {
        rc = replay(b, f, (off_t)len);
    }
    free(first);
    fclose(f);
    if (rc)
        return 1;
    skip_unknown(b);
    b->acked0 = b->acked;
    return log_put(b, "i\n", 2);
}

/* ---- the rounds --------------------------------------------------------------- */

/* A pull at `clock` against bsp's promise: it reflects every clock before, and
 * each key grew by W - B..W per clock. The parts of one pull may stand at
 * different clocks (a lagging worker pulls while the others are pushing the next
 * clock part by part): every key reflects at least the oldest part's clock and
 * at most the newest's. */
static void backup_check_pull(ck *c, const bk *b, const pskv_table_opts *base, int64_t clock)
{
    int64_t vlo = 0, vhi = 0;
    pskv_values_clocks(c->w, &vlo, &vhi, NULL, 0);
    /* with backups at least W - B workers make each clock; when workers may
     * leave (--count-acked alone) only the upper bound holds */
    double lo = b->B ? (double)(c->W - b->B) * (double)vlo : 0, hi = (double)c->W * (double)vhi;
    int is_bsp = !strcmp(base->consistency, "bsp");
    if (is_bsp && pskv_values_clock(c->w) < clock)
        ck_mismatch(c, "a pull at clock %lld reflects only clock %lld", (long long)clock,
                    (long long)pskv_values_clock(c->w));
    for (uint64_t i = 0; is_bsp && i < b->n; i++)
        if (b->vals[i] < lo || b->vals[i] > hi) {
            ck_mismatch(c, "key %" PRIu64 " = %.0f after %lld..%lld clocks, expected %.0f..%.0f",
                        i, (double)b->vals[i], (long long)vlo, (long long)vhi, lo, hi);
            break;
        }
}

/* Counts the outcomes of the pushes answered so far, oldest first (the library
 * remembers only its last few thousand failures), and logs the pass. Stops at
 * the first push still in flight, unless `final` (pskv_wait_all returned: each
 * is answered); with `block`, first waits up to 120 s for the oldest (a push
 * failed by its own deadline also reads -PSKV_ETIMEDOUT: only the time waited
 * tells them apart). Returns 0, or 1 after saying why. */
static int tally(ck *c, bk *b, int block, int final)
{
    char buf[8192];
    size_t len = 0;
    uint64_t from = b->tallied;
    for (; b->tallied < b->sent; b->tallied++) {
        int first = b->tallied == from;
        int64_t t0 = tu_now_ms();
        int out = pskv_wait(c->w, b->ring[b->tallied % b->ring_n], block && first ? 120000 : 0);
        if (out == -PSKV_ETIMEDOUT && !final) {
            if (!block || !first)
                break;
            if (tu_now_ms() - t0 >= 120000)
                return ck_fail(c->w, "a push still unanswered after 120 s", out);
        }
        count_outcome(b, b->tallied, out, b->log >= 0 ? buf : NULL, &len);
        if (len > sizeof buf - 128) { /* "x" lines alone count for nothing: see replay */
            if (log_put(b, buf, len))
                return 1;
            len = 0;
        }
    }
    if (b->log < 0 || b->tallied == from)
        return 0;
    len += (size_t)snprintf(buf + len, 64, "t %" PRIu64 "\n", b->tallied);
    return log_put(b, buf, len);
}

/* Run j's push of one clock, sent as the mode says (see bk.mode); `last` ends the
 * clock on it where the mode can. Returns the push's timestamp or a negated error. */
static int64_t send_run(ck *c, bk *b, int j, int last)
{
    const uint64_t *keys = b->keys + b->first[j];
    if (b->mode == MODE_PUSHPULL) /* the values after it land in ppout, unread */
        return pskv_pushpull(c->w, b->tb, keys, b->cnt[j], b->ones, b->ppout + b->first[j],
                             last ? PSKV_PP_CLOCK : 0);
    if (b->mode == MODE_PUSH)
        return pskv_push(c->w, b->tb, keys, b->cnt[j], b->ones);
    float *buf = pskv_push_buffer(c->w, b->tb, keys, b->cnt[j]);
    if (!buf)
        return -PSKV_ENOMEM;
    for (uint64_t i = 0; i < b->cnt[j]; i++)
        buf[i] = 1.0f;
    return last && b->mode == MODE_BUFFER_CLOCK
               ? pskv_push_buffer_send_clock(c->w, b->tb, keys, b->cnt[j], buf)
               : pskv_push_buffer_send(c->w, b->tb, keys, b->cnt[j], buf);
}

/* One clock: a push per run (logged first), then the clock (riding on the last
 * run's push with --pull pushpull and --push buffer-clock). Returns 0, or 1 after
 * saying why. */
static int backup_push(ck *c, bk *b)
{
    int rc;
    while (b->sent + (uint64_t)b->nruns - b->tallied > b->ring_n) /* the ring is full */
        if ((rc = tally(c, b, 1, 0)) != 0)
            return rc;
    if (b->log >= 0 && log_put(b, "s\n", 2))
        return 1;
    int rides = b->mode == MODE_PUSHPULL || b->mode == MODE_BUFFER_CLOCK;
    for (int j = 0; j < b->nruns; j++) {
        int64_t t = send_run(c, b, j, j == b->nruns - 1);
        if (t < 0)
            return ck_fail(c->w, "push", (int)t);
        b->ring[b->sent++ % b->ring_n] = t;
    }
    b->nts++;
    /* bsp: a pushpull's reply moves pskv_values_clock too, so the next clock's pull
     * is checked only after this clock's are in (the clock closes on the last) */
    for (int j = 0; b->mode == MODE_PUSHPULL && c->bsp && j < b->nruns; j++)
        (void)pskv_wait(c->w, b->ring[(b->sent - 1 - (uint64_t)j) % b->ring_n], 120000);
    rc = rides ? 0 : pskv_clock(c->w);
    return rc < 0 ? ck_fail(c->w, "clock", rc) : 0;
}

/* The stop file is there: under ssp:T a worker up to T + 1 clocks ahead may wait in
 * a pull for this one's clock. T + 1 clocks more, without pushes, let it end its
 * round and see the file too. Returns 0, or 1 after saying why. */
static int stop_clocks(ck *c)
{
    for (int k = 0; c->ssp && k <= c->tau; k++) {
        int rc = pskv_clock(c->w);
        if (rc < 0)
            return ck_fail(c->w, "clock after the stop file", rc);
    }
    return 0;
}

/* The clocks, each checking a pull and pushing +1 per key. Returns 0, or the
 * exit status after saying why. */
static int backup_rounds(ck *c, bk *b, const pskv_table_opts *base, double slow)
{
    int rc;
    /* by clock, not by round: a worker left behind jumps to the current clock and
     * skips the iterations it missed */
    while (pskv_current_clock(c->w) < c->R) {
        if (app_stop_signal)
            return app_stopped("check");
        if (b->stop[0] && access(b->stop, F_OK) == 0)
            return stop_clocks(c);
        int64_t clock = pskv_current_clock(c->w);
        if ((rc = ck_pull_wait(c->w, b->tb, NULL, b->n, b->vals)) < 0)
            return ck_fail(c->w, "pull", rc);
        if (pskv_current_clock(c->w) >= c->R)
            break; /* moved up past the end */
        backup_check_pull(c, b, base, clock);
        if ((rc = tally(c, b, 0, 0)) != 0)
            return rc;
        if (slow > 1)
            tu_sleep_ms((int64_t)((slow - 1) * 5));
        if ((rc = backup_push(c, b)) != 0)
            return rc;
    }
    return 0;
}

/* ---- the end ------------------------------------------------------------------- */

/* Waits for every push, then adds to check.acked what this rank reports: its
 * acknowledged pushes, whether it took over a dead rank mid-job without a log
 * (it cannot know what its predecessor had acknowledged: the check then allows
 * that rank's rounds), and per run its acknowledged pushes and those of unknown
 * fate. A rank reports once. Returns 0, or 1 after saying why. */
static int backup_report(ck *c, bk *b)
{
    int rc;
    if ((rc = pskv_wait_all(c->w, 120000)) < 0)
        return ck_fail(c->w, "wait for acknowledgements", rc);
    if ((rc = tally(c, b, 0, 1)) != 0)
        return rc;
    uint64_t rkey[REP_ROWS];
    float rval[REP_ROWS];
    size_t m = 0;
    rkey[m] = (uint64_t)c->r;
    rval[m++] = (float)b->acked;
    rkey[m] = (uint64_t)(REP_FLAG * ACK_RANKS + c->r);
    rval[m++] = b->started_late ? 1.0f : 0.0f;
    for (int j = 0; j < b->nruns; j++) {
        rkey[m] = (uint64_t)REP_RUN(j) * ACK_RANKS + (uint64_t)c->r;
        rval[m++] = (float)b->aj[j];
    }
    for (int j = 0; j < b->nruns; j++) {
        rkey[m] = (uint64_t)REP_UNKNOWN(j) * ACK_RANKS + (uint64_t)c->r;
        rval[m++] = (float)b->unknown[j];
    }
    int64_t tp = pskv_push(c->w, b->ta, rkey, m, rval);
    if (tp < 0 || (rc = pskv_wait(c->w, tp, 120000)) < 0)
        return ck_fail(c->w, "report", tp < 0 ? (int)tp : rc);
    return 0;
}

/* The counted table as the servers hold it (pskv_pull_all: no consistency wait,
 * so workers may have ended at different clocks). Returns 0, or 1 after saying why. */
static int final_values(ck *c, bk *b)
{
    uint64_t *keys;
    float *vals;
    size_t got;
    int rc = pskv_pull_all(c->w, b->tb, &keys, &vals, &got, 120000);
    if (rc < 0)
        return ck_fail(c->w, "final pull of check.backup", rc);
    memset(b->vals, 0, sizeof b->vals);
    for (size_t k = 0; k < got; k++)
        if (keys[k] < b->n)
            b->vals[keys[k]] = vals[k];
    if (got != b->n)
        ck_mismatch(c, "the servers hold %zu rows of check.backup, not %" PRIu64, got, b->n);
    free(keys);
    free(vals);
    return 0;
}

/* After every worker's report: each key's final value against the pushes to it
 * the servers acknowledged (plus, at most, those of unknown fate), then the
 * summary line. Returns 0, or 1 after saying why. */
static int backup_verify(ck *c, bk *b, const pskv_table_opts *base, int dead_ok)
{
    int rc;
    if ((rc = pskv_barrier(c->w, 120000)) < 0)
        return ck_fail(c->w, "barrier", rc);
    if ((rc = ck_pull_wait(c->w, b->ta, NULL, (size_t)b->per_n, b->per)) < 0)
        return ck_fail(c->w, "pull check.acked", rc);
    double total = 0, unknown = 0;
    int silent = 0; /* workers that died before reporting (--dead-ok) */
    c->W = pskv_num_workers(c->w); /* workers may have joined since the start */
    for (int q = 0; q < c->W && q < ACK_RANKS; q++) {
        total += b->per[q];
        silent += b->per[q] == 0 || b->per[REP_FLAG * ACK_RANKS + q] > 0;
        for (int j = 0; j < b->nruns; j++)
            unknown += b->per[(size_t)REP_UNKNOWN(j) * ACK_RANKS + (size_t)q];
    }
    double slack = dead_ok ? (double)silent * c->R : 0;
    if ((rc = final_values(c, b)) != 0)
        return rc;
    for (uint64_t i = 0; i < b->n; i++) {
        double want = 0, maybe = 0;
        for (int q = 0; q < c->W && q < ACK_RANKS; q++) {
            want += b->per[(size_t)REP_RUN(b->run_of[i]) * ACK_RANKS + (size_t)q];
            maybe += b->per[(size_t)REP_UNKNOWN(b->run_of[i]) * ACK_RANKS + (size_t)q];
        }
        if (want + maybe + slack >= EXACT_MAX) {
            ck_mismatch(c, "key %" PRIu64 ": %.0f pushes, past 2^24: float32 sums are no longer "
                        "exact (run fewer clocks)", i, want + maybe);
            break;
        }
        if ((double)b->vals[i] < want || (double)b->vals[i] > want + maybe + slack) {
            ck_mismatch(c, "key %" PRIu64 " = %.0f, but the servers acknowledged %.0f pushes to it "
                        "(and %.0f more are of unknown fate)%s", i, (double)b->vals[i], want, maybe,
                        slack ? " (and the workers that died at most their rounds)" : "");
            break;
        }
    }
    char more[160] = "";
    double mine = 0;
    for (int j = 0; j < b->nruns; j++)
        mine += b->unknown[j];
    if (b->log >= 0)
        snprintf(more, sizeof more, "; rank %d over %d incarnations: %.0f acknowledged, %.0f of "
                 "unknown fate, %" PRIu64 " failed", c->r, b->incarnations + 1, b->acked, mine,
                 b->failed);
    printf("check: %s backup %d: %.0f pushes acknowledged by all, %.0f of unknown fate (%d keys in "
           "%d partitions, a push each per clock); this worker ran %d clocks, pushed %d, %.0f "
           "acknowledged, %" PRIu64 " dropped as late%s; final values equal the acknowledged "
           "pushes: %s\n",
           base->consistency, b->B, total, unknown, (int)b->n, b->nruns, b->nts,
           b->nts * b->nruns, b->acked - b->acked0, pskv_late_drops(c->w), more,
           c->status ? "NO" : "yes");
    return 0;
}

/* bsp with backup workers, or --count-acked: see the top of this file. Returns
 * the exit status after the last line. */
int ck_run_acked(ck *c, cfg_entry *cfg)
{
    bk *b = calloc(1, sizeof *b);
    if (!b)
        return ck_fail(c->w, "memory", -PSKV_ENOMEM);
    b->log = -1;
    b->log_path = cfg_str(cfg, "acked-log");
    b->stop = cfg_str(cfg, "stop-file");
    const char *push = cfg_str(cfg, "push"), *pull = cfg_str(cfg, "pull");
    b->mode = !strcmp(pull, "pushpull")          ? MODE_PUSHPULL
              : !strcmp(push, "buffer-clock")    ? MODE_BUFFER_CLOCK
              : !strcmp(push, "buffer")          ? MODE_BUFFER
                                                 : MODE_PUSH;
    if (!strcmp(pull, "pushpull-view")) {
        printf("check FAILED: --backup and --count-acked take --pull copy, view or pushpull, "
               "not pushpull-view\n");
        free(b);
        return 1;
    }
    int rc = 0, leave = (int)cfg_int(cfg, "leave");
    if (b->stop[0] && c->bsp) {
        printf("check FAILED: --stop-file needs async or ssp: under bsp the workers could "
               "stop a clock apart, and the last clock would never close\n");
        return 1;
    }
    if ((rc = backup_open(c, &c->o, b)) || (b->log_path[0] && (rc = log_open(c, b))) ||
        (rc = backup_rounds(c, b, &c->o, c->slow)) || (rc = backup_report(c, b)))
        goto out;
    if (leave) /* close at once: the scheduler takes this worker out of the clock set */
        printf("check: %s: left after %d clocks, %.0f of its %d pushes acknowledged\n",
               c->cons, b->nts, b->acked - b->acked0, b->nts * b->nruns);
    else
        rc = backup_verify(c, b, &c->o, (int)cfg_int(cfg, "dead-ok"));
out:
    if (b->log >= 0)
        close(b->log);
    if (rc > 1)
        return rc; /* stopped by a signal */
    if (rc || c->status) { /* a pull may still be in flight into b->per */
        printf("check FAILED: %s\n", c->detail[0] ? c->detail : "see above");
        app_free_after_close(b->per);
        app_free_after_close(b);
        return 1;
    }
    printf("check ok: %s with %u backup workers, %d workers, %lld clocks, final values equal "
           "the acknowledged pushes\n", c->cons, c->o.backup, c->W,
           (long long)pskv_current_clock(c->w));
    free(b->per);
    free(b);
    return 0;
}
