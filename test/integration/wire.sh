# shellcheck shell=bash
# Wire precision of parameter-server tables (sourced by integration.sh): --wire
# fp16|bf16 on the tables of real daemons over loopback (TableOptions wire;
# docs/protocol.md, "Wire precision"). Each function runs in its own test
# directory ($TDIR) under run_test's time-out.

# wire_line LOG TABLE: the table's traffic line (filters ... wire W: sent ...).
wire_line() { grep "table '$2' filters .* wire " "$1" | tail -n 1; }

# wire_halved LINE: sent and received are exactly half their bytes before the
# wire precision (every value 2 bytes, no keys frame: a dense run).
wire_halved() {
  local s sb r rb
  s=$(sed -n 's/.* sent \([0-9]*\) bytes (\([0-9]*\) before.*/\1/p' <<< "$1")
  sb=$(sed -n 's/.* sent \([0-9]*\) bytes (\([0-9]*\) before.*/\2/p' <<< "$1")
  r=$(sed -n 's/.*, received \([0-9]*\) (\([0-9]*\) before).*/\1/p' <<< "$1")
  rb=$(sed -n 's/.*, received \([0-9]*\) (\([0-9]*\) before).*/\2/p' <<< "$1")
  [ -n "$s" ] && [ "$s" -gt 0 ] && [ $((2 * s)) = "$sb" ] && [ -n "$r" ] && [ "$r" -gt 0 ] &&
    [ $((2 * r)) = "$rb" ]
}

# Exact sums through a 16-bit wire: the check app's integer increments (small:
# every sum stays within fp16's exact integers, 2048; bf16's, 256, with fewer
# rounds) pushed as fp16 by 3 workers to 2 servers, summed in fp32 there and
# pulled back as fp16, dense and sparse; the pull replies took exactly half the
# bytes of their float32 rows. Under bsp too (every pull at clock c exact), and
# with keycache and lz4 after the conversion.
t_wire_check() {
  local w line
  "$LAUNCH" --servers 2 --workers 3 --timeout 120 --log-dir "$TDIR/fp16" -- --app check --rounds 4 \
    --wire fp16 > "$TDIR/fp16.out" 2>&1 || fail "fp16 launch exited $?: $(tail -n 3 "$TDIR/fp16.out")"
  "$LAUNCH" --servers 2 --workers 2 --timeout 120 --log-dir "$TDIR/bf16" -- --app check --rounds 2 \
    --wire bf16 > "$TDIR/bf16.out" 2>&1 || fail "bf16 launch exited $?: $(tail -n 3 "$TDIR/bf16.out")"
  "$LAUNCH" --servers 2 --workers 2 --timeout 120 --log-dir "$TDIR/fp16bsp" -- --app check --rounds 3 \
    --consistency bsp --wire fp16 > "$TDIR/bsp.out" 2>&1 || fail "bsp launch exited $?: $(tail -n 3 "$TDIR/bsp.out")"
  grep -q '^check ok:.*bsp, .* sparse keys exact' "$TDIR/fp16bsp/worker-1.log" ||
    fail "bsp: $(tail -n 1 "$TDIR/fp16bsp/worker-1.log")"
  # conversion, then compression: the 16-bit frames packed by lz4, key lists cached
  "$LAUNCH" --servers 2 --workers 2 --timeout 120 --log-dir "$TDIR/lz4" -- --app check --rounds 3 \
    --wire fp16 --filter keycache,lz4 > "$TDIR/lz4.out" 2>&1 || fail "lz4 launch exited $?: $(tail -n 3 "$TDIR/lz4.out")"
  grep -q '^check ok:.* sparse keys exact' "$TDIR/lz4/worker-0.log" || fail "lz4: $(tail -n 1 "$TDIR/lz4/worker-0.log")"
  grep -q "table 'check.dense' filters keycache:64,lz4 wire fp16:" "$TDIR/lz4/worker-0.log" ||
    fail "lz4: no filtered fp16 traffic logged"
  for w in fp16/worker-0 fp16/worker-1 fp16/worker-2 bf16/worker-0 bf16/worker-1; do
    grep -q '^check ok:.*dense + .* sparse keys exact' "$TDIR/$w.log" || fail "$w: $(tail -n 1 "$TDIR/$w.log")"
    line=$(wire_line "$TDIR/$w.log" check.dense) || fail "$w reported no ${w%%/*} traffic"
    grep -q "wire ${w%%/*}:" <<< "$line" || fail "$w: $line"
    r=$(sed -n 's/.*, received \([0-9]*\) (\([0-9]*\) before).*/\1 \2/p' <<< "$line")
    [ -n "$r" ] && [ $((2 * ${r% *})) = "${r#* }" ] || fail "$w: pull replies not exactly halved: $line"
  done
  no_strays "$TDIR/fp16"
}

