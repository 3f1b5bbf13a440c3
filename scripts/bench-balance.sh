#!/usr/bin/env bash
# Load-balancing benchmark (issue 40), in the straggler setting of
# bench-consistency.sh: Fashion-MNIST MLP 784-256-10, 1 server, 3 workers, batch 32 a
# worker, SGD lr 0.01 momentum 0.9, one BLAS thread per process, worker 2 three times
# slower (its --slowdown sleeps twice its compute after each step: a slow machine of
# its own, holding none of the shared cores while it waits).
#  1. steady straggler: bsp, bsp --balance batch, --sync allreduce --balance batch,
#     async and ssp:2 (6 epochs: bsp's global batch of 96 takes more epochs than
#     async to 0.85);
#  2. a worker that slows halfway (--slowdown-after half the clocks): bsp and bsp
#     --balance batch, and from the --balance-log the clocks from the slowdown to the
#     first re-split after it (followed), to the re-split from which the slowed
#     worker's batch stays past 90% of its move (settled) and to the last re-split;
#  3. the same global batch at the linear-scaling learning rate (lr 0.03 = 0.01 x 3
#     workers: a bsp clock applies one mean over 96 examples where async applies
#     three of 32 each at lr 0.01): bsp and bsp --balance batch. What balancing can
#     change is the samples a second; the samples needed to reach an accuracy are the
#     consistency model's and the learning rate's, and part 3 shows them apart;
#  4. the linear-scaling rule as a user would run it (Goyal et al. 2017): lr 0.03 with
#     a warm-up of half an epoch (--lr-warmup 0.5) and a cosine decay, balanced and
#     not, and balanced with the decay alone, against async at its own lr 0.01 with
#     the same cosine decay (same epochs);
#  5. async and bsp balanced at their part-4 settings with --shm (values through
#     shared memory: a step's push and pull of the 814 KB table not copied through
#     TCP), where the synchronous clock's transfers weigh most;
#  6. one round trip a step (--pushpull), async and bsp balanced at their part-4
#     settings, and the learning rates around each side's (async lr 0.02, balanced
#     bsp lr 0.04 and 0.05, all with the cosine decay).
# Per setting: wall time to 0.84 and 0.85 test accuracy, the same less rank 0's
# evaluations (train_time: under bsp every worker waits for them), the job's samples
# trained by then, samples/s (median over the run's evaluations), final accuracy, and
# each round's time to 0.85. Every setting runs --repeat times (default 3) in
# interleaved rounds (one run of each per round, so that a change of load hits all
# alike) and the medians are reported: the machine may be shared. `make bench-balance`
# runs scripts/bench-stages.sh after it (--balance stages against the best static split).
# Usage: scripts/bench-balance.sh [--epochs E] [--repeat N] [--out DIR] [--only "LABEL|..."]
set -u
here=$(cd "$(dirname "$0")" && pwd)
epochs=6
repeat=3
out=""
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) epochs=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "usage: $0 [--epochs E] [--repeat N] [--out DIR] [--only \"LABEL|...\"]" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || out=$(mktemp -d /tmp/pskv-bench-balance-XXXXXX)
mkdir -p "$out"
export OPENBLAS_NUM_THREADS=1
fixed=(--batch 32 --lr-schedule const --momentum 0.9)
steps=$((60000 / 96 * epochs)) # the balanced runs' clocks (global batch 96)
half=$((steps / 2))

run() { # run NAME LAUNCH_ARGS... -- WORKER_ARGS...
  local name=$1; shift
  "$here/launch-local.sh" --servers 1 --workers 3 --timeout 900 --log-dir "$out/$name" \
    --scheduler-opt --log-level --scheduler-opt warn --server-opt --log-level --server-opt warn \
    "$@" > /dev/null 2>&1 || { echo "bench-balance: $name failed; logs in $out/$name" >&2; return 1; }
}

# at_acc A FILE: at the first evaluation at or above A, "time train_time samples" (empty: not reached)
at_acc() {
  awk -v want="$1" -F'[:,}]' '{ t = tt = s = a = ""
      for (i = 1; i < NF; i++) { if ($i ~ /"time"/) t = $(i + 1); if ($i ~ /"train_time"/) tt = $(i + 1)
                                 if ($i ~ /"samples"$/) s = $(i + 1); if ($i ~ /"accuracy"/) a = $(i + 1) }
      if (a != "" && a >= want && !done) { printf "%.1f %.1f %.0f\n", t, tt, s; done = 1 } }' "$2"
}

