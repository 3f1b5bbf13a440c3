# Evaluator and early-stopping tests (sourced by integration.sh): pskv-evaluator
# beside real workers, the scheduler's early stopping on a planted plateau, the
# bsp snapshot against what a worker pulls, the best model file, bad flags. Each
# function runs in its own test directory ($TDIR) under run_test's time-out.

# A planted plateau: every gradient is zero from step 120 on (--freeze-after), so
# val_loss is flat from the first snapshot at clock 120 or later. With patience 3
# the scheduler stops the job within patience + 1 evaluations of the plateau; every
# process exits 0, the samples counted in the job's `sum` table equal the sum of
# what each worker trained, the evaluator's bsp snapshots equal bit for bit what a
# worker pulled at the same clock, and the best model file reloads (pskv-evaluator
# --evaluate, and a job whose workers start from it with --init-from) to the
# validation metrics the evaluator reported.
t_eval_early_stop() {
  local freeze=120 patience=3 d=$TDIR/logs
  local common=(--app softmax --consistency bsp --epochs 200 --train-limit 2000 --test-limit 500
                --validation-split 1000 --eval-every 0.25 --freeze-after $freeze --momentum 0
                --print-digests --seed 3)
  "$LAUNCH" --servers 1 --workers 2 --evaluators 1 --timeout 150 --log-dir "$d" \
    --scheduler-opt --early-stop-metric=val_loss --scheduler-opt --patience=$patience \
    --evaluator-opt --save-best="$TDIR/best.model" --evaluator-opt --metrics="$TDIR/val.jsonl" \
    -- "${common[@]}" > launch.out 2>&1 ||
    fail "launch exited $?: $(tail -n 5 launch.out)"
  # the workers' output: the exact line, and each one's samples
  local r sum=0 n
  for r in 0 1; do
    grep -qx "stopped early at epoch [0-9]*: val_loss did not improve by 0 for $patience evaluations" \
      "$d/worker-$r.log" || fail "worker $r: $(grep -i stopped "$d/worker-$r.log")"
    n=$(sed -n "s/^rank $r trained \([0-9]*\) samples$/\1/p" "$d/worker-$r.log")
    [ -n "$n" ] || fail "worker $r did not say what it trained"
    sum=$((sum + n))
  done
  grep -q "^samples trained $sum (every worker's, from the sum table)$" "$d/worker-0.log" ||
    fail "sum table: $(grep 'samples trained' "$d/worker-0.log"), the workers trained $sum"
  grep -q '^final test accuracy' "$d/worker-0.log" || fail "no final test accuracy"
  # every process exits 0: workers (launch status), scheduler, server, evaluator
  grep -q 'exited with status [1-9]' launch.out && fail "a daemon failed: $(grep 'exited with status' launch.out)"
  grep -q 'evaluator (pid [0-9]*) exited with status 0$' launch.out || fail "evaluator: $(grep evaluator launch.out)"
  grep -q 'job .* done' "$d/scheduler.log" || fail "the scheduler did not end the job"
  grep -q 'stopped by the scheduler' "$d/server-0.log" || fail "the server was not stopped in order"
  grep -q 'the scheduler stopped the job early' "$d/evaluator.log" || fail "the evaluator did not hear the stop"
  no_strays "$d"
  # within patience + 1 evaluations of the plateau (the scheduler's count)
  local plateau
  plateau=$(sed -n '/early stopping:/q;s/.*evaluation [0-9]* from node [0-9]*: clock \([0-9]*\) .*/\1/p' \
    "$d/scheduler.log" | awk -v f=$freeze '$1 >= f' | wc -l)
  [ "$plateau" -ge 1 ] && [ "$plateau" -le $((patience + 1)) ] ||
    fail "$plateau evaluations of the plateau before the stop (patience $patience)"
  echo "stopped after $plateau evaluations of the plateau"
  # --eval-every 0.25: at most one evaluation per quarter epoch (of the slowest worker)
  sed 's/.*"epoch":\([0-9.]*\),.*/\1/' "$TDIR/val.jsonl" |
    awk '{ q = int($1 / 0.25 + 1e-6) } NR > 1 && q <= prev { print "epoch " $1 " in the quarter of the one before"; bad = 1 }
         { prev = q } END { exit bad }' || fail "two evaluations in one --eval-every 0.25"
  # bsp snapshots: bit for bit what worker 0 pulled at the same clock
  local c x same=0 w
  while read -r c x; do
    w=$(sed -n "s/^rank 0 pulled clock $c digest \([0-9a-f]*\)$/\1/p" "$d/worker-0.log")
    [ -z "$w" ] && continue
    [ "$w" = "$x" ] || fail "clock $c: the evaluator's snapshot digest $x, worker 0 pulled $w"
    same=$((same + 1))
  done < <(sed -n 's/^evaluator snapshot clock \([0-9]*\) digest \([0-9a-f]*\)$/\1 \2/p' "$d/evaluator.log")
  [ $same -ge 1 ] || fail "no snapshot clock that worker 0 also pulled"
  echo "$same snapshots equal to worker 0's pulls bit for bit"
  # the best model file: reloads to the reported metrics exactly
  [ -s "$TDIR/best.model" ] || fail "no --save-best file"
  local best got
  best=$(sort -t: -k1 "$TDIR/val.jsonl" | awk -F'"val_loss":' '{split($2, a, ","); print a[1], $0}' |
    sort -g | head -n 1 | sed 's/.*"val_loss":\([^,]*\),"val_accuracy":\([^,]*\),.*/\1 \2/')
  got=$("$BIN/pskv-evaluator" "${common[@]}" --evaluate "$TDIR/best.model" |
    sed -n 's/^validation of .*: val_loss \([^ ]*\) val_accuracy \([^ ]*\)$/\1 \2/p')
  [ -n "$got" ] || fail "pskv-evaluator --evaluate printed no metrics"
  [ "$got" = "$best" ] || fail "the best model reloads to '$got'; the evaluator reported '$best'"
  echo "best model reloads to val_loss val_accuracy $got"
  # and through a job: workers start from it (--init-from) and never move it
  # (--freeze-after 0); the evaluator's last snapshot has the same metrics (the job
  # runs until early stopping, so the evaluator is sure to evaluate)
  "$LAUNCH" --servers 1 --workers 2 --evaluators 1 --timeout 100 --log-dir "$TDIR/again" \
    --scheduler-opt --early-stop-metric=val_loss \
    --scheduler-opt --patience=2 --evaluator-opt --metrics="$TDIR/again.jsonl" -- \
    --app softmax --consistency bsp --epochs 1000 --train-limit 2000 --test-limit 500 \
    --validation-split 1000 --eval-every 0.25 --freeze-after 0 --momentum 0 --seed 3 \
    --init-from "$TDIR/best.model" > again.out 2>&1 || fail "the job from the best model exited $?"
  got=$(tail -n 1 "$TDIR/again.jsonl" | sed 's/.*"val_loss":\([^,]*\),"val_accuracy":\([^,]*\),.*/\1 \2/')
  [ "$got" = "$best" ] || fail "a job from the best model evaluates to '$got'; the evaluator reported '$best'"
  echo "a job from the best model evaluates to $got"
}

