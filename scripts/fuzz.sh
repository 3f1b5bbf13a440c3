#!/usr/bin/env bash
# libFuzzer over the message decoder (test/tools/fuzz_wire.c, built by `make fuzz`): one
# campaign per message type (PSKV_FUZZ_TYPE forces the type of every input) and a
# last one over every type at once, each FUZZ_RUNS executions (default 10^6).
# Each campaign starts from test/corpus plus what earlier runs kept in
# build/fuzz/corpus-TYPE. Prints one line per campaign (executions, exec/s,
# seconds, corpus size) and exits 1 when any campaign found a crash (its input is
# in build/fuzz/TYPE-crash-*, its log in build/fuzz/TYPE.log).
#
#   scripts/fuzz.sh [FUZZER]         env: FUZZ_RUNS, FUZZ_TYPES="PUSH PULL ..."
set -u
cd "$(dirname "$0")/.."
FUZZER=${1:-build/fuzz/fuzz-wire}
RUNS=${FUZZ_RUNS:-1000000}
OUT=build/fuzz
[ -x "$FUZZER" ] || { echo "fuzz.sh: no fuzzer at $FUZZER (make fuzz builds it)" >&2; exit 2; }
# every type of the MsgType enum but MSG_NONE, from the protocol itself
all_types=$(awk '/^enum MsgType/ { on = 1; next } on && /^}/ { exit }
                 on && /^ *[A-Z_]+ = [0-9]+;/ { sub(/^ */, ""); if ($1 != "MSG_NONE") print $1 }' \
                 proto/pskv.proto)
TYPES=${FUZZ_TYPES:-$all_types}
failed=0
total=0
printf '%-16s %12s %10s %8s %8s\n' type executions exec/s seconds corpus
for t in $TYPES any; do
  mkdir -p "$OUT/corpus-$t"
  t0=$(date +%s%3N)
  if [ "$t" = any ]; then force=; else force=$t; fi
  PSKV_FUZZ_TYPE=$force "$FUZZER" -runs="$RUNS" -max_len=4096 -print_final_stats=1 \
    -artifact_prefix="$OUT/$t-" "$OUT/corpus-$t" test/corpus > "$OUT/$t.log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$OUT/$t.log")
  ms=$(( $(date +%s%3N) - t0 ))
  rate=$(( ${execs:-0} * 1000 / (ms > 0 ? ms : 1) ))  # wall clock, loading the corpus included
  n=$(find "$OUT/corpus-$t" -type f | wc -l)
  printf '%-16s %12s %10s %8.1f %8s\n' "$t" "${execs:-?}" "$rate" "$(awk -v m="$ms" 'BEGIN { print m / 1000 }')" "$n"
  total=$((total + ${execs:-0}))
  if [ $rc -ne 0 ]; then
    echo "fuzz.sh: $t: the fuzzer exited $rc (see $OUT/$t.log):" >&2
    grep -m 3 'ERROR\|runtime error\|SUMMARY' "$OUT/$t.log" >&2
    failed=1
  elif [ "${execs:-0}" -lt "$RUNS" ]; then
    echo "fuzz.sh: $t: only ${execs:-0} executions" >&2
    failed=1
  fi
done
echo "fuzz.sh: $total executions in all"
exit $failed
