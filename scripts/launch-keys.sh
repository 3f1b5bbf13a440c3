# shellcheck shell=bash disable=SC2154,SC2034  # variables shared with launch-hosts.sh
# launch-keys.sh - launch-hosts.sh's keys: which keyset (a new one for the job, --keys
# DIR, or none with --insecure), each daemon's security options, the copies of its
# daemons' keys to each host and the clean-up here. Sourced by launch-hosts.sh once the
# host file is read, never run; what it does for the user is in launch-hosts.sh's header.
#
# Reads: insecure, keys_dir, S, W, bin_dir, runid; calls spawn_aux, reap_aux, kill_aux,
# any_aux_alive (launch-hosts.sh) and check_keyset, make_keyset (launch-lib.sh).
# Sets: key_mode (new, given or off), keyset (the local keyset), local_ctl (the pskvctl
# that makes it), remote_keys (the per-run directory on every host), key_tmp (the private
# directory here, once made), keys_sent_to[DEST] (1 once a copy to DEST started).

# key_mode: new (a keyset made here for this job, the default), given (--keys DIR) or
# off (--insecure). keyset: the local keyset the hosts get their keys from; local_ctl: the
# pskvctl that makes it (here, not on the hosts).
if ((insecure)); then
  key_mode=off
elif [[ -n $keys_dir ]]; then
  key_mode=given
  [[ $keys_dir == /* ]] || keys_dir=$PWD/$keys_dir
  check_keyset "$keys_dir" "$S" "$W"
  keyset=$keys_dir
else
  key_mode=new
  if [[ -x $bin_dir/pskvctl ]]; then
    local_ctl=$bin_dir/pskvctl
  else
    local_ctl=$(command -v pskvctl) ||
      die "no pskvctl here to make the job's keys (looked for $bin_dir/pskvctl and on PATH): build pskv here, or make a keyset with 'pskvctl keys init DIR --servers $S --workers $W' and pass --keys DIR (or run without keys: --insecure)"
  fi
fi

# each host's copy of its daemons' keys: remote_keys/NAME
remote_keys=/tmp/pskv-keys-$runid

# key_args NAME ROLE: sets the array kargs to daemon NAME's security options: --keys with
# its directory on its host; or --insecure (which also makes the daemons listen on every
# interface by default).
key_args() {
  if [[ $key_mode == off ]]; then
    kargs=(--insecure)
  else
    kargs=(--keys "$remote_keys/$1")
  fi
}

# copy_script NAME...: sets REPLY to the sh script that, on a host, unpacks the tar on its
# stdin (those daemons' key directories) into remote_keys: made 0700 (or, when another
# host sharing /tmp made it a moment ago, a directory of ours and not a link); each NAME/
# 0700, NAME/node.key 0600.
copy_script() {
  local n keyfiles=
  for n in "$@"; do keyfiles+=" $n/node.key"; done
  shq "$remote_keys"
  REPLY="umask 077; d=$REPLY; if ! mkdir -m 700 \"\$d\" 2>/dev/null; then if [ -h \"\$d\" ] || [ ! -d \"\$d\" ] || [ ! -O \"\$d\" ]; then echo \"$PROG: \$d exists and is not a directory of ours: no keys copied\" >&2; exit 1; fi; fi; cd \"\$d\" && tar -xof - && chmod 700 $* && chmod 600$keyfiles"
}

key_tmp=
declare -A keys_sent_to=()

# remove_local_keys: removes the link LOGDIR/keys and the private directory here (the
# keyset made for this job, the tar files sent); never a --keys DIR.
remove_local_keys() {
  [[ -L $log_dir/keys ]] && rm -f -- "$log_dir/keys"
  [[ -n $key_tmp ]] && rm -rf -- "$key_tmp"
  key_tmp=
}

# send_keys: makes the job's keyset here (unless --keys), links it as LOGDIR/keys, then
# sends every host the key directories of its daemons: one ssh per host, in parallel, a
# tar on its stdin, for up to 30 s. Returns 1 when a copy failed or did not finish, or a
# signal came.
send_keys() {
  local dest j n limit tarf
  key_tmp=$(mktemp -d /tmp/pskv-keys-local-XXXXXX) || die "mktemp -d failed"
  if [[ $key_mode == new ]]; then
    keyset=$key_tmp/set
    make_keyset "$local_ctl" "$keyset" "$S" "$W"
    msg "keys: a new keyset for this job in $keyset; on each host its daemons' keys go to $remote_keys; all removed at exit"
  else
    msg "keys: from $keyset; on each host its daemons' keys go to $remote_keys, removed at exit"
  fi
  if [[ -e $log_dir/keys && ! -L $log_dir/keys ]]; then
    die "$log_dir/keys exists and is not a link left by an earlier run: choose another --log-dir"
  fi
  ln -sfn -- "$keyset" "$log_dir/keys" || die "cannot make the link $log_dir/keys"
  [[ -d $keyset/control ]] &&
    msg "status: pskvctl --scheduler $sched_addr --keys $log_dir/keys/control status (while it runs)"
  for j in "${!dests[@]}"; do
    [[ -n $got_signal ]] && break
    dest=${dests[j]}
    tarf=$key_tmp/host-$j.tar
    # shellcheck disable=SC2086  # names are single words
    (umask 077 && tar -C "$keyset" -chf "$tarf" ${dest_names[$dest]}) 2>&3 ||
      die "cannot pack the keys for $dest from $keyset"
    # shellcheck disable=SC2086
    copy_script ${dest_names[$dest]}
    keys_sent_to[$dest]=1
    spawn_aux "$dest" "copy the keys to $remote_keys" "$REPLY" "$log_dir/hosts.log" "$tarf"
  done
  limit=$((timeout_s < 30 ? timeout_s : 30))
  for ((n = 0; n < limit * 10; n++)); do
    reap_aux
    any_aux_alive || break
    [[ -n $got_signal ]] && break
    nap 0.1
  done
  if any_aux_alive && [[ -z $got_signal ]] && ((timeout_s <= 30)); then
    timed_out=1
    msg "timed out after $timeout_s s"
  fi
  kill_aux
  [[ -n $got_signal ]] && return 1
  for j in "${!k_st[@]}"; do
    [[ ${k_st[j]} == 0 ]] || return 1
  done
  return 0
}