# Bad flags: each refused with exit 2, naming the flag.
t_eval_bad_flags() {
  local rc
  refused() { # refused FLAG CMD...: CMD exits 2 and its error names FLAG
    local flag=$1; shift
    "$@" > out 2>&1; rc=$?
    [ $rc -eq 2 ] || fail "$*: exit $rc, expected 2: $(cat out)"
    grep -q -- "$flag" out || fail "$*: the error does not name $flag: $(cat out)"
  }
  refused --patience "$BIN/pskv-scheduler" --port 0 --evaluators 1 --early-stop-metric val_loss --patience 0
  refused --early-stop-metric "$BIN/pskv-scheduler" --port 0 --evaluators 1 --early-stop-metric loss
  refused --evaluators "$BIN/pskv-scheduler" --port 0 --early-stop-metric val_accuracy
  refused --evaluators "$BIN/pskv-scheduler" --port 0 --evaluators 2
  refused --app "$BIN/pskv-evaluator" --app bench --validation-split 10
  refused --save-best "$BIN/pskv-evaluator" --app sparse-lr --train x.svm --validation-split 10 --save-best /nonexistent/b.model
  refused --best-metric "$BIN/pskv-evaluator" --app mlp --validation-split 10 --best-metric val_auc
  refused --validation-split "$BIN/pskv-evaluator" --app softmax
  refused --save-best "$BIN/pskv-evaluator" --app mlp --validation-split 10 --save-best /nonexistent/dir/best.model
  mkdir ro && chmod 555 ro
  [ -w ro ] || refused --save-best "$BIN/pskv-evaluator" --app mlp --validation-split 10 --save-best ro/best.model
  refused --best-metric "$BIN/pskv-evaluator" --app mlp --validation-split 10 --best-metric auc
  refused --save-best "$BIN/pskv-worker" --app mlp --save-best best.model
  refused --evaluate "$BIN/pskv-worker" --app mlp --evaluate best.model
  # a split that leaves a worker no data: 59,999 held out, worker 1 of 2 gets none
  "$LAUNCH" --servers 1 --workers 2 --timeout 60 --log-dir "$TDIR/split" -- --app softmax \
    --epochs 1 --validation-split 59999 > /dev/null 2>&1; rc=$?
  [ $rc -eq 2 ] || fail "--validation-split 59999 with 2 workers: launch exit $rc, expected 2"
  grep -q -- '--validation-split 59999 leaves worker rank 1 no training data' "$TDIR/split/worker-1.log" ||
    fail "no clear error: $(tail -n 2 "$TDIR/split/worker-1.log")"
  # an evaluator the job does not run is refused by the scheduler (and exits 1)
  local port; port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1
  "$BIN/pskv-evaluator" --scheduler "127.0.0.1:$port" --app softmax --validation-split 10 \
    --connect-timeout 5 > ev.out 2>&1; rc=$?
  kill "$(cat scheduler.pid)" 2>/dev/null
  [ $rc -eq 1 ] || fail "an evaluator refused by the scheduler: exit $rc: $(cat ev.out)"
  grep -q 'runs no evaluator' ev.out scheduler.log || fail "refusal not explained: $(cat ev.out)"
}

