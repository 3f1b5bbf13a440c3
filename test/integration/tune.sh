# pskv-tune (sourced by integration.sh): studies of --app synth, whose validation
# curve is a known function of its flags, run as worker groups of the tuner's own
# service (scheduler, server, a worker per trial over loopback), with the study's
# decisions checked against an independent replay, bad input refused naming the
# line, failed trials recorded, a second run
# refused and readers that never see "database is locked".

TUNE_SPACE='--lr log 1e-4 0.3
--momentum uniform 0 0.99'

tune() { "$BIN/pskv-tune" "$@"; }

# The synth curve (worker/apps/train/app_synth.c) and ASHA's stopping rule with
# Ray Tune's cut-off (scheduler/tune/tsched.c), written again in awk: reads the
# export CSV (trials in the order they ran, --parallel 1) and prints "id state
# epochs" for each, as the study must have them.
asha_replay() { # asha_replay CSV ETA MIN MAX SEED
  awk -F, -v eta="$2" -v mn="$3" -v mx="$4" -v seed="$5" '
    function acc(lr, mo, e,   q, m, fin, tau) {
      q = (log(lr) / log(10) + 1.5) ^ 2; m = (mo - 0.9) ^ 2
      fin = 0.95 - 0.08 * q - 0.5 * m; if (fin < 0.15) fin = 0.15
      tau = 1 + q + 4 * m
      return 0.1 + (fin - 0.1) * (1 - exp(-e / tau)) + 0.002 * sin(7 * (seed % 1000) + e)
    }
    function cut(r,   n, i, j, t, v, pos, lo) {
      n = cnt[r]; for (i = 1; i <= n; i++) v[i] = val[r, i]
      for (i = 2; i <= n; i++) for (j = i; j > 1 && v[j-1] > v[j]; j--) { t = v[j]; v[j] = v[j-1]; v[j-1] = t }
      pos = (1 - 1 / eta) * (n - 1); lo = int(pos)
      return lo + 1 < n ? v[lo+1] + (pos - lo) * (v[lo+2] - v[lo+1]) : v[n]
    }
    NR == 1 { next }
    { id = $1; lr = $3; mo = $4; state = "complete"; ep = mx
      for (e = 1; e <= mx; e++) {
        a = sprintf("%.6f", acc(lr, mo, e)) + 0
        isr = 0; for (r = mn; r < mx; r *= eta) if (r == e) isr = 1
        if (!isr) continue
        cnt[e]++; val[e, cnt[e]] = a
        if (a < cut(e)) { state = "stopped"; ep = e; break }
      }
      print id, state, ep }' "$1"
}

