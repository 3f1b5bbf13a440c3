/* This server's checkpoints: the background write and the resume load. See
 * checkpoint.h. */
#define _GNU_SOURCE
#include "checkpoint.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptrec.h"
#include "log.h"
#include "pskv_errors.h"
#include "smetrics.h"
#include "store/nspace.h"
#include "timeutil.h"
#include "consist/model.h"

#define CHECKPOINT_DEFER_MS 2000

/* What the checkpoints are taken of (checkpoint_init's). */
static struct {
    member *mb;
    const char *data_dir;
    table_set *tables;
    chain *chain;
    consist *cons;
    int resumed; /* the checkpoint of a resumed job is loaded */
} X;

/* The checkpoint being written in the background: a snapshot taken in the loop,
 * committed (written, fsynced, renamed) by a thread; the loop answers the
 * scheduler once the thread is done. */
static struct {
    int busy;
    uint64_t bytes;         /* size of the checkpoint being written */
    atomic_int done;
    pthread_t thread;
    ckpt_writer *w;
    uint64_t seq;
    int rc;
    char why[600];
    int64_t t0_ms, pause_ms;
    uint64_t deferred;      /* a checkpoint waiting for this server's bsp partitions to
                               agree on their closed clock (0: none) */
    int64_t defer_until_ms; /* then it is taken anyway, and refused if they still differ */
    int deferred_delta;     /* the deferred one may be a delta */
    uint64_t base;          /* the full checkpoint the one being written builds on (seq: full) */
    uint8_t *held;          /* the partitions held at its snapshot (nheld of them) */
    uint32_t nheld;
    int ns_only;            /* a namespace's checkpoint (a group's): not what a delta
                               builds on */
    char (*nss)[NSPACE_MAX + 1]; /* the namespaces of the tables in its snapshot (nns of
                                    them; NULL for a group's), which its ACK lists */
    uint32_t nns;
    char deferred_ns[NSPACE_MAX + 2]; /* the deferred one's namespace; "\x01": every table */
} CK;

/* This server's last checkpoint file written, which a delta builds on: its
 * changes since are what the tables marked after its snapshot. */
static struct {
    uint64_t seq;  /* 0: none in this run (or the last write failed): the next one is full */
    uint64_t base; /* the full checkpoint its chain starts at */
    uint8_t *held; /* the partitions held at its snapshot */
    uint32_t nheld;
} LAST;

void checkpoint_init(member *mb, const char *data_dir, table_set *tables, chain *c,
                     consist *cons)
{
    X.mb = mb;
    X.data_dir = data_dir;
    X.tables = tables;
    X.chain = c;
    X.cons = cons;
}

/* The partitions this server loads from old node old's file (resume_sources):
 * flags into want; NULL when the view names no sources (every partition in it). */
static uint8_t *wanted(const Pskv__View *v, uint32_t old, uint8_t *want)
{
    size_t cells = (size_t)v->partitions * v->replicas;
    if (v->n_resume_sources != cells || v->n_prev_chains != cells)
        return NULL;
    memset(want, 0, v->partitions);
    for (size_t i = 0; i < cells; i++)
        if (v->prev_chains[i] == X.mb->node_id && v->resume_sources[i] == old)
            want[i / v->replicas] = 1;
    return want;
}

/* Clocks of one more file: each rank's clock the highest seen. */
static void merge_clocks(persist_clocks *into, persist_clocks *from)
{
    if (from->nranks > into->nranks) {
        persist_clocks t = *into;
        *into = *from;
        *from = t;
    }
    for (int r = 0; r < from->nranks; r++)
        if (from->vc[r] > into->vc[r])
            into->vc[r] = from->vc[r];
    free(from->vc);
    from->vc = NULL;
}

