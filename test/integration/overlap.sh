# shellcheck shell=bash
# Overlap and accounting tests (sourced by integration.sh): --prefetch on the
# training apps, an async worker declared dead for a while that still trains every
# step, and the per-table traffic that pskvctl status shows. Each
# function runs in its own test directory ($TDIR) under run_test's time-out.

# waiting_fraction LOG: the fraction a worker's end-of-run report gives (empty if none).
waiting_fraction() {
  sed -n 's/^rank [0-9]* waiting fraction \([0-9.]*\) .*/\1/p' "$1"
}

tags train_prefetch serial
t_train_prefetch() {
  # 1 server x 2 workers, the MLP on a 6,000-image subset for 4 epochs with the
  # next step's pull sent before each step's compute: both async and ssp:1 reach
  # 0.70 on 1,000 test images, every example is trained exactly once an epoch (the
  # job-wide sum table), and each worker reports its waiting fraction and its CPU
  # (compute within the process's); the waiting floor (bench-lib.sh) of the job
  # comes out between 0 and 1. The ssp:1 job runs at the defaults (--prefetch left
  # unset is on under async and ssp:TAU >= 1; --pushpull left unset is on with it
  # and one server): a step's push, clock and pull are one pskv_pushpull
  # into a view, read in the received frame, each request sent once the previous
  # reply is back; the async one (--pushpull=false) pushes from push buffers, the
  # clock riding on each push (no CLOCK message); the async+shm one (--shm) makes the
  # pushpull through the shared region, each request sent before the previous reply
  # is waited for.
  local cons d acc n r f c fl sampler pp how
  . "$top/scripts/bench-lib.sh" # cpu_sampler, floor_of
  for cons in async ssp:1 async+shm; do
    d="$TDIR/${cons/:/}"
    pp=(--log-level info --prefetch)
    [ "$cons" != ssp:1 ] || pp=(--log-level info)
    how='pushpull into a view, the clock riding on it, each request sent once the previous reply is back'
    case "$cons" in
      async) pp+=(--pushpull=false); how='a push buffer, the clock riding on it, then' ;;
      async+shm) pp+=(--shm); how='pushpull into a view, the clock riding on it (' ;;
    esac
    mkdir -p "$d"
    cpu_sampler "$d" & sampler=$!
    "$LAUNCH" --servers 1 --workers 2 --timeout 150 --log-dir "$d" -- --app mlp --hidden 64 \
      --epochs 4 --train-limit 6000 --test-limit 1000 --batch 32 --lr 0.1 --momentum 0 \
      --lr-schedule const --seed 2 --eval-every 0 --consistency "${cons%+shm}" "${pp[@]}" \
      > /dev/null 2>&1 || fail "$cons: training exited $?: $(tail -n 3 "$d/worker-0.log")"
    wait "$sampler"
    fl=$(floor_of "$d")
    awk -v f="$fl" 'BEGIN { exit !(f > 0 && f < 1) }' || fail "$cons: waiting floor '$fl'"
    acc=$(grep -o 'final test accuracy [0-9.]*' "$d/worker-0.log" | awk '{print $4}')
    [ -n "$acc" ] || fail "$cons: no final accuracy: $(tail -n 3 "$d/worker-0.log")"
    awk -v a="$acc" 'BEGIN { exit !(a >= 0.70) }' || fail "$cons: test accuracy $acc < 0.70"
    n=$(sed -n 's/^samples trained \([0-9]*\) .*/\1/p' "$d/worker-0.log")
    [ "$n" = 24000 ] || fail "$cons: the job trained ${n:-?} samples, expected 4 x 6000"
    for r in 0 1; do
      f=$(waiting_fraction "$d/worker-$r.log")
      [ -n "$f" ] || fail "$cons: rank $r reported no waiting fraction: $(tail -n 4 "$d/worker-$r.log")"
      awk -v f="$f" 'BEGIN { exit !(f >= 0 && f <= 1) }' || fail "$cons: rank $r waiting fraction $f"
      c=$(sed -n 's/^rank [0-9]* cpu: compute \([0-9.]*\) s (its thread), the process \([0-9.]*\) s .*/\1 \2/p' \
          "$d/worker-$r.log")
      awk -v c="$c" 'BEGIN { exit !(split(c, a, " ") == 2 && a[1] > 0 && a[2] >= a[1]) }' ||
        fail "$cons: rank $r cpu line: '$c' ($(grep 'cpu:' "$d/worker-$r.log"))"
      grep -q "^rank $r exchange: $how" "$d/worker-$r.log" ||
        fail "$cons: rank $r: $(grep 'exchange:' "$d/worker-$r.log")"
      grep -q 'clock ends: 0 CLOCK messages sent, [1-9][0-9]* rode on pushes' "$d/worker-$r.log" ||
        fail "$cons: rank $r: $(grep 'clock ends' "$d/worker-$r.log")"
      [ "$cons" != ssp:1 ] ||
        grep -q 'view pulls: 0 read in place in shared memory, 0 copied, [1-9][0-9]* read in place in received TCP frames' \
          "$d/worker-$r.log" || fail "$cons --pushpull: rank $r: $(grep 'view pulls' "$d/worker-$r.log")"
      [ "$cons" != async+shm ] ||
        grep -q 'view pulls: [1-9][0-9]* read in place in shared memory, 0 copied' \
          "$d/worker-$r.log" || fail "$cons: rank $r: $(grep 'view pulls' "$d/worker-$r.log")"
    done
    echo "$cons --prefetch: accuracy $acc, waiting fractions $(waiting_fraction "$d/worker-0.log") $(waiting_fraction "$d/worker-1.log"), floor $fl"
  done
  # sparse-lr with (the default) and without: both learn heart_scale
  local hs=/usr/share/doc/liblinear-tools/examples/heart_scale pf
  [ -f "$hs" ] || fail "$hs missing (liblinear-tools is a dependency)"
  for pf in "" --prefetch=false; do
    d="$TDIR/sparse${pf}"
    "$LAUNCH" --servers 1 --workers 2 --timeout 120 --log-dir "$d" -- --app sparse-lr \
      --train "$hs" --epochs 20 --batch 8 --updater adagrad --lr 0.5 --eval-every 0 $pf \
      > /dev/null 2>&1 || fail "sparse-lr $pf exited $?: $(tail -n 3 "$d/worker-0.log")"
    acc=$(grep -o 'final auc [0-9.]* logloss [0-9.]* accuracy [0-9.]*' "$d/worker-0.log" | awk '{print $7}')
    awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.80) }' || fail "sparse-lr $pf: accuracy ${acc:-?} < 0.80"
    echo "sparse-lr ${pf:-at the default --prefetch}: accuracy $acc"
  done
}

