#!/usr/bin/env bash
# Live-daemon fuzzing (`make fuzz-live`): malformed and mutated messages at a running
# scheduler and two servers, and at workers, then a check job on the same daemons.
#
#   scripts/fuzz-live.sh [--seconds N] [--rate N] [--seed N]
#
# The time (default 600 s) is split in two halves: keys off, then keys on (a fresh
# keyset; the frames come from worker-2's key, which the allowlists list and the
# check job does not use). In each half:
#   - a scheduler (--servers 2 --workers 2) and 2 servers start and register;
#   - pskv-garbage (this job's id; hand-made kinds and mutate) loops at the
#     scheduler and at each server for the half, at most --rate messages a second
#     each (default 300);
#   - workers have no socket to send to (they only dial), so a fake scheduler
#     (pskv-garbage --listen) answers workers that dial it with semi-valid and
#     mutated messages: pskv-worker --app check runs against it again and again;
#   - every 2 s `pskvctl --timeout 1 status` must get its answer (within 1 s of
#     asking: connection, handshake and reply; the client's own start is not
#     counted, only reported in the wall-clock figures);
#   - then a check job (2 workers, --app check) runs on the same daemons and must
#     print "check ok", and the daemons must end it with status 0.
# Fails (exit 1) on a daemon that dies, a worker killed by a signal, a sanitizer
# report in any log, a status not answered within 1 s, a daemon fuzzer
# that reports a failure, or a check job that does not pass. Binaries come from
# $PSKV_BIN_DIR (the make target: the ASan + UBSan build). The logs (about 2.5 MB
# a minute) go to the work directory printed at the start, removed after a pass
# unless PSKV_KEEP_LOGS=1; the last lines are the summary.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
BIN=${PSKV_BIN_DIR:-$top/build/asan/bin}
SECONDS_TOTAL=600
RATE=300
SEED=${FUZZ_LIVE_SEED:-$(date +%s)}
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) SECONDS_TOTAL=$2; shift 2 ;;
    --rate) RATE=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "fuzz-live: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[ "$SECONDS_TOTAL" -ge 20 ] 2>/dev/null || { echo "fuzz-live: --seconds must be at least 20" >&2; exit 2; }
for b in pskv-scheduler pskv-server pskv-worker pskvctl pskv-garbage; do
  [ -x "$BIN/$b" ] || { echo "fuzz-live: no $BIN/$b (make fuzz-live builds the ASan tree)" >&2; exit 2; }
done
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
WORK=$(mktemp -d /tmp/pskv-fuzz-live-XXXXXX)
HALF=$((SECONDS_TOTAL / 2))
PIDS=()
failures=()
# At a server of a job that has not started, a well-formed request of this job is
# held (parked, up to 1024) until the first view, not answered: the hand-made
# kinds that are well-formed (unknown-table-push, unknown-table-pull,
# out-of-range) would wait for a reply that comes only once the job runs. Mutated
# messages (mutate) reach those paths, and the parked ones are served when the
# check job starts.
SERVER_KINDS=random,truncated,badproto,keys-count,vals-count,frames,version,job,raw-tcp,raw-zmtp,oversized,alive,mutate
SANITIZER='ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:|ThreadSanitizer|SUMMARY: .*Sanitizer'

cleanup() { for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done; }
trap cleanup EXIT

# failed MSG: notes a failure and goes on (the summary counts them); not test/lib.sh's
# fail, which ends a test
failed() { echo "fuzz-live: FAILED: $*"; failures+=("$*"); }

# shellcheck source=../test/lib.sh
. "$top/test/lib.sh" # free_port, now_ms

# status D PORT CTL...: one `pskvctl status` that waits at most 1 s for its answer
# (it exits 1 without one), timed from the start of the process; appends
# "WALL_MS RC" to D/status.times.
status_probe() {
  local d=$1 port=$2 t0 t1 rc; shift 2
  t0=$(now_ms)
  timeout 10 "$BIN/pskvctl" "$@" --scheduler "127.0.0.1:$port" --timeout 1 status > "$d/status.last" 2>&1
  rc=$?
  t1=$(now_ms)
  echo "$((t1 - t0)) $rc" >> "$d/status.times"
}

