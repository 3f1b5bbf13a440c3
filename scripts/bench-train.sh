#!/usr/bin/env bash
# Training benchmark: MLP 784-256-10 on Fashion-MNIST, 32 examples per worker per
# step, 5 epochs, 1 server + 2 workers, one BLAS thread per process, one push and
# one pull per step; the trainer's own defaults otherwise (sgd, momentum 0.9, lr
# 0.0075 decaying linearly to 0 over the run: worker/apps/apptab.c), as a user gets
# them (until 2026-11-30 it ran lr 0.01 const, DDP's settings, which left the
# 5th epoch's accuracy at 0.86-0.87 run to run).
# Each entry of --models (default "async async+noprefetch async+shm bsp local") is a
# consistency model at the trainer's defaults (since 2026-11-30 these include
# --prefetch under async and ssp:TAU >= 1: the next step's pull sent before this
# step's compute; "+prefetch" says so explicitly, "+noprefetch" turns it off with
# --prefetch=false), "+pushpull" the trainer's --pushpull (one pskv_pushpull a step,
# into a view with prefetch; the trainer's default with prefetch and +shm or
# without replicas), "+nopushpull" --pushpull=false (push then pull),
# "+shm" the workers' --shm (values through shared memory, not
# loopback TCP) and "+FILTER" a wire filter (e.g. async+prefetch+int8), or
# "local": --sync local, the same training with no communication a step (each
# worker applies its own gradient to its own weights), the compute-only ceiling, or
# "allreduce": --sync allreduce (the mean gradient by pskv_allreduce, the servers
# holding a copy). Python (Debian's python3-torch): "python" is the same training
# from Python, python/examples/mlp_fmnist.py through pskv.torch.DistributedOptimizer
# (async, prefetch, shm; global batch 64), launched by python3 -m pskv.launch;
# "torch-floor" is python/bench/floor_mlp.py, the same torch model, data and batch
# in 2 processes x 1 thread with no communication at all (the samples/s no
# torch-based data-parallel trainer here can exceed), "torch-floor-loop" and
# "torch-floor-flat" its variants (the example's exact loop; weights and
# gradients in flat buffers), "torch-floor-ftz" with denormals flushed to zero. The runs alternate (run 1 of every
# model, then run 2 ...), so that the load of a shared machine spreads over all;
# with Debian's python3-torch installed, each round also runs PyTorch DDP (gloo,
# 2 ranks x 1 thread, global batch 64, its own settings: SGD lr 0.01 const,
# momentum 0.9) from ../shared/reference ($PSKV_REFERENCE
# when the checkout is elsewhere, e.g. a git worktree).
# Per run: samples/s (the job's, evaluation excluded), test accuracy, waiting
# fraction (the mean of the workers'); per model the median run (by samples/s),
# the median waiting fraction, and its samples/s over DDP's and the ceiling's
# (and, with torch-floor among the models, over the torch floor's: of_torch_floor).
# With "local" among the models each round also times the raw ZeroMQ echo of the
# model's bytes (pskv-zmq-rtt --size 814120 --own-io: a gradient one way, the
# weights back, each side its own I/O thread as two processes have) and the end
# prints the transport floor over TCP: an estimate of the samples/s no trainer that
# sends each step's fp32 gradient and receives the weights through ZeroMQ over
# loopback TCP passes on this machine, nproc / (CPU a sample of compute + CPU of one
# echo / 32), the compute's CPU a sample being the compute-only ceiling's (2 workers,
# each a core, the update included). docs/benchmarks.md, "The transport's CPU over
# TCP". Beside it, "raw tcp floor": the same with the kernel's own cost of the
# step's bytes (pskv-tcp-floor --size 814120: plain blocking send and recv between
# two processes, no messaging library) in place of the ZeroMQ echo's: what a
# trainer with a transport of its own, not ZeroMQ, could reach at best.
# --estimate: before each run of a pskv model, the same job with --estimate (it
# times a fifth of the steps, at most 400, and predicts the job's wall time); the
# run's line gains predicted=, wall= (the real run's "job wall time") and
# est_error=(predicted - wall) / wall, and the end the median |error| per model.
# --servers S (default 1) and --replicas R (default 1) set the cluster; the scheduler
# declares a node dead after 5 s of silence (not 0.5 s), so that a process starved
# for a moment on a loaded machine does not end the run.
# Usage: scripts/bench-train.sh [--runs N] [--epochs E] [--models "M..."] [--no-peer]
#                               [--servers S] [--replicas R]
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
. "$here/bench-lib.sh"
runs=3 epochs=5 peer=1 models="async async+noprefetch async+shm bsp local" servers=1 replicas=1 est=0
usage="usage: $0 [--runs N] [--epochs E] [--models \"async async+noprefetch async+shm bsp local\"] [--no-peer] [--servers S] [--replicas R] [--estimate]"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --no-peer) peer=0; shift ;;
    --estimate) est=1; shift ;;
    --models) models=$2; shift 2 ;;
    --servers) servers=$2; shift 2 ;;
    --replicas) replicas=$2; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
