#!/usr/bin/env bash
# A small "cluster" of test hosts on this one machine, made of Linux network
# namespaces, for pskv's multi-host tests (launcher over ssh, partitions).
#
#   scripts/netns-cluster.sh up N        make hosts h1..hN (1 <= N <= 8), each with its own sshd
#   scripts/netns-cluster.sh down        remove everything up made (always exits 0)
#   scripts/netns-cluster.sh exec H CMD  run CMD inside host H's namespace; CMD's exit status
#   scripts/netns-cluster.sh status      list the hosts and whether their sshd answers
#   scripts/netns-cluster.sh cut H       partition host H (its link goes down)
#   scripts/netns-cluster.sh heal H      undo cut H
#
# Layout: host hI is network namespace pskv-hI; its interface eth0 has
# 10.213.0.(10+I)/24 and is one end of a veth pair whose other end, pskv-vhI,
# is a port of the bridge pskvbr0 in the root namespace. The bridge has
# 10.213.0.1/24, so the root namespace (tests, launcher) reaches every host, and
# it is each host's default route (nothing is forwarded beyond it).
# Each host runs /usr/sbin/sshd listening only on its own address, port 22,
# accepting root with a key made for the test. Namespaces share the filesystem,
# so commands over ssh see /work/main/build/... at the same path.
#
# State dir ($PSKV_NETNS_DIR, default /tmp/pskv-netns):
#   hosts        one line per host: "h1 10.213.0.11"
#   ssh_config   so that `ssh -F <state>/ssh_config h1 CMD` works from the root namespace
#   id_ed25519   client key (its .pub is the authorized key)
#   sshd_config, ssh_host_ed25519_key, sshd-hI.pid, sshd-hI.log
#
# Needs root (ip netns). Without it, prints a note on stderr and exits 77
# ("skipped"); `down` then exits 0. Requires openssh-server
# (scripts/install-deps.sh installs it).
# Only one cluster exists at a time on a machine (the names are fixed); the
# commands that change it are serialised with a lock.
set -u

STATE=${PSKV_NETNS_DIR:-/tmp/pskv-netns}
BR=pskvbr0
NET=10.213.0
MAXN=8
LOCK=/tmp/pskv-netns-cluster.lock
SSHD=${PSKV_NETNS_SSHD:-/usr/sbin/sshd}   # override only to test the failure paths
WAIT_SSH=30          # seconds up waits for all sshds to answer (a loaded machine is slow)

ns_of()   { echo "pskv-$1"; }              # h3 -> pskv-h3
ip_of()   { echo "$NET.$((10 + ${1#h}))"; } # h3 -> 10.213.0.13
veth_of() { echo "pskv-v$1"; }             # h3 -> pskv-vh3 (root side)
peer_of() { echo "pskv-p$1"; }             # h3 -> pskv-ph3 (ns side, before rename to eth0)

say() { echo "netns-cluster: $*" >&2; }
die() { say "$*"; exit 1; }

usage() {
  cat >&2 <<'EOF'
usage: netns-cluster.sh up N | down | exec HOST CMD... | status | cut HOST | heal HOST
EOF
  exit 2
}

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "netns-cluster: needs root (ip netns); skipping" >&2
    exit "${1:-77}"
  fi
}

take_lock() {
  exec 9>>"$LOCK" || die "cannot open lock $LOCK"
  flock -w 120 9 || die "another netns-cluster up/down is still running (lock $LOCK)"
}

check_host() {
  [[ "$1" =~ ^h[1-9]$ ]] && [ "${1#h}" -le "$MAXN" ] || die "bad host '$1' (expected h1..h$MAXN)"
}

ns_exists() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$1"; }

# Hosts of the current cluster: from the state dir, else from the namespaces present.
hosts_present() {
  local i
  for i in $(seq 1 "$MAXN"); do
    if ns_exists "pskv-h$i" || [ -e "$STATE/sshd-h$i.pid" ]; then echo "h$i"; fi
  done
}

# The pid in a pid file, if that process is an sshd started with our config.
our_sshd_pid() {
  local f=$1 pid
  [ -r "$f" ] || return 1
  pid=$(tr -dc '0-9' <"$f")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$STATE/sshd_config" || return 1
  echo "$pid"
}

