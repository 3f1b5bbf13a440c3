# shellcheck shell=bash
# free-port.sh - free_port, for the test scripts that start daemons on loopback.
# Sourced, never run:   . "$top/scripts/free-port.sh"

# free_port: prints a TCP port no one listens on, below the kernel's ephemeral range
# (where port-0 listeners land), from 20000 up.
free_port() {
  local p lo=32768 hi=60999
  read -r lo hi < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
  while :; do
    p=$((20000 + RANDOM % (lo > 21000 ? lo - 20000 : 1000)))
    ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return; }
  done
}