# The fake scheduler's worker loop: pskv-worker runs against it until the file
# D/fake.done appears; each run's status and log are kept.
worker_loop() {
  local d=$1 port=$2 i=0 rc; shift 2
  while [ ! -e "$d/fake.done" ]; do
    i=$((i + 1))
    timeout -s TERM 10 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --app check --rounds 2 \
      --check-keys 50 --connect-timeout 2 --request-timeout 1 --join-timeout 3 --job-id 77 "$@" \
      > "$d/fw-$i.log" 2>&1
    rc=$?
    echo "$rc" >> "$d/fake.status"
    # 124: the time-out ended it; 0, 1: it finished or gave up. A signal of its own is a crash.
    if [ $rc -gt 128 ]; then echo "worker run $i died of signal $((rc - 128))" >> "$d/fake.crash"; fi
    grep -Eq "$SANITIZER" "$d/fw-$i.log" && echo "worker run $i: sanitizer report" >> "$d/fake.crash"
    [ $rc -eq 0 ] || [ $rc -eq 1 ] || [ $rc -eq 124 ] || echo "worker run $i exited $rc" >> "$d/fake.odd"
    # keep only what matters: a sanitizer report, or a run the time-out ended
    [ $rc -eq 124 ] || grep -Eq "$SANITIZER" "$d/fw-$i.log" || rm -f "$d/fw-$i.log"
  done
}

# One half: MODE is off or on.
half() {
  local mode=$1 d=$WORK/$1 port fport job i js sp key t_end gk=() sk=() ck=() wk=()
  mkdir -p "$d"
  if [ "$mode" = on ]; then
    "$BIN/pskvctl" keys init "$d/keys" --servers 2 --workers 3 > /dev/null || { failed "$mode: keys init"; return; }
    gk=(--keys "$d/keys/worker-2")
    ck=(--keys "$d/keys/control")
  fi
  port=$(free_port)
  [ "$mode" = on ] && sk=(--keys "$d/keys/scheduler")
  "$BIN/pskv-scheduler" --port "$port" --servers 2 --workers 2 --replicas 2 \
    --join-timeout $((HALF + 600)) "${sk[@]}" > "$d/scheduler.log" 2>&1 &
  echo $! > "$d/scheduler.pid"; PIDS+=($!)
  for i in 0 1; do
    [ "$mode" = on ] && sk=(--keys "$d/keys/server-$i")
    "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --max-message 1048576 \
      --join-timeout $((HALF + 600)) "${sk[@]}" > "$d/server-$i.log" 2>&1 &
    echo $! > "$d/server-$i.pid"; PIDS+=($!)
  done
  for i in $(seq 100); do
    js=$("$BIN/pskvctl" "${ck[@]}" --scheduler "127.0.0.1:$port" status --json 2>/dev/null) &&
      [ "$(grep -o '"role":"server"' <<< "$js" | wc -l)" -ge 2 ] && break
    sleep 0.2
  done
  job=$(grep -o '"job_id":"[0-9]*"' <<< "$js" | grep -o '[0-9]*')
  [ -n "$job" ] && [ "$(grep -o '"role":"server"' <<< "$js" | wc -l)" -ge 2 ] ||
    { failed "$mode: the servers did not register: $(tail -n 2 "$d"/*.log)"; return; }
  echo "fuzz-live: keys $mode: scheduler on port $port, job $job; fuzzing for $HALF s"

  t_end=$((SECONDS + HALF))
  "$BIN/pskv-garbage" --endpoint "tcp://127.0.0.1:$port" --job-id "$job" --kind all,mutate \
    --seconds "$HALF" --rate "$RATE" --seed "$SEED" "${gk[@]}" > "$d/garbage-scheduler.out" 2>&1 &
  local gpids=($!)
  for i in 0 1; do
    sp=$(sed -n 's/.*listening on port \([0-9]*\).*/\1/p' "$d/server-$i.log" | head -n 1)
    key=()
    [ "$mode" = on ] && key=(--server-key "$(awk '{print $2}' "$d/keys/server-$i/node.pub")")
    "$BIN/pskv-garbage" --endpoint "tcp://127.0.0.1:$sp" --job-id "$job" --kind "$SERVER_KINDS" \
      --max-message 1048576 --seconds "$HALF" --rate "$RATE" --seed $((SEED + 1 + i)) \
      "${gk[@]}" "${key[@]}" > "$d/garbage-server-$i.out" 2>&1 &
    gpids+=($!)
  done
  fport=$(free_port)
  [ "$mode" = on ] && sk=(--keys "$d/keys/scheduler") && wk=(--keys "$d/keys/worker-0")
  "$BIN/pskv-garbage" --listen "$fport" --job-id 77 --seconds "$HALF" --seed $((SEED + 9)) \
    "${sk[@]}" > "$d/garbage-fake.out" 2>&1 &
  local fpid=$!
  PIDS+=("${gpids[@]}" "$fpid")
  sleep 0.5
  worker_loop "$d" "$fport" "${wk[@]}" &
  local wpid=$!
  PIDS+=($wpid)
  while [ $SECONDS -lt $t_end ]; do
    status_probe "$d" "$port" "${ck[@]}"
    for f in scheduler server-0 server-1; do
      kill -0 "$(cat "$d/$f.pid")" 2>/dev/null || { failed "$mode: $f died during the fuzzing: $(tail -n 3 "$d/$f.log")"; return; }
    done
    sleep 2
  done
  for p in "${gpids[@]}"; do
    wait "$p" || failed "$mode: a daemon fuzzer failed: $(grep -h 'failed' "$d"/garbage-s*.out | head -n 3)"
  done
  wait "$fpid"
  touch "$d/fake.done"
  wait "$wpid"
  status_probe "$d" "$port" "${ck[@]}"

  # the check job, on the same daemons
  for i in 0 1; do
    [ "$mode" = on ] && wk=(--keys "$d/keys/worker-$i")
    timeout 300 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --rank "$i" --app check \
      "${wk[@]}" > "$d/worker-$i.log" 2>&1 &
    echo $! > "$d/worker-$i.pid"
  done
  for i in 0 1; do
    wait "$(cat "$d/worker-$i.pid")" || failed "$mode: check worker $i exited $?: $(tail -n 2 "$d/worker-$i.log")"
    tail -n 1 "$d/worker-$i.log" | grep -q '^check ok' || failed "$mode: check worker $i: $(tail -n 1 "$d/worker-$i.log")"
  done
  for f in scheduler server-0 server-1; do
    local pid rc t=0
    pid=$(cat "$d/$f.pid")
    while kill -0 "$pid" 2>/dev/null && [ $t -lt 300 ]; do sleep 0.1; t=$((t + 1)); done
    kill -0 "$pid" 2>/dev/null && { kill -KILL "$pid"; failed "$mode: $f did not exit after the job"; continue; }
    wait "$pid"; rc=$?
    [ $rc -eq 0 ] || failed "$mode: $f exited $rc: $(tail -n 2 "$d/$f.log")"
  done
  summarize "$mode" "$d"
}

