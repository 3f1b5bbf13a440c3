# Namespaces: tables named NAMESPACE/NAME shared by the processes that name one, a
# namespace's quota (PSKV_EQUOTA), worker keys bound to namespaces (PSKV_EACCES).

# Two workers naming one namespace share its tables: check's exact sums (the
# pushes of both meet in the same rows) hold under the full names ns/check.*, and
# the servers hold no table outside the namespace.
t_ns_shared() {
  "$LAUNCH" --servers 2 --workers 2 --timeout 90 --log-dir "$TDIR/logs" -- --app check \
    --rounds 300 --namespace shared > launch.out 2>&1 || fail "launch: $(tail -n 3 launch.out)"
  for r in 0 1; do
    grep -q '^check ok: 2 workers' "$TDIR/logs/worker-$r.log" ||
      fail "worker $r: $(tail -n 1 "$TDIR/logs/worker-$r.log")"
  done
  grep -q "table 'shared/check.sparse': [0-9]* rows" "$TDIR/logs/server-0.log" ||
    fail "server 0 holds no shared/check.sparse: $(grep "table '" "$TDIR/logs/server-0.log")"
  grep "INFO table '" "$TDIR/logs"/server-*.log | grep -v "table 'shared/" &&
    fail "a table outside the namespace"
  "$BIN/pskv-worker" --namespace a/b --app check > bad.log 2>&1 && fail "--namespace a/b accepted"
  grep -q "namespace 'a/b'" bad.log || fail "--namespace a/b not named: $(cat bad.log)"
  no_strays "$TDIR/logs"
}

# A sparse writer past its namespace's quota is refused with PSKV_EQUOTA naming the
# namespace; the servers keep serving and hold no more than the quota's share
# (plus one push: the check is on the rows a push would create) and what they
# stored stays.
t_ns_quota() {
  "$LAUNCH" --servers 2 --workers 1 --timeout 90 --log-dir "$TDIR/logs" -- --app sparse-bench \
    --rows 100000 --push-keys 4096 --steps 2 --namespace q --quota-bytes 2000000 > launch.out 2>&1 &&
    fail "a push past the quota passed"
  grep -q "namespace quota exceeded (.*namespace 'q' is at its quota: [0-9]* of 1000000 bytes on this server (quota_bytes 2000000 over 2 servers); a push of [0-9]* new rows to table 'q/sparse-bench' refused" \
    "$TDIR/logs/worker-0.log" || fail "the worker was not told: $(tail -n 2 "$TDIR/logs/worker-0.log")"
  local s rows
  for s in 0 1; do
    rows=$(sed -n "s/.*table 'q\/sparse-bench': \([0-9]*\) rows.*/\1/p" "$TDIR/logs/server-$s.log")
    [ -n "$rows" ] && [ "$rows" -gt 0 ] && [ "$rows" -lt 100000 ] ||
      fail "server $s holds '$rows' rows: $(grep "sparse-bench" "$TDIR/logs/server-$s.log")"
  done
  no_strays "$TDIR/logs"
}

# Bindings of the authorized file: worker-0 bound to namespace a may not open a
# table of b (PSKV_EACCES, counted as a namespace refusal) and may work in a; a
# reader's push is refused. bind_job KEYS LINE NAMESPACE: rebinds worker-0's key.
bind_job() {
  local pub f
  pub=$(cut -d' ' -f2 "$1/worker-0/node.pub")
  for f in "$1/server-0/authorized" "$1/scheduler/authorized"; do
    awk -v p="$pub" -v l="$2" '$NF == p { print l " " p; next } { print }' "$f" > "$f.new" &&
      mv "$f.new" "$f"
  done
  rm -rf "$TDIR/logs"
  "$LAUNCH" --servers 1 --workers 1 --keys "$1" --timeout 60 --log-dir "$TDIR/logs" -- --app check \
    --rounds 50 --namespace "$3" > launch.out 2>&1
}
tags ns_keys keys
t_ns_keys() {
  local K=$TDIR/keys
  keyset "$K" 1 1
  bind_job "$K" "worker a" b && fail "a worker bound to a opened a table of b"
  grep -q "namespace 'b': this worker key is bound to namespaces a only" "$TDIR/logs/worker-0.log" ||
    fail "not told: $(tail -n 2 "$TDIR/logs/worker-0.log")"
  grep -q "refused namespace from" "$TDIR/logs/server-0.log" || fail "the server did not count it"
  bind_job "$K" "worker x,a" a || fail "bound to a, in a: $(tail -n 2 "$TDIR/logs/worker-0.log")"
  grep -q '^check ok:' "$TDIR/logs/worker-0.log" || fail "check in a did not pass"
  bind_job "$K" "reader a" a && fail "a reader pushed"
  grep -q "namespace 'a': a reader key may pull, not push" "$TDIR/logs/worker-0.log" ||
    fail "the reader was not told: $(tail -n 2 "$TDIR/logs/worker-0.log")"
  printf 'worker a/b %s\n' "$(cut -d' ' -f2 "$K/worker-0/node.pub")" >> "$K/server-0/authorized"
  "$BIN/pskv-server" --keys "$K/server-0" --scheduler 127.0.0.1:1 > bad.log 2>&1 &&
    fail "an authorized line with namespace a/b accepted"
  grep -q "authorized line [0-9]*: expected" bad.log || fail "the bad line not named: $(cat bad.log)"
  no_strays "$TDIR/logs"
}

