#!/usr/bin/env bash
# The size rule: no C source file over 800 lines, no function over 150 lines unless a
# comment just above it (or just inside its opening brace) says "one piece:" and why.
# Prints the largest files and functions, then every breach; exits 1 on a breach.
#
#   scripts/check-size.sh [--top N] [DIR ...]     (default: common server worker scheduler test)
#
# A function is what the house style writes: a definition whose opening brace stands
# alone at column 0, closed by the next '}' at column 0.
set -u
cd "$(dirname "$0")/.."

MAX_FILE=800
MAX_FUNC=150
top=5
dirs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --top) top=${2:?--top needs a count}; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    -*) echo "check-size: unknown flag '$1' (see --help)" >&2; exit 2 ;;
    *) dirs+=("$1"); shift ;;
  esac
done
[ ${#dirs[@]} -gt 0 ] || dirs=(common server worker scheduler test)

files=$(find "${dirs[@]}" \( -name '*.c' -o -name '*.h' \) -type f | sort)
[ -n "$files" ] || { echo "check-size: no C files under ${dirs[*]}" >&2; exit 2; }

# One line per function: LINES FILE:LINE NAME EXCUSED(0|1)
funcs=$(for f in $files; do
  awk -v file="$f" '
    { line[NR] = $0 }
    /^\{[ \t]*$/ && !inbody {
      inbody = 1; start = NR; name = "?"; excused = 0
      # the signature: walk back to the line that opens it (the name sits before "(")
      for (i = NR - 1; i > 0 && i > NR - 12; i--) {
        if (match(line[i], /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
          name = substr(line[i], RSTART, RLENGTH); sub(/[ \t]*\($/, "", name)
          sig = i
          if (line[i] ~ /^[A-Za-z_]/) break
        }
      }
      # a reason comment in the 8 lines above the signature
      for (i = sig - 1; i > 0 && i >= sig - 8; i--)
        if (line[i] ~ /one piece:/) excused = 1
      next
    }
    inbody && NR <= start + 3 && /one piece:/ { excused = 1 }
    inbody && /^\}/ { printf "%d %s:%d %s %d\n", NR - start + 1, file, start, name, excused; inbody = 0 }
  ' "$f"
done | sort -rn)

echo "largest files:"
wc -l $files | grep -v ' total$' | sort -rn | head -n "$top" | awk '{ printf "  %5d  %s\n", $1, $2 }'
echo "largest functions:"
echo "$funcs" | head -n "$top" | awk '{ printf "  %5d  %s %s%s\n", $1, $2, $3, $4 ? " (one piece: reason given)" : "" }'

bad=0
for f in $files; do
  n=$(wc -l < "$f")
  if [ "$n" -gt "$MAX_FILE" ]; then
    echo "check-size: $f has $n lines (limit $MAX_FILE): split it along a seam" >&2
    bad=1
  fi
done
while read -r n where name excused; do
  [ -n "$n" ] || continue
  if [ "$n" -gt "$MAX_FUNC" ] && [ "$excused" = 0 ]; then
    echo "check-size: $name at $where has $n lines (limit $MAX_FUNC) and no 'one piece:' comment saying why" >&2
    bad=1
  fi
done <<< "$funcs"
if [ "$bad" = 0 ]; then
  echo "size rule holds: no file over $MAX_FILE lines, no function over $MAX_FUNC without a reason"
fi
exit "$bad"