# ---------------------------------------------------------------- down
teardown() {
  local i h ns pids f pid n
  # 1. sshds from our pid files (also the ones whose namespace is already gone)
  for f in "$STATE"/sshd-h*.pid; do
    [ -e "$f" ] || continue
    pid=$(our_sshd_pid "$f") && kill -9 "$pid" 2>/dev/null
  done
  # 2. every process still inside our namespaces, then the namespaces
  for i in $(seq 1 "$MAXN"); do
    h=h$i; ns=$(ns_of "$h")
    if ns_exists "$ns"; then
      for n in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -z "$pids" ] && break
        echo "$pids" | xargs -r kill -9 2>/dev/null
        sleep 0.1
      done
      ip netns del "$ns" 2>/dev/null || say "could not delete namespace $ns"
    fi
    # 3. veth ends left in the root namespace (after a half-done up)
    ip link del "$(veth_of "$h")" 2>/dev/null
    ip link del "$(peer_of "$h")" 2>/dev/null
  done
  # 4. the bridge
  ip link del "$BR" 2>/dev/null
  # 5. the state dir: only the files we make, then the dir if empty
  if [ -d "$STATE" ]; then
    rm -f "$STATE"/hosts "$STATE"/ssh_config "$STATE"/sshd_config \
          "$STATE"/id_ed25519 "$STATE"/id_ed25519.pub \
          "$STATE"/ssh_host_ed25519_key "$STATE"/ssh_host_ed25519_key.pub \
          "$STATE"/authorized_keys "$STATE"/sshd-h*.pid "$STATE"/sshd-h*.log \
          "$STATE"/sshd-h*.out "$STATE"/.pskv-netns-cluster
    rmdir "$STATE" 2>/dev/null
  fi
  return 0
}

cmd_down() {
  need_root 0
  take_lock
  teardown
  return 0
}

# ---------------------------------------------------------------- up
write_configs() {
  local n=$1 i h
  umask 077
  mkdir -p "$STATE" || return 1
  chmod 755 "$STATE"    # hosts is for all to read; the keys and ssh_config stay 0600
  : >"$STATE/.pskv-netns-cluster"
  ssh-keygen -q -t ed25519 -N '' -C pskv-netns-host -f "$STATE/ssh_host_ed25519_key" </dev/null >/dev/null || return 1
  ssh-keygen -q -t ed25519 -N '' -C pskv-netns-client -f "$STATE/id_ed25519" </dev/null >/dev/null || return 1
  cp "$STATE/id_ed25519.pub" "$STATE/authorized_keys" || return 1
  chmod 600 "$STATE/authorized_keys"

  cat >"$STATE/sshd_config" <<EOF
# sshd for the pskv netns test cluster (scripts/netns-cluster.sh); one per namespace,
# ListenAddress and PidFile are given on the command line.
Port 22
HostKey $STATE/ssh_host_ed25519_key
AuthorizedKeysFile $STATE/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitEmptyPasswords no
UsePAM no
# the keys live under /tmp (world-writable parent), which StrictModes would refuse
StrictModes no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
AllowTcpForwarding yes
MaxStartups 200:30:400
MaxSessions 100
LoginGraceTime 30
LogLevel INFO
Subsystem sftp /usr/lib/openssh/sftp-server
EOF

  {
    echo "# pskv netns test cluster: ssh -F $STATE/ssh_config h1 CMD"
    for i in $(seq 1 "$n"); do
      h=h$i
      echo "Host $h"
      echo "  HostName $(ip_of "$h")"
    done
    echo "Host *"
    echo "  User root"
    echo "  Port 22"
    echo "  IdentityFile $STATE/id_ed25519"
    echo "  IdentitiesOnly yes"
    echo "  StrictHostKeyChecking no"
    echo "  UserKnownHostsFile /dev/null"
    echo "  GlobalKnownHostsFile /dev/null"
    echo "  LogLevel ERROR"
    echo "  BatchMode yes"
    echo "  ConnectTimeout 5"
    echo "  PasswordAuthentication no"
  } >"$STATE/ssh_config"

  for i in $(seq 1 "$n"); do echo "h$i $(ip_of "h$i")"; done >"$STATE/hosts"
  chmod 644 "$STATE/hosts"
  umask 022
}

