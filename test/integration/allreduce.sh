# All-reduce tests (sourced by integration.sh): pskv_allreduce's ring among real
# workers over loopback TCP. Each function runs in its own test directory ($TDIR)
# under run_test's time-out.

# ar_run DIR WORKERS ARGS...: one job of allreduce-check; its status.
ar_run() {
  local dir=$1 nw=$2; shift 2
  "$LAUNCH" --servers 1 --workers "$nw" --timeout 60 --log-dir "$dir" -- \
    --app allreduce-check "$@" > "$dir.out" 2>&1
}

# ar_digests DIR WORKERS: every rank printed its line, all with one digest; prints it.
ar_digests() {
  local dir=$1 nw=$2 r d first=
  for r in $(seq 0 $((nw - 1))); do
    d=$(sed -n 's/^allreduce-check rank='"$r"' .* digest=\([0-9a-f]*\)$/\1/p' "$dir/worker-$r.log")
    [ -n "$d" ] || fail "$dir: rank $r printed no digest: $(grep allreduce-check "$dir/worker-$r.log" | tail -n 2)"
    [ -z "$first" ] && first=$d
    [ "$d" = "$first" ] || fail "$dir: rank $r's digest $d differs from rank 0's $first"
  done
  echo "$first"
}

# Exact sums (and means) of integer-valued floats, bit for bit the same on every
# rank, for N = 2, 3, 4, with n not divisible by N, n < N (empty chunks) and
# pieces far smaller than a chunk (--chunk-bytes 64: 16 floats a piece, so a
# step is many pieces in flight). allreduce-check compares each element with the
# sum computed locally and fails on the first difference.
tags allreduce_exact keys
t_allreduce_exact() {
  local nw n d
  for nw in 2 3 4; do
    for n in $((nw - 1)) 1001; do
      ar_run "$TDIR/n$nw-$n" "$nw" --ar-floats "$n" --rounds 3 --chunk-bytes 64 ||
        fail "N=$nw n=$n exited $?: $(grep -h 'failed\|expected' "$TDIR/n$nw-$n"/worker-*.log | head -n 3)"
      ar_digests "$TDIR/n$nw-$n" "$nw" > /dev/null
    done
  done
  ar_run "$TDIR/mean" 3 --ar-floats 100003 --rounds 2 --reduce mean ||
    fail "mean exited $?: $(grep -h 'failed\|expected' "$TDIR/mean"/worker-*.log | head -n 3)"
  d=$(ar_digests "$TDIR/mean" 3)
  # the digests see the values: another n gives another digest
  [ "$d" != "$(ar_digests "$TDIR/n3-1001" 3)" ] || fail "two different all-reduces gave one digest"
  no_strays "$TDIR/mean"
  # ranks cutting pieces differently (each chunk is cut by its first sender), and
  # 300001 floats in pieces of 1 float: capped at 1024 pieces a chunk
  "$LAUNCH" --servers 1 --workers 3 --timeout 60 --log-dir "$TDIR/cuts" --worker-opt 0:--chunk-bytes \
    --worker-opt 0:64 -- --app allreduce-check --ar-floats 300001 --rounds 2 --chunk-bytes 4 \
    > "$TDIR/cuts.out" 2>&1 || fail "mixed --chunk-bytes exited $?: $(grep -h 'failed' "$TDIR/cuts"/worker-*.log | head -n 3)"
  ar_digests "$TDIR/cuts" 3 > /dev/null
  # with --keys: the workers' sockets run CURVE like every other (keys of the view)
  "$BIN/pskvctl" keys init "$TDIR/keys" --servers 1 --workers 3 > /dev/null || fail "keys init"
  "$LAUNCH" --keys "$TDIR/keys" --servers 1 --workers 3 --timeout 60 --log-dir "$TDIR/keyed" -- \
    --app allreduce-check --ar-floats 1001 --rounds 3 --chunk-bytes 64 > "$TDIR/keyed.out" 2>&1 ||
    fail "keyed run exited $?: $(grep -h 'failed' "$TDIR/keyed"/worker-*.log | head -n 3)"
  [ "$(ar_digests "$TDIR/keyed" 3)" = "$(ar_digests "$TDIR/n3-1001" 3)" ] ||
    fail "the keyed run's digest differs from the plain run's"
}

