/* Checkpoint coordination and resume planning. See checkpoint.h. */
#define _GNU_SOURCE
#include "checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#include "events.h"
#include "group.h"
#include "log.h"
#include "manifest.h"
#include "pskv_errors.h"
#include "sched_metrics.h"
#include "reshard.h"
#include "ring.h"
#include "sched_net.h"
#include "timeutil.h"
#include "view.h"

/* What a checkpoint is of: every table, or one group's namespace (its workers'
 * progress recorded). A job's checkpoints are always of every table. */
typedef struct ckpt_scope {
    int ns_only;
    char ns[GROUP_NAME_MAX + 1];
    uint32_t gen;                  /* the group whose progress is recorded */
    char group[GROUP_NAME_MAX + 1];
} ckpt_scope;

typedef struct ckpt_req {
    sched_asker a;
    ckpt_scope scope;
    int full; /* asked for a full one (pskvctl without --delta) */
} ckpt_req;

static struct {
    const char *data_dir;
    double every_s;     /* --checkpoint-every (0 = only on request) */
    size_t keep;        /* --keep-checkpoints (0 = every one) */
    int full_every;     /* --full-every (1 = every checkpoint full) */
    int cycle;          /* checkpoints started since the last full one asked for */
    manifest man;       /* complete checkpoints */
    uint64_t seq;       /* the last checkpoint started */
    uint64_t seq_before; /* the newest in the manifest when this scheduler started */
    int busy;           /* one in progress */
    int64_t started_ms, next_ckpt_ms;
    ckpt_req *reqs;     /* who asked for the checkpoint in progress, and for later ones */
    size_t nreqs;
    ckpt_scope scope;   /* what the one in progress is of */
    int nns;            /* of every table: the namespaces its servers' snapshots held, from
                           their ACKs (-1: not known, as when too many or a server did
                           not list them) */
    char nss[MANIFEST_MAX_NS][MANIFEST_NAME_MAX + 1];
    int resume;
    manifest_entry *resume_from; /* the checkpoint a resumed job starts from: NULL, or
                                    &resume_entry */
    manifest_entry resume_entry; /* a copy of its manifest entry, with its own copy of
                                    the workers' progress (chains: NULL): the manifest's
                                    entries move and retention frees them */
    uint32_t *prev_chains;       /* per partition the servers that load it from a file */
    uint32_t *resume_sources;    /* the old node whose file each of those loads it from */
    uint32_t *resume_pairs;      /* (new node, old node) pairs: the files each loads */
    size_t npairs;
    struct {             /* the best evaluation (ckpt_on_eval) */
        int have;
        char metric[16];
        double value;
        int64_t clock;
    } best;
    char best_state[256]; /* status text */
} C;

int ckpt_init(const char *data_dir, int resume, double every_s, int keep, int full_every)
{
    C.data_dir = data_dir;
    C.full_every = full_every > 0 ? full_every : 1;
    C.resume = resume;
    C.every_s = every_s;
    C.keep = keep > 0 ? (size_t)keep : 0;
    char mwhy[600];
    if (*C.data_dir && manifest_read(C.data_dir, &C.man, mwhy, sizeof mwhy) < 0) {
        fprintf(stderr, "pskv-scheduler: %s\n", mwhy);
        return 1;
    }
    if (C.resume && (!*C.data_dir || C.man.n == 0)) {
        fprintf(stderr, "pskv-scheduler: --resume%s needs a --data-dir whose manifest records a "
                "complete checkpoint (%s has none)\n", resume == RESUME_BEST ? "-best" : "",
                *C.data_dir ? C.data_dir : "no --data-dir");
        return 2;
    }
    const manifest_entry *b = manifest_best(&C.man);
    if (resume == RESUME_BEST && !b) {
        fprintf(stderr, "pskv-scheduler: --resume-best: %s/manifest marks no checkpoint best\n",
                C.data_dir);
        return 2;
    }
    uint64_t job = resume == RESUME_BEST ? b->job : C.resume ? C.man.e[C.man.n - 1].job : 0;
    if (C.resume && b && b->job == job) { /* the job goes on: so does its best */
        C.best.have = 1;
        snprintf(C.best.metric, sizeof C.best.metric, "%s", b->best_metric);
        C.best.value = b->best_value;
        C.best.clock = b->best_clock;
    }
    for (size_t i = 0; i < C.man.n; i++)
        if (C.man.e[i].seq > C.seq)
            C.seq = C.man.e[i].seq; /* numbers keep growing across resumes */
    C.seq_before = C.seq;
    return 0;
}

