#!/usr/bin/env bash
# Installs, from Debian packages, everything pskv's build, tests and demo need.
# Idempotent: when every package is present it only checks (well under a second).
# Refreshes the package lists before installing (a fresh machine has stale or empty
# lists); uses sudo when not root. Extra package names may be given as arguments.
set -u

PKGS=(build-essential pkg-config libzmq3-dev libprotobuf-c-dev protobuf-c-compiler
      libopenblas-dev zlib1g-dev libmicrohttpd-dev liblz4-dev libzstd-dev check clang iproute2 procps psmisc
      curl prometheus
      dataset-fashion-mnist liblinear-tools openssh-server lintian systemd man-db
      slurm-wlm munge
      python3-numpy python3-pytest python3-torch "$@")

missing=()
for p in "${PKGS[@]}"; do
  st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)
  [ "$st" = "install ok installed" ] || missing+=("$p")
done

check_zmq() {
  local v
  v=$(pkg-config --modversion libzmq 2>/dev/null) || return 0
  if ! dpkg --compare-versions "$v" ge 4.3.4; then
    echo "install-deps: libzmq $v is installed but pskv needs >= 4.3.4" >&2
    return 1
  fi
}

if [ ${#missing[@]} -eq 0 ]; then
  check_zmq || exit 1
  exit 0
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    echo "install-deps: missing packages: ${missing[*]}" >&2
    echo "install-deps: not root and no sudo; install them as root with apt-get" >&2
    exit 1
  fi
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# openssh-server (for scripts/netns-cluster.sh, which runs one sshd per test
# namespace) must not start a host-wide sshd: while installing, a policy-rc.d
# that answers 101 ("action forbidden") keeps invoke-rc.d from starting any
# service. Only a policy-rc.d created here is removed again.
POLICY=/usr/sbin/policy-rc.d
if [ ! -e "$POLICY" ]; then
  if printf '#!/bin/sh\nexit 101\n' | "${SUDO[@]}" tee "$POLICY" >/dev/null &&
     "${SUDO[@]}" chmod +x "$POLICY"; then
    trap '"${SUDO[@]}" rm -f "$POLICY"' EXIT
  else
    echo "install-deps: could not create $POLICY; services may be started" >&2
  fi
fi
if ! "${SUDO[@]}" apt-get update -q >/tmp/pskv-apt-update.log 2>&1; then
  echo "install-deps: 'apt-get update' failed (see /tmp/pskv-apt-update.log); trying with the lists at hand" >&2
fi
if ! "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  echo "install-deps: could not install: ${missing[*]}" >&2
  echo "install-deps: check network access to the Debian mirrors and 'apt-get install' them by hand" >&2
  exit 1
fi
check_zmq || exit 1
echo "install-deps: done"