# A next rank that admits its peers' keys late (PSKV_TEST_FIRST_VIEW_DELAY: rank
# 1's listening socket knows the view's keys only 4 s after its first view, as
# when it applies the view naming them late) refuses rank 0's CURVE handshake,
# and ZeroMQ never dials again after a refused handshake: rank 0 waits for the
# handshake before its first piece and dials again on a fresh connection until
# rank 1 admits it, so the calls give the exact sums instead of timing out
# (--request-timeout 15; before the fix they did, every time).
tags allreduce_late_keys keys serial
t_allreduce_late_keys() {
  local d="$TDIR/j" t0=$SECONDS
  "$BIN/pskvctl" keys init "$TDIR/keys" --servers 1 --workers 3 > /dev/null || fail "keys init"
  PSKV_TEST_FIRST_VIEW_DELAY=1:4000 "$LAUNCH" --keys "$TDIR/keys" --servers 1 --workers 3 \
    --timeout 60 --log-dir "$d" -- --app allreduce-check --ar-floats 1001 --rounds 3 \
    --chunk-bytes 64 --request-timeout 15 > "$d.out" 2>&1 ||
    fail "exited $?: $(grep -h 'failed' "$d"/worker-*.log | head -n 3)"
  ar_digests "$d" 3 > /dev/null
  late_keys "$d" pskv_allreduce "$t0"
}

# Different n on different ranks: every rank fails the call, each naming the n's
# (rank 0 gives 10, ranks 1 and 2 give 12: rank 2 only hears of it from rank 1).
# And a rank that calls fewer times than the others.
tags allreduce_mismatch serial
t_allreduce_mismatch() {
  "$LAUNCH" --servers 1 --workers 3 --timeout 60 --log-dir "$TDIR/j" --worker-opt 0:--ar-floats \
    --worker-opt 0:10 -- --app allreduce-check --ar-floats 12 --rounds 2 > "$TDIR/j.out" 2>&1 &&
    fail "the job passed with different n on different ranks"
  local r
  for r in 0 1 2; do
    grep -q "call 1 failed: invalid argument: .*n = 1[02], .*n = 1[02]: every rank must give the same n" \
      "$TDIR/j/worker-$r.log" || fail "rank $r: $(grep allreduce-check "$TDIR/j/worker-$r.log" | tail -n 1)"
  done
  no_strays "$TDIR/j"
  # a rank that makes fewer calls and leaves: the others' extra call fails naming it
  # (once it said FINISH and nothing came for 3 s), not at the 30 s time-out
  local t0=$SECONDS
  "$LAUNCH" --servers 1 --workers 3 --timeout 60 --log-dir "$TDIR/f" --worker-opt 0:--rounds \
    --worker-opt 0:2 -- --app allreduce-check --ar-floats 1001 --rounds 3 > "$TDIR/f.out" 2>&1 &&
    fail "the job passed with a rank making fewer calls"
  [ $((SECONDS - t0)) -lt 20 ] || fail "the others took $((SECONDS - t0)) s to fail"
  grep -q '^allreduce-check rank=0 .* rounds=2 ' "$TDIR/f/worker-0.log" || fail "rank 0 did not pass its 2 calls"
  for r in 1 2; do
    grep -q "call 3 failed: .*rank 0 left the job" "$TDIR/f/worker-$r.log" ||
      fail "rank $r: $(grep allreduce-check "$TDIR/f/worker-$r.log" | tail -n 1)"
  done
}