int ckpt_resume_job(uint64_t *job)
{
    if (!C.resume)
        return 0;
    const manifest_entry *b = manifest_best(&C.man);
    *job = C.resume == RESUME_BEST ? b->job : C.man.e[C.man.n - 1].job;
    return 1;
}

/* ---- resume ----------------------------------------------------------------- */

/* 1 when server n reported a valid file of checkpoint e written by node old. */
static int has_file(const memb_node *n, const manifest_entry *e, uint32_t old)
{
    char want[96];
    snprintf(want, sizeof want, "%llu:%llu:%u", (unsigned long long)e->job,
             (unsigned long long)e->seq, old);
    for (size_t i = 0; i < n->nckpts; i++)
        if (!strcmp(n->ckpts[i], want))
            return 1;
    return 0;
}

static int reads_file(void *ctx, uint32_t server, uint32_t old)
{
    const memb_node *n = memb_find(server);
    return n && has_file(n, ctx, old);
}

/* Plans checkpoint e onto the live servers (reshard.h): 0 and *pl, or 1 after
 * logging the first partition no server has a file of. */
static int plan_checkpoint(const manifest_entry *e, reshard_plan *pl)
{
    uint32_t live[VIEW_MAX_SERVERS];
    size_t ns = view_live_servers(live);
    int rc = reshard_make(pl, e->partitions, e->replicas, e->vnodes, e->chains, live, ns,
                          reads_file, (void *)e);
    if (rc < 0) {
        LOG_E("out of memory planning the resume");
        exit(1);
    }
    if (rc == 0)
        return 0;
    uint32_t p = pl->missing;
    LOG_W("checkpoint %llu cannot be used: partition %u (ring positions %016llx..%016llx) "
          "has no valid copy: the file of its server node %u is missing or was refused",
          (unsigned long long)e->seq, p,
          (unsigned long long)ring_partition_begin(p, e->partitions),
          (unsigned long long)ring_partition_end(p, e->partitions),
          e->chains[(size_t)p * e->replicas]);
    return 1;
}

/* Checkpoint e planned onto the servers registered now (more or fewer than wrote
 * it: reshard.h) goes to view_adopt; view_place fills the chains up from there.
 * Returns 0, or -1 when some partition has no valid file on them. */
static int adopt(const manifest_entry *e)
{
    reshard_plan pl;
    if (plan_checkpoint(e, &pl))
        return -1;
    manifest_progress *workers = calloc(e->nworkers + 1, sizeof *workers);
    if (!workers || view_adopt(e->partitions, e->replicas, e->vnodes, pl.chains) < 0) {
        LOG_E("out of memory planning the resume");
        exit(1);
    }
    C.resume_entry = *e;
    memcpy(workers, e->workers, e->nworkers * sizeof *workers);
    C.resume_entry.workers = workers;
    C.resume_entry.chains = NULL;
    C.resume_entry.nss = NULL;
    C.resume_from = &C.resume_entry;
    C.prev_chains = pl.loaders;
    C.resume_sources = pl.sources;
    C.resume_pairs = pl.pairs;
    C.npairs = pl.npairs;
    free(pl.chains);
    uint32_t written = pl.olds, now = (uint32_t)memb.nservers;
    LOG_I("resuming job %llu from checkpoint %llu (%u partitions, %u replicas)%s%s",
          (unsigned long long)memb.job_id, (unsigned long long)e->seq, e->partitions,
          e->replicas, C.resume == RESUME_BEST ? ", the one marked best" : "",
          written != now ? ": resharded" : "");
    if (written != now)
        LOG_I("checkpoint %llu was written by %u servers and resumes on %u: %zu "
              "(server, file) loads; the other chain members are filled by copies",
              (unsigned long long)e->seq, written, now, C.npairs);
    return 0;
}