# sparse-lr with an evaluator: 4000 generated examples, the last 600 held out
# (--validation-split) from the workers' shards. The evaluator reports val_auc
# (and val_loss, the mean log loss) in its JSON lines and to the scheduler, which
# stops the job on val_auc (--min-delta 1: no evaluation can improve enough, so it
# stops after 1 + --patience evaluations), and
# pskvctl status shows it; rank 0's final AUC, on the same held-out examples
# after the stop, is within 0.02 of the evaluator's last one; the best snapshot
# (--save-best, by val_auc) reloads with pskv-evaluator --evaluate to the metrics
# the evaluator reported, bit for bit. --early-stop-metric
# val_auc is refused for softmax (exit 2, naming the flag): by launch-local before
# anything starts, and by pskv-evaluator from the scheduler's view.
tags eval_sparse_auc slow
t_eval_sparse_auc() {
  local port r
  "$BIN/pskv-gen-sparse" --examples 4000 --features 2000 --out "$TDIR/gen" --seed 5 --test-fraction 0 > gen.out ||
    fail "gen-sparse failed: $(cat gen.out)"
  # batch 2: an epoch takes long enough for pskvctl status to see a report
  local app=(--app sparse-lr --train "$TDIR/gen.train" --validation-split 600 --epochs 100 --batch 2
             --lr 0.02 --eval-every 1)
  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 2 --evaluators 1 \
    --early-stop-metric val_auc --patience 4 --min-delta 1
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port"
  for r in 0 1; do
    start "worker-$r" "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank $r "${app[@]}"
  done
  start evaluator "$BIN/pskv-evaluator" --scheduler "127.0.0.1:$port" "${app[@]}" --metrics "$TDIR/val.jsonl" \
    --save-best "$TDIR/best.model" --best-metric val_auc
  wait_line evaluator.log '^evaluation 1:' 1 60 || fail "the evaluator did not evaluate: $(tail -n 3 evaluator.log)"
  local shown=0 deadline=$((SECONDS + 60))
  while [ $shown -eq 0 ] && [ $SECONDS -lt $deadline ] && kill -0 "$(cat evaluator.pid)" 2>/dev/null; do
    "$BIN/pskvctl" status --scheduler "127.0.0.1:$port" --timeout 2 > status.out 2>&1
    grep -q 'evaluator .* evals: val_loss [0-9.]* val_accuracy [0-9.]* val_auc 0\.[0-9]*' status.out &&
      shown=1 || sleep 0.2
  done
  [ $shown -eq 1 ] || fail "pskvctl status showed no val_auc while the job ran: $(cat status.out)"
  for r in 0 1; do
    wait_exit "$(cat "worker-$r.pid")" 60 || fail "worker $r exited $?: $(tail -n 2 "worker-$r.log")"
    grep -q '^stopped early at epoch [0-9]*: val_auc did not improve by 1 for 4 evaluations$' "worker-$r.log" ||
      fail "worker $r did not stop early: $(tail -n 2 "worker-$r.log")"
  done
  wait_exit "$(cat evaluator.pid)" 20 || fail "the evaluator exited $?: $(tail -n 2 evaluator.log)"
  wait_exit "$(cat scheduler.pid)" 20 || fail "the scheduler exited $?"
  grep -q 'evaluator: 600 validation examples, 3400 training examples' evaluator.log ||
    fail "validation split: $(grep 'validation' evaluator.log)"
  grep -q 'evaluation [0-9]* from node [0-9]*: clock .* val_auc 0\.[0-9]*$' scheduler.log ||
    fail "the scheduler logged no val_auc"
  local n last final
  n=$(grep -c '"val_loss":[0-9.e-]*,"val_accuracy":[0-9.e-]*,"val_auc":0\.[0-9]*,' "$TDIR/val.jsonl")
  [ "$n" -ge 5 ] || fail "$n JSON lines with val_auc: $(head -n 2 "$TDIR/val.jsonl")"
  last=$(tail -n 1 "$TDIR/val.jsonl" | sed 's/.*"val_auc":\([^,]*\),.*/\1/')
  final=$(sed -n 's/^final auc \([0-9.]*\) .*/\1/p' worker-0.log)
  [ -n "$final" ] || fail "rank 0 printed no final auc: $(tail -n 2 worker-0.log)"
  awk -v a="$last" -v b="$final" 'BEGIN { d = a - b; exit !(d < 0.02 && d > -0.02) }' ||
    fail "the evaluator's last val_auc $last, rank 0's final auc on the same examples $final"
  echo "$n evaluations; the evaluator's last val_auc $last, rank 0's final $final"
  # the best model file (--save-best, --best-metric val_auc: the first evaluation with
  # the highest val_auc) reloads to its metrics bit for bit, as recorded in the file
  local best got
  best=$(awk -F'"val_auc":' '{ split($2, a, ","); if (NR == 1 || a[1] + 0 > m) { m = a[1] + 0; l = $0 } }
    END { print l }' "$TDIR/val.jsonl" |
    sed 's/.*"val_loss":\([^,]*\),"val_accuracy":\([^,]*\),"val_auc":\([^,]*\),.*/\1 \2 \3/')
  "$BIN/pskv-evaluator" "${app[@]}" --evaluate "$TDIR/best.model" > evf.out 2>&1 ||
    fail "pskv-evaluator --evaluate exited $?: $(cat evf.out)"
  got=$(sed -n 's/^validation of .*: val_loss \([^ ]*\) val_accuracy \([^ ]*\) val_auc \([^ ]*\)$/\1 \2 \3/p' evf.out)
  [ -n "$best" ] && [ "$got" = "$best" ] || fail "the best model reloads to '$got'; the evaluator reported '$best'"
  grep -q "^recorded in the file: clock [0-9]* epoch [0-9.]* val_loss ${best% * *} val_accuracy .* val_auc ${best##* }$" evf.out ||
    fail "the file's record: $(grep recorded evf.out)"
  echo "best model reloads to val_loss val_accuracy val_auc $got"
  "$BIN/pskv-evaluator" --app softmax --validation-split 600 --evaluate "$TDIR/best.model" > evf.out 2>&1 &&
    fail "a sparse-lr file evaluated as softmax"
  "$LAUNCH" --servers 1 --workers 1 --evaluators 1 --timeout 30 --log-dir "$TDIR/sm" \
    --scheduler-opt --early-stop-metric=val_auc -- --app softmax --validation-split 100 > sm.out 2>&1; r=$?
  [ $r -eq 2 ] && grep -q -- '--early-stop-metric val_auc' sm.out || fail "val_auc for softmax: launch exit $r: $(cat sm.out)"
  [ ! -e "$TDIR/sm/scheduler.log" ] || fail "launch-local started the job before refusing"
  # pskv-evaluator refuses it too, from the scheduler's view (which comes once the
  # job's servers and workers are there)
  local m=(--app softmax --validation-split 100 --train-limit 500 --test-limit 100)
  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1 --evaluators 1 \
    --early-stop-metric val_auc --patience 1000
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port"
  start worker-0 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" "${m[@]}" --epochs 1000
  "$BIN/pskv-evaluator" --scheduler "127.0.0.1:$port" "${m[@]}" > ev.out 2>&1; r=$?
  for p in worker-0 server-0 scheduler; do kill "$(cat $p.pid)" 2>/dev/null; done
  [ $r -eq 2 ] && grep -q -- '--early-stop-metric val_auc' ev.out ||
    fail "pskv-evaluator --app softmax under val_auc: exit $r: $(tail -n 2 ev.out)"
  for p in worker-0 server-0 scheduler; do wait_exit "$(cat $p.pid)" 20; done
  return 0
}