void checkpoint_load_resumed(persist_clocks *clocks)
{
    Pskv__View *v = X.mb->view;
    if (X.resumed || !v->resume_seq)
        return;
    X.resumed = 1;
    uint8_t *want = malloc(v->partitions ? v->partitions : 1);
    if (!want) {
        LOG_E("out of memory loading checkpoint %llu", (unsigned long long)v->resume_seq);
        exit(1);
    }
    int files = 0;
    /* one file per (this server, old node) pair: a resharded job may name several,
     * each for the partitions the scheduler gave it from that file */
    for (size_t i = 0; i + 1 < v->n_resume_from; i += 2) {
        if (v->resume_from[i] != X.mb->node_id)
            continue;
        uint32_t old = v->resume_from[i + 1];
        persist_clocks got = {NULL, 0};
        char why[600];
        int rc = persist_load(X.data_dir, X.mb->job_id, v->resume_seq, old, v->partitions,
                              wanted(v, old, want), NULL, X.tables, X.chain, X.cons, &got, why,
                              sizeof why);
        if (rc < 0) {
            LOG_E("cannot load checkpoint %llu: %s", (unsigned long long)v->resume_seq, why);
            exit(1);
        }
        merge_clocks(clocks, &got);
        files++;
    }
    free(want);
    if (!files)
        LOG_I("resumed job: no checkpoint file to load here (partitions come from replicas)");
    else if (files > 1)
        LOG_I("resumed job: checkpoint %llu loaded from %d files (resharded)",
              (unsigned long long)v->resume_seq, files);
}

int checkpoint_load_ns(const Pskv__Meta *req, uint64_t *rows, char *why, size_t whylen)
{
    uint32_t np = chain_nparts(X.chain), R = req->ckpt_replicas;
    const char *ns = req->ckpt_ns;
    *rows = 0;
    if (!*X.data_dir) {
        snprintf(why, whylen, "server node %u has no --data-dir", X.mb->node_id);
        return -PSKV_EINVAL;
    }
    if (!R || R > 8 || req->n_ckpt_chains != (size_t)np * R) {
        snprintf(why, whylen, "checkpoint %llu has %zu chain cells of R=%u; this service has %u "
                 "partitions: a group resumes only from a checkpoint of as many",
                 (unsigned long long)req->seq, req->n_ckpt_chains, R, np);
        return -PSKV_EMISMATCH;
    }
    uint32_t *from = calloc(np ? np : 1, sizeof *from); /* per held partition: its file's node */
    uint8_t *parts = calloc(np ? np : 1, 1);
    int rc = from && parts ? 0 : -PSKV_ENOMEM;
    for (uint32_t p = 0; rc == 0 && p < np; p++) {
        for (uint32_t k = 0; chain_holds(X.chain, p) && !from[p] && k < R; k++) {
            uint32_t old = req->ckpt_chains[(size_t)p * R + k];
            char path[4200];
            snprintf(path, sizeof path, "%s/" CKPTREC_NAME_FMT, X.data_dir, req->ckpt_job, req->seq,
                     old);
            if (old && access(path, R_OK) == 0)
                from[p] = old;
        }
        if (chain_holds(X.chain, p) && !from[p]) {
            snprintf(why, whylen, "partition %u is held here, and %s has no file of "
                     "checkpoint %llu written by a node of its chain then", p, X.data_dir,
                     (unsigned long long)req->seq);
            rc = -PSKV_ENOTFOUND;
        }
    }
    int files = 0;
    for (uint32_t p = 0; rc == 0 && p < np; p++) { /* one load per old node's file */
        uint32_t old = from[p];
        if (!old)
            continue;
        for (uint32_t q = p; q < np; q++)
            if ((parts[q] = from[q] == old))
                from[q] = 0;
        persist_clocks got = {NULL, 0};
        uint64_t before = 0, after = 0;
        for (size_t i = 0; i < tables_count(X.tables); i++)
            before += strcmp(tables_at(X.tables, i)->ns, ns) ? 0 : shard_size(tables_at(X.tables, i)->sh);
        rc = persist_load(X.data_dir, req->ckpt_job, req->seq, old, np, parts, ns, X.tables,
                          X.chain, X.cons, &got, why, whylen);
        free(got.vc);
        for (size_t i = 0; i < tables_count(X.tables); i++)
            after += strcmp(tables_at(X.tables, i)->ns, ns) ? 0 : shard_size(tables_at(X.tables, i)->sh);
        *rows += after - before;
        files++;
    }
    free(from);
    free(parts);
    return rc < 0 ? rc : files;
}

