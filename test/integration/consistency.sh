# Consistency models (sourced by integration.sh): async, ssp and bsp on real
# servers, stragglers, backups, workers leaving, accumulation.

t_consistency_check() {
  # --app check under every model: bsp exact at every clock, ssp within its bound,
  # async exact after the barrier; 3 workers x 2 servers, many clocks
  local c
  for c in bsp ssp:2 async; do
    "$LAUNCH" --servers 2 --workers 3 --timeout 150 --log-dir "$TDIR/logs-$c" -- --app check \
      --consistency "$c" --rounds 25 --check-keys 300 || fail "check under $c exited $?"
    for r in 0 1 2; do
      grep -q '^check ok:' "$TDIR/logs-$c/worker-$r.log" || fail "$c worker $r: $(tail -n 1 "$TDIR/logs-$c/worker-$r.log")"
    done
  done
}

t_bsp_same_bits() {
  # the same bits on every run, and with R = 2 (pulls from the tails, which apply
  # each close as the head did) the same bits as with R = 1
  local h1 h2 h3
  for i in 1 2 3; do
    "$LAUNCH" --servers 2 --workers 3 --timeout 150 --log-dir "$TDIR/logs-$i" \
      --scheduler-opt --replicas --scheduler-opt $((i < 3 ? 1 : 2)) -- --app check \
      --consistency bsp --rounds 15 --check-keys 500 || fail "run $i exited $?"
  done
  h1=$(grep -h 'bsp float table hash' "$TDIR"/logs-1/worker-*.log | sort -u)
  h2=$(grep -h 'bsp float table hash' "$TDIR"/logs-2/worker-*.log | sort -u)
  h3=$(grep -h 'bsp float table hash' "$TDIR"/logs-3/worker-*.log | sort -u)
  [ -n "$h1" ] || fail "no hash printed"
  [ "$(wc -l <<< "$h1")" -eq 1 ] || fail "workers of one run disagree: $h1"
  [ "$h1" = "$h2" ] || fail "two bsp runs differ: '$h1' vs '$h2'"
  [ "$h1" = "$h3" ] || fail "bsp with R = 2 differs from R = 1: '$h3' vs '$h1'"
}

tags ssp_bound_straggler serial
t_ssp_bound_straggler() {
  # worker 2 is 10x slower: the values every pull sees stay within tau (checked by
  # the app from the sums), and the fast workers do run tau clocks ahead
  local port seen=0 i
  port=$(free_port)
  "$LAUNCH" --servers 2 --workers 3 --timeout 150 --port "$port" --log-dir "$TDIR/logs" \
    --worker-opt 2:--slowdown --worker-opt 2:10 -- --app check --consistency ssp:2 --rounds 40 \
    --check-keys 300 > out 2>&1 &
  local lpid=$!
  # pskvctl shows per-worker clocks and names the straggler as the slowest
  for i in $(seq 60); do
    "$BIN/pskvctl" --scheduler "127.0.0.1:$port" status > status.txt 2>/dev/null &&
      grep -q 'slowest worker: rank 2 at clock' status.txt && { seen=1; break; }
    sleep 0.1
  done
  wait $lpid || { cat out; fail "exited $?"; }
  [ $seen -eq 1 ] || fail "status never named worker 2 the slowest: $(cat status.txt)"
  grep -q 'CLOCK' status.txt || fail "status shows no clocks"
  for r in 0 1; do
    grep -q 'largest lead over the slowest worker 2 clocks' "$TDIR/logs/worker-$r.log" ||
      fail "fast worker $r did not run 2 clocks ahead: $(grep lead "$TDIR/logs/worker-$r.log")"
  done
}

