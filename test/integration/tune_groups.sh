# pskv-tune's trials as worker groups of one service (sourced by integration.sh):
# four trials at once as four groups on one server group, the tuner's own service
# stopped with it (also on SIGTERM, the running trials then run again), and a
# running service named by --scheduler, which the study leaves running.

# The tuner's own service's address, from its log line.
tune_service_addr() { sed -n 's/.*service started at \([0-9.:]*\) .*/\1/p' "$1" | tail -n 1; }

# --parallel 4: `pskvctl status` of the tuner's one service shows four groups
# SID-trial-N running at once beside one server; SIGTERM to the tuner then stops them
# and the service (exit 1 saying so, every process of the service gone, the four
# trials pending); `run` again starts a new service, runs them again and finishes
# the study (4 complete, each 2 attempts), every process gone.
tags tune_groups_parallel
t_tune_groups_parallel() {
  printf -- '--lr log 1e-3 0.1\n--momentum uniform 0.5 0.95\n' > space.txt
  "$BIN/pskv-tune" create s.db --space space.txt --algo random --max-trials 4 --parallel 4 \
    --trial-epochs 6 -- --app synth --synth-epoch-time 1 > /dev/null || fail create
  start tuner "$BIN/pskv-tune" run s.db
  local pid svc n=0 out
  pid=$(cat tuner.pid)
  wait_line tuner.log 'service started at' 1 60 || fail "no service: $(tail -3 tuner.log)"
  svc=$(tune_service_addr tuner.log)
  [ -n "$svc" ] || fail "no address: $(grep service tuner.log)"
  for _ in $(seq 600); do # 60 s
    out=$("$BIN/pskvctl" --scheduler "$svc" status 2>&1)
    n=$(grep -c '^group [0-9a-f]\{8\}-trial-[1-4] *running *1/1 workers' <<< "$out")
    [ "$n" = 4 ] && break
    kill -0 "$pid" 2>/dev/null || fail "the tuner ended before 4 groups ran: $(tail -3 tuner.log)"
    sleep 0.1
  done
  [ "$n" = 4 ] || fail "never 4 groups running at once: $out"
  grep -q '^service: ' <<< "$out" || fail "not a service: $out"
  grep -q '^job [0-9]* .* servers 1/1 ' <<< "$out" || fail "not one server group of 1: $out"
  echo "$out" | grep '^group '
  kill -TERM "$pid"
  wait_exit "$pid" 60
  [ $? = 1 ] || fail "the tuner after SIGTERM: $(tail -3 tuner.log)"
  grep -q 'its running trials were stopped and its service shut down' tuner.log ||
    fail "$(tail -2 tuner.log)"
  no_strays s.db.d/service/logs
  for p in s.db.d/trial-*; do no_strays "$p/logs"; [ -e "$p/lock" ] && flock -n "$p/lock" true ||
    fail "$p's worker still holds its lock"; done
  "$BIN/pskv-tune" status s.db | grep -q '^4 trials: 4 pending' || fail "$("$BIN/pskv-tune" status s.db)"
  timeout 120 "$BIN/pskv-tune" run s.db > run2.out 2>&1 || fail "second run: $(tail -3 run2.out)"
  "$BIN/pskv-tune" export s.db --csv > s.csv
  [ "$(awk -F, 'NR > 1 && $2 == "complete" && $7 == 2' s.csv | wc -l)" = 4 ] ||
    fail "not 4 complete at attempt 2: $(cat s.csv)"
  [ "$(tune_service_addr run2.out)" != "$svc" ] || fail "the second run reused a stopped service"
  no_strays s.db.d/service/logs
  for p in s.db.d/trial-*; do no_strays "$p/logs"; done
}