/* Tells the scheduler how checkpoint seq went (ERROR naming the file when it
 * could not be written). */
static void report_checkpoint(uint64_t seq, int rc, const char *why, int64_t t0_ms,
                              int64_t pause_ms)
{
    Pskv__Meta m;
    member_meta(X.mb, &m, rc < 0 ? PSKV__MSG_TYPE__ERROR : PSKV__MSG_TYPE__CHECKPOINT_ACK);
    m.has_seq = 1;
    m.seq = seq;
    char **names = CK.nss && rc >= 0 ? calloc(CK.nns + 1, sizeof *names) : NULL;
    if (rc >= 0) {
        m.has_ckpt_base = m.has_ckpt_bytes = 1;
        m.ckpt_base = CK.base;
        m.ckpt_bytes = CK.bytes;
        for (uint32_t i = 0; names && i < CK.nns; i++)
            names[i] = CK.nss[i];
        /* what the scheduler's manifest lists as held (absent: not known) */
        m.has_ckpt_nns = names != NULL;
        m.ckpt_nns = m.n_ckpt_nss = names ? CK.nns : 0;
        m.ckpt_nss = names;
    } else {
        m.has_error_code = 1;
        m.error_code = -rc;
        m.error = (char *)why;
        LOG_E("checkpoint %llu failed: %s", (unsigned long long)seq, why);
    }
    smet_checkpoint(rc >= 0, (double)(tu_now_ms() - t0_ms) / 1e3, rc >= 0 ? CK.bytes : 0);
    if (rc >= 0) {
        char kind[64] = "full";
        if (CK.base != seq)
            snprintf(kind, sizeof kind, "delta over %llu, base %llu", (unsigned long long)LAST.seq,
                     (unsigned long long)CK.base);
        LOG_I("checkpoint %llu written in %lld ms (%s, %llu bytes; serving paused %lld ms for "
              "the snapshot)", (unsigned long long)seq, (long long)(tu_now_ms() - t0_ms), kind,
              (unsigned long long)CK.bytes, (long long)pause_ms);
    }
    member_send(X.mb, &m);
    free(names);
}

/* The background write of checkpoint seq ended (rc): answered, and the next
 * delta builds on this file, or (failed: the changes since the one before were
 * forgotten at the snapshot) the next checkpoint is full. */
static void wrote(uint64_t seq, int rc, const char *why, int64_t t0_ms, int64_t pause_ms)
{
    report_checkpoint(seq, rc, why, t0_ms, pause_ms);
    free(CK.nss);
    CK.nss = NULL;
    if (CK.ns_only) { /* a group's file: the next delta still builds on the last whole one */
        free(CK.held);
        CK.held = NULL;
        return;
    }
    free(LAST.held);
    LAST.held = NULL;
    LAST.seq = 0;
    if (rc >= 0) {
        LAST.seq = seq;
        LAST.base = CK.base;
        LAST.held = CK.held;
        LAST.nheld = CK.nheld;
        CK.held = NULL;
    }
    free(CK.held);
    CK.held = NULL;
}

static void *commit_main(void *arg)
{
    (void)arg;
    CK.rc = ckpt_commit(&CK.w, CK.why, sizeof CK.why);
    atomic_store(&CK.done, 1);
    return NULL;
}

