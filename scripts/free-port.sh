# shellcheck shell=bash
# free-port.sh - free_port, for the test scripts that start daemons on loopback.
# Sourced, never run:   . "$top/scripts/free-port.sh"

# free_port: prints a TCP port no one listens on, below the kernel's ephemeral range
# (where port-0 listeners land), from 20000 up. Under test/lib.sh's -j N each running
# test has a slot (PSKV_PORT_SLOT of PSKV_PORT_SLOTS) and picks only in its share of
# the range, so that two tests never pick the same port before either binds it.
free_port() {
  local p lo=32768 hi=60999 base=20000 span
  read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  span=$((lo > 21000 ? lo - 20000 : 1000))
  if [ "${PSKV_PORT_SLOTS:-1}" -gt 1 ]; then
    span=$((span / PSKV_PORT_SLOTS)); base=$((base + ${PSKV_PORT_SLOT:-0} * span))
  fi
  while :; do
    p=$((base + RANDOM % span))
    ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return; }
  done
}
