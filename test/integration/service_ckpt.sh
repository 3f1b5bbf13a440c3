# Checkpoints and resume of a service and of its groups: a group's checkpoint of its
# namespace, a service resumed with every namespace, a group resumed on its own.

# svc_up PHASE [SCHEDULER FLAGS...]: a service of 2 servers on $TDIR/sched, s0, s1
# ($SVC its address; logs sched-PHASE.log, sN-PHASE.log).
svc_up() {
  local phase=$1 i
  shift
  mkdir -p "$TDIR/sched" "$TDIR/s0" "$TDIR/s1"
  SVC_PORT=$(free_port)
  SVC=127.0.0.1:$SVC_PORT
  start "sched-$phase" "$BIN/pskv-scheduler" --port "$SVC_PORT" --servers 2 --service \
    --data-dir "$TDIR/sched" "$@"
  for i in 0 1; do
    start "s$i-$phase" "$BIN/pskv-server" --scheduler "$SVC" --data-dir "$TDIR/s$i"
  done
  wait_line "$TDIR/sched-$phase.log" 'cluster complete' 1 60 || fail "service $phase did not start"
}

# svc_down PHASE: its workers stopped (SIGTERM), pskvctl shutdown, every daemon exits 0.
svc_down() {
  local f st
  for f in "$TDIR"/w-*.pid; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null; done
  for f in "$TDIR"/w-*.pid; do [ -f "$f" ] && wait_exit "$(cat "$f")" 20 > /dev/null; done
  "$BIN/pskvctl" --scheduler "$SVC" shutdown > "$TDIR/shutdown-$1.out" 2>&1 ||
    fail "pskvctl shutdown: $(cat "$TDIR/shutdown-$1.out")"
  for f in "sched-$1" "s0-$1" "s1-$1"; do
    wait_exit "$(cat "$TDIR/$f.pid")" 30
    st=$?
    [ "$st" = 0 ] || fail "$f exited $st after shutdown: $(tail -n 2 "$TDIR/$f.log")"
  done
}

# rc_group NAME SIZE TAG ROUNDS [FLAGS...]: SIZE resume-check workers of group NAME
# (logs w-TAG-R.log).
rc_group() {
  local name=$1 size=$2 tag=$3 rounds=$4 r
  shift 4
  for r in $(seq 0 $((size - 1))); do
    start "w-$tag-$r" "$BIN/pskv-worker" --scheduler "$SVC" --group "$name" --group-size "$size" \
      --rank "$r" --join-timeout 120 --app resume-check --rounds "$rounds" "$@"
  done
}

# rc_done TAG STEP: rank 0 of TAG's workers printed its digest after step STEP.
rc_done() {
  wait_line "$TDIR/w-$1-0.log" "^resume-check: after step $2 digest" 1 120 ||
    fail "w-$1 did not finish step $2: $(tail -n 2 "$TDIR/w-$1-0.log")"
}

# digest LOG WHAT: the digest resume-check printed after WHAT ("checkpoint N at step 4",
# "after step 4", "resumed").
digest() { sed -n "s/^resume-check: $2 digest \([0-9a-f]*\)$/\1/p" "$1" | tail -n 1; }

