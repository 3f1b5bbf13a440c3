/* open: the worker handle's life: pskv_worker_open (join the job, apply the
 * first view, start the heartbeat thread) and pskv_worker_close (wait for what is
 * in flight, FINISH, stop the thread, release everything). The top of the
 * library: it calls every module, and none calls it. */
#define _GNU_SOURCE
#include "wstate.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#include "allreduce.h"
#include "log.h"
#include "net.h"
#include "secure.h"
#include "shmseg.h"
#include "slice.h"
#include "wfilter.h"
#include "wmetrics.h"
#include "wpeer.h"
#include "wpipe.h"
#include "wpump.h"
#include "wreq.h"
#include "wsend.h"
#include "wshm.h"
#include "wview.h"

int pskv_worker_open(const pskv_config *cfg_in, pskv_worker **out)
{
    pskv_config cfg;
    pskv_config_init(&cfg);
    if (cfg_in)
        cfg = *cfg_in;
    *out = NULL;
    if (!cfg.scheduler || !*cfg.scheduler)
        cfg.scheduler = getenv("PSKV_SCHEDULER");
    if (!cfg.scheduler || !*cfg.scheduler)
        cfg.scheduler = "127.0.0.1:7700";
    if (cfg.window <= 0)
        cfg.window = 64;
    if (cfg.request_timeout_ms <= 0)
        cfg.request_timeout_ms = 30000;
    if (cfg.connect_timeout_s <= 0)
        cfg.connect_timeout_s = 30;
    if (cfg.join_timeout_s <= 0)
        cfg.join_timeout_s = 600;
    if (!cfg.keys)
        cfg.keys = getenv("PSKV_KEYS");
    if (cfg.allreduce_wire < PSKV_WIRE_FP32 || cfg.allreduce_wire > PSKV_WIRE_BF16)
        return -PSKV_EINVAL;
    const char *group = cfg.group ? cfg.group : "";
    if (strlen(group) > 64 || strchr(group, '/') || cfg.group_size < 0 ||
        cfg.group_size > 65536) {
        LOG_E("group '%s' of %d workers: a group's name is 1..64 bytes without '/', its size "
              "1..65536", group, cfg.group_size);
        return -PSKV_EINVAL;
    }
    /* a group's tables live in its own namespace unless it names another */
    const char *ns = cfg.table_namespace && *cfg.table_namespace ? cfg.table_namespace : group;
    if (strlen(ns) > 64 || strchr(ns, '/')) {
        LOG_E("namespace '%s': a namespace is 1..64 bytes without '/'", ns);
        return -PSKV_EINVAL;
    }
    pskv_worker *w = calloc(1, sizeof *w);
    if (!w)
        return -PSKV_ENOMEM;
    snprintf(w->ns, sizeof w->ns, "%s", ns);
    snprintf(w->group, sizeof w->group, "%s", group);
    w->quota_bytes = cfg.quota_bytes;
    w->traffic_mu_ok = pthread_mutex_init(&w->traffic_mu, NULL) == 0;
    w->window = cfg.window;
    w->chunk_bytes = cfg.chunk_bytes ? cfg.chunk_bytes : 1024 * 1024;
    w->ar_wire = cfg.allreduce_wire;
    w->spin_us = cfg.spin_us < 0 ? 0 : cfg.spin_us;
    w->request_timeout_ms = cfg.request_timeout_ms;
    w->max_message = cfg.max_message;
    w->retry_ms = cfg.retry_ms < 0 ? 0 : cfg.retry_ms;
    w->shm = cfg.shm && !cfg.evaluator;
    if (w->shm && shmseg_sweep() > 0)
        LOG_I("removed shared-memory segments of dead workers from /dev/shm");
    w->next_ts = 1;
    snprintf(w->sched, sizeof w->sched, "%s", cfg.scheduler);
    if (wtest_init(&w->test) < 0) {
        pskv_worker_close(&w);
        return -PSKV_EINVAL;
    }
    w->reqs = calloc((size_t)w->window, sizeof *w->reqs);
    w->ctx = zmq_ctx_new();
    if (!w->reqs || !w->ctx) {
        pskv_worker_close(&w);
        return -PSKV_ENOMEM;
    }
    w->hb_slice_us = cfg.slice_us; /* the heartbeat thread asks for it too */
    if (cfg.slice_us > 0) /* its I/O thread starts now, with the slice: slice.h */
        slice_start_zmq(w->ctx, cfg.slice_us, "libpskv's ZeroMQ threads");
    char why[400], host[256], shost[256];
    int sport, rc;
    if (net_split_hostport(cfg.scheduler, shost, sizeof shost, &sport) < 0) {
        rc = wst_error(w, PSKV_EINVAL, "scheduler address '%s' is not HOST:PORT", cfg.scheduler);
        goto fail;
    }
    rc = net_pick_advertise(cfg.advertise, cfg.interface, shost, host, sizeof host, why,
                            sizeof why);
    if (rc == 0)
        rc = net_check_advertise(host, shost, why, sizeof why);
    if (rc == 0)
        rc = secure_init(&w->sec, cfg.evaluator ? "this evaluator" : "this worker", cfg.keys,
                         cfg.insecure, cfg.evaluator ? KEY_ROLE_EVALUATOR : KEY_ROLE_WORKER, 0,
                         why, sizeof why);
    if (rc == 0)
        rc = secure_check_exposure(&w->sec, cfg.listen_bind, host, why, sizeof why);
    if (rc < 0) {
        wst_error(w, rc, "%s", why);
        goto fail;
    }
    w->evaluator = cfg.evaluator != 0;
    int port = 0;
    if (!w->evaluator && ((rc = war_open(w)) < 0 ||
                          (rc = port = wpeer_listen(w, cfg.listen_bind, cfg.listen_port)) < 0))
        goto fail;
    /* an evaluator names the group it evaluates (one per group; its size is the
     * workers' to give) */
    member_set_group(group, w->evaluator ? 0 : (uint32_t)cfg.group_size);
    member_set_namespace(w->evaluator ? NULL : ns);
    const char *drop = getenv("PSKV_DROP_NAMESPACE"); /* no pskv_config field: the env */
    member_set_drop_namespace(drop && (!strcmp(drop, "1") || !strcmp(drop, "true")));
    const char *resume = getenv("PSKV_GROUP_RESUME"); /* the same: the env */
    member_set_resume(!w->evaluator && resume && (!strcmp(resume, "1") || !strcmp(resume, "true")));
    rc = member_open(&w->mb, w->ctx, &w->sec, cfg.scheduler,
                     w->evaluator ? PSKV__ROLE__EVALUATOR : PSKV__ROLE__WORKER,
                     w->evaluator ? -1 : cfg.rank, host, port,
                     cfg.job_id, cfg.connect_timeout_s, cfg.max_message, why, sizeof why);
    if (rc < 0) {
        wst_error(w, rc, "%s", why);
        goto fail;
    }
    log_set_node((int)w->mb.node_id);
    rc = member_wait_view(&w->mb, cfg.join_timeout_s, why, sizeof why);
    if (rc < 0) {
        wst_error(w, rc, "%s", why);
        goto fail;
    }
    rc = wview_apply(w, cfg.max_message);
    if (rc < 0)
        goto fail;
    /* a worker joining a running job (its rank died and it took it over) counts
     * barriers on from the job's and starts at the slowest live worker's clock */
    w->barrier_seq = w->barrier_done = w->mb.barriers_done;
    int64_t slowest = -1;
    for (size_t i = 0; i < w->mb.view->n_nodes; i++) {
        const Pskv__Node *n = w->mb.view->nodes[i];
        if (n->role == PSKV__ROLE__WORKER && n->rank == w->mb.rank && n->id < w->mb.node_id &&
            !w->evaluator)
            w->took_over = 1;
        if (n->role == PSKV__ROLE__WORKER && n->id != w->mb.node_id && n->alive &&
            n->state && strcmp(n->state, "finished") && (slowest < 0 || n->clock < slowest))
            slowest = n->clock;
    }
    if (slowest > 0 && !w->evaluator) {
        /* and says so to every server (a CLOCK of the iteration before): a server
         * that knew this rank from a worker that died holds that one's clock, and
         * an ssp pull, this worker's own first, would wait on it */
        atomic_store(&w->clock, slowest);
        LOG_I("joined a running job: starting at clock %lld (the slowest live worker's)",
              (long long)slowest);
        if ((rc = wsend_clock(w, slowest - 1, 0, 0)) < 0)
            goto fail;
    }
    metrics_group(group); /* its series carry group="NAME" (none when unnamed) */
    if ((rc = wmet_start(w, secure_bind_addr(&w->sec, cfg.metrics_bind), cfg.metrics_port)) < 0)
        goto fail;
    wview_heartbeat_start(w);
    if (w->evaluator)
        LOG_I("evaluator (node %u) joined job %llu with %d workers and %d servers",
              w->mb.node_id, (unsigned long long)w->mb.job_id, w->nworkers, w->nservers);
    else
        LOG_I("worker rank %d of %d (node %u) joined job %llu with %d servers", w->mb.rank,
              w->nworkers, w->mb.node_id, (unsigned long long)w->mb.job_id, w->nservers);
    *out = w;
    return 0;
fail:
    LOG_E("%s", w->last_error);
    /* keep the message for a caller that has no handle: print it once above */
    pskv_worker_close(&w);
    return rc;
}

