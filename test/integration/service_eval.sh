# A service's evaluators (sourced by integration.sh; start_service, group and
# group_ok are service.sh's): pskv-evaluator --group evaluates one worker group,
# at most one per group, and the scheduler's early stopping stops that group only.

# Two softmax groups on one service of 2 servers, each with its own evaluator.
# P's gradients are all zero (--freeze-after 0): its val_loss is flat, so after
# --patience 3 evaluations its workers stop early (exit 0, the line naming the
# group), its evaluator hears it (P would run 1000 epochs otherwise, a minute and
# more). G trains 60 epochs evaluated every 25 (at most 2 evaluations: patience 3
# cannot run out) and finishes on its own; its evaluator's epochs are G's (2
# workers: 32 steps an epoch, so each evaluation's clock is 32 times its epoch). A
# second evaluator for G is refused naming the group; status shows G's early
# stopping on its line, the metrics P's stop.
t_service_evaluators() {
  local mport
  local app=(--app softmax --train-limit 2000 --test-limit 500 --validation-split 1000 --seed 3)
  mport=$(free_port)
  start_service 2 --evaluators 1 --early-stop-metric val_loss --patience 3 --metrics-port "$mport"
  start ev-p "$BIN/pskv-evaluator" --scheduler "$SVC" --group P "${app[@]}" --momentum 0 \
    --eval-every 0.25 --metrics "$TDIR/p.jsonl"
  start ev-g "$BIN/pskv-evaluator" --scheduler "$SVC" --group G "${app[@]}" --eval-every 25 \
    --metrics "$TDIR/g.jsonl"
  wait_line scheduler.log 'evaluator registered: node [0-9]* .* for group G$' 1 60 ||
    fail "G's evaluator did not register: $(tail -n 3 ev-g.log)"
  "$BIN/pskv-evaluator" --scheduler "$SVC" --group G "${app[@]}" --connect-timeout 10 \
    > ev-g2.log 2>&1 && fail "a second evaluator of group G was accepted"
  grep -q 'refused registration: group G: the group.s evaluator is node [0-9]*, alive' ev-g2.log ||
    fail "the second evaluator of G: $(tail -n 2 ev-g2.log)"
  group P 2 p "${app[@]}" --epochs 1000 --eval-every 0 --freeze-after 0 --momentum 0
  group G 2 g "${app[@]}" --epochs 60 --eval-every 0
  group_ok p 2 '^stopped early at epoch [0-9]*: group P: val_loss did not improve by 0 for 3 evaluations$'
  wait_exit "$(cat ev-p.pid)" 30 || fail "P's evaluator exited $?: $(tail -n 2 ev-p.log)"
  grep -q 'the scheduler stopped the job early: group P: val_loss did not improve' ev-p.log ||
    fail "P's evaluator did not hear the stop: $(tail -n 3 ev-p.log)"
  grep -q 'INFO early stopping: group P: val_loss did not improve by 0 for 3 evaluations' \
    scheduler.log || fail "the scheduler did not stop P: $(grep 'early stopping' scheduler.log)"
  if command -v curl > /dev/null; then
    curl -s "http://127.0.0.1:$mport/metrics" > metrics.out || fail "no metrics"
    grep -q '^pskv_group_stopped_early{.*group="P".*} 1$' metrics.out ||
      fail "no pskv_group_stopped_early of P: $(grep early metrics.out)"
  fi
  # G goes on: not stopped, its own evaluations, its line in status while it runs
  if kill -0 "$(cat g-0.pid)" 2>/dev/null; then
    "$BIN/pskvctl" --scheduler "$SVC" status > status.out 2>&1
    grep -q '^group G .* early stopping \(watching\|suspended\)' status.out ||
      grep -q 'group G ended' scheduler.log || fail "status: $(grep '^group' status.out)"
    "$BIN/pskvctl" --scheduler "$SVC" top --count 1 --plain > top.out 2>&1
    grep -q '^group name=G state=running .* early_stop=\(watching\|suspended\)$' top.out ||
      grep -q 'group G ended' scheduler.log || fail "top: $(grep '^group' top.out)"
  fi
  group_ok g 2 '^rank [01] trained 60000 samples$'
  grep -q '^final test accuracy .* after 60 epochs' g-0.log g-1.log || fail "G: no final test accuracy"
  grep -q 'stopped early' g-*.log && fail "group G stopped early: $(grep 'stopped early' g-0.log)"
  wait_exit "$(cat ev-g.pid)" 30 || fail "G's evaluator exited $?: $(tail -n 2 ev-g.log)"
  grep -q '^evaluator: [1-9][0-9]* evaluations' ev-g.log || fail "G's evaluator: $(tail -n 2 ev-g.log)"
  grep -q 'group G: evaluation [0-9]* from node' scheduler.log || fail "no evaluation of G reported"
  # the evaluator's clocks and epochs are its group's (2 workers, 32 steps an epoch)
  [ -s "$TDIR/g.jsonl" ] || fail "G's evaluator wrote no evaluation"
  sed 's/.*"clock":\([0-9]*\),"epoch":\([0-9.]*\),.*/\1 \2/' "$TDIR/g.jsonl" |
    awk '{ d = $1 - 32 * $2; if (d < -0.5 || d > 0.5 || $2 < 25) bad = 1 } END { exit bad }' ||
    fail "G's evaluations are not at clock = 32 x epoch, epoch >= 25: $(cat "$TDIR/g.jsonl")"
  [ "$(wc -l < "$TDIR/g.jsonl")" -le 2 ] || fail "G's evaluator made $(wc -l < "$TDIR/g.jsonl") evaluations"
  shutdown_service
}

