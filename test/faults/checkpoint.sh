# Fault tests (sourced by faults.sh): checkpoints written, killed and resumed,
# resharded, and delta checkpoints through a failover.

# A job of 2 servers (R = 1) and 2 workers with checkpoints 1 (step 5) and 2
# (step 10), killed with -9 after one more step, then resumed: values, adagrad
# state and worker progress equal the checkpoint's. Then checkpoint 2 is
# damaged (one flipped bit in one server's file, or a file cut short as by a
# kill mid-write): it is refused, naming the file, and checkpoint 1 is used.
ck_run() { # ck_run DIR PHASE [SCHEDULER FLAGS...]: starts the job (CK_SERVERS servers,
  # default 2, server i on --data-dir DIR/s$i), pids in DIR/pids, the workers' last
  local d=$1 phase=$2 port i ns=${CK_SERVERS:-2}; shift 2
  port=$(free_port)
  "$BIN/pskv-scheduler" --port "$port" --servers "$ns" --workers 2 --data-dir "$d/sched" "$@" \
    > "$d/sched-$phase.log" 2>&1 & echo $! > "$d/pids"
  for i in $(seq 0 $((ns - 1))); do
    "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --data-dir "$d/s$i" > "$d/s$i-$phase.log" 2>&1 &
    echo $! >> "$d/pids"
  done
  for i in 0 1; do
    "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank $i --app resume-check --rounds 10 \
      > "$d/w$i-$phase.log" 2>&1 &
    echo $! >> "$d/pids"
  done
}

ck_wait_line() { # ck_wait_line FILE PATTERN: up to 30 s
  local i
  for i in $(seq $((300 * TS))); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
  fail "no '$2' in $1: $(grep -h 'FAILED\|ERROR' "$(dirname "$1")"/*.log | head -n 3)"
}

ck_resume() { # ck_resume DIR PHASE STEP DIGEST [AFTER]: resumed job, checked
  local d=$1 phase=$2 step=$3 want=$4 after=${5:-} pid
  ck_run "$d" "$phase" --resume
  for pid in $(tail -n 2 "$d/pids"); do
    wait_pid_ok "$pid" || fail "$phase: a worker failed: $(grep -h 'FAILED\|ERROR' "$d"/*-"$phase".log | head -n 3)"
  done
  grep -q "rank 0 resumed at step $step " "$d/w0-$phase.log" || fail "$phase: rank 0 did not resume at step $step: $(grep resume "$d/w0-$phase.log")"
  grep -q "rank 1 resumed at step $step " "$d/w1-$phase.log" || fail "$phase: rank 1 did not resume at step $step"
  grep -q "resumed digest $want" "$d/w0-$phase.log" || fail "$phase: values differ from the checkpoint's: $(grep digest "$d/w0-$phase.log") (want $want)"
  [ -z "$after" ] || grep -q "after step $step digest $after" "$d/w0-$phase.log" ||
    fail "$phase: the next step differs from the original run's (optimizer state not restored)"
  kill -KILL $(cat "$d/pids") 2>/dev/null; sleep 0.2
}

wait_pid_ok() { # wait_pid_ok PID: its exit status 0 within 60 s
  local i
  for i in $(seq $((600 * TS))); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$1" 2>/dev/null && return 1
  wait "$1"
}

tags checkpoint_resume once
f_checkpoint_resume() {
  local d=$TDIR/c c1 c2 after f
  mkdir -p "$d/sched" "$d/s0" "$d/s1"
  ck_run "$d" fresh
  ck_wait_line "$d/w0-fresh.log" 'after step 10 digest'
  kill -KILL $(cat "$d/pids"); sleep 0.2
  c1=$(sed -n 's/.*checkpoint [0-9]* at step 5 digest \([0-9a-f]*\).*/\1/p' "$d/w0-fresh.log")
  c2=$(sed -n 's/.*checkpoint [0-9]* at step 10 digest \([0-9a-f]*\).*/\1/p' "$d/w0-fresh.log")
  after=$(sed -n 's/.*after step 10 digest \([0-9a-f]*\).*/\1/p' "$d/w0-fresh.log")
  [ -n "$c1" ] && [ -n "$c2" ] && [ -n "$after" ] || fail "the fresh run printed no digests"
  [ "$(grep -c '^ckpt ' "$d/sched/manifest")" -eq 2 ] || fail "the manifest does not hold 2 checkpoints"
  ck_resume "$d" resumed 10 "$c2" "$after"
  # one flipped bit in server 0's file of checkpoint 2
  f=$(ls "$d"/s0/ckpt-*-2-*.pskv) || fail "no checkpoint 2 file"
  cp "$f" "$d/good.pskv"
  printf '\x01' | dd of="$f" bs=1 seek=$(( $(stat -c %s "$f") / 2 )) conv=notrunc status=none
  cmp -s "$f" "$d/good.pskv" && printf '\x02' | dd of="$f" bs=1 seek=$(( $(stat -c %s "$f") / 2 )) conv=notrunc status=none
  ck_resume "$d" flipped 5 "$c1"
  grep -q "checkpoint file refused: .*$(basename "$f").*checksum" "$d/s0-flipped.log" ||
    fail "the damaged file was not refused by name: $(grep refused "$d/s0-flipped.log")"
  grep -q 'checkpoint 2 cannot be used' "$d/sched-flipped.log" || fail "the scheduler did not say checkpoint 2 cannot be used"
  # the same file cut short, as by kill -9 in the middle of writing
  cp "$d/good.pskv" "$f"
  truncate -s $(( $(stat -c %s "$f") * 2 / 3 )) "$f"
  ck_resume "$d" truncated 5 "$c1"
  grep -q "checkpoint file refused: .*$(basename "$f").*truncated" "$d/s0-truncated.log" ||
    fail "the partial file was not refused by name: $(grep refused "$d/s0-truncated.log")"
  echo "checkpoint 2 resumed exactly; a flipped bit and a partial file fell back to checkpoint 1"
}

