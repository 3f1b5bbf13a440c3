/* The flags of the training apps and of pskv-evaluator (train/): pskv-worker's
 * flag table (worker_main.c) takes them after the check and bench apps' flags, in
 * this order, which is --help's. apptab.h says how the table is composed. */
#include "apptab.h"

const cfg_entry apptab_train_flags[] = {
    /* training */
    {"sync", CFG_STR, "ps", "PSKV_WORKER_SYNC", 1, 0, NULL,
     "softmax, mlp: ps (push gradients to the servers, pull weights) or allreduce (the mean "
     "gradient by pskv_allreduce among the workers, the same update applied on every worker; "
     "the servers keep a copy of the weights, --copy-every) or local (no communication a "
     "step: each worker applies its own gradient to its own weights; rank 0's are copied to "
     "the servers every --copy-every steps: the compute-only ceiling)", 0, 0, NULL, NULL},
    {"loss-scale", CFG_STR, "", "PSKV_WORKER_LOSS_SCALE", 1, 0, NULL,
     "--sync allreduce: the gradient is multiplied by S before the all-reduce and divided "
     "after; a mean with an inf or NaN skips the step on every worker. mlp, softmax with "
     "--sync ps and --wire fp16|bf16: pushes carry the gradient times S, the servers divide; "
     "a step whose scaled gradient is not finite in the wire precision pushes nothing. "
     "dynamic: S starts at 65536, halves on a skipped step and doubles after --scale-window "
     "clean steps (within 2^-24 .. 2^24); a number: S fixed (with --sync ps a power of two) "
     "(empty = none)", 0, 0, NULL, NULL},
    {"scale-window", CFG_INT, "2000", "PSKV_WORKER_SCALE_WINDOW", 1, 1e9, "steps",
     "--loss-scale dynamic: clean steps before the scale doubles", 0, 0, NULL, NULL},
    {"plant-overflow", CFG_INT, "0", "PSKV_WORKER_PLANT_OVERFLOW", 0, 1e12, "step",
     "mlp, softmax, for tests: rank 0's gradient holds the largest float at this step "
     "(1 = the first; 0 = never)", 0, 0, NULL, NULL},
    {"zero", CFG_INT, "0", "PSKV_WORKER_ZERO", 0, 1, NULL,
     "--sync allreduce: 1 = ZeRO stage 1: gradients reduce-scattered, each worker updates "
     "its 1/N of the weights with that slice's optimizer state only, weights all-gathered "
     "(0 = every worker updates all)", 0, 0, NULL, NULL},
    {"copy-every", CFG_INT, "100", "PSKV_WORKER_COPY_EVERY", 1, 1e9, "steps",
     "--sync allreduce: rank 0 writes the weights to the servers (pskv_assign) every N steps "
     "and at the end, so checkpoints and --save-model hold them", 0, 0, NULL, NULL},
    {"rejoin-timeout", CFG_DOUBLE, "60", "PSKV_WORKER_REJOIN_TIMEOUT", 0.1, 86400, "s",
     "--sync allreduce: after a worker died, the others wait this long for a worker started "
     "with its --rank to take it over, then go on from the servers' copy (--copy-every); "
     "else they exit 1 naming the rank", 0, 0, NULL, NULL},
    {"synth-epoch-time", CFG_DOUBLE, "0", "PSKV_WORKER_SYNTH_EPOCH_TIME", 0, 86400, "s",
     "synth: how long each epoch takes (the curve does not depend on it)", 0, 0, NULL, NULL},
    {"pushpull", CFG_BOOL, "false", "PSKV_WORKER_PUSHPULL", 1, 0, NULL,
     "softmax, mlp: a step's push, clock and pull are one pskv_pushpull (one round trip "
     "per server; with --prefetch into a view, waited for at the next step; where it "
     "applies: --sync ps without --filter, a 16-bit --wire, --loss-scale or "
     "--print-digests; left unset: on with --prefetch and --shm, one server or no "
     "replicas (--replicas 1), off otherwise; "
     "--pushpull=false turns it off); else push, clock, then pull; pipeline: a stage's "
     "push, clock and the next step's pull are one pskv_pushpull unless --pushpull=false "
     "(not with --balance stages, --filter or a 16-bit --wire)", 0, 0, NULL, NULL},
    {"estimate", CFG_BOOL, "false", "PSKV_WORKER_ESTIMATE", 1, 0, NULL,
     "softmax, mlp: train a fifth of the job's steps (40 to 1000, after a warm-up of a "
     "tenth of them, 5 to 100; every worker: give them all the flag), print on rank 0 "
     "the job's predicted wall time as configured (--epochs, --eval-every) and its scaling "
     "efficiency, and exit", 0, 0, NULL, NULL},
    {"balance", CFG_STR, "none", "PSKV_WORKER_BALANCE", 1, 0, NULL,
     "softmax, mlp under --consistency bsp (--sync ps) or --sync allreduce: batch = each "
     "worker's batch follows its measured speed, the global batch (--batch x workers) kept, "
     "the update the exact mean over it; fixed:FILE = the splits of a --balance-log file "
     "(lines STEP b0,b1,...); none = every worker --batch; pipeline: stages = the layer "
     "boundaries between stages follow the stages' measured speeds (docs/operations.md, "
     "\"Load balancing\")", 0, 0, NULL, NULL},
    {"balance-log", CFG_STR, "", "PSKV_WORKER_BALANCE_LOG", 1, 0, NULL,
     "--balance: rank 0 writes each split here as it takes effect (STEP b0,b1,...), for "
     "--balance fixed:FILE", 0, 0, NULL, NULL},
    {"slowdown-after", CFG_INT, "0", "PSKV_WORKER_SLOWDOWN_AFTER", 0, 1e12, "steps",
     "softmax, mlp, pipeline: --slowdown and --jitter start after this many of the worker's steps "
     "(0 = from the first)", 0, 0, NULL, NULL},
    {"layer-delay-ms", CFG_DOUBLE, "0", "PSKV_WORKER_LAYER_DELAY_MS", 0, 1000, "ms",
     "pipeline: this stage sleeps this long per layer of each forward and backward pass: a "
     "wall-time cost its CPU time does not show (tests of --balance stages)", 0, 0, NULL, NULL},
    {"epochs", CFG_INT, "5", "PSKV_WORKER_EPOCHS", 1, 100000, NULL, "training epochs", 0, 0, NULL,
     NULL},
    {"batch", CFG_INT, "32", "PSKV_WORKER_BATCH", 1, 65536, NULL, "examples per step per worker "
     "(mlp: default 16)", 0, 0, NULL, NULL},
    {"layers", CFG_STR, "784,1024,1024,1024,10", "PSKV_WORKER_LAYERS", 1, 0, NULL,
     "pipeline: layer sizes of the MLP, inputs first, classes last", 0, 0, NULL, NULL},
    {"stages", CFG_INT, "1", "PSKV_WORKER_STAGES", 1, 64, NULL,
     "pipeline: stages S (rank r is stage r mod S of pipeline r div S)", 0, 0, NULL, NULL},
    {"split", CFG_STR, "", "PSKV_WORKER_SPLIT", 1, 0, NULL,
     "pipeline: layers per stage (\"2,1\"); default the cut balancing parameter counts", 0, 0,
     NULL, NULL},
    {"pipelines", CFG_INT, "0", "PSKV_WORKER_PIPELINES", 0, 4096, NULL,
     "pipeline: data-parallel pipelines D (0 = workers / stages)", 0, 0, NULL, NULL},
    {"micro-batches", CFG_INT, "4", "PSKV_WORKER_MICRO_BATCHES", 1, 4096, NULL,
     "pipeline: micro-batches M per mini-batch", 0, 0, NULL, NULL},
    {"schedule", CFG_STR, "1f1b", "PSKV_WORKER_SCHEDULE", 1, 0, NULL,
     "pipeline: sequential, gpipe or 1f1b", 0, 0, NULL, NULL},
    {"max-inflight", CFG_INT, "0", "PSKV_WORKER_MAX_INFLIGHT", 0, 4096, NULL,
     "pipeline: micro-batches a stage holds at once at most (0 = the schedule's own depth)", 0,
     0, NULL, NULL},
    {"recompute", CFG_BOOL, "false", "PSKV_WORKER_RECOMPUTE", 1, 0, NULL,
     "pipeline: keep only each micro-batch's input; run the forward again for the backward",
     0, 0, NULL, NULL},
    {"suggest-split", CFG_BOOL, "false", "PSKV_WORKER_SUGGEST_SPLIT", 1, 0, NULL,
     "pipeline: time each layer, print the --split minimising the slowest stage and exit", 0,
     0, NULL, NULL},
    {"timeline-step", CFG_INT, "-1", "PSKV_WORKER_TIMELINE_STEP", -1, 9.2e18, NULL,
     "pipeline: log the passes of this mini-batch (0-based) for a timeline (-1 = none)", 0, 0,
     NULL, NULL},
    {"hidden", CFG_INT, "256", "PSKV_WORKER_HIDDEN", 1, 65536, NULL, "mlp: hidden units", 0, 0,
     NULL, NULL},
    {"updater", CFG_STR, "sgd", "PSKV_WORKER_UPDATER", 1, 0, NULL,
     "server-side optimizer: sgd, adagrad, adam, adamw, ftrl or plugin:PATH[:ARGS]", 0, 0, NULL,
     NULL},
    {"lr", CFG_DOUBLE, "0.01", "PSKV_WORKER_LR", 0, 1e6, NULL,
     "learning rate (left unset: softmax 0.02 and mlp 0.0075 with sgd or adagrad; 0.001 for "
     "adam/adamw; ftrl's alpha, 0.1)", 0, 0, NULL, NULL},
    {"beta1", CFG_DOUBLE, "0.9", "PSKV_WORKER_BETA1", 0, 0.999999, NULL, "adam/adamw beta1", 0, 0,
     NULL, NULL},
    {"beta2", CFG_DOUBLE, "0.999", "PSKV_WORKER_BETA2", 0, 0.999999, NULL, "adam/adamw beta2", 0,
     0, NULL, NULL},
    {"eps", CFG_DOUBLE, "1e-8", "PSKV_WORKER_EPS", 0, 1, NULL, "adam/adamw epsilon", 0, 0, NULL,
     NULL},
    {"weight-decay", CFG_DOUBLE, "0.01", "PSKV_WORKER_WEIGHT_DECAY", 0, 1e6, NULL,
     "adamw: decoupled weight decay", 0, 0, NULL, NULL},
    {"l1", CFG_DOUBLE, "0", "PSKV_WORKER_L1", 0, 1e6, NULL,
     "L1: sgd's proximal step; ftrl's lambda1 (left unset: 1/(16 x --batch) for ftrl)", 0, 0, NULL,
     NULL},
    {"admit-after", CFG_INT, "0", "PSKV_WORKER_ADMIT_AFTER", 0, 255, "pushes",
     "sparse-lr: a feature gets a row on the server on its Nth push; earlier pushes are "
     "dropped (0 = at once)", 0, 0, NULL, NULL},
    {"evict-after", CFG_INT, "0", "PSKV_WORKER_EVICT_AFTER", 0, 4294967295.0, "clocks",
     "sparse-lr: rows not pushed for this many batches are removed (0 = never; the workers "
     "then end a clock per batch)", 0, 0, NULL, NULL},
    {"ftrl-beta", CFG_DOUBLE, "1", "PSKV_WORKER_FTRL_BETA", 0, 1e6, NULL,
     "ftrl: beta (left unset: 1/--batch)", 0, 0, NULL, NULL},
    {"lr-schedule", CFG_STR, "const", "PSKV_WORKER_LR_SCHEDULE", 1, 0, NULL,
     "softmax/mlp: const, linear or cosine decay to 0 over the run, or exp:G (x G per epoch) "
     "(default linear for softmax "
     "and mlp with sgd or adagrad; scales each pushed gradient: "
     "the learning-rate schedule of the sgd updater)", 0, 0, NULL, NULL},
    {"lr-warmup", CFG_DOUBLE, "0", "PSKV_WORKER_LR_WARMUP", 0, 1e6, "epochs",
     "softmax/mlp: a linear warm-up of the learning rate over the first E epochs (E may be a "
     "fraction; below --epochs): the --lr-schedule factor times (step + 1) / its steps, rising "
     "from about 0 to 1, as for a learning rate scaled with the global batch (Goyal et al. "
     "2017; 0 = none)", 0, 0, NULL, NULL},
    {"momentum", CFG_DOUBLE, "0.9", "PSKV_WORKER_MOMENTUM", 0, 0.999, NULL, "sgd momentum", 0, 0,
     NULL, NULL},
    {"l2", CFG_DOUBLE, "0", "PSKV_WORKER_L2", 0, 1e6, NULL, "L2 penalty", 0, 0, NULL, NULL},
    {"clip-norm", CFG_DOUBLE, NULL, "PSKV_WORKER_CLIP_NORM", 1, 0, NULL,
     "softmax, mlp, sparse-lr: scale each step's gradient down to this global L2 norm when it "
     "is larger (> 0; default: no clipping); check: push a planted huge gradient so clipped",
     0, 0, NULL, NULL},
    {"seed", CFG_INT, "1", "PSKV_WORKER_SEED", 0, 9.2e18, NULL, "seed of the initial weights and "
     "the shuffles", 0, 0, NULL, NULL},
    {"eval-every", CFG_DOUBLE, "1", "PSKV_WORKER_EVAL_EVERY", 0, 1e6, "epochs",
     "evaluate on the test set this often (0 = only at the end)", 0, 0, NULL, NULL},
    {"metrics", CFG_STR, "", "PSKV_WORKER_METRICS", 1, 0, NULL,
     "rank 0 writes one JSON object per evaluation here", 0, 0, NULL, NULL},
    {"save-model", CFG_STR, "", "PSKV_WORKER_SAVE_MODEL", 1, 0, NULL,
     "write the final weights here (docs/operations.md has the format)", 0, 0, NULL,
     NULL},
    {"checkpoint-epochs", CFG_INT, "0", "PSKV_WORKER_CHECKPOINT_EPOCHS", 0, 100000, "epochs",
     "softmax, mlp, sparse-lr, pipeline: after every N epochs, a checkpoint at a barrier "
     "(values and progress agree exactly; needs the scheduler's --data-dir; 0 = none); "
     "incr-check: after every N rounds", 0, 0, NULL, NULL},
    {"touch", CFG_DOUBLE, "10", "PSKV_WORKER_TOUCH", 0.01, 100, "%",
     "incr-check: the share of keys each round after the first pushes", 0, 0, NULL, NULL},
    {"init-from", CFG_STR, "", "PSKV_WORKER_INIT_FROM", 1, 0, NULL,
     "start from weights saved by --save-model", 0, 0, NULL, NULL},
    {"data", CFG_STR, "/usr/share/datasets/fashion-mnist", "PSKV_WORKER_DATA", 1, 0, NULL,
     "folder of the Fashion-MNIST idx .gz files", 0, 0, NULL, NULL},
    {"train-limit", CFG_INT, "0", "PSKV_WORKER_TRAIN_LIMIT", 0, 1e9, NULL,
     "use only the first N training images (0 = all)", 0, 0, NULL, NULL},
    {"test-limit", CFG_INT, "0", "PSKV_WORKER_TEST_LIMIT", 0, 1e9, NULL,
     "use only the first N test images (0 = all)", 0, 0, NULL, NULL},
    {"train", CFG_STR, "", "PSKV_WORKER_TRAIN", 1, 0, NULL, "sparse-lr: LIBSVM training file", 0,
     0, NULL, NULL},
    {"test", CFG_STR, "", "PSKV_WORKER_TEST", 1, 0, NULL,
     "sparse-lr: LIBSVM test file (default: the training file)", 0, 0, NULL, NULL},
    {"replay-wait", CFG_STR, "", "PSKV_WORKER_REPLAY_WAIT", 1, 0, NULL,
     "replay: halfway, wait (at most 120 s) for this file to exist; admit: for FILE.1 "
     "after admission, FILE.2 after eviction; sparse-bench: FILE.1 after the fill, FILE.2 "
     "after the updates", 0, 0, NULL, NULL},
    /* validation (pskv-evaluator; workers leave the validation set out) */
    {"validation-split", CFG_INT, "0", "PSKV_VALIDATION_SPLIT", 0, 1e9, "images",
     "softmax, mlp, sparse-lr: the last N training images (sparse-lr: examples of --train) "
     "are the validation set: workers leave them out of their shards, pskv-evaluator evaluates on them (0 = none; give workers and "
     "evaluator the same N, e.g. 10000)", 0, 0, NULL, NULL},
    {"freeze-after", CFG_INT, "-1", "PSKV_WORKER_FREEZE_AFTER", -1, 1e12, "steps",
     "softmax, mlp: from this step on push zero gradients (learning rate 0: a planted "
     "plateau for tests; -1 = never)", 0, 0, NULL, NULL},
    {"prefetch", CFG_BOOL, "false", "PSKV_WORKER_PREFETCH", 1, 0, NULL,
     "softmax, mlp, sparse-lr: send the pull for the next step before this step's compute, so "
     "that it travels meanwhile (the weights a step uses are then at most one step older); "
     "applies under --consistency async or ssp:TAU with TAU >= 1, and --sync ps; left unset: on "
     "where it applies, off elsewhere (--prefetch=false turns it off)", 0, 0, NULL, NULL},
    {"print-digests", CFG_BOOL, "false", "PSKV_PRINT_DIGESTS", 1, 0, NULL,
     "softmax, mlp: print the clock and an FNV-1a digest of each bsp pull (workers) or "
     "snapshot (pskv-evaluator); pipeline: of each stage's and layer's final weights", 0, 0,
     NULL, NULL},
    {"save-best", CFG_STR, "", "PSKV_EVALUATOR_SAVE_BEST", 1, 0, NULL,
     "pskv-evaluator: keep the best snapshot here (the --save-model format, with its clock "
     "and metrics in the header)", 0, 0, NULL, NULL},
    {"evaluate", CFG_STR, "", "PSKV_EVALUATOR_EVALUATE", 1, 0, NULL,
     "pskv-evaluator: print the validation and test metrics of this saved model (a "
     "--save-best or --save-model file) and exit, with no job", 0, 0, NULL, NULL},
    {"best-metric", CFG_STR, "val_loss", "PSKV_EVALUATOR_BEST_METRIC", 1, 0, NULL,
     "pskv-evaluator: the best snapshot has the lowest val_loss or the highest val_accuracy "
     "(sparse-lr: or val_auc)", 0, 0, NULL, NULL},
    {"stall-after", CFG_INT, "0", "PSKV_EVALUATOR_STALL_AFTER", 0, 1e12, "evaluations",
     "pskv-evaluator: after this many evaluations evaluate nothing more and report nothing, "
     "staying in the job (its heartbeats go on): a hung evaluator, for tests (0 = never)", 0,
     0, NULL, NULL},
    CFG_END};
