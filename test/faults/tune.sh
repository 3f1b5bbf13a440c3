# pskv-tune fault tests (sourced by faults.sh): the tuner killed -9 at random
# points of a study, and resumed.

# A 12-trial asha study of --app synth at --parallel 1 is run twice with the same
# seed: once without a stop, once with the tuner killed -9 at random moments (up
# to 5 times, each followed by `pskv-tune run` again, which re-attaches to the
# service the killed tuner left and to the trial's group on it). At the end: the
# two studies' trials are the same (params, state, best, epochs: the same
# decisions), every trial's group started exactly once (the service's scheduler
# logs each start), on one service, none is left running, and no
# process of any trial nor of the service is alive.
tags tune_kill9 once
f_tune_kill9() {
  printf -- '--lr log 1e-4 0.3\n--momentum uniform 0 0.99\n' > space.txt
  local db a kills=0 pid
  for db in ref.db k.db; do
    "$BIN/pskv-tune" create $db --space space.txt --algo random --sched asha:eta=3,min=1,max=9 \
      --max-trials 12 --parallel 1 --seed 9 -- --app synth --synth-epoch-time 0.05 > /dev/null ||
      fail "create $db"
  done
  timeout 150 "$BIN/pskv-tune" run ref.db --log-level warn > ref.out 2>&1 ||
    fail "reference run: $(tail -3 ref.out)"
  while :; do
    "$BIN/pskv-tune" run k.db >> k.out 2>&1 &
    pid=$!
    if [ $kills -lt 5 ]; then
      sleep "$((RANDOM % 15 / 10)).$((RANDOM % 10))"
      if kill -0 $pid 2>/dev/null; then
        kill -KILL $pid; wait $pid 2>/dev/null; kills=$((kills + 1)); continue
      fi
    fi
    wait_exit $pid 150 || fail "the last run exited $?: $(tail -3 k.out)"
    break
  done
  echo "killed the tuner $kills times"
  [ $kills -ge 1 ] || fail "the study ended before the first kill: nothing shown"
  "$BIN/pskv-tune" export ref.db --csv | cut -d, -f1-6 > ref.csv
  "$BIN/pskv-tune" export k.db --csv | cut -d, -f1-6 > k.csv
  diff ref.csv k.csv > diff.out || fail "the killed study differs: $(cat diff.out)"
  [ "$(wc -l < k.csv)" = 13 ] || fail "$(cat k.csv)"
  sed -n 's/.*group \([0-9a-f]*-trial-[0-9]*\): started: .*/\1/p' k.db.d/service/logs/scheduler.log > launches
  [ "$(sort launches | uniq | wc -l)" = 12 ] || fail "started: $(sort launches | uniq -c)"
  [ -z "$(sort launches | uniq -d)" ] || fail "started twice: $(sort launches | uniq -d)"
  # every group on one scheduler (the field after the time is its pid): each run
  # re-attached to the service the killed one left (a run killed after the study
  # ended may leave the next one a new service with nothing to run)
  [ "$(grep 'group [0-9a-f]*-trial-[0-9]*: started: ' k.db.d/service/logs/scheduler.log |
    cut -d' ' -f2 | sort -u | wc -l)" = 1 ] ||
    fail "trials on more than one service: $(grep 'INFO listening on port' k.db.d/service/logs/scheduler.log)"
  grep -q 're-attached to the study.s service' k.out || fail "no run re-attached: $(grep service k.out)"
  "$BIN/pskv-tune" status k.db | grep -Eq ' (running|launching|stopping|pending) ' &&
    fail "left unfinished: $("$BIN/pskv-tune" status k.db)"
  for a in k.db.d/*/logs; do no_strays "$a"; done
  grep -c stopped k.csv | sed 's/^/stopped trials: /'
}

# The tuner killed -9 while its 2 trials run, and never run again: the trials go
# on to their end on the service it left, and the service stops by itself
# --service-linger (2 s) after the last of them (its scheduler and server exit 0).
# `run` then starts a new service and finds both trials complete from their logs.
tags tune_kill9_linger
f_tune_kill9_linger() {
  printf -- '--lr log 1e-3 0.1\n' > space.txt
  "$BIN/pskv-tune" create s.db --space space.txt --max-trials 2 --parallel 2 --trial-epochs 4 \
    -- --app synth --synth-epoch-time 1 > /dev/null || fail create
  start tuner "$BIN/pskv-tune" run s.db --service-linger 2
  wait_line tuner.log 'trial 2: attempt 1' 1 60 || fail "no trials: $(tail -3 tuner.log)"
  kill -KILL "$(cat tuner.pid)"
  local sched t0
  sched=$(cat s.db.d/service/logs/scheduler.pid)
  t0=$(date +%s)
  wait_line s.db.d/trial-1/exit '' 1 60 || fail "trial 1 did not end without its tuner"
  wait_line s.db.d/trial-2/exit '' 1 60 || fail "trial 2 did not end without its tuner"
  kill -0 "$sched" 2>/dev/null || fail "the service ended while its trials ran"
  for _ in $(seq 300); do kill -0 "$sched" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$sched" 2>/dev/null && fail "the service lingers past 30 s without a tuner"
  grep -q 'shutdown\|stopping' s.db.d/service/logs/scheduler.log ||
    fail "no orderly stop: $(tail -3 s.db.d/service/logs/scheduler.log)"
  no_strays s.db.d/service/logs
  echo "the service stopped $(($(date +%s) - t0)) s after the tuner's kill"
  timeout 60 "$BIN/pskv-tune" run s.db > run2.out 2>&1 || fail "run again: $(tail -3 run2.out)"
  grep -q 'is gone' run2.out || fail "$(cat run2.out)"
  "$BIN/pskv-tune" status s.db | grep -q '^2 trials: 2 complete' || fail "$("$BIN/pskv-tune" status s.db)"
  [ "$(grep -c 'attempt' run2.out)" = 0 ] || fail "a trial ran again: $(grep attempt run2.out)"
  no_strays s.db.d/service/logs
}

# The tuner killed -9 and its service's scheduler paused (SIGSTOP: alive, answering
# nothing): `run` again finds the recorded service gone (`is gone (no answer …):
# starting another`), ends the old one's processes (its watchdog still held its
# lock, so the process group is surely the study's), ends the trial that ran on it
# and runs it again (attempt 2) on a new service, and finishes the study: 3
# complete; no process of either service is left.
tags tune_stale_service
f_tune_stale_service() {
  printf -- '--lr log 1e-3 0.1\n' > space.txt
  "$BIN/pskv-tune" create s.db --space space.txt --max-trials 3 --parallel 1 --trial-epochs 2 \
    -- --app synth --synth-epoch-time 0.2 > /dev/null || fail create
  start tuner "$BIN/pskv-tune" run s.db
  wait_line tuner.log 'trial 1: attempt 1' 1 60 || fail "no trial: $(tail -3 tuner.log)"
  kill -KILL "$(cat tuner.pid)"
  local sched server f
  sched=$(cat s.db.d/service/logs/scheduler.pid)
  server=$(cat s.db.d/service/logs/server-0.pid)
  kill -STOP "$sched"
  wait_exit "$(cat tuner.pid)" 10 > /dev/null # gone before the next run looks at its lock
  timeout 120 "$BIN/pskv-tune" run s.db > run2.out 2>&1
  f=$?
  kill -CONT "$sched" 2>/dev/null
  [ $f = 0 ] || fail "run again exited $f: $(tail -3 run2.out)"
  grep -q "the study's service at .* is gone (no answer" run2.out || fail "$(head -5 run2.out)"
  grep -q "ending the study's earlier service" run2.out || fail "$(head -5 run2.out)"
  wait_exit "$sched" 10 >/dev/null; kill -0 "$sched" 2>/dev/null && fail "the old scheduler lives"
  kill -0 "$server" 2>/dev/null && fail "the old server lives"
  "$BIN/pskv-tune" status s.db | grep -q '^3 trials: 3 complete' || fail "$("$BIN/pskv-tune" status s.db)"
  "$BIN/pskv-tune" export s.db --csv | grep -q '^1,complete,.*,2,""$' ||
    fail "trial 1 not run again: $("$BIN/pskv-tune" export s.db --csv)"
  "$BIN/pskv-tune" status s.db | grep -Eq ' (running|launching|stopping|pending) ' &&
    fail "left unfinished: $("$BIN/pskv-tune" status s.db)"
  no_strays s.db.d/service/logs
}
