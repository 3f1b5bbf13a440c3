"""Eviction reaches pskv-serve with the next delta: a row the training servers
evict (table option evict_after) disappears from the served copy while training
goes on, without a full copy, and comes back when pushed again.

    python3 test/tools/follow_evict.py [--servers S] [--sync-ms MS]

Starts a scheduler and S servers (pskv.testing.LocalCluster), one worker (this
process, libpskv through the pskv package) and pskv-serve following namespace
"ev". Key 7 of the sparse table ev/t (sum, evict_after 2) is pushed once, key 1
every clock. Checks through real HTTP (/v1/lookup) that key 7 is served, then
reads null within 10 s of the clocks that evict it while key 1 stays served, that
pskv-serve asked for no full copy meanwhile (pskv_serve_follow_gaps_total 0), and
that key 7 pushed again is served again. Prints "evict ok: ..." and exits 0, else 1.
"""

import argparse
import os
import sys
import time
import urllib.request

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import pskv  # noqa: E402
from pskv.testing import LocalCluster  # noqa: E402

import followlib  # noqa: E402

ONE = np.ones(1, dtype=np.float32)


def lookup(port, keys):
    return followlib.lookup(port, "t", keys)


def gaps(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("pskv_serve_follow_gaps_total"):
                return float(line.split()[-1])
    return -1


def until(what, cond, seconds, step=None):
    """Polls cond() (calling step() between tries) until true; False after `seconds`."""
    end = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > end:
            print("evict: FAILED: %s within %d s" % (what, seconds))
            return False
        if step:
            step()
        time.sleep(0.05)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--sync-ms", type=int, default=200)
    a = ap.parse_args()
    with LocalCluster(servers=a.servers, workers=1) as c:
        w = pskv.Worker(scheduler=c.address, rank=0, table_namespace="ev")
        t = w.table("t", kind="sparse", width=1, updater="sum", evict_after=2)

        def push(k):
            t.push(ONE, keys=np.array([k], dtype=np.uint64)).wait(30)

        def tick():  # a clock of training: key 1 pushed, key 7 not
            push(1)
            w.clock()

        push(7)
        push(1)
        serve, port, log = followlib.start_serve(c, "ev", a.sync_ms)
        try:
            if not until("key 7 served", lambda: (lookup(port, [7]) or [None])[0] == 1.0, 30):
                return 1
            g0 = gaps(port)
            clocks = [0]

            def step():
                tick()
                clocks[0] += 1

            if not until("key 7 evicted from the served copy",
                         lambda: (lookup(port, [7]) or [1.0])[0] is None, 20, step):
                print("evict: served %s after %d clocks (log %s)" %
                      (lookup(port, [7, 1]), clocks[0], log.name))
                return 1
            both = lookup(port, [7, 1])
            if both[0] is not None or not both[1]:
                print("evict: FAILED: after the eviction keys 7, 1 are served as %s" % both)
                return 1
            if gaps(port) != g0:
                print("evict: FAILED: pskv-serve asked for a full copy (gaps %g -> %g)" %
                      (g0, gaps(port)))
                return 1
            push(7)  # a new row: init 0 + 1
            if not until("key 7 served again", lambda: lookup(port, [7])[0] == 1.0, 10):
                return 1
            print("evict ok: key 7 left the served copy after %d clocks, key 1 = %g, no full copy"
                  % (clocks[0], both[1]))
            return 0
        finally:
            followlib.stop_serve(serve)
            w.close()


if __name__ == "__main__":
    sys.exit(main())
