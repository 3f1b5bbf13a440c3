"""Push and pull through Python against real daemons: exact sums over dense and
sparse tables under async, ssp and bsp (the check app's invariants), zero copy,
views and push buffers, and bad input refused before anything is sent."""

import ctypes
import threading
import tracemalloc

import numpy as np
import pytest

import pskv
from pskv import _lib


@pytest.mark.parametrize("consistency", ["async", "ssp:2", "bsp"])
def test_exact_sums_dense_and_sparse(cluster2, consistency):
    """Every push of +1 (dense) and of key-dependent values (sparse) reaches the
    sum updater once: after R rounds the pulled values are exactly R x pushed."""
    R = 20
    with pskv.Worker(scheduler=cluster2.address, request_timeout_ms=10000) as w:
        d = w.table("d", size=5000, updater="sum", consistency=consistency)
        s = w.table("s", kind="sparse", width=3, updater="sum", consistency=consistency)
        keys = np.array([7, 1 << 33, 12345678901, 2], dtype=np.uint64)
        sv = np.arange(12, dtype=np.float32)
        g = np.ones(5000, np.float32)
        for _ in range(R):
            hs = [d.push(g), s.push(sv, keys=keys)]
            w.clock()
            for h in hs:
                h.wait(timeout=10)
        out = d.pull().wait(timeout=10)
        assert np.array_equal(out, np.full(5000, R, np.float32))
        got = s.pull(keys=keys).wait(timeout=10)
        assert np.array_equal(got, R * sv)
        allk, allv = s.pull_all()
        order = np.argsort(allk)
        assert np.array_equal(allk[order], np.sort(keys))
        assert allv.shape == (4, 3)


def test_pull_into_out_keeps_its_address(cluster):
    with pskv.Worker(scheduler=cluster.address) as w:
        t = w.table("z", size=4096, updater="sum")
        out = np.zeros(4096, np.float32)
        addr = out.ctypes.data
        t.push(np.full(4096, 3, np.float32)).wait()
        res = t.pull(out=out).wait()
        assert res is out and out.ctypes.data == addr
        assert np.all(out == 3)


def test_nocopy_push_sends_from_callers_memory(cluster):
    """copy=False: the library sends from the caller's array (its own counter of
    pushes lent says so) and the package keeps the array alive until the push is
    over; after the wait the array is the caller's again, so changing it reaches
    nothing. copy=True: the library's copy, the array free at once."""
    with pskv.Worker(scheduler=cluster.address) as w:
        t = w.table("nc", size=1 << 16, updater="sum")
        a = np.full(1 << 16, 1, np.float32)
        lent = w.held()["lent"]
        h = t.push(a, copy=False)
        assert w.held()["lent"] == lent + 1          # sent from a's memory, not a copy
        assert w.held()["kept_arrays"] == 1          # the worker holds a until the push ends
        h.wait()
        assert w.held()["kept_arrays"] == 0
        a[:] = 5                                     # after the wait: the caller's again
        b = np.full(1 << 16, 1, np.float32)
        h2 = t.push(b)                               # copy=True: the library has its copy
        b[:] = 100
        assert w.held()["lent"] == lent + 1          # copy=True lent nothing
        h2.wait()
        assert np.all(t.pull().wait() == 2)


def test_tracemalloc_peak_over_16mib_pulls(cluster):
    n = 4 << 20  # 16 MiB of floats
    with pskv.Worker(scheduler=cluster.address) as w:
        t = w.table("big", size=n, updater="sum")
        out = np.zeros(n, np.float32)
        t.pull(out=out).wait()
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            for _ in range(20):
                t.pull(out=out).wait(timeout=30)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert peak < 64 * 1024, "a pull into out allocated %d bytes" % peak


def test_view_and_push_buffer(cluster):
    with pskv.Worker(scheduler=cluster.address, shm=1) as w:
        t = w.table("v", size=1000, updater="sum")
        with t.push_buffer() as b:
            b.numpy()[:] = 2
        b.handle.wait()
        with t.pull_view() as v:
            a = v.numpy()
            assert np.all(a == 2)
            assert not a.flags.writeable
        assert w.held()["views"] == 1          # a still references the view's memory
        assert np.all(a == 2)                  # ... which is still held, not freed
        del a
        assert w.held()["views"] == 0          # given back once the last array died
        with pytest.raises(pskv.ClosedError, match="outside its with block"):
            v.numpy()
        with pytest.raises(pskv.ClosedError):
            b.numpy()
        # an array over a push buffer outliving the block: refused, dropped unsent
        with pytest.raises(BufferError, match="still referenced"):
            with t.push_buffer() as b2:
                keep = b2.numpy()
                keep[:] = 1
        assert w.held()["push_buffers"] == 0
        assert np.all(t.pull().wait() == 2)
        # a failing block drops the buffer
        with pytest.raises(RuntimeError):
            with t.push_buffer() as b3:
                b3.numpy()[:] = 9
                raise RuntimeError("boom")
        held = w.held()
        del held["lent"]
        assert held == {"requests": 0, "views": 0, "push_buffers": 0, "draining": 0,
                        "kept_arrays": 0}