# A worker killed (SIGKILL) or stopped (SIGSTOP) in a long loop of 4 MB
# all-reduces: the others fail their call naming rank 1 and exit 1; nothing
# hangs. KILL and STOP: the scheduler declares it dead (KILL: its connection
# closed; STOP: its time-out, 0.8 to 5 s) and the others fail with PSKV_EPEERDEAD at once; SILENT:
# a scheduler that waits 60 s before declaring anyone dead (the detector's flags
# set so: --min-dead-after-ms and --dead-after-ms 60000; the upper bound alone
# leaves the adaptive time-out at its 3 s first-minute floor), so the previous
# rank's silence (--request-timeout 3) fails the call on rank 2, naming rank 1,
# and on rank 0 with rank 2's abort or its own time-out on rank 2, whichever
# comes first.
t_allreduce_peer_dies() {
  local how sig pid t0 r opt rto
  for how in KILL STOP SILENT; do
    local d="$TDIR/$how"
    # KILL, STOP: a request time-out past the detector's (STOP: up to 5 s), so that
    # the scheduler's verdict, not a ring neighbour's silence, fails the call
    sig=$how opt=() rto=8
    [ "$how" = SILENT ] && sig=STOP rto=3 opt=(--scheduler-opt --min-dead-after-ms --scheduler-opt 60000
                                         --scheduler-opt --dead-after-ms --scheduler-opt 60000)
    mkdir -p "$d"
    "$LAUNCH" --servers 1 --workers 3 --timeout 60 --log-dir "$d" "${opt[@]}" -- \
      --app allreduce-check --ar-floats 1000000 --rounds 1000000 --request-timeout "$rto" \
      > "$d.out" 2>&1 &
    local launcher=$!
    wait_line "$d/worker-1.log" 'joined job' 1 30 || fail "$how: rank 1 did not join"
    sleep 1.5
    pid=$(cat "$d/worker-1.pid")
    [ -n "$pid" ] || fail "$how: no pid for rank 1"
    t0=$(ms_now)
    kill -"$sig" "$pid"
    for r in 0 2; do
      wait_line "$d/worker-$r.log" 'allreduce-check: rank .* failed' 1 10 ||
        fail "$how: rank $r did not fail within 10 s: $(tail -n 2 "$d/worker-$r.log")"
    done
    echo "$how: ranks 0 and 2 failed within $(( $(ms_now) - t0 )) ms"
    # SILENT: rank 0 waits on rank 2, which waits on rank 1; both time out at about
    # the same moment, so rank 0 names rank 1 (rank 2's abort came first) or rank 2
    # (its own time-out, or rank 2's FINISH after rank 2 gave up, whichever it hears first)
    # (KILL, STOP: a call that starts after the view without rank 1 names it so: "rank 1
    # is not in the job")
    local blame0='rank 1 died\|nothing from rank 1\|rank 1 is not in the job'
    [ "$how" = SILENT ] && blame0='nothing from rank [12]\|rank 2 left the job (said FINISH)'
    grep -q "failed: .*\($blame0\)" "$d/worker-0.log" ||
      fail "$how: rank 0 names neither rank 1 nor (SILENT) 2: $(grep failed "$d/worker-0.log")"
    grep -q 'failed: .*\(rank 1 died\|nothing from rank 1\|rank 1 is not in the job\)' "$d/worker-2.log" ||
      fail "$how: rank 2 does not name rank 1: $(grep failed "$d/worker-2.log")"
    [ "$sig" = STOP ] && kill -CONT "$pid"
    wait_exit "$launcher" 30
    local st=$?
    [ $st -ne 0 ] && [ $st -ne 124 ] || fail "$how: the launcher exited $st"
    grep -q 'workers exit statuses: 1 [0-9]* 1' "$d.out" ||
      fail "$how: ranks 0 and 2 did not exit 1: $(tail -n 1 "$d.out")"
  done
  grep -q 'nothing from rank 1 for 3000 ms' "$TDIR/SILENT/worker-2.log" ||
    fail "SILENT: rank 2 did not time out on rank 1: $(grep failed "$TDIR/SILENT/worker-2.log")"
}

