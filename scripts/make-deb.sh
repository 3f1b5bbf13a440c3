#!/usr/bin/env bash
# make-deb.sh BUILD: a Debian package of pskv from the optimised build in BUILD
# (make all): the daemons, pskvctl, pskv-tune, the local launcher (in
# /usr/share/pskv), libpskv (shared and static), its header and
# pskv.pc, the Python package (/usr/lib/python3/dist-packages/pskv), the manual pages, the systemd unit templates (scripts/systemd) with
# example configurations, and the docs. Writes BUILD/deb/pskv_VERSION_ARCH.deb and
# prints its path. Dependencies come from dpkg-shlibdeps. Exit status 0, or 1 on
# failure (the reason on stderr).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
BUILD=$(cd "${1:-$top/build}" && pwd)
VERSION=0.1.0-1
ARCH=$(dpkg --print-architecture)
stage=$(mktemp -d /tmp/pskv-deb-XXXXXX)
trap 'rm -rf "$stage"' EXIT
root=$stage/root
cd "$top"
make -s BUILD="$BUILD" install DESTDIR="$root" PREFIX=/usr PYSITE=/usr/lib/python3/dist-packages > /dev/null
strip --strip-unneeded --remove-section=.comment --remove-section=.note \
  "$root"/usr/bin/* "$root"/usr/lib/libpskv.so.1
strip --strip-debug --remove-section=.comment "$root"/usr/lib/libpskv.a
gzip -9n "$root"/usr/share/man/man1/*.1
chmod 644 "$root"/usr/lib/libpskv.so.1 # policy 8.1: shared libraries are not executable
install -d "$root/lib/systemd/system" "$root/usr/share/doc/pskv/examples"
install -m 644 scripts/systemd/*.service "$root/lib/systemd/system/"
install -m 644 scripts/systemd/*.conf "$root/usr/share/doc/pskv/examples/"
install -m 644 README.md docs/architecture.md docs/operations.md docs/protocol.md docs/python.md \
  "$root/usr/share/doc/pskv/"
install -d "$root/usr/share/doc/pskv/reference"
install -m 644 docs/reference/*.md "$root/usr/share/doc/pskv/reference/"
cat > "$root/usr/share/doc/pskv/copyright" <<'COPY'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: pskv
Source: the pskv repository

Files: *
Copyright: 2026 the pskv developers
License: MIT
 Permission is hereby granted, free of charge, to any person obtaining a copy
 of this software and associated documentation files (the "Software"), to deal
 in the Software without restriction, including without limitation the rights
 to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
 copies of the Software, and to permit persons to whom the Software is
 furnished to do so, subject to the following conditions:
 .
 The above copyright notice and this permission notice shall be included in all
 copies or substantial portions of the Software.
 .
 THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
 IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
 FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
 AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
 LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
 OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
 SOFTWARE.
COPY
date_r=$(date -R -u -d "@${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")
printf 'pskv (%s) unstable; urgency=medium\n\n  * Package built from the pskv repository (make deb).\n\n -- pskv developers <pskv-devel@example.org>  %s\n' \
  "$VERSION" "$date_r" | gzip -9n > "$root/usr/share/doc/pskv/changelog.Debian.gz"
find "$root" -type d -exec chmod 755 {} +

# dependencies of the binaries and the library, as Debian's tools compute them
mkdir -p "$stage/debian"
printf 'Source: pskv\n\nPackage: pskv\nArchitecture: any\n' > "$stage/debian/control"
deps=$(cd "$stage" && dpkg-shlibdeps -O -e root/usr/bin/* -e root/usr/lib/libpskv.so.1 2>/dev/null |
       sed -n 's/^shlibs:Depends=//p')
[ -n "$deps" ] || { echo "make-deb: dpkg-shlibdeps found no dependencies" >&2; exit 1; }

install -d "$root/DEBIAN"
cat > "$root/DEBIAN/control" <<CTRL
Package: pskv
Version: $VERSION
Architecture: $ARCH
Maintainer: pskv developers <pskv-devel@example.org>
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $deps, adduser
Suggests: python3, python3-numpy, python3-torch
Section: science
Priority: optional
Description: parameter server for distributed machine-learning training
 pskv is a parameter server after "Scaling Distributed Machine Learning with
 the Parameter Server" (OSDI 2014): a scheduler, servers and workers talking
 over ZeroMQ, with chain replication, consistency models on vector clocks,
 checkpoints, elastic joins and CURVE authentication. This package holds the
 daemons, pskvctl, the libpskv library with its header and pkg-config file,
 the Python package pskv (numpy and PyTorch workers over libpskv, ctypes),
 manual pages and systemd unit templates.
CTRL
echo 'libpskv 1 pskv (>= 0.1.0)' > "$root/DEBIAN/shlibs"
echo 'activate-noawait ldconfig' > "$root/DEBIAN/triggers"
cat > "$root/DEBIAN/postinst" <<'POST'
#!/bin/sh
# The units run the daemons as the system user pskv, in /var/lib/pskv.
set -e
if [ "$1" = configure ]; then
    if ! getent passwd pskv > /dev/null; then
        adduser --system --group --home /var/lib/pskv --no-create-home --quiet pskv
    fi
fi
POST
chmod 755 "$root/DEBIAN/postinst"
chmod 644 "$root/DEBIAN/control" "$root/DEBIAN/shlibs" "$root/DEBIAN/triggers"
(cd "$root" && find . -path ./DEBIAN -prune -o -type f -printf '%P\0' | sort -z |
   xargs -0 md5sum > DEBIAN/md5sums)
chmod 644 "$root/DEBIAN/md5sums"
mkdir -p "$BUILD/deb"
out=$BUILD/deb/pskv_${VERSION}_$ARCH.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$out" > /dev/null
echo "$out"