for m in $models; do
  case "${m%%+*}" in
    async|bsp|ssp:[0-9]*|local) ;;
    python|torch-floor|torch-floor-loop|torch-floor-flat|torch-floor-ftz)
      [ "$m" = "${m%%+*}" ] || { echo "bench-train: model '$m' takes no +options" >&2; exit 2; }
      /usr/bin/python3 -c 'import torch' 2>/dev/null ||
        { echo "bench-train: model '$m' needs Debian's python3-torch" >&2; exit 2; } ;;
    *) echo "bench-train: unknown model '$m' (async, bsp, ssp:TAU, local, each with +prefetch, +noprefetch or +FILTER; python, torch-floor, torch-floor-loop, torch-floor-flat, torch-floor-ftz)" >&2; exit 2 ;;
  esac
done
ddp=0
ref=${PSKV_REFERENCE:-$top/../shared/reference}
if [ $peer -eq 1 ] && /usr/bin/python3 -c 'import torch' 2>/dev/null && [ -f "$ref/tddp.py" ]; then
  ddp=1
fi
export OPENBLAS_NUM_THREADS=1
out=$(mktemp -d /tmp/pskv-bench-train-XXXXXX)
trap 'rm -rf "$out"' EXIT
: > "$out/runs"

# run_model MODEL RUN: one training job; appends its line to $out/runs.
run_model() {
  local m=$1 r=$2 d="$out/${1//[:+]/_}-$2" flags=() x
  case "${m%%+*}" in
    local) flags=(--sync local --copy-every 1000000000) ;;
    allreduce) flags=(--sync allreduce) ;;
    *) flags=(--consistency "${m%%+*}") ;;
  esac
  IFS=+ read -r -a extra <<< "$m"
  for x in "${extra[@]:1}"; do
    case "$x" in
      prefetch) flags+=(--prefetch) ;;
      noprefetch) flags+=(--prefetch=false) ;;
      pushpull) flags+=(--pushpull) ;;
      nopushpull) flags+=(--pushpull=false) ;;
      shm) flags+=(--shm) ;;
      *) flags+=(--filter "$x") ;;
    esac
  done
  mkdir -p "$d"
  local job=(--servers "$servers" --workers 2 --timeout 900
    --scheduler-opt --replicas --scheduler-opt "$replicas"
    --scheduler-opt --log-level --scheduler-opt warn --server-opt --log-level --server-opt warn
    -- --app mlp --epochs "$epochs" --batch 32 --log-level warn "${flags[@]}") pred=
  if [ $est -eq 1 ] && [ "${m%%+*}" != local ]; then
    "$here/launch-local.sh" --log-dir "$d/estimate" "${job[@]}" --estimate > /dev/null 2>&1 ||
      { echo "bench-train: $m run $r: --estimate failed" >&2; tail -n 3 "$d"/estimate/worker-0.log >&2; exit 1; }
    pred=$(sed -n 's/.*estimate: predicted wall time \([0-9.]*\).*/\1/p' "$d/estimate/worker-0.log")
  fi
  cpu_sampler "$d" & local sampler=$!
  "$here/launch-local.sh" --log-dir "$d" "${job[@]}" --metrics "$d/metrics.jsonl" > /dev/null 2>&1 ||
    { echo "bench-train: $m run $r failed" >&2; tail -n 3 "$d"/worker-*.log >&2; exit 1; }
  wait "$sampler"
  local wall estf=
  wall=$(sed -n 's/.*job wall time \([0-9.]*\).*/\1/p' "$d/worker-0.log" | head -n 1)
  [ -n "$pred" ] && [ -n "$wall" ] &&
    estf=$(awk -v p="$pred" -v w="$wall" 'BEGIN {printf " predicted=%s wall=%s est_error=%.3f", p, w, (p - w) / w}')
  local wf fl
  wf=$(sed -n 's/^rank [0-9]* waiting fraction \([0-9.]*\) .*/\1/p' "$d"/worker-*.log |
       awk '{s += $1; n++} END {if (n) printf "%.4f", s / n; else print "-"}')
  fl=$(floor_of "$d")
  # whole-run rate: the job's samples over its training time (evaluation excluded):
  # each line covers about one epoch, so the rate is the harmonic mean of the lines'
  awk -v r="$r" -v e="$epochs" -v m="$m" -v wf="$wf" -v fl="$fl" 'BEGIN{FS="[:,}]"} {for(i=1;i<NF;i++){if($i~/"samples_per_s"/)inv+=1/$(i+1); if($i~/"accuracy"/)a=$(i+1)}; n++} END {printf "model=%s run=%d epochs=%d samples_per_s=%.0f accuracy=%.4f waiting=%s floor=%s%s\n", m, r, e, n/inv, a, wf, fl, ef}' \
    ef="$estf" "$d/metrics.jsonl" | tee -a "$out/runs"
}