# A namespace's bytes and quota are server metrics (pskv_namespace_bytes and
# pskv_namespace_quota_bytes, labelled with the namespace) and pskvctl status lines,
# while its worker lingers.
t_ns_metrics() {
  command -v curl > /dev/null || fail "curl missing (install-deps.sh installs it)"
  local port m0 i
  trap 'for f in "$TDIR"/*.pid; do kill -KILL "$(cat "$f")" 2>/dev/null; done' EXIT
  port=$(free_port); m0=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --metrics-port "$m0"
  start worker-0 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --app check --rounds 20 \
    --namespace m --quota-bytes 900000000 --metrics-port "$(free_port)" --metrics-linger 60
  wait_line worker-0.log 'pushed [0-9]* value bytes in all' 1 60 ||
    fail "the worker did not finish: $(tail -n 3 worker-0.log)"
  for i in $(seq 20); do # the server refreshes its gauges every 500 ms
    curl -sf --max-time 5 "http://127.0.0.1:$m0/metrics" > metrics.txt &&
      grep -q '^pskv_namespace_bytes{.*namespace="m"} [1-9]' metrics.txt && break
    sleep 0.2
  done
  grep -q '^pskv_namespace_bytes{.*namespace="m"} [1-9]' metrics.txt ||
    fail "no namespace bytes: $(grep namespace metrics.txt)"
  grep -q '^pskv_namespace_quota_bytes{.*namespace="m"} 9[0e]' metrics.txt ||
    fail "no namespace quota: $(grep namespace metrics.txt)"
  # and pskvctl status sums them over the servers (from the heartbeats)
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" status > status.txt || fail "no status"
  grep -q '^namespace m: [1-9][0-9]* bytes on 1 servers, quota 900000000 bytes$' status.txt ||
    fail "status shows no namespace m: $(grep namespace status.txt)"
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" status --json > status.json || fail "no status --json"
  python3 -c 'import json,sys; n=[x for node in json.load(open("status.json"))["nodes"] for x in node.get("namespaces",[])]; sys.exit(0 if any(x["name"]=="m" and x["quota"]==900000000 and x["bytes"]>0 for x in n) else 1)' ||
    fail "status --json shows no namespace m: $(cat status.json)"
  kill -TERM "$(cat worker-0.pid)"
  wait_exit "$(cat scheduler.pid)" 30 > /dev/null || fail "the job did not end"
}

# pskvctl export works per namespace: a model trained in namespace a is exported
# with --namespace a, and neither the unnamed namespace nor b holds it.
t_ns_export() {
  mkdir -p "$TDIR/sched" "$TDIR/data"
  "$BIN/pskv-gen-sparse" --examples 2000 --features 1000 --out "$TDIR/gen" --seed 5 > gen.out ||
    fail "gen-sparse failed: $(cat gen.out)"
  "$LAUNCH" --servers 1 --workers 1 --timeout 120 --log-dir "$TDIR/logs" \
    --scheduler-opt --data-dir --scheduler-opt "$TDIR/sched" \
    --server-opt --data-dir --server-opt "$TDIR/data" -- --app sparse-lr --train "$TDIR/gen.train" \
    --test "$TDIR/gen.test" --epochs 1 --batch 64 --eval-every 0 --checkpoint-epochs 1 \
    --namespace a > launch.out 2>&1 || fail "training exited $?: $(tail -n 3 launch.out)"
  grep -q "table 'a/sparse-lr.w'" "$TDIR/logs/server-0.log" || fail "no table a/sparse-lr.w"
  "$BIN/pskvctl" export --checkpoint 1 --from "$TDIR/data" --namespace a --out a.model > ex.out 2>&1 ||
    fail "export of a exited $?: $(cat ex.out)"
  grep -q 'sparse-lr 0-0-1 model of checkpoint 1' ex.out || fail "export said: $(cat ex.out)"
  [ -s a.model ] || fail "no model file"
  "$BIN/pskvctl" export --checkpoint 1 --from "$TDIR/data" --out u.model > ex.out 2>&1 &&
    fail "the unnamed namespace exported a's model"
  grep -q "holds no model table .* in namespace ''" ex.out || fail "export said: $(cat ex.out)"
  "$BIN/pskvctl" export --checkpoint 1 --from "$TDIR/data" --namespace b --out b.model > ex.out 2>&1 &&
    fail "namespace b exported a's model"
  grep -q "in namespace 'b'" ex.out || fail "export said: $(cat ex.out)"
  return 0
}
