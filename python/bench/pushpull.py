"""Push+pull step time from Python against the C bench (pskv-worker --app bench),
alternating in one sitting: for each size and run, a fresh cluster (1 server,
BLAS on one thread) for the C worker, then one for the Python worker, each doing
the bench app's steps on a dense sgd table:
  serial:    push (nocopy), wait, pull into out, wait
  pipelined: push (nocopy), pull into out, wait both
Prints one line per size and mode with the medians over the runs:
  size=BYTES mode=M c_step_us=... py_step_us=... ratio=py/c

Usage: PYTHONPATH=python /usr/bin/python3 python/bench/pushpull.py [--sizes 4096 1048576]
       [--runs 5] [--steps 0 (about 1 s worth)]
"""

import argparse
import os
import re
import statistics
import subprocess
import time

import numpy as np

import pskv
from pskv.testing import LocalCluster, bin_dir

SERVER = ["--blas-threads", "1", "--log-level", "warn"]


def c_run(size, steps):
    with LocalCluster(servers=1, workers=1, server_args=SERVER,
                      scheduler_args=["--log-level", "warn"]) as c:
        out = subprocess.run([os.path.join(bin_dir(), "pskv-worker"), "--scheduler", c.address,
                              "--app", "bench", "--size", str(size), "--runs", "1",
                              "--steps", str(steps), "--mode", "both", "--log-level", "warn"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600,
                             env=dict(os.environ, OPENBLAS_NUM_THREADS="1")).stdout.decode()
    got = {}
    for m in ("serial", "pipelined"):
        r = re.search(r"bench size=%d mode=%s step_us=([0-9.]+)" % (size, m), out)
        if not r:
            raise RuntimeError("C bench printed no %s line:\n%s" % (m, out[-2000:]))
        got[m] = float(r.group(1))
    return got


def py_run(size, steps, warm=20):
    n = size // 4
    with LocalCluster(servers=1, workers=1, server_args=SERVER,
                      scheduler_args=["--log-level", "warn"]) as c, \
            pskv.Worker(scheduler=c.address) as w:
        t = w.table("bench.%d" % size, size=n, updater="sgd", lr=1e-4)
        g = (1e-3 * (np.arange(n) % 17)).astype(np.float32)
        out = np.empty(n, np.float32)
        got = {}
        for m in ("serial", "pipelined"):
            for s in range(warm + steps):
                if s == warm:
                    t0 = time.perf_counter()
                hp = t.push(g, copy=False)
                if m == "serial":
                    hp.wait()
                    t.pull(out=out).wait()
                else:
                    hl = t.pull(out=out)
                    hp.wait()
                    hl.wait()
            got[m] = (time.perf_counter() - t0) / steps * 1e6
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 1048576])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--steps", type=int, default=0)
    a = ap.parse_args()
    for size in a.sizes:
        steps = a.steps or max(20, min(5000, int(3e8 / (size + 20000))))
        cs, ps = {"serial": [], "pipelined": []}, {"serial": [], "pipelined": []}
        for _ in range(a.runs):
            for k, v in c_run(size, steps).items():
                cs[k].append(v)
            for k, v in py_run(size, steps).items():
                ps[k].append(v)
        for m in ("serial", "pipelined"):
            c, p = statistics.median(cs[m]), statistics.median(ps[m])
            print("size=%d mode=%s c_step_us=%.1f py_step_us=%.1f ratio=%.3f runs=%d steps=%d"
                  % (size, m, c, p, p / c, a.runs, steps), flush=True)


if __name__ == "__main__":
    main()