/* The newest usable checkpoint (--resume-best: the one marked best) is adopted. */
/* Before the first view of a resumed job (no-op otherwise): picks the newest
 * checkpoint whose every partition has a valid file on a registered live server,
 * plans it onto those servers, as many as there are (reshard.h: the chains, and
 * who loads which partition from which file) and hands the chains to view_adopt.
 * Exits the process (1) when no checkpoint can be used, or out of memory. */
static void ckpt_plan_resume(void)
{
    if (!C.resume)
        return;
    const manifest_entry *b = manifest_best(&C.man);
    if (C.resume == RESUME_BEST) {
        if (b && adopt(b) == 0)
            return;
        LOG_E("--resume-best: checkpoint %llu, marked best in %s/manifest, has no valid copy "
              "of every partition on the registered servers; cannot resume",
              b ? (unsigned long long)b->seq : 0ULL, C.data_dir);
        exit(1);
    }
    for (size_t k = C.man.n; k-- > 0;)
        if (C.man.e[k].job == memb.job_id && !C.man.e[k].ns_only && adopt(&C.man.e[k]) == 0)
            return; /* a group's checkpoint holds one namespace: not a resume of all */
    LOG_E("no complete checkpoint of job %llu in %s/manifest has a valid copy of every "
          "partition on the registered servers; cannot resume%s", (unsigned long long)memb.job_id,
          C.data_dir, memb.service ? " (a checkpoint of one group's namespace does not resume a "
          "service: take one of every table, pskvctl checkpoint)" : "");
    exit(1);
}

/* Fills a view's resume fields (resume seq, node pairs, the loaders as previous
 * chains, their sources) when the job resumed, and with status, which checkpoint is
 * marked best; the arrays and strings stay checkpoint.c's. */
static void ckpt_fill_view(void *ctx, Pskv__View *v, int status)
{
    (void)ctx;
    const manifest_entry *b = status ? manifest_best(&C.man) : NULL;
    if (b) {
        snprintf(C.best_state, sizeof C.best_state, "checkpoint %llu (clock %lld), the nearest "
                 "to the best %s %.6f at clock %lld", (unsigned long long)b->seq,
                 (long long)b->clock, b->best_metric, b->best_value, (long long)b->best_clock);
        v->best_checkpoint = C.best_state;
    } else if (status && C.best.have) {
        snprintf(C.best_state, sizeof C.best_state, "none yet (no checkpoint with a clock; the "
                 "best %s %.6f is at clock %lld)", C.best.metric, C.best.value,
                 (long long)C.best.clock);
        v->best_checkpoint = C.best_state;
    }
    if (!C.resume_from)
        return;
    v->has_resume_seq = 1;
    v->resume_seq = C.resume_from->seq;
    v->n_resume_from = 2 * C.npairs;
    v->resume_from = C.resume_pairs;
    v->n_prev_chains = (size_t)C.resume_from->partitions * C.resume_from->replicas;
    v->prev_chains = C.prev_chains;
    v->n_resume_sources = v->n_prev_chains;
    v->resume_sources = C.resume_sources;
}

/* Fills worker n's resume epoch, step and data position into p when the job
 * resumed from a checkpoint that recorded its rank. */
static void ckpt_fill_node(void *ctx, Pskv__Node *p, const memb_node *n, int status)
{
    (void)ctx;
    (void)status;
    for (size_t k = 0; C.resume_from && n->role == PSKV__ROLE__WORKER &&
                       k < C.resume_from->nworkers; k++) {
        const manifest_progress *g = &C.resume_from->workers[k];
        if (g->rank != n->rank || strcmp(g->group, n->group))
            continue;
        /* a resumed job: the worker continues where the checkpoint left it */
        p->has_resume_epoch = p->has_resume_step = p->has_resume_pos = 1;
        p->resume_epoch = g->epoch;
        p->resume_step = g->step;
        p->resume_pos = g->pos;
    }
}

/* ---- checkpoints ------------------------------------------------------------ */

