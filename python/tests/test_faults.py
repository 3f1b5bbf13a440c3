"""Waits under faults: Ctrl-C during a wait and during a barrier, a server killed
while Python waits, other Python threads running during a blocking call (the GIL
is released), a Worker used across fork()."""

import os
import signal
import threading
import time
import tracemalloc

import numpy as np
import pytest

import pskv
import pskv.testing


def _sigint_after(seconds):
    t = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    t.start()
    return t


def test_ctrl_c_during_wait():
    """A push to a bsp table of two workers is answered only when the clock closes,
    which never happens here: SIGINT must still end the wait within 0.5 s."""
    c2 = pskv.testing.LocalCluster(servers=1, workers=2)
    try:
        w0, w1 = pskv.testing.open_workers(c2.address, 2, request_timeout_ms=20000)
        with w0, w1:
            t = w0.table("bsp", size=16, updater="sum", consistency="bsp")
            w1.table("bsp", size=16, updater="sum", consistency="bsp")
            h = t.push(np.ones(16, np.float32))
            w0.clock()
            _sigint_after(0.3)
            t0 = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                h.wait()
            late = time.monotonic() - t0 - 0.3
            assert late < 0.5, "KeyboardInterrupt %.3f s after SIGINT" % late
            assert not h.done()                   # still in flight, the handle still valid
            w1.clock()                            # now the clock closes
            h.wait(timeout=10)
    finally:
        c2.stop()


def test_ctrl_c_during_barrier_and_gil_released():
    """A barrier the other worker never reaches: another Python thread keeps counting
    meanwhile (the GIL is released), and SIGINT ends it within 0.5 s."""
    with pskv.testing.LocalCluster(servers=1, workers=2) as c:
        w0, w1 = pskv.testing.open_workers(c.address, 2)
        with w0, w1:
            count = [0]
            stop = threading.Event()

            def counter():
                while not stop.is_set():
                    count[0] += 1

            th = threading.Thread(target=counter)
            th.start()
            try:
                t0 = time.monotonic()
                with pytest.raises(pskv.TimeoutError, match="barrier"):
                    w0.barrier(timeout=2.0)
                took = time.monotonic() - t0
            finally:
                stop.set()
                th.join()
            assert 1.9 < took < 3.5
            assert count[0] > 100000, "the counting thread barely ran: %d" % count[0]

            _sigint_after(0.3)
            t0 = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                w0.barrier(timeout=3.0)
            assert time.monotonic() - t0 - 0.3 < 0.5
            with pytest.raises(pskv.ClosedError, match="barrier\\(\\) was interrupted"):
                w0.clock()
            w0.close()                            # lets the barrier end first
            del w1


def test_server_killed_during_wait():
    """The server stops answering (SIGSTOP) and is killed while Python waits: the
    wait raises within the request time-out plus one second, and nothing stays held
    by the package or the library."""
    rt = 2000
    with pskv.testing.LocalCluster(servers=1, workers=1) as c:
        with pskv.Worker(scheduler=c.address, request_timeout_ms=rt, retry_ms=0) as w:
            t = w.table("k", size=1 << 16, updater="sum")
            out = np.zeros(1 << 16, np.float32)
            t.pull(out=out).wait()
            tracemalloc.start()
            before = tracemalloc.take_snapshot()
            c.procs["server-0"].send_signal(signal.SIGSTOP)
            t0 = time.monotonic()
            h = t.pull(out=out)
            threading.Timer(0.3, c.kill, ("server-0",)).start()
            with pytest.raises(pskv.Error) as e:
                h.wait()
            took = time.monotonic() - t0
            assert took < rt / 1000 + 1, "raised after %.2f s" % took
            assert e.value.name in ("PSKV_ETIMEDOUT", "PSKV_ENET", "PSKV_ELOST")
            with pytest.raises(pskv.Error):          # waiting again: the same error
                h.wait()
            del h, e
            held = w.held()
            assert (held["requests"], held["views"], held["kept_arrays"]) == (0, 0, 0)
            after = tracemalloc.take_snapshot()
            tracemalloc.stop()
            grown = sum(s.size_diff for s in after.compare_to(before, "filename")
                        if "pskv" in s.traceback[0].filename and s.size_diff > 0)
            assert grown < 16384, "the package kept %d bytes" % grown


def test_fork_refused_in_child(cluster):
    w = pskv.Worker(scheduler=cluster.address)
    t = w.table("f", size=4, updater="sum")
    r, wr = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: every call refused, nothing closed behind the parent's back
        code = 1
        try:
            t.push(np.ones(4, np.float32))
        except pskv.ForkError as e:
            code = 0 if "before fork()" in str(e) else 2
        except BaseException:
            code = 3
        os.write(wr, bytes([code]))
        os._exit(0)
    os.close(wr)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    os.close(r)
    assert got == b"\x00"
    t.push(np.ones(4, np.float32)).wait()      # the parent's worker is intact
    assert np.all(t.pull().wait() == 1)
    w.close()
