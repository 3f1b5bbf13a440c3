# shellcheck shell=bash
# libpskv.so's ABI (sourced by integration.sh): programs built for an older release
# run against today's libpskv.so.1 (symbol versions, worker/lib/libpskv.map;
# docs/extending.md "The ABI").

# A program built with the frozen 1.0 header and linked without symbol versions
# (pskv-abi-1.0, test/abi/) runs against today's libpskv.so.1 on a real cluster: the
# dynamic linker binds it to pskv_config_init@PSKV_1 and pskv_worker_open@PSKV_1,
# its stack guard after pskv_config stays intact, its pushes and pulls are exact.
# A program built with today's header (pskv-abi-client) binds to the PSKV_2 defaults
# and works beside it. The control: the 1.0 program against the library linked
# without versions (the fault this fixes) breaks its guard and fails its open.
t_abi_1_0() {
  local lib=$BIN/../lib port st f who name ver
  for f in "$BIN/pskv-abi-1.0" "$BIN/pskv-abi-client" "$lib/libpskv.so" "$lib/unversioned/libpskv.so"; do
    [ -f "$f" ] || fail "no $f (make all builds it)"
  done
  mkdir -p new old
  ln -s "$(cd "$lib" && pwd)/libpskv.so" new/libpskv.so.1
  ln -s "$(cd "$lib/unversioned" && pwd)/libpskv.so" old/libpskv.so.1
  objdump -T "$BIN/pskv-abi-1.0" | grep -q '  Base  *pskv_config_init$' ||
    fail "pskv-abi-1.0's reference to pskv_config_init is versioned: $(objdump -T "$BIN/pskv-abi-1.0" | grep pskv_config_init)"
  objdump -T "$BIN/pskv-abi-client" | grep -q '(PSKV_2)  *pskv_config_init$' ||
    fail "pskv-abi-client does not bind pskv_config_init@PSKV_2: $(objdump -T "$BIN/pskv-abi-client" | grep pskv_config_init)"

  # the control, before any daemon: nothing listens on its scheduler's port
  port=$(free_port)
  LD_LIBRARY_PATH=$TDIR/old timeout 60 "$BIN/pskv-abi-1.0" "127.0.0.1:$port" abi.none > control.out 2>&1
  st=$?
  [ "$st" = 1 ] || fail "the 1.0 program against an unversioned library exited $st: $(cat control.out)"
  grep -q 'abi: pskv_config_init bound to no version' control.out &&
    grep -q 'abi FAILED: pskv_config_init wrote past' control.out &&
    grep -q 'abi FAILED: pskv_worker_open: invalid argument' control.out ||
    fail "the control did not see the overrun and the garbage read: $(cat control.out)"

  port=$(free_port)
  start scheduler "$BIN/pskv-scheduler" --port "$port" --servers 1 --workers 2
  start server-0 "$BIN/pskv-server" --scheduler "127.0.0.1:$port"
  LD_LIBRARY_PATH=$TDIR/new start old "$BIN/pskv-abi-1.0" "127.0.0.1:$port" abi.old
  LD_LIBRARY_PATH=$TDIR/new start client "$BIN/pskv-abi-client" "127.0.0.1:$port" abi.new
  for f in old client scheduler server-0; do
    wait_exit "$(cat "$f.pid")" 120
    st=$?
    [ "$st" = 0 ] || fail "$f exited $st: $(grep -v '^20' "$f.log" | tail -n 3; tail -n 2 "$f.log")"
  done
  for f in old client; do
    grep -q '^abi ok: guard intact after pskv_config_init and pskv_worker_open' "$f.log" ||
      fail "$f: $(grep '^abi' "$f.log")"
  done
  # what the dynamic linker bound each program's references to (dlvsym's addresses)
  for f in "old pskv_config_init PSKV_1" "old pskv_worker_open PSKV_1" \
           "client pskv_config_init PSKV_2" "client pskv_worker_open PSKV_2"; do
    read -r who name ver <<< "$f"
    grep -qx "abi: $name bound to $ver" "$who.log" ||
      fail "$who: $name not bound to $ver: $(grep "^abi: $name" "$who.log")"
  done
  local s1 s2
  s1=$(sed -n 's/^abi: sizeof(pskv_config) //p' old.log)
  s2=$(sed -n 's/^abi: sizeof(pskv_config) //p' client.log)
  [ -n "$s1" ] && [ -n "$s2" ] && [ "$s1" -lt "$s2" ] || fail "pskv_config: 1.0 $s1 bytes, today $s2"
  objdump -T "$lib/libpskv.so" | grep -q '(PSKV_1)  *pskv_config_init$' ||
    fail "libpskv.so has no pskv_config_init@PSKV_1"
  no_strays "$TDIR"
  echo "abi: a 1.0 program (pskv_config of $s1 bytes, today's $s2) bound to PSKV_1 and ran; today's bound to PSKV_2; unversioned, the 1.0 program's guard broke"
}