# 8 random trials at --parallel 1 under asha:eta=3,min=1,max=9: each trial's fate
# (complete, or stopped at rung epoch 1 or 3) and epochs spent equal the awk replay
# of the known curves; status and export agree; every job is gone at the end.
tags tune_asha_synth
t_tune_asha_synth() {
  echo "$TUNE_SPACE" > space.txt
  tune create s.db --space space.txt --algo random --sched asha:eta=3,min=1,max=9 \
    --max-trials 8 --parallel 1 --seed 5 -- --app synth --synth-epoch-time 0.02 > create.out ||
    fail "create: $(cat create.out)"
  timeout 150 "$BIN/pskv-tune" run s.db --log-level warn > run.out 2>&1 || fail "run: $(tail -5 run.out)"
  tune export s.db --csv > s.csv || fail "export"
  tune status s.db > status.out || fail "status"
  [ "$(($(wc -l < s.csv) - 1))" = 8 ] || fail "$(cat s.csv)"
  asha_replay s.csv 3 1 9 1 > want.txt
  awk -F, 'NR > 1 { print $1, $2, $6 }' s.csv > got.txt
  diff want.txt got.txt > diff.out || fail "decisions differ from the replay: $(cat diff.out)"
  grep -q stopped got.txt || fail "no trial stopped: the test shows nothing ($(cat got.txt))"
  grep -q "^8 trials: .*complete" status.out || fail "status: $(tail -2 status.out)"
  grep -q "^best: trial" status.out || fail "status has no best"
  for p in s.db.d/*/logs; do no_strays "$p"; done
  cat got.txt
}

# Promotion-style ASHA (Li et al.'s algorithm 2) at --parallel 1, written again in
# awk over the known synth curves: a free slot promotes, rungs from the top down, the
# best paused trial in the top floor(n/eta) of its rung, else starts a new trial to
# the first rung; the trials still paused at the end are stopped. Prints the
# launches ("L id from to", in order) then each trial's "id state epochs".
asha_promote_replay() { # asha_promote_replay CSV ETA MIN MAX SEED
  awk -F, -v eta="$2" -v mn="$3" -v mx="$4" -v seed="$5" '
    function acc(lr, mo, e,   q, m, fin, tau) {
      q = (log(lr) / log(10) + 1.5) ^ 2; m = (mo - 0.9) ^ 2
      fin = 0.95 - 0.08 * q - 0.5 * m; if (fin < 0.15) fin = 0.15
      tau = 1 + q + 4 * m
      return sprintf("%.6f", 0.1 + (fin - 0.1) * (1 - exp(-e / tau)) + 0.002 * sin(7 * (seed % 1000) + e)) + 0
    }
    NR == 1 { next }
    { n++; id[n] = $1; lr[n] = $3; mo[n] = $4 }
    END {
      nr = 0; for (r = mn; r < mx; r *= eta) rung[++nr] = r
      started = 0
      while (1) {
        pick = 0
        for (k = nr; k >= 1 && !pick; k--) {
          e = rung[k]; c = 0
          for (i = 1; i <= started; i++) if (ep[i] >= e) { c++; o[c] = i }
          for (i = 2; i <= c; i++) for (j = i; j > 1 && (acc(lr[o[j-1]], mo[o[j-1]], e) < acc(lr[o[j]], mo[o[j]], e) || (acc(lr[o[j-1]], mo[o[j-1]], e) == acc(lr[o[j]], mo[o[j]], e) && o[j-1] > o[j])); j--) { t = o[j]; o[j] = o[j-1]; o[j-1] = t }
          keep = int(c / eta)
          for (j = 1; j <= keep && !pick; j++) if (paused[o[j]] && ep[o[j]] == e) { pick = o[j]; to = k < nr ? rung[k+1] : mx }
        }
        if (!pick && started < n) { pick = ++started; ep[pick] = 0; to = rung[1] ? rung[1] : mx }
        if (!pick) break
        print "L", id[pick], ep[pick] + 1, to
        ep[pick] = to; paused[pick] = to < mx
      }
      for (i = 1; i <= n; i++) print id[i], paused[i] ? "stopped" : "complete", ep[i]
    }' "$1"
}

# 9 random trials at --parallel 1 under asha:eta=3,min=1,max=9,promote=1: each trial
# runs to its rung and pauses with a synth checkpoint (--save-model), a promoted one
# goes on from it (--init-from) with more epochs; the launches (trial, first and last
# epoch), fates and epochs spent equal the awk replay; a promoted trial's curve equals
# the uninterrupted curve (the checkpoint carries its epoch).
tags tune_asha_promote
t_tune_asha_promote() {
  echo "$TUNE_SPACE" > space.txt
  tune create s.db --space space.txt --algo random --sched asha:eta=3,min=1,max=9,promote=1 \
    --max-trials 9 --parallel 1 --seed 5 -- --app synth --synth-epoch-time 0.02 > create.out ||
    fail "create: $(cat create.out)"
  timeout 150 "$BIN/pskv-tune" run s.db > run.out 2>&1 || fail "run: $(tail -5 run.out)"
  tune export s.db --csv > s.csv || fail "export"
  [ "$(($(wc -l < s.csv) - 1))" = 9 ] || fail "$(cat s.csv)"
  asha_promote_replay s.csv 3 1 9 1 > want.txt
  { sed -n 's/.*trial \([0-9]*\): attempt [0-9]*, epochs \([0-9]*\) to \([0-9]*\),.*/L \1 \2 \3/p' run.out
    awk -F, 'NR > 1 { print $1, $2, $6 }' s.csv; } > got.txt
  diff want.txt got.txt > diff.out || fail "promotions differ from the replay: $(cat diff.out)"
  grep -q '^L [0-9]* 4 9$' got.txt || fail "no trial promoted to the top: $(cat got.txt)"
  grep -q ' stopped ' got.txt || fail "every trial promoted: the test shows nothing"
  local top
  top=$(awk '$1 == "L" && $3 == 4 { print $2; exit }' got.txt)
  local want got
  want=$(awk -F, -v id="$top" '$1 == id { q = (log($3) / log(10) + 1.5) ^ 2; m = ($4 - 0.9) ^ 2
    fin = 0.95 - 0.08 * q - 0.5 * m; if (fin < 0.15) fin = 0.15
    printf "%.6f", 0.1 + (fin - 0.1) * (1 - exp(-9 / (1 + q + 4 * m))) + 0.002 * sin(7 + 9) }' s.csv)
  got=$(sed -n 's/.*epoch 6 val_accuracy \([0-9.]*\).*/\1/p' "s.db.d/trial-$top/logs/worker-0.log")
  [ -n "$want" ] && [ "$want" = "$got" ] ||
    fail "trial $top's epoch 9 (its last run's 6th) is '$got', the curve's '$want'"
  [ -s "s.db.d/trial-$top/ckpt-3" ] || fail "no checkpoint at rung 1: $(ls "s.db.d/trial-$top")"
  for p in s.db.d/*/logs; do no_strays "$p"; done
  cat got.txt
}

# Bad input: exit 2 naming what is wrong (the space file's line).
tags tune_bad_input
t_tune_bad_input() {
  local out
  printf -- '--lr log 1e-4 0.3\n--nosuch uniform 0 1\n' > bad1.txt
  out=$(tune create a.db --space bad1.txt -- --app synth 2>&1); [ $? = 2 ] || fail "unknown flag: $out"
  grep -q "bad1.txt: line 2: .*no flag --nosuch" <<< "$out" || fail "$out"
  printf -- '--momentum uniform 0.5 0.5\n' > bad2.txt
  out=$(tune create a.db --space bad2.txt -- --app synth 2>&1); [ $? = 2 ] || fail "empty: $out"
  grep -q "line 1: empty range" <<< "$out" || fail "$out"
  printf -- '--momentum uniform 0 2\n' > bad3.txt
  out=$(tune create a.db --space bad3.txt -- --app synth 2>&1); [ $? = 2 ] || fail "bound: $out"
  grep -q "line 1: --momentum 2" <<< "$out" || fail "$out"
  echo "$TUNE_SPACE" > space.txt
  out=$(tune create a.db --space space.txt --sched asha:eta=1 2>&1); [ $? = 2 ] || fail "$out"
  grep -q "eta=1" <<< "$out" || fail "$out"
  out=$(tune create a.db --space space.txt --metric accuracy 2>&1); [ $? = 2 ] || fail "$out"
  out=$(tune status nosuch.db 2>&1); [ $? = 1 ] || fail "status of nothing: $out"
  [ ! -e a.db ] || fail "a refused create left a.db"
  tune create a.db --space space.txt -- --app synth > /dev/null || fail "a good create"
  out=$(tune create a.db --space space.txt 2>&1); [ $? = 2 ] || fail "create over a study: $out"
  out=$(tune export a.db 2>&1); [ $? = 2 ] || fail "export without --csv: $out"
}

# A trial whose flags make the app fail (synth: lr above 1 diverges) is recorded
# failed with its reason, and the study goes on to the others; plot (where gnuplot
# is installed) draws the study.
tags tune_failed_trial
t_tune_failed_trial() {
  printf -- '--lr choice 0.03 5 0.001\n' > space.txt
  tune create s.db --space space.txt --algo grid --max-trials 10 --trial-epochs 3 \
    -- --app synth > /dev/null || fail create
  timeout 120 "$BIN/pskv-tune" run s.db --log-level warn > run.out 2>&1 || fail "run: $(tail -5 run.out)"
  tune export s.db --csv > s.csv
  grep -q '^[0-9]*,failed,5,,0,1,"exit 1: synth: diverged at epoch 1' s.csv || fail "$(cat s.csv)"
  [ "$(grep -c ',complete,' s.csv)" = 2 ] || fail "the others: $(cat s.csv)"
  [ "$(wc -l < s.csv)" = 4 ] || fail "the grid has 3 points: $(cat s.csv)"
  if command -v gnuplot > /dev/null; then # plot draws the failed one too
    tune plot s.db --out s.png > plot.out 2>&1 || fail "plot: $(cat plot.out)"
    [ -s s.png ] || fail "no s.png"
  fi
}

# While one pskv-tune runs a study: a second run is refused naming the first's pid
# and host (exit 3), and `status` in a loop never fails nor sees "database is
# locked"; the running trials are a Prometheus gauge and in `pskvctl status
# --study`; the first finishes the study.
tags tune_lock_and_readers
t_tune_lock_and_readers() {
  echo "$TUNE_SPACE" > space.txt
  tune create s.db --space space.txt --max-trials 6 --parallel 2 --trial-epochs 6 \
    -- --app synth --synth-epoch-time 0.3 > /dev/null || fail create
  local pid n=0 out port
  port=$(free_port)
  start tuner "$BIN/pskv-tune" run s.db --metrics-port "$port"
  pid=$(cat tuner.pid)
  wait_line tuner.log 'trial 1: attempt 1' 1 60 || fail "no trial started"
  wait_line s.db.d/trial-1/logs/worker-0.log 'val_accuracy' 1 60 || fail "no metric"
  curl -s "http://127.0.0.1:$port/metrics" > metrics.out
  grep -q '^pskv_tune_trials{.*state="running"} [12]$' metrics.out || fail "gauges: $(grep tune metrics.out)"
  out=$("$BIN/pskvctl" status --study s.db 2>&1) || fail "pskvctl status --study: $out"
  grep -q '^[0-9]* trials: .*running' <<< "$out" || fail "pskvctl status --study: $out"
  out=$("$BIN/pskvctl" status --study s.db --json 2>&1); [ $? = 2 ] || fail "--study --json: $out"
  out=$(tune run s.db 2>&1); [ $? = 3 ] || fail "second run: $out"
  grep -q "being run by pskv-tune pid $pid on host $(hostname)" <<< "$out" || fail "$out"
  while kill -0 "$pid" 2>/dev/null; do
    tune status s.db > st.out 2>&1 || fail "status failed: $(cat st.out)"
    grep -qi locked st.out && fail "status: $(cat st.out)"
    n=$((n + 1))
  done
  wait_exit "$pid" 10 || fail "the tuner exited $?: $(tail -5 tuner.log)"
  grep -q "^6 trials: 6 complete" st.out || tune status s.db | grep -q "^6 trials: 6 complete" ||
    fail "$(tune status s.db)"
  [ "$n" -ge 5 ] || fail "only $n status reads during the study"
  echo "$n status reads, none locked"
}

# pskv-tune replay on a recorded grid of choices (4 synth trials of 3 epochs): random
# search with fifo is its own baseline, so in every seed (7, 8, 9: --seed 7) its best
# is the baseline's;
# asha replayed stops some trials; a study whose points are not all recorded (a
# uniform dimension) is refused naming the trial (exit 1).
tags tune_replay
t_tune_replay() {
  printf -- '--lr choice 0.001 0.03\n--momentum choice 0.5 0.9\n' > grid.txt
  tune create g.db --space grid.txt --algo grid --max-trials 4 --trial-epochs 3 \
    -- --app synth --synth-epoch-time 0.01 > /dev/null || fail create
  timeout 120 "$BIN/pskv-tune" run g.db --log-level warn > run.out 2>&1 || fail "run: $(tail -5 run.out)"
  tune replay g.db --algo random --sched fifo --budget-epochs 6 --seeds 3 --seed 7 > r1.out 2>&1 ||
    fail "replay: $(cat r1.out)"
  [ "$(grep -c '^seed ' r1.out)" = 3 ] && grep -q '^seed 9: ' r1.out || fail "$(cat r1.out)"
  awk '/^seed / { split($0, a, "best "); if (a[2] + 0 != a[3] + 0) bad = 1 } END { exit bad }' r1.out ||
    fail "random+fifo is not its own baseline: $(cat r1.out)"
  grep -q '^median epochs to reach random search.s final best: [0-9.]* = [0-9.]* B (B = 6)' r1.out ||
    fail "$(tail -1 r1.out)"
  tune replay g.db --algo gp --sched asha:eta=2,min=1 --budget-epochs 9 --seeds 4 > r2.out 2>&1 ||
    fail "replay gp asha: $(cat r2.out)"
  grep -q '^median epochs' r2.out || fail "$(cat r2.out)"
  printf -- '--lr log 1e-3 0.1\n' > u.txt
  tune create u.db --space u.txt --algo random --max-trials 1 --trial-epochs 2 \
    -- --app synth --synth-epoch-time 0.01 > /dev/null || fail create
  timeout 60 "$BIN/pskv-tune" run u.db --log-level warn > run2.out 2>&1 || fail "run u"
  local out
  out=$(tune replay u.db --algo random --seeds 3 2>&1); [ $? = 1 ] || fail "unrecorded: $out"
  grep -q "seed [0-9]*: trial 1's point (--lr [0-9.e-]*) was not recorded" <<< "$out" || fail "$out"
  cat r1.out r2.out
}
