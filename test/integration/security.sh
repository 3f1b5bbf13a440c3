# Security tests (sourced by integration.sh): CURVE and ZAP on real daemons over
# loopback, keys bound to roles, protected mode. Each function runs in its own
# test directory ($TDIR) under run_test's time-out.

keyset() { # keyset DIR SERVERS WORKERS
  "$BIN/pskvctl" keys init "$1" --servers "$2" --workers "$3" > /dev/null || fail "keys init failed"
}

# A worker key that no allowlist lists, with the cluster's scheduler.pub beside it.
unlisted_key() { # unlisted_key KEYSET DIR
  "$BIN/pskvctl" keygen --role worker --out "$2" > /dev/null || fail "keygen failed"
  cp "$1/scheduler/node.pub" "$2/scheduler.pub"
}

# Three rogues keep trying to join a keyed job for its whole run: a worker with no
# key, a worker with a key the allowlist does not list, and a worker's listed key
# trying to register a server (its node.pub relabelled "server", which the
# allowlist contradicts). The job's exact-sum check must pass, no rogue may join,
# and pskvctl (control key) must show the refusals counted.
tags keys_rogues keys
t_keys_rogues() {
  local port K=$TDIR/keys lpid tries=0
  keyset "$K" 1 2
  unlisted_key "$K" "$TDIR/unlisted"
  cp -r "$K/worker-1" "$TDIR/disguised"
  sed -i 's/^worker /server /' "$TDIR/disguised/node.pub"
  cp "$K/server-0/authorized" "$TDIR/disguised/authorized"
  port=$(free_port)
  "$LAUNCH" --servers 1 --workers 2 --port "$port" --keys "$K" --timeout 150 \
    --log-dir "$TDIR/logs" -- --app check --count-acked --rounds 1000000 --check-keys 200 \
    --stop-file "$TDIR/stop" > launch.out 2>&1 &
  lpid=$!
  # the job pushes until the rogues have tried three times (its stop file), then ends
  # with its exact-sum check of every acknowledged push
  while kill -0 "$lpid" 2>/dev/null; do
    timeout 20 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --app check --connect-timeout 1 \
      >> nokey.log 2>&1 && fail "a worker without a key joined"
    timeout 20 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --keys "$TDIR/unlisted" \
      --app check --connect-timeout 1 >> unlisted.log 2>&1 && fail "a worker with an unlisted key joined"
    timeout 20 "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --keys "$TDIR/disguised" \
      --connect-timeout 1 >> disguised.log 2>&1 && fail "a worker key registered a server"
    tries=$((tries + 1))
    if [ $tries -eq 2 ]; then
      "$BIN/pskvctl" --scheduler "127.0.0.1:$port" --keys "$K/control" status > status.txt ||
        fail "pskvctl with the control key got no status"
    fi
    [ $tries -eq 3 ] && touch "$TDIR/stop"
  done
  wait "$lpid" || fail "the keyed job failed ($?): $(tail -n 3 launch.out)"
  [ $tries -ge 2 ] || fail "the rogues tried only $tries times: the job was too short to test"
  for r in 0 1; do
    grep -q '^check ok:' "$TDIR/logs/worker-$r.log" ||
      fail "worker $r: $(tail -n 1 "$TDIR/logs/worker-$r.log")"
  done
  grep -q 'security: CURVE keys on every socket' status.txt || fail "status does not say keys are on: $(cat status.txt)"
  grep -q 'refused by the scheduler: .*unknown-key=[1-9]' status.txt ||
    fail "status shows no unknown-key refusals: $(cat status.txt)"
  grep -q 'refused by the scheduler: .*message=[1-9]' status.txt ||
    fail "status shows no refused registration: $(cat status.txt)"
  grep -q 'a worker key cannot register as a server' disguised.log ||
    fail "the disguised server was not told why: $(tail -n 2 disguised.log)"
  grep -q 'refused unknown-key from 127.0.0.1 key' "$TDIR/logs/scheduler.log" ||
    fail "the scheduler did not log the unlisted key"
  # counted as plaintext or, as the monitor's events come, as a failed handshake
  grep -q 'refused \(plaintext\|handshake\) from' "$TDIR/logs/scheduler.log" ||
    fail "the scheduler did not log the plaintext worker"
  ! grep -q 'joined the running job' "$TDIR/logs/scheduler.log" || fail "a node joined the running job"
  # refusals are logged once per peer and reason per minute, not once per try
  [ "$(grep -c 'refused unknown-key' "$TDIR/logs/scheduler.log")" -le 3 ] ||
    fail "unknown-key refusals were logged $(grep -c 'refused unknown-key' "$TDIR/logs/scheduler.log") times in one run"
  no_strays "$TDIR/logs"
}