# An evaluator killed mid-run does not stall its group (as a job's): the scheduler
# logs it dead and suspends the group's early stopping, the group trains on to its
# end (exit 0: 100 epochs, 5-10 s); a job refuses a named group's evaluator.
t_service_evaluator_dies() {
  local r
  local app=(--app softmax --train-limit 4000 --test-limit 500 --validation-split 1000 --seed 3)
  start_service 1 --evaluators 1 --early-stop-metric val_accuracy --patience 1000
  start ev-k "$BIN/pskv-evaluator" --scheduler "$SVC" --group K "${app[@]}" --eval-every 0
  group K 2 k "${app[@]}" --epochs 100 --eval-every 0
  wait_line ev-k.log '^evaluation 2: ' 1 90 || fail "K's evaluator did not evaluate: $(tail -n 2 ev-k.log)"
  kill -KILL "$(cat ev-k.pid)"
  wait_line scheduler.log 'group K: evaluator node [0-9]* is dead: training goes on; early stopping is suspended' 1 30 ||
    fail "the evaluator's death: $(grep -i evaluator scheduler.log | tail -n 2)"
  group_ok k 2 '^rank [01] trained [0-9]* samples$'
  # K trained on after the death: its end comes later in the scheduler's log
  grep -E 'group K: evaluator node [0-9]* is dead|group K ended' scheduler.log | head -n 1 |
    grep -q 'is dead' || fail "K ended before its evaluator's death was seen"
  grep -q '^final test accuracy .* after 100 epochs' k-0.log k-1.log || fail "K: no final test accuracy"
  grep -q 'stopped early' k-*.log && fail "group K stopped early"
  shutdown_service
  local port
  port=$(free_port)
  start job "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1 --evaluators 1 --join-timeout 30
  "$BIN/pskv-evaluator" --scheduler "127.0.0.1:$port" --group E "${app[@]}" --connect-timeout 10 \
    > job-ev.log 2>&1 && fail "a job accepted an evaluator of group E"
  grep -q 'group E: field group: this scheduler runs one job' job-ev.log ||
    fail "the job's refusal: $(tail -n 2 job-ev.log)"
  kill "$(cat job.pid)"
  wait_exit "$(cat job.pid)" 10 > /dev/null
  no_strays "$TDIR"
}