t_prefetch_bad_flags() {
  # --prefetch where a step must see the clock before (bsp, ssp:0), with an
  # all-reduce, or on an app that does not train: refused before joining, naming it
  local args rc
  for args in "--app mlp --consistency bsp" "--app softmax --consistency ssp:0" \
              "--app sparse-lr --train x --consistency bsp" "--app mlp --sync allreduce" \
              "--app check" "--app mlp --consistency ssp:x"; do
    # shellcheck disable=SC2086
    "$BIN/pskv-worker" --scheduler 127.0.0.1:1 $args --prefetch > out 2>&1; rc=$?
    [ $rc -eq 2 ] || fail "--prefetch with $args exited $rc, expected 2: $(cat out)"
    grep -q -- '--prefetch' out || fail "the error for $args does not name --prefetch: $(cat out)"
  done
  PSKV_WORKER_PREFETCH=1 "$BIN/pskv-worker" --scheduler 127.0.0.1:1 --app mlp --consistency bsp \
    > out 2>&1; rc=$?
  [ $rc -eq 2 ] || fail "PSKV_WORKER_PREFETCH=1 under bsp exited $rc, expected 2"
}

tags status_traffic slow
t_status_traffic() {
  # 1 server x 2 workers training with int8 pushes: while the job runs, pskvctl
  # status shows each worker's table with bytes sent and received on the wire and
  # before the filters (int8 sends about a quarter of the push's bytes) and the
  # time in filters, in JSON and in the table; each worker's end-of-run report
  # gives the same per table, at least what status showed.
  local port r js shown=0 deadline=$((SECONDS + 90)) tbl=mlp-784-64-10
  local app=(--app mlp --hidden 64 --epochs 10 --train-limit 4000 --test-limit 200 --batch 4
             --eval-every 0 --filter int8)
  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 2
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port"
  for r in 0 1; do
    start "worker-$r" "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank $r "${app[@]}"
  done
  while [ $shown -eq 0 ] && [ $SECONDS -lt $deadline ] && kill -0 "$(cat worker-0.pid)" 2>/dev/null; do
    js=$("$BIN/pskvctl" status --json --scheduler "127.0.0.1:$port" --timeout 2 2>&1)
    # both workers' entries for the parameter table, with bytes sent
    [ "$(grep -o "{\"table\":\"$tbl\",\"sent\":[1-9][0-9]*," <<< "$js" | wc -l)" -eq 2 ] && shown=1 || sleep 0.2
  done
  [ $shown -eq 1 ] || fail "pskvctl status --json showed no traffic of $tbl for both workers: $js"
  local e sent raw recv recv_raw ms
  while read -r e; do
    sent=$(sed 's/.*"sent":\([0-9]*\),.*/\1/' <<< "$e"); raw=$(sed 's/.*"sent_raw":\([0-9]*\),.*/\1/' <<< "$e")
    recv=$(sed 's/.*"received":\([0-9]*\),.*/\1/' <<< "$e"); recv_raw=$(sed 's/.*"received_raw":\([0-9]*\),.*/\1/' <<< "$e")
    ms=$(sed 's/.*"filter_ms":\([0-9.]*\)}.*/\1/' <<< "$e")
    awk -v s="$sent" -v r="$raw" 'BEGIN { exit !(s * 3 < r) }' || fail "int8: sent $sent of $raw raw bytes (expected < 1/3): $e"
    [ "$recv" -le "$recv_raw" ] || fail "received $recv > $recv_raw before filters: $e"
    awk -v m="$ms" 'BEGIN { exit !(m > 0) }' || fail "no time in filters: $e"
  done < <(grep -o "{\"table\":\"$tbl\",[^}]*}" <<< "$js")
  "$BIN/pskvctl" status --scheduler "127.0.0.1:$port" --timeout 2 > status.out 2>&1
  grep -q 'SENT RAW.*RECEIVED RAW.*FILTER MS' status.out || fail "no traffic table in pskvctl status: $(cat status.out)"
  [ "$(grep -c " $tbl " status.out)" -eq 2 ] || fail "pskvctl status lacks a worker's row for $tbl: $(cat status.out)"
  local line shown_sent final_sent=0
  shown_sent=$(grep -o "{\"table\":\"$tbl\",\"sent\":[0-9]*" <<< "$js" | awk -F: '{ s += $3 } END { print s }')
  for r in 0 1; do
    wait_exit "$(cat "worker-$r.pid")" 120 || fail "worker $r exited $?: $(tail -n 2 "worker-$r.log")"
    line=$(grep "^rank $r table $tbl: sent [0-9]* bytes ([0-9]* before filters), received [0-9]* ([0-9]* before), [0-9.]* ms in filters$" "worker-$r.log") ||
      fail "worker $r: no traffic line in its report: $(tail -n 4 "worker-$r.log")"
    final_sent=$((final_sent + $(sed 's/.*: sent \([0-9]*\) bytes.*/\1/' <<< "$line")))
    echo "$line"
  done
  [ "$final_sent" -ge "$shown_sent" ] || fail "the workers' reports say $final_sent bytes sent, status showed $shown_sent earlier"
  echo "status showed $shown_sent bytes sent while running; the reports $final_sent at the end"
  wait_exit "$(cat scheduler.pid)" 20 || fail "the scheduler exited $?"
}

tags async_paused_worker slow
t_async_paused_worker() {
  # Async, 2 workers: rank 1 is stopped (SIGSTOP) for 1.2 s after its first epoch,
  # so the scheduler may declare it dead (its time-out: 0.8 to 5 s) and the servers count
  # only rank 0's clock; once continued it comes back and trains every one of its
  # steps (it used to adopt the clock of rank 0's replies and skip the steps
  # between): each worker trains 10 x 3,000 examples, the job 60,000.
  local d=$TDIR/logs p i n
  "$LAUNCH" --servers 1 --workers 2 --timeout 150 --log-dir "$d" -- --app mlp --hidden 64 \
    --epochs 10 --train-limit 6000 --test-limit 200 --batch 4 --eval-every 0 > launch.out 2>&1 &
  p=$!
  wait_line "$d/worker-1.log" '^rank 1 epoch 1:' 1 120 || fail "rank 1 finished no epoch: $(tail -n 3 "$d/worker-1.log")"
  kill -STOP "$(cat "$d/worker-1.pid")"
  sleep 1.2
  kill -CONT "$(cat "$d/worker-1.pid")"
  wait "$p" || fail "the job exited $?: $(tail -n 3 "$d/worker-0.log") $(tail -n 3 "$d/worker-1.log")"
  grep -q 'marked dead' "$d/scheduler.log" || echo "note: rank 1 was not declared dead in 2 s"
  for i in 0 1; do
    grep -q "^rank $i trained 30000 samples$" "$d/worker-$i.log" ||
      fail "rank $i: $(grep trained "$d/worker-$i.log"), expected 30000"
  done
  n=$(sed -n 's/^samples trained \([0-9]*\) .*/\1/p' "$d/worker-0.log")
  [ "$n" = 60000 ] || fail "the job trained ${n:-?} samples, expected 60000"
}