# ck_fresh3 DIR R: a 3-server resume-check job (R replicas, server i on DIR/s$i)
# killed after its last step; its last checkpoint's digest in C2, the next step's in AFTER.
ck_fresh3() {
  local d=$1 r=$2
  CK_SERVERS=3 ck_run "$d" fresh --replicas "$r"
  ck_wait_line "$d/w0-fresh.log" 'after step 10 digest'
  kill -KILL $(cat "$d/pids"); sleep 0.2
  C2=$(sed -n 's/.*checkpoint [0-9]* at step 10 digest \([0-9a-f]*\).*/\1/p' "$d/w0-fresh.log")
  AFTER=$(sed -n 's/.*after step 10 digest \([0-9a-f]*\).*/\1/p' "$d/w0-fresh.log")
  [ -n "$C2" ] && [ -n "$AFTER" ] || fail "$d: the fresh run printed no digests"
}

# ck_reshard DIR R N: DIR's checkpoint resumed on N servers: the values and the next
# step equal the original run's (C2, AFTER), the scheduler resharded, every server
# holds partitions and exits cleanly, and the servers hold R x 2000 sparse rows
# (resume-check's keys, each once per chain member).
ck_reshard() {
  local e=$1 r=$2 n=$3 i held rows=0 what="$1 (R=$2) on $3 servers"
  CK_SERVERS=$n ck_run "$e" "on$n" --resume --replicas "$r"
  for i in $(tail -n 2 "$e/pids"); do
    wait_pid_ok "$i" || fail "$what: a worker failed: $(grep -h 'FAILED\|ERROR' "$e"/*-on$n.log | head -n 3)"
  done
  grep -q "resumed digest $C2" "$e/w0-on$n.log" ||
    fail "$what: values differ from the checkpoint's: $(grep digest "$e/w0-on$n.log") (want $C2)"
  grep -q "rank 1 resumed at step 10 " "$e/w1-on$n.log" || fail "$what: rank 1 did not resume at step 10"
  grep -q "after step 10 digest $AFTER" "$e/w0-on$n.log" || fail "$what: the next step differs from the original run's"
  grep -q "resumes on $n: " "$e/sched-on$n.log" || fail "$what: the scheduler did not reshard"
  for i in $(seq 0 $((n - 1))); do
    wait_pid_ok "$(sed -n "$((i + 2))p" "$e/pids")" || fail "$what: server $i did not exit cleanly"
    held=$(grep -o 'holds [0-9]* of' "$e/s$i-on$n.log" | tail -n 1 | cut -d' ' -f2)
    [ "${held:-0}" -gt 0 ] || fail "$what: server $i holds no partition"
    rows=$((rows + $(sed -n "s/.*table 'resume.sparse': \([0-9]*\) rows.*/\1/p" "$e/s$i-on$n.log")))
  done
  [ "$rows" -eq $((r * 2000)) ] || fail "$what: $rows sparse rows held, not $((r * 2000))"
  kill -KILL $(cat "$e/pids") 2>/dev/null; sleep 0.2
}

