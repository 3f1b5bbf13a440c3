#!/usr/bin/env bash
# The flag reference in docs/reference/ is written by the programs themselves
# (`PROGRAM --markdown`, common/manpage.c, from the table that drives their flags):
# `make docs` writes it, and this check fails when a committed page differs from
# what the built program prints, naming the page.
#
#   scripts/check-docs.sh [BIN_DIR]          (default: build/bin)
#   scripts/check-docs.sh --write [BIN_DIR]  (what `make docs` runs)
set -u
cd "$(dirname "$0")/.."

write=0
if [ "${1:-}" = "--write" ]; then write=1; shift; fi
case "${1:-}" in
  -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
  -*) echo "check-docs: unknown flag '$1' (see --help)" >&2; exit 2 ;;
esac
bin=${1:-build/bin}
progs="pskv-scheduler pskv-server pskv-worker pskv-evaluator pskvctl pskv-serve"

bad=0
for p in $progs; do
  [ -x "$bin/$p" ] || { echo "check-docs: $bin/$p not built (run make all)" >&2; exit 2; }
  page=docs/reference/$p.md
  if [ "$write" = 1 ]; then
    "$bin/$p" --markdown > "$page.tmp" && mv "$page.tmp" "$page" ||
      { rm -f "$page.tmp"; exit 1; }
    echo "wrote $page"
  elif ! "$bin/$p" --markdown | cmp -s - "$page"; then
    echo "check-docs: $page is stale (differs from '$p --markdown'):" \
      "run make docs and commit it" >&2
    bad=1
  fi
done
[ "$write" = 1 ] || [ "$bad" = 1 ] ||
  echo "flag reference is current: docs/reference/ matches --markdown of every program"
exit "$bad"
