# Pipeline tests (sourced by integration.sh): --app pipeline's stages on real
# workers, activations and gradients between them over loopback TCP. Each
# function runs in its own test directory ($TDIR) under run_test's time-out.

# pl_run DIR WORKERS ARGS...: one pipeline job on one server; its status.
pl_run() {
  local dir=$1 nw=$2; shift 2
  "$LAUNCH" --servers 1 --workers "$nw" --timeout 60 --log-dir "$dir" -- \
    --app pipeline --consistency bsp --epochs 1 "$@" > "$dir.out" 2>&1
}

# pl_digests DIR WORKERS: the final weights' digest of every stage, one line.
pl_digests() {
  local dir=$1 nw=$2 r d out=
  for r in $(seq 0 $((nw - 1))); do
    d=$(sed -n 's/^stage [0-9]* final digest \([0-9a-f]*\)$/\1/p' "$dir/worker-$r.log")
    [ -n "$d" ] || fail "$dir: rank $r printed no digest: $(grep -i 'pipeline\|stage' "$dir/worker-$r.log" | tail -n 2)"
    out="$out $d"
  done
  echo "$out"
}

# pl_same "SCHEDULES" WORKERS ARGS...: one job per schedule, in $TDIR/sWORKERS-SCHEDULE;
# every one must end with the first one's digests, left in PL_REF.
pl_same() {
  local scheds=$1 nw=$2 s d first=; shift 2
  PL_REF=
  for s in $scheds; do
    pl_run "$TDIR/s$nw-$s" "$nw" --schedule "$s" "$@" ||
      fail "S=$nw $s exited $?: $(grep -h 'pipeline:' "$TDIR/s$nw-$s"/worker-*.log | head -n 2)"
    d=$(pl_digests "$TDIR/s$nw-$s" "$nw")
    [ -z "$first" ] && { first=$s; PL_REF=$d; }
    [ "$d" = "$PL_REF" ] || fail "S=$nw: $s ended with digests$d, $first with$PL_REF"
  done
}

# pl_recompute WORKERS REF ARGS...: gpipe and 1f1b with --recompute, in
# $TDIR/rWORKERS-SCHEDULE, each ending with the digests REF (those without it).
pl_recompute() {
  local nw=$1 ref=$2 s; shift 2
  for s in gpipe 1f1b; do
    pl_run "$TDIR/r$nw-$s" "$nw" --schedule "$s" --recompute "$@" || fail "S=$nw $s --recompute exited $?"
    [ "$(pl_digests "$TDIR/r$nw-$s" "$nw")" = "$ref" ] ||
      fail "S=$nw $s --recompute ended with$(pl_digests "$TDIR/r$nw-$s" "$nw"), without it$ref"
  done
}

