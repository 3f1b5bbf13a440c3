# pskv-serve (sourced by integration.sh): a model file served over HTTP, its
# answers checked against test/tools/modelfile.py's, and bad input refused with curl.

MF=$top/test/tools/modelfile.py

# serve_reap: on the test's exit (a failed assertion too), ends the pskv-serve
# processes it started, by their pid files (the harness reaps only on time-out).
serve_reap() {
  local f
  for f in "${1:-$TDIR}"/*.pid; do
    [ -e "$f" ] && kill "$(cat "$f")" 2>/dev/null
  done
  return 0
}

# serve_start NAME PORT ARGS...: starts pskv-serve and waits (10 s) until it answers.
serve_start() {
  local name=$1 port=$2; shift 2
  trap "serve_reap '$TDIR'" EXIT # TDIR is set for the test function's call only
  start "$name" "$BIN/pskv-serve" --http-port "$port" "$@"
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$port/v1/model" > /dev/null && return 0
    kill -0 "$(cat "$TDIR/$name.pid")" 2>/dev/null || fail "$name exited: $(tail -n 3 "$TDIR/$name.log")"
    sleep 0.1
  done
  fail "$name did not answer within 10 s: $(tail -n 3 "$TDIR/$name.log")"
}

# same_scores GOT_JSON WANT_JSON: the scores agree to 1e-5 (float32 against float64).
same_scores() {
  python3 - "$1" "$2" <<'PY' || fail "scores differ: got $1, want $2"
import json, sys
got, want = json.loads(sys.argv[1])["scores"], json.loads(sys.argv[2])
flat = lambda v: [x for r in v for x in (r if isinstance(r, list) else [r])]
g, w = flat(got), flat(want)
sys.exit(not (len(g) == len(w) and all(abs(a - b) <= 1e-5 for a, b in zip(g, w))))
PY
}

tags serve_model_file serve
t_serve_model_file() {
  # an MLP, a softmax and a sparse-lr model file: /v1/predict answers what an
  # independent implementation computes, /v1/lookup the stored rows, /v1/model
  # and /metrics the version and its staleness; SIGHUP publishes a new file
  local port got rows srows
  python3 "$MF" write mlp 5 4 3 1 mlp.model && python3 "$MF" write softmax 5 0 3 2 sm.model &&
    python3 "$MF" write sparse-lr 50 0 1 3 slr.model || fail "cannot write the model files"
  rows='[[1,2,3,4,5],[0,0,0,0,0],[-1,0.5,2e-1,3,-4]]'
  port=$(free_port)
  serve_start mlp "$port" --model mlp.model --threads 2
  got=$(curl -sf -XPOST "http://127.0.0.1:$port/v1/predict" -d "{\"rows\":$rows}") || fail "predict failed"
  same_scores "$got" "$(python3 "$MF" predict mlp.model "$rows")"
  grep -q '"version":{"clock":-1,"wall":[0-9.]*,"staleness_seconds":[0-9.]*}' <<< "$got" ||
    fail "no version in $got"
  got=$(curl -sf -XPOST "http://127.0.0.1:$port/v1/lookup" -d '{"table":"mlp-5-4-3","keys":[0,"1",38,39]}')
  python3 - "$got" <<'PY' || fail "lookup: $got"
import json, struct, sys
v = json.loads(sys.argv[1])["values"]
w = struct.unpack_from("<39f", open("mlp.model", "rb").read(), 40)
sys.exit(not (v[3] is None and all(abs(v[i] - w[k]) < 1e-6 for i, k in enumerate([0, 1, 38]))))
PY
  curl -sf "http://127.0.0.1:$port/v1/model" | grep -q '"table":"mlp-5-4-3","kind":"mlp","rows":39,"in":5,"hidden":4,"out":3' ||
    fail "/v1/model: $(curl -s "http://127.0.0.1:$port/v1/model")"
  curl -sf "http://127.0.0.1:$port/metrics" | grep -q '^pskv_serve_staleness_seconds{.*table="mlp-5-4-3"} [0-9]' ||
    fail "no staleness in /metrics"
  # a new file under the same path: SIGHUP serves it (a new version, new table)
  cp sm.model mlp.model.new && mv mlp.model.new mlp.model && kill -HUP "$(cat mlp.pid)"
  for _ in $(seq 50); do
    curl -sf "http://127.0.0.1:$port/v1/model" | grep -q '"table":"softmax-5-0-3"' && break
    sleep 0.1
  done
  got=$(curl -sf -XPOST "http://127.0.0.1:$port/v1/predict" -d "{\"table\":\"softmax-5-0-3\",\"rows\":$rows}") ||
    fail "predict after SIGHUP failed"
  same_scores "$got" "$(python3 "$MF" predict sm.model "$rows")"
  kill "$(cat mlp.pid)"; wait_exit "$(cat mlp.pid)" 10 || fail "pskv-serve exited $? on SIGTERM"
  # sparse-lr: features as "id:value", unseen ids weigh 0, the bias always counts
  port=$(free_port)
  serve_start slr "$port" --model slr.model
  srows=$(python3 - <<'PY'
import struct
d = open("slr.model", "rb").read(); n = struct.unpack_from("<Q", d, 28)[0]
keys = sorted(struct.unpack_from("<Q", d, 40 + 12 * i)[0] for i in range(n))[:6]
print('[["%d:1","%d:0.5","%d:-2"],[],["%d:3","123456789:1"]]' % (keys[0], keys[1], keys[2], keys[3]))
PY
)
  got=$(curl -sf -XPOST "http://127.0.0.1:$port/v1/predict" -d "{\"rows\":$srows}") || fail "sparse predict failed"
  same_scores "$got" "$(python3 "$MF" predict slr.model "$srows")"
  kill "$(cat slr.pid)"; wait_exit "$(cat slr.pid)" 10 || fail "pskv-serve exited $? on SIGTERM"
  no_strays "$TDIR"
}

# expect_http CODE FIELD METHOD URL [DATA]: curl's status is CODE and the JSON error
# names FIELD.
expect_http() {
  local code=$1 field=$2 method=$3 url=$4 data=${5-} out st
  if [ -n "$data" ]; then
    st=$(curl -s -o out.json -w '%{http_code}' -X "$method" "$url" --data-binary "$data")
  else
    st=$(curl -s -o out.json -w '%{http_code}' -X "$method" "$url")
  fi
  out=$(cat out.json)
  [ "$st" = "$code" ] || fail "$method $url $data: HTTP $st, want $code ($out)"
  grep -q "\"field\":\"$field\"" <<< "$out" || fail "$method $url: error does not name $field: $out"
}

tags serve_bad_input serve
t_serve_bad_input() {
  # each bad request gets its 4xx and a JSON error naming the field; the daemon
  # keeps serving, counts them, and a slow client holding the only place in
  # flight (--queue 1) makes the next request a counted 503
  local port u big
  python3 "$MF" write softmax 3 0 2 5 sm.model && python3 "$MF" write sparse-lr 5 0 1 6 slr.model ||
    fail "cannot write the model files"
  port=$(free_port) u=http://127.0.0.1:$port
  serve_start sm "$port" --model sm.model --max-keys 5 --max-rows 4 --max-body 4096 --queue 1
  expect_http 400 body POST "$u/v1/predict" '{"rows":[[1,2,3]'
  expect_http 400 body POST "$u/v1/predict" '{"rows":[[1,2,3]]} trailing'
  expect_http 400 body POST "$u/v1/predict" '[1,2,3]'
  expect_http 400 body POST "$u/v1/predict" ''
  expect_http 400 rows POST "$u/v1/predict" '{"row":[[1,2,3]]}'
  expect_http 400 rows POST "$u/v1/predict" '{"rows":[[1,2,3],[1,2,3],[1,2,3],[1,2,3],[1,2,3]]}'
  expect_http 400 'rows\[1\]' POST "$u/v1/predict" '{"rows":[[1,2,3],[1,2]]}'
  expect_http 400 'rows\[0\]\[2\]' POST "$u/v1/predict" '{"rows":[[1,2,"x"]]}'
  expect_http 400 table POST "$u/v1/predict" '{"table":"nope","rows":[[1,2,3]]}'
  expect_http 400 table POST "$u/v1/lookup" '{"table":"nope","keys":[1]}'
  expect_http 400 table POST "$u/v1/lookup" '{"keys":[1]}'
  expect_http 400 keys POST "$u/v1/lookup" '{"table":"softmax-3-0-2","keys":[1,2,3,4,5,6]}'
  expect_http 400 'keys\[1\]' POST "$u/v1/lookup" '{"table":"softmax-3-0-2","keys":[1,-2]}'
  expect_http 400 'keys\[0\]' POST "$u/v1/lookup" '{"table":"softmax-3-0-2","keys":[18446744073709551616]}'
  big=$(python3 -c 'print("{\"rows\":[[" + ",".join(["1"] * 3000) + "]]}")')
  expect_http 413 body POST "$u/v1/predict" "$big"
  expect_http 405 method GET "$u/v1/predict"
  expect_http 405 method POST "$u/v1/model" '{}'
  expect_http 404 url GET "$u/v2/predict"
  curl -sf -XPOST "$u/v1/predict" -d '{"rows":[[1,2,3]]}' | grep -q '"scores":\[\[' ||
    fail "a good request failed after the bad ones"
  curl -sf "$u/metrics" | grep -q '^pskv_serve_bad_requests_total{.*endpoint="predict"} 1[0-9]$' ||
    fail "bad requests not counted: $(curl -s "$u/metrics" | grep bad_requests)"
  # a slow client: headers and half a body, then nothing for 5 s; once it holds the
  # place (within 4 s), a request is refused with 503
  python3 -c '
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{\"rows\":")
time.sleep(5)' "$port" &
  local slow=$! st=
  for _ in $(seq 40); do
    st=$(curl -s -o out.json -w '%{http_code}' -XPOST "$u/v1/predict" -d '{"rows":[[1,2,3]]}')
    [ "$st" = 503 ] && break
    sleep 0.1
  done
  [ "$st" = 503 ] && grep -q '"field":"queue"' out.json || fail "no 503 while the slow client held the queue: $st $(cat out.json)"
  wait "$slow"
  sleep 0.2
  curl -sf -XPOST "$u/v1/predict" -d '{"rows":[[1,2,3]]}' > /dev/null || fail "no answer after the slow client left"
  curl -sf "$u/metrics" | grep -q '^pskv_serve_rejected_total{.*} [1-9]' || fail "503 not counted"
  kill "$(cat sm.pid)"; wait_exit "$(cat sm.pid)" 10 || fail "pskv-serve exited $?"
  # sparse features and bad flags
  port=$(free_port) u=http://127.0.0.1:$port
  serve_start slr "$port" --model slr.model
  expect_http 400 'rows\[0\]\[1\]' POST "$u/v1/predict" '{"rows":[["1:1","7"]]}'
  expect_http 400 'rows\[0\]\[0\]' POST "$u/v1/predict" '{"rows":[["1:nan"]]}'
  expect_http 400 'rows\[1\]' POST "$u/v1/predict" '{"rows":[[],"1:1"]}'
  kill "$(cat slr.pid)"; wait_exit "$(cat slr.pid)" 10 || fail "pskv-serve exited $?"
  timeout 10 "$BIN/pskv-serve" > noflag.out 2>&1; [ $? -eq 2 ] && grep -q -- '--model' noflag.out || fail "no --model: $(cat noflag.out)"
  head -c 50 sm.model > cut.model
  timeout 10 "$BIN/pskv-serve" --model cut.model --http-port 0 > cut.out 2>&1; [ $? -eq 1 ] && grep -q 'cut.model' cut.out ||
    fail "a truncated model file: $(cat cut.out)"
  no_strays "$TDIR"
}
