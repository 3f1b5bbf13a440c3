#!/usr/bin/env bash
# pskv-serve's answer rate and latency for POST /v1/predict, measured with wrk (Debian's
# wrk package) against a model file: sparse-lr (100,000 weights, 30 features a row) and
# an MLP (784-128-10), one row a request, --threads 1 and 2.
#   scripts/bench-serve.sh [--seconds S] [--connections C]
# Prints one line per case: model threads requests/s p50 p99.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
BIN=${PSKV_BIN_DIR:-$top/build/bin}
secs=10 conns=16
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) secs=$2; shift 2 ;;
    --connections) conns=$2; shift 2 ;;
    *) echo "bench-serve.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
command -v wrk > /dev/null || { echo "bench-serve.sh: wrk is missing (apt-get install wrk)" >&2; exit 2; }
work=$(mktemp -d)
trap 'kill "${pid:-}" 2>/dev/null; rm -rf "$work"' EXIT
python3 "$top/test/tools/modelfile.py" write sparse-lr 100000 0 1 1 "$work/slr.model"
python3 "$top/test/tools/modelfile.py" write mlp 784 128 10 2 "$work/mlp.model"
python3 - "$work" <<'PY'
import json, random, sys
r = random.Random(3)
w = sys.argv[1]
rows = {"slr": [["%d:%.3f" % (r.randrange(1, 1000000), r.random()) for _ in range(30)]],
        "mlp": [[round(r.random(), 3) for _ in range(784)]]}
for name, body in rows.items():
    open("%s/%s.lua" % (w, name), "w").write(
        'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = %s\n'
        % json.dumps(json.dumps({"rows": body})))
PY
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo "model threads requests_per_s p50_ms p99_ms (wrk -t2 -c$conns -d${secs}s, one row a request)"
for model in slr mlp; do
  for threads in 1 2; do
    "$BIN/pskv-serve" --model "$work/$model.model" --http-port "$port" --threads "$threads" \
      --queue 1024 --log-level warn &
    pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/v1/model" > /dev/null && break; sleep 0.1; done
    out=$(wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$work/$model.lua" "http://127.0.0.1:$port/v1/predict")
    grep -q 'Non-2xx' <<< "$out" && { echo "$out" >&2; echo "bench-serve.sh: errors answered" >&2; exit 1; }
    rps=$(awk '/^Requests\/sec/ {print $2}' <<< "$out")
    ms() { awk -v p="$1" '$1 == p { v = $2; if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 }
      else if (v ~ /ms$/) sub(/ms/, "", v); else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 }
      printf "%.2f", v }' <<< "$out"; }
    echo "$model $threads $rps $(ms 50%) $(ms 99%)"
    kill "$pid"; wait "$pid" || true
  done
done
