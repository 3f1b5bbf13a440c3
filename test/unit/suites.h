/* Unit test suites of pskv, one per module; main.c runs them all. */
#ifndef PSKV_TEST_SUITES_H
#define PSKV_TEST_SUITES_H

#include <check.h>

/* ck_assert_msg for hot loops: check's assertions report a checkpoint to the
 * parent process on every success, which costs a system call each. */
#define LOOP_ASSERT(expr, ...)                                                          \
    do {                                                                                \
        if (!(expr))                                                                    \
            ck_abort_msg("check failed: " __VA_ARGS__);                                 \
    } while (0)

/* common/net.c: a socket monitor ended while its socket stays open. */
Suite *net_suite(void);
/* common/wire.c: frame validation, table ids, type names, send/recv. */
Suite *wire_suite(void);
Suite *wire_ar_suite(void);
Suite *wire16_suite(void);
/* common/metacodec.c: Meta packed and unpacked as protobuf-c does. */
Suite *metacodec_suite(void);
/* common/shmseg.c, the shm checks of wire.c, server/sshm.c: segments, references
 * refused, the server's mappings, the sweep of dead workers' segments. */
Suite *shm_suite(void);
/* common/config.c: defaults, environment, flags, bounds, positionals. */
Suite *config_suite(void);
/* scheduler/reshard.c: a checkpoint's partitions placed and loaded on more or
 * fewer servers. */
Suite *reshard_suite(void);
/* scheduler/membership.c (with events.c, view.c, sched_net.c): registration and
 * ranks, rank takeover, lease expiry, barriers, FINISH then STOP, node events. */
Suite *membership_suite(void);
/* scheduler/holders.c: who holds each partition whole; a partition whose last
 * whole replica dies while another member awaits its copy is lost. */
Suite *holders_suite(void);
/* common/ring.c: key placement, dense spans, partitions, tokens and chains. */
Suite *ring_suite(void);
/* common/update/updater.c: sum, sgd, momentum, l2, adagrad, finiteness, checks. */
Suite *updater_suite(void);
/* server/store/shard.c: initial values, dense and sparse push/pull, ownership. */
Suite *shard_suite(void);
/* server/store/prefault.c, shard_map.c: faults off the push path, growth with them. */
Suite *prefault_suite(void);
/* server/store/cmsketch.c, shard_sweep.c: the sketch, admission, the eviction sweep. */
Suite *admit_suite(void);
/* server/store/shard_dirty.c: rows changed since the last checkpoint, tombstones. */
Suite *dirty_suite(void);
/* server/store/table.c: create, reopen, mismatch and invalid options. */
Suite *table_suite(void);
/* worker/idx.c, worker/libsvm.c: fixtures, shards, corrupt files, real data sets. */
Suite *data_suite(void);
/* worker/model.c: gradient vs finite differences, loss, eval, sizes, training. */
Suite *model_suite(void);
/* worker/apps/train/pipesched.c: --layers, stage cuts, pass orders of each schedule. */
Suite *pipesched_suite(void);
/* worker/apps/train/balsplit.c: --balance batch's split: sum kept, cap, window, no swing. */
Suite *balsplit_suite(void);
/* worker/apps/train/lrsched.c: --lr-schedule's factors, --lr-warmup's ramp and bounds. */
Suite *lrsched_suite(void);
/* worker/apps/train/eta.c: --estimate's arithmetic: warm-up, evaluations once, trimmed blocks. */
Suite *eta_suite(void);
/* worker/apps/train/pipemove.c: --balance stages' rule: the model's move judged by
 * the step's wall time, moved back, neighbours tried, no swing on noise. */
Suite *pipemove_suite(void);
/* server/consist/: the models' rows over the vector clock: ssp's bound, bsp's
 * close, held pulls released by a CLOCK or a view, refusals and clocks. */
Suite *consist_suite(void);
/* server/repl/: the chain rules: head and tail checks, dense runs cut to this
 * server's partitions, a re-sent push applied once. */
Suite *chain_suite(void);
/* server/follow.c: what goes to a reader following a namespace, and when: dense
 * parts only at a clock boundary (a CLOCK, or quiet after one or since first
 * seen), readers dropped with their namespace or connection, edge sizes. */
Suite *follow_suite(void);
/* server/repl/dedupe.c: applied-push record, eviction, clear, export/import, collisions. */
Suite *dedupe_suite(void);
/* common/ckpt.c: checkpoint round trips, temp file and rename, truncation, bit flips. */
Suite *ckpt_suite(void);
/* common/keys.c, zap.c, refuse.c: key files, allowlists, keysets, CURVE + ZAP on TCP. */
Suite *keys_suite(void);
/* worker/lib/wclip.c: pskv_clip_norm, gradient clipping by global norm. */
Suite *clip_suite(void);
/* common/metrics.c: series, label escaping, histograms, the text, the endpoint. */
Suite *metrics_suite(void);
/* common/filter.c, keycache.c, server/sfilter.c: filter lists, lz4 and zstd round
 * trips and corrupt frames, key-list caches, keycache on the server. */
Suite *filter_suite(void);
/* worker/lib/wkkt.c, common/filter.c: the kkt filter's decisions, exact against the
 * server's sgd with l1, and its refusals at TABLE_OPEN. */
Suite *kkt_suite(void);
/* common/half.c: fp16 and bf16 conversions (F16C and portable). */
Suite *half_suite(void);
/* common/halfvec.c, fquantvec.c: the vector kernels against the portable code. */
Suite *halfvec_suite(void);
/* scheduler/manifest.c: clock= and best= round trips, retention keeps the best. */
Suite *manifest_suite(void);
/* common/resend.c: the re-send rule on hand-worked times: first copy at the base,
 * backoff 1, 2, 4, 8 x and its cap, none while the peer is behind, stale silence. */
Suite *resend_suite(void);
/* common/slice.c: the scheduling slice granted, inherited, clamped, left alone at 0. */
Suite *slice_suite(void);
/* scheduler/tune/: GP posterior and EI against closed forms, grid coverage, ASHA and
 * median stopping against hand traces, the space file's refusals; the launcher's host
 * file (its refusals, the host with room) and the ssh command's quoting run by sh. */
Suite *tune_suite(void);
/* common/phi.c: the phi-accrual detector against hand-computed values, the sd
 * floor, jitter buying time, the window rolling. */
Suite *phi_suite(void);
/* worker/lib/wplan.c: table checks, runs, keys grouped by partition owner, dense runs
 * cut by owner and chunk, on a handle laid out by hand (no sockets). */
Suite *wplan_suite(void);
/* worker/serve/: the JSON reader, snapshots published while read, sparse features. */
Suite *serve_suite(void);
/* worker/lib/wpy.c: pskv_struct_layout against offsetof and sizeof, unknown names
 * refused; pskv_held_get on NULL. */
Suite *wpy_suite(void);

/* server/store/nspace.c: full names, key bindings, quotas. */
Suite *nspace_suite(void);

#endif