static int same_scope(const ckpt_scope *a, const ckpt_scope *b)
{
    return a->ns_only == b->ns_only && (!a->ns_only || (!strcmp(a->ns, b->ns) && a->gen == b->gen));
}

static void start_scope(const ckpt_scope *sc, int full);

/* Answers who asked for the checkpoint just ended (of C.scope); the first request
 * of another scope that came meanwhile starts its checkpoint. */
static void answer_requesters(int code, const char *why)
{
    Pskv__Meta m;
    size_t kept = 0;
    for (size_t i = 0; i < C.nreqs; i++) {
        if (!same_scope(&C.reqs[i].scope, &C.scope)) {
            C.reqs[kept++] = C.reqs[i];
            continue;
        }
        sched_meta(&m, code ? PSKV__MSG_TYPE__ERROR : PSKV__MSG_TYPE__CHECKPOINT_ACK);
        m.has_seq = 1;
        m.seq = C.seq;
        if (code) {
            m.has_error_code = 1;
            m.error_code = code;
            m.error = (char *)why;
        }
        sched_answer(&C.reqs[i].a, &m);
    }
    C.nreqs = kept;
    if (kept) {
        ckpt_scope next = C.reqs[0].scope;
        start_scope(&next, C.reqs[0].full);
    }
}

static void ckpt_fail(int code, const char *why)
{
    LOG_E("checkpoint %llu failed: %s", (unsigned long long)C.seq, why);
    schedm_checkpoint(0, 0);
    C.busy = 0;
    answer_requesters(code, why);
}

/* --keep-checkpoints: the manifest keeps the C.keep newest checkpoints and the one
 * marked best, and every live server deletes its files of the others
 * (CHECKPOINT_PRUNE: every file numbered below the oldest kept but those of the one
 * marked best and of the checkpoints it builds on). Nothing is deleted unless the
 * manifest no longer lists it. */
static void retain(void)
{
    char why[600];
    int dropped = manifest_retain(C.data_dir, &C.man, C.keep, why, sizeof why);
    if (dropped < 0) {
        LOG_E("checkpoint retention: %s; no checkpoint files deleted", why);
        return;
    }
    if (dropped == 0)
        return;
    Pskv__Meta m;
    sched_meta(&m, PSKV__MSG_TYPE__CHECKPOINT_PRUNE);
    m.has_seq = 1;
    m.seq = UINT64_MAX;
    const manifest_entry *b = NULL;
    for (size_t i = 0; i < C.man.n; i++) { /* the files a kept delta builds on stay */
        if (C.man.e[i].best && C.man.n > C.keep && i == 0) {
            b = &C.man.e[i]; /* kept only for being best: its own range below */
            continue;
        }
        if (manifest_oldest_base(&C.man.e[i]) < m.seq)
            m.seq = manifest_oldest_base(&C.man.e[i]);
    }
    char besttxt[120] = "";
    if (b && b->seq < m.seq) {
        m.has_prune_keep_from = m.has_prune_keep_to = 1;
        m.prune_keep_from = manifest_oldest_base(b);
        m.prune_keep_to = b->seq;
        if (m.prune_keep_from < b->seq)
            snprintf(besttxt, sizeof besttxt, " but those of checkpoints %llu..%llu (%llu "
                     "is marked best)", (unsigned long long)m.prune_keep_from,
                     (unsigned long long)b->seq, (unsigned long long)b->seq);
        else
            snprintf(besttxt, sizeof besttxt, " but those of checkpoint %llu (marked best)",
                     (unsigned long long)b->seq);
    }
    for (int i = 0; i < memb.nnodes; i++)
        if (memb.nodes[i].role == PSKV__ROLE__SERVER && !memb.nodes[i].dead)
            sched_send(&memb.nodes[i], &m);
    LOG_I("--keep-checkpoints %zu: removed %d older checkpoint%s from the manifest; servers "
          "delete their files numbered below %llu%s%s", C.keep, dropped, dropped > 1 ? "s" : "",
          (unsigned long long)m.seq, besttxt,
          m.seq < C.man.e[C.man.n - C.keep].seq ? " (a kept delta builds on them)" : "");
}

/* ---- the checkpoint marked best ------------------------------------------------ */

