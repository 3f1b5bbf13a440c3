#!/usr/bin/env bash
# Fault tests: real daemons on loopback, killed and paused mid-run. Each scenario
# runs --trials times (make faults: 3, make test: 1, make test-faults: 20) on the optimised build
# (build/bin, or $PSKV_BIN_DIR); each trial has a hard time-out. Prints one line
# per trial, the failover times measured, the drain times (pskvctl drain), and
# last "N passed, N failed" on its own line.
#
#   test/faults.sh [--trials N] [--once-trials M] [--figures] [--only NAME]... [--tags TAG[,TAG]] [-j N] [--rerun-failed] [--list]
#
# The scenarios tagged figure report a time (failover, drain) and assert none: with
# --figures (make faults, make test-faults) they run alone, so that the medians and
# worst cases printed are the machine's; without (make test: one trial each, for
# what they assert) beside another scenario.
# The scenarios tagged once (checkpoints, joins, drains, the evaluator, filters)
# check what a run ends with, not a time: --once-trials M runs them M times instead
# (make test: 1; default: --trials). The scenarios are the functions f_NAME of
# test/faults/*.sh, one file per area, with their tags beside them; --tags, -j and
# --list work as in test/integration.sh (test/README.md).
#
# Failover time = from kill -9 (wall clock taken just before it) to the first
# push a new owner acknowledged (the earliest "failover:" line of any worker).
#
# FAULT_TIME_SCALE=N (default 1) gives every time-out of the script N times as
# long (a trial's, the launcher's, the waits for a join, a line, an exit) and the
# no-copy pause's warm-up N seconds: for slow builds (make tsan: 8). What the
# scenarios check does not change.
set -u
RUNNER=faults.sh
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
TRIALS=3
ONCE_TRIALS=
while [ $# -gt 0 ]; do
  harness_arg "$@"
  [ "$HARNESS_SHIFT" -gt 0 ] && { shift "$HARNESS_SHIFT"; continue; }
  case $1 in
    --trials) TRIALS=$2; shift 2 ;;
    --trials=*) TRIALS=${1#*=}; shift ;;
    --once-trials) ONCE_TRIALS=$2; shift 2 ;;
    --once-trials=*) ONCE_TRIALS=${1#*=}; shift ;;
    --figures) HARNESS_ALONE="$HARNESS_ALONE figure"; shift ;;
    -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "faults.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ $TRIALS =~ ^[0-9]+$ ]] || harness_die "--trials must be a count, not '$TRIALS'"
[[ ${ONCE_TRIALS:-0} =~ ^[0-9]+$ ]] || harness_die "--once-trials must be a count, not '$ONCE_TRIALS'"
TS=${FAULT_TIME_SCALE:-1}
[[ $TS =~ ^[1-9][0-9]*$ ]] || { echo "faults.sh: FAULT_TIME_SCALE must be a positive integer" >&2; exit 2; }
HARNESS_TIMEOUT=$((170 * TS))
HARNESS_TAIL=20
BIN=${PSKV_BIN_DIR:-$top/build/bin}
LAUNCH=$top/scripts/launch-local.sh
export PSKV_BIN_DIR=$BIN
FAILOVERS=()
DRAINS=()

# the runner's hooks (test/lib.sh): trials per scenario, the failover and drain
# times each trial printed, their median and worst at the end
harness_trials() { if has_tag "$1" once; then echo "${ONCE_TRIALS:-$TRIALS}"; else echo "$TRIALS"; fi; }
harness_note() {
  local f g
  f=$(sed -n 's/^failover_ms=//p' "$1/test.out")
  [ -n "$f" ] && FAILOVERS+=("$f")
  for g in $(sed -n 's/^drain_ms=//p' "$1/test.out"); do DRAINS+=("$g"); done
  HARNESS_NOTE=${f:+ (failover $f ms)}
}
harness_summary() {
  local sorted n
  if [ ${#FAILOVERS[@]} -gt 0 ]; then
    sorted=$(printf '%s\n' "${FAILOVERS[@]}" | sort -n)
    n=${#FAILOVERS[@]}
    echo "failover (kill -9 to the first push acknowledged by a new owner) over $n kills:" \
      "median $(sed -n "$(( (n + 1) / 2 ))p" <<< "$sorted") ms, worst $(tail -n 1 <<< "$sorted") ms"
  fi
  if [ ${#DRAINS[@]} -gt 0 ]; then
    sorted=$(printf '%s\n' "${DRAINS[@]}" | sort -n)
    n=${#DRAINS[@]}
    echo "drain (accepted to the server let go, its partitions whole on the others) over $n" \
      "drains: median $(sed -n "$(( (n + 1) / 2 ))p" <<< "$sorted") ms, worst $(tail -n 1 <<< "$sorted") ms"
  fi
}

# ---- helpers of every fault file -----------------------------------------------------

# launch DIR ARGS...: a local cluster in the background; its pid in DIR/launch.pid.
launch() {
  local dir=$1; shift
  mkdir -p "$dir"
  "$LAUNCH" --log-dir "$dir" --timeout $((150 * TS)) "$@" > "$dir/launch.out" 2>&1 &
  echo $! > "$dir/launch.pid"
}

# Waits (up to 20 s) until every worker of DIR logged that it joined.
wait_joined() {
  local dir=$1 n=$2 i
  for i in $(seq $((200 * TS))); do
    [ "$(cat "$dir"/worker-*.log 2>/dev/null | grep -c 'joined job')" -ge "$n" ] && return 0
    sleep 0.1
  done
  fail "workers did not join: $(tail -n 3 "$dir/launch.out")"
}

# Waits for the launcher; fails unless every worker exited 0.
wait_ok() {
  local dir=$1 pid rc
  pid=$(cat "$dir/launch.pid")
  wait "$pid"; rc=$?
  [ $rc -eq 0 ] || fail "workers failed (launch status $rc): $(grep -h 'FAILED\|failed' "$dir"/launch.out "$dir"/worker-*.log | head -n 5)"
  grep -q '^check ok' "$dir/launch.out" || fail "no 'check ok' line"
}

sched_port() { sed -n 's/.*scheduler listening on port \([0-9]*\).*/\1/p' "$1/scheduler.log" | head -n 1; }

status_json() { "$BIN/pskvctl" --scheduler "127.0.0.1:$(sched_port "$1")" "${@:2}" status --json; }

# Failover of DIR: kill time (ms) to the first "failover:" line of any worker.
failover_ms() {
  local dir=$1 kill_ms=$2 first="" line t
  while read -r line; do
    t=$(stamp_ms "$line")
    [ -n "$t" ] && { [ -z "$first" ] || [ "$t" -lt "$first" ]; } && first=$t
  done < <(grep -h 'failover: first push' "$dir"/worker-*.log)
  [ -n "$first" ] || fail "no worker logged a failover"
  echo $((first - kill_ms))
}

# wait_exit_ok PID WHAT: PID exits 0 within 60 s.
wait_exit_ok() {
  local i
  for i in $(seq $((600 * TS))); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$1" 2>/dev/null && fail "$2 did not exit"
  wait "$1" || fail "$2 exited with status $?"
}

harness_load f_ "$here/faults"
[ "$HARNESS_LIST" -eq 1 ] || WORK=$(mktemp -d /tmp/pskv-faults-XXXXXX)
harness_run
