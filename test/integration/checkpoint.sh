# Checkpoints (sourced by integration.sh): written every N steps, kept, incremental,
# resumed, exported.

# ckpt_job PORT [SCHEDULER FLAGS...]: a checkpointing check job on loopback: a
# scheduler with --data-dir $TDIR/sched, two servers with $TDIR/s0 and $TDIR/s1, one
# --count-acked check worker that runs until ckpt_job_end touches its stop file.
ckpt_job() {
  local port=$1 i; shift
  mkdir -p "$TDIR/sched" "$TDIR/s0" "$TDIR/s1"
  trap 'kill -KILL $(cat "$TDIR"/*.pid) 2>/dev/null' EXIT # what is left on a failure
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 2 --workers 1 \
    --data-dir "$TDIR/sched" "$@"
  for i in 0 1; do
    start "server$i" "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --data-dir "$TDIR/s$i"
  done
  start worker "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --app check --count-acked \
    --rounds 1000000 --slowdown 2 --stop-file "$TDIR/stop"
}

# ckpt_job_end: the worker stops on its stop file with its exact sums, and the
# scheduler exits (each wait bounded).
ckpt_job_end() {
  touch "$TDIR/stop"
  wait_exit "$(cat "$TDIR/worker.pid")" 30 || fail "worker exited $?: $(tail -n 2 "$TDIR/worker.log")"
  grep -q '^check ok' "$TDIR/worker.log" || fail "the check failed: $(tail -n 1 "$TDIR/worker.log")"
  wait_exit "$(cat "$TDIR/scheduler.pid")" 20 || fail "scheduler exited $?"
}