/* Marks best the checkpoint of this job whose clock is the nearest to the best
 * evaluation's (of two as near, the later: it holds the evaluated snapshot's
 * updates), when that is not the one marked already, and rewrites the manifest. */
static void mark_nearest(void)
{
    if (!C.best.have || !*C.data_dir)
        return;
    manifest_entry *near = NULL;
    int64_t dist = 0;
    for (size_t i = 0; i < C.man.n; i++) {
        manifest_entry *e = &C.man.e[i];
        int64_t d = e->clock > C.best.clock ? e->clock - C.best.clock : C.best.clock - e->clock;
        /* resumed from an older checkpoint (--resume-best): the ones taken after it
         * before this resume are of the abandoned run, not of this one */
        int abandoned = C.resume_from && e->seq > C.resume_from->seq && e->seq <= C.seq_before;
        if (e->job == memb.job_id && e->clock >= 0 && !abandoned && !e->ns_only &&
            (!near || d <= dist)) {
            near = e;
            dist = d;
        }
    }
    manifest_entry *was = manifest_best(&C.man);
    if (!near || (near == was && was->best_clock == C.best.clock &&
                  !strcmp(was->best_metric, C.best.metric)))
        return;
    if (was)
        was->best = 0;
    near->best = 1;
    snprintf(near->best_metric, sizeof near->best_metric, "%s", C.best.metric);
    near->best_value = C.best.value;
    near->best_clock = C.best.clock;
    char why[600];
    if (manifest_write(C.data_dir, &C.man, why, sizeof why) < 0) {
        LOG_E("marking checkpoint %llu best: %s", (unsigned long long)near->seq, why);
        return;
    }
    LOG_I("checkpoint %llu (clock %lld) marked best in %s/manifest: the nearest to the best "
          "%s %.6f, at clock %lld", (unsigned long long)near->seq, (long long)near->clock,
          C.data_dir, C.best.metric, C.best.value, (long long)C.best.clock);
}

/* An evaluation of the job's snapshot at `clock`: value of metric (val_loss: lower
 * is better; val_accuracy, val_auc: higher). When it is the best so far (of that
 * metric: a resumed job's best goes on from the manifest's mark), the checkpoint
 * of this run (not those a run resumed from an older one had taken after it)
 * whose clock is the nearest to it (of two as near, the later) is marked best in
 * the manifest, and again as checkpoints complete: retention (--keep-checkpoints)
 * never removes it, --resume-best resumes from it. No-op without --data-dir. */
static void ckpt_on_eval(const char *metric, double value, int64_t clock)
{
    if (!*C.data_dir)
        return;
    int lower = !strcmp(metric, "val_loss");
    if (C.best.have && !strcmp(C.best.metric, metric) &&
        !(lower ? value < C.best.value : value > C.best.value))
        return;
    C.best.have = 1;
    snprintf(C.best.metric, sizeof C.best.metric, "%s", metric);
    C.best.value = value;
    C.best.clock = clock;
    mark_nearest();
}