t_bsp_backup_stopped() {
  # B = 1 and worker 2 stopped (SIGSTOP): the clocks keep closing with the other
  # two; once it resumes its pushes for closed clocks are dropped as late and
  # never applied (final values equal exactly the acknowledged pushes, counted
  # per partition: each server closes its clocks on its own).
  "$LAUNCH" --servers 1 --workers 3 --timeout 150 --log-dir "$TDIR/logs" \
    -- --app check --consistency bsp --backup 1 --rounds 40 --check-keys 200 \
    --slowdown 5 > out 2>&1 &
  local lpid=$! i
  for i in $(seq 100); do [ -s "$TDIR/logs/worker-2.pid" ] && break; sleep 0.1; done
  sleep 0.3
  kill -STOP "$(cat "$TDIR/logs/worker-2.pid")"
  sleep 2
  kill -CONT "$(cat "$TDIR/logs/worker-2.pid")"
  wait $lpid || { cat out; fail "exited $?"; }
  for r in 0 1 2; do
    grep -q '^check ok:' "$TDIR/logs/worker-$r.log" || fail "worker $r: $(tail -n 1 "$TDIR/logs/worker-$r.log")"
  done
  grep -q 'this worker ran 40 clocks,' "$TDIR/logs/worker-0.log" ||
    fail "worker 0 did not run all 40 clocks: $(grep backup "$TDIR/logs/worker-0.log")"
  grep -q ' [1-9][0-9]* dropped as late' "$TDIR/logs/worker-2.log" ||
    fail "the stopped worker had nothing dropped: $(grep backup "$TDIR/logs/worker-2.log")"
  cat "$TDIR"/logs/server-*.log | grep -q '[1-9][0-9]* dropped as late' || fail "servers counted no late drops"
}

t_worker_leaves() {
  # a worker that closes early leaves the clock set: bsp and ssp go on without it
  local c
  for c in bsp ssp:1; do
    "$LAUNCH" --servers 2 --workers 3 --timeout 100 --log-dir "$TDIR/logs-$c" \
      --worker-opt 2:--rounds --worker-opt 2:5 --worker-opt 2:--leave -- --app check \
      --consistency "$c" --count-acked --rounds 30 --check-keys 200 || fail "$c: exited $?"
    grep -q 'final values equal the acknowledged pushes: yes' "$TDIR/logs-$c/worker-0.log" ||
      fail "$c: $(tail -n 2 "$TDIR/logs-$c/worker-0.log")"
    grep -q 'left after 5 clocks' "$TDIR/logs-$c/worker-2.log" || fail "$c: worker 2 did not leave early"
  done
}

t_accumulate() {
  # K micro-batches of b equal one batch of K x b: the same weights after a step
  local common="--app softmax --epochs 1 --train-limit 64 --test-limit 100 --momentum 0 --lr 0.5 --lr-schedule const --seed 3 --eval-every 0"
  "$LAUNCH" --servers 1 --workers 1 --timeout 100 --log-dir "$TDIR/a" -- $common --batch 16 \
    --accumulate 4 --save-model "$TDIR/acc.model" > /dev/null || fail "accumulate run exited $?"
  "$LAUNCH" --servers 1 --workers 1 --timeout 100 --log-dir "$TDIR/b" -- $common --batch 64 \
    --save-model "$TDIR/big.model" > /dev/null || fail "big-batch run exited $?"
  grep -q '(1 steps)' "$TDIR/a/worker-0.log" || fail "the accumulate run did not make exactly 1 step"
  cmp -s "$TDIR/acc.model" "$TDIR/big.model" && fail "the two models are bit-identical: the test would not see a difference"
  paste <(od -An -v -f -j 40 -w4 "$TDIR/acc.model" | head -n 7850) \
        <(od -An -v -f -j 40 -w4 "$TDIR/big.model" | head -n 7850) |
    awk '{ d = $1 - $2; if (d < 0) d = -d; s = ($2 < 0 ? -$2 : $2); if (d > 1e-5 + 1e-4 * s) { bad++ } n++ }
         END { if (n != 7850 || bad) { printf "%d of %d weights differ\n", bad, n; exit 1 } }' ||
    fail "accumulated step differs from the big batch"
}
