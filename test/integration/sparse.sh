# Sparse tables and sparse-lr (sourced by integration.sh).

t_sparse_lr_heart_scale() {
  local hs=/usr/share/doc/liblinear-tools/examples/heart_scale acc
  [ -f "$hs" ] || fail "$hs missing (liblinear-tools is a dependency)"
  "$LAUNCH" --servers 2 --workers 2 --timeout 120 --log-dir "$TDIR/logs" -- --app sparse-lr \
    --train "$hs" --epochs 20 --batch 8 --updater adagrad --lr 0.5 --eval-every 0 || fail "exited $?"
  acc=$(grep -o 'final auc [0-9.]* logloss [0-9.]* accuracy [0-9.]*' "$TDIR/logs/worker-0.log" | awk '{print $7}')
  [ -n "$acc" ] || fail "no final line: $(tail -n 3 "$TDIR/logs/worker-0.log")"
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.80) }' || fail "training accuracy $acc < 0.80"
  echo "heart_scale training accuracy $acc"
}

t_sparse_bench() {
  # --app sparse-bench: 200,000 random 64-bit keys filled from empty (the map grows
  # past 65,536 slots, so its rows move to the doubled map while pushes go on), then
  # updates; the server holds exactly one row per key and reports its longest push
  local k
  "$LAUNCH" --servers 1 --workers 2 --timeout 120 --log-dir "$TDIR/logs" -- --app sparse-bench \
    --rows 200000 --push-keys 4096 --steps 20 --replay-wait "$TDIR/go" > /dev/null 2>&1 &
  local l=$!
  for k in 1 2; do
    for _ in $(seq 600); do
      grep -q "waiting for $TDIR/go.$k" "$TDIR/logs/worker-0.log" 2>/dev/null &&
        grep -q "waiting for $TDIR/go.$k" "$TDIR/logs/worker-1.log" 2>/dev/null && break
      sleep 0.1
    done
    touch "$TDIR/go.$k"
  done
  wait "$l" || fail "launch-local exited $?: $(tail -n 3 "$TDIR/logs/worker-0.log")"
  for r in 0 1; do
    grep -q "^sparse-bench phase=fill rank=$r keys=100000 .*max_push_ms=" "$TDIR/logs/worker-$r.log" ||
      fail "worker $r: no fill line: $(grep sparse-bench "$TDIR/logs/worker-$r.log")"
    grep -q "^sparse-bench phase=update rank=$r keys=81920 " "$TDIR/logs/worker-$r.log" ||
      fail "worker $r: no update line"
  done
  grep -q "table 'sparse-bench': 200000 rows, [0-9]* bytes; longest push [0-9.]* ms of CPU" \
    "$TDIR/logs/server-0.log" || fail "server: $(grep "table 'sparse-bench'" "$TDIR/logs/server-0.log")"
  no_strays "$TDIR/logs"
}

t_sparse_lr_planted() {
  local planted auc
  "$BIN/pskv-gen-sparse" --examples 50000 --features 10000 --out "$TDIR/gen" --seed 7 > gen.out ||
    fail "gen-sparse failed: $(cat gen.out)"
  planted=$(sed -n 's/^planted_auc=//p' gen.out)
  [ -n "$planted" ] || fail "gen-sparse printed no planted_auc"
  "$LAUNCH" --servers 2 --workers 2 --timeout 150 --log-dir "$TDIR/logs" -- --app sparse-lr \
    --train "$TDIR/gen.train" --test "$TDIR/gen.test" --epochs 3 --batch 64 --updater adagrad \
    --lr 0.05 --eval-every 0 --metrics "$TDIR/m.jsonl" --save-model "$TDIR/slr.model" ||
    fail "exited $?"
  auc=$(grep -o 'final auc [0-9.]*' "$TDIR/logs/worker-0.log" | awk '{print $3}')
  [ -n "$auc" ] || fail "no final auc: $(tail -n 3 "$TDIR/logs/worker-0.log")"
  echo "planted auc $planted, learned auc $auc"
  awk -v a="$auc" -v p="$planted" 'BEGIN { exit !(a >= p - 0.05) }' || fail "auc $auc is more than 0.05 below the planted $planted"
  grep -q '"auc":' "$TDIR/m.jsonl" || fail "metrics lack auc"
  # the saved model, loaded into 3 servers with R = 2 and trained with lr 0, gives
  # the same AUC, and saving it again gives every weight once
  local n1 n2 auc2
  n1=$(sed -n 's/.*model saved to .* (\([0-9]*\) weights).*/\1/p' "$TDIR/logs/worker-0.log")
  [ "${n1:-0}" -gt 1000 ] || fail "the model holds ${n1:-no} weights"
  "$LAUNCH" --servers 3 --workers 2 --timeout 150 --log-dir "$TDIR/logs3" \
    --scheduler-opt --replicas --scheduler-opt 2 -- --app sparse-lr --train "$TDIR/gen.train" \
    --test "$TDIR/gen.test" --epochs 1 --batch 64 --updater adagrad --lr 0 --eval-every 0 \
    --init-from "$TDIR/slr.model" --save-model "$TDIR/slr2.model" || fail "the run from the model exited $?"
  grep -q "loaded $n1 weights" "$TDIR/logs3/worker-0.log" || fail "the model was not loaded"
  auc2=$(grep -o 'final auc [0-9.]*' "$TDIR/logs3/worker-0.log" | awk '{print $3}')
  [ "$auc2" = "$auc" ] || fail "auc from the saved model $auc2, trained $auc"
  n2=$(sed -n 's/.*model saved to .* (\([0-9]*\) weights).*/\1/p' "$TDIR/logs3/worker-0.log")
  [ "$n2" = "$n1" ] || fail "saved again with R = 2: $n2 weights, not $n1 (each once)"
  cmp -s "$TDIR/slr.model" "$TDIR/slr2.model" || fail "lr 0 changed the saved weights"
  echo "sparse model: $n1 weights saved, loaded, auc $auc2; saved again with R = 2: $n2"
}
