#!/usr/bin/env bash
# check-deb.sh BUILD: checks the package make deb wrote in BUILD/deb: lintian
# reports no error; it holds the binaries, library, header, pskv.pc, manual pages
# and unit templates; systemd-analyze verify accepts every unit (in the unpacked
# package, with example configurations); every manual page formats without a
# groff warning and names every flag its program's --help lists; the Python package
# imports from the unpacked package (its own libpskv) in /usr/bin/python3. Prints one line
# per check and "N passed, N failed". Exit status 0 when all pass.
set -u
here=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:-$here/../build}" && pwd)
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "PASS $1"; }
bad() { failed=$((failed + 1)); echo "FAIL $1"; shift; [ $# -eq 0 ] || printf '    %s\n' "$@"; }
deb=$(ls "$BUILD"/deb/pskv_*.deb 2>/dev/null | tail -n 1)
if [ -z "$deb" ]; then bad "package" "no $BUILD/deb/pskv_*.deb (make deb)"; echo "0 passed, 1 failed"; exit 1; fi
work=$(mktemp -d /tmp/pskv-debcheck-XXXXXX)
trap 'rm -rf "$work"' EXIT

# lintian: errors fail; warnings are printed (docs/operations.md says which remain)
if lintian --fail-on error "$deb" > "$work/lintian" 2>&1; then
  ok "lintian: no errors ($(grep -c '^W:' "$work/lintian") warnings)"
else
  bad "lintian" "$(grep -v 'root privileges' "$work/lintian")"
fi
grep '^W:' "$work/lintian" | sed 's/^/    /'

root=$work/root
dpkg-deb -x "$deb" "$root"
missing=()
for f in usr/bin/pskv-scheduler usr/bin/pskv-server usr/bin/pskv-worker usr/bin/pskv-evaluator usr/bin/pskvctl usr/bin/pskv-serve \
         usr/lib/libpskv.so.1 usr/lib/libpskv.so usr/lib/libpskv.a usr/include/pskv.h \
         usr/include/pskv_errors.h usr/include/pskv_updater.h usr/lib/pkgconfig/pskv.pc \
         lib/systemd/system/pskv-scheduler@.service lib/systemd/system/pskv-server@.service \
         lib/systemd/system/pskv-worker@.service lib/systemd/system/pskv-serve@.service usr/share/doc/pskv/copyright \
         usr/lib/python3/dist-packages/pskv/__init__.py usr/lib/python3/dist-packages/pskv/torch.py; do
  [ -e "$root/$f" ] || missing+=("$f")
done
for p in pskv-scheduler pskv-server pskv-worker pskv-evaluator pskvctl pskv-serve; do
  [ -e "$root/usr/share/man/man1/$p.1.gz" ] || missing+=("usr/share/man/man1/$p.1.gz")
done
if [ ${#missing[@]} -eq 0 ]; then ok "contents"; else bad "contents" "missing: ${missing[*]}"; fi

# the Python package, from the package's contents alone (a fresh environment)
if out=$(cd / && env -i PATH=/usr/bin:/bin PYTHONDONTWRITEBYTECODE=1 \
           PYTHONPATH="$root/usr/lib/python3/dist-packages" /usr/bin/python3 -c \
           'import pskv, pskv.torch; print(pskv.library_path)' 2>&1) &&
   [[ $out == "$root"/usr/lib/libpskv.so.1 ]]; then
  ok "python3: import pskv (library $out)"
else
  bad "python3: import pskv" "$out"
fi

# the units, verified against the unpacked package (its binaries) and the host's targets
mkdir -p "$root/etc/pskv"
cp -a /lib/systemd/system/*.target "$root/lib/systemd/system/" 2>/dev/null
for r in scheduler server worker serve; do
  cp "$root/usr/share/doc/pskv/examples/$r.conf" "$root/etc/pskv/$r-a.conf"
  out=$(systemd-analyze verify --man=no --root="$root" "$root/lib/systemd/system/pskv-$r@.service" 2>&1)
  if [ $? -eq 0 ] && [ -z "$out" ]; then ok "systemd-analyze verify pskv-$r@.service"
  else bad "systemd-analyze verify pskv-$r@.service" "$out"; fi
done

# manual pages: no groff warnings, and every flag of --help in them (one table)
for p in pskv-scheduler pskv-server pskv-worker pskv-evaluator pskvctl pskv-serve; do
  page=$root/usr/share/man/man1/$p.1.gz
  warn=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 "$page" 2>&1 > "$work/$p.txt")
  flags=$("$root/usr/bin/$p" --help | grep -o '^  --[a-z0-9-]*' | sed 's/^  //')
  absent=()
  for f in $flags; do
    zcat "$page" | grep -q -- "^\\\\fB$(sed 's/-/\\\\-/g' <<< "$f")\\\\fR" || absent+=("$f")
  done
  if [ -z "$warn" ] && [ ${#absent[@]} -eq 0 ] && [ -n "$flags" ]; then
    ok "man $p ($(wc -w <<< "$flags") flags)"
  else
    bad "man $p" "${warn:-}" "flags of --help not in the page: ${absent[*]:-none}"
  fi
done
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
