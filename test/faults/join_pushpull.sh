# shellcheck shell=bash
# Fault tests (sourced by faults.sh): a server joining while every round goes
# through pskv_pushpull without replicas.

# A server joins an ssp:1 job of R = 1 whose rounds end with pskv_pushpull (check
# --pull pushpull, worker 2 into views). A part whose pull was parked across the
# placement change is answered PSKV_ESTALE with its push applied and comes again:
# the server must skip that push (dedupe) and acknowledge it, else it is applied
# twice (a key over the bound) and, unacknowledged, its worker's clock waits on its
# pull, which waits at the joiner on every worker's clock (wview_catch_up): no
# request may wait out the request time-out (6 s), and every key ends exact.
tags join_ssp_pushpull once
f_join_ssp_pushpull() {
  local d=$TDIR/c
  launch "$d" --servers 2 --workers 3 --worker-opt 2:--pull --worker-opt 2:pushpull-view \
    -- --app check --consistency ssp:1 --rounds 300 --pull pushpull \
    --request-timeout $((6 * TS))
  wait_joined "$d" 3
  sleep 0.$((3 + RANDOM % 5))
  start_server "$d" server-2
  wait_ok "$d"
  joined_ok "$d" server-2
  grep -h 'no answer from server node' "$d"/worker-*.log && fail "a request waited out its time-out"
  grep -q '^check ok:.*ssp:1.*exact' "$d"/worker-0.log || fail "worker 0: $(tail -n 1 "$d"/worker-0.log)"
}