# run --scheduler ADDR: the trials are groups of that service (each dropped its
# namespace), a stopped one ends through the group stop (`stopped early ... group
# SID-trial-N stopped by pskvctl stop`), and the study leaves the service running:
# pskvctl shutdown ends it. A second study run on the same service at the same time
# (t.db) names its groups by its own study id: both studies finish, every trial of
# each started once under its own name. A study created with --workers 2 runs each
# trial as a group of 2. A --scheduler that answers nothing is refused (exit 2).
tags tune_groups_external
t_tune_groups_external() {
  local port svc out
  port=$(free_port)
  svc=127.0.0.1:$port
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --service
  start server-0 "$BIN/pskv-server" --scheduler "$svc"
  wait_line scheduler.log 'cluster complete' 1 60 || fail "the service did not start"
  printf -- '--lr log 1e-4 0.3\n--momentum uniform 0 0.99\n' > space.txt
  local sa sb
  sb=$("$BIN/pskv-tune" create s.db --space space.txt --algo random --sched asha:eta=3,min=1,max=9 \
    --max-trials 6 --parallel 2 --seed 5 -- --app synth --synth-epoch-time 0.1) || fail create
  sb=$(sed -n 's/^created s.db (study \([0-9a-f]*\)).*/\1/p' <<< "$sb")
  sa=$("$BIN/pskv-tune" create t.db --space space.txt --algo random --max-trials 3 --parallel 2 \
    --trial-epochs 4 -- --app synth --synth-epoch-time 0.1) || fail "create t.db"
  sa=$(sed -n 's/^created t.db (study \([0-9a-f]*\)).*/\1/p' <<< "$sa")
  [ -n "$sa" ] && [ -n "$sb" ] && [ "$sa" != "$sb" ] || fail "study ids '$sa' '$sb'"
  start tuner-t "$BIN/pskv-tune" run t.db --scheduler "$svc"
  timeout 120 "$BIN/pskv-tune" run s.db --scheduler "$svc" > run.out 2>&1 ||
    fail "run: $(tail -3 run.out)"
  wait_exit "$(cat tuner-t.pid)" 60 || fail "t.db beside s.db: $(tail -3 tuner-t.log)"
  "$BIN/pskv-tune" status t.db | grep -q '^3 trials: 3 complete' || fail "$("$BIN/pskv-tune" status t.db)"
  grep -q 'service started' run.out && fail "started a service of its own: $(cat run.out)"
  [ ! -e s.db.d/service ] || fail "a service directory with --scheduler"
  [ "$(grep -c "group $sb-trial-[1-6]: started: 1 workers" scheduler.log)" = 6 ] ||
    fail "$(grep 'group .*trial' scheduler.log)"
  [ "$(grep -c "group $sa-trial-[1-3]: started: 1 workers" scheduler.log)" = 3 ] ||
    fail "$(grep 'group .*trial' scheduler.log)"
  [ "$(grep -c "namespace '$sb-trial-[1-6]' dropped (group $sb-trial-[1-6] ended with --drop-namespace)" \
    scheduler.log)" = 6 ] || fail "namespaces: $(grep namespace scheduler.log)"
  out=$(grep -l "stopped early at epoch [0-9]*: group $sb-trial-[0-9]* stopped by pskvctl stop" \
    s.db.d/trial-*/logs/worker-0.log) || fail "no trial stopped through its group: $(cat run.out)"
  "$BIN/pskv-tune" export s.db --csv | grep -q ',stopped,' || fail "no stopped trial"
  kill -0 "$(cat scheduler.pid)" || fail "the study stopped the service it did not start"
  # --workers 2: a trial is a group of 2 (ranks 0 and 1, each its own log)
  "$BIN/pskv-tune" create w.db --space space.txt --max-trials 1 --trial-epochs 3 --workers 2 \
    -- --app synth --synth-epoch-time 0.5 > /dev/null || fail "create w.db"
  start tuner-w "$BIN/pskv-tune" run w.db --scheduler "$svc"
  for _ in $(seq 300); do
    out=$("$BIN/pskvctl" --scheduler "$svc" status 2>&1)
    grep -q '^group [0-9a-f]*-trial-1 *running *2/2 workers' <<< "$out" && break
    sleep 0.1
  done
  grep -q '^group [0-9a-f]*-trial-1 *running *2/2 workers' <<< "$out" || fail "no group of 2: $out"
  wait_exit "$(cat tuner-w.pid)" 60 || fail "w.db: $(tail -3 tuner-w.log)"
  "$BIN/pskv-tune" status w.db | grep -q '^1 trials: 1 complete' || fail "$("$BIN/pskv-tune" status w.db)"
  grep -q 'worker rank 1 of 2' w.db.d/trial-1/logs/worker-1.log || fail "rank 1: $(head -5 w.db.d/trial-1/logs/worker-1.log)"
  "$BIN/pskvctl" --scheduler "$svc" shutdown > /dev/null || fail "shutdown"
  wait_exit "$(cat scheduler.pid)" 30 || fail "scheduler after shutdown"
  wait_exit "$(cat server-0.pid)" 30 || fail "server after shutdown"
  out=$(timeout 60 "$BIN/pskv-tune" run s.db --scheduler "$svc" 2>&1); [ $? = 2 ] || fail "$out"
  grep -q "scheduler $svc: no answer" <<< "$out" || fail "$out"
}