# A plaintext client, and a CURVE client holding the wrong server key, get
# nothing from a keyed scheduler or server; a worker key may not checkpoint or
# drain; a control key may.
tags keys_clients keys slow
t_keys_clients() {
  local port spid K=$TDIR/keys js sport
  keyset "$K" 1 1
  mkdir -p "$TDIR/data" "$TDIR/wrong"
  cp "$K/control/node.key" "$K/control/node.pub" "$TDIR/wrong/"
  "$BIN/pskvctl" keygen --role scheduler --out "$TDIR/other" > /dev/null
  cp "$TDIR/other/node.pub" "$TDIR/wrong/scheduler.pub"
  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1 \
    --keys "$K/scheduler" --data-dir "$TDIR/data"
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --keys "$K/server-0" \
    --data-dir "$TDIR/data"
  sleep 1
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" --timeout 1 status > plain.out 2>&1 &&
    fail "a plaintext pskvctl got an answer: $(cat plain.out)"
  grep -q 'no answer' plain.out || fail "plaintext pskvctl: $(cat plain.out)"
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" --keys "$TDIR/wrong" --timeout 1 status > wrong.out 2>&1 &&
    fail "a client with the wrong server key got an answer: $(cat wrong.out)"
  js=$("$BIN/pskvctl" --scheduler "127.0.0.1:$port" --keys "$K/control" status --json) ||
    fail "the control key got no status"
  # a key added to the allowlist is admitted after SIGHUP, not before
  "$BIN/pskvctl" keygen --role control --out "$TDIR/newctl" > /dev/null || fail "keygen failed"
  cp "$K/scheduler/node.pub" "$TDIR/newctl/scheduler.pub"
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" --keys "$TDIR/newctl" --timeout 1 status > new1.out 2>&1 &&
    fail "an unlisted control key got an answer"
  cat "$TDIR/newctl/node.pub" >> "$K/scheduler/authorized"
  kill -HUP "$(cat scheduler.pid)"
  wait_line scheduler.log 'SIGHUP: allowlist .* re-read' 1 5 || fail "the scheduler did not log the reload"
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" --keys "$TDIR/newctl" status > new2.out 2>&1 ||
    fail "a control key appended to authorized was not admitted after SIGHUP: $(cat new2.out)"
  grep -q '"keys":true' <<< "$js" || fail "status JSON does not say keys are on: $js"
  # plaintext garbage at the server's data port: nothing reaches it, it keeps serving
  sport=$(grep -o '"role":"server","rank":0,"host":"[^"]*","port":[0-9]*' <<< "$js" | grep -o '[0-9]*$')
  [ -n "$sport" ] || fail "no server port in $js"
  "$BIN/pskv-garbage" --endpoint "tcp://127.0.0.1:$sport" --kind random --timeout-ms 300 > garbage.out 2>&1 &&
    fail "a plaintext client got an answer from a keyed server: $(cat garbage.out)"
  # the refusal, logged (at most 5 s: slow under the sanitizers). The peer's address is
  # read when the monitor thread sees the connection accepted; a client that is gone by
  # then (it sends garbage and hangs up) is logged as "?"
  wait_line server-0.log 'refused \(plaintext\|handshake\) from \(127.0.0.1\|?\)' 1 5 ||
    fail "the server did not log the plaintext peer"
  kill -0 "$(cat server-0.pid)" || fail "the server died of plaintext garbage"
  ! grep -q 'dropped message from' server-0.log || fail "plaintext bytes reached the server's decoder"
  # checkpoints: a worker key is refused with the reason, a control key is served
  start worker-0 "$BIN/pskv-worker" --scheduler "127.0.0.1:$port" --keys "$K/worker-0" \
    --app check --rounds 200000 --check-keys 100
  sleep 2
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" --keys "$K/worker-0" checkpoint > wck.out 2>&1 &&
    fail "a worker key took a checkpoint"
  grep -q 'checkpoints need a control key' wck.out || fail "no reason for the refusal: $(cat wck.out)"
  ls "$TDIR/data"/ckpt-* > /dev/null 2>&1 && fail "a checkpoint file was written for a worker key"
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" --keys "$K/control" checkpoint > cck.out 2>&1 ||
    fail "the control key could not checkpoint: $(cat cck.out)"
  grep -q 'checkpoint 1 complete' cck.out || fail "control checkpoint: $(cat cck.out)"
  # drains: a worker key is refused for its key, a control key reaches the scheduler's
  # own checks (the only server is the last one)
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" --keys "$K/worker-0" drain 1 > wdr.out 2>&1 &&
    fail "a worker key drained a server"
  grep -q 'drains need a control key' wdr.out || fail "no reason for the refusal: $(cat wdr.out)"
  "$BIN/pskvctl" --scheduler "127.0.0.1:$port" --keys "$K/control" drain 1 > cdr.out 2>&1 &&
    fail "the last server was drained"
  grep -q 'is the last live server' cdr.out || fail "control drain: $(cat cdr.out)"
  kill "$(cat worker-0.pid)" "$(cat server-0.pid)" "$(cat scheduler.pid)" 2>/dev/null
  wait_exit "$(cat scheduler.pid)" 10 > /dev/null
  wait_exit "$(cat server-0.pid)" 10 > /dev/null
}

