#!/usr/bin/env bash
# pskv-serve's answer rate and latency for POST /v1/predict, measured with wrk (Debian's
# wrk package), one row a request, --threads 1 and 2 (issue 39's figure):
#   following  pskv-serve --scheduler --namespace following a training group that
#              runs beside it the whole time (2 servers x 1 worker on this machine):
#              sparse-lr (pskv-gen-sparse, 100,000 features, adagrad, batch 256; rows of
#              30 features) and an MLP 784-128-10 (Fashion-MNIST, batch 32). With each,
#              the training's samples/s in the `--idle` seconds before wrk and during
#              wrk: the pulls a second of the first server `pskvctl top` lists (one
#              pull a step), averaged over the window, times the batch
#   file       pskv-serve --model serving a model file, no training beside it
#              (sparse-lr 100,000 weights, MLP 784-128-10), as before
#   scripts/bench-serve.sh [--seconds S] [--idle S] [--connections C] [--only following,file]
# Prints one line per case: source model threads requests/s p50 p99 (and, following,
# the training's samples/s before and during wrk).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
BIN=${PSKV_BIN_DIR:-$top/build/bin}
secs=10 idle=5 conns=16 only=following,file
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) secs=$2; shift 2 ;;
    --idle) idle=$2; shift 2 ;;
    --connections) conns=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    *) echo "bench-serve.sh: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
for o in ${only//,/ }; do
  case $o in following|file) ;; *) echo "bench-serve.sh: --only takes following, file (got '$o')" >&2; exit 2 ;; esac
done
wants() { [[ ,$only, == *,$1,* ]]; }
command -v wrk > /dev/null || { echo "bench-serve.sh: wrk is missing (apt-get install wrk)" >&2; exit 2; }
work=$(mktemp -d)
pid="" job=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; [ -n "$job" ] && kill "$job" 2>/dev/null; rm -rf "$work"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wrk bodies: one row a request (the file models' and the trained ones' shapes agree)
python3 - "$work" <<'PY'
import json, random, sys
r = random.Random(3)
w = sys.argv[1]
rows = {"slr": ("sparse-lr.w", [["%d:%.3f" % (r.randrange(1, 100000), r.random()) for _ in range(30)]]),
        "mlp": ("mlp-784-128-10", [[round(r.random(), 3) for _ in range(784)]])}
for name, (table, body) in rows.items():
    open("%s/%s.lua" % (w, name), "w").write(
        'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = %s\n'
        % json.dumps(json.dumps({"table": table, "rows": body})))
    open("%s/%s.json" % (w, name), "w").write(json.dumps({"table": table, "rows": body}))
PY

ms() { awk -v p="$1" '$1 == p { v = $2; if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 }
  else if (v ~ /ms$/) sub(/ms/, "", v); else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 }
  printf "%.2f", v }' <<< "$out"; }

# run_wrk MODEL PORT: wrk against /v1/predict; sets out, fails on a non-2xx answer.
run_wrk() {
  out=$(wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$work/$1.lua" "http://127.0.0.1:$2/v1/predict")
  if grep -q 'Non-2xx' <<< "$out"; then
    echo "$out" >&2
    echo "bench-serve.sh: errors answered" >&2
    exit 1
  fi
}

# serve_up PORT MODEL SECS: waits until /v1/predict answers MODEL's row (200).
serve_up() {
  for _ in $(seq $(($3 * 10))); do
    curl -sf -XPOST "http://127.0.0.1:$1/v1/predict" --data-binary "@$work/$2.json" > /dev/null &&
      return 0
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "bench-serve.sh: pskv-serve did not answer $2 within $3 s" >&2
  exit 1
}

# top_rate SCHEDPORT SECS BATCH: the training's samples/s over the next SECS
# seconds: the pulls a second of the first server pskvctl top lists (the worker
# pulls once a step from each server), averaged, times the batch.
top_rate() {
  { timeout "$2" "$BIN/pskvctl" --scheduler "127.0.0.1:$1" top 2> /dev/null || true; } |
    awk -v b="$3" '$1 == "server" { if (!first) first = $2; if ($2 != first) next
        for (i = 3; i <= NF; i++) if ($i ~ /^pulls_per_s=[0-9]/) { split($i, x, "="); s += x[2]; n++ } }
      END { printf "%.0f", n ? s / n * b : 0 }'
}

if wants following; then
  "$BIN/pskv-gen-sparse" --examples 200000 --features 100000 --out "$work/gen" --seed 7 > /dev/null
  echo "following a training group (2 servers x 1 worker) beside it; wrk -t2 -c$conns -d${secs}s, one row a request"
  echo "model threads requests_per_s p50_ms p99_ms train_samples_per_s_before train_samples_per_s_during"
  for model in slr mlp; do
    sp=$(port)
    case $model in
      slr) app=(--app sparse-lr --train "$work/gen.train" --batch 256 --updater adagrad --lr 0.05) batch=256 ;;
      mlp) app=(--app mlp --hidden 128 --batch 32 --lr 0.01 --lr-schedule const) batch=32 ;;
    esac
    "$top/scripts/launch-local.sh" --servers 2 --workers 1 --port "$sp" --timeout 900 \
      --log-dir "$work/$model-job" -- "${app[@]}" --epochs 10000 --eval-every 0 --namespace bs \
      > "$work/$model-job.out" 2>&1 &
    job=$!
    for threads in 1 2; do
      hp=$(port)
      "$BIN/pskv-serve" --scheduler "127.0.0.1:$sp" --namespace bs --http-port "$hp" \
        --threads "$threads" --queue 1024 --log-level warn > "$work/$model-$threads.serve" 2>&1 &
      pid=$!
      serve_up "$hp" "$model" 120
      before=$(top_rate "$sp" "$idle" "$batch")
      top_rate "$sp" "$secs" "$batch" > "$work/during" &
      run_wrk "$model" "$hp"
      wait $!
      kill -0 "$job" 2>/dev/null || { echo "bench-serve.sh: the $model job ended early: $(tail -n 3 "$work/$model-job.out")" >&2; exit 1; }
      echo "$model $threads $(awk '/^Requests\/sec/ {print $2}' <<< "$out") $(ms 50%) $(ms 99%) $before $(cat "$work/during")"
      kill "$pid"; wait "$pid" || true; pid=""
    done
    kill "$job"; wait "$job" 2>/dev/null || true; job=""
  done
fi

if wants file; then
  python3 "$top/test/tools/modelfile.py" write sparse-lr 100000 0 1 1 "$work/slr.model"
  python3 "$top/test/tools/modelfile.py" write mlp 784 128 10 2 "$work/mlp.model"
  echo "a model file, no training beside it; wrk -t2 -c$conns -d${secs}s, one row a request"
  echo "model threads requests_per_s p50_ms p99_ms"
  for model in slr mlp; do
    for threads in 1 2; do
      hp=$(port)
      "$BIN/pskv-serve" --model "$work/$model.model" --http-port "$hp" --threads "$threads" \
        --queue 1024 --log-level warn &
      pid=$!
      serve_up "$hp" "$model" 10
      run_wrk "$model" "$hp"
      echo "$model $threads $(awk '/^Requests\/sec/ {print $2}' <<< "$out") $(ms 50%) $(ms 99%)"
      kill "$pid"; wait "$pid" || true; pid=""
    done
  done
fi
