"""Table.pushpull and Table.pushpull_view (pskv_pushpull: a push answered by the
rows' values after it) against real daemons: exact sums under async, ssp and
bsp, the view form, a refused push leaving out untouched, bad input refused
before anything is sent, and the call through shared memory (shm=1)."""

import numpy as np
import pytest

import pskv


@pytest.mark.parametrize("consistency", ["async", "ssp:2", "bsp"])
def test_pushpull_exact_sums_dense_and_sparse(cluster2, consistency):
    """Every pushpull of +1 (dense, over both servers) and of key-dependent values
    (sparse) reaches the sum updater once, and each one's values are the sums after
    it: R x pushed after R rounds. clock=True ends the clock with the push (bsp:
    the values once the clock closed), as a step would; without it a bsp pull is
    of the clock it is in (the values before the clock's pushes)."""
    R = 12
    with pskv.Worker(scheduler=cluster2.address, request_timeout_ms=10000) as w:
        d = w.table("d", size=5000, updater="sum", consistency=consistency)
        s = w.table("s", kind="sparse", width=3, updater="sum", consistency=consistency)
        keys = np.array([7, 1 << 33, 12345678901, 2], dtype=np.uint64)
        sv = np.arange(12, dtype=np.float32)
        g = np.ones(5000, np.float32)
        out = np.zeros(5000, np.float32)
        for r in range(1, R + 1):
            hs = s.pushpull(sv, keys=keys)  # no clock: this clock's values
            hd = d.pushpull(g, out=out, clock=True, copy=r % 2 == 0)
            assert hd.wait(timeout=10) is out
            assert np.array_equal(out, np.full(5000, r, np.float32)), (r, out[:4])
            seen = r - 1 if consistency == "bsp" else r
            assert np.array_equal(hs.wait(timeout=10), seen * sv), (r, consistency)
        assert np.array_equal(d.pull().wait(timeout=10), np.full(5000, R, np.float32))
        assert np.array_equal(s.pull(keys=keys).wait(timeout=10), R * sv)
        assert w.held()["kept_arrays"] == 0


def test_pushpull_view(cluster):
    """The view form: the values in the library's memory, read in a with block;
    copy=False lends grad (kept alive by the Worker until the request is over)."""
    with pskv.Worker(scheduler=cluster.address) as w:
        t = w.table("pv", size=4096, updater="sum")
        g = np.full(4096, 2, np.float32)
        lent = w.held()["lent"]
        v = t.pushpull_view(g, copy=False)
        assert w.held()["lent"] == lent + 1 and w.held()["kept_arrays"] == 1
        with v:
            a = v.numpy()
            assert np.all(a == 2) and not a.flags.writeable
        assert w.held()["kept_arrays"] == 0
        del a
        assert w.held()["views"] == 0
        with pytest.raises(pskv.ClosedError, match="outside its with block"):
            v.numpy()
        with t.pushpull_view(g, clock=True) as v2:
            assert np.all(v2.numpy() == 4)


def test_pushpull_refused_push_leaves_out(cluster):
    """A NaN in the gradient: the server refuses the push and sends no values, so
    wait() raises and out keeps what it held; nothing was applied."""
    with pskv.Worker(scheduler=cluster.address) as w:
        t = w.table("nan", size=64, updater="sum")
        t.push(np.ones(64, np.float32)).wait()
        bad = np.ones(64, np.float32)
        bad[9] = np.nan
        out = np.full(64, -7, np.float32)
        h = t.pushpull(bad, out=out)
        with pytest.raises(pskv.InvalidArgumentError, match="non-finite"):
            h.wait(timeout=10)
        assert np.all(out == -7)
        with pytest.raises(pskv.InvalidArgumentError):
            with t.pushpull_view(bad) as v:
                v.numpy()
        assert w.held()["views"] == 0
        assert np.all(t.pull().wait() == 1)