# The service outlives its groups, is checkpointed and resumed with two namespaces,
# and each namespace's values come back exactly: groups A (2 workers) and B (1) run
# resume-check side by side (4 and 6 rounds), each rank 0's pskv_checkpoint a checkpoint of its own
# group's namespace only (the manifest says of=ns:A with A's workers alone); then
# pskvctl checkpoint of every table, the service shut down, and a service started
# with --resume: A's and B's workers, started as before, resume at steps 4 and 6 with the
# digests their namespaces had, bit for bit. An unknown group's checkpoint is refused,
# and a group's resume a server cannot load fails its workers with the reason.
t_service_ckpt_resume() {
  svc_up fresh
  rc_group A 2 a0 4
  rc_group B 1 b0 6
  rc_done a0 4
  rc_done b0 6
  local na nb da db
  na=$(sed -n 's/^resume-check: checkpoint \([0-9]*\) at step 4 .*/\1/p' "$TDIR/w-a0-0.log")
  nb=$(sed -n 's/^resume-check: checkpoint \([0-9]*\) at step 6 .*/\1/p' "$TDIR/w-b0-0.log")
  grep -q "^ckpt seq=$na .* of=ns:A" "$TDIR/sched/manifest" ||
    fail "checkpoint $na is not A's namespace's: $(cat "$TDIR/sched/manifest")"
  grep "^ckpt seq=$na " "$TDIR/sched/manifest" | grep -q 'workers=[0-9]*:0:4:400:A,[0-9]*:0:4:400:A ' ||
    fail "checkpoint $na does not hold A's two workers alone: $(grep "^ckpt seq=$na " "$TDIR/sched/manifest")"
  grep -q "^ckpt seq=$nb .* of=ns:B" "$TDIR/sched/manifest" || fail "checkpoint $nb is not B's"
  grep -q "checkpoint $na started: of group A, namespace 'A' only" "$TDIR/sched-fresh.log" ||
    fail "the scheduler did not say checkpoint $na was A's"
  "$BIN/pskvctl" --scheduler "$SVC" checkpoint --group nope > nope.out 2>&1 &&
    fail "a checkpoint of an unknown group was taken"
  grep -q 'group nope: no such group' nope.out || fail "unknown group: $(cat nope.out)"
  "$BIN/pskvctl" --scheduler "$SVC" checkpoint > all.out 2>&1 || fail "pskvctl checkpoint: $(cat all.out)"
  grep -q '^checkpoint [0-9]* complete$' all.out || fail "pskvctl checkpoint said: $(cat all.out)"
  da=$(digest "$TDIR/w-a0-0.log" 'after step 4')
  db=$(digest "$TDIR/w-b0-0.log" 'after step 6')
  svc_down fresh
  svc_up resumed --resume
  grep -q 'resuming job [0-9]* from checkpoint' "$TDIR/sched-resumed.log" ||
    fail "the service did not resume: $(tail -n 3 "$TDIR/sched-resumed.log")"
  rc_group A 2 a1 4
  rc_group B 1 b1 6
  rc_done a1 4
  rc_done b1 6
  grep -q 'rank 0 resumed at step 4 ' "$TDIR/w-a1-0.log" || fail "A did not resume at step 4"
  grep -q 'rank 1 resumed at step 4 ' "$TDIR/w-a1-1.log" || fail "A's rank 1 did not resume at step 4"
  grep -q 'rank 0 resumed at step 6 ' "$TDIR/w-b1-0.log" || fail "B did not resume at step 6"
  [ "$(digest "$TDIR/w-a1-0.log" resumed)" = "$da" ] || fail "namespace A came back as $(digest "$TDIR/w-a1-0.log" resumed), not $da"
  [ "$(digest "$TDIR/w-b1-0.log" resumed)" = "$db" ] || fail "namespace B came back as $(digest "$TDIR/w-b1-0.log" resumed), not $db"
  # a group's resume a server cannot load (its files of the checkpoint gone): A's
  # worker exits 1 naming the server and why (the resumed A ended after its step)
  wait_line "$TDIR/sched-resumed.log" 'group A ended' 1 60 || fail "the resumed group A did not end"
  mkdir -p "$TDIR/away"
  mv "$TDIR"/s0/ckpt-*.pskv "$TDIR/away/"
  "$BIN/pskv-worker" --scheduler "$SVC" --group A --group-size 1 --resume --app resume-check \
    --join-timeout 60 > nofile.log 2>&1 && fail "A resumed without server 0's files"
  grep -q "group A: the resume of namespace 'A' from checkpoint [0-9]* failed: server node [0-9]*: .*has no file of checkpoint" nofile.log ||
    fail "a failed resume: $(tail -n 1 nofile.log)"
  mv "$TDIR"/away/ckpt-*.pskv "$TDIR/s0/"
  svc_down resumed
  no_strays "$TDIR"
}

# stop_group TAG SIZE NAME SCHEDLOG: SIGTERM to the group's workers, and the scheduler
# says group NAME ended (the Nth time: its count of ended lines + 1).
stop_group() {
  local r n
  n=$(grep -c "group $3 ended" "$TDIR/$4")
  for r in $(seq 0 $(($2 - 1))); do kill -TERM "$(cat "$TDIR/w-$1-$r.pid")" 2>/dev/null; done
  for r in $(seq 0 $(($2 - 1))); do wait_exit "$(cat "$TDIR/w-$1-$r.pid")" 20 > /dev/null; done
  wait_line "$TDIR/$4" "group $3 ended" $((n + 1)) 20 || fail "group $3 did not end"
}

