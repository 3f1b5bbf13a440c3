# pskv-serve --keys (sourced by integration.sh; follow_job and follow_serve are in
# serve_follow.sh): following a namespace over real CURVE as a reader key, and the
# ZeroMQ lookup side as a CURVE server.

# zl_try ZMQPORT TABLE KEY [MS]: one pskv_serve_lookup through ctypes (time-out MS,
# default 3000) with the caller's PSKV_KEYS; prints "rc=RC why=..." (0 = answered).
zl_try() {
  PSKV_LIB=$top/build/lib/libpskv.so python3 - "$@" <<'PY'
import ctypes, os, sys
lib = ctypes.CDLL(os.environ["PSKV_LIB"])
f = lib.pskv_serve_lookup
f.restype = ctypes.c_int
keys = (ctypes.c_uint64 * 1)(int(sys.argv[3]))
out = (ctypes.c_float * 16)()
why = ctypes.create_string_buffer(400)
ms = int(sys.argv[4]) if len(sys.argv) > 4 else 3000
rc = f(("127.0.0.1:%s" % sys.argv[1]).encode(), sys.argv[2].encode(), keys, 1, out, 16,
       None, None, ms, why, 400)
print("rc=%d why=%s" % (rc, why.value.decode()))
PY
}

# A keyed job (namespace fj) followed by a reader key bound to fj: it follows over
# CURVE; the same key asking for namespace zz is refused PSKV_EACCES naming zz
# (exit 1 at once, the server counts a namespace refusal); a key the scheduler does
# not list gets no answer (exit 1 after --follow-wait, naming the key files).
# --zmq-port is a CURVE server: a client key its authorized file lists gets the rows
# /v1/lookup gives;
# a plaintext client and an unlisted key get nothing (refused, counted), and the
# daemon keeps answering the listed key after them.
tags serve_keys serve keys
t_serve_keys() {
  local K=$TDIR/keys R=$TDIR/reader C=$TDIR/client S=$TDIR/stranger sp hp zp pub f out spub
  "$BIN/pskvctl" keys init "$K" --servers 1 --workers 1 > /dev/null || fail "keys init failed"
  for d in "$R" "$S"; do
    "$BIN/pskvctl" keygen --role worker --out "$d" > /dev/null || fail "keygen failed"
    cp "$K/scheduler/node.pub" "$d/scheduler.pub"
  done
  pub=$(cut -d' ' -f2 "$R/node.pub")
  for f in "$K/server-0/authorized" "$K/scheduler/authorized"; do
    echo "reader fj $pub" >> "$f"
  done
  cp -r "$K/worker-0" "$C" # the lookup client: the job's worker key, listed below
  cp "$R/node.pub" "$C/serve.pub"
  cp "$R/node.pub" "$S/serve.pub"
  cat "$K/worker-0/node.pub" > "$R/authorized"
  sp=$(free_port); hp=$(free_port); zp=$(free_port)
  follow_job job "$sp" --servers 1 --keys "$K"
  follow_serve follow "$sp" "$hp" --keys "$R" --zmq-port "$zp"
  for _ in $(seq 300); do
    curl -sf -XPOST "http://127.0.0.1:$hp/v1/lookup" -d '{"table":"check.dense","keys":[1]}' \
      > /dev/null && break
    kill -0 "$(cat follow.pid)" 2>/dev/null || fail "pskv-serve exited: $(tail -n 3 follow.log)"
    sleep 0.1
  done
  curl -sf -XPOST "http://127.0.0.1:$hp/v1/lookup" -d '{"table":"check.dense","keys":[1]}' \
    > /dev/null || fail "the reader key followed nothing in 30 s: $(tail -n 3 follow.log)"
  # the same key, a namespace it is not bound to: refused at once, naming it
  timeout 60 "$BIN/pskv-serve" --scheduler "127.0.0.1:$sp" --namespace zz --keys "$R" \
    --http-port "$(free_port)" > zz.log 2>&1
  [ $? -eq 1 ] || fail "namespace zz: exit $? ($(tail -n 2 zz.log))"
  grep -q "namespace 'zz' may not be followed with this key (PSKV_EACCES: server [0-9]*: namespace 'zz': this reader key is bound to namespaces fj only)" zz.log ||
    fail "zz not named: $(tail -n 2 zz.log)"
  grep -q "refused namespace from .*namespace 'zz'" job/server-0.log ||
    fail "the server did not count it: $(grep -i refused job/server-0.log | tail -n 2)"
  # a key the scheduler does not list: no answer, and the hint names the key files
  timeout 60 "$BIN/pskv-serve" --scheduler "127.0.0.1:$sp" --namespace fj --keys "$S" \
    --http-port "$(free_port)" --follow-wait 3 > st.log 2>&1
  [ $? -eq 1 ] || fail "an unlisted key: exit $? ($(tail -n 2 st.log))"
  grep -q "no answer from scheduler 127.0.0.1:$sp within 3 s (with --keys: is this key in its authorized file" st.log ||
    fail "no hint: $(tail -n 2 st.log)"
  wait_exit "$(cat job.launch)" 120 || fail "the job failed: $(tail -n 3 job.out)"
  grep -q '^check ok' job/worker-0.log || fail "check: $(tail -n 1 job/worker-0.log)"
  # a listed client key: the rows HTTP gives, over CURVE (tried again while the
  # servers' last rows, sent as they stopped, may still be being merged)
  for _ in $(seq 10); do
    PSKV_KEYS=$C PSKV_LIB=$top/build/lib/libpskv.so python3 "$top/test/tools/zlookup.py" "$zp" \
      "$hp" check.dense 0 1 999 1000 > z.out 2>&1 && break
    sleep 1
  done
  grep -q '^zlookup ok' z.out || fail "keyed lookup: $(cat z.out)"
  # an unlisted key, then no keys: nothing (a time-out), refused and logged (a key
  # is Z85: [ ] . * may be in it, so it is matched as a fixed string)
  spub=$(cut -d' ' -f2 "$S/node.pub")
  out=$(PSKV_KEYS=$S zl_try "$zp" check.dense 1)
  [ "$out" = "rc=-3 why=no answer from 127.0.0.1:$zp within 3000 ms" ] || fail "unlisted: $out"
  for _ in $(seq 100); do
    grep 'refused unknown-key from' follow.log | grep -qF -- "key $spub" && break
    sleep 0.1
  done
  grep 'refused unknown-key from' follow.log | grep -qF -- "key $spub" ||
    fail "no unknown-key refusal logged: $(grep refused follow.log)"
  out=$(zl_try "$zp" check.dense 1)
  [ "$out" = "rc=-3 why=no answer from 127.0.0.1:$zp within 3000 ms" ] || fail "plaintext: $out"
  # (libzmq reports a plaintext client's failed greeting as either, by timing)
  wait_line follow.log "refused \(plaintext\|handshake\) from" 1 10 ||
    fail "no plaintext refusal logged: $(grep refused follow.log)"
  # a client without serve.pub is told which file is missing
  rm "$S/serve.pub"
  out=$(PSKV_KEYS=$S zl_try "$zp" check.dense 1)
  case $out in "rc=-"*"serve.pub"*"pskv-serve's node.pub"*) ;; *) fail "no serve.pub: $out" ;; esac
  # and the listed key is still answered
  out=$(PSKV_KEYS=$C zl_try "$zp" check.dense 1)
  case $out in "rc=0 "*) ;; *) fail "after the refusals: $out" ;; esac
  kill -0 "$(cat follow.pid)" || fail "pskv-serve died"
  cat z.out
}