# run_py MODEL RUN: python (pskv from Python) or torch-floor[-loop|-flat]; appends
# its line (both print "result {json}" with the whole run's samples/s and accuracy).
run_py() {
  local m=$1 r=$2 d="$out/$1-$2" cmd wf
  case "$m" in
    python) cmd=(/usr/bin/python3 -m pskv.launch --servers "$servers" --workers 2 --timeout 900
                 "--scheduler-arg=--replicas" "--scheduler-arg=$replicas" --
                 /usr/bin/python3 "$top/python/examples/mlp_fmnist.py" --epochs "$epochs"
                 --lr 0.01 --momentum 0.9 --batch 64) ;;
    *) local v=${m#torch-floor}
       v=${v#-}
       cmd=(/usr/bin/python3 "$top/python/bench/floor_mlp.py" --epochs "$epochs" --lr 0.01
            --momentum 0.9 --batch 64)
       if [ "$v" = ftz ]; then cmd+=(--flush-denormal); else cmd+=(--variant "${v:-plain}"); fi ;;
  esac
  mkdir -p "$d"
  ( cd "$d" && PYTHONPATH="$top/python" timeout 900 "${cmd[@]}" ) > "$d/out" 2>&1 &&
    grep -q '^result ' "$d/out" ||
    { echo "bench-train: $m run $r failed:" >&2; tail -n 5 "$d/out" >&2; exit 1; }
  wf=$(sed -n 's/^rank [0-9]* step .* waiting fraction \([0-9.]*\)$/\1/p' "$d/out" |
       awk '{s += $1; n++} END {if (n) printf "%.4f", s / n; else print "-"}')
  grep '^rank [0-9]* \(step\|cpu per step\) ' "$d/out" > "$d/steps"
  grep '^result ' "$d/out" | tail -n 1 | sed 's/^result //' |
    /usr/bin/python3 -c 'import json, sys; j = json.load(sys.stdin); print("%.0f %.4f" % (j["sps"], j["acc"]))' |
    awk -v r="$r" -v e="$epochs" -v m="$m" -v wf="$wf" '{printf "model=%s run=%d epochs=%d samples_per_s=%s accuracy=%s waiting=%s floor=-\n", m, r, e, $1, $2, wf}' |
    tee -a "$out/runs"
}

# run_ddp RUN: PyTorch DDP on the same model and data; appends its line.
run_ddp() {
  local d="$out/ddp-$1" line
  mkdir -p "$d"
  ( cd "$d" && PYTHONPATH="$ref" timeout 900 /usr/bin/python3 \
      "$ref/tddp.py" 0.01 "$epochs" 64 ) > "$d/out" 2>&1
  line=$(grep '^total' "$d/out") ||
    { echo "bench-train: ddp run $1 failed:" >&2; tail -n 5 "$d/out" >&2; exit 1; }
  # "total train T s avg S samples/s final acc A"
  awk -v r="$1" -v e="$epochs" '{for(i=1;i<=NF;i++){if($i=="avg")s=$(i+1); if($i=="acc")a=$(i+1)}} END {printf "model=ddp run=%d epochs=%d samples_per_s=%.0f accuracy=%.4f waiting=-\n", r, e, s, a}' \
    <<< "$line" | tee -a "$out/runs"
}

for r in $(seq "$runs"); do
  for m in $models; do
    case "$m" in
      python|torch-floor*) run_py "$m" "$r" ;;
      *) run_model "$m" "$r" ;;
    esac
  done
  [ $ddp -eq 1 ] && run_ddp "$r"
  case " $models " in
    *" local "*) "$top/build/bin/pskv-zmq-rtt" --size 814120 --reps 300 --own-io | tee -a "$out/echo"
                 "$top/build/bin/pskv-tcp-floor" --size 814120 | tee -a "$out/rawtcp" ;;
  esac
