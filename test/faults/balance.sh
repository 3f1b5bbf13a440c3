# Fault tests (sourced by faults.sh): --balance batch (issue 40) when a balanced
# worker dies.

# Kill -9 one of 3 balanced bsp workers mid-run (after the split has moved off
# the slow rank 1): the others finish the job, every survivor drops rank 2 at the
# same clock (the --balance-log's last split gives it 0 and the global batch of
# 48 to ranks 0 and 1), the survivors' last weights agree bit for bit, and the
# model still trains.
tags balance_worker_dies once
f_balance_worker_dies() {
  local d=$TDIR/c i pid rc last
  launch "$d" --servers 1 --workers 3 --worker-opt 1:--slowdown --worker-opt 1:3 -- \
    --app mlp --hidden 64 --epochs 3 --train-limit 4000 --test-limit 500 --batch 16 --seed 2 \
    --consistency bsp --balance batch --balance-log "$d/plan" --print-digests
  wait_joined "$d" 3
  # wait (bounded) for a first re-split, so that the batches were balanced when it dies
  for i in $(seq $((600 * TS))); do
    [ "$(wc -l < "$d/plan" 2>/dev/null || echo 0)" -ge 2 ] && break
    sleep 0.1
  done
  [ "$(wc -l < "$d/plan")" -ge 2 ] || fail "no re-split before the kill: $(cat "$d/plan")"
  kill -KILL "$(cat "$d/worker-2.pid")"
  pid=$(cat "$d/launch.pid")
  wait "$pid"; rc=$?
  # the launcher reports the lowest failing rank: the killed rank 2 (137)
  [ $rc -eq 137 ] || fail "launch status $rc, expected 137 (rank 2 killed, others ok): $(grep -h 'train:' "$d"/worker-*.log | head -n 3)"
  for r in 0 1; do
    grep -q 'final test accuracy\|epoch 3' "$d/worker-$r.log" || fail "worker $r did not finish: $(tail -n 2 "$d/worker-$r.log")"
  done
  grep -q 'balance: step [0-9]*: rank 2 is gone' "$d/worker-0.log" || fail "no line on rank 2's death"
  last=$(tail -n 1 "$d/plan")
  echo "$last" | awk -F'[ ,]' '{ exit !($4 == 0 && $2 + $3 == 48 && $2 > 0 && $3 > 0) }' ||
    fail "the last split does not give rank 2's share to the others: $(tr '\n' ';' < "$d/plan")"
  # every survivor pulled the same weights at the last clock
  local c
  c=$(grep -h 'pulled clock' "$d"/worker-0.log | awk '{print $5}' | tail -n 1)
  [ -n "$c" ] || fail "no digest"
  [ "$(grep -h "pulled clock $c " "$d"/worker-[01].log | awk '{print $7}' | sort -u | wc -l)" -eq 1 ] ||
    fail "the survivors' last digests differ"
  [ "$(grep -h "pulled clock $c " "$d"/worker-[01].log | wc -l)" -eq 2 ] || fail "a survivor lacks clock $c"
  local acc
  acc=$(sed -n 's/.*final test accuracy \([0-9.]*\).*/\1/p' "$d/worker-0.log" | tail -n 1)
  awk -v a="$acc" 'BEGIN { exit !(a + 0 >= 0.6) }' || fail "final accuracy '$acc' after the death"
  echo "split after the death: $last; final accuracy $acc"
}