# An evaluator may join a running job, and a new one may take a dead one's place:
# the first joins once the workers train, is killed (-9), is declared dead (early
# stopping suspended), and a second one registers, evaluates, and early stopping
# resumes with its reports; the workers train to their end and exit 0.
tags eval_late_join slow
t_eval_late_join() {
  local port r
  port=$(free_port)
  local app=(--app mlp --epochs 10 --train-limit 10000 --test-limit 500 --validation-split 1000)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 2 --evaluators 1 \
    --early-stop-metric val_accuracy --patience 1000
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port"
  for r in 0 1; do
    start "worker-$r" "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank $r "${app[@]}" --eval-every 0
  done
  wait_line scheduler.log 'cluster complete' 1 60 || fail "the job did not start"
  sleep 1
  start ev1 "$BIN/pskv-evaluator" --scheduler "127.0.0.1:$port" "${app[@]}" --eval-every 0.25
  wait_line ev1.log '^evaluation 2:' 1 60 || fail "the late evaluator did not evaluate: $(tail -n 3 ev1.log)"
  grep -q 'evaluator registered: node [0-9]* .*(joins the running job)' scheduler.log ||
    fail "the scheduler did not take it into the running job"
  kill -KILL "$(cat ev1.pid)"
  wait_line scheduler.log 'evaluator node [0-9]* is dead' 1 20 || fail "the dead evaluator was not noticed"
  start ev2 "$BIN/pskv-evaluator" --scheduler "127.0.0.1:$port" "${app[@]}" --eval-every 0.25
  wait_line ev2.log '^evaluation 2:' 1 60 || fail "the second evaluator did not evaluate: $(tail -n 3 ev2.log)"
  wait_line scheduler.log 'early stopping resumes: evaluator node' 1 10 || fail "early stopping did not resume"
  for r in 0 1; do
    wait_exit "$(cat "worker-$r.pid")" 150 || fail "worker $r exited $?: $(tail -n 2 "worker-$r.log")"
  done
  grep -q '^final test accuracy .* after 10 epochs' worker-0.log || fail "training did not run to its end"
  wait_exit "$(cat ev2.pid)" 20 || fail "the second evaluator exited $?"
  wait_exit "$(cat scheduler.pid)" 20 || fail "the scheduler exited $?"
}

