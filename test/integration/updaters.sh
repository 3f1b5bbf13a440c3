# Updaters (sourced by integration.sh): the plug-in, the built-ins replayed, adam
# and ftrl training.

# replay_expect SCALE: the values --app replay must end with under w -= SCALE * g
# from zero (the gradient schedule of app_replay.c, 10 steps), one line per key
replay_expect() {
  awk -v c="$1" 'BEGIN { for (t = 0; t < 2; t++) for (k = 0; k < 16; k++) {
      line = sprintf("replay %s %d:", t ? "sparse" : "dense", k)
      for (j = 0; j < 3; j++) { s = 0; for (st = 0; st < 10; st++) s += ((7*k + 3*j + 5*st) % 11 - 5) / 8
        v = -c * s; if (v == 0) v = 0; line = line sprintf(" %.9g", v) }
      print line } }'
}

t_updater_plugin() {
  # the example plug-in (w -= scale * g, test/examples/plugin_scaled_sgd.c) on 2 servers with
  # --plugin-dir: every value as computed by hand; a wrong ABI version, a missing
  # file, a server without --plugin-dir and a plug-in outside it are refused at
  # TABLE_OPEN with the reason in the worker's error; --updater-check
  local lib dir
  lib=$(cd "$BIN/../lib" && pwd)
  [ -f "$lib/pskv-plugin-scaled-sgd.so" ] || fail "no $lib/pskv-plugin-scaled-sgd.so (make all builds it)"
  "$LAUNCH" --servers 2 --workers 1 --timeout 60 --log-dir "$TDIR/logs" --server-opt=--plugin-dir="$lib" \
    -- --app replay --updater "plugin:$lib/pskv-plugin-scaled-sgd.so:0.5" > /dev/null 2>&1 ||
    fail "replay exited $?: $(tail -n 2 "$TDIR/logs/worker-0.log")"
  grep '^replay \(dense\|sparse\)' "$TDIR/logs/worker-0.log" > got
  replay_expect 0.5 > want
  [ "$(wc -l < want)" -eq 32 ] || fail "expected values: $(wc -l < want) lines"
  diff want got > /dev/null || fail "plug-in values differ from the hand computation: $(diff want got | head -n 4)"
  mkdir -p "$TDIR/empty"
  for case in "$lib:wrong-abi.so:ABI version 99, this server needs 1" \
              "$lib:none.so:none.so: cannot load" \
              ":scaled-sgd.so:plug-ins are off on this server" \
              "$TDIR/empty:scaled-sgd.so:not inside --plugin-dir"; do
    IFS=: read -r dir so msg <<< "$case"
    rm -rf "$TDIR/l2"
    "$LAUNCH" --servers 1 --workers 1 --timeout 60 --log-dir "$TDIR/l2" --server-opt=--plugin-dir="$dir" \
      -- --app replay --updater "plugin:$lib/pskv-plugin-$so" > /dev/null 2>&1 && fail "$so accepted (--plugin-dir '$dir')"
    grep -q "$msg" "$TDIR/l2/worker-0.log" || fail "no '$msg' for the worker: $(tail -n 2 "$TDIR/l2/worker-0.log")"
  done
  "$BIN/pskv-server" --updater-check "plugin:$lib/pskv-plugin-scaled-sgd.so:2" > chk.out 2>&1 ||
    fail "--updater-check failed on the example: $(cat chk.out)"
  grep -q 'updater-check: passed' chk.out || fail "no pass line: $(cat chk.out)"
  "$BIN/pskv-server" --updater-check "plugin:$lib/pskv-plugin-wrong-abi.so" > chk2.out 2>&1
  [ $? -eq 2 ] || fail "--updater-check of a wrong ABI did not exit 2: $(cat chk2.out)"
  "$BIN/pskv-server" --updater-check "plugin:$lib/pskv-plugin-scaled-sgd.so:x" > chk3.out 2>&1
  [ $? -eq 2 ] && grep -q 'ARGS must be a number' chk3.out || fail "bad ARGS not refused: $(cat chk3.out)"
  "$BIN/pskv-server" --updater-check "plugin:$lib/pskv-plugin-scaled-sgd.so:1e38" > chk5.out 2>&1
  [ $? -eq 1 ] && grep -q 'finite values and state: NO' chk5.out && grep -q 'updater-check: FAILED' chk5.out ||
    fail "an overflowing plug-in passed --updater-check: $(cat chk5.out)"
  "$BIN/pskv-server" --plugin-dir "$TDIR/none" > chk4.out 2>&1
  [ $? -eq 2 ] && grep -q -- '--plugin-dir' chk4.out || fail "a missing --plugin-dir not refused: $(cat chk4.out)"
  echo "plug-in: 96 values as by hand; wrong ABI, missing file, no or another --plugin-dir, bad ARGS refused by name"
}

