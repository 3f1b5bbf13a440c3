#!/usr/bin/env bash
# bench-cut-rss.sh - resident memory of a worker whose host is cut off together with a
# server: scheduler on h1, servers on h2 h3 h4 (R = 2), `--app check` workers on h2 and
# h5 (async, --insecure) in the netns harness; h2 is cut for 3 s at 40 s and at 80 s.
# Prints the RssAnon (KiB) of the worker on h2 every 5 s, one line:
#   cut-rss T:KIB T:KIB ... (cuts at 40 and 80)
# Usage: scripts/bench-cut-rss.sh [--bin-dir DIR]. Needs root; run it with the
# cluster to itself (flock /tmp/pskv-netns-user.lock ...). Exit 0, 77 without root.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BIN=${PSKV_BIN_DIR:-$here/../build/bin}
[ "${1:-}" = --bin-dir ] && BIN=$2
NETNS=$here/netns-cluster.sh
if [ "$(id -u)" -ne 0 ]; then echo "bench-cut-rss: needs root (network namespaces); skipped"; exit 77; fi
D=$(mktemp -d /tmp/pskv-cutrss-XXXXXX)
cleanup() {
  "$NETNS" heal h2 > /dev/null 2>&1
  for p in "$D"/*.pid; do kill -9 "$(cat "$p")" 2> /dev/null; done
  "$NETNS" down > /dev/null 2>&1
  rm -rf "$D"
}
trap cleanup EXIT
"$NETNS" up 5 > "$D/netns.out" 2>&1 || { cat "$D/netns.out"; exit 1; }
ip_of() { echo "10.213.0.$((10 + ${1#h}))"; }
run() { # run HOST NAME CMD...: in HOST's namespace, advertising its address
  local h=$1 n=$2; shift 2
  ( ip netns exec "pskv-$h" "$@" --advertise "$(ip_of "$h")" --insecure > "$D/$n.log" 2>&1 &
    echo $! > "$D/$n.pid" ) # in a subshell: no job notice when cleanup kills it
}
S=$(ip_of h1):7700
run h1 sched "$BIN/pskv-scheduler" --port 7700 --servers 3 --workers 2 --replicas 2
sleep 0.5
for h in h2 h3 h4; do run "$h" "srv-$h" "$BIN/pskv-server" --scheduler "$S"; done
for r in 0 1; do
  h=$([ $r -eq 0 ] && echo h2 || echo h5)
  run "$h" "w$r" "$BIN/pskv-worker" --scheduler "$S" --rank $r --app check --consistency async \
    --rounds 1000000 --slowdown 1.4 --stop-file "$D/stop"
done
w=$(cat "$D/w0.pid")
line="cut-rss"
for t in $(seq 0 5 120); do
  if [ "$t" -eq 40 ] || [ "$t" -eq 80 ]; then "$NETNS" cut h2; sleep 3; "$NETNS" heal h2; fi
  line+=" $t:$(awk '/^RssAnon:/ { print $2 }' "/proc/$w/status" 2> /dev/null)"
  sleep 5
done
echo "$line (cuts at 40 and 80)"
