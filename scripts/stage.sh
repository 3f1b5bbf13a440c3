#!/usr/bin/env bash
# stage.sh - times the stages of `make test` (Makefile), so that where its minutes go
# is printed with every run (test/README.md keeps the table of a measured run).
#
#   scripts/stage.sh FILE NAME CMD...   runs CMD, appends "NAME SECONDS STATUS" to FILE,
#                                       prints "stage NAME: N s", exits with CMD's status
#   scripts/stage.sh --table FILE       prints FILE as a table, with the total and the load
set -u
if [ "${1:-}" = --table ]; then
  [ $# -eq 2 ] && [ -f "$2" ] || { echo "stage.sh: --table needs a file of stages" >&2; exit 2; }
  awk '{ printf "stage %-14s %5d s%s\n", $1, $2, $3 ? "  (status " $3 ")" : ""; s += $2 }
       END { printf "stage %-14s %5d s (%d min %d s)\n", "total", s, s / 60, s % 60 }' "$2"
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi
[ $# -ge 3 ] || { echo "usage: stage.sh FILE NAME CMD... | stage.sh --table FILE" >&2; exit 2; }
file=$1 name=$2; shift 2
t0=$(date +%s)
"$@"; rc=$?
secs=$(( $(date +%s) - t0 ))
echo "$name $secs $rc" >> "$file"
echo "stage $name: $secs s (status $rc, load $(cut -d' ' -f1 /proc/loadavg))"
exit $rc