/* Every live server wrote checkpoint C.seq: the manifest records it. */
static void ckpt_complete(void)
{
    manifest_entry e;
    memset(&e, 0, sizeof e);
    e.seq = C.seq;
    e.job = memb.job_id;
    e.time = (int64_t)time(NULL);
    e.chains = (uint32_t *)view_chains(&e.partitions, &e.replicas, &e.vnodes);
    size_t room = (size_t)memb.nnodes + 1;
    manifest_progress *g = calloc(room, sizeof *g);
    e.base_nodes = calloc(room, sizeof *e.base_nodes);
    e.bases = calloc(room, sizeof *e.bases);
    uint64_t bytes = 0;
    size_t ndelta = 0;
    char why[600];
    e.clock = -1;
    int rc = -PSKV_ENOMEM;
    snprintf(why, sizeof why, "scheduler out of memory");
    e.ns_only = C.scope.ns_only;
    snprintf(e.ns, sizeof e.ns, "%s", C.scope.ns);
    e.nns = e.ns_only ? 0 : C.nns;
    e.nss = C.nss;
    for (int i = 0; g && e.base_nodes && e.bases && i < memb.nnodes; i++) {
        memb_node *n = &memb.nodes[i];
        if (n->role == PSKV__ROLE__WORKER && (!C.scope.ns_only || n->group_gen == C.scope.gen)) {
            g[e.nworkers].rank = n->rank;
            snprintf(g[e.nworkers].group, sizeof g[0].group, "%s", n->group);
            memcpy(&g[e.nworkers].epoch, n->progress, sizeof n->progress);
            e.nworkers++;
            if (!n->dead && (e.clock < 0 || n->clock < e.clock))
                e.clock = n->clock; /* the slowest worker's, as an evaluation's */
        } else if (n->role == PSKV__ROLE__SERVER && n->ckpt_acked == C.seq) {
            e.base_nodes[e.nbases] = n->id;
            e.bases[e.nbases++] = n->ckpt_base;
            ndelta += n->ckpt_base != C.seq;
            bytes += n->ckpt_bytes;
        }
    }
    e.workers = g;
    if (g && e.base_nodes && e.bases)
        rc = manifest_append(C.data_dir, &C.man, &e, why, sizeof why);
    free(g);
    free(e.base_nodes);
    free(e.bases);
    if (rc < 0) {
        ckpt_fail(-rc, why);
        return;
    }
    char kind[96];
    if (ndelta && ndelta < e.nbases)
        snprintf(kind, sizeof kind, "delta on %zu of %zu servers", ndelta, e.nbases);
    else
        snprintf(kind, sizeof kind, "%s", ndelta ? "delta" : "full");
    char of[200] = "";
    if (C.scope.ns_only)
        snprintf(of, sizeof of, " of group %s (namespace '%s')",
                 *C.scope.group ? C.scope.group : "(unnamed)", C.scope.ns);
    LOG_I("checkpoint %llu%s complete in %lld ms (%s, %llu bytes) at clock %lld: recorded in "
          "%s/manifest", (unsigned long long)C.seq, of, (long long)(tu_now_ms() - C.started_ms),
          kind, (unsigned long long)bytes, (long long)e.clock, C.data_dir);
    mark_nearest();
    retain();
    schedm_checkpoint(1, (double)(tu_now_ms() - C.started_ms) / 1e3);
    C.busy = 0;
    answer_requesters(0, NULL);
}

/* A server that writes the checkpoint and is waited for: live and not stopped (a
 * drained server that left was told to exit). */
static int writes(const memb_node *n)
{
    return n->role == PSKV__ROLE__SERVER && !n->dead && n->state != NODE_FINISHED;
}

/* Completes the checkpoint in progress when every live server acknowledged it
 * (called again when a server dies); fails it when partitions were lost. */
static void ckpt_check_done(void)
{
    if (!C.busy)
        return;
    for (int i = 0; i < memb.nnodes; i++)
        if (writes(&memb.nodes[i]) && memb.nodes[i].ckpt_acked != C.seq)
            return;
    if (view_lost()) {
        ckpt_fail(PSKV_ELOST, "partitions were lost (no live replica holds them whole): no complete copy");
        return;
    }
    ckpt_complete();
}

/* The scope a request asks for: pskvctl checkpoint --group G (msg's group), or
 * pskv_checkpoint from a worker of a service's group: that group's namespace;
 * else (pskvctl checkpoint, the timer, a job's worker) every table. Returns 0,
 * or -1 after refusing msg (an unknown group, or one not running). */