def test_pushpull_bad_input_named_before_sending(cluster):
    with pskv.Worker(scheduler=cluster.address) as w:
        d = w.table("ppbad", size=8, updater="sum")
        s = w.table("ppbads", kind="sparse", width=2, updater="sum")
        f = np.ones(8, np.float32)
        with pytest.raises(TypeError, match="pushpull with 'ppbad': grad: numpy dtype float64"):
            d.pushpull(np.ones(8))
        with pytest.raises(ValueError, match="grad has 7 floats, expected 8"):
            d.pushpull(np.ones(7, np.float32))
        with pytest.raises(ValueError, match="grad: the array is not contiguous"):
            d.pushpull_view(np.ones(16, np.float32)[::2])
        with pytest.raises(ValueError, match="out has 4 floats, expected 8"):
            d.pushpull(f, out=np.zeros(4, np.float32))
        with pytest.raises(ValueError, match="out: the array is read-only"):
            ro = np.zeros(8, np.float32)
            ro.flags.writeable = False
            d.pushpull(f, out=ro)
        with pytest.raises(ValueError, match="out overlaps grad"):
            d.pushpull(f, out=f, copy=False)
        with pytest.raises(ValueError, match="keys: negative key -3"):
            s.pushpull(np.ones(4, np.float32), keys=np.array([1, -3], np.int64))
        with pytest.raises(ValueError, match="sparse: keys are required"):
            s.pushpull_view(np.ones(2, np.float32))
        assert w.traffic(d)["sent"] == 0 and w.traffic(s)["sent"] == 0
        assert w.held()["requests"] == 0
        assert np.all(d.pushpull(f, out=f).wait() == 1)  # copy=True: out may be grad


def test_pushpull_with_shm(cluster):
    """shm=1: a part of 64 KiB or more goes through shared memory both ways (the
    gradient into a region, the values after it written over it): exact sums into
    out and into a view, and a NaN refused with out untouched and no view held."""
    n = 20000  # 80 KiB: one part through shared memory
    with pskv.Worker(scheduler=cluster.address, shm=1) as w:
        t = w.table("ppshm", size=n, updater="sum")
        g = np.ones(n, np.float32)
        out = np.zeros(n, np.float32)
        for r in range(1, 4):
            assert t.pushpull(g, out=out, copy=r % 2 == 0).wait(timeout=10) is out
            assert np.all(out == r)
        with t.pushpull_view(g, clock=True) as v:
            assert np.all(v.numpy() == 4)
        bad = np.ones(n, np.float32)
        bad[n - 9] = np.nan
        out[:] = -7
        with pytest.raises(pskv.InvalidArgumentError, match="non-finite"):
            t.pushpull(bad, out=out).wait(timeout=10)
        assert np.all(out == -7)
        with pytest.raises(pskv.InvalidArgumentError, match="non-finite"):
            with t.pushpull_view(bad) as v:
                v.numpy()
        assert w.held()["views"] == 0
        assert np.all(t.pull().wait() == 4)


def test_held_views_bound_is_an_error(cluster):
    """Views held too long: at most PSKV_MAX_VIEWS (16) are held or in flight, each
    over TCP keeping its received frame; one more, a pull_view or a pushpull_view,
    fails at once naming the bound (an error, not a stall) and sends nothing; once
    the views are released new ones are taken again and nothing stays held."""
    import contextlib
    import time

    with pskv.Worker(scheduler=cluster.address, request_timeout_ms=10000) as w:
        t = w.table("hv", size=4096, updater="sum")
        g = np.ones(4096, np.float32)
        with contextlib.ExitStack() as stack:
            views = [stack.enter_context(t.pull_view()) for _ in range(15)]
            views.append(stack.enter_context(t.pushpull_view(g)))
            assert w.held()["views"] == 16
            for kind, call in (("pull_view", t.pull_view),
                               ("pushpull_view", lambda: t.pushpull_view(g))):
                t0 = time.monotonic()
                with pytest.raises(pskv.InvalidArgumentError,
                                   match="16 views held or in flight: release one first"):
                    call()
                assert time.monotonic() - t0 < 1.0, kind
            assert np.all(views[0].numpy() == 0) and np.all(views[-1].numpy() == 1)
        assert w.held()["views"] == 0
        with t.pull_view() as v:  # the refused pushpull_view pushed nothing
            assert np.all(v.numpy() == 1)
        assert w.held()["views"] == 0 and w.held()["requests"] == 0