# Network of host $1; returns non-zero (with a message) on failure.
make_host() {
  local h=$1 ns veth peer ip
  ns=$(ns_of "$h"); veth=$(veth_of "$h"); peer=$(peer_of "$h"); ip=$(ip_of "$h")
  ip netns add "$ns"                                         || { say "ip netns add $ns failed"; return 1; }
  ip link add "$veth" type veth peer name "$peer"            || { say "creating veth $veth failed"; return 1; }
  ip link set "$peer" netns "$ns"                            || { say "moving $peer into $ns failed"; return 1; }
  ip link set "$veth" master "$BR"                           || { say "adding $veth to $BR failed"; return 1; }
  ip link set "$veth" up                                     || return 1
  ip -n "$ns" link set lo up                                 || return 1
  ip -n "$ns" link set "$peer" name eth0                     || { say "renaming $peer to eth0 in $ns failed"; return 1; }
  ip -n "$ns" addr add "$ip/24" dev eth0                     || return 1
  ip -n "$ns" link set eth0 up                               || return 1
  ip -n "$ns" route add default via "$NET.1" dev eth0        || return 1
}

start_sshd() {
  local h=$1 ns ip
  ns=$(ns_of "$h"); ip=$(ip_of "$h")
  # 9>&- : the daemon must not inherit the lock; stdio away from the caller's pipes.
  ip netns exec "$ns" "$SSHD" -f "$STATE/sshd_config" \
      -o "ListenAddress=$ip" -o "PidFile=$STATE/sshd-$h.pid" \
      -E "$STATE/sshd-$h.log" \
      </dev/null >"$STATE/sshd-$h.out" 2>&1 9>&- ||
    { say "sshd in $ns failed to start:"; cat "$STATE/sshd-$h.out" "$STATE/sshd-$h.log" >&2 2>/dev/null; return 1; }
}

ssh_ok() { # host [timeout]
  timeout "${2:-6}" ssh -F "$STATE/ssh_config" -o ConnectTimeout="${2:-5}" "$1" true </dev/null >/dev/null 2>&1 9>&-
}

cmd_up() {
  local n=${1:-} i h t t0 deadline pending left out
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le "$MAXN" ] || { say "up: N must be 1..$MAXN"; usage; }
  need_root 77
  for t in ip ssh ssh-keygen flock timeout; do
    command -v "$t" >/dev/null 2>&1 || die "up: '$t' not found (run scripts/install-deps.sh)"
  done
  [ -x "$SSHD" ] || die "up: $SSHD not found: install openssh-server (scripts/install-deps.sh)"
  take_lock
  t0=${EPOCHREALTIME/,/.}

  # Idempotent-ish: whatever an earlier cluster left goes first.
  if [ -n "$(hosts_present)" ] || ip link show "$BR" >/dev/null 2>&1 || [ -d "$STATE" ]; then
    teardown
  fi

  fail() { say "up failed: $*; tearing down"; teardown; exit 1; }

  # Refuse a subnet somebody else's interface already routes.
  if ip -4 route show to "$NET.0/24" 2>/dev/null | grep -q . ||
     ip -4 addr show 2>/dev/null | grep -q "inet $NET\."; then
    die "up: $NET.0/24 is already in use on this machine (not by us); not touching it"
  fi

  write_configs "$n" || fail "could not write the state dir $STATE"
  [ -d /run/sshd ] || mkdir -m 755 /run/sshd || fail "could not create /run/sshd (sshd privilege separation dir)"

  ip link add "$BR" type bridge forward_delay 0 stp_state 0 2>/dev/null ||
    ip link add "$BR" type bridge || fail "could not create bridge $BR"
  ip addr add "$NET.1/24" dev "$BR" || fail "could not give $BR $NET.1/24"
  ip link set "$BR" up || fail "could not bring $BR up"

  for i in $(seq 1 "$n"); do make_host "h$i" || fail "network of h$i"; done
  out=$("$SSHD" -t -f "$STATE/sshd_config" -o "ListenAddress=127.0.0.1" 2>&1 9>&-) ||
    fail "sshd -t rejects $STATE/sshd_config: $out"
  for i in $(seq 1 "$n"); do start_sshd "h$i" || fail "sshd of h$i"; done

  # Wait until every sshd answers.
  deadline=$(( $(date +%s) + WAIT_SSH ))
  pending=$(seq 1 "$n")
  while :; do
    left=""
    declare -A probe=()
    for i in $pending; do ssh_ok "h$i" 8 & probe[$i]=$!; done   # in parallel
    for i in $pending; do wait "${probe[$i]}" || left="$left $i"; done
    unset probe
    pending=$left
    [ -z "$pending" ] && break
    if [ "$(date +%s)" -ge "$deadline" ]; then
      for i in $pending; do
        say "h$i: sshd does not answer on $(ip_of "h$i"):22; its log:"
        cat "$STATE/sshd-h$i.log" "$STATE/sshd-h$i.out" >&2 2>/dev/null
        timeout 6 ssh -F "$STATE/ssh_config" "h$i" true </dev/null 2>&1 9>&- | sed 's/^/  ssh: /' >&2
      done
      fail "sshd not answering on:$(for i in $pending; do printf ' h%s' "$i"; done) after ${WAIT_SSH}s"
    fi
    sleep 0.2
  done
  for i in $(seq 1 "$n"); do echo "h$i $(ip_of "h$i") up"; done
  say "up $n hosts in $(awk -v a="$t0" -v b="${EPOCHREALTIME/,/.}" 'BEGIN{printf "%.1f", b-a}')s; ssh -F $STATE/ssh_config hI CMD"
}

