#!/usr/bin/env bash
# `make demo`: a local cluster (1 scheduler, 2 servers, 2 workers) that runs the
# exact-sum check over dense and sparse tables, then the push/pull benchmark at
# 1 MiB on 1 server + 1 worker. Logs stay in the printed directory.
set -u
here=$(cd "$(dirname "$0")" && pwd)
logs=$(mktemp -d /tmp/pskv-demo-XXXXXX)
echo "== pskv demo: 1 scheduler, 2 servers, 2 workers: exact sums over dense and sparse tables"
"$here/launch-local.sh" --servers 2 --workers 2 --timeout 300 --log-dir "$logs/check" \
  --scheduler-opt --log-level --scheduler-opt warn --server-opt --log-level --server-opt warn \
  -- --app check --rounds 5 --keys 100000 --log-level warn || {
  echo "demo: the check failed; logs in $logs/check" >&2; exit 1; }
echo
echo "== push/pull of 1 MiB values, 1 server, 1 worker"
"$here/launch-local.sh" --servers 1 --workers 1 --timeout 300 --log-dir "$logs/bench" \
  --scheduler-opt --log-level --scheduler-opt warn --server-opt --log-level --server-opt warn \
  -- --app bench --size 1048576 --runs 3 --log-level warn | grep -v '^bench run=' || {
  echo "demo: the benchmark failed; logs in $logs/bench" >&2; exit 1; }
echo
echo "demo done; logs in $logs"