t_updaters_replay() {
  # adam, adamw, ftrl and sgd --l1 through 2 servers: finite values, dense equal to
  # sparse; adam with --eps 0 meets a zero gradient (0/0): the push is refused
  # naming the table and the run fails; bad flags exit 2 naming the flag
  local u
  for u in "adam" "adamw --weight-decay 0.1" "ftrl" "sgd --l1 0.5 --momentum 0"; do
    # shellcheck disable=SC2086 # u: an updater and its flags
    "$LAUNCH" --servers 2 --workers 1 --timeout 60 --log-dir "$TDIR/l-${u%% *}" -- --app replay \
      --updater $u > /dev/null 2>&1 || fail "$u exited $?: $(tail -n 2 "$TDIR/l-${u%% *}/worker-0.log")"
    grep '^replay dense' "$TDIR/l-${u%% *}/worker-0.log" | cut -d: -f2 > d
    grep '^replay sparse' "$TDIR/l-${u%% *}/worker-0.log" | cut -d: -f2 > s
    [ "$(wc -l < d)" -eq 16 ] || fail "$u: no values"
    cmp -s d s || fail "$u: the dense and sparse tables differ"
    grep -qi 'nan\|inf' d && fail "$u: non-finite values"
  done
  grep -q ' 0 \| 0$' d || fail "sgd --l1 0.5 left no value at exactly zero"
  "$LAUNCH" --servers 1 --workers 1 --timeout 60 --log-dir "$TDIR/lnan" -- --app replay \
    --updater adam --eps 0 > /dev/null 2>&1 && fail "adam with eps 0 and a zero gradient passed"
  grep -q "updater of table 'replay.dense' made rows NaN or infinite" "$TDIR/lnan/worker-0.log" ||
    fail "no error naming the table: $(tail -n 2 "$TDIR/lnan/worker-0.log")"
  grep -q "table 'replay.dense': [1-9][0-9]* rows restored after the updater made them NaN" \
    "$TDIR/lnan/server-0.log" || fail "the server's report does not count the rows restored: $(grep "table 'replay.dense'" "$TDIR/lnan/server-0.log")"
  local args
  for args in "--updater nadam:--updater" "--updater adam --weight-decay 0.1:--weight-decay" \
              "--updater adagrad --l1 0.1:--l1" "--updater adam --lr-schedule cosine:--lr-schedule" \
              "--updater adam --beta1 1:--beta1"; do
    # shellcheck disable=SC2086
    "$BIN/pskv-worker" --scheduler 127.0.0.1:1 --app replay ${args%%:*} > out 2>&1
    [ $? -eq 2 ] || fail "'${args%%:*}' did not exit 2"
    grep -q -- "${args##*:}" out || fail "'${args%%:*}' does not name ${args##*:}: $(cat out)"
  done
}

t_train_adam_ftrl() {
  # softmax with adam and sparse-lr with ftrl learn (same bars as sgd/adagrad's
  # tests); ftrl stores fewer rows than there are features (its zeros) at lambda1 =
  # 1/--batch (the default before 2026-11-29; the default 1/(16 x batch) stores them all)
  "$LAUNCH" --servers 2 --workers 2 --timeout 150 --log-dir "$TDIR/logs" -- --app softmax \
    --epochs 1 --train-limit 6000 --test-limit 1000 --updater adam --batch 4 --seed 1 \
    --eval-every 0 || fail "softmax adam exited $?"
  acc=$(grep -o 'final test accuracy [0-9.]*' "$TDIR/logs/worker-0.log" | awk '{print $4}')
  awk -v a="${acc:-0}" 'BEGIN { exit !(a >= 0.75) }' || fail "adam test accuracy ${acc:-none} < 0.75"
  "$BIN/pskv-gen-sparse" --examples 20000 --features 5000 --out "$TDIR/gen" --seed 7 > gen.out ||
    fail "gen-sparse failed"
  "$LAUNCH" --servers 2 --workers 2 --timeout 150 --log-dir "$TDIR/logs2" -- --app sparse-lr \
    --train "$TDIR/gen.train" --test "$TDIR/gen.test" --epochs 3 --batch 64 --updater ftrl \
    --l1 0.015625 --eval-every 0 --save-model "$TDIR/f.model" || fail "sparse-lr ftrl exited $?"
  auc=$(grep -o 'final auc [0-9.]*' "$TDIR/logs2/worker-0.log" | awk '{print $3}')
  n=$(sed -n 's/.*model saved to .* (\([0-9]*\) weights).*/\1/p' "$TDIR/logs2/worker-0.log")
  awk -v a="${auc:-0}" 'BEGIN { exit !(a >= 0.75) }' || fail "ftrl auc ${auc:-none} < 0.75"
  [ "${n:-99999}" -lt 4000 ] || fail "ftrl stored ${n:-no} rows of ~5000 features"
  echo "softmax adam accuracy $acc; sparse-lr ftrl auc $auc with $n rows stored"
}