static int scope_of(wire_msg *msg, ckpt_scope *sc)
{
    memset(sc, 0, sizeof *sc);
    const sched_group *g = NULL;
    if (msg && msg->meta->group) {
        g = group_find(msg->meta->group);
        if (!g || g->state == GROUP_WAITING) {
            char why[300];
            snprintf(why, sizeof why, "group %s: %s", *msg->meta->group ? msg->meta->group
                     : "(unnamed)", g ? "not running yet (its workers are still registering)"
                                      : "no such group (pskvctl status lists them)");
            sched_refuse(msg, PSKV_EREFUSED, why);
            return -1;
        }
    } else if (msg) {
        const memb_node *n = msg->meta->has_sender ? memb_find(msg->meta->sender) : NULL;
        g = n ? group_of(n) : NULL; /* pskvctl is no node */
    }
    if (!g || !memb.service)
        return 0; /* a job's one group: every table */
    sc->ns_only = 1;
    sc->gen = g->gen;
    snprintf(sc->group, sizeof sc->group, "%s", g->name);
    snprintf(sc->ns, sizeof sc->ns, "%s", g->name);
    for (int i = 0; i < memb.nnodes; i++) /* the namespace its workers named */
        if (memb.nodes[i].role == PSKV__ROLE__WORKER && memb.nodes[i].group_gen == g->gen) {
            snprintf(sc->ns, sizeof sc->ns, "%s", memb.nodes[i].table_ns);
            break;
        }
    return 0;
}

/* Starts checkpoint C.seq + 1 of sc on every server that writes. full: asked for
 * a full one (a namespace's always is; --full-every's cycle counts the others). */
static void start_scope(const ckpt_scope *sc, int full)
{
    C.busy = 1;
    C.seq++;
    C.started_ms = tu_now_ms();
    C.scope = *sc;
    C.nns = 0;
    if (!sc->ns_only) {
        full = full || C.cycle == 0;
        C.cycle = full ? 1 % C.full_every : (C.cycle + 1) % C.full_every;
    }
    Pskv__Meta m;
    sched_meta(&m, PSKV__MSG_TYPE__CHECKPOINT);
    m.has_seq = 1;
    m.seq = C.seq;
    m.has_delta = 1;
    m.delta = !full && !sc->ns_only;
    m.ckpt_ns = sc->ns_only ? (char *)sc->ns : NULL;
    for (int i = 0; i < memb.nnodes; i++)
        if (writes(&memb.nodes[i]))
            sched_send(&memb.nodes[i], &m);
    if (sc->ns_only)
        LOG_I("checkpoint %llu started: of group %s, namespace '%s' only", (unsigned long long)C.seq,
              *sc->group ? sc->group : "(unnamed)", sc->ns);
    else
        LOG_I("checkpoint %llu started%s", (unsigned long long)C.seq, full ? "" : " (a delta)");
}

void ckpt_start(wire_msg *msg)
{
    const char *no = !*C.data_dir ? "the scheduler has no --data-dir"
                     : memb.state != JOB_RUNNING ? "the job is not running"
                                                 : NULL;
    if (no) {
        if (msg)
            sched_refuse(msg, PSKV_EINVAL, no);
        return;
    }
    ckpt_scope sc;
    if (scope_of(msg, &sc) < 0)
        return;
    if (msg) {
        ckpt_req *g = realloc(C.reqs, (C.nreqs + 1) * sizeof *g);
        if (!g) {
            sched_refuse(msg, PSKV_ENOMEM, "scheduler out of memory");
            return;
        }
        C.reqs = g;
        sched_asker_of(&g[C.nreqs].a, msg);
        g[C.nreqs].full = msg->meta->has_delta && !msg->meta->delta;
        g[C.nreqs++].scope = sc;
    }
    if (C.busy)
        return; /* answered when the one of its scope completes (started after this one) */
    /* --full-every K: a full one, then K - 1 deltas; a request may ask for full */
    start_scope(&sc, msg && msg->meta->has_delta && !msg->meta->delta);
}

/* A server's ACK of the checkpoint in progress, of every table: the namespaces
 * its snapshot held join the manifest's list. Taken from the ACKs rather than the
 * heartbeats, which lag a table made just before the snapshot by up to ~100 ms. */
static void note_namespaces(const Pskv__Meta *m)
{
    if (!m->has_ckpt_nns || m->ckpt_nns != m->n_ckpt_nss)
        C.nns = -1; /* an older server's ACK: not known, every one */
    for (size_t k = 0; C.nns >= 0 && k < m->n_ckpt_nss; k++) {
        const char *name = m->ckpt_nss[k];
        int have = 0;
        for (int j = 0; j < C.nns && !have; j++)
            have = !strcmp(C.nss[j], name);
        if (!have && (C.nns == MANIFEST_MAX_NS || strlen(name) > MANIFEST_NAME_MAX))
            C.nns = -1; /* too many to list (or a name no server makes): every one */
        else if (!have)
            snprintf(C.nss[C.nns++], sizeof C.nss[0], "%s", name);
    }
}

