#!/usr/bin/env bash
# The size rule: no C source file over 800 code lines, no function over 150 code lines
# unless a comment just above it (or just inside its opening brace) says "one piece:" and
# why. Code lines are lines with something besides comments and white space: a comment
# never costs room. Prints the largest files and functions, then every breach, then (for
# review, not a failure) the .c files under 60 code lines: modules that may be better
# merged with a neighbour (headers are left out: a small header beside its .c is the
# norm). Exits 1 on a breach.
#
#   scripts/check-size.sh [--top N] [DIR ...]     (default: include common server worker scheduler test)
#
# A function is what the house style writes: a definition whose opening brace stands
# alone at column 0, closed by the next '}' at column 0.
set -u
cd "$(dirname "$0")/.."

MAX_FILE=800
MAX_FUNC=150
MIN_FILE=60
top=5
dirs=()
while [ $# -gt 0 ]; do
  case "$1" in
    --top) top=${2:?--top needs a count}; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "check-size: unknown flag '$1' (see --help)" >&2; exit 2 ;;
    *) dirs+=("$1"); shift ;;
  esac
done
[ ${#dirs[@]} -gt 0 ] || dirs=(include common server worker scheduler test)

files=$(find "${dirs[@]}" \( -name '*.c' -o -name '*.h' \) -type f | sort)
[ -n "$files" ] || { echo "check-size: no C files under ${dirs[*]}" >&2; exit 2; }

# One awk pass over every file. code_line() says whether the current line holds code,
# carrying an open /* comment over to the next line (string and character literals
# are skipped, so a "/*" inside one opens nothing). Prints
#   F CODE FILE                          one per file
#   f CODE FILE:LINE NAME EXCUSED(0|1)   one per function
# shellcheck disable=SC2086 # files: one path a word, none with spaces
counts=$(awk '
  function code_line(s,   n, i, c, q, has) {
    n = length(s); has = 0; q = ""
    for (i = 1; i <= n; i++) {
      c = substr(s, i, 1)
      if (incomment) { if (c == "*" && substr(s, i + 1, 1) == "/") { incomment = 0; i++ } continue }
      if (q != "") { if (c == "\\") i++; else if (c == q) q = ""; continue }
      if (c == "/" && substr(s, i + 1, 1) == "*") { incomment = 1; i++; continue }
      if (c == "/" && substr(s, i + 1, 1) == "/") break
      if (c == "\"" || c == "\047") q = c
      if (c != " " && c != "\t" && c != "\r" && c != "\f") has = 1
    }
    return has
  }
  function end_file() { if (file != "") printf "F %d %s\n", code, file }
  FNR == 1 { end_file(); file = FILENAME; code = 0; incomment = 0; inbody = 0; delete line }
  {
    line[FNR] = $0
    iscode = code_line($0); code += iscode
  }
  /^\{[ \t]*$/ && !inbody {
    inbody = 1; start = FNR; body = 1; name = "?"; excused = 0
    # the signature: walk back to the line that opens it (the name sits before "(")
    for (i = FNR - 1; i > 0 && i > FNR - 12; i--) {
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
  inbody { body += iscode }
  inbody && FNR <= start + 3 && /one piece:/ { excused = 1 }
  inbody && /^\}/ { printf "f %d %s:%d %s %d\n", body, file, start, name, excused; inbody = 0 }
  END { end_file() }
' $files)
sizes=$(sed -n 's/^F //p' <<< "$counts" | sort -rn)
funcs=$(sed -n 's/^f //p' <<< "$counts" | sort -rn)

echo "largest files (code lines):"
head -n "$top" <<< "$sizes" | awk '{ printf "  %5d  %s\n", $1, $2 }'
echo "largest functions (code lines):"
head -n "$top" <<< "$funcs" | awk '{ printf "  %5d  %s %s%s\n", $1, $2, $3, $4 ? " (one piece: reason given)" : "" }'

bad=0
while read -r n f; do
  if [ "$n" -gt "$MAX_FILE" ]; then
    echo "check-size: $f has $n code lines (limit $MAX_FILE): split it along a seam" >&2
    bad=1
  fi
done <<< "$sizes"
while read -r n where name excused; do
  [ -n "$n" ] || continue
  if [ "$n" -gt "$MAX_FUNC" ] && [ "$excused" = 0 ]; then
    echo "check-size: $name at $where has $n code lines (limit $MAX_FUNC) and no 'one piece:' comment saying why" >&2
    bad=1
  fi
done <<< "$funcs"
small=$(awk -v min="$MIN_FILE" '$1 < min && $2 ~ /\.c$/' <<< "$sizes" | sort -n)
if [ -n "$small" ]; then
  echo ".c files under $MIN_FILE code lines, for review (a module that earns its file, or one to merge with a neighbour):"
  awk '{ printf "  %5d  %s\n", $1, $2 }' <<< "$small"
fi
if [ "$bad" = 0 ]; then
  echo "size rule holds: no file over $MAX_FILE code lines, no function over $MAX_FUNC without a reason"
fi
exit "$bad"