void checkpoint_poll(int wait_ms)
{
    for (int64_t until = tu_now_ms() + wait_ms;
         CK.busy && !atomic_load(&CK.done) && tu_now_ms() < until;)
        tu_sleep_ms(10);
    if (!CK.busy || !atomic_load(&CK.done)) {
        if (CK.busy && wait_ms > 0)
            LOG_E("checkpoint %llu still being written after %d ms: exiting without it",
                  (unsigned long long)CK.seq, wait_ms);
        return;
    }
    pthread_join(CK.thread, NULL);
    CK.busy = 0;
    wrote(CK.seq, CK.rc, CK.why, CK.t0_ms, CK.pause_ms);
}

int checkpoint_busy(void) { return CK.busy; }

/* The partitions held now (*n of them, a byte each; NULL when out of memory). */
static uint8_t *held_now(uint32_t *n)
{
    *n = chain_nparts(X.chain);
    uint8_t *h = calloc(*n ? *n : 1, 1);
    for (uint32_t p = 0; h && p < *n; p++)
        h[p] = (uint8_t)chain_holds(X.chain, p);
    return h;
}

static char dropped_ns[NSPACE_MAX + 1]; /* a namespace dropped since the last full file */

void checkpoint_note_drop(const char *ns)
{
    snprintf(dropped_ns, sizeof dropped_ns, "%s", *ns ? ns : "(unnamed)");
}

/* The namespaces of the tables now, each once (*n of them; NULL when out of
 * memory): what a snapshot of every table holds. */
static char (*namespaces_now(uint32_t *n))[NSPACE_MAX + 1]
{
    char(*nss)[NSPACE_MAX + 1] = calloc(tables_count(X.tables) + 1, sizeof *nss);
    *n = 0;
    for (size_t i = 0; nss && i < tables_count(X.tables); i++) {
        const char *ns = tables_at(X.tables, i)->ns;
        uint32_t k = 0;
        while (k < *n && strcmp(nss[k], ns))
            k++;
        if (k == *n)
            snprintf(nss[(*n)++], sizeof nss[0], "%s", ns);
    }
    return nss;
}

/* Whether checkpoint seq can be a delta over this server's last file; NULL when
 * it can, else why not (in buf). */
static const char *no_delta(const uint8_t *held, uint32_t nheld, char *buf, size_t len)
{
    unsigned long long last = (unsigned long long)LAST.seq;
    if (!LAST.seq)
        return "this server wrote no checkpoint yet in this run (or its last write failed)";
    if (*dropped_ns) {
        snprintf(buf, len, "namespace '%s' was dropped since checkpoint %llu (a delta would "
                 "keep its tables)", dropped_ns, last);
        return buf;
    }
    if (!held || nheld != LAST.nheld || memcmp(held, LAST.held, nheld)) {
        snprintf(buf, len, "the partitions it holds changed since checkpoint %llu", last);
        return buf;
    }
    for (size_t i = 0; i < tables_count(X.tables); i++) {
        const uint64_t *gone;
        if (shard_removed(tables_at(X.tables, i)->sh, &gone) < 0) {
            snprintf(buf, len, "table '%s' evicted more rows since checkpoint %llu than it keeps "
                     "track of", tables_at(X.tables, i)->name, last);
            return buf;
        }
    }
    return NULL;
}

/* A snapshot of this server's state now (serving pauses only for the copy),
 * written to the file by a thread while serving goes on. */