# --sync allreduce trains mlp as bsp does: the same data, initial weights (pulled
# from the table), mean gradient and sgd update, so the two differ only by float
# rounding (the ring sums in ring order, a bsp server in arrival order): their
# accuracies on 1000 test images must agree within 0.02 (20 images), and both be
# well above chance. With --accumulate 2, a copy to the servers every 7 steps, and a
# checkpoint at the end that must hold rank 0's weights exactly (the faults story:
# the servers keep the copy that checkpoints and resume use).
tags allreduce_train slow
t_allreduce_train() {
  local common="--app mlp --epochs 1 --train-limit 6000 --test-limit 1000 --seed 2 --eval-every 0 --accumulate 2"
  mkdir -p "$TDIR/data"
  "$LAUNCH" --servers 1 --workers 2 --timeout 120 --log-dir "$TDIR/ar" --scheduler-opt --data-dir \
    --scheduler-opt "$TDIR/data" --server-opt --data-dir --server-opt "$TDIR/data" -- $common \
    --sync allreduce --copy-every 7 --checkpoint-epochs 1 --save-model "$TDIR/ar.model" \
    > /dev/null 2>&1 || fail "allreduce run exited $?: $(tail -n 2 "$TDIR/ar/worker-0.log")"
  # the servers' copy, checkpointed at the end, is rank 0's weights bit for bit
  "$BIN/pskvctl" export --checkpoint 1 --from "$TDIR/data" --out "$TDIR/ckpt.model" > /dev/null ||
    fail "no checkpoint 1 to export"
  cmp -s "$TDIR/ckpt.model" "$TDIR/ar.model" || fail "the checkpoint's weights differ from rank 0's"

  "$LAUNCH" --servers 1 --workers 2 --timeout 120 --log-dir "$TDIR/bsp" -- $common \
    --consistency bsp > /dev/null 2>&1 || fail "bsp run exited $?: $(tail -n 2 "$TDIR/bsp/worker-0.log")"
  local a b
  a=$(sed -n 's/^final test accuracy \([0-9.]*\) .*/\1/p' "$TDIR/ar/worker-0.log")
  b=$(sed -n 's/^final test accuracy \([0-9.]*\) .*/\1/p' "$TDIR/bsp/worker-0.log")
  [ -n "$a" ] && [ -n "$b" ] || fail "no final accuracy (allreduce '$a', bsp '$b')"
  echo "accuracy: allreduce $a, bsp $b"
  awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.02 && a > 0.5) }' ||
    fail "allreduce accuracy $a is not within 0.02 of bsp's $b (or not above 0.5)"
  grep -q 'push [0-9.]* us' "$TDIR/ar/worker-1.log" || fail "rank 1 did not train"
  # bad input: --sync allreduce where it does not apply, and a bad value
  "$BIN/pskv-worker" --app check --sync allreduce > bad.log 2>&1; [ $? -eq 2 ] ||
    fail "--sync allreduce on --app check was not refused with status 2"
  grep -q 'applies to --app mlp and softmax' bad.log || fail "no reason: $(cat bad.log)"
  "$BIN/pskv-worker" --app mlp --sync ring > bad.log 2>&1; [ $? -eq 2 ] ||
    fail "--sync ring was not refused with status 2"
}

