# shellcheck shell=bash disable=SC2154,SC2034  # variables shared with launch-hosts.sh
# launch-hostfile.sh - launch-hosts.sh's host file: reads it, checks it, and finds every
# host's address and ports. Sourced by launch-hosts.sh once its options are parsed, never
# run. The format is in launch-hosts.sh's header.
#
# Reads: hostfile, SSH, ssh_opts, and msg/die/bounded from the sourcing script.
# Sets, per host line h: h_line (line number), h_dest, h_sched (0/1), h_servers,
# h_workers, h_adv (the address the other hosts dial), h_port (port=, empty when not
# given); sched_h (the scheduler's line), S and W (the totals), sched_adv, sched_port and
# sched_addr (ADDR:PORT the others dial). Mistakes: "launch-hosts: FILE:LINE: reason",
# exit 2.

# ---------------------------------------------------------------- host file
# Per host line h: h_line (line number), h_dest, h_sched (0/1), h_servers, h_workers,
# h_adv (advertise=, empty when not given), h_port (port=, empty when not given).
h_line=()
h_dest=()
h_sched=()
h_servers=()
h_workers=()
h_adv=()
h_port=()
sched_h=-1

hf_die() {
  msg "$hostfile:$1: $2"
  exit 2
}

if [[ -d $hostfile ]]; then
  die "cannot read host file '$hostfile': it is a directory"
fi
[[ -r $hostfile ]] || die "cannot read host file '$hostfile'"
exec 4<"$hostfile" || die "cannot read host file '$hostfile'"