# Tallies of one half: frames per kind, status latency, the fake's workers.
summarize() {
  local mode=$1 d=$2 f
  echo "fuzz-live: keys $mode: frames sent per kind (scheduler + 2 servers):"
  cat "$d"/garbage-s*.out | awk '/^garbage: [a-z-]+ sent [0-9]+:/ {
      k = $2; n[k] += $4; e[k] += $5; o[k] += $8; s[k] += $11; st[k] += $13 }
    END { for (k in n) printf "  %-20s %9d sent, %9d ERROR replies, %7d other, %5d silent, %3d stalled\n",
          k, n[k], e[k], o[k], s[k], st[k] }' | sort
  cat "$d"/garbage-s*.out | awk '/^garbage: mutate [A-Z_]+ [0-9]+$/ { n[$3] += $4 }
    END { line = "  mutate by type:"; for (t in n) line = line " " t "=" n[t]; print line }'
  echo "  fake scheduler: $(tail -n 1 "$d/garbage-fake.out")"
  echo "  worker runs against it: $(wc -l < "$d/fake.status" 2>/dev/null || echo 0)," \
    "exit statuses: $(sort "$d/fake.status" 2>/dev/null | uniq -c | awk '{printf "%s x%s ", $2, $1}')"
  awk '{ if ($1 > max) max = $1; s += $1; n++; if ($2 != 0) bad++ }
       END { printf "  pskvctl status: %d probes, %d not answered within 1 s; wall clock (process start to exit) max %d ms, mean %.0f ms\n", n, bad, max, n ? s / n : 0 }' \
    "$d/status.times"
  echo "  check job: $(tail -n 1 "$d/worker-0.log" 2>/dev/null)"
}

echo "fuzz-live: $SECONDS_TOTAL s (keys off, then on), rate $RATE messages/s per daemon fuzzer, seed $SEED; work in $WORK"
start=$SECONDS
half off
half on
for mode in off on; do
  d=$WORK/$mode
  [ -d "$d" ] || continue
  awk -v m="$mode" '$2 != 0 { printf "%s: pskvctl status not answered within 1 s (exit %s, %d ms)\n", m, $2, $1 }' \
    "$d/status.times" 2>/dev/null |
    while read -r line; do echo "fuzz-live: FAILED: $line"; echo "$line" >> "$WORK/late"; done
  [ -s "$WORK/late" ] && failures+=("status too slow or failed") && rm -f "$WORK/late"
  [ -s "$d/fake.crash" ] && failed "$mode: workers against the fake scheduler: $(head -n 3 "$d/fake.crash")"
  for f in "$d"/*.log; do
    grep -Eq "$SANITIZER" "$f" && failed "$mode: sanitizer report in $f: $(grep -Em 1 "$SANITIZER" "$f")"
  done
done
if [ ${#failures[@]} -eq 0 ] && [ -z "${PSKV_KEEP_LOGS:-}" ]; then
  rm -rf "$WORK"
  echo "fuzz-live: 0 failures in $((SECONDS - start)) s"
  exit 0
fi
echo "fuzz-live: ${#failures[@]} failures in $((SECONDS - start)) s (logs in $WORK)"
[ ${#failures[@]} -eq 0 ]
