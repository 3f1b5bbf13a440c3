"""Reads pskv-serve through real HTTP while it follows a `--app check` job and is cut
off from it (test/integration/serve_follow.sh, t_serve_follow_cut; run inside
pskv-serve's network namespace).

    follow_cut.py served PORT CLOCK SECONDS
        polls until check.dense is served at clock CLOCK or later; prints
        "served: clock=C"; exit 1 if it is not within SECONDS
    follow_cut.py frozen PORT SECONDS
        (the training servers out of reach) asks every 50 ms for SECONDS: every
        /v1/lookup of check.dense and check.sparse, and every /metrics (each 0.5 s),
        must be answered within 2 s, with the same rows as the first answer; the
        staleness each answer reports, and pskv_serve_staleness_seconds of
        check.dense, never goes down and grows by most of SECONDS; prints
        "frozen: answers=A clock=C staleness=S0..S1 metrics=M0..M1"
    follow_cut.py moved PORT CLOCK SECONDS
        (the link back) polls until check.dense is served at a clock past CLOCK;
        prints "moved: clock C after T s, at W ms" (W: Unix time); exit 1 if it is not
        within SECONDS
"""

import re
import sys
import time
import urllib.request

from follow_watch import lookup, mix64

DENSE = list(range(100))
SPARSE = [mix64(j + 12345) for j in range(100)]
STALE = re.compile(r'^pskv_serve_staleness_seconds\{[^}]*table="check\.dense"[^}]*\} (\S+)$', re.M)


def metric(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=2) as r:
        m = STALE.search(r.read().decode())
    if not m:
        raise OSError("no pskv_serve_staleness_seconds for check.dense in /metrics")
    return float(m.group(1))


def clock_of(port):
    try:
        return lookup(port, "check.dense", [0])["version"]["clock"]
    except OSError:  # not served yet
        return None


def until_clock(port, above, secs):
    end = time.monotonic() + secs
    while time.monotonic() < end:
        c = clock_of(port)
        if c is not None and c > above:
            return c
        time.sleep(0.05)
    return None


def frozen(port, secs):
    first = None
    answers = 0
    s0 = s1 = m0 = m1 = None
    next_metric = 0
    end = time.monotonic() + secs
    while time.monotonic() < end:
        t = time.monotonic()
        try:
            d = lookup(port, "check.dense", DENSE)
            s = lookup(port, "check.sparse", SPARSE)
            if time.monotonic() >= next_metric:
                m = metric(port)
                if m1 is not None and m < m1:
                    print("frozen: FAILED: /metrics staleness went down: %.3f, then %.3f" % (m1, m))
                    return 1
                m0 = m if m0 is None else m0
                m1 = m
                next_metric = time.monotonic() + 0.5
        except OSError as e:
            print("frozen: FAILED: a request failed after %d answers: %s" % (answers, e))
            return 1
        if time.monotonic() - t > 2:
            print("frozen: FAILED: an answer took %.1f s" % (time.monotonic() - t))
            return 1
        answers += 1
        rows = (d["values"], s["values"], d["version"]["clock"])
        if first is None:
            first = rows
        elif rows != first:
            print("frozen: FAILED: the rows changed while cut off: clock %s, then %s; key 1 %s, "
                  "then %s" % (first[2], rows[2], first[0][1], rows[0][1]))
            return 1
        st = min(d["version"]["staleness_seconds"], s["version"]["staleness_seconds"])
        if s1 is not None and st < s1 - 0.001:
            print("frozen: FAILED: the staleness answered went down: %.3f, then %.3f" % (s1, st))
            return 1
        s0 = st if s0 is None else s0
        s1 = st
        time.sleep(0.05)
    print("frozen: answers=%d clock=%s staleness=%.2f..%.2f metrics=%.2f..%.2f" %
          (answers, first[2], s0, s1, m0, m1))
    if s1 - s0 < secs / 2 or m1 - m0 < secs / 2:
        print("frozen: FAILED: the staleness grew by %.2f s (answers) and %.2f s (/metrics) in "
              "%.1f s" % (s1 - s0, m1 - m0, secs))
        return 1
    return 0


def main():
    cmd, port = sys.argv[1], int(sys.argv[2])
    if cmd == "frozen":
        return frozen(port, float(sys.argv[3]))
    if cmd in ("served", "moved"):
        clock, secs = int(sys.argv[3]), float(sys.argv[4])
        t0 = time.monotonic()
        c = until_clock(port, clock - 1 if cmd == "served" else clock, secs)
        if c is None:
            print("%s: FAILED: check.dense not served at a clock %s %d within %.0f s (now %s)" %
                  (cmd, ">=" if cmd == "served" else ">", clock, secs, clock_of(port)))
            return 1
        if cmd == "served":
            print("served: clock=%d" % c)
        else:
            print("moved: clock %d after %.2f s, at %d ms" % (c, time.monotonic() - t0,
                                                          int(time.time() * 1000)))
        return 0
    print("follow_cut.py: unknown command %s" % cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main())