# The gradient of a mini-batch does not depend on the schedule: sequential, gpipe
# and 1f1b (and gpipe capped by --max-inflight 2) end with the same weights bit
# for bit, for 2 stages and for 3 (an explicit --split), and the same again with
# --recompute, with --keys (CURVE between the stages), and with micro-batches of
# unequal sizes. 1f1b holds at most S-k micro-batches on stage k, gpipe all M,
# sequential one; the saved activations' peak bytes are each held micro-batch's
# input and layer outputs (only the input with --recompute). The first stage
# reports the pipeline's bubble fraction, in rank 0's metrics too.
tags pipeline_schedules keys slow
t_pipeline_schedules() {
  # shellcheck disable=SC2054 # commas inside one flag's value
  local common=(--layers 784,64,32,10 --batch 32 --micro-batches 4 --train-limit 640 --test-limit 200
                --print-digests)
  local ref
  pl_same "sequential gpipe 1f1b" 2 --stages 2 "${common[@]}"
  ref=$PL_REF
  grep -q 'gpipe): .*peak 4 micro-batches' "$TDIR/s2-gpipe/worker-0.log" || fail "gpipe did not hold 4"
  grep -q '1f1b): .*peak 2 micro-batches' "$TDIR/s2-1f1b/worker-0.log" || fail "1f1b stage 0 held other than 2"
  grep -q '1f1b): .*peak 1 micro-batches' "$TDIR/s2-1f1b/worker-1.log" || fail "1f1b stage 1 held other than 1"
  # 8 rows per micro-batch; stage 0 holds 784 inputs + 64 outputs a row, stage 1 64 + 32 + 10
  grep -q '1f1b): .*peak 2 micro-batches in flight (54272 bytes' "$TDIR/s2-1f1b/worker-0.log" ||
    fail "1f1b stage 0's saved bytes: $(grep 'in flight' "$TDIR/s2-1f1b/worker-0.log")"
  grep -q 'gpipe): .*peak 4 micro-batches in flight (13568 bytes' "$TDIR/s2-gpipe/worker-1.log" ||
    fail "gpipe stage 1's saved bytes: $(grep 'in flight' "$TDIR/s2-gpipe/worker-1.log")"
  grep -q '^pipeline 0: bubble fraction 0\.[0-9]* (idle share per stage 0\.[0-9]*,0\.[0-9]*;' "$TDIR/s2-1f1b/worker-0.log" ||
    fail "no bubble fraction: $(grep 'bubble' "$TDIR/s2-1f1b/worker-0.log")"
  pl_recompute 2 "$ref" --stages 2 "${common[@]}"
  grep -q '1f1b, recompute): .*peak 2 micro-batches in flight (50176 bytes' "$TDIR/r2-1f1b/worker-0.log" ||
    fail "1f1b --recompute stage 0's saved bytes: $(grep 'in flight' "$TDIR/r2-1f1b/worker-0.log")"
  grep -q 'gpipe, recompute): .*peak 4 micro-batches in flight (8192 bytes' "$TDIR/r2-gpipe/worker-1.log" ||
    fail "gpipe --recompute stage 1's saved bytes: $(grep 'in flight' "$TDIR/r2-gpipe/worker-1.log")"
  pl_run "$TDIR/s2-cap" 2 --stages 2 --schedule gpipe --max-inflight 2 "${common[@]}" ||
    fail "gpipe --max-inflight 2 exited $?"
  [ "$(pl_digests "$TDIR/s2-cap" 2)" = "$ref" ] || fail "gpipe --max-inflight 2 differs"
  grep -q 'peak 2 micro-batches' "$TDIR/s2-cap/worker-0.log" || fail "--max-inflight 2 not kept"
  # a step's push, clock and the next step's pull are one pskv_pushpull by default;
  # --pushpull=false sends them apart: the same bits under bsp
  grep -q '^stage 0 of pipeline 0 exchange: one pskv_pushpull a step' "$TDIR/s2-gpipe/worker-0.log" ||
    fail "the default exchange: $(grep 'exchange' "$TDIR/s2-gpipe/worker-0.log")"
  pl_run "$TDIR/s2-nopp" 2 --stages 2 --schedule gpipe --pushpull=false "${common[@]}" ||
    fail "gpipe --pushpull=false exited $?"
  [ "$(pl_digests "$TDIR/s2-nopp" 2)" = "$ref" ] || fail "gpipe --pushpull=false differs"
  grep -q '^stage 1 of pipeline 0 exchange: push, clock, then' "$TDIR/s2-nopp/worker-1.log" ||
    fail "--pushpull=false: $(grep 'exchange' "$TDIR/s2-nopp/worker-1.log")"
  # uneven micro-batches (30 rows in 4: 7, 8, 7, 8), each weighted by its rows
  pl_run "$TDIR/u-seq" 2 --stages 2 --schedule sequential "${common[@]}" --batch 30 || fail "uneven sequential exited $?"
  pl_run "$TDIR/u-1f1b" 2 --stages 2 --schedule 1f1b "${common[@]}" --batch 30 || fail "uneven 1f1b exited $?"
  [ "$(pl_digests "$TDIR/u-1f1b" 2)" = "$(pl_digests "$TDIR/u-seq" 2)" ] || fail "uneven: 1f1b differs from sequential"
  [ "$(pl_digests "$TDIR/u-seq" 2)" != "$ref" ] || fail "--batch 30 gave the weights of --batch 32"
  pl_same "gpipe 1f1b sequential" 3 --stages 3 --split 1,1,1 "${common[@]}"
  ref=$PL_REF
  grep -q '1f1b): .*peak 3 micro-batches' "$TDIR/s3-1f1b/worker-0.log" || fail "1f1b S=3 stage 0 held other than 3"
  pl_recompute 3 "$ref" --stages 3 --split 1,1,1 "${common[@]}"
  "$BIN/pskvctl" keys init "$TDIR/keys" --servers 1 --workers 3 > /dev/null || fail "keys init"
  "$LAUNCH" --keys "$TDIR/keys" --servers 1 --workers 3 --timeout 60 --log-dir "$TDIR/keyed" -- \
    --app pipeline --consistency bsp --epochs 1 --stages 3 --split 1,1,1 --schedule 1f1b \
    "${common[@]}" > "$TDIR/keyed.out" 2>&1 || fail "keyed run exited $?"
  [ "$(pl_digests "$TDIR/keyed" 3)" = "$ref" ] || fail "the keyed run's digests differ"
  no_strays "$TDIR/keyed"
}

# pl_layers DIR WORKERS: the final weights' digest of every layer, one line
# (comparable between any two cuts of the same --layers).
pl_layers() {
  local dir=$1 nw=$2 r
  for r in $(seq 0 $((nw - 1))); do
    sed -n 's/^layer \([0-9]*\) final digest \([0-9a-f]*\)$/\1:\2/p' "$dir/worker-$r.log"
  done | tr '\n' ' '
}

