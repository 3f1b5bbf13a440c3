#!/usr/bin/env bash
# --balance stages (issue 40): a pipeline's throughput (rank 0's samples_per_s
# over one epoch, evaluation excluded) with the stages re-splitting themselves,
# against the best static split measured in the same sitting. Scenarios, for
# --stages 2 and 3 (--layers has 5 layers): "bad" starts from a poor --split
# (the first stage holding all but S-1 layers), nothing slowed; "slow" starts
# from the default cut and the last stage turns --factor times slower at step
# --after (--slowdown-after). Each round runs, interleaved, every static split
# (every way to cut the layers, under the scenario's slowdown) and the balanced
# run; prints per scenario the median of --runs rounds for each split, the best
# static one, the balanced median and their ratio (target >= 0.9), and the load
# average at the start and the end. A third pair, "none", is the cost of the
# machinery alone: the default cut (by parameters), nothing slowed, static and
# with --balance stages (which should not move), in the same round.
# Usage: scripts/bench-stages.sh [--runs N (3)] [--train-limit N (6400)] [--batch B (64)]
#        [--micro-batches M (8)] [--layers L (784,512,512,512,512,10)] [--factor F (3)]
#        [--after STEPS (30)] [--stages "2 3"]
set -u
here=$(cd "$(dirname "$0")" && pwd)
runs=3 limit=6400 batch=64 micro=8 layers=784,512,512,512,512,10 factor=3 after=30 stagelist="2 3"
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --train-limit) limit=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --micro-batches) micro=$2; shift 2 ;;
    --layers) layers=$2; shift 2 ;;
    --factor) factor=$2; shift 2 ;;
    --after) after=$2; shift 2 ;;
    --stages) stagelist=$2; shift 2 ;;
    *) echo "usage: $0 [--runs N] [--train-limit N] [--batch B] [--micro-batches M] [--layers L] [--factor F] [--after STEPS] [--stages LIST]" >&2
       exit 2 ;;
  esac
done
export OPENBLAS_NUM_THREADS=1
. "$here/bench-lib.sh"
out=$(mktemp -d /tmp/pskv-bench-st-XXXXXX)
trap 'rm -rf "$out"' EXIT
L=$(($(echo "$layers" | tr ',' '\n' | wc -l) - 1))

# splits S: every way to cut L layers into S stages of at least one, as --split lists
splits() {
  local S=$1
  if [ "$S" -eq 2 ]; then
    for a in $(seq 1 $((L - 1))); do echo "$a,$((L - a))"; done
  else
    for a in $(seq 1 $((L - 2))); do
      for b in $(seq 1 $((L - a - 1))); do echo "$a,$b,$((L - a - b))"; done
    done
  fi
}

# one NAME S SCENARIO [WORKER ARGS...]: a run; its samples/s appended to NAME.sps
one() {
  local name=$1 S=$2 sc=$3; shift 3
  local slow=()
  [ "$sc" = slow ] && slow=(--worker-opt "$((S - 1)):--slowdown" --worker-opt "$((S - 1)):$factor"
                            --worker-opt "$((S - 1)):--slowdown-after" --worker-opt "$((S - 1)):$after")
  "$here/launch-local.sh" --servers 1 --workers "$S" --timeout 600 --log-dir "$out/$name-$i" "${slow[@]}" \
    -- --app pipeline --stages "$S" --layers "$layers" --micro-batches "$micro" --batch "$batch" \
    --consistency bsp --train-limit "$limit" --test-limit 500 --epochs 1 \
    --metrics "$out/$name-$i.jsonl" "$@" > "$out/$name-$i.out" 2>&1 ||
    { echo "$name run $i failed: $(tail -n 2 "$out/$name-$i.out")" >&2; exit 1; }
  sed -n 's/.*"samples_per_s":\([0-9.]*\).*/\1/p' "$out/$name-$i.jsonl" | tail -n 1 >> "$out/$name.sps"
  grep -c '"stages_step"' "$out/$name-$i.jsonl" >> "$out/$name.moves"
}

load0=$(cut -d' ' -f1-3 /proc/loadavg)
for i in $(seq "$runs"); do
  for S in $stagelist; do
    bad=$((L - S + 1)); for _ in $(seq 2 "$S"); do bad="$bad,1"; done
    for sc in bad slow; do
      for sp in $(splits "$S"); do one "s$S-$sc-static-$sp" "$S" "$sc" --split "$sp"; done
      if [ "$sc" = bad ]; then one "s$S-$sc-balanced" "$S" "$sc" --split "$bad" --balance stages
      else one "s$S-$sc-balanced" "$S" "$sc" --balance stages; fi
    done
    one "s$S-none-static" "$S" none
    one "s$S-none-balanced" "$S" none --balance stages
  done
done
echo "pipeline layers=$layers micro-batches=$micro batch=$batch train-limit=$limit runs=$runs (bsp, 1 epoch)"
echo "slow: the last stage x$factor from its step $after; bad: --split with the first stage holding all but S-1 layers"
echo "load average at the start $load0, at the end $(cut -d' ' -f1-3 /proc/loadavg)"
for S in $stagelist; do
  for sc in bad slow; do
    best=0 bsp=
    for sp in $(splits "$S"); do
      m=$(median < "$out/s$S-$sc-static-$sp.sps")
      printf '  S=%s %-4s static --split %-6s samples_per_s=%s (runs: %s)\n' "$S" "$sc" "$sp" "$m" \
        "$(tr '\n' ' ' < "$out/s$S-$sc-static-$sp.sps" | sed 's/ $//')"
      awk -v a="$m" -v b="$best" 'BEGIN { exit !(a > b) }' && { best=$m; bsp=$sp; }
    done
    m=$(median < "$out/s$S-$sc-balanced.sps")
    printf 'S=%s %-4s --balance stages samples_per_s=%s (runs: %s; re-splits per run: %s); best static %s (--split %s); ratio %.2f\n' \
      "$S" "$sc" "$m" "$(tr '\n' ' ' < "$out/s$S-$sc-balanced.sps" | sed 's/ $//')" \
      "$(tr '\n' ' ' < "$out/s$S-$sc-balanced.moves" | sed 's/ $//')" "$best" "$bsp" \
      "$(awk -v a="$m" -v b="$best" 'BEGIN { print a / b }')"
  done
  a=$(median < "$out/s$S-none-balanced.sps")
  b=$(median < "$out/s$S-none-static.sps")
  printf 'S=%s none (default cut, nothing slowed) --balance stages samples_per_s=%s (runs: %s; re-splits per run: %s); static %s (runs: %s); ratio %.2f\n' \
    "$S" "$a" "$(tr '\n' ' ' < "$out/s$S-none-balanced.sps" | sed 's/ $//')" \
    "$(tr '\n' ' ' < "$out/s$S-none-balanced.moves" | sed 's/ $//')" "$b" \
    "$(tr '\n' ' ' < "$out/s$S-none-static.sps" | sed 's/ $//')" \
    "$(awk -v a="$a" -v b="$b" 'BEGIN { print a / b }')"
done