# The bytes on the wire: one worker's traffic to the server goes through
# pskv-faultproxy --record. A 64-byte float pattern pushed 20 times must not
# appear in the recording with keys, and must without (the test can fail).
wire_run() { # wire_run KEYS|none OUTFILE
  local port sport pport K=$1
  local kopt=() wkopt=() skopt=()
  if [ "$K" != none ]; then
    kopt=(--keys "$K/scheduler") skopt=(--keys "$K/server-0") wkopt=(--keys "$K/worker-0")
  fi
  port=$(free_port) sport=$(free_port) pport=$(free_port)
  start "proxy-$2" "$BIN/pskv-faultproxy" --listen "127.0.0.1:$pport" --target "127.0.0.1:$sport" \
    --record "$TDIR/$2"
  start "sched-$2" "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1 "${kopt[@]}"
  start "server-$2" "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --port "$sport" \
    --advertise-port "$pport" "${skopt[@]}"
  timeout 60 "$BIN/pskv-wire-pattern" push --scheduler "127.0.0.1:$port" "${wkopt[@]}" \
    --rounds 20 > "push-$2.out" 2>&1 || fail "pattern push ($K) failed: $(cat "push-$2.out")"
  wait_exit "$(cat "sched-$2.pid")" 20 > /dev/null || fail "scheduler ($K) did not end the job"
  kill "$(cat "proxy-$2.pid")" 2>/dev/null
  wait_exit "$(cat "proxy-$2.pid")" 5 > /dev/null
  [ -s "$TDIR/$2" ] || fail "the proxy recorded nothing ($K): the traffic did not go through it"
}