# A checkpoint of 3 servers resumed on 2 and, from a copy of the directories taken
# before, on 4 (resharding): sharing one data directory with R = 1 and R = 2; then
# (R = 1) each server with its own: a 4th server with an empty directory gets its
# partitions handed over by the servers that load them, and 2 servers refuse to
# resume, naming a partition, until the third server's files are copied in.
tags checkpoint_reshard once
f_checkpoint_reshard() {
  local r d i
  for r in 1 2; do
    d=$TDIR/r$r
    mkdir -p "$d/sched" "$d/data"
    for i in 0 1 2 3; do ln -s data "$d/s$i"; done
    ck_fresh3 "$d" "$r"
    cp -a "$d" "$d-4"
    ck_reshard "$d" "$r" 2
    ck_reshard "$d-4" "$r" 4
  done
  d=$TDIR/own
  mkdir -p "$d/sched" "$d/s0" "$d/s1" "$d/s2" "$d/s3"
  ck_fresh3 "$d" 1
  cp -a "$d" "$d-2"
  ck_reshard "$d" 1 4
  grep -q 'partitions let go: [1-9]' "$d"/s*-on4.log || fail "own directories on 4 servers: nothing handed over"
  CK_SERVERS=2 ck_run "$d-2" refused --resume
  for i in $(seq $((300 * TS))); do kill -0 "$(head -n 1 "$d-2/pids")" 2>/dev/null || break; sleep 0.1; done
  grep -q 'checkpoint 2 cannot be used: partition [0-9]* .*server node [0-9]* is missing' "$d-2/sched-refused.log" ||
    fail "2 servers without the third's files: no partition named: $(grep -h 'cannot' "$d-2/sched-refused.log")"
  grep -q 'cannot resume' "$d-2/sched-refused.log" || fail "2 servers without the third's files: the scheduler did not refuse"
  kill -KILL $(cat "$d-2/pids") 2>/dev/null; sleep 0.2
  cp "$d-2"/s2/*.pskv "$d-2/s0/"
  ck_reshard "$d-2" 1 2
  echo "3 servers' checkpoint resumed exactly on 2 and on 4 (R = 1 and 2, shared and own directories)"
}

# Incremental checkpoints across a failover (3 servers, R = 2, --full-every 100): a
# full checkpoint and a delta; then a server is killed and the survivors take over
# its partitions (copies), so the next checkpoint, asked as a delta, is a full file
# on each of them, saying why; the one after is a delta again. The job's exact sums
# hold, and a resume from the last loads its chain (full 3 + delta 4).
tags checkpoint_delta_failover once
f_checkpoint_delta_failover() {
  local d=$TDIR/c port i victim
  mkdir -p "$d/sched" "$d/data"
  launch "$d" --servers 3 --workers 1 --scheduler-opt=--replicas=2 \
    --scheduler-opt=--data-dir="$d/sched" --scheduler-opt=--full-every=100 \
    --server-opt=--data-dir="$d/data" -- --app check --count-acked --rounds 1000000 \
    --stop-file "$d/stop" --slowdown 2
  wait_joined "$d" 1
  port=$(sched_port "$d")
  ckpt() { # ckpt N KIND [--delta]: pskvctl checkpoint N completes, of that kind
    "$BIN/pskvctl" --scheduler "127.0.0.1:$port" checkpoint ${3:-} > "$d/ck.out" 2>&1 ||
      fail "checkpoint $1: $(cat "$d/ck.out")"
    grep -q "checkpoint $1 complete in [0-9]* ms ($2, [0-9]* bytes)" "$d/scheduler.log" ||
      fail "checkpoint $1 is not $2: $(grep "checkpoint $1 complete" "$d/scheduler.log")"
  }
  ckpt 1 full
  ckpt 2 delta --delta
  victim=$((RANDOM % 3))
  kill -KILL "$(cat "$d/server-$victim.pid")"
  for i in $(seq $((100 * TS))); do grep -q 'marked dead' "$d/scheduler.log" && break; sleep 0.1; done
  sleep $((2 * TS)) # the copies to the survivors
  ckpt 3 full --delta
  for i in 0 1 2; do
    [ "$i" = "$victim" ] && continue
    grep -q 'checkpoint 3: writing a full one, not a delta: the partitions it holds changed since checkpoint 2' \
      "$d/server-$i.log" || fail "server $i: $(grep 'checkpoint 3' "$d/server-$i.log")"
  done
  ckpt 4 delta --delta
  touch "$d/stop"
  wait "$(cat "$d/launch.pid")"
  grep -q 'final values equal the acknowledged pushes: yes' "$d/worker-0.log" ||
    fail "the check failed: $(grep check "$d/worker-0.log" | tail -n 2)"
  port=$(free_port)
  "$BIN/pskv-scheduler" --port "$port" --servers 2 --workers 1 --data-dir "$d/sched" --resume \
    > "$d/sched-r.log" 2>&1 & echo $! > "$d/pids"
  for i in 0 1; do
    "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --data-dir "$d/data" > "$d/s$i-r.log" 2>&1 &
    echo $! >> "$d/pids"
  done
  "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --app check --rounds 1 > "$d/w-r.log" 2>&1 &
  echo $! >> "$d/pids"
  ck_wait_line "$d/sched-r.log" 'resuming job [0-9]* from checkpoint 4 '
  ck_wait_line "$d/s0-r.log" 'loaded checkpoint 4 from .* (a delta: the full checkpoint 3 and 1 deltas)'
  ck_wait_line "$d/s1-r.log" 'loaded checkpoint 4 from .* (a delta: the full checkpoint 3 and 1 deltas)'
  kill -KILL $(cat "$d/pids") 2>/dev/null
  return 0
}