# --keys: a bad key directory exits 2 naming it; --keys with --model alone (no
# --zmq-port) exits 2; a server key is refused (a reader is a worker key).
tags serve_keys_bad serve keys
t_serve_keys_bad() {
  local K=$TDIR/keys
  "$BIN/pskvctl" keys init "$K" --servers 1 --workers 1 > /dev/null || fail "keys init failed"
  "$BIN/pskv-serve" --scheduler 127.0.0.1:1 --keys "$TDIR/none" > none.log 2>&1
  [ $? -eq 2 ] || fail "a missing key directory: exit $?"
  grep -q "$TDIR/none/node.key" none.log || fail "not named: $(cat none.log)"
  "$BIN/pskv-serve" --scheduler 127.0.0.1:1 --keys "$K/server-0" > srv.log 2>&1
  [ $? -eq 2 ] || fail "a server key: exit $?"
  grep -q "holds a server key; pskv-serve needs a worker key" srv.log || fail "role: $(cat srv.log)"
  "$BIN/pskv-serve" --model x --keys "$K/worker-0" > model.log 2>&1
  [ $? -eq 2 ] || fail "--keys with --model: exit $?"
  grep -q -- "--keys goes with --scheduler or --zmq-port" model.log || fail "model: $(cat model.log)"
  "$BIN/pskv-serve" --scheduler 127.0.0.1:1 --keys "$K/worker-0" --zmq-port 1 > auth.log 2>&1
  [ $? -eq 2 ] || fail "--zmq-port without authorized: exit $?"
  grep -q "worker-0/authorized" auth.log || fail "authorized not named: $(cat auth.log)"
}