# With --data-dir, the scheduler marks best the checkpoint nearest the best
# evaluation (val_loss without an early-stop metric). A planted plateau (every
# gradient zero from step $freeze on) makes the best an early evaluation; a
# checkpoint every epoch with --keep-checkpoints 1 would delete it, but the one
# marked best stays, in the manifest and on disk; pskvctl status names it, and
# --resume-best resumes the job from it.
t_eval_best_checkpoint() {
  local port r freeze=90
  local app=(--app softmax --consistency bsp --epochs 6 --train-limit 5000 --test-limit 500
             --validation-split 1000 --freeze-after $freeze --momentum 0 --seed 3
             --checkpoint-epochs 1 --eval-every 0)
  mkdir -p "$TDIR/sched" "$TDIR/s0" "$TDIR/s1"
  best_job() { # best_job PHASE [SCHEDULER FLAGS...]: the evaluator is there before training starts
    local phase=$1; shift
    port=$(free_port)
    start "sched-$phase" "$BIN/pskv-scheduler" --port "$port" --servers 2 --workers 2 \
      --evaluators 1 --data-dir "$TDIR/sched" --keep-checkpoints 1 --linger 5 "$@"
    for r in 0 1; do
      start "s$r-$phase" "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --data-dir "$TDIR/s$r"
    done
    start "ev-$phase" "$BIN/pskv-evaluator" --scheduler "127.0.0.1:$port" "${app[@]}"
    wait_line "sched-$phase.log" 'evaluator registered' 1 30 || fail "the evaluator did not register"
    for r in 0 1; do
      start "w$r-$phase" "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank $r "${app[@]}"
    done
  }
  trap 'kill -KILL $(cat "$TDIR"/*.pid) 2>/dev/null' EXIT # what is left on a failure
  best_job fresh
  for r in 0 1; do
    wait_exit "$(cat "w$r-fresh.pid")" 90 || fail "worker $r exited $?: $(tail -n 2 "w$r-fresh.log")"
  done
  "$BIN/pskvctl" status --scheduler "127.0.0.1:$port" --timeout 2 > status.out 2>&1 # it lingers
  wait_exit "$(cat ev-fresh.pid)" 20 || fail "the evaluator exited $?: $(tail -n 2 ev-fresh.log)"
  wait_exit "$(cat sched-fresh.pid)" 20 || fail "the scheduler exited $?"
  kill "$(cat s0-fresh.pid)" "$(cat s1-fresh.pid)" 2>/dev/null
  # the best evaluation (the first with the lowest val_loss) and every checkpoint's
  # clock, from the scheduler's log; the nearest checkpoint (of two as near, the later)
  local bclock bloss want
  read -r bloss bclock < <(sed -n 's/.*evaluation [0-9]* from node [0-9]*: clock \([0-9]*\) .* val_loss \([0-9.]*\) .*/\2 \1/p' \
    sched-fresh.log | sort -g -s -k1,1 | head -n 1)
  [ -n "$bclock" ] || fail "no evaluation in the scheduler's log"
  want=$(sed -n 's/.*checkpoint \([0-9]*\) complete in .* at clock \([0-9]*\):.*/\1 \2/p' sched-fresh.log |
    awk -v b="$bclock" '{ d = $2 > b ? $2 - b : b - $2; if (n == "" || d <= best) { best = d; n = $1 } } END { print n }')
  echo "best val_loss $bloss at clock $bclock (plateau from step $freeze); nearest checkpoint $want"
  [ -n "$want" ] && [ "$want" -lt 6 ] || fail "checkpoint ${want:-none} is the nearest: the test plants the best earlier"
  grep -q "^best checkpoint: checkpoint $want (clock [0-9]*), the nearest to the best val_loss $bloss at clock $bclock$" status.out ||
    fail "pskvctl status: $(grep best status.out || cat status.out)"
  grep -q "checkpoint $want (clock [0-9]*) marked best in .*: the nearest to the best val_loss" sched-fresh.log ||
    fail "the scheduler did not log the mark: $(grep 'marked best' sched-fresh.log | tail -n 2)"
  local seqs files
  seqs=$(sed -n 's/^ckpt seq=\([0-9]*\) .*/\1/p' "$TDIR/sched/manifest" | paste -sd ' ')
  [ "$seqs" = "$want 6" ] || fail "the manifest lists '$seqs', expected '$want 6': $(cat "$TDIR/sched/manifest")"
  grep -q "^ckpt seq=$want .* best=val_loss:[0-9.e-]*:$bclock$" "$TDIR/sched/manifest" ||
    fail "checkpoint $want is not marked best at clock $bclock: $(cat "$TDIR/sched/manifest")"
  for r in 0 1; do
    files=$(cd "$TDIR/s$r" && ls | sed 's/^ckpt-[0-9]*-\([0-9]*\)-[0-9]*\.pskv$/\1/' | paste -sd ' ')
    [ "$files" = "$want 6" ] || fail "server $r's directory holds checkpoints '$files', expected '$want 6'"
  done
  # --resume-best: the job goes on from the marked checkpoint (taken at epoch $want)
  best_job resumed --resume-best
  for r in 0 1; do
    wait_exit "$(cat "w$r-resumed.pid")" 90 || fail "resumed worker $r exited $?: $(tail -n 2 "w$r-resumed.log")"
  done
  grep -q "^resumed at epoch $want step" w0-resumed.log || fail "not resumed at epoch $want: $(grep -i resum w0-resumed.log)"
  grep -q "resuming job [0-9]* from checkpoint $want .*, the one marked best" sched-resumed.log ||
    fail "the scheduler did not resume from checkpoint $want: $(grep resuming sched-resumed.log)"
  for p in ev sched s0 s1; do wait_exit "$(cat "$p-resumed.pid")" 20 > /dev/null 2>&1; done
  # the mark stays on this run: never on one the first run took after checkpoint $want
  local marked
  marked=$(sed -n 's/^ckpt seq=\([0-9]*\) .* best=.*/\1/p' "$TDIR/sched/manifest")
  [ -n "$marked" ] && { [ "$marked" -le "$want" ] || [ "$marked" -gt 6 ]; } ||
    fail "after --resume-best, checkpoint '${marked}' is marked best: $(cat "$TDIR/sched/manifest")"
  "$BIN/pskv-scheduler" --resume-best --data-dir "$TDIR/s0" > rb.out 2>&1; r=$?
  [ $r -eq 2 ] && grep -q -- '--resume-best' rb.out || fail "--resume-best without a manifest: exit $r: $(cat rb.out)"
  trap - EXIT
}