# --wire fp16 and bf16: integer-valued floats small enough that every partial sum
# is exact in 16 bits (allreduce-check picks them by --wire): each element equals
# the exact sum (the mean: the exact mean rounded to the wire), the digest is the
# same on every rank, and fp16 pieces are half the bytes (a run with --chunk-bytes
# 64 cuts 32 values a piece). Ranks given different --wire all fail the first
# call naming both precisions; a bad --wire is refused with status 2.
t_allreduce_wire() {
  local d16 d32 r
  ar_run "$TDIR/h3" 3 --ar-floats 1001 --rounds 3 --chunk-bytes 64 --wire fp16 ||
    fail "fp16 N=3 exited $?: $(grep -h 'failed\|expected' "$TDIR/h3"/worker-*.log | head -n 3)"
  d16=$(ar_digests "$TDIR/h3" 3)
  ar_run "$TDIR/f3" 3 --ar-floats 1001 --rounds 3 --chunk-bytes 64 ||
    fail "fp32 N=3 exited $?"
  d32=$(ar_digests "$TDIR/f3" 3)
  grep -q '^allreduce-check rank=0 .* wire=fp16 ' "$TDIR/h3/worker-0.log" || fail "no wire=fp16 in the line"
  [ "$d16" != "$d32" ] || fail "fp16 and fp32 runs (other values) gave one digest"
  ar_run "$TDIR/b4" 4 --ar-floats 10007 --rounds 2 --wire bf16 --reduce mean ||
    fail "bf16 mean N=4 exited $?: $(grep -h 'failed\|expected' "$TDIR/b4"/worker-*.log | head -n 3)"
  ar_digests "$TDIR/b4" 4 > /dev/null
  ar_run "$TDIR/h2" 2 --ar-floats 100003 --rounds 2 --wire fp16 --reduce mean ||
    fail "fp16 mean N=2 exited $?: $(grep -h 'failed\|expected' "$TDIR/h2"/worker-*.log | head -n 3)"
  ar_digests "$TDIR/h2" 2 > /dev/null
  # rank 1 sends bf16 among fp16 ranks: every rank fails call 1, naming both
  "$LAUNCH" --servers 1 --workers 3 --timeout 60 --log-dir "$TDIR/mix" --worker-opt 1:--wire \
    --worker-opt 1:bf16 -- --app allreduce-check --ar-floats 100 --rounds 2 --wire fp16 \
    > "$TDIR/mix.out" 2>&1 && fail "the job passed with mixed wire precisions"
  for r in 0 1 2; do
    grep -q "call 1 failed: invalid argument: .*sends \(bf16\|fp16\) values, rank [0-9] \(bf16\|fp16\): every worker must use the same wire precision" \
      "$TDIR/mix/worker-$r.log" || fail "rank $r: $(grep allreduce-check "$TDIR/mix/worker-$r.log" | tail -n 1)"
  done
  no_strays "$TDIR/mix"
  "$BIN/pskv-worker" --app allreduce-check --wire fp8 > bad.log 2>&1; [ $? -eq 2 ] ||
    fail "--wire fp8 was not refused with status 2"
  grep -q -- '--wire must be fp32, fp16 or bf16' bad.log || fail "no reason: $(cat bad.log)"
  "$BIN/pskv-worker" --app filter-check --wire fp16 > bad.log 2>&1; [ $? -eq 2 ] ||
    fail "--wire fp16 on --app filter-check (no table takes it) was not refused with status 2"
  grep -q -- '--wire applies to' bad.log || fail "no reason: $(cat bad.log)"
}

# MLP trained by all-reduce with --wire fp16 (no loss scale) ends within 0.003
# (6 of 2000 test images) of the same run in fp32, and with other weights (the
# wire did round them).
t_allreduce_wire_train() {
  local common="--app mlp --epochs 2 --train-limit 6000 --test-limit 2000 --seed 2 --eval-every 0 --sync allreduce"
  local wire a=() acc
  for wire in fp32 fp16; do
    "$LAUNCH" --servers 1 --workers 2 --timeout 120 --log-dir "$TDIR/$wire" -- $common --wire "$wire" \
      --save-model "$TDIR/$wire.model" > /dev/null 2>&1 ||
      fail "$wire run exited $?: $(tail -n 2 "$TDIR/$wire/worker-0.log")"
    acc=$(sed -n 's/^final test accuracy \([0-9.]*\) .*/\1/p' "$TDIR/$wire/worker-0.log")
    [ -n "$acc" ] || fail "$wire: no final accuracy"
    a+=("$acc")
  done
  echo "accuracy: fp32 ${a[0]}, fp16 ${a[1]}"
  awk -v a="${a[0]}" -v b="${a[1]}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.003 && a > 0.5) }' ||
    fail "fp16 accuracy ${a[1]} is not within 0.003 of fp32's ${a[0]} (or fp32 not above 0.5)"
  cmp -s "$TDIR/fp32.model" "$TDIR/fp16.model" && fail "fp16 and fp32 runs saved the same weights"
  return 0
}