# The data ends mid-batch: 84 rows in batches of 32 make each epoch's third step
# 20 rows, its micro-batches 8, 8 and 4 (the full batch's boundaries, the last
# one smaller: the timeline shows three). Every cut, S = 2 and 3 under gpipe and
# 1f1b, with and without --recompute, ends with the weights of --stages 1 (one
# process, the whole model) bit for bit, layer by layer. And the short step is
# the mean over its rows: 20 rows in a 32-row batch (micro-batches 8, 8, 4, each
# row weighted 1/20) train as one full batch of 20 (5, 5, 5, 5): the same losses
# every epoch to 1e-5 (weighting the short step's rows 1/32 instead moves the
# third epoch's test loss by 5e-4). Two pipelines with shards of 17 and 16 rows
# take 2 steps of 16 an epoch, pipeline 1's second one empty.
tags pipeline_short_batch slow
t_pipeline_short_batch() {
  # shellcheck disable=SC2054 # commas inside one flag's value
  local common=(--layers 784,64,32,10 --batch 32 --micro-batches 4 --train-limit 84 --test-limit 200
                --epochs 2 --lr 0.1 --print-digests)
  local ref got
  pl_run "$TDIR/one" 1 --stages 1 --timeline-step 2 "${common[@]}" || fail "--stages 1 exited $?"
  ref=$(pl_layers "$TDIR/one" 1)
  [ "$(grep -c '^timeline pipeline 0 stage 0 F [0-2] ' "$TDIR/one/worker-0.log")" = 3 ] ||
    fail "the short step's micro-batches: $(grep '^timeline .* F ' "$TDIR/one/worker-0.log")"
  local name args
  while IFS='|' read -r name args; do
    # shellcheck disable=SC2086
    pl_run "$TDIR/$name" "${name:1:1}" --stages "${name:1:1}" $args "${common[@]}" ||
      fail "$name exited $?: $(grep -h 'pipeline:' "$TDIR/$name"/worker-*.log | head -n 2)"
    got=$(pl_layers "$TDIR/$name" "${name:1:1}")
    [ "$got" = "$ref" ] || fail "$name ($args) ended with layers $got, --stages 1 with $ref"
  done <<'RUNS'
s2-gpipe|--schedule gpipe
s2-1f1b|--schedule 1f1b
s2-1f1b-r|--schedule 1f1b --recompute
s3-gpipe|--split 1,1,1 --schedule gpipe
s3-1f1b|--split 1,1,1 --schedule 1f1b
s3-gpipe-r|--split 1,1,1 --schedule gpipe --recompute
RUNS
  grep -q '^epoch 2.00  step 6 ' "$TDIR/s2-1f1b/worker-0.log" || fail "not 3 steps an epoch"
  local sub=(--stages 2 --layers 784,64,32,10 --micro-batches 4 --train-limit 20 --test-limit 500
             --epochs 3 --lr 0.1)
  pl_run "$TDIR/short" 2 "${sub[@]}" --batch 32 --metrics "$TDIR/short.jsonl" || fail "short exited $?"
  pl_run "$TDIR/full" 2 "${sub[@]}" --batch 20 --metrics "$TDIR/full.jsonl" || fail "full exited $?"
  grep -h '"accuracy"' "$TDIR/short.jsonl" "$TDIR/full.jsonl"
  paste -d ' ' <(grep '"accuracy"' "$TDIR/short.jsonl") <(grep '"accuracy"' "$TDIR/full.jsonl") |
    awk '{ n++; split($0, h, " ");
           for (i = 1; i <= 2; i++) { match(h[i], /"train_loss":[0-9.]*/); tl[i] = substr(h[i], RSTART + 13, RLENGTH - 13)
                                      match(h[i], /"test_loss":[0-9.]*/); el[i] = substr(h[i], RSTART + 12, RLENGTH - 12) }
           d1 = tl[1] - tl[2]; d2 = el[1] - el[2]
           if (tl[1] == "" || d1 > 1e-5 || d1 < -1e-5 || d2 > 1e-5 || d2 < -1e-5) bad = 1 }
         END { exit !(n == 3 && !bad) }' ||
    fail "20 rows short of a 32-row batch did not train as a batch of 20"
  # D = 2: 33 rows make shards of 17 and 16, so 2 steps an epoch of 16 rows, and
  # pipeline 1 has no row left for the second: it only ends the clock
  "$LAUNCH" --servers 1 --workers 4 --timeout 60 --log-dir "$TDIR/d2" -- --app pipeline --consistency bsp \
    --stages 2 --layers 784,64,32,10 --batch 16 --micro-batches 4 --epochs 3 --train-limit 33 \
    --test-limit 100 --metrics "$TDIR/d2.jsonl" > "$TDIR/d2.out" 2>&1 || fail "D=2 exited $?: $(tail -n 1 "$TDIR/d2.out")"
  grep -q '^{"epoch":3.0000,"step":6,' "$TDIR/d2.jsonl" || fail "D=2: not 2 steps an epoch: $(cat "$TDIR/d2.jsonl")"
}