# pskv_table_set_lr (test/examples/lr_change.c) on 2 servers with 2 replicas: every
# value pulled after 3 pushes at lr 0.01 and 3 at 0.0025 equals the adam (adamw,
# bsp: adagrad) steps computed by hand; pulls are answered by the tails, which are
# not the heads with 2 replicas, so the forwarded lr is what is checked. Both
# servers log the change; NaN, 0, -1 and inf are refused naming the value.
lr_run() { # lr_run TAG ARGS...: a job of 2 servers (replicas 2) and pskv-lr-change
  local port tag=$1; shift
  port=$(free_port)
  start "sched-$tag" "$BIN/pskv-scheduler" --port "$port" --servers 2 --workers 1 --replicas 2
  start "server-$tag-0" "$BIN/pskv-server" --scheduler "127.0.0.1:$port"
  start "server-$tag-1" "$BIN/pskv-server" --scheduler "127.0.0.1:$port"
  timeout 90 "$BIN/pskv-lr-change" --scheduler "127.0.0.1:$port" "$@" > "lr-$tag.out" 2>&1
  local rc=$?
  wait_exit "$(cat "sched-$tag.pid")" 30 > /dev/null || fail "the job ($tag) did not end"
  wait_exit "$(cat "server-$tag-0.pid")" 30 > /dev/null || fail "server 0 ($tag) did not exit"
  wait_exit "$(cat "server-$tag-1.pid")" 30 > /dev/null || fail "server 1 ($tag) did not exit"
  return $rc
}
t_updater_lr_change() {
  local s tag
  for tag in "adam --updater adam" "adamw --updater adamw" "bsp --updater adagrad --consistency bsp"; do
    # shellcheck disable=SC2086
    lr_run $tag || fail "${tag%% *}: $(tail -n 3 "lr-${tag%% *}.out")"
    tag=${tag%% *}
    grep -q '^lr-change ok: 1000 values match' "lr-$tag.out" ||
      fail "$tag: $(tail -n 1 "lr-$tag.out")"
    for s in 0 1; do
      grep -q "table 'lr': lr 0.01 -> 0.0025 (set by worker rank 0" "server-$tag-$s.log" ||
        fail "$tag: server $s did not log the change: $(grep "table 'lr'" "server-$tag-$s.log")"
    done
  done
  [ "$(grep -c '^refused: table .lr.: lr \(nan\|0\|-1\|inf\) refused' lr-adam.out)" -eq 4 ] ||
    fail "bad values not refused by name: $(grep refused lr-adam.out)"
  tail -n 1 lr-adam.out
  no_strays "$TDIR"
}

# A reader key (bound "reader a") may open a table of namespace a but not change its
# lr: PSKV_EACCES naming the namespace, and the server keeps serving.
tags updater_lr_reader keys
t_updater_lr_reader() {
  local K=$TDIR/keys port pub f
  keyset "$K" 1 1
  pub=$(cut -d' ' -f2 "$K/worker-0/node.pub")
  for f in "$K/server-0/authorized" "$K/scheduler/authorized"; do
    awk -v p="$pub" '$NF == p { print "reader a " p; next } { print }' "$f" > "$f.new" && mv "$f.new" "$f"
  done
  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1 --keys "$K/scheduler"
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --keys "$K/server-0"
  timeout 60 "$BIN/pskv-lr-change" --scheduler "127.0.0.1:$port" --keys "$K/worker-0" \
    --namespace a > lr.out 2>&1 && fail "a reader changed the lr: $(tail -n 2 lr.out)"
  grep -q "^lr-change: set lr: .*namespace 'a': a reader key may pull, not push (nor change table 'a/lr''s lr)" lr.out ||
    fail "the reader was not told: $(tail -n 2 lr.out)"
  grep -q "refused namespace from" server-0.log || fail "the server did not count it"
  wait_exit "$(cat scheduler.pid)" 30 > /dev/null || fail "the job did not end"
  wait_exit "$(cat server-0.pid)" 30 > /dev/null || fail "the server did not exit"
  no_strays "$TDIR"
}