def test_bad_input_named_before_sending(cluster):
    with pskv.Worker(scheduler=cluster.address) as w:
        d = w.table("bad", size=8, updater="sum")
        s = w.table("bads", kind="sparse", updater="sum")
        f = np.ones(8, np.float32)
        with pytest.raises(TypeError, match="values: numpy dtype float64"):
            d.push(np.ones(8))
        with pytest.raises(ValueError, match="not contiguous"):
            d.push(np.ones(16, np.float32)[::2])
        with pytest.raises(ValueError, match="has 7 floats, expected 8"):
            d.push(np.ones(7, np.float32))
        with pytest.raises(ValueError, match="keys: negative key -3"):
            s.push(np.ones(2, np.float32), keys=np.array([1, -3], np.int64))
        with pytest.raises(TypeError, match="keys: numpy dtype int32"):
            s.push(np.ones(1, np.float32), keys=np.array([1], np.int32))
        with pytest.raises(ValueError, match="sparse: keys are required"):
            s.push(np.ones(1, np.float32))
        with pytest.raises(TypeError, match="out: expected a numpy float32"):
            d.pull(out=[0.0] * 8)
        with pytest.raises(ValueError, match="out: the array is read-only"):
            ro = np.zeros(8, np.float32)
            ro.flags.writeable = False
            d.pull(out=ro)
        with pytest.raises(TypeError, match="unknown option 'learning_rate'"):
            w.table("x", size=4, learning_rate=0.1)
        with pytest.raises(TypeError, match="option 'lr' must be a number"):
            w.table("x", size=4, lr="fast")
        assert w.traffic(d)["sent"] == 0            # nothing of it was sent
        d.push(f).wait()                            # and the worker is fine
        # the library's refusals arrive as exceptions carrying its message
        with pytest.raises(pskv.TableError, match="table_open 'bad'") as e:
            w.table("bad", size=8, updater="adam")
        assert e.value.name == "PSKV_EMISMATCH"
        with pytest.raises(pskv.InvalidArgumentError):
            d.push(np.full(8, np.nan, np.float32)).wait()


def test_layout_mismatch_refused_naming_the_field():
    class Bad(ctypes.Structure):
        _fields_ = [(f, t) for f, t in _lib.Config._fields_]
    Bad._fields_  # same fields: accepted
    _lib.check_layout(_lib.lib, {"pskv_config": Bad})

    class Swapped(ctypes.Structure):
        _fields_ = [("scheduler", ctypes.c_char_p), ("advertise", ctypes.c_char_p),
                    ("rank", ctypes.c_int)] + _lib.Config._fields_[3:]
    with pytest.raises(ImportError, match=r"pskv_config\.advertise is at offset 16 in libpskv"):
        _lib.check_layout(_lib.lib, {"pskv_config": Swapped})

    class Short(ctypes.Structure):
        _fields_ = _lib.Config._fields_[:-1]
    with pytest.raises(ImportError, match="sizeof\\(pskv_config\\)"):
        _lib.check_layout(_lib.lib, {"pskv_config": Short})


def test_threads_sharing_a_worker(cluster):
    """Four threads push and pull through one Worker: serialised, exact."""
    with pskv.Worker(scheduler=cluster.address) as w:
        t = w.table("th", size=256, updater="sum")
        errs = []

        def run():
            try:
                g = np.ones(256, np.float32)
                out = np.empty(256, np.float32)
                for _ in range(50):
                    t.push(g).wait()
                    t.pull(out=out).wait()
            except Exception as e:  # pragma: no cover - reported below
                errs.append(e)

        ths = [threading.Thread(target=run) for _ in range(4)]
        for th in ths:
            th.start()
        for th in ths:
            th.join(60)
        assert not errs
        assert np.all(t.pull().wait() == 200)


def test_closed_worker_raises(cluster):
    w = pskv.Worker(scheduler=cluster.address)
    t = w.table("c", size=4, updater="sum")
    w.close()
    w.close()
    with pytest.raises(pskv.ClosedError, match="closed"):
        t.push(np.ones(4, np.float32))