# rate FILE: the median samples/s over the run's evaluations
rate() { grep -o '"samples_per_s":[0-9.]*' "$1" | cut -d: -f2 | median; }

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else print "-" }'; }

# one LABEL SLOW_ARGS -- WORKER_ARGS...: run i of LABEL (i: the round); its figures
# are appended to LABEL's files in $out
one() {
  local label=$1 slow=$2; shift 3
  [ -z "$only" ] || [[ "|$only|" == *"|$label|"* ]] || return 0
  local key=${label//[:+ ().]/-}
  local name=$key-$i f
  # shellcheck disable=SC2086
  run "$name" $slow -- --app mlp --epochs "$epochs" "${fixed[@]}" --eval-every 0.25 \
    --metrics "$out/$name.jsonl" --log-level warn "$@" --balance-log "$out/$name.plan" || return 0
  for f in 84 85; do
    at_acc "0.$f" "$out/$name.jsonl" > "$out/$name.a$f"
    awk '{ print $1 }' "$out/$name.a$f" >> "$out/$key.t$f"
    awk '{ print $2 }' "$out/$name.a$f" >> "$out/$key.tt$f"
    awk '{ print $3 }' "$out/$name.a$f" >> "$out/$key.s$f"
  done
  rate "$out/$name.jsonl" >> "$out/$key.rate"
  grep -o 'final test accuracy [0-9.]*' "$out/$name/worker-0.log" | awk '{print $4}' >> "$out/$key.acc"
  [ -s "$out/$name.a85" ] || echo "-" >> "$out/$key.round"
  [ -s "$out/$name.a85" ] && awk '{ printf "%s\n", $1 }' "$out/$name.a85" >> "$out/$key.round"
  if [ -s "$out/$name.plan" ] && [[ "$slow" == *slowdown-after* ]]; then
    # from the slowdown (clock h): the clocks to the first re-split (followed), to the
    # one from which worker 2's batch stays past 90% of its move from its batch at
    # the slowdown to its last (settled), to the last re-split, and the last split
    awk -F'[ ,]' -v h="$half" '$1 <= h { b0 = $4 } $1 > h { n++; c[n] = $1; b[n] = $4; sp = $2 "," $3 "," $4 }
      END { if (!n) { print "none none none -"; exit }
            t = b0 - 0.9 * (b0 - b[n]); s = n
            for (k = n; k >= 1; k--) { if ((b0 >= b[n] && b[k] <= t) || (b0 < b[n] && b[k] >= t)) s = k; else break }
            print c[1] - h, c[s] - h, c[n] - h, sp }' "$out/$name.plan" >> "$out/$key.settle"
  fi
}

# report LABEL: the medians over the rounds
report() {
  local key=${1//[:+ ().]/-}
  [ -s "$out/$key.acc" ] || { printf '%-34s not run\n' "$1"; return; }
  m() { grep -v '^$' "$out/$key.$1" 2>/dev/null | median; }
  printf '%-34s time_to_0.84_s=%-6s time_to_0.85_s=%-6s train_time_to_0.85_s=%-6s samples_to_0.85=%-8s samples_per_s=%-7s final_accuracy=%-7s rounds_to_0.85=[%s]' \
    "$1" "$(m t84)" "$(m t85)" "$(m tt85)" "$(m s85)" "$(m rate)" "$(m acc)" "$(tr '\n' ' ' < "$out/$key.round" | sed 's/ $//')"
  if [ -s "$out/$key.settle" ]; then
    printf ' clocks_to_follow=%s clocks_to_settle=%s clocks_to_last_resplit=%s last_splits=[%s]' \
      "$(awk '{ print $1 }' "$out/$key.settle" | grep -v none | median)" \
      "$(awk '{ print $2 }' "$out/$key.settle" | grep -v none | median)" \
      "$(awk '{ print $3 }' "$out/$key.settle" | grep -v none | median)" \
      "$(awk '{ print $4 }' "$out/$key.settle" | tr '\n' ' ' | sed 's/ $//')"
  fi
  echo
}

steady="--worker-opt 2:--slowdown --worker-opt 2:3"
late="$steady --worker-opt 2:--slowdown-after --worker-opt 2:$half"
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "$repeat"); do # interleaved rounds: one run of each setting per round
  one "bsp" "$steady" -- --lr 0.01 --consistency bsp
  one "bsp --balance batch" "$steady" -- --lr 0.01 --consistency bsp --balance batch
  one "allreduce --balance batch" "$steady" -- --lr 0.01 --sync allreduce --balance batch
  one "async" "$steady" -- --lr 0.01 --consistency async
  one "ssp:2" "$steady" -- --lr 0.01 --consistency ssp:2
  one "bsp (late)" "$late" -- --lr 0.01 --consistency bsp
  one "bsp --balance batch (late)" "$late" -- --lr 0.01 --consistency bsp --balance batch
  one "bsp lr 0.03" "$steady" -- --lr 0.03 --consistency bsp
  one "bsp --balance batch lr 0.03" "$steady" -- --lr 0.03 --consistency bsp --balance batch
  one "async cosine" "$steady" -- --lr 0.01 --consistency async --lr-schedule cosine
  one "bsp --balance batch lr 0.03 warmup" "$steady" -- --lr 0.03 --consistency bsp --balance batch --lr-warmup 0.5
  one "bsp --balance batch lr 0.03 warmup cosine" "$steady" -- --lr 0.03 --consistency bsp --balance batch --lr-warmup 0.5 --lr-schedule cosine
  one "bsp --balance batch lr 0.03 cosine" "$steady" -- --lr 0.03 --consistency bsp --balance batch --lr-schedule cosine
  one "bsp lr 0.03 warmup cosine" "$steady" -- --lr 0.03 --consistency bsp --lr-warmup 0.5 --lr-schedule cosine
  one "async cosine shm" "$steady" -- --lr 0.01 --consistency async --lr-schedule cosine --shm
  one "bsp --balance batch lr 0.03 warmup cosine shm" "$steady" -- --lr 0.03 --consistency bsp --balance batch --lr-warmup 0.5 --lr-schedule cosine --shm
  one "async cosine pushpull" "$steady" -- --lr 0.01 --consistency async --lr-schedule cosine --pushpull
  one "async lr 0.02 cosine" "$steady" -- --lr 0.02 --consistency async --lr-schedule cosine
  one "bsp --balance batch lr 0.03 cosine pushpull" "$steady" -- --lr 0.03 --consistency bsp --balance batch --lr-schedule cosine --pushpull
  one "bsp --balance batch lr 0.04 cosine" "$steady" -- --lr 0.04 --consistency bsp --balance batch --lr-schedule cosine
  one "bsp --balance batch lr 0.05 cosine" "$steady" -- --lr 0.05 --consistency bsp --balance batch --lr-schedule cosine
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== steady straggler: worker 2 is 3x slower; $epochs epochs, lr 0.01, median of $repeat interleaved rounds"
for l in "bsp" "bsp --balance batch" "allreduce --balance batch" "async" "ssp:2"; do report "$l"; done
echo "== worker 2 slows to 3x at clock $half of $steps (clocks_to_follow: to the first re-split after it; clocks_to_settle: until its batch stays past 90% of its move)"
for l in "bsp (late)" "bsp --balance batch (late)"; do report "$l"; done
echo "== the synchronous global batch of 96 at the linear-scaling lr 0.03 (against async's at lr 0.01 above)"
for l in "bsp lr 0.03" "bsp --balance batch lr 0.03"; do report "$l"; done
echo "== a decaying schedule and the warm-up of the linear-scaling rule (async at its own lr 0.01, cosine decay)"
for l in "async cosine" "bsp --balance batch lr 0.03 warmup" "bsp --balance batch lr 0.03 warmup cosine" "bsp --balance batch lr 0.03 cosine" "bsp lr 0.03 warmup cosine"; do report "$l"; done
echo "== the same with values through shared memory (--shm: the pulls and pushes of 814 KB not copied through TCP)"
for l in "async cosine shm" "bsp --balance batch lr 0.03 warmup cosine shm"; do report "$l"; done
echo "== one round trip a step (--pushpull: push, clock and the weights after the clock closed in one pskv_pushpull), and the learning rates around each side's"
for l in "async cosine pushpull" "async lr 0.02 cosine" "bsp --balance batch lr 0.03 cosine pushpull" "bsp --balance batch lr 0.04 cosine" "bsp --balance batch lr 0.05 cosine"; do report "$l"; done
echo "logs in $out"