done
[ $ddp -eq 1 ] || echo "ddp: skipped (needs Debian's python3-torch and $ref/tddp.py; or --no-peer)"

field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
rate_of() { grep "^model=$1 " "$out/runs" | field samples_per_s | median; }
ddp_rate=$([ $ddp -eq 1 ] && rate_of ddp || echo -)
ceiling=$(case " $models " in *" local "*) rate_of local ;; *) echo - ;; esac)
tfloor=$(case " $models " in *" torch-floor "*) rate_of torch-floor ;; *) echo - ;; esac)
echo "medians over $runs runs (ddp: $ddp_rate samples/s, compute-only ceiling: $ceiling samples/s, torch floor: $tfloor samples/s):"
for m in $models $([ $ddp -eq 1 ] && echo ddp); do
  med=$(grep "^model=$m " "$out/runs" | sort -t= -k5 -g | awk -v n="$runs" 'NR==int((n+1)/2)')
  wf=$(grep "^model=$m " "$out/runs" | field waiting | grep -v '^-$' | median)
  fl=$(grep "^model=$m " "$out/runs" | field floor | grep -v '^-$' | median)
  rate=$(field samples_per_s <<< "$med")
  awk -v m="$m" -v s="$rate" -v a="$(field accuracy <<< "$med")" -v w="$wf" -v f="${fl:--}" -v d="$ddp_rate" -v c="$ceiling" -v t="$tfloor" \
    'BEGIN {printf "  %-16s samples_per_s=%s accuracy=%s waiting=%s floor=%s", m, s, a, w, f;
            if (d != "-" && d > 0) printf " x_ddp=%.2f", s / d;
            if (c != "-" && c > 0) printf " of_ceiling=%.2f", s / c;
            if (t != "-" && t > 0 && m !~ /^torch-floor/) printf " of_torch_floor=%.2f", s / t; printf "\n"}'
  [ "$m" = ddp ] && continue
  case "$m" in
    python|torch-floor*) sed 's/^/    /' "$out/$m-$(field run <<< "$med")/steps"; continue ;;
  esac
  mr=$(field run <<< "$med")
  d="$out/${m//[:+]/_}-$mr"
  grep -h 'step time\|waiting fraction\|cpu: ' "$d"/worker-*.log | sed 's/^/    /'
done
if [ $est -eq 1 ]; then
  for m in $models; do
    e=$(grep "^model=$m " "$out/runs" | field est_error | awk '{print ($1 < 0 ? -$1 : $1)}' | median)
    [ "$e" != - ] && echo "estimate: $m median |error| $e over $(grep -c "^model=$m .*est_error=" "$out/runs") runs"
  done
fi
# print_floor LABEL FILE WHAT: nproc / (CPU a sample of compute + FILE's median
# cpu_us / 32), the ceiling at most, and over DDP's rate.
print_floor() {
  [ -s "$2" ] && [ "$ceiling" != - ] || return 0
  awk -v c="$ceiling" -v e="$(field cpu_us < "$2" | median)" -v n="$(nproc)" -v d="$ddp_rate" \
      -v l="$1" -v what="$3" \
    'BEGIN {w = n < 2 ? n : 2; f = n / (w / c + e * 1e-6 / 32); if (f > c) f = c;
            printf "%s: %.0f samples/s (ceiling %s, %s of 814120 bytes %.1f us of CPU, %d cores)", l, f, c, what, e, n;
            if (d != "-" && d > 0) printf " x_ddp=%.2f", f / d; printf "\n"}'
}
print_floor "tcp floor" "$out/echo" echo
print_floor "raw tcp floor" "$out/rawtcp" "plain TCP round trip"
if [ "$tfloor" != - ] && case " $models " in *" python "*) true ;; *) false ;; esac; then
  awk -v p="$(rate_of python)" -v t="$tfloor" -v d="$ddp_rate" \
    'BEGIN {printf "python: pskv %s, torch floor %s, ddp %s samples/s", p, t, d;
            if (d != "-" && d > 0) printf "; pskv/ddp=%.2f floor/ddp=%.2f", p / d, t / d;
            printf " pskv/floor=%.2f\n", p / t}'
fi