tags keys_wire keys
t_keys_wire() {
  keyset "$TDIR/keys" 1 1
  wire_run none plain.rec
  "$BIN/pskv-wire-pattern" find "$TDIR/plain.rec" > find-plain.out ||
    fail "the pattern is not in the plaintext recording (the test cannot tell): $(cat find-plain.out)"
  wire_run "$TDIR/keys" curve.rec
  "$BIN/pskv-wire-pattern" find "$TDIR/curve.rec" > find-curve.out &&
    fail "the pattern crossed the wire in the clear with keys on: $(cat find-curve.out)"
  grep -q '^0 occurrences' find-curve.out || fail "find: $(cat find-curve.out)"
}

# Protected mode: without keys a daemon listens on loopback only; any other
# address is refused at start (exit 2, naming --keys and --insecure), unless
# --insecure, which starts, warns, and shows in pskvctl status.
tags protected_mode keys
t_protected_mode() {
  local port addr out rc
  addr=$(ip -4 -o addr show scope global 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -n 1)
  port=$(free_port)
  for b in 0.0.0.0 '*' ${addr:+"$addr"}; do
    "$BIN/pskv-scheduler" --port "$port" --bind "$b" > "bind.out" 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "--bind $b without keys exited $rc, not 2: $(cat bind.out)"
    grep -q -- '--keys' bind.out && grep -q -- '--insecure' bind.out ||
      fail "--bind $b: the refusal does not name --keys and --insecure: $(cat bind.out)"
  done
  if [ -n "$addr" ]; then
    "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --advertise "$addr" > adv.out 2>&1
    rc=$?
    [ $rc -eq 2 ] || fail "advertising $addr without keys exited $rc, not 2: $(cat adv.out)"
  fi
  # the default without keys: loopback only
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1
  sleep 0.5
  ss -Htln "sport = :$port" | grep -q '127.0.0.1:' || fail "default bind is not loopback: $(ss -Htln "sport = :$port")"
  kill "$(cat scheduler.pid)"
  wait_exit "$(cat scheduler.pid)" 10 > /dev/null
  # --insecure: starts on every interface, warns, and status shows it
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 1 --bind 0.0.0.0 --insecure
  sleep 0.5
  kill -0 "$(cat scheduler.pid)" || fail "--insecure did not start: $(cat scheduler.log)"
  grep -q 'WARN running with --insecure' scheduler.log || fail "no --insecure warning at start"
  out=$("$BIN/pskvctl" --scheduler "127.0.0.1:$port" status) || fail "status failed"
  grep -q 'WARNING: the scheduler runs with --insecure' <<< "$out" || fail "status hides --insecure: $out"
  kill "$(cat scheduler.pid)"
  wait_exit "$(cat scheduler.pid)" 10 > /dev/null
  # --keys and --insecure together: a usage error
  keyset "$TDIR/keys" 1 1
  "$BIN/pskv-scheduler" --port "$port" --keys "$TDIR/keys/scheduler" --insecure > both.out 2>&1
  [ $? -eq 2 ] || fail "--keys with --insecure was accepted"
}

# A secret key readable by others is refused, as ssh does; so is a key of the
# wrong role.
tags keys_files keys
t_keys_files() {
  local port K=$TDIR/keys rc
  keyset "$K" 1 1
  port=$(free_port)
  chmod 0644 "$K/server-0/node.key"
  "$BIN/pskv-server" --scheduler "127.0.0.1:$port" --keys "$K/server-0" > mode.out 2>&1
  rc=$?
  [ $rc -eq 2 ] || fail "a 0644 secret key was accepted (exit $rc)"
  grep -q '0644' mode.out && grep -q 'chmod 600' mode.out || fail "no clear reason: $(cat mode.out)"
  chmod 0600 "$K/server-0/node.key"
  "$BIN/pskv-scheduler" --port "$port" --keys "$K/worker-0" > role.out 2>&1
  [ $? -eq 2 ] || fail "a worker key started a scheduler"
  grep -q 'holds a worker key' role.out || fail "no reason for the wrong role: $(cat role.out)"
}