# ---------------------------------------------------------------- the others
cmd_exec() {
  [ $# -ge 2 ] || usage
  local h=$1; shift
  need_root 77
  check_host "$h"
  ns_exists "$(ns_of "$h")" || die "exec: no host $h (namespace $(ns_of "$h") does not exist; run up)"
  exec ip netns exec "$(ns_of "$h")" "$@"
}

cmd_status() {
  need_root 77
  local hs h ip st link rc=0
  hs=$(hosts_present)
  if [ -z "$hs" ]; then
    echo "no cluster (no namespaces pskv-h*)"
    ip link show "$BR" >/dev/null 2>&1 && echo "bridge $BR exists (leftover; run down)"
    return 1
  fi
  # probe all sshds at once so a partitioned cluster answers in ~2 s
  declare -A probe=()
  for h in $hs; do
    if ns_exists "$(ns_of "$h")"; then ssh_ok "$h" 2 & probe[$h]=$!; fi
  done
  for h in $hs; do
    ip=$(ip_of "$h")
    if [ -z "${probe[$h]:-}" ]; then
      st="down (no namespace)"; rc=1
    elif wait "${probe[$h]}"; then
      st=up
    else
      st="down (sshd not answering)"; rc=1
    fi
    link=$(ip -o link show "$(veth_of "$h")" 2>/dev/null)
    if [ -z "$link" ]; then
      st="$st, no link"
    elif ! echo "$link" | grep -q '[<,]UP[,>]'; then
      st="$st, cut"
    fi
    echo "$h $ip $st"
  done
  return $rc
}

cmd_cut_heal() { # cut|heal HOST
  local what=$1 h=${2:-}
  [ -n "$h" ] || usage
  need_root 77
  check_host "$h"
  local v; v=$(veth_of "$h")
  ip link show "$v" >/dev/null 2>&1 || die "$what: no host $h (no link $v)"
  if [ "$what" = cut ]; then
    ip link set "$v" down || die "cut: could not take $v down"
  else
    ip link set "$v" up || die "heal: could not bring $v up"
  fi
}

[ $# -ge 1 ] || usage
cmd=$1; shift
case "$cmd" in
  up)     [ $# -eq 1 ] || usage; cmd_up "$1" ;;
  down)   cmd_down ;;
  exec)   cmd_exec "$@" ;;
  status) cmd_status ;;
  cut)    [ $# -eq 1 ] || usage; cmd_cut_heal cut "$1" ;;
  heal)   [ $# -eq 1 ] || usage; cmd_cut_heal heal "$1" ;;
  -h|--help|help) usage ;;
  *)      usage ;;
esac
