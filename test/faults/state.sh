# Fault tests (sourced by faults.sh): per-row state (adam's, admission counts) through
# a server kill.

# Kills server-N of DIR (-9) and waits (up to 10 s) until the scheduler calls it dead.
kill_until_dead() {
  local js i
  kill -KILL "$(cat "$1/server-$2.pid")"
  for i in $(seq $((100 * TS))); do
    js=$(status_json "$1") && grep -q '"state":"dead"' <<< "$js" && return 0
    sleep 0.1
  done
  fail "server-$2 was not declared dead"
}

# Adam's per-row state (m, v, step) survives a server kill at R = 2: one worker
# pushes the fixed schedule of --app replay (dense and sparse tables, each push
# answered before the next), halfway it waits while one of 3 servers is killed
# and replaced (the new chain member filled from the survivor), then finishes.
# Every value equals an uninterrupted run's to 1e-6 (in practice bit for bit:
# each row sees the same updates in the same order, all of them acknowledged by
# the tail before the kill).
tags adam_kill once
f_adam_kill() {
  local a=$TDIR/a b=$TDIR/b i victim
  launch "$a" --servers 3 --workers 1 --scheduler-opt=--replicas=2 -- --app replay \
    --updater adam --lr 0.01 --steps 40
  wait "$(cat "$a/launch.pid")" || fail "the uninterrupted run failed: $(tail -n 2 "$a/worker-0.log")"
  launch "$b" --servers 3 --workers 1 --scheduler-opt=--replicas=2 -- --app replay \
    --updater adam --lr 0.01 --steps 40 --replay-wait "$b/go"
  for i in $(seq $((300 * TS))); do grep -q 'replay: waiting' "$b/worker-0.log" 2>/dev/null && break; sleep 0.1; done
  grep -q 'replay: waiting' "$b/worker-0.log" || fail "the worker never reached the halfway wait"
  victim=$((RANDOM % 3))
  kill_until_dead "$b" "$victim"
  touch "$b/go"
  wait "$(cat "$b/launch.pid")" || fail "the run with a kill failed: $(tail -n 3 "$b/worker-0.log")"
  grep '^replay \(dense\|sparse\)' "$a/worker-0.log" > "$TDIR/va"
  grep '^replay \(dense\|sparse\)' "$b/worker-0.log" > "$TDIR/vb"
  [ "$(wc -l < "$TDIR/va")" -eq 32 ] || fail "the uninterrupted run printed no values"
  paste -d' ' "$TDIR/va" "$TDIR/vb" | awk '{ for (j = 0; j < 3; j++) { x = $(4 + j); y = $(10 + j)
      d = x - y; if (d < 0) d = -d; if (d > 1e-6) { print "differs: " $0; bad = 1 } } }
    END { exit bad }' || fail "values after the kill differ from the uninterrupted run"
  cmp -s "$TDIR/va" "$TDIR/vb" && echo "adam after killing server-$victim: all 96 values bit for bit" ||
    echo "adam after killing server-$victim: all 96 values within 1e-6"
}

# Admission and eviction through a server kill at R = 2 (--app admit, 3 servers):
# after the admission phase (checked: exactly the keys pushed 3 times or more
# have rows, with their values) one server is killed; the chains re-form on the
# survivors and a new member is filled. The rows are checked again, then the
# eviction phase must leave exactly the rows still pushed: the FILL copies carry
# their clock stamps, so new members evict with their heads.
tags admit_kill once
f_admit_kill() {
  local b=$TDIR/b i victim
  launch "$b" --servers 3 --workers 1 --scheduler-opt=--replicas=2 -- --app admit \
    --admit-after 3 --evict-after 2 --replay-wait "$b/go"
  for i in $(seq $((300 * TS))); do grep -q 'admit: waiting' "$b/worker-0.log" 2>/dev/null && break; sleep 0.1; done
  grep -q 'admit: waiting' "$b/worker-0.log" || fail "no admission phase: $(tail -n 3 "$b/worker-0.log")"
  victim=$((RANDOM % 3))
  kill_until_dead "$b" "$victim"
  touch "$b/go.1"
  for i in $(seq $((600 * TS))); do
    [ "$(grep -c 'admit: waiting' "$b/worker-0.log")" -ge 2 ] && break
    kill -0 "$(cat "$b/worker-0.pid")" 2>/dev/null || break
    sleep 0.1
  done
  touch "$b/go.2"
  wait "$(cat "$b/launch.pid")" || fail "the run with a kill failed: $(grep '^admit' "$b/worker-0.log" | tail -n 3)"
  grep -q '^admit: 10000 rows after the pause$' "$b/worker-0.log" ||
    fail "rows after the kill: $(grep '^admit' "$b/worker-0.log")"
  grep -q '^admit: 500 rows after 4 clocks' "$b/worker-0.log" ||
    fail "eviction after the kill: $(grep '^admit' "$b/worker-0.log")"
  echo "admission and eviction exact after killing server-$victim"
}
