# Push and pull filters (sourced by integration.sh): sums checked through the
# filters, a key-cache miss, the residual and the KKT filter.

t_filters_check() {
  # the exact-sum check with the lossless filters keycache and lz4: every sum exact,
  # and the filters did something (key lists as signatures, fewer bytes sent)
  "$LAUNCH" --servers 2 --workers 3 --timeout 120 --log-dir "$TDIR/logs" -- --app check \
    --rounds 4 --filter keycache --filter lz4 || fail "launch-local exited $?"
  local r line sent before hits
  for r in 0 1 2; do
    grep -q '^check ok:.*exact' "$TDIR/logs/worker-$r.log" || fail "worker $r: no exact check"
    line=$(grep "table 'check.sparse' filters keycache:64,lz4" "$TDIR/logs/worker-$r.log") ||
      fail "worker $r reported no filtered traffic"
    sent=$(sed -n 's/.* sent \([0-9]*\) bytes (\([0-9]*\) before.*/\1/p' <<< "$line")
    before=$(sed -n 's/.* sent \([0-9]*\) bytes (\([0-9]*\) before.*/\2/p' <<< "$line")
    hits=$(sed -n 's/.*, \([0-9]*\) key lists as signatures.*/\1/p' <<< "$line")
    [ "${hits:-0}" -gt 0 ] || fail "worker $r sent no key list as a signature: $line"
    [ "${sent:-0}" -gt 0 ] && [ "$((sent * 2))" -lt "${before:-0}" ] ||
      fail "worker $r: filters did not halve the bytes: $line"
  done
  # a zstd level out of range, an unknown filter: exit 2 naming --filter
  local rc
  "$BIN/pskv-worker" --scheduler 127.0.0.1:1 --app check --filter zstd:99 > out 2>&1; rc=$?
  [ $rc -eq 2 ] && grep -q -- '--filter' out || fail "--filter zstd:99: exit $rc: $(cat out)"
  "$BIN/pskv-worker" --scheduler 127.0.0.1:1 --app check --filter gzip > out 2>&1; rc=$?
  [ $rc -eq 2 ] && grep -q "gzip" out || fail "--filter gzip: exit $rc: $(cat out)"
  no_strays "$TDIR/logs"
}

t_filters_keycache_miss() {
  # one server holding the key lists of two workers in 1 MB evicts lists each
  # worker still remembers sending: its misses are answered with the keys, the
  # training ends as without the filter
  "$BIN/pskv-gen-sparse" --examples 20000 --features 10000 --out "$TDIR/gen" --seed 7 > gen.out ||
    fail "gen-sparse failed: $(cat gen.out)"
  local f auc="" auc0 misses
  for f in "" keycache:1,zstd; do
    rm -rf "$TDIR/logs"
    "$LAUNCH" --servers 1 --workers 2 --timeout 120 --log-dir "$TDIR/logs" -- --app sparse-lr \
      --train "$TDIR/gen.train" --test "$TDIR/gen.test" --epochs 2 --batch 64 --updater adagrad \
      --lr 0.05 --eval-every 0 --seed 1 --filter "$f" || fail "--filter '$f': exited $?"
    auc0=$auc
    auc=$(grep -o 'final auc [0-9.]*' "$TDIR/logs/worker-0.log" | awk '{print $3}')
    [ -n "$auc" ] || fail "--filter '$f': no final auc"
  done
  awk -v a="$auc" -v b="$auc0" 'BEGIN { d = a - b; exit !(d < 0.01 && d > -0.01) }' ||
    fail "auc $auc with the filters, $auc0 without"
  misses=$(cat "$TDIR"/logs/worker-*.log | sed -n 's/.* \([0-9]*\) misses.*/\1/p' | awk '{s += $1} END {print s + 0}')
  [ "$misses" -gt 0 ] || fail "no keycache miss: $(grep filters "$TDIR"/logs/worker-*.log)"
  echo "auc $auc with $misses keycache misses answered, $auc0 without the filters"
  no_strays "$TDIR/logs"
}