void ckpt_on_ack(wire_msg *msg)
{
    memb_node *n = memb_sender(msg);
    if (n && msg->meta->has_seq) {
        n->ckpt_acked = msg->meta->seq;
        /* an older server says nothing: a full file */
        n->ckpt_base = msg->meta->has_ckpt_base ? msg->meta->ckpt_base : msg->meta->seq;
        n->ckpt_bytes = msg->meta->ckpt_bytes;
        if (C.busy && msg->meta->seq == C.seq && !C.scope.ns_only)
            note_namespaces(msg->meta);
        ckpt_check_done();
    }
}

int ckpt_on_error(const Pskv__Meta *r)
{
    if (!(C.busy && r->has_seq && r->seq == C.seq && r->has_sender))
        return 0;
    char why[700];
    snprintf(why, sizeof why, "server node %u: %s", r->sender,
             r->error ? r->error : pskv_strerror(r->error_code));
    ckpt_fail(r->error_code ? r->error_code : PSKV_EIO, why);
    return 1;
}

static int on_complete(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    (void)ev;
    ckpt_plan_resume();
    return 0;
}

/* A server of the running job died (its partitions were re-placed), or a drained
 * one was let go: the checkpoint in progress no longer waits for it. */
static int on_server_gone(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    if (ev->kind == SCHED_EV_LEFT ||
        (ev->node->role == PSKV__ROLE__SERVER && memb.state == JOB_RUNNING))
        ckpt_check_done();
    return 0;
}

/* A group ended: a later group of that name starts afresh, not from the progress
 * the resumed checkpoint recorded for this one. */
static int on_group_ended(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    for (size_t k = 0; C.resume_from && ev->group && k < C.resume_from->nworkers; k++)
        if (!strcmp(C.resume_from->workers[k].group, ev->group))
            C.resume_from->workers[k].rank = -1;
    return 0;
}

static int on_evaluated(void *ctx, const sched_ev *ev)
{
    (void)ctx;
    ckpt_on_eval(ev->metric, ev->value, ev->clock);
    return 0;
}

void ckpt_hooks(void)
{
    events_subscribe(SCHED_EV_COMPLETE, on_complete, NULL);
    events_subscribe(SCHED_EV_DIED, on_server_gone, NULL);
    events_subscribe(SCHED_EV_LEFT, on_server_gone, NULL);
    events_subscribe(SCHED_EV_EVALUATED, on_evaluated, NULL);
    events_subscribe(SCHED_EV_GROUP_ENDED, on_group_ended, NULL);
    view_add_filler(ckpt_fill_view, ckpt_fill_node, NULL);
}

void ckpt_tick(int64_t now)
{
    if (C.every_s > 0 && memb.state == JOB_RUNNING && now >= C.next_ckpt_ms) {
        if (C.next_ckpt_ms)
            ckpt_start(NULL);
        C.next_ckpt_ms = now + (int64_t)(C.every_s * 1000);
    }
    if (C.busy && now - C.started_ms > 120000)
        ckpt_fail(PSKV_ETIMEDOUT, "not every server wrote its file within 120 s");
}

const manifest_entry *ckpt_newest_holding(const char *ns, char *why, size_t whylen)
{
    for (size_t k = C.man.n; *C.data_dir && k-- > 0;)
        if (manifest_holds_ns(&C.man.e[k], ns))
            return &C.man.e[k];
    if (!*C.data_dir)
        snprintf(why, whylen, "the scheduler has no --data-dir");
    else
        snprintf(why, whylen, "no complete checkpoint in %s/manifest holds namespace '%s'",
                 C.data_dir, ns);
    return NULL;
}

void ckpt_free(void)
{
    if (C.resume_from)
        free(C.resume_entry.workers);
    free(C.prev_chains);
    free(C.resume_sources);
    free(C.resume_pairs);
    free(C.reqs);
    manifest_free(&C.man);
    memset(&C, 0, sizeof C);
}
