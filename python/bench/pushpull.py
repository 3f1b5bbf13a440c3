"""Push+pull step time from Python against the C bench (pskv-worker --app bench),
both on one long-lived cluster, in many short alternations.

The method, made for a noisy shared machine (a sub-millisecond step moves by
20-30 % from one second to the next there):
  - one service (pskv-scheduler --service, 1 server with BLAS on one thread) runs
    for the whole bench; per size, one C worker (pskv-worker --app bench --gate)
    and one Python worker (this process) join it, each as a worker group of one
    (its own namespace, dropped when the group ends), so both measure the same
    server process and sockets, and no cluster start or process start falls
    between a C run and the Python run it is compared with;
  - the two take turns, run by run: --gate makes the C bench wait for a line on
    its stdin before each run of a mode, so a round is, for each mode, one C run
    and one Python run back to back (C first in even rounds, Python first in odd
    ones, so that neither side always runs second), each run --warmup steps and
    then --steps timed steps (about a tenth of a second) on a dense sgd table laid
    out as the C bench lays it out (width 256 when the size allows: the same keys,
    messages and server work);
  - the figure is the median over the rounds of each round's Python/C ratio (the
    two runs of a pair lie a tenth of a second apart, so a slow second of the
    machine mostly lands on both sides of one ratio); the medians of each side's
    step times are printed beside it, with the ratios' quartiles.
The modes are the bench app's:
  serial:    push (nocopy), wait, pull into out, wait
  pipelined: push (nocopy), pull into out, wait both
  pushpull:  the combined call (Table.pushpull, copy=False, into out), wait

Prints one line per size and mode:
  size=BYTES mode=M c_step_us=MEDIAN py_step_us=MEDIAN ratio=MEDIAN_OF_PAIRS
      ratio_q1=... ratio_q3=... rounds=R steps=N
and with --verbose each round's pair.

Usage: PYTHONPATH=python /usr/bin/python3 python/bench/pushpull.py [--sizes 4096 1048576]
       [--rounds 30] [--steps 0 (about 0.1 s a run)] [--warmup 20] [--verbose]
       (--runs N: the older name of --rounds)
"""

import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

import numpy as np

import pskv
from pskv.testing import LocalCluster, bin_dir

SERVER = ["--blas-threads", "1", "--log-level", "warn"]
MODES = ("serial", "pipelined", "pushpull")
RUN_LINE = re.compile(r"^bench run=(\d+) size=(\d+) mode=(\w+) step_us=([0-9.]+)")


def layout(size):
    """(keys, width) of the C bench's table for size bytes (app_bench.c)."""
    floats = size // 4
    width = 256 if floats % 256 == 0 else 1
    return floats // width, width


class CBench:
    """pskv-worker --app bench --gate: one run of a mode per gate line."""

    def __init__(self, address, group, size, rounds, steps, warm, log):
        self.size = size
        self.p = subprocess.Popen(
            [os.path.join(bin_dir(), "pskv-worker"), "--scheduler", address, "--group", group,
             "--group-size", "1", "--drop-namespace", "--app", "bench", "--gate",
             "--size", str(size), "--runs", str(rounds), "--steps", str(steps),
             "--warmup", str(warm), "--mode", "both", "--log-level", "warn"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
            env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))

    def run(self, mode):
        """Lets runs go until one of `mode` ran; its step time in us."""
        while True:
            self.p.stdin.write(b"\n")
            self.p.stdin.flush()
            while True:
                line = self.p.stdout.readline().decode()
                if not line:
                    raise RuntimeError("the C bench ended early (exit %s)" % self.p.wait())
                r = RUN_LINE.match(line)
                if r:
                    break
            if r.group(3) == mode:
                return float(r.group(4))

    def close(self):
        self.p.stdin.close()  # the bench returns at its next gate
        self.p.stdout.read()
        return self.p.wait(60)


class PyBench:
    """The same runs from Python on a table of the same layout."""

    def __init__(self, address, group, size):
        n, width = layout(size)
        os.environ["PSKV_DROP_NAMESPACE"] = "1"  # read by pskv_worker_open: --drop-namespace
        self.w = pskv.Worker(scheduler=address, group=group, group_size=1)
        self.t = self.w.table("bench.%d" % size, size=n, width=width, updater="sgd", lr=1e-4)
        self.g = (1e-3 * (np.arange(n * width) % 17)).astype(np.float32)
        self.out = np.empty(n * width, np.float32)

    def run(self, mode, steps, warm):
        t, g, out = self.t, self.g, self.out
        for s in range(warm + steps):
            if s == warm:
                t0 = time.perf_counter()
            if mode == "pushpull":
                t.pushpull(g, out=out, copy=False).wait()
                continue
            hp = t.push(g, copy=False)
            if mode == "serial":
                hp.wait()
                t.pull(out=out).wait()
            else:
                hl = t.pull(out=out)
                hp.wait()
                hl.wait()
        return (time.perf_counter() - t0) / steps * 1e6

    def close(self):
        self.w.close()


def bench_size(address, size, rounds, steps, warm, verbose, log):
    c = CBench(address, "c-%d" % size, size, rounds, steps, warm, log)
    py = None
    try:
        py = PyBench(address, "py-%d" % size, size)
        cs, ps, rs = ({m: [] for m in MODES} for _ in range(3))
        for r in range(rounds):
            for m in MODES:
                if r % 2:
                    p_us = py.run(m, steps, warm)
                    c_us = c.run(m)
                else:
                    c_us = c.run(m)
                    p_us = py.run(m, steps, warm)
                cs[m].append(c_us)
                ps[m].append(p_us)
                rs[m].append(p_us / c_us)
            if verbose:
                print("round=%d size=%d %s" % (r, size, " ".join(
                    "%s c=%.1f py=%.1f ratio=%.3f" % (m, cs[m][-1], ps[m][-1], rs[m][-1])
                    for m in MODES)), flush=True)
    finally:
        if py is not None:
            py.close()
        rc = c.close()
    if rc:
        raise RuntimeError("the C bench exited with %d" % rc)
    for m in MODES:
        q = statistics.quantiles(rs[m], n=4) if rounds > 1 else rs[m] * 3
        print("size=%d mode=%s c_step_us=%.1f py_step_us=%.1f ratio=%.3f ratio_q1=%.3f "
              "ratio_q3=%.3f rounds=%d steps=%d"
              % (size, m, statistics.median(cs[m]), statistics.median(ps[m]),
                 statistics.median(rs[m]), q[0], q[2], rounds, steps), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[4096, 1048576])
    ap.add_argument("--rounds", "--runs", type=int, default=30)
    ap.add_argument("--steps", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryFile() as log, \
            LocalCluster(servers=1, workers=1, server_args=SERVER,
                         scheduler_args=["--service", "--log-level", "warn"]) as cl:
        for size in a.sizes:
            steps = a.steps or max(20, min(500, int(6e7 / (size + 20000))))
            try:
                bench_size(cl.address, size, a.rounds, steps, a.warmup, a.verbose, log)
            except BaseException:
                log.seek(0)
                print(log.read().decode(errors="replace")[-3000:])
                raise


if __name__ == "__main__":
    main()