# --loss-scale dynamic with a planted overflow (rank 0's gradient holds the
# largest float at step 3; scaled, it is inf): step 3 is skipped on both ranks
# (their weights' digest after it equals the one after step 2), the scale halves
# (65536 -> 32768), doubles again after --scale-window 5 clean steps (step 8),
# and the metrics file reports the scale and the skipped step. Every step's
# digest is the same on both ranks.
t_allreduce_loss_scale() {
  "$LAUNCH" --servers 1 --workers 2 --timeout 60 --log-dir "$TDIR/j" -- --app mlp --epochs 1 \
    --train-limit 640 --test-limit 200 --seed 2 --sync allreduce --wire fp16 --loss-scale dynamic \
    --scale-window 5 --plant-overflow 3 --print-digests --metrics "$TDIR/m.json" > /dev/null 2>&1 ||
    fail "the job exited $?: $(tail -n 2 "$TDIR/j/worker-0.log")"
  local r d2 d3
  for r in 0 1; do
    grep '^allreduce step ' "$TDIR/j/worker-$r.log" > "$TDIR/steps-$r" || fail "rank $r printed no steps"
    d2=$(sed -n 's/^allreduce step 2 applied scale 65536 skipped 0 weights \([0-9a-f]*\)$/\1/p' "$TDIR/steps-$r")
    d3=$(sed -n 's/^allreduce step 3 skipped scale 32768 skipped 1 weights \([0-9a-f]*\)$/\1/p' "$TDIR/steps-$r")
    [ -n "$d2" ] && [ -n "$d3" ] || fail "rank $r: steps 2-3: $(sed -n 2,3p "$TDIR/steps-$r")"
    [ "$d2" = "$d3" ] || fail "rank $r applied something at the skipped step ($d2 -> $d3)"
    grep -q '^allreduce step 4 applied scale 32768 ' "$TDIR/steps-$r" || fail "rank $r: step 4 $(sed -n 4p "$TDIR/steps-$r")"
    grep -q '^allreduce step 8 applied scale 65536 skipped 1 ' "$TDIR/steps-$r" ||
      fail "rank $r: the scale did not double after 5 clean steps: $(sed -n 8p "$TDIR/steps-$r")"
    [ "$(grep -c skipped\ scale "$TDIR/steps-$r")" = 1 ] || fail "rank $r skipped more than one step"
  done
  cmp -s "$TDIR/steps-0" "$TDIR/steps-1" || fail "the ranks' steps differ: $(diff "$TDIR/steps-0" "$TDIR/steps-1" | head -n 4)"
  grep -q '"loss_scale":[0-9]*,"skipped_steps":1' "$TDIR/m.json" || fail "metrics: $(cat "$TDIR/m.json")"
  "$BIN/pskv-worker" --app mlp --loss-scale 0 > bad.log 2>&1; [ $? -eq 2 ] ||
    fail "--loss-scale 0 was not refused with status 2"
  grep -q -- '--loss-scale must be dynamic or a number > 0' bad.log || fail "no reason: $(cat bad.log)"
  "$BIN/pskv-worker" --app mlp --loss-scale dynamic > bad.log 2>&1; [ $? -eq 2 ] ||
    fail "--loss-scale with --sync ps was not refused with status 2"
}

