# shellcheck shell=bash
# test/lib.sh - the one harness of pskv's shell tests, sourced by test/integration.sh,
# test/faults.sh, scripts/chaos.sh and scripts/fuzz-live.sh:
#
#   . "$top/test/lib.sh"
#
# It holds what every runner needs once: fail, start, wait_exit, wait_line,
# no_strays, now_ms, stamp_ms, free_port (scripts/free-port.sh), and a runner for
# tests found by glob: the functions named PREFIXNAME that the files DIR/*.sh define,
# one file per area, each test with its tags (`tags NAME TAG...` beside it). Every
# test runs in its own directory under $WORK, in a subshell with a hard time-out;
# `-j N` runs N at a time (tests tagged serial run alone, after the others; root ones
# one at a time beside the others;
# the ones tagged slow start first). The output is one PASS/FAIL/SKIP line per test
# with its seconds (a test that returns 77 is skipped), the run's seconds and its
# slowest tests, and, last, "N passed, N failed" alone on its line. See test/README.md.
#
# Tags: once (fault tests that check what a run ends with: run --once-trials times),
# root (need root: network namespaces, other users, Slurm), keys (CURVE keys),
# shm (shared memory), slow (a minute or more), serial (times something or needs the
# machine alone: never beside another test; root tests are run alone too).