t_filters_residual() {
  # int8, sign and significant push less than the values and keep the rest on the worker: the
  # servers lack it until pskv_filter_flush, then hold every total
  local f line before
  for f in int8 sign,lz4 significant:0.9; do
    rm -rf "$TDIR/logs"
    "$LAUNCH" --servers 2 --workers 2 --timeout 60 --log-dir "$TDIR/logs" -- \
      --app filter-check --rounds 20 --filter "$f" || fail "--filter $f: exited $?"
    line=$(grep '^filter-check ok' "$TDIR/logs/worker-1.log") || fail "--filter $f: $(tail -n 2 "$TDIR/logs/worker-1.log")"
    before=$(sed -n 's/.*largest error \([0-9.e+-]*\) before.*/\1/p' <<< "$line")
    awk -v b="${before:-0}" 'BEGIN { exit !(b > 1e-3) }' || fail "--filter $f: nothing kept back: $line"
    echo "$line"
  done
  # a lossy filter on a sum table (the exact check's): refused at TABLE_OPEN
  rm -rf "$TDIR/logs"
  "$LAUNCH" --servers 1 --workers 1 --timeout 60 --log-dir "$TDIR/logs" -- --app check \
    --filter int8 > out 2>&1 && fail "check with --filter int8 passed"
  grep -q "filter 'int8' is lossy: not on a 'sum' table" "$TDIR/logs/worker-0.log" ||
    fail "no clear refusal: $(tail -n 3 "$TDIR/logs/worker-0.log")"
  no_strays "$TDIR/logs"
}

t_filters_kkt() {
  # sparse LR, sgd with l1: kkt skips rows at zero inside the L1 band. One worker, so
  # the skip is exact (its readings are newer than its own pushes; no other worker
  # moves a weight): the same AUC as without, with fewer rows pushed and held; with
  # keycache and lz4 too (rows left out, or sent as zeros to keep the key list)
  "$BIN/pskv-gen-sparse" --examples 20000 --features 200000 --out "$TDIR/gen" --seed 7 > gen.out ||
    fail "gen-sparse failed: $(cat gen.out)"
  local f auc auc0="" line skipped rows rows0="" held
  for f in "" kkt keycache,lz4,kkt; do
    rm -rf "$TDIR/logs"
    "$LAUNCH" --servers 2 --workers 1 --timeout 120 --log-dir "$TDIR/logs" \
      -- --app sparse-lr \
      --train "$TDIR/gen.train" --test "$TDIR/gen.test" --epochs 2 --batch 256 --updater sgd \
      --momentum 0 --lr 0.5 --l1 0.004 --eval-every 0 --seed 1 --filter "$f" ||
      fail "--filter '$f': exited $?"
    auc=$(grep -o 'final auc [0-9.]*' "$TDIR/logs/worker-0.log" | awk '{print $3}')
    [ -n "$auc" ] || fail "--filter '$f': no final auc"
    held=$(sed -n "s/.*table 'sparse-lr.w': \([0-9]*\) rows.*/\1/p" "$TDIR"/logs/server-*.log |
      awk '{ s += $1 } END { print s + 0 }')
    if [ -z "$f" ]; then
      auc0=$auc rows0=$held
      continue
    fi
    awk -v a="$auc" -v b="$auc0" 'BEGIN { d = a - b; exit !(d < 0.002 && d > -0.002) }' ||
      fail "auc $auc with --filter $f, $auc0 without"
    line=$(grep "table 'sparse-lr.w' filters .*kkt:0" "$TDIR/logs/worker-0.log") ||
      fail "--filter $f: no kkt counters: $(tail -n 3 "$TDIR/logs/worker-0.log")"
    skipped=$(sed -n 's/.*kkt skipped \([0-9]*\) of [0-9]* rows.*/\1/p' <<< "$line")
    rows=$(sed -n 's/.*kkt skipped [0-9]* of \([0-9]*\) rows.*/\1/p' <<< "$line")
    (( ${skipped:-0} > 0 && ${skipped:-0} * 4 > ${rows:-0} )) ||
      fail "--filter $f: kkt skipped too few rows (under a quarter): $line"
    [ "$held" -lt "$rows0" ] || fail "--filter $f: servers hold $held rows, $rows0 without"
    echo "--filter $f: auc $auc ($skipped of $rows rows skipped, $held rows held), $auc0 without ($rows0 held)"
  done
  # where a skipped gradient would not be a no-op: refused at TABLE_OPEN, naming
  # table and filter (ftrl's state takes every gradient; sparse-lr's sgd has momentum)
  local c upd flags says
  for c in "ftrl|--l1 0.001|not exact with ftrl" "sgd|--l1 0.001|not with momentum" \
           "adagrad||needs the L1-proximal update"; do
    IFS='|' read -r upd flags says <<< "$c"
    rm -rf "$TDIR/logs"
    # shellcheck disable=SC2086 # $flags: none or one flag and its value
    "$LAUNCH" --servers 1 --workers 1 --timeout 60 --log-dir "$TDIR/logs" \
      -- --app sparse-lr \
      --train "$TDIR/gen.train" --epochs 1 --updater "$upd" $flags --filter kkt > out 2>&1 &&
      fail "kkt with $upd passed"
    grep -q "table 'sparse-lr.w', filter 'kkt': $says" "$TDIR/logs/worker-0.log" ||
      fail "no clear refusal for $upd: $(tail -n 2 "$TDIR/logs/worker-0.log")"
  done
  no_strays "$TDIR/logs"
}
