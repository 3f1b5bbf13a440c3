#!/usr/bin/env bash
# Integration tests: real daemons over real TCP on loopback, each test with a hard
# time-out. Prints one line per test and, last, "N passed, N failed" on its own line.
# Binaries: $PSKV_BIN_DIR (make test points it at the sanitizer build), else build/bin.
#
#   test/integration.sh [--only NAME]... [--tags TAG[,TAG]] [-j N] [--rerun-failed] [--list]
#
# The tests are the functions t_NAME of test/integration/*.sh (one file per area),
# each with its tags beside it; --only (or ONLY="a b") runs the tests named, --tags
# the ones with every TAG given and none of the -TAG, -j N runs N at a time (each in
# its own directory with its own ports; the tests tagged serial alone, after the
# others), --rerun-failed runs a failed test once more alone (make test), --list prints
# the names and tags. TEST_TIMEOUT: seconds per test (180).
# test/README.md says how to add a test.
set -u
RUNNER=integration.sh
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"
while [ $# -gt 0 ]; do
  harness_arg "$@"
  [ "$HARNESS_SHIFT" -gt 0 ] && { shift "$HARNESS_SHIFT"; continue; }
  case $1 in
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) harness_die "unknown argument '$1' (see --help)" ;;
  esac
done
[ -z "${ONLY:-}" ] || harness_set --only "$ONLY"
[[ ${TEST_TIMEOUT:-180} =~ ^[1-9][0-9]*$ ]] || harness_die "TEST_TIMEOUT must be a number of seconds, not '$TEST_TIMEOUT'"
HARNESS_TIMEOUT=${TEST_TIMEOUT:-180}
HARNESS_TAIL=40
BIN=${PSKV_BIN_DIR:-$top/build/bin}
LAUNCH=$top/scripts/launch-local.sh
export PSKV_BIN_DIR=$BIN
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# Waits until pskvctl reports N servers registered; prints the status JSON.
wait_servers() {
  local port=$1 n=$2 i js
  for i in $(seq 100); do
    js=$("$BIN/pskvctl" --scheduler "127.0.0.1:$port" status --json 2>/dev/null) &&
      [ "$(grep -o '"role":"server"' <<< "$js" | wc -l)" -ge "$n" ] && { echo "$js"; return 0; }
    sleep 0.1
  done
  return 1
}

# late_keys DIR WHO T0: a job run with PSKV_TEST_FIRST_VIEW_DELAY=1:MS (rank 1
# admits its peers' keys late) played the race and got over it: rank 1 refused a
# key, rank 0's WHO (pskv_allreduce, pskv_pipe) saw its handshake refused, dialled
# again and was admitted; the job took less than 15 s since T0 (SECONDS).
late_keys() {
  local d=$1 who=$2 t0=$3
  grep -q 'refused unknown-key' "$d/worker-1.log" || fail "rank 1 refused no key: the race did not happen"
  grep -q "$who: rank 1 refused the handshake" "$d/worker-0.log" ||
    fail "rank 0 did not see its handshake refused: $(grep "$who" "$d/worker-0.log")"
  grep -q "$who: rank 1 admitted this worker after [0-9]* refused" "$d/worker-0.log" ||
    fail "rank 0 does not say it was admitted"
  [ $((SECONDS - t0)) -lt 15 ] || fail "the job took $((SECONDS - t0)) s"
  no_strays "$d"
}

harness_load t_ "$here/integration"
[ "$HARNESS_LIST" -eq 1 ] || WORK=$(mktemp -d /tmp/pskv-itest-XXXXXX)
harness_run