top=${top:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
# shellcheck source=../scripts/free-port.sh
. "$top/scripts/free-port.sh"

fail() { echo "FAILED: $*"; exit 1; }

now_ms() { date +%s%3N; }

# Milliseconds since the epoch of a log line's ISO time stamp.
stamp_ms() { date -d "$(cut -c1-23 <<< "$1" | tr T ' ')Z" +%s%3N 2>/dev/null; }

# Starts a daemon in the background of the test, output to $TDIR/NAME.log.
start() { local name=$1; shift; "$@" > "$TDIR/$name.log" 2>&1 & echo $! > "$TDIR/$name.pid"; }

wait_exit() { # wait_exit PID SECONDS -> exit status of the process, 124 on time-out
  local pid=$1 t=$(( $2 * 10 ))
  while kill -0 "$pid" 2>/dev/null && [ $t -gt 0 ]; do sleep 0.1; t=$((t - 1)); done
  if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid"; return 124; fi
  wait "$pid"
}

wait_line() { # wait_line FILE PATTERN COUNT SECONDS: until FILE has COUNT lines matching; 1 on time-out
  local t=$(( $4 * 10 )) n
  until n=$(grep -c "$2" "$1" 2>/dev/null); [ "${n:-0}" -ge "$3" ]; do
    t=$((t - 1)); [ $t -gt 0 ] || return 1; sleep 0.1
  done
}

no_strays() { # no process from the pid files in DIR is alive
  local f
  for f in "$1"/*.pid; do
    [ -f "$f" ] || continue
    kill -0 "$(cat "$f")" 2>/dev/null && fail "process of $f ($(cat "$f")) still running"
  done
  return 0
}

# ---- the runner ---------------------------------------------------------------------
# A runner sets RUNNER (its name, for messages), sources this file, takes its own
# options and hands the others to harness_arg, then calls harness_load and harness_run.
# Hooks it may define: harness_trials NAME (how many times NAME runs; unset: once, and
# the lines carry no "#trial"), harness_note DIR (sets HARNESS_NOTE, text added to a
# PASS line, from the test's directory), harness_summary (lines printed before the
# closing count). HARNESS_TIMEOUT (s per test) and HARNESS_TAIL (lines of a failed
# test's output shown) have defaults below.

declare -A TEST_TAGS=()
TEST_NAMES=()
HARNESS_ONLY=()
HARNESS_TAGS=()
HARNESS_JOBS=1
HARNESS_LIST=0
HARNESS_RERUN=0
HARNESS_TIMEOUT=${HARNESS_TIMEOUT:-180}
HARNESS_TAIL=${HARNESS_TAIL:-40}
HARNESS_SHIFT=0

# tags NAME TAG...: NAME's tags; called at the top level of a test file, beside the test.
tags() { local n=$1; shift; TEST_TAGS[$n]="${TEST_TAGS[$n]:+${TEST_TAGS[$n]} }$*"; }

harness_die() { echo "${RUNNER:-test}: $*" >&2; exit 2; }

# harness_arg ARGS...: takes the runner options every runner shares off the front of
# ARGS; HARNESS_SHIFT says how many it used (0: not one of them).
#   --only NAME (again, or "A B" in one) · --tags TAG[,TAG] (-TAG: without it) · -j N · --list
#   · --rerun-failed (a test that failed runs once more, alone, after the others)
harness_arg() {
  HARNESS_SHIFT=0
  case $1 in
    --rerun-failed) HARNESS_RERUN=1; HARNESS_SHIFT=1 ;;
    --only|--tags|-j|--jobs)
      [ $# -ge 2 ] || harness_die "$1 needs a value"
      harness_set "$1" "$2"; HARNESS_SHIFT=2 ;;
    --only=*|--tags=*|--jobs=*) harness_set "${1%%=*}" "${1#*=}"; HARNESS_SHIFT=1 ;;
    -j[0-9]*) harness_set -j "${1#-j}"; HARNESS_SHIFT=1 ;;
    --list) HARNESS_LIST=1; HARNESS_SHIFT=1 ;;
  esac
}

harness_set() {
  case $1 in
    --only) read -r -d '' -a _w <<< "$2"; HARNESS_ONLY+=("${_w[@]}") ;;
    --tags) read -r -d '' -a _w <<< "${2//,/ }"; HARNESS_TAGS+=("${_w[@]}") ;;
    -j|--jobs)
      [[ $2 =~ ^[1-9][0-9]?$ ]] || harness_die "-j must be a number of tests at a time, 1..99, not '$2'"
      HARNESS_JOBS=$2 ;;
  esac
}

# harness_load PREFIX DIR: sources every DIR/*.sh and lists their tests (functions
# named PREFIXNAME) in TEST_NAMES, in the order of the files and, in each, of the text.
harness_load() {
  local prefix=$1 dir=$2 f n
  HARNESS_PREFIX=$prefix
  for f in "$dir"/*.sh; do
    # shellcheck source=/dev/null
    . "$f" || harness_die "$f failed to load"
  done
  mapfile -t TEST_NAMES < <(sed -n "s/^${prefix}\([A-Za-z0-9_]*\)() *{.*/\1/p" "$dir"/*.sh)
  n=$(printf '%s\n' "${TEST_NAMES[@]}" | sort | uniq -d | head -n 1)
  [ -z "$n" ] || harness_die "test '$n' is defined twice in $dir/*.sh: $(grep -l "^$prefix$n()" "$dir"/*.sh | xargs)"
  for n in "${!TEST_TAGS[@]}"; do
    declare -F "$prefix$n" > /dev/null || harness_die "tags for '$n', a test no $dir/*.sh defines"
  done
}

has_tag() { [[ " ${TEST_TAGS[$1]:-} " == *" $2 "* ]]; }

# harness_selected NAME: NAME is in --only (or ONLY) if given, has every --tags TAG
# and none of the -TAG.
harness_selected() {
  local t
  if [ ${#HARNESS_ONLY[@]} -gt 0 ] && [[ " ${HARNESS_ONLY[*]} " != *" $1 "* ]]; then return 1; fi
  for t in "${HARNESS_TAGS[@]}"; do
    if [ "${t#-}" != "$t" ]; then has_tag "$1" "${t#-}" && return 1
    else has_tag "$1" "$t" || return 1; fi
  done
  return 0
}

# harness_spawn NAME TRIAL SLOT SLOTS: starts one test in $WORK/NAME[-TRIAL], in a
# process group of its own, under a watcher that kills it after HARNESS_TIMEOUT s (twice
# that for a test tagged slow) and
# writes "STATUS SECONDS" to the directory's file rc last; SLOT of SLOTS picks its
# share of the free ports. When the test ends (passed, failed or timed out), what it
# started and left running is killed with its group: a test that failed half-way
# leaves no daemon loading the machine under the next ones. The watcher's pid goes
# to HARNESS_PID, the test's group to the directory's file pgid.
harness_spawn() {
  local name=$1 trial=$2 slot=$3 slots=$4 dir="$WORK/$1${2:+-$2}" limit=$HARNESS_TIMEOUT
  has_tag "$name" slow && limit=$((2 * HARNESS_TIMEOUT)) # slow: twice the time-out
  mkdir -p "$dir"
  (
    export PSKV_PORT_SLOT=$slot PSKV_PORT_SLOTS=$slots # free_port's share of the ports
    t0=$SECONDS
    set -m # the test's own process group (its stdin /dev/null: never the terminal's)
    ( set +m; cd "$dir" && TDIR=$dir "$HARNESS_PREFIX$name" ) > "$dir/test.out" 2>&1 < /dev/null &
    pid=$! deadline=$((SECONDS + limit))
    set +m
    echo "$pid" > "$dir/pgid"
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
      kill -KILL -- "-$pid" 2>/dev/null
      pkill -KILL -f "$dir/" 2>/dev/null
      echo "timed out" >> "$dir/test.out"; rc=124
    else
      wait "$pid"; rc=$?
      kill -KILL -- "-$pid" 2>/dev/null # what it left running
    fi
    echo "$rc $((SECONDS - t0))" > "$dir/rc.tmp" && mv "$dir/rc.tmp" "$dir/rc"
  ) 2> /dev/null &
  HARNESS_PID=$!
}

# harness_report NAME TRIAL: the line of a finished test; counts it.
harness_report() {
  local name=$1 trial=$2 dir="$WORK/$1${2:+-$2}" rc secs label
  read -r rc secs < "$dir/rc"
  label=$name${trial:+ #$trial}
  HARNESS_NOTE=
  declare -F harness_note > /dev/null && harness_note "$dir"
  if [ "$rc" -eq 0 ] && [ -n "${HARNESS_RERUNNING:-}" ]; then
    passed=$((passed + 1)); HARNESS_FLAKY+=("$label")
    echo "PASS $label$HARNESS_NOTE ($secs s; on its second run, alone: the first failed)"
  elif [ "$rc" -eq 0 ]; then
    passed=$((passed + 1)); echo "PASS $label$HARNESS_NOTE ($secs s)"
  elif [ "$rc" -eq 77 ]; then
    skipped=$((skipped + 1)); echo "SKIP $label ($(tail -n 1 "$dir/test.out"))"
  else
    failed=$((failed + 1)); HARNESS_FAILED+=("$name${trial:+ $trial}")
    echo "FAIL $label (status $rc, $secs s)${HARNESS_RERUNNING:+ on its second run too}"
    # awk ends every line, also an unterminated last one: the next line of the
    # report (at the end, the count) always starts a line of its own
    tail -n "$HARNESS_TAIL" "$dir/test.out" | awk '{ print "    " $0 }'
  fi
  HARNESS_SECS+=("$secs $label")
}

# harness_alone NAME: NAME must not run beside another test: it has one of the tags
# of HARNESS_ALONE (serial; a runner may add its own).
HARNESS_ALONE=${HARNESS_ALONE:-serial}
# HARNESS_ONE_AT_A_TIME: tags of which one test at a time runs, beside tests without
# them (root: the namespaced hosts, /tmp/pskv-netns and Slurm are one per machine).
HARNESS_ONE_AT_A_TIME=${HARNESS_ONE_AT_A_TIME:-root}

# harness_may_start NAME: 0 unless NAME has a tag of HARNESS_ONE_AT_A_TIME that a
# running test has too.
harness_may_start() {
  local a pid u
  for a in $HARNESS_ONE_AT_A_TIME; do
    has_tag "$1" "$a" || continue
    for pid in "${!HARNESS_RUNNING[@]}"; do
      read -r _ u _ <<< "${HARNESS_RUNNING[$pid]}"
      has_tag "$u" "$a" && return 1
    done
  done
  return 0
}
harness_alone() {
  local a
  for a in $HARNESS_ALONE; do has_tag "$1" "$a" && return 0; done
  return 1
}

harness_cleanup() {
  local p g
  for p in "${!HARNESS_RUNNING[@]}"; do kill -KILL "$p" 2>/dev/null; done
  for g in "$WORK"/*/pgid; do # the groups of the tests still running
    [ -f "$g" ] && [ ! -f "${g%/pgid}/rc" ] && kill -KILL -- "-$(cat "$g")" 2>/dev/null
  done
  [ -n "${WORK:-}" ] || return
  pkill -KILL -f "$WORK/" 2>/dev/null
  if [ "${failed:-0}" -eq 0 ] && [ ${#HARNESS_FLAKY[@]} -eq 0 ] && [ -z "${PSKV_KEEP_LOGS:-}" ]; then rm -rf "$WORK"; else echo "logs kept in $WORK" >&2; fi
}

# harness_run: runs the selected tests (each as many times as harness_trials says),
# HARNESS_JOBS at a time, the slow ones first, those with a tag of HARNESS_ALONE alone
# after the others (with -j 1, all in order); prints the run's seconds and slowest
# tests, then the closing count, and returns 0 when none failed.
harness_run() {
  local n i k units=() first=() serial=() u t0=$SECONDS
  declare -gA HARNESS_RUNNING=()
  HARNESS_SECS=()
  HARNESS_FAILED=() HARNESS_FLAKY=()
  passed=0 failed=0 skipped=0
  for n in "${HARNESS_ONLY[@]}"; do
    [[ " ${TEST_NAMES[*]} " == *" $n "* ]] || harness_die "no test named '$n' (--list shows them)"
  done
  for n in "${TEST_NAMES[@]}"; do
    harness_selected "$n" || continue
    if [ "$HARNESS_LIST" -eq 1 ]; then echo "$n${TEST_TAGS[$n]:+ [${TEST_TAGS[$n]}]}"; continue; fi
    k=1
    declare -F harness_trials > /dev/null && k=$(harness_trials "$n")
    for i in $(seq "$k"); do
      u="$n"; declare -F harness_trials > /dev/null && u="$n $i"
      if [ "$HARNESS_JOBS" -eq 1 ]; then units+=("$u")
      elif harness_alone "$n"; then serial+=("$u")
      elif has_tag "$n" slow; then first+=("$u") # the long ones first: the pool ends level
      else units+=("$u"); fi
    done
  done
  [ "$HARNESS_LIST" -eq 0 ] || return 0
  trap harness_cleanup EXIT
  harness_pool "$HARNESS_JOBS" "${first[@]}" "${units[@]}"
  harness_pool 1 "${serial[@]}"
  harness_rerun
  declare -F harness_summary > /dev/null && harness_summary
  if [ ${#HARNESS_SECS[@]} -gt 0 ]; then
    echo "${RUNNER:-tests}: $((SECONDS - t0)) s, $HARNESS_JOBS at a time; slowest:" \
      "$(printf '%s\n' "${HARNESS_SECS[@]}" | sort -rn | head -n 5 | sed 's/^\([0-9]*\) \(.*\)/\2 \1 s/' | paste -sd, - | sed 's/,/, /g')"
  fi
  if [ ${#HARNESS_FLAKY[@]} -gt 0 ]; then
    echo "passed only on a second run (each a failure to look into; the first run's logs in" \
      "$WORK/NAME.first): $(printf '%s, ' "${HARNESS_FLAKY[@]}" | sed 's/, $//')"
  fi
  if [ "$skipped" -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
  else
    echo "$passed passed, $failed failed"
  fi
  [ "$failed" -eq 0 ]
}

# harness_rerun: with --rerun-failed, the tests that failed run once more, one at a
# time (a failure seen beside another test may be the machine's load): one that passes
# then counts as passed and is named on a line of its own before the count; its first
# run's directory is kept as NAME.first. Without the option, nothing.
harness_rerun() {
  local u name trial dir units=("${HARNESS_FAILED[@]}")
  [ "$HARNESS_RERUN" -eq 1 ] && [ ${#units[@]} -gt 0 ] || return 0
  failed=$((failed - ${#units[@]}))
  HARNESS_FAILED=()
  for u in "${units[@]}"; do
    read -r name trial <<< "$u"
    dir="$WORK/$name${trial:+-$trial}"
    rm -rf "$dir.first" && mv "$dir" "$dir.first"
  done
  echo "running again, alone: ${units[*]}"
  HARNESS_RERUNNING=1 harness_pool 1 "${units[@]}"
}

# harness_ended PID DIR: 0 when the test of DIR, watched by PID, has ended (DIR/rc
# written). A watcher gone without writing it (killed from outside, or $WORK removed
# under it) counts as ended with status 125 and says so in DIR/test.out: a failure,
# never a wait for ever.
harness_ended() {
  [ -f "$2/rc" ] && return 0
  kill -0 "$1" 2>/dev/null && return 1
  sleep 0.5 # it may have written rc just before it ended
  [ -f "$2/rc" ] && return 0
  mkdir -p "$2"
  echo "the test's watcher (pid $1) ended without writing its status: killed from outside, or $WORK removed" >> "$2/test.out"
  echo "125 0" > "$2/rc"
  [ -f "$2/pgid" ] && kill -KILL -- "-$(cat "$2/pgid")" 2>/dev/null # what it left running
  return 0
}

# harness_pool N UNIT...: runs the units ("NAME" or "NAME TRIAL") N at a time and
# reports each as it ends.
harness_pool() {
  local jobs=$1 pid name trial slot k; shift
  local queue=("$@") used
  while [ ${#queue[@]} -gt 0 ] || [ ${#HARNESS_RUNNING[@]} -gt 0 ]; do
    while [ ${#queue[@]} -gt 0 ] && [ ${#HARNESS_RUNNING[@]} -lt "$jobs" ]; do
      for k in "${!queue[@]}"; do # the first that may start now
        read -r name trial <<< "${queue[$k]}"
        harness_may_start "$name" && break
        name=
      done
      [ -n "$name" ] || break
      queue=("${queue[@]:0:k}" "${queue[@]:k+1}")
      used=" $(for pid in "${!HARNESS_RUNNING[@]}"; do echo "${HARNESS_RUNNING[$pid]%% *}"; done | xargs) "
      slot=0; while [[ $used == *" $slot "* ]]; do slot=$((slot + 1)); done
      harness_spawn "$name" "$trial" "$slot" "$jobs"
      HARNESS_RUNNING[$HARNESS_PID]="$slot $name $trial"
    done
    for pid in "${!HARNESS_RUNNING[@]}"; do
      read -r slot name trial <<< "${HARNESS_RUNNING[$pid]}"
      harness_ended "$pid" "$WORK/$name${trial:+-$trial}" || continue
      wait "$pid" 2>/dev/null
      unset "HARNESS_RUNNING[$pid]"
      harness_report "$name" "$trial"
    done
    [ ${#HARNESS_RUNNING[@]} -eq 0 ] || sleep 0.2
  done
}