int pskv_worker_close(pskv_worker **w_p)
{
    if (!w_p || !*w_p)
        return 0;
    pskv_worker *w = *w_p;
    int rc = 0;
    if (w->mb.sock && w->srv) {
        /* stopping on a signal, the whole job may be going down at once (scancel,
         * Ctrl-C of a launcher): bounded short, as what is in flight may have no
         * server or scheduler left to answer */
        int stop = member_stop_requested() || w->job_stopping || (w->evaluator && w->stop_early);
        rc = pskv_wait_all(w, stop ? CLOSE_STOP_MS : w->request_timeout_ms);
        Pskv__Meta m;
        member_meta(&w->mb, &m, PSKV__MSG_TYPE__FINISH);
        member_send(&w->mb, &m);
        int64_t deadline = tu_now_ms() + (stop ? CLOSE_STOP_MS : 5000);
        /* an evaluator told STOP: the scheduler may be gone already (it does not
         * wait for the evaluator), and nothing waits for this FINISH */
        int wait_ack = !(w->evaluator && w->job_stopping);
        while (wait_ack && !w->finish_acked && tu_now_ms() < deadline)
            wpump(w, wst_remaining(deadline));
        if (wait_ack && !w->finish_acked)
            LOG_W("the scheduler did not acknowledge FINISH within %d s",
                  stop ? CLOSE_STOP_MS / 1000 : 5);
    }
    wview_heartbeat_stop(w);
    if (w->traffic_mu_ok)
        pthread_mutex_destroy(&w->traffic_mu);
    w->traffic_mu_ok = 0;
    wpipe_close(w);
    war_close(w);
    wpeer_unlisten(w);
    if (w->lent_pushes) /* debug: an app's last line is its own */
        LOG_D("%llu pushes sent without a copy; %llu waited after their answer for ZeroMQ to "
              "let go of the caller's values, %llu connections reset for it",
              (unsigned long long)w->lent_pushes, (unsigned long long)w->lent_drained,
              (unsigned long long)w->lent_resets);
    for (int i = 0; i < w->window && w->reqs; i++)
        if (w->reqs[i].type != REQ_FREE)
            wreq_release(&w->reqs[i]);
    if (w->pbufs_sent)
        LOG_I("push buffers: %llu sent, %llu sends read by the server in place in shared "
              "memory", (unsigned long long)w->pbufs_sent, (unsigned long long)w->pbufs_in_place);
    if (w->clock_rides)
        LOG_I("clock ends: %llu CLOCK messages sent, %llu rode on pushes instead",
              (unsigned long long)w->clock_msgs, (unsigned long long)w->clock_rides);
    if (w->views_in_place || w->views_copied)
        LOG_I("view pulls: %llu read in place in shared memory, %llu copied, %llu read in "
              "place in received TCP frames",
              (unsigned long long)(w->views_in_place - w->views_in_frame),
              (unsigned long long)w->views_copied, (unsigned long long)w->views_in_frame);
    for (int i = 0; i < PSKV_MAX_VIEWS; i++) /* views still held: before their segments */
        if (w->views[i].ts)
            wreq_view_release(w, &w->views[i]);
    free(w->view_spare);
    for (int i = 0; i < PSKV_MAX_PUSH_BUFFERS; i++) /* unsent push buffers */
        if (w->pbufs[i].vals)
            wreq_pbuf_free(&w->pbufs[i]);
    for (int i = 0; i < w->nservers && w->srv; i++) {
        if (w->srv[i].sock)
            zmq_close(w->srv[i].sock);
        wshm_drop(w, i);
    }
    member_close(&w->mb);
    secure_close(&w->sec);
    for (int i = 0; i < w->ntables && w->tables; i++) {
        wfilter_report(&w->tables[i]);
        wfilter_close(&w->tables[i]);
    }
    free(w->tables);
    free(w->srv);
    free(w->head);
    free(w->tail);
    free(w->chains);
    free(w->items);
    free(w->count);
    free(w->pindex);
    free(w->owner);
    free(w->reqs);
    if (w->ctx)
        zmq_ctx_term(w->ctx);
    free(w);
    *w_p = NULL;
    return rc;
}