void checkpoint_write(uint64_t seq, int want_delta, const char *ns)
{
    char why[600];
    int64_t t0 = tu_now_ms();
    if (ns)
        want_delta = 0; /* a namespace's checkpoint is always full */
    /* a bsp close on its way down a chain (a replica a clock behind its head) or a
     * join a moment ago: the snapshot waits (the loop tries again after each
     * message) until every bsp table's partitions here are at one clock */
    if (CK.deferred != seq) {
        CK.deferred = seq;
        CK.deferred_delta = want_delta;
        CK.defer_until_ms = t0 + CHECKPOINT_DEFER_MS;
        snprintf(CK.deferred_ns, sizeof CK.deferred_ns, "%s", ns ? ns : "\x01");
    }
    for (size_t i = 0; i < tables_count(X.tables) && t0 < CK.defer_until_ms; i++) {
        table *t = tables_at(X.tables, i);
        if ((!ns || !strcmp(t->ns, ns)) && cons_of(t)->closes && consist_bsp_closed(X.cons, t) < 0)
            return; /* a group's checkpoint waits for its own tables only */
    }
    CK.deferred = 0;
    if (CK.busy) {
        snprintf(why, sizeof why, "server node %u is still writing checkpoint %llu",
                 X.mb->node_id, (unsigned long long)CK.seq);
        report_checkpoint(seq, -PSKV_ENOTREADY, why, t0, 0);
        return;
    }
    ckpt_writer *w = NULL;
    int rc = -PSKV_EINVAL;
    uint32_t nheld;
    uint8_t *held = held_now(&nheld);
    persist_delta d = {LAST.base, LAST.seq};
    const char *full = want_delta ? no_delta(held, nheld, why, sizeof why) : "";
    if (full && *full && !ns)
        LOG_I("checkpoint %llu: writing a full one, not a delta: %s", (unsigned long long)seq,
              full);
    if (!*X.data_dir)
        snprintf(why, sizeof why, "server node %u has no --data-dir", X.mb->node_id);
    else if (!held)
        snprintf(why, sizeof why, "server node %u out of memory", X.mb->node_id);
    else
        rc = persist_snapshot(X.data_dir, X.mb->job_id, seq, X.mb->node_id, X.tables, X.chain,
                              X.cons, ns, full ? NULL : &d, &w, why, sizeof why);
    if (rc < 0) {
        free(held);
        report_checkpoint(seq, rc, why, t0, 0);
        return;
    }
    for (size_t i = 0; !ns && i < tables_count(X.tables); i++) /* the next delta starts now */
        shard_changes_reset(tables_at(X.tables, i)->sh);
    if (full && !ns)
        dropped_ns[0] = '\0'; /* this full file has no dropped table */
    CK.ns_only = ns != NULL;
    free(CK.nss);
    CK.nss = ns ? NULL : namespaces_now(&CK.nns);
    CK.base = full ? seq : d.base;
    free(CK.held);
    CK.held = held;
    CK.nheld = nheld;
    CK.w = w;
    CK.bytes = ckpt_size(w);
    CK.seq = seq;
    CK.t0_ms = t0;
    CK.pause_ms = tu_now_ms() - t0;
    CK.why[0] = 0;
    atomic_store(&CK.done, 0);
    CK.busy = 1;
    if (pthread_create(&CK.thread, NULL, commit_main, NULL) != 0) {
        LOG_W("cannot start a thread for checkpoint %llu: writing it in the loop",
              (unsigned long long)seq);
        CK.busy = 0;
        rc = ckpt_commit(&CK.w, why, sizeof why);
        wrote(seq, rc, why, t0, tu_now_ms() - t0);
    }
}

void checkpoint_prune(uint64_t below, uint64_t keep_from, uint64_t keep_to)
{
    char why[600];
    int n = *X.data_dir ? persist_prune(X.data_dir, below, keep_from, keep_to, why, sizeof why) : 0;
    if (n < 0)
        LOG_W("checkpoint retention: %s", why);
    else if (n > 0)
        LOG_I("checkpoint retention: deleted %d files of checkpoints before %llu from %s", n,
              (unsigned long long)below, X.data_dir);
}

void checkpoint_pass(void)
{
    checkpoint_poll(0);
    if (CK.deferred)
        checkpoint_write(CK.deferred, CK.deferred_delta,
                         CK.deferred_ns[0] == '\x01' ? NULL : CK.deferred_ns);
}