# A hung evaluator whose heartbeats go on (--stall-after 3: it evaluates nothing
# more and stays in the job) is not declared dead; after --eval-silence 2 s
# without a report the scheduler warns, pskvctl status shows early stopping
# suspended while the evaluator is alive, and training runs to its end (exit 0).
# 40 epochs: the training must outlast the warning (about 3 s: three evaluations,
# then 2 s of silence); 12 epochs ended before it on a machine 2.5x faster.
t_eval_silent() {
  local port r js shown=0
  local app=(--app softmax --epochs 40 --train-limit 20000 --test-limit 500 --validation-split 1000)
  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 2 --evaluators 1 \
    --early-stop-metric val_accuracy --patience 1000 --eval-silence 2
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port"
  start evaluator "$BIN/pskv-evaluator" --scheduler "127.0.0.1:$port" "${app[@]}" --eval-every 0 --stall-after 3
  for r in 0 1; do
    start "worker-$r" "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank $r "${app[@]}" --eval-every 0
  done
  wait_line scheduler.log 'evaluator node [0-9]* is alive but has reported no evaluation for' 1 90 ||
    fail "no warning of the silent evaluator: $(grep -i evaluator scheduler.log | tail -n 3)"
  grep -q '^evaluator: --stall-after 3: evaluating nothing more' evaluator.log || fail "the evaluator did not stall"
  grep -q 'early stopping is suspended until it reports again' scheduler.log || fail "early stopping not suspended"
  local deadline=$((SECONDS + 30))
  while [ $shown -eq 0 ] && [ $SECONDS -lt $deadline ] && kill -0 "$(cat worker-0.pid)" 2>/dev/null; do
    js=$("$BIN/pskvctl" status --json --scheduler "127.0.0.1:$port" --timeout 2 2>/dev/null)
    grep -q '"early_stop":"suspended (evaluator node [0-9]* silent for [0-9]* s)' <<< "$js" &&
      grep -q '"role":"evaluator","rank":-1,[^}]*"alive":true' <<< "$js" && shown=1 || sleep 0.2
  done
  [ $shown -eq 1 ] || fail "status did not show the silent evaluator alive and early stopping suspended: $js"
  for r in 0 1; do
    wait_exit "$(cat "worker-$r.pid")" 150 || fail "worker $r exited $?: $(tail -n 2 "worker-$r.log")"
  done
  grep -q '^final test accuracy .* after 40 epochs' worker-0.log || fail "training did not run to its end"
  grep -q 'stopped early' worker-*.log && fail "a worker stopped early"
  grep -q 'marked dead' scheduler.log && fail "a node was declared dead: $(grep 'marked dead' scheduler.log)"
  wait_exit "$(cat evaluator.pid)" 20 || fail "the evaluator exited $?: $(tail -n 2 evaluator.log)"
  wait_exit "$(cat scheduler.pid)" 20 || fail "the scheduler exited $?"
  wait_exit "$(cat server-0.pid)" 20 > /dev/null
}
