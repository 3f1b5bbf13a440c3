# pskv-tune fault tests (sourced by faults.sh): the tuner killed -9 at random
# points of a study, and resumed.

# A 12-trial asha study of --app synth at --parallel 1 is run twice with the same
# seed: once without a stop, once with the tuner killed -9 at random moments (up
# to 5 times, each followed by `pskv-tune run` again, which re-attaches). At the
# end: the two studies' trials are the same (params, state, best, epochs: the
# same decisions), every trial's job was launched exactly once (a launcher wrapper
# counts them), none is left running, and no process of any trial is alive.
tags tune_kill9 once
f_tune_kill9() {
  printf -- '--lr log 1e-4 0.3\n--momentum uniform 0 0.99\n' > space.txt
  cat > launch.sh <<EOS
#!/bin/sh
for a; do case \$a in */trial-*/logs) echo "\${a%/logs}" >> "$TDIR/launches";; esac; done
exec "$LAUNCH" "\$@"
EOS
  chmod +x launch.sh
  local db a kills=0 pid
  for db in ref.db k.db; do
    "$BIN/pskv-tune" create $db --space space.txt --algo random --sched asha:eta=3,min=1,max=9 \
      --max-trials 12 --parallel 1 --seed 9 -- --app synth --synth-epoch-time 0.05 > /dev/null ||
      fail "create $db"
  done
  timeout 150 "$BIN/pskv-tune" run ref.db --launcher "$LAUNCH" --log-level warn > ref.out 2>&1 ||
    fail "reference run: $(tail -3 ref.out)"
  while :; do
    "$BIN/pskv-tune" run k.db --launcher "$TDIR/launch.sh" --log-level warn >> k.out 2>&1 &
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
  [ "$(sort launches | uniq | wc -l)" = 12 ] || fail "launched: $(sort launches | uniq -c)"
  [ -z "$(sort launches | uniq -d)" ] || fail "launched twice: $(sort launches | uniq -d)"
  "$BIN/pskv-tune" status k.db | grep -Eq ' (running|launching|stopping|pending) ' &&
    fail "left unfinished: $("$BIN/pskv-tune" status k.db)"
  for a in k.db.d/*/logs; do no_strays "$a"; done
  grep -c stopped k.csv | sed 's/^/stopped trials: /'
}