# --zero 1 (ZeRO stage 1: gradients reduce-scattered, each rank updates its 1/N
# slice with that slice's optimizer state, weights all-gathered) saves the same
# weights as plain all-reduce training, bit for bit (so within 1e-6 relative),
# for N = 2 and 3 with momentum, and for N = 3 with adagrad, an fp16 wire and a
# planted overflow under --loss-scale dynamic (the ranks agree to skip it though
# it lies in one rank's slice). Each rank's optimizer state is its slice:
# at most ceil(P/N) floats a plane, P in all, and rank 0's is in the metrics.
t_allreduce_zero() {
  local common="--app mlp --epochs 1 --train-limit 960 --test-limit 200 --seed 3 --sync allreduce"
  local nw z extra r f sum P
  for nw in 2 3 a3; do
    extra="--momentum 0.9"
    [ "$nw" = a3 ] && extra="--updater adagrad --wire fp16 --loss-scale dynamic --plant-overflow 3"
    for z in 0 1; do
      "$LAUNCH" --servers 1 --workers "${nw#a}" --timeout 60 --log-dir "$TDIR/$nw-$z" -- $common $extra \
        --zero "$z" --save-model "$TDIR/$nw-$z.model" --metrics "$TDIR/$nw-$z.json" > /dev/null 2>&1 ||
        fail "N=$nw --zero $z exited $?: $(tail -n 2 "$TDIR/$nw-$z/worker-0.log")"
    done
    cmp -s "$TDIR/$nw-0.model" "$TDIR/$nw-1.model" || fail "N=$nw: --zero 1 saved other weights than plain all-reduce"
    sum=0
    for r in $(seq 0 $((${nw#a} - 1))); do
      f=$(sed -n 's/^zero 1: rank '"$r"' updates weights \[[0-9]*, [0-9]*) of \([0-9]*\): optimizer state \([0-9]*\) floats$/\1 \2/p' "$TDIR/$nw-1/worker-$r.log")
      [ -n "$f" ] || fail "N=$nw rank $r: no state line"
      P=${f% *}; f=${f#* }
      [ "$f" -le $(( (P + ${nw#a} - 1) / ${nw#a} )) ] || fail "N=$nw rank $r holds $f floats of state for $P weights"
      sum=$((sum + f))
    done
    [ "$sum" = "$P" ] || fail "N=$nw: the ranks' state adds up to $sum floats, not $P"
    grep -q '"opt_state_floats":[1-9]' "$TDIR/$nw-1.json" || fail "N=$nw metrics: $(cat "$TDIR/$nw-1.json")"
  done
  grep -q '"skipped_steps":1' "$TDIR/a3-1.json" || fail "the planted overflow was not skipped: $(cat "$TDIR/a3-1.json")"
  "$BIN/pskv-worker" --app mlp --zero 1 > bad.log 2>&1; [ $? -eq 2 ] ||
    fail "--zero 1 with --sync ps was not refused with status 2"
}

# Bytes on the wire: pskv_allreduce_bytes_total (rank 0's /metrics, kept up by
# --metrics-linger) after 2 all-reduces of 100001 values among 2 workers: rank 0
# sends both chunks once a call (reduce-scatter, all-gather), 2 x 100001 values:
# 800008 bytes in fp32, exactly half (400004) in fp16.
t_allreduce_wire_bytes() {
  command -v curl > /dev/null || fail "curl missing (install-deps.sh installs it)"
  local wire want p got i
  for wire in fp32 fp16; do
    p=$(free_port)
    "$LAUNCH" --servers 1 --workers 2 --timeout 60 --log-dir "$TDIR/$wire" --worker-opt 0:--metrics-port \
      --worker-opt "0:$p" -- --app allreduce-check --ar-floats 100001 --rounds 2 --wire "$wire" \
      --metrics-linger 2 > "$TDIR/$wire.out" 2>&1 &
    for i in $(seq 300); do
      grep -q '^allreduce-check rank=0 ' "$TDIR/$wire/worker-0.log" 2>/dev/null && break; sleep 0.1
    done
    got=$(curl -sf --max-time 5 "http://127.0.0.1:$p/metrics" | sed -n 's/^pskv_allreduce_bytes_total{[^}]*} \([0-9]*\)$/\1/p; s/^pskv_allreduce_bytes_total \([0-9]*\)$/\1/p')
    wait $! || fail "$wire job exited $?: $(grep -h 'failed' "$TDIR/$wire"/worker-*.log | head -n 2)"
    want=800008; [ "$wire" = fp16 ] && want=400004
    echo "$wire: rank 0 sent $got value bytes"
    [ "$got" = "$want" ] || fail "$wire: rank 0's pskv_allreduce_bytes_total is '$got', expected $want"
  done
}