# A group resumed on its own while another runs (pskv-worker --resume): groups A (4
# steps) and B (6) run, a checkpoint of every table W follows, A's workers are stopped
# and B's values change (B's workers stopped, a fresh B run on them again). A new A
# started with --resume gets A's tables back from W (the digest A ended with) and its
# ranks their progress, while B's second run waits beside it; B's values are not
# touched (a checkpoint of group B taken after A's resume, of B's namespace only, and
# a B started with --resume from it give the digest B's second run ended with).
# Refused, naming the group and the field: --resume of a namespace no checkpoint
# holds, of a group that runs.
t_service_group_resume() {
  svc_up g
  rc_group A 2 a0 4
  rc_group B 1 b0 6
  rc_done a0 4
  rc_done b0 6
  local daft dbaft w
  daft=$(digest "$TDIR/w-a0-0.log" 'after step 4')
  # the manifest's namespaces come from the servers' checkpoint replies (what each
  # snapshot held), not their heartbeats, which lag a table just made by ~100 ms
  "$BIN/pskvctl" --scheduler "$SVC" checkpoint > w.out 2>&1 || fail "pskvctl checkpoint: $(cat w.out)"
  w=$(sed -n 's/^checkpoint \([0-9]*\) complete$/\1/p' w.out)
  grep "^ckpt seq=$w " "$TDIR/sched/manifest" | grep -q ' namespaces=[AB],[AB]' ||
    fail "checkpoint $w does not list namespaces A and B: $(grep "^ckpt seq=$w " "$TDIR/sched/manifest")"
  stop_group a0 2 A sched-g.log
  "$BIN/pskv-worker" --scheduler "$SVC" --group Z --group-size 1 --resume --app resume-check \
    --connect-timeout 10 > z.log 2>&1 && fail "a group resumed a namespace no checkpoint holds"
  grep -q "refused registration: group Z: field resume: no complete checkpoint in .* holds namespace 'Z'" z.log ||
    fail "resume of Z: $(tail -n 1 z.log)"
  "$BIN/pskv-worker" --scheduler "$SVC" --group B --group-size 1 --resume --app resume-check \
    --connect-timeout 10 > brun.log 2>&1 && fail "a worker resumed a running group"
  grep -q "group B: field resume: the group runs already" brun.log || fail "resume of B: $(tail -n 1 brun.log)"
  stop_group b0 1 B sched-g.log
  rc_group B 1 b1 6 # B's values change after W
  rc_done b1 6
  dbaft=$(digest "$TDIR/w-b1-0.log" 'after step 6')
  rc_group A 2 a1 4 --resume
  rc_done a1 4
  grep -q 'rank 0 resumed at step 4 ' "$TDIR/w-a1-0.log" || fail "A's rank 0 did not resume at step 4"
  grep -q 'rank 1 resumed at step 4 ' "$TDIR/w-a1-1.log" || fail "A's rank 1 did not resume at step 4"
  [ "$(digest "$TDIR/w-a1-0.log" resumed)" = "$daft" ] ||
    fail "A came back as $(digest "$TDIR/w-a1-0.log" resumed), not checkpoint $w's $daft"
  grep -q "group A: namespace 'A' resumed from checkpoint $w" "$TDIR/sched-g.log" ||
    fail "the scheduler did not say A resumed from checkpoint $w"
  grep -q "namespace 'A' resumed from checkpoint $w" "$TDIR/s0-g.log" || fail "server 0 did not say it loaded A"
  "$BIN/pskvctl" --scheduler "$SVC" checkpoint --group B > ckb.out 2>&1 || fail "checkpoint of B: $(cat ckb.out)"
  grep -q '^checkpoint [0-9]* of group B complete$' ckb.out || fail "checkpoint of B said: $(cat ckb.out)"
  stop_group b1 1 B sched-g.log
  rc_group B 1 b2 6 --resume
  wait_line "$TDIR/w-b2-0.log" '^resume-check: resumed digest' 1 120 ||
    fail "resumed group B did not start: $(tail -n 2 "$TDIR/w-b2-0.log")"
  grep -q 'rank 0 resumed at step 6 ' "$TDIR/w-b2-0.log" || fail "B did not resume at step 6"
  [ "$(digest "$TDIR/w-b2-0.log" resumed)" = "$dbaft" ] ||
    fail "B's values changed under A's resume: $(digest "$TDIR/w-b2-0.log" resumed), not $dbaft"
  svc_down g
  no_strays "$TDIR"
}