# Refusals: a --wire the flags do not know (exit 2 naming the flag); two workers
# opening one table with different precisions (the second open is refused,
# naming 'wire'); a 16-bit wire with a lossy filter (refused by the servers at
# TABLE_OPEN, naming 'wire'); --loss-scale where it cannot apply. A precision a
# server does not know is refused by it at TABLE_OPEN (unit test table, 'fp8').
t_wire_refused() {
  "$BIN/pskv-worker" --app check --wire fp8 > bad.log 2>&1; [ $? -eq 2 ] || fail "--wire fp8 not refused with 2"
  grep -q -- '--wire must be fp32, fp16 or bf16' bad.log || fail "no reason: $(cat bad.log)"
  "$BIN/pskv-worker" --app filter-check --wire fp16 > bad.log 2>&1; [ $? -eq 2 ] || fail "--wire on fcheck not refused"
  "$BIN/pskv-worker" --app mlp --wire fp16 --loss-scale 1000 > bad.log 2>&1; [ $? -eq 2 ] ||
    fail "--loss-scale 1000 with --sync ps not refused"
  grep -q 'power of two' bad.log || fail "no reason: $(cat bad.log)"
  "$BIN/pskv-worker" --app mlp --loss-scale dynamic > bad.log 2>&1; [ $? -eq 2 ] ||
    fail "--loss-scale with an fp32 wire and --sync ps not refused"
  "$LAUNCH" --servers 1 --workers 2 --timeout 60 --log-dir "$TDIR/mixed" --worker-opt 1:--wire \
    --worker-opt 1:fp16 -- --app check --rounds 2 --request-timeout 5 > "$TDIR/mixed.out" 2>&1 &&
    fail "two workers with fp32 and fp16 on one table both passed"
  grep -q "table 'check.dense' exists with option 'wire' = fp\(16\|32\), open asked fp\(16\|32\)" \
    "$TDIR"/mixed/worker-*.log || fail "the mixed open was not refused naming 'wire': $(grep -h 'wire\|failed' "$TDIR"/mixed/worker-*.log | head -n 3)"
  "$LAUNCH" --servers 1 --workers 1 --timeout 60 --log-dir "$TDIR/lossy" -- --app mlp --epochs 1 \
    --train-limit 64 --test-limit 64 --filter int8 --wire fp16 > "$TDIR/lossy.out" 2>&1 &&
    fail "int8 with fp16 was accepted"
  grep -q "option 'wire' fp16 does not go with the lossy filter 'int8'" "$TDIR/lossy/worker-0.log" ||
    fail "no reason: $(tail -n 2 "$TDIR/lossy/worker-0.log")"
  grep -q "refused TABLE_OPEN.*option 'wire'" "$TDIR/lossy/server-0.log" || fail "the server did not refuse it"
}

# MLP with asynchronous parameter-server training, fp32 against fp16 on the
# wire: one worker (async with one worker is deterministic, so the runs differ
# by the precision alone), the test accuracy within 0.003; the parameter table's
# pushes and pull replies took exactly half their float32 bytes, and the
# metrics' bytes per step (both tables, re-sends included: a slow build may ask
# again) within 1% of half of fp32's.
tags wire_mlp slow
t_wire_mlp() {
  local common="--app mlp --epochs 2 --train-limit 6000 --test-limit 2000 --seed 2 --eval-every 0"
  local wire a=() b=() line
  for wire in fp32 fp16; do
    "$LAUNCH" --servers 1 --workers 1 --timeout 200 --log-dir "$TDIR/$wire" -- $common --wire "$wire" \
      --metrics "$TDIR/$wire.json" > /dev/null 2>&1 || fail "$wire run exited $?: $(tail -n 2 "$TDIR/$wire/worker-0.log")"
    a+=("$(sed -n 's/^final test accuracy \([0-9.]*\) .*/\1/p' "$TDIR/$wire/worker-0.log")")
    b+=("$(tail -n 1 "$TDIR/$wire.json" | sed -n 's/.*"bytes_per_step":\([0-9]*\).*/\1/p')")
  done
  echo "accuracy fp32 ${a[0]}, fp16 ${a[1]}; bytes per step fp32 ${b[0]}, fp16 ${b[1]}"
  awk -v a="${a[0]}" -v b="${a[1]}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.003 && a > 0.7) }' ||
    fail "fp16 accuracy ${a[1]} is not within 0.003 of fp32's ${a[0]} (or fp32 not above 0.7)"
  line=$(wire_line "$TDIR/fp16/worker-0.log" mlp-784-256-10) || fail "no fp16 traffic line"
  wire_halved "$line" || fail "the parameter table's bytes are not exactly halved: $line"
  [ -n "${b[1]}" ] && [ $((200 * b[1])) -le $((101 * b[0])) ] || fail "bytes per step ${b[1]} not half of ${b[0]}"
}

# Dynamic loss scaling of parameter-server pushes (--loss-scale dynamic, fp16):
# rank 0's gradient holds the largest float at step 3, which times the scale is
# not finite in fp16: that step pushes nothing (the server served exactly one
# push fewer than the same run without the planted overflow) and the scale
# halves (65536 -> 32768); it doubles after --scale-window 30 clean steps: of
# the 40 steps, 37 clean ones follow, so it ends at 65536 (131072 without the
# overflow). The metrics file says so.
t_wire_loss_scale() {
  local common="--app mlp --epochs 1 --train-limit 640 --test-limit 200 --seed 2 --eval-every 0 --wire fp16 --loss-scale dynamic --scale-window 30"
  local p plain planted
  for p in 0 3; do
    "$LAUNCH" --servers 1 --workers 1 --timeout 100 --log-dir "$TDIR/p$p" -- $common --plant-overflow "$p" \
      --metrics "$TDIR/p$p.json" > /dev/null 2>&1 || fail "run with --plant-overflow $p exited $?"
  done
  grep -q '"loss_scale":65536,"skipped_steps":1' "$TDIR/p3.json" || fail "metrics: $(tail -n 1 "$TDIR/p3.json")"
  grep -q '"loss_scale":131072,"skipped_steps":0' "$TDIR/p0.json" || fail "metrics without: $(tail -n 1 "$TDIR/p0.json")"
  plain=$(sed -n 's/.*stopped by the scheduler: \([0-9]*\) pushes.*/\1/p' "$TDIR/p0/server-0.log")
  planted=$(sed -n 's/.*stopped by the scheduler: \([0-9]*\) pushes.*/\1/p' "$TDIR/p3/server-0.log")
  echo "pushes served: $plain without, $planted with the planted overflow"
  [ -n "$plain" ] && [ "$planted" = $((plain - 1)) ] || fail "pushes served: $plain without, $planted with"
}
