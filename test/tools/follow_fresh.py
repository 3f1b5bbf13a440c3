"""Freshness of pskv-serve --scheduler: the time from a push's acknowledgement to
its value in /v1/lookup's answers (real HTTP), over a real cluster.

    python3 test/tools/follow_fresh.py [--servers S] [--pushes N] [--sync-ms MS]

Starts a scheduler and S servers (pskv.testing.LocalCluster), pskv-serve following
namespace "fresh", and one worker (this process, libpskv through the pskv
package). Each push adds 1 to key k of the sparse table fresh/t (width 1, `sum`),
waits for its acknowledgement, then polls /v1/lookup every 5 ms until key k reads
its new value. Prints "fresh: n=N p50=X p99=Y max=Z ms sync_ms=MS" and exits 0,
or 1 when a push was not visible within 10 s.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import pskv  # noqa: E402
from pskv.testing import LocalCluster  # noqa: E402

import followlib  # noqa: E402


def lookup(port, key):
    return (followlib.lookup(port, "t", [key]) or [None])[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--servers", type=int, default=2)
    ap.add_argument("--pushes", type=int, default=100)
    ap.add_argument("--sync-ms", type=int, default=200)
    a = ap.parse_args()
    with LocalCluster(servers=a.servers, workers=1) as c:
        w = pskv.Worker(scheduler=c.address, rank=0, table_namespace="fresh")
        t = w.table("t", kind="sparse", width=1, updater="sum")
        t.push(np.ones(1, dtype=np.float32), keys=np.array([0], dtype=np.uint64)).wait(30)
        serve, port, log = followlib.start_serve(c, "fresh", a.sync_ms)
        try:
            end = time.monotonic() + 30
            while lookup(port, 0) != 1.0:
                if time.monotonic() > end:
                    print("fresh: pskv-serve never served key 0 (log %s)" % log.name)
                    return 1
                time.sleep(0.05)
            lat = []
            for i in range(a.pushes):
                k = 1 + i % 50
                want = float(1 + i // 50)
                t.push(np.ones(1, dtype=np.float32), keys=np.array([k], dtype=np.uint64)).wait(30)
                t0 = time.monotonic()
                while lookup(port, k) != want:
                    if time.monotonic() - t0 > 10:
                        print("fresh: push %d (key %d = %g) not visible within 10 s" % (i, k, want))
                        return 1
                    time.sleep(0.005)
                lat.append((time.monotonic() - t0) * 1000)
                time.sleep(0.013 * (i % 7))  # pushes at no fixed phase of the sync period
            lat.sort()
            q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
            print("fresh: n=%d p50=%.0f p99=%.0f max=%.0f ms sync_ms=%d" %
                  (len(lat), q(0.5), q(0.99), lat[-1], a.sync_ms))
            return 0
        finally:
            followlib.stop_serve(serve)
            w.close()


if __name__ == "__main__":
    sys.exit(main())