t_checkpoint_every() {
  # the scheduler's --checkpoint-every during a running job: complete checkpoints
  # one after another (with --full-every 2: full, delta, full, ...), each in the
  # manifest and in both servers' directories, the job's exact sums unharmed; and a
  # --resume from the newest loads it
  local port i n seqs last kinds
  port=$(free_port)
  ckpt_job "$port" --checkpoint-every 0.5 --full-every 2
  wait_line "$TDIR/scheduler.log" 'checkpoint [0-9]* complete' 3 60 ||
    fail "fewer than 3 checkpoints in 60 s: $(grep -h checkpoint "$TDIR/scheduler.log" | tail -n 3)"
  ckpt_job_end
  seqs=$(sed -n 's/^ckpt seq=\([0-9]*\) .*/\1/p' "$TDIR/sched/manifest" | paste -sd ' ')
  n=$(wc -w <<< "$seqs")
  [ "$n" -ge 3 ] || fail "the manifest lists $n checkpoints: $(cat "$TDIR/sched/manifest")"
  [ "$seqs" = "$(seq 1 "$n" | paste -sd ' ')" ] || fail "checkpoints not numbered 1..$n: $seqs"
  kinds=$(sed -n 's/^ckpt .* kind=\([a-z]*\) .*/\1/p' "$TDIR/sched/manifest" | paste -sd ' ')
  [ "$kinds" = "$(for i in $(seq 1 "$n"); do [ $((i % 2)) -eq 1 ] && echo full || echo delta; done | paste -sd ' ')" ] ||
    fail "--full-every 2 gave checkpoints of kinds '$kinds'"
  last=${seqs##* }
  for i in 0 1; do
    ls "$TDIR/s$i"/ckpt-*-"$last"-*.pskv > /dev/null 2>&1 || fail "server $i has no file of checkpoint $last"
  done
  port=$(free_port)
  start sched-r "$BIN/pskv-scheduler" --port "$port" --servers 2 --workers 1 --data-dir "$TDIR/sched" --resume
  for i in 0 1; do
    start "server$i-r" "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --data-dir "$TDIR/s$i"
  done
  start worker-r "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --app check --rounds 1 # the job starts
  wait_line "$TDIR/sched-r.log" "resuming job [0-9]* from checkpoint $last " 1 30 ||
    fail "the resumed scheduler did not take checkpoint $last: $(tail -n 3 "$TDIR/sched-r.log")"
  for i in 0 1; do
    wait_line "$TDIR/server$i-r.log" "loaded checkpoint $last from" 1 30 ||
      fail "server $i did not load checkpoint $last: $(tail -n 3 "$TDIR/server$i-r.log")"
  done
  kill -KILL $(cat "$TDIR"/*-r.pid) 2>/dev/null
  return 0
}

tags keep_checkpoints slow
t_keep_checkpoints() {
  # --keep-checkpoints 2: after four checkpoints the manifest lists the two newest,
  # and each server's data directory holds their files and no others
  local port i n seqs files
  port=$(free_port)
  "$BIN/pskv-scheduler" --keep-checkpoints 2 > out 2>&1; [ $? -eq 2 ] || fail "--keep-checkpoints without --data-dir accepted"
  grep -q -- '--keep-checkpoints' out || fail "the refusal does not name the flag: $(cat out)"
  ckpt_job "$port" --keep-checkpoints 2
  for i in $(seq 100); do # the job runs once every node registered (at most 10 s)
    "$BIN/pskvctl" --scheduler "127.0.0.1:$port" status 2>/dev/null | grep -q 'state running' && break
    sleep 0.1
  done
  for n in 1 2 3 4; do
    "$BIN/pskvctl" --scheduler "127.0.0.1:$port" checkpoint > ck.out 2>&1 || fail "checkpoint $n: $(cat ck.out)"
    grep -q "checkpoint $n complete" ck.out || fail "checkpoint $n: $(cat ck.out)"
    ls "$TDIR"/s0/ckpt-*-"$n"-*.pskv > /dev/null 2>&1 || fail "no file of checkpoint $n in s0"
  done
  ckpt_job_end
  seqs=$(sed -n 's/^ckpt seq=\([0-9]*\) .*/\1/p' "$TDIR/sched/manifest" | paste -sd ' ')
  [ "$seqs" = "3 4" ] || fail "the manifest lists checkpoints '$seqs', expected '3 4': $(cat "$TDIR/sched/manifest")"
  for i in 0 1; do
    files=$(cd "$TDIR/s$i" && ls | sed 's/^ckpt-[0-9]*-\([0-9]*\)-[0-9]*\.pskv$/\1/' | paste -sd ' ')
    [ "$files" = "3 4" ] || fail "server $i's directory holds checkpoints '$files': $(ls "$TDIR/s$i")"
  done
  [ "$(grep -c 'removed 1 older checkpoint from the manifest; servers delete their files numbered below' \
      "$TDIR/scheduler.log")" -eq 2 ] || fail "the scheduler did not log the removals: $(grep keep-checkpoints "$TDIR/scheduler.log")"
  # what is kept resumes: resume-check's checkpoints 5 and 6 (steps 5 and 10) with
  # --keep-checkpoints 1 leave 6 alone, and a resumed job loads it exactly
  keep_job() { # keep_job PHASE [SCHEDULER FLAGS...]: a resume-check job on the same directories
    local phase=$1 r; shift
    port=$(free_port)
    start "sched-$phase" "$BIN/pskv-scheduler" --port "$port" --servers 2 --workers 2 \
      --data-dir "$TDIR/sched" --keep-checkpoints 1 "$@"
    for r in 0 1; do
      start "s$r-$phase" "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --data-dir "$TDIR/s$r"
      start "w$r-$phase" "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank $r --app resume-check --rounds 10
    done
  }
  keep_job fresh
  wait_line "$TDIR/w0-fresh.log" 'after step 10 digest' 1 60 || fail "the fresh resume-check job did not finish: $(tail -n 2 "$TDIR/w0-fresh.log")"
  kill -KILL $(cat "$TDIR"/*-fresh.pid) 2>/dev/null; sleep 0.2
  local want
  want=$(sed -n 's/.*checkpoint 6 at step 10 digest \([0-9a-f]*\).*/\1/p' "$TDIR/w0-fresh.log")
  [ -n "$want" ] || fail "no digest of checkpoint 6: $(grep checkpoint "$TDIR/w0-fresh.log")"
  seqs=$(sed -n 's/^ckpt seq=\([0-9]*\) .*/\1/p' "$TDIR/sched/manifest" | paste -sd ' ')
  [ "$seqs" = "6" ] || fail "the manifest lists '$seqs', expected '6'"
  for i in 0 1; do
    files=$(cd "$TDIR/s$i" && ls | sed 's/^ckpt-[0-9]*-\([0-9]*\)-[0-9]*\.pskv$/\1/' | paste -sd ' ')
    [ "$files" = "6" ] || fail "server $i's directory holds checkpoints '$files'"
  done
  keep_job resumed --resume
  for i in 0 1; do
    wait_exit "$(cat "$TDIR/w$i-resumed.pid")" 60 || fail "resumed worker $i exited $?: $(tail -n 2 "$TDIR/w$i-resumed.log")"
  done
  grep -q 'rank 0 resumed at step 10 ' "$TDIR/w0-resumed.log" || fail "not resumed at step 10: $(grep resume "$TDIR/w0-resumed.log")"
  grep -q "resumed digest $want" "$TDIR/w0-resumed.log" || fail "resumed values differ from checkpoint 6's"
}

# incr_job DIR NAME [SCHEDULER FLAGS...]: an incr-check job (2 servers, 1 worker:
# 3000 keys in a dense and a sparse table, 14 rounds touching 10% of them, sparse
# rows evicted after 3 clocks, a checkpoint every 2 rounds) on DIR's directories;
# the worker's output in $TDIR/NAME-w.log. Returns the worker's status.
incr_job() {
  local d=$1 name=$2 port i rc; shift 2
  port=$(free_port)
  mkdir -p "$d/sched" "$d/s0" "$d/s1"
  start "$name-sched" "$BIN/pskv-scheduler" --port "$port" --servers 2 --workers 1 \
    --data-dir "$d/sched" "$@"
  for i in 0 1; do
    start "$name-s$i" "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --data-dir "$d/s$i"
  done
  timeout 120 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --app incr-check --check-keys 3000 \
    --rounds 14 --checkpoint-epochs 2 --touch 10 --evict-after 3 > "$TDIR/$name-w.log" 2>&1
  rc=$?
  wait_exit "$(cat "$TDIR/$name-sched.pid")" 20 > /dev/null 2>&1
  kill -KILL $(cat "$TDIR/$name"-s[01].pid) 2>/dev/null
  return $rc
}

# digest_at LOG N: the digest the worker printed at checkpoint N
digest_at() { sed -n "s/^incr-check: checkpoint $2 at step [0-9]* digest \([0-9a-f]*\)$/\1/p" "$1"; }

t_checkpoint_incremental() {
  # --full-every 3: checkpoints 1 full, 2-3 deltas, 4 full, 5-6 deltas, 7 full; a
  # delta holds the rows changed since (10% a round, and tombstones of evicted
  # ones) and is smaller. A resume from delta 6 (full 4 + deltas 5, 6) equals
  # a resume from the full checkpoint 6 of the same job run with every checkpoint
  # full, bit for bit: the digest at the checkpoint and, after two more rounds of
  # adagrad and adam (whose state came back too), the final digest. Retention keeps
  # what a kept delta builds on; a damaged delta makes its checkpoint unusable.
  local a=$TDIR/a b=$TDIR/b i k kinds full_b delta_b
  incr_job "$a" a --full-every 3 --keep-checkpoints 3 || fail "job a: $(tail -n 2 "$TDIR/a-w.log")"
  incr_job "$b" b || fail "job b: $(tail -n 2 "$TDIR/b-w.log")"
  kinds=$(sed -n 's/^ckpt seq=.* kind=\([a-z]*\) .*/\1/p' "$a/sched/manifest" | paste -sd ' ')
  [ "$kinds" = "delta delta full" ] || fail "job a's manifest: kinds '$kinds': $(cat "$a/sched/manifest")"
  for k in 1 4 7; do
    grep -q "checkpoint $k complete in [0-9]* ms (full, [0-9]* bytes)" "$TDIR/a-sched.log" || fail "checkpoint $k not full: $(grep "checkpoint $k complete" "$TDIR/a-sched.log")"
  done
  for k in 2 3 5 6; do
    grep -q "checkpoint $k complete in [0-9]* ms (delta, [0-9]* bytes)" "$TDIR/a-sched.log" || fail "checkpoint $k not a delta: $(grep "checkpoint $k complete" "$TDIR/a-sched.log")"
  done
  grep -q 'checkpoint 6 written in [0-9]* ms (delta over 5, base 4, [0-9]* bytes' "$TDIR/a-s0.log" || fail "server 0: $(grep 'checkpoint 6 written' "$TDIR/a-s0.log")"
  full_b=$(sed -n 's/.*checkpoint 4 complete in [0-9]* ms (full, \([0-9]*\) bytes).*/\1/p' "$TDIR/a-sched.log")
  delta_b=$(sed -n 's/.*checkpoint 5 complete in [0-9]* ms (delta, \([0-9]*\) bytes).*/\1/p' "$TDIR/a-sched.log")
  echo "checkpoint 4 (full) $full_b bytes, checkpoint 5 (delta) $delta_b bytes"
  [ -n "$delta_b" ] && [ "$delta_b" -lt "$full_b" ] || fail "a delta of $delta_b bytes against a full $full_b"
  # retention (--keep-checkpoints 3: the manifest keeps 5, 6, 7) kept file 4, which 5 and 6 build on
  for i in 0 1; do
    k=$(cd "$a/s$i" && ls | sed 's/^ckpt-[0-9]*-\([0-9]*\)-[0-9]*\.pskv$/\1/' | sort -n | paste -sd ' ')
    [ "$k" = "4 5 6 7" ] || fail "job a's server $i holds checkpoints '$k'"
  done
  for k in 2 6; do
    [ -n "$(digest_at "$TDIR/a-w.log" $k)" ] && [ "$(digest_at "$TDIR/a-w.log" $k)" = "$(digest_at "$TDIR/b-w.log" $k)" ] ||
      fail "the two jobs differ at checkpoint $k: $(digest_at "$TDIR/a-w.log" $k) $(digest_at "$TDIR/b-w.log" $k)"
  done
  local final want
  final=$(sed -n 's/^incr-check: final digest //p' "$TDIR/a-w.log")
  [ -n "$final" ] && [ "$final" = "$(sed -n 's/^incr-check: final digest //p' "$TDIR/b-w.log")" ] || fail "the two jobs' final digests differ"
  # resume both from checkpoint 6 (the manifest without 7)
  cp -a "$a" "$TDIR/c" # for the damaged delta below
  for d in "$a" "$b" "$TDIR/c"; do sed -i '/^ckpt seq=7 /d' "$d/sched/manifest"; done
  want=$(digest_at "$TDIR/a-w.log" 6)
  for j in a b; do
    incr_job "$TDIR/$j" "$j-r" --resume || fail "resumed job $j: $(tail -n 2 "$TDIR/$j-r-w.log")"
    grep -q "^incr-check: resumed at step 12 digest $want\$" "$TDIR/$j-r-w.log" || fail "job $j resumed: $(grep resumed "$TDIR/$j-r-w.log") (checkpoint 6: $want)"
    grep -q "^incr-check: final digest $final\$" "$TDIR/$j-r-w.log" || fail "job $j resumed ends with $(grep final "$TDIR/$j-r-w.log"), not $final"
  done
  grep -q 'loaded checkpoint 6 from .* (a delta: the full checkpoint 4 and 2 deltas)' "$TDIR/a-r-s0.log" || fail "server 0 of job a: $(grep loaded "$TDIR/a-r-s0.log")"
  # the rows held once loaded: the tombstones removed what eviction had (before any sweep)
  held() { cat "$TDIR/$1"-r-s[01].log | sed -n 's/.*loaded checkpoint 6 from .* rows read, \([0-9]*\) held.*/\1/p' | paste -sd+ | bc; }
  [ -n "$(held a)" ] && [ "$(held a)" = "$(held b)" ] || fail "rows held after loading checkpoint 6: $(held a) from the delta, $(held b) from the full one"
  # a damaged delta: checkpoint 6 cannot be used, 5 (full 4 + delta 5) is
  local f
  f=$(ls "$TDIR"/c/s0/ckpt-*-6-*.pskv)
  printf 'X' | dd of="$f" bs=1 seek=200 conv=notrunc 2>/dev/null
  incr_job "$TDIR/c" c-r --resume || fail "resumed job c: $(tail -n 2 "$TDIR/c-r-w.log")"
  grep -q "checkpoint file refused: $f: checksum mismatch" "$TDIR/c-r-s0.log" || fail "the damaged file is not named: $(grep refused "$TDIR/c-r-s0.log")"
  grep -q 'checkpoint 6 cannot be used' "$TDIR/c-r-sched.log" || fail "checkpoint 6 was not refused: $(grep -i checkpoint "$TDIR/c-r-sched.log" | head -n 3)"
  grep -q 'resuming job [0-9]* from checkpoint 5 ' "$TDIR/c-r-sched.log" || fail "not resumed from 5: $(grep resum "$TDIR/c-r-sched.log")"
  want=$(digest_at "$TDIR/a-w.log" 5)
  grep -q "^incr-check: resumed at step 10 digest $want\$" "$TDIR/c-r-w.log" || fail "resumed from 5: $(grep resumed "$TDIR/c-r-w.log") (checkpoint 5: $want)"
  grep -q "^incr-check: final digest $final\$" "$TDIR/c-r-w.log" || fail "resumed from 5, ends with $(grep final "$TDIR/c-r-w.log")"
}

tags train_resume slow
t_train_resume() {
  # an mlp job (bsp, 2 servers x 2 workers, 3 epochs) checkpointing at the end of
  # its second epoch (--checkpoint-epochs 2), killed -9 (every daemon) during its
  # third and resumed with --resume: it goes on at the checkpoint's step and
  # finishes the steps of an uninterrupted run, to its test accuracy within 0.005
  local port i acc_full acc_res n_full s_res n_res
  local flags=(--app mlp --consistency bsp --epochs 3 --train-limit 2000
               --test-limit 1000 --hidden 64 --lr 0.05 --lr-schedule cosine --seed 3 --eval-every 1
               --checkpoint-epochs 2)
  trap 'kill -KILL $(cat "$TDIR"/*.pid) 2>/dev/null' EXIT # what is left on a failure
  resume_job() { # resume_job PHASE DIR [WORKER FLAGS...] (-- SCHEDULER FLAGS...)
    local phase=$1 dir=$2 r wflags=() sflags=(); shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do wflags+=("$1"); shift; done
    [ $# -gt 0 ] && { shift; sflags=("$@"); }
    mkdir -p "$dir/sched" "$dir/s0" "$dir/s1"
    port=$(free_port)
    start "sched-$phase" "$BIN/pskv-scheduler" --port "$port" --servers 2 --workers 2 \
      --data-dir "$dir/sched" "${sflags[@]}"
    for r in 0 1; do
      start "s$r-$phase" "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --data-dir "$dir/s$r"
      start "w$r-$phase" "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank $r "${flags[@]}" \
        --metrics "$dir/m$r-$phase.jsonl" "${wflags[@]}"
    done
  }
  steps_of() { sed -n 's/^rank 0 step time: .*(\([0-9]*\) steps)$/\1/p' "$1"; }
  acc_of() { sed -n 's/^final test accuracy \([0-9.]*\) .*/\1/p' "$1"; }
  resume_job full "$TDIR/a"
  for i in 0 1; do
    wait_exit "$(cat "$TDIR/w$i-full.pid")" 150 || fail "uninterrupted worker $i exited $?: $(tail -n 2 "$TDIR/w$i-full.log")"
  done
  acc_full=$(acc_of "$TDIR/w0-full.log"); n_full=$(steps_of "$TDIR/w0-full.log")
  [ -n "$acc_full" ] && [ -n "$n_full" ] || fail "no accuracy or steps: $(tail -n 3 "$TDIR/w0-full.log")"
  # the same job, slowed down (the same arithmetic) so that the kill comes in epoch 3
  resume_job killed "$TDIR/b" --slowdown 200
  wait_line "$TDIR/w0-killed.log" '^checkpoint 1 at epoch 2 step' 1 120 ||
    fail "no checkpoint at epoch 2: $(tail -n 3 "$TDIR/w0-killed.log")"
  kill -KILL $(cat "$TDIR"/*-killed.pid) 2>/dev/null; sleep 0.2
  grep -q 'final test accuracy' "$TDIR/w0-killed.log" && fail "the job finished before the kill"
  # pskvctl export: the checkpoint's two servers' files as one model file, which a
  # single-process evaluation (lr 0: weights unchanged) scores as rank 0 did at step 126
  local acc_ck acc_exp
  "$BIN/pskvctl" export --checkpoint 1 --out "$TDIR/ck.model" > ex.out 2>&1; [ $? -eq 2 ] ||
    fail "export without --from: $(cat ex.out)"
  "$BIN/pskvctl" export --checkpoint 9 --from "$TDIR/b/s0,$TDIR/b/s1" --out "$TDIR/x.model" > ex.out 2>&1 &&
    fail "exported a checkpoint that does not exist"
  grep -q 'no file of checkpoint 9' ex.out || fail "no clear error for a missing checkpoint: $(cat ex.out)"
  "$BIN/pskvctl" export --checkpoint 1 --from "$TDIR/b/s0" --out "$TDIR/x.model" > ex.out 2>&1 &&
    fail "exported from one server's files of two"
  grep -q 'in none of the files' ex.out || fail "no clear error for missing rows: $(cat ex.out)"
  "$BIN/pskvctl" export --checkpoint 1 --from "$TDIR/b/s0,$TDIR/b/s1" --out "$TDIR/ck.model" > ex.out 2>&1 ||
    fail "export exited $?: $(cat ex.out)"
  grep -q 'mlp 784-64-10 model of checkpoint 1 (2 files)' ex.out || fail "export said: $(cat ex.out)"
  "$LAUNCH" --servers 1 --workers 1 --timeout 120 --log-dir "$TDIR/eval" -- --app mlp --hidden 64 \
    --epochs 1 --train-limit 64 --test-limit 1000 --lr 0 --momentum 0 --eval-every 0 \
    --init-from "$TDIR/ck.model" > /dev/null 2>&1 || fail "evaluating the exported model failed: $(tail -n 2 "$TDIR/eval/worker-0.log")"
  acc_exp=$(acc_of "$TDIR/eval/worker-0.log")
  acc_ck=$(sed -n 's/^epoch 2.00  step 126 .* accuracy \([0-9.]*\) .*/\1/p' "$TDIR/w0-killed.log")
  echo "checkpoint 1 (step 126): accuracy $acc_ck when trained, $acc_exp from the exported model"
  [ -n "$acc_ck" ] && [ "$acc_exp" = "$acc_ck" ] || fail "exported model scores ${acc_exp:-nothing}, the checkpoint ${acc_ck:-nothing}"
  resume_job resumed "$TDIR/b" -- --resume
  for i in 0 1; do
    wait_exit "$(cat "$TDIR/w$i-resumed.pid")" 150 || fail "resumed worker $i exited $?: $(tail -n 2 "$TDIR/w$i-resumed.log")"
  done
  s_res=$(sed -n 's/^resumed at epoch 2 step \([0-9]*\) of .*/\1/p' "$TDIR/w0-resumed.log")
  [ -n "$s_res" ] || fail "not resumed at epoch 2: $(grep -i resum "$TDIR/w0-resumed.log")"
  acc_res=$(acc_of "$TDIR/w0-resumed.log"); n_res=$(steps_of "$TDIR/w0-resumed.log")
  [ -n "$acc_res" ] && [ -n "$n_res" ] || fail "no accuracy or steps after resuming: $(tail -n 3 "$TDIR/w0-resumed.log")"
  echo "uninterrupted: $n_full steps, accuracy $acc_full; resumed at step $s_res: $n_res more steps, accuracy $acc_res"
  grep -h '^epoch 3.00 ' "$TDIR/w0-full.log" "$TDIR/w0-resumed.log" # the final evaluations, to compare
  [ $((s_res + n_res)) -eq "$n_full" ] || fail "$s_res + $n_res steps, not the $n_full of the uninterrupted run"
  awk -v a="$acc_full" -v b="$acc_res" 'BEGIN { d = a - b; exit !(d <= 0.005 && d >= -0.005) }' ||
    fail "accuracy $acc_res after resuming, $acc_full uninterrupted"
  grep -q "\"resumed_at_epoch\":2,\"resumed_at_step\":$s_res" "$TDIR/b/m0-resumed.jsonl" ||
    fail "the metrics do not note the resume: $(cat "$TDIR/b/m0-resumed.jsonl")"
  wait_exit "$(cat "$TDIR/sched-resumed.pid")" 20 || fail "the resumed scheduler exited $?"
  # resumed with another --batch, the recorded progress does not fit: refused by name
  resume_job refit "$TDIR/b" --batch 32 -- --resume
  wait_exit "$(cat "$TDIR/w0-refit.pid")" 60; [ $? -eq 1 ] || fail "a resume with another --batch ran: $(tail -n 2 "$TDIR/w0-refit.log")"
  grep -q "progress (epoch 2, step 126, position 0) does not fit" "$TDIR/w0-refit.log" ||
    fail "no clear refusal: $(grep -v INFO "$TDIR/w0-refit.log" | tail -n 2)"
  kill -KILL $(cat "$TDIR"/*-refit.pid) 2>/dev/null
  trap - EXIT
}

t_export_sparse() {
  # sparse-lr with --checkpoint-epochs 1 (2 epochs) on 2 servers sharing one --data-dir
  # and R = 2 (each partition in two files), --full-every 2 (checkpoint 2 is a delta
  # over 1): pskvctl export writes the sparse weights once, and a single-process
  # evaluation of the file (lr 0) scores as rank 0 did at the end
  local auc_ck auc_exp
  mkdir -p "$TDIR/sched" "$TDIR/data"
  "$BIN/pskv-gen-sparse" --examples 6000 --features 3000 --out "$TDIR/gen" --seed 5 > gen.out ||
    fail "gen-sparse failed: $(cat gen.out)"
  "$LAUNCH" --servers 2 --workers 2 --timeout 120 --log-dir "$TDIR/logs" \
    --scheduler-opt --data-dir --scheduler-opt "$TDIR/sched" --scheduler-opt --replicas --scheduler-opt 2 \
    --scheduler-opt --full-every --scheduler-opt 2 \
    --server-opt --data-dir --server-opt "$TDIR/data" -- --app sparse-lr --train "$TDIR/gen.train" \
    --test "$TDIR/gen.test" --epochs 2 --batch 64 --eval-every 0 --checkpoint-epochs 1 || fail "training exited $?"
  grep -q '^checkpoint 2 at epoch 2 step' "$TDIR/logs/worker-0.log" || fail "no checkpoint: $(tail -n 3 "$TDIR/logs/worker-0.log")"
  grep -q '^ckpt seq=2 .* kind=delta ' "$TDIR/sched/manifest" || fail "checkpoint 2 is not a delta: $(cat "$TDIR/sched/manifest")"
  "$BIN/pskvctl" export --checkpoint 2 --from "$TDIR/data" --out "$TDIR/x.model" > ex.out 2>&1 ||
    fail "export exited $?: $(cat ex.out)"
  grep -q 'sparse-lr 0-0-1 model of checkpoint 2 (2 files)' ex.out || fail "export said: $(cat ex.out)"
  "$LAUNCH" --servers 1 --workers 1 --timeout 120 --log-dir "$TDIR/eval" -- --app sparse-lr \
    --train "$TDIR/gen.train" --test "$TDIR/gen.test" --epochs 1 --batch 64 --lr 0 --momentum 0 \
    --eval-every 0 --init-from "$TDIR/x.model" > /dev/null 2>&1 || fail "evaluation exited $?: $(tail -n 2 "$TDIR/eval/worker-0.log")"
  auc_ck=$(sed -n 's/^final auc \([0-9.]*\) logloss \([0-9.]*\) .*/\1 \2/p' "$TDIR/logs/worker-0.log")
  auc_exp=$(sed -n 's/^final auc \([0-9.]*\) logloss \([0-9.]*\) .*/\1 \2/p' "$TDIR/eval/worker-0.log")
  echo "auc, logloss: $auc_ck trained, $auc_exp from the exported model"
  [ -n "$auc_ck" ] && [ "$auc_exp" = "$auc_ck" ] || fail "exported model scores '${auc_exp}', the checkpoint '${auc_ck}'"
  # a damaged file (one of checkpoint 1, which 2 builds on) is refused by name, and
  # nothing is written
  local f
  f=$(ls "$TDIR"/data/ckpt-*.pskv | head -n 1)
  cp "$f" "$TDIR/good.pskv"
  printf '\x5a' | dd of="$f" bs=1 seek=$(( $(stat -c %s "$f") / 2 )) conv=notrunc status=none
  cmp -s "$f" "$TDIR/good.pskv" && printf '\xa5' | dd of="$f" bs=1 seek=$(( $(stat -c %s "$f") / 2 )) conv=notrunc status=none
  "$BIN/pskvctl" export --checkpoint 2 --from "$TDIR/data" --out "$TDIR/y.model" > ex.out 2>&1 &&
    fail "exported from a damaged file"
  grep -q "$f" ex.out || fail "the refusal does not name the file: $(cat ex.out)"
  [ ! -e "$TDIR/y.model" ] || fail "a model file was written from a damaged checkpoint"
}
