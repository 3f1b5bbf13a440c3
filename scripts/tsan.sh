#!/usr/bin/env bash
# ThreadSanitizer run (`make tsan`): the tests whose processes run threads, against a
# build with -fsanitize=thread. pskv's threads: the server's heartbeat thread
# (server/lease.c) and checkpoint writer (server/persist/checkpoint.c), every daemon's metrics
# endpoint (common/metrics.c, libmicrohttpd's thread), libpskv's heartbeat
# thread (worker/lib/wview.c), the ZAP handler of every keyed daemon (common/zap.c), the
# refusal counters they share (common/refuse.c), and ZeroMQ's I/O threads calling the
# free callbacks of no-copy frames (worker/lib/vbuf.c, server/store/shard.c).
#
#   scripts/tsan.sh [BUILD_DIR]      (default build/tsan; binaries in BUILD_DIR/bin)
#
# TSAN_OPTIONS come from the caller (the make target sets halt_on_error, exitcode,
# second_deadlock_stack and suppressions=test/tsan.supp); this script adds
# log_path, so every report of every process lands in BUILD_DIR/reports/. Exit 0
# when every test passed and no process wrote a report, 1 otherwise.
set -u
cd "$(dirname "$0")/.."
TB=${1:-$PWD/build/tsan}
REPORTS=$TB/reports
[ -x "$TB/bin/pskv-server" ] || { echo "tsan.sh: no build in $TB (make tsan builds it)" >&2; exit 2; }
grep -q __tsan_init "$TB/bin/pskv-server" ||
  { echo "tsan.sh: $TB/bin/pskv-server is not built with -fsanitize=thread" >&2; exit 2; }
: "${TSAN_OPTIONS:=halt_on_error=1:exitcode=66:second_deadlock_stack=1:suppressions=$PWD/test/tsan.supp}"
export TSAN_OPTIONS="$TSAN_OPTIONS:log_path=$REPORTS/tsan"
rm -rf "$REPORTS"
mkdir -p "$REPORTS"

# Integration tests (test/integration.sh): no-copy pushes and pulls on 2 servers and
# 3 workers; heartbeats through a pause; requests refused while serving; workers
# leaving; keys on: rogues refused by the ZAP handler and a control key's
# checkpoint (the writer thread); every daemon's metrics endpoint (libmicrohttpd's
# thread rendering what the loop counts) scraped by a real Prometheus. Faults
# (test/faults.sh): checkpoints written, killed and resumed; a server paused under a
# stream of no-copy pushes (ZeroMQ holding lent values, connections reset).
INTEGRATION="check_2x3 accumulate heartbeat_liveness malformed_while_serving worker_leaves keys_rogues keys_clients
            metrics_prometheus"
FAULTS="checkpoint_resume pause_server_nocopy"
# ThreadSanitizer makes pskv 5 to 15 times slower, more on a loaded machine: the
# liveness and time-out settings of the optimised build (a node dead after 500 ms of
# silence, a push asked again after 1 s, a request given up after 30 s, the 16 MiB
# stream's table opened within 1 s) are given room through the daemons' environment
# and test/faults.sh's FAULT_TIME_SCALE (its waits 8 times as long), so that a slow
# process is not mistaken for a dead one. Tests that set these on the
# command line (heartbeat_liveness: --dead-after-ms 400) keep their own.
export PSKV_SCHEDULER_DEAD_AFTER_MS=${PSKV_SCHEDULER_DEAD_AFTER_MS:-10000}
export PSKV_WORKER_RETRY_MS=${PSKV_WORKER_RETRY_MS:-10000}
export PSKV_WORKER_REQUEST_TIMEOUT=${PSKV_WORKER_REQUEST_TIMEOUT:-120}
export FAULT_TIME_SCALE=${FAULT_TIME_SCALE:-8}
start=$SECONDS
rc=0
echo "tsan: TSAN_OPTIONS=$TSAN_OPTIONS"
PSKV_BIN_DIR=$TB/bin TEST_TIMEOUT=${TEST_TIMEOUT:-400} ONLY=$INTEGRATION test/integration.sh || rc=1
args=()
for f in $FAULTS; do args+=(--only "$f"); done
PSKV_BIN_DIR=$TB/bin test/faults.sh --trials 1 "${args[@]}" || rc=1

n=$(find "$REPORTS" -type f | wc -l)
if [ "$n" -gt 0 ]; then
  echo "tsan: $n processes reported (files in $REPORTS):"
  for f in "$REPORTS"/*; do
    echo "==== $f"
    grep -E '^WARNING: ThreadSanitizer|^  (Write|Read|Previous|Atomic)|^    #[0-4] |^SUMMARY' "$f" | head -n 40
  done
  rc=1
fi
echo "tsan: $n reports; tests $([ $rc -eq 0 ] && echo passed || echo failed) in $((SECONDS - start)) s"
exit $rc