lineno=0
while IFS= read -r line <&4 || [[ -n $line ]]; do
  lineno=$((lineno + 1))
  line=${line%%#*}
  line=${line//$'\r'/ }
  read -r -a words <<<"$line"
  ((${#words[@]} > 0)) || continue

  dest=${words[0]}
  if [[ $dest == *=* || $dest == -* ]]; then
    hf_die "$lineno" "a line must start with the host (ssh destination), got '$dest'"
  fi
  is_sched=0
  n_servers=
  n_workers=
  adv=
  has_adv=0
  hport=
  for w in "${words[@]:1}"; do
    case $w in
      scheduler)
        ((is_sched == 0)) || hf_die "$lineno" "'scheduler' given twice on this line"
        if ((sched_h >= 0)); then
          hf_die "$lineno" "duplicate 'scheduler' (already on line ${h_line[sched_h]})"
        fi
        is_sched=1
        ;;
      scheduler=*)
        hf_die "$lineno" "'scheduler' takes no value, got '$w'"
        ;;
      servers=* | workers=*)
        key=${w%%=*}
        val=${w#*=}
        if [[ $key == servers && -n $n_servers ]] || [[ $key == workers && -n $n_workers ]]; then
          hf_die "$lineno" "'$key=' given twice on this line"
        fi
        [[ $val =~ ^[0-9]{1,6}$ ]] ||
          hf_die "$lineno" "bad number in '$w' (want an integer >= 0)"
        if [[ $key == servers ]]; then
          n_servers=$((10#$val))
        else
          n_workers=$((10#$val))
        fi
        ;;
      advertise=*)
        ((has_adv == 0)) || hf_die "$lineno" "'advertise=' given twice on this line"
        has_adv=1
        adv=${w#*=}
        [[ -n $adv ]] || hf_die "$lineno" "'advertise=' needs an address"
        ;;
      port=*)
        [[ -z $hport ]] || hf_die "$lineno" "'port=' given twice on this line"
        val=${w#*=}
        if ! [[ $val =~ ^[0-9]{1,5}$ ]] || ((10#$val < 1 || 10#$val > 65535)); then
          hf_die "$lineno" "bad port in '$w' (want an integer in 1..65535)"
        fi
        hport=$((10#$val))
        ;;
      *=*)
        hf_die "$lineno" "unknown key '${w%%=*}' (known: servers=, workers=, advertise=, port=)"
        ;;
      *)
        hf_die "$lineno" "unknown word '$w' (expected scheduler, servers=N, workers=N, advertise=ADDR or port=P)"
        ;;
    esac
  done
  n_servers=${n_servers:-0}
  n_workers=${n_workers:-0}
  if [[ -n $hport ]]; then
    last=$((hport + is_sched + n_servers - 1))
    ((last <= 65535)) ||
      hf_die "$lineno" "port=$hport leaves no room for $((is_sched + n_servers)) ports (last would be $last)"
  fi
  h=${#h_dest[@]}
  h_line+=("$lineno")
  h_dest+=("$dest")
  h_sched+=("$is_sched")
  h_servers+=("$n_servers")
  h_workers+=("$n_workers")
  h_adv+=("$adv")
  h_port+=("$hport")
  ((is_sched)) && sched_h=$h
done
exec 4<&-

endline=$((lineno > 0 ? lineno : 1))
((sched_h >= 0)) || hf_die "$endline" "no line has 'scheduler'"
S=0
W=0
for h in "${!h_dest[@]}"; do
  S=$((S + h_servers[h]))
  W=$((W + h_workers[h]))
done
((S >= 1)) || hf_die "$endline" "no servers (the servers= add up to 0; need at least 1)"
((W >= 1)) || hf_die "$endline" "no workers (the workers= add up to 0; need at least 1)"


# ---------------------------------------------------------------- addresses
is_ipv4() { [[ $1 =~ ^[0-9]{1,3}(\.[0-9]{1,3}){3}$ ]]; }
is_ipv6() { [[ $1 == *:* && $1 =~ ^[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?$ ]]; }

# getent_addr NAME: sets REPLY to the address NAME resolves to here (IPv4 preferred:
# the daemons dial IPv4).
getent_addr() {
  local out a v4
  out=$(getent hosts "$1" 2>/dev/null) || return 1
  a=${out%%[[:space:]]*}
  [[ -n $a ]] || return 1
  if [[ $a == *:* ]]; then
    v4=$(getent ahostsv4 "$1" 2>/dev/null) && v4=${v4%%[[:space:]]*} && [[ -n $v4 ]] && a=$v4
  fi
  REPLY=$a
}

# dest_host DEST: sets REPLY to the host name part of an ssh destination.
dest_host() {
  local d=$1
  if [[ $d == ssh://* ]]; then
    d=${d#ssh://}
    d=${d%%/*}
    d=${d##*@}
    if [[ $d == \[* ]]; then
      d=${d%%\]*}
    else
      d=${d%%:*}
    fi
  else
    d=${d##*@}
  fi
  d=${d#\[}
  d=${d%\]}
  REPLY=$d
}

# resolve_dest DEST: sets REPLY to the address the other hosts should dial for DEST.
resolve_dest() {
  local dest=$1 host out k v rest name=
  dest_host "$dest"
  host=$REPLY
  if is_ipv4 "$host" || is_ipv6 "$host"; then
    REPLY=$host
    return 0
  fi
  getent_addr "$host" && return 0
  # The ssh config may alias the name (Host h1 / HostName 10.0.0.11): ask ssh.
  out=$(bounded 10 "$SSH" "${ssh_opts[@]}" -G "$dest" </dev/null 2>/dev/null) || out=
  while read -r k v rest; do
    if [[ ${k,,} == hostname ]]; then
      name=$v
      break
    fi
  done <<<"$out"
  [[ -n $name ]] || return 1
  if is_ipv4 "$name" || is_ipv6 "$name"; then
    REPLY=$name
    return 0
  fi
  [[ $name != "$host" ]] && getent_addr "$name" && return 0
  return 1
}

declare -A port_owner=()
# claim_port H PORT: PORT on host line H's address; error when another line has it too.
claim_port() {
  local key="${h_adv[$1]} $2"
  if [[ -n ${port_owner[$key]:-} ]]; then
    hf_die "${h_line[$1]}" "port $2 on ${h_adv[$1]} is also used on line ${port_owner[$key]}"
  fi
  port_owner[$key]=${h_line[$1]}
}

for h in "${!h_dest[@]}"; do
  if ((h_sched[h] == 0 && h_servers[h] == 0 && h_workers[h] == 0)); then
    msg "warning: $hostfile:${h_line[h]}: host ${h_dest[h]} runs nothing"
    continue
  fi
  if [[ -z ${h_adv[h]} ]]; then
    resolve_dest "${h_dest[h]}" ||
      hf_die "${h_line[h]}" "cannot find the address of '${h_dest[h]}' (getent hosts, ssh -G); add advertise=ADDR"
    h_adv[h]=$REPLY
  fi
  if [[ -n ${h_port[h]} ]] && ((h_sched[h] == 0 && h_servers[h] == 0)); then
    msg "warning: $hostfile:${h_line[h]}: port= is not used (no scheduler or server on this line)"
  fi
done

sched_adv=${h_adv[sched_h]}
sched_port=${h_port[sched_h]:-7700}
claim_port "$sched_h" "$sched_port"
for h in "${!h_dest[@]}"; do
  [[ -n ${h_port[h]} ]] || continue
  for ((k = 0; k < h_servers[h]; k++)); do
    claim_port "$h" $((h_port[h] + h_sched[h] + k))
  done
done
if [[ $sched_adv == *:* ]]; then
  sched_addr="[$sched_adv]:$sched_port"
else
  sched_addr="$sched_adv:$sched_port"
fi
