# Fault tests (sourced by faults.sh): the evaluator killed and paused.

# The evaluator killed (-9) or paused (SIGSTOP) mid-job never stops or slows
# training: the scheduler logs it dead and suspends early stopping, status shows
# it dead, and the workers train to the end of their epochs and exit 0.
eval_fault() {
  local sig=$1 d=$TDIR/c js i
  launch "$d" --servers 1 --workers 2 --evaluators 1 \
    --scheduler-opt=--early-stop-metric=val_accuracy \
    --scheduler-opt=--patience=50 --evaluator-opt --metrics="$d/val.jsonl" -- --app mlp \
    --epochs 6 --train-limit 20000 --test-limit 500 --validation-split 1000 --eval-every 0
  wait_joined "$d" 2
  for i in $(seq $((600 * TS))); do
    grep -q '^evaluation 2:' "$d/evaluator.log" 2>/dev/null && break
    sleep 0.1
  done
  grep -q '^evaluation 2:' "$d/evaluator.log" || fail "the evaluator made no 2 evaluations"
  kill "-$sig" "$(cat "$d/evaluator.pid")"
  # async snapshots carry the vector of the workers' clocks they reflect
  grep -q '"worker_clocks":\[[0-9]*,[0-9]*\]}$' "$d/val.jsonl" || fail "no worker clocks: $(head -n 2 "$d/val.jsonl")"
  for i in $(seq $((200 * TS))); do
    kill -0 "$(cat "$d/launch.pid")" 2>/dev/null || fail "the job ended before status showed the evaluator dead"
    js=$(status_json "$d" --timeout 1 2>/dev/null) &&
      grep -q '"role":"evaluator","rank":-1,[^}]*"alive":false' <<< "$js" && break
    sleep 0.1
  done
  grep -q '"role":"evaluator","rank":-1,[^}]*"alive":false' <<< "$js" || fail "status does not show the evaluator dead: $js"
  grep -q '"early_stop":"suspended' <<< "$js" || fail "status does not show early stopping suspended: $js"
  wait "$(cat "$d/launch.pid")" || fail "workers failed: $(tail -n 3 "$d/launch.out")"
  grep -q 'evaluator node [0-9]* is dead: training goes on; early stopping is suspended' "$d/scheduler.log" ||
    fail "the scheduler logged no warning"
  grep -q '^final test accuracy .* after 6 epochs' "$d/worker-0.log" || fail "training did not run to its end"
  grep -q 'stopped early' "$d"/worker-*.log && fail "a worker stopped early"
  [ "$sig" = STOP ] && kill -KILL "$(cat "$d/evaluator.pid")" 2>/dev/null
  echo "training finished with the evaluator $( [ "$sig" = KILL ] && echo killed || echo paused)"
}

tags eval_kill once
f_eval_kill() { eval_fault KILL; }

tags eval_pause once
f_eval_pause() { eval_fault STOP; }
