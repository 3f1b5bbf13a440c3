#!/usr/bin/env bash
# Cost of a group's start in a running service (issue 35): a service of 2 servers
# (pskv-scheduler --service) on loopback, then N groups of 1 worker one after the
# other, each timed from the call that opens its worker (pskv_worker_open:
# registration, its group's start, the view) through its first TABLE_OPEN to its
# first acknowledged push (1000 floats, dense, sum). Each group ends (its worker
# closes) before the next starts. Prints one line:
#   group_start n=N median_ms=M worst_ms=W p90_ms=P
# Usage: scripts/bench-group-start.sh [--groups N (default 50)]
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=${PSKV_BIN_DIR:-$here/../build/bin}
groups=50
while [ $# -gt 0 ]; do
  case "$1" in
    --groups) groups=$2; shift 2 ;;
    *) echo "usage: $0 [--groups N]" >&2; exit 2 ;;
  esac
done
dir=$(mktemp -d /tmp/pskv-group-start.XXXXXX)
pids=()
cleanup() { local p; for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done; rm -rf "$dir"; }
trap cleanup EXIT
. "$here/free-port.sh"
port=$(free_port)
"$bin/pskv-scheduler" --port "$port" --servers 2 --service > "$dir/scheduler.log" 2>&1 &
pids+=($!)
for i in 0 1; do
  "$bin/pskv-server" --scheduler "127.0.0.1:$port" > "$dir/server-$i.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 600); do
  grep -q 'cluster complete' "$dir/scheduler.log" && break
  sleep 0.1
done
grep -q 'cluster complete' "$dir/scheduler.log" || { echo "the service did not start" >&2; exit 1; }
PYTHONPATH=$here/../python PSKV_LIB=${PSKV_LIB:-$(cd "$bin/../lib" && pwd)/libpskv.so} \
  /usr/bin/python3 - "$port" "$groups" 2> "$dir/python.log" <<'PY' || { tail -n 5 "$dir/python.log" >&2; exit 1; }
import sys, time
import numpy as np
import pskv
port, n = sys.argv[1], int(sys.argv[2])
g = np.ones(1000, np.float32)
ms = []
for i in range(n):
    t0 = time.monotonic()
    with pskv.Worker(scheduler="127.0.0.1:" + port, group="start%d" % i, group_size=1,
                     table_namespace="bench-start") as w:
        t = w.table("w", size=1000, updater="sum", consistency="async")
        t.push(g).wait(timeout=30)
        ms.append((time.monotonic() - t0) * 1e3)
ms.sort()
print("group_start n=%d median_ms=%.1f worst_ms=%.1f p90_ms=%.1f" % (
    n, ms[n // 2], ms[-1], ms[min(n - 1, int(n * 0.9))]))
PY
"$bin/pskvctl" --scheduler "127.0.0.1:$port" shutdown > /dev/null || exit 1
wait "${pids[0]}"
