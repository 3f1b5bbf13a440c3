"""The Python package's own CPU time per push+pull step, apart from libpskv and the
network: what python/bench/pushpull.py's Python/C ratio can owe to the package.

Table.push(g, copy=False).wait() and Table.pull(out=).wait() run over a Table whose
library calls are pointed at libc's labs() (a C function that returns at once: a
"timestamp" for push and pull, a success for the waits), beside a loop of the same
four bare ctypes calls. Both are timed in CPU time (time.process_time), which a loaded
machine disturbs far less than wall time. No daemon runs; nothing is sent.

Usage: PYTHONPATH=python /usr/bin/python3 python/bench/overhead.py [--steps 20000] [--runs 5]
Prints one line per run and a last line with the medians:
  package_us=... bare_us=... added_us=...
"""

import argparse
import ctypes
import statistics
import threading
import time
import types

import numpy as np

import pskv.table as T


def _noop(res, args):
    f = getattr(ctypes.CDLL(None), "labs")  # a fresh function object per signature
    f.restype, f.argtypes = res, args
    return f


V, I, I64, S = ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_size_t
NOOP = types.SimpleNamespace(
    pskv_push=_noop(I64, [V, I, V, S, V]), pskv_push_nocopy=_noop(I64, [V, I, V, S, V]),
    pskv_pull=_noop(I64, [V, I, V, S, V]), pskv_wait=_noop(I, [V, I64, I]),
    pskv_request_pending=_noop(I, [V, I64]))


class _Worker:
    """What Table and Handle use of a pskv.Worker."""

    def __init__(self):
        self._lock, self._ptr, self._release, self._keep, self._stuck = (
            threading.RLock(), 1, [], {}, None)

    def _h(self):
        return self._ptr

    def _forget(self, ts):
        self._keep.pop(ts, None)

    def _prune(self):
        self._keep.clear()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    n = 1 << 18  # 1 MiB of float32 (the size does not change the package's work)
    t = T.Table.__new__(T.Table)
    t._w, t.name, t.kind, t.size, t.width, t.id = _Worker(), "bench", "dense", n, 1, 0
    t._floats = n
    t._labels = T.Table.labels(t.name)
    T.L = NOOP
    T._wait, T._push, T._push_nocopy, T._pull = (NOOP.pskv_wait, NOOP.pskv_push,
                                                  NOOP.pskv_push_nocopy, NOOP.pskv_pull)
    g, out = np.ones(n, np.float32), np.empty(n, np.float32)
    ga, oa = g.ctypes.data, out.ctypes.data
    pk, bare = [], []
    for _ in range(a.runs):
        t0 = time.process_time()
        for _ in range(a.steps):
            t.push(g, copy=False).wait()
            t.pull(out=out).wait()
        pk.append((time.process_time() - t0) / a.steps * 1e6)
        t0 = time.process_time()
        for _ in range(a.steps):
            NOOP.pskv_wait(1, NOOP.pskv_push_nocopy(1, 0, None, n, ga), 100)
            NOOP.pskv_wait(1, NOOP.pskv_pull(1, 0, None, n, oa), 100)
        bare.append((time.process_time() - t0) / a.steps * 1e6)
        print("package %.2f us/step, bare ctypes calls %.2f us/step" % (pk[-1], bare[-1]),
              flush=True)
    p, b = statistics.median(pk), statistics.median(bare)
    print("package_us=%.2f bare_us=%.2f added_us=%.2f runs=%d steps=%d"
          % (p, b, p - b, a.runs, a.steps))


if __name__ == "__main__":
    main()