# Resume from a checkpoint (S = 2, D = 1, bsp: the run is deterministic, so a
# resumed run must end bit for bit where an uninterrupted one does). The job
# checkpoints every epoch (--checkpoint-epochs 1; 300 rows in batches of 32, the
# last step short). Stage 1 is killed -9 after a checkpoint: stage 0 fails at
# once naming it (a stage cannot be restarted alone: the job stops), and the
# scheduler and server are killed too. Started again with --resume on the same
# directories, both stages go on at the last checkpoint's step; that job is
# killed -9 whole after its next checkpoint and resumed again, and it ends with
# the uninterrupted run's weights (every layer's digest) and accuracy. Resumed
# with another --batch, the recorded progress does not fit: refused by name. A
# job resumed from a --checkpoint-every checkpoint (the stages possibly recorded
# steps apart) goes on with both stages at one step and finishes.
tags pipeline_resume slow
t_pipeline_resume() {
  # shellcheck disable=SC2054 # commas inside one flag's value
  local flags=(--app pipeline --consistency bsp --stages 2 --layers 784,64,32,10 --batch 32
               --micro-batches 4 --train-limit 300 --test-limit 200 --epochs 40 --checkpoint-epochs 1
               --print-digests --request-timeout 10)
  local port r ck step ref acc
  trap 'kill -KILL $(cat "$TDIR"/*.pid) 2>/dev/null' EXIT # what is left on a failure
  pr_job() { # pr_job PHASE DIR [WORKER FLAGS...] [-- SCHEDULER FLAGS...]: a job on DIR
    local phase=$1 dir=$2 wflags=() sflags=(); shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do wflags+=("$1"); shift; done
    [ $# -gt 0 ] && { shift; sflags=("$@"); }
    mkdir -p "$dir/sched" "$dir/s0"
    port=$(free_port)
    start "sched-$phase" "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 2 \
      --data-dir "$dir/sched" "${sflags[@]}"
    start "s0-$phase" "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --data-dir "$dir/s0"
    for r in 0 1; do
      start "w$r-$phase" "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank $r "${flags[@]}" \
        --metrics "$dir/m-$phase.jsonl" "${wflags[@]}"
    done
  }
  pr_wait() { # pr_wait PHASE: both stages exit 0
    for r in 0 1; do
      wait_exit "$(cat "$TDIR/w$r-$1.pid")" 120 || fail "$1: stage $r exited $?: $(grep -h 'pipeline:' "$TDIR/w$r-$1.log" | tail -n 2)"
    done
  }
  pr_layers() { cat "$TDIR/w0-$1.log" "$TDIR/w1-$1.log" | sed -n 's/^layer \([0-9]\) final digest \([0-9a-f]*\)$/\1:\2/p' | tr '\n' ' '; }
  pr_acc() { grep '"accuracy"' "$1" | tail -n 1 | sed -n 's/.*"accuracy":\([0-9.]*\).*/\1/p'; }
  pr_job full "$TDIR/a"
  pr_wait full
  ref=$(pr_layers full); acc=$(pr_acc "$TDIR/a/m-full.jsonl")
  [ -n "$ref" ] && [ -n "$acc" ] || fail "the uninterrupted run: no digests or accuracy"
  # stage 1 killed after a checkpoint: stage 0 names it and exits 1
  pr_job killed "$TDIR/b"
  wait_line "$TDIR/w0-killed.log" '^checkpoint 2 at epoch 2 step 20$' 1 60 ||
    fail "no checkpoint at epoch 2: $(tail -n 2 "$TDIR/w0-killed.log")"
  kill -KILL "$(cat "$TDIR/w1-killed.pid")"
  wait_exit "$(cat "$TDIR/w0-killed.pid")" 15; r=$?
  [ $r -eq 1 ] || fail "stage 0 exited $r after stage 1 was killed"
  grep -q 'pipeline: rank 0 (stage 0 of pipeline 0): .*rank 1' "$TDIR/w0-killed.log" ||
    fail "stage 0 did not name rank 1: $(grep 'pipeline:' "$TDIR/w0-killed.log")"
  grep 'pipeline: rank 0' "$TDIR/w0-killed.log"
  kill -KILL "$(cat "$TDIR/sched-killed.pid")" "$(cat "$TDIR/s0-killed.pid")" 2>/dev/null; sleep 0.2
  grep -q 'final digest' "$TDIR/w0-killed.log" && fail "the job finished before the kill"
  ck=$(sed -n 's/^checkpoint [0-9]* at epoch [0-9]* step \([0-9]*\)$/\1/p' "$TDIR/w0-killed.log" | tail -n 1)
  # resumed at that checkpoint's step, then the whole job killed after its next checkpoint
  pr_job resumed "$TDIR/b" -- --resume
  for r in 0 1; do
    wait_line "$TDIR/w$r-resumed.log" "resumed at epoch $((ck / 10)) step $ck of 400" 1 30 ||
      fail "stage $r did not resume at step $ck: $(grep -h 'resum\|pipeline:' "$TDIR/w$r-resumed.log" | tail -n 2)"
  done
  wait_line "$TDIR/w0-resumed.log" '^checkpoint [0-9]* at epoch' 1 60 || fail "no checkpoint after resuming"
  kill -KILL $(cat "$TDIR"/*-resumed.pid) 2>/dev/null; sleep 0.2
  grep -q 'final digest' "$TDIR/w0-resumed.log" && fail "the resumed job finished before the kill"
  step=$(sed -n 's/^checkpoint [0-9]* at epoch [0-9]* step \([0-9]*\)$/\1/p' "$TDIR/w0-resumed.log" | tail -n 1)
  # resumed again: it finishes with the uninterrupted run's weights and accuracy
  pr_job again "$TDIR/b" -- --resume
  pr_wait again
  # at that checkpoint or, when the kill came between a later one's completion and
  # rank 0's line, at that one
  r=$(sed -n 's/^resumed at epoch [0-9]* step \([0-9]*\) of 400$/\1/p' "$TDIR/w0-again.log")
  [ -n "$r" ] && [ "$r" -ge "$step" ] && [ $((r % 10)) -eq 0 ] ||
    fail "not resumed at step $step or a later epoch's end: $(grep -i resum "$TDIR/w0-again.log")"
  step=$r
  echo "killed after the checkpoint at step $ck, resumed, killed whole, resumed at step $step: layers $(pr_layers again), accuracy $(pr_acc "$TDIR/b/m-again.jsonl")"
  [ "$(pr_layers again)" = "$ref" ] || fail "resumed twice, the job ended with layers $(pr_layers again), uninterrupted $ref"
  [ "$(pr_acc "$TDIR/b/m-again.jsonl")" = "$acc" ] || fail "accuracy $(pr_acc "$TDIR/b/m-again.jsonl") after resuming, $acc uninterrupted"
  grep -q "\"resumed_at_epoch\":$((step / 10)),\"resumed_at_step\":$step" "$TDIR/b/m-again.jsonl" ||
    fail "the metrics do not note the resume: $(head -n 2 "$TDIR/b/m-again.jsonl")"
  wait_exit "$(cat "$TDIR/sched-again.pid")" 20 || fail "the resumed scheduler exited $?"
  # another --batch: the checkpoint's progress does not fit; refused, exit 1
  pr_job refit "$TDIR/b" --batch 16 -- --resume
  wait_exit "$(cat "$TDIR/w0-refit.pid")" 60; r=$?
  [ $r -eq 1 ] || fail "a resume with another --batch exited $r: $(tail -n 2 "$TDIR/w0-refit.log")"
  grep -q "pipeline: the checkpoint's progress (epoch 40, step 400, position 0) does not fit" "$TDIR/w0-refit.log" ||
    fail "no clear refusal: $(grep -v INFO "$TDIR/w0-refit.log" | tail -n 2)"
  kill -KILL $(cat "$TDIR"/*-refit.pid) 2>/dev/null
  # a checkpoint of the scheduler's timer is a cut through running training that
  # may record the stages steps apart (their latest heartbeats): resumed, they go
  # on together from the smaller step (trainpos_agree) and the job finishes
  local s0 s1
  pr_job timer "$TDIR/c" --checkpoint-epochs 0 --epochs 200 -- --checkpoint-every 0.2
  wait_line "$TDIR/sched-timer.log" 'checkpoint 2 complete' 1 60 || fail "no timer checkpoint 2"
  kill -KILL $(cat "$TDIR"/*-timer.pid) 2>/dev/null; sleep 0.2
  grep -q 'final digest' "$TDIR/w0-timer.log" && fail "the timer job finished before the kill"
  pr_job timer2 "$TDIR/c" --checkpoint-epochs 0 --epochs 200 -- --resume
  pr_wait timer2
  s0=$(sed -n 's/^resumed at epoch [0-9]* step \([0-9]*\) of 2000$/\1/p' "$TDIR/w0-timer2.log")
  s1=$(sed -n 's/^resumed at epoch [0-9]* step \([0-9]*\) of 2000$/\1/p' "$TDIR/w1-timer2.log")
  grep -h 'recorded step' "$TDIR"/w[01]-timer2.log
  [ -n "$s0" ] && [ "$s0" = "$s1" ] || fail "after a timer checkpoint the stages resumed at steps '$s0' and '$s1'"
  echo "after a timer checkpoint both stages resumed at step $s0 and finished"
  trap - EXIT
}

# --suggest-split times every layer and prints the cut that minimises the
# slowest stage: the 784x1024 layer alone against three small ones, and for
# 784,512,512,512,10 in three stages the two big layers apart (each costs about
# what layer 0 costs, which computes no input gradient). The line a script
# reads feeds --split back; no training happens (no table, exit 0). The run with
# the suggested split logs a timeline that scripts/plot-timeline.sh draws.
t_pipeline_suggest_split() {
  local sp
  "$LAUNCH" --servers 1 --workers 2 --timeout 60 --log-dir "$TDIR/a" -- --app pipeline --stages 2 \
    --layers 784,1024,16,16,10 --batch 64 --micro-batches 8 --suggest-split > "$TDIR/a.out" 2>&1 ||
    fail "S=2 exited $?: $(tail -n 2 "$TDIR/a.out")"
  grep -h 'pipeline: layer\|slowest' "$TDIR/a/worker-0.log"
  sp=$(sed -n 's/^suggested split: \([0-9,]*\)$/\1/p' "$TDIR/a/worker-0.log")
  [ "$sp" = "1,3" ] || fail "S=2 suggested '$sp': $(grep 'pipeline:' "$TDIR/a/worker-0.log")"
  grep -q 'suggested split' "$TDIR/a/worker-1.log" && fail "rank 1 printed a suggestion too"
  grep -q 'in flight' "$TDIR/a/worker-0.log" && fail "--suggest-split trained"
  "$LAUNCH" --servers 1 --workers 3 --timeout 60 --log-dir "$TDIR/b" -- --app pipeline --stages 3 \
    --layers 784,512,512,512,10 --batch 64 --micro-batches 8 --suggest-split --recompute > "$TDIR/b.out" 2>&1 ||
    fail "S=3 exited $?: $(tail -n 2 "$TDIR/b.out")"
  sp=$(sed -n 's/^suggested split: \([0-9,]*\)$/\1/p' "$TDIR/b/worker-0.log")
  [ "$sp" = "1,1,2" ] || fail "S=3 suggested '$sp': $(grep 'pipeline:' "$TDIR/b/worker-0.log")"
  grep -q 'and the recomputation' "$TDIR/b/worker-0.log" || fail "--recompute not timed"
  pl_run "$TDIR/c" 3 --stages 3 --split "$sp" --layers 784,512,512,512,10 --batch 64 --micro-batches 8 \
    --train-limit 640 --test-limit 100 --timeline-step 3 || fail "--split $sp exited $?"
  grep -q 'stage 2 of pipeline 0 (rank 2, layers 2..3' "$TDIR/c/worker-2.log" || fail "--split $sp not taken"
  # the timeline of mini-batch 3: every stage logged its 8 forwards and 8 backwards;
  # plot-timeline.sh renders a row per stage (and a PNG where gnuplot is installed)
  for r in 0 1 2; do
    [ "$(grep -c "^timeline pipeline 0 stage $r [FB] [0-7] " "$TDIR/c/worker-$r.log")" = 16 ] ||
      fail "stage $r logged $(grep -c '^timeline' "$TDIR/c/worker-$r.log") timeline lines"
  done
  "$top/scripts/plot-timeline.sh" "$TDIR/c" -o "$TDIR/c.png" > "$TDIR/tl.txt" 2>&1
  [ "$(grep -c '^stage [0-2] |.*| idle share 0\.[0-9]*$' "$TDIR/tl.txt")" = 3 ] || fail "timeline: $(cat "$TDIR/tl.txt")"
  if command -v gnuplot > /dev/null; then [ -s "$TDIR/c.png" ] || fail "no timeline PNG"; fi
}

# A 2-stage pipeline trains as well as the mlp app on the same subset (the same
# model 784-256-10, batch, learning rate and epochs): test accuracy within 0.02
# of mlp's and above 0.75; rank 0's metrics file carries samples_per_s and accuracy,
# and at the end the bubble fraction and the stages' time split.
# Two such pipelines through two servers train too.
tags pipeline_train slow
t_pipeline_train() {
  local sub=(--train-limit 6000 --test-limit 2000 --epochs 2 --batch 16 --lr 0.0075 --lr-schedule linear)
  "$LAUNCH" --servers 1 --workers 2 --timeout 60 --log-dir "$TDIR/p" -- --app pipeline --stages 2 \
    --layers 784,256,10 --micro-batches 4 --metrics "$TDIR/p.jsonl" "${sub[@]}" > "$TDIR/p.out" 2>&1 ||
    fail "pipeline exited $?: $(grep -h 'pipeline:' "$TDIR/p"/worker-*.log | head -n 2)"
  "$LAUNCH" --servers 1 --workers 1 --timeout 60 --log-dir "$TDIR/m" -- --app mlp --hidden 256 \
    "${sub[@]}" > "$TDIR/m.out" 2>&1 || fail "mlp exited $?"
  local pa ma sps
  pa=$(grep accuracy "$TDIR/p.jsonl" | tail -n 1 | sed -n 's/.*"accuracy":\([0-9.]*\).*/\1/p')
  sps=$(grep accuracy "$TDIR/p.jsonl" | tail -n 1 | sed -n 's/.*"samples_per_s":\([0-9.]*\).*/\1/p')
  ma=$(sed -n 's/^final test accuracy \([0-9.]*\) .*/\1/p' "$TDIR/m.out")
  [ -n "$pa" ] && [ -n "$ma" ] && [ -n "$sps" ] || fail "no accuracy (pipeline '$pa', mlp '$ma') or samples_per_s '$sps'"
  echo "pipeline accuracy $pa ($sps samples/s), mlp $ma"
  grep -q '^{"pipeline":0,"bubble_fraction":0\.[0-9]*,"stage_idle":\[[0-9.]*,[0-9.]*\],.*"stage_seconds":\[\[' "$TDIR/p.jsonl" ||
    fail "no bubble fraction in the metrics: $(tail -n 1 "$TDIR/p.jsonl")"
  awk -v p="$pa" -v m="$ma" 'BEGIN { exit !(p > 0.75 && p >= m - 0.02) }' ||
    fail "pipeline accuracy $pa against mlp's $ma"
  # D = 2 pipelines x S = 2 stages through 2 servers (bsp): stage k of both shares
  # stage k's table; each pipeline trains on half the images
  "$LAUNCH" --servers 2 --workers 4 --timeout 60 --log-dir "$TDIR/d2" -- --app pipeline --stages 2 \
    --pipelines 2 --layers 784,256,10 --micro-batches 4 --consistency bsp --metrics "$TDIR/d2.jsonl" \
    "${sub[@]}" > "$TDIR/d2.out" 2>&1 || fail "D=2 exited $?: $(grep -h 'pipeline:' "$TDIR/d2"/worker-*.log | head -n 2)"
  pa=$(grep accuracy "$TDIR/d2.jsonl" | tail -n 1 | sed -n 's/.*"accuracy":\([0-9.]*\).*/\1/p')
  echo "D=2: accuracy $pa"
  awk -v p="$pa" 'BEGIN { exit !(p > 0.7) }' || fail "D=2 accuracy '$pa'"
  grep -q 'stage 1 of pipeline 1 (rank 3' "$TDIR/d2/worker-3.log" || fail "rank 3 is not stage 1 of pipeline 1"
}

# pskvctl status shows the stages. A stage killed (SIGKILL) mid-run: the stages before and after it fail naming
# its rank within seconds (the scheduler declares it dead: its connection
# closed), nothing hangs, and they exit 1. With two pipelines the
# other pipeline's stages stop too, naming it.
t_pipeline_stage_dies() {
  local d="$TDIR/j" pid t0 r port
  mkdir -p "$d"
  port=$(free_port)
  "$LAUNCH" --port "$port" --servers 1 --workers 3 --timeout 60 --log-dir "$d" -- --app pipeline --stages 3 \
    --layers 784,64,32,10 --batch 32 --micro-batches 4 --epochs 1000 --train-limit 2000 \
    --test-limit 200 --request-timeout 10 > "$d.out" 2>&1 &
  local launcher=$!
  wait_line "$d/worker-0.log" 'epoch 1.00' 1 30 || fail "rank 0 did not finish an epoch"
  # pskvctl status shows each worker's stage (from its heartbeats)
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" status > "$TDIR/status.txt" 2>&1 || fail "pskvctl status"
  for r in 0 1 2; do
    grep -q "^[0-9]* *worker *$r .*stage $r of pipeline 0" "$TDIR/status.txt" ||
      fail "status shows no stage for rank $r: $(cat "$TDIR/status.txt")"
  done
  pid=$(cat "$d/worker-1.pid")
  [ -n "$pid" ] || fail "no pid for rank 1"
  t0=$(ms_now)
  kill -KILL "$pid"
  for r in 0 2; do
    wait_line "$d/worker-$r.log" 'pipeline: rank .* rank 1 died' 1 8 ||
      fail "rank $r did not fail naming rank 1 within 8 s: $(tail -n 2 "$d/worker-$r.log")"
  done
  echo "ranks 0 and 2 failed within $(( $(ms_now) - t0 )) ms"
  wait_exit "$launcher" 30
  local st=$?
  [ $st -ne 0 ] && [ $st -ne 124 ] || fail "the launcher exited $st"
  grep -q 'workers exit statuses: 1 [0-9]* 1' "$d.out" || fail "ranks 0 and 2 did not exit 1: $(tail -n 1 "$d.out")"
  # D = 2 pipelines of 2 stages, rank 1 killed: its neighbour and the other
  # pipeline's stages, none of them its neighbour, stop naming it (each checks
  # before every step that every rank has a live worker); a loaded machine's stall
  # of 500 ms is not taken for a death
  d="$TDIR/d2"
  mkdir -p "$d"
  "$LAUNCH" --servers 1 --workers 4 --timeout 60 --log-dir "$d" -- \
    --app pipeline --stages 2 --pipelines 2 --consistency bsp --layers 784,64,32,10 --batch 32 \
    --micro-batches 4 --epochs 1000 --train-limit 2000 --test-limit 200 --request-timeout 10 > "$d.out" 2>&1 &
  launcher=$!
  wait_line "$d/worker-0.log" 'epoch 1.00' 1 30 || fail "D=2: rank 0 did not finish an epoch"
  kill -KILL "$(cat "$d/worker-1.pid")"
  for r in 0 2 3; do
    wait_line "$d/worker-$r.log" "^pipeline: rank $r (stage [01] of pipeline [01]): rank 1 (stage 1 of pipeline 0) is gone" 1 15 ||
      fail "D=2: rank $r did not stop naming rank 1: $(grep 'pipeline:' "$d/worker-$r.log")"
  done
  grep -h '^pipeline: rank [23] ' "$d"/worker-[23].log
  wait_exit "$launcher" 30
  grep -q 'workers exit statuses: 1 [0-9]* 1 1' "$d.out" || fail "D=2: not every other rank exited 1: $(tail -n 1 "$d.out")"
}

# A 2-stage pipeline whose second stage admits its peers' keys late
# (PSKV_TEST_FIRST_VIEW_DELAY: 4 s after its first view, past the barrier before
# the first micro-batch) refuses stage 0's CURVE handshake; stage 0 dials again
# on a fresh connection until admitted (ZeroMQ never would), and the job ends
# with the weights of a run without the delay, instead of a time-out.
tags pipeline_late_keys keys serial
t_pipeline_late_keys() {
  # shellcheck disable=SC2054 # commas inside one flag's value
  local args=(--app pipeline --consistency bsp --epochs 1 --stages 2 --layers 784,64,32,10
              --batch 32 --micro-batches 4 --train-limit 640 --test-limit 200 --print-digests
              --request-timeout 15) d="$TDIR/late" t0
  "$BIN/pskvctl" keys init "$TDIR/keys" --servers 1 --workers 2 > /dev/null || fail "keys init"
  "$LAUNCH" --keys "$TDIR/keys" --servers 1 --workers 2 --timeout 60 --log-dir "$TDIR/ref" -- \
    "${args[@]}" > "$TDIR/ref.out" 2>&1 || fail "the run without the delay exited $?"
  t0=$SECONDS
  PSKV_TEST_FIRST_VIEW_DELAY=1:4000 "$LAUNCH" --keys "$TDIR/keys" --servers 1 --workers 2 \
    --timeout 60 --log-dir "$d" -- "${args[@]}" > "$d.out" 2>&1 ||
    fail "exited $?: $(grep -h 'pipeline:' "$d"/worker-*.log | head -n 2)"
  [ "$(pl_digests "$d" 2)" = "$(pl_digests "$TDIR/ref" 2)" ] ||
    fail "digests$(pl_digests "$d" 2), without the delay$(pl_digests "$TDIR/ref" 2)"
  late_keys "$d" pskv_pipe "$t0"
}

# Bad flags exit 2 naming the flag: stages that do not divide the workers, more
# stages than layers, a split that does not fit the layers, an unknown schedule,
# layers that do not fit the images.
t_pipeline_bad_flags() {
  local args what n=0
  while IFS='|' read -r what args; do
    n=$((n + 1))
    # shellcheck disable=SC2086
    "$LAUNCH" --servers 1 --workers 2 --timeout 30 --log-dir "$TDIR/b$n" -- --app pipeline \
      --layers 784,64,10 $args > "$TDIR/b$n.out" 2>&1 && fail "$args passed"
    grep -q 'workers exit statuses: 2 2' "$TDIR/b$n.out" || fail "$args: not exit 2: $(tail -n 1 "$TDIR/b$n.out")"
    grep -q -- "$what" "$TDIR/b$n/worker-0.log" || fail "$args: no '$what': $(grep pipeline: "$TDIR/b$n/worker-0.log")"
  done <<'LIST'
--stages 3 does not divide the 2 workers|--stages 3
--stages must be 1..1|--stages 2 --layers 784,10
--split '2,1' must give|--stages 2 --split 2,1
--split '1' must give|--stages 2 --split 1
--schedule must be|--stages 2 --schedule zigzag
--layers starts at 700 inputs|--stages 2 --layers 700,64,10
LIST
}
