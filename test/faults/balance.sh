# Fault tests (sourced by faults.sh): --balance batch (issue 40) when a balanced
# worker dies.

# Kill -9 one of 3 balanced bsp workers mid-run (after the split has moved off
# the slow rank 1), then start a new worker with its --rank, as under bsp without
# balancing: the two others drop rank 2 at the same clock (a --balance-log split
# gives it 0 and the global batch of 48 to ranks 0 and 1), then take it back (a
# later split gives it a share again, the batches even among the three and moving
# off rank 1 again), every worker finishes, the three agree on the last weights
# bit for bit, the new worker trained, and the model still trains.
BAL_ARGS="--app mlp --hidden 128 --epochs 20 --train-limit 2000 --test-limit 500 --batch 16 --seed 2 --consistency bsp --balance batch --print-digests"
tags balance_worker_dies once
f_balance_worker_dies() {
  local d=$TDIR/c i pid rc last npid
  # shellcheck disable=SC2086
  launch "$d" --servers 1 --workers 3 --worker-opt 1:--slowdown --worker-opt 1:3 -- \
    $BAL_ARGS --balance-log "$d/plan"
  wait_joined "$d" 3
  # wait (bounded) for a first re-split, so that the batches were balanced when it dies
  for i in $(seq $((600 * TS))); do
    [ "$(wc -l < "$d/plan" 2>/dev/null || echo 0)" -ge 2 ] && break
    sleep 0.02
  done
  [ "$(wc -l < "$d/plan")" -ge 2 ] || fail "no re-split before the kill: $(cat "$d/plan")"
  kill -KILL "$(cat "$d/worker-2.pid")"
  for i in $(seq $((100 * TS))); do grep -q 'rank 2 .*marked dead' "$d/scheduler.log" && break; sleep 0.05; done
  # shellcheck disable=SC2086
  "$BIN/pskv-worker" --scheduler "127.0.0.1:$(sched_port "$d")" --rank 2 $BAL_ARGS \
    --balance-log "$d/plan" > "$d/new.log" 2>&1 &
  npid=$!
  wait_exit_ok "$npid" "the worker that took rank 2 over"
  pid=$(cat "$d/launch.pid")
  wait "$pid"; rc=$?
  # the launcher reports the lowest failing rank: the killed rank 2 (137)
  [ $rc -eq 137 ] || fail "launch status $rc, expected 137 (rank 2 killed, others ok): $(grep -h 'train:' "$d"/worker-*.log | head -n 3)"
  for r in 0 1; do
    grep -q 'final test accuracy\|epoch 20' "$d/worker-$r.log" || fail "worker $r did not finish: $(tail -n 2 "$d/worker-$r.log")"
  done
  grep -q 'balance: step [0-9]*: rank 2 is gone' "$d/worker-0.log" ||
    fail "no line on rank 2's death (the job may have ended first): $(grep -h '^balance' "$d/worker-0.log" | tail -n 3)"
  grep -q 'balance: step [0-9]*: rank 2 taken back' "$d/worker-0.log" ||
    fail "no line on rank 2 taken back: $(grep -h 'balance\|joined' "$d/worker-0.log" "$d/new.log" | tail -n 4)"
  # a split without rank 2 (the global batch of 48 to ranks 0 and 1), then one with it
  awk -F'[ ,]' 'gone && $4 > 0 && $2 + $3 + $4 == 48 { back = 1 }
                $4 == 0 && $2 + $3 == 48 && $2 > 0 && $3 > 0 { gone = 1 }
                END { exit !back }' "$d/plan" ||
    fail "no split gave rank 2's share to the others and then back: $(tr '\n' ';' < "$d/plan")"
  last=$(tail -n 1 "$d/plan")
  # every worker pulled the same weights at the last clock
  local c
  c=$(grep -h 'pulled clock' "$d"/worker-0.log | awk '{print $5}' | tail -n 1)
  [ -n "$c" ] || fail "no digest"
  [ "$(grep -h "pulled clock $c " "$d"/worker-[01].log "$d/new.log" | awk '{print $7}' | sort -u | wc -l)" -eq 1 ] ||
    fail "the workers' last digests differ"
  [ "$(grep -h "pulled clock $c " "$d"/worker-[01].log "$d/new.log" | wc -l)" -eq 3 ] || fail "a worker lacks clock $c"
  local n
  n=$(sed -n 's/^rank 2 trained \([0-9]*\) samples.*/\1/p' "$d/new.log")
  [ "${n:-0}" -gt 0 ] || fail "the new rank 2 trained no samples: $(grep -h 'train' "$d/new.log" | tail -n 2)"
  local acc
  acc=$(sed -n 's/.*final test accuracy \([0-9.]*\).*/\1/p' "$d/worker-0.log" | tail -n 1)
  awk -v a="$acc" 'BEGIN { exit !(a + 0 >= 0.6) }' || fail "final accuracy '$acc' after the death"
  echo "$(grep -h 'rank 2 is gone\|rank 2 taken back' "$d/worker-0.log" | cut -c1-60 | tr '\n' ';') last split $last; the new rank 2 trained $n samples; final accuracy $acc"
}
