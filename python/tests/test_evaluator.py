"""pskv.Evaluator against a real job: it sees each new snapshot of a worker's
table, its reports reach the scheduler (which logs them), and the iteration ends
when the job does; with --early-stop-metric the worker hears StopRequested."""

import threading
import time

import numpy as np
import pytest

import pskv
import pskv.testing


def test_evaluator_snapshots_and_reports():
    with pskv.testing.LocalCluster(servers=1, workers=1, evaluators=1) as c:
        opened = {}

        def open_ev():
            opened["ev"] = pskv.Evaluator(scheduler=c.address)

        th = threading.Thread(target=open_ev)
        th.start()
        w = pskv.Worker(scheduler=c.address, rank=0)
        th.join(60)
        ev = opened["ev"]
        assert ev.rank == -1
        t = w.table("m", size=100, updater="sum", consistency="bsp")
        seen = []

        def evaluate():
            te = ev.table("m", size=100, updater="sum", consistency="bsp")
            out = np.zeros(100, np.float32)
            for snap in ev.snapshots(te, out=out, poll=0.01):
                # bsp: a consistent snapshot holds exactly `clock` pushes of ones
                assert np.all(out == snap.clock), (snap, out[:3])
                seen.append(snap.clock)
                ev.report(snap.clock, epoch=snap.clock / 10, val_loss=1.0 / (1 + snap.clock),
                          val_accuracy=0.5)

        et = threading.Thread(target=evaluate)
        et.start()
        for _ in range(30):
            h = t.push(np.ones(100, np.float32))
            w.clock()
            h.wait(timeout=10)
            time.sleep(0.02)
        w.close()
        et.join(60)
        assert not et.is_alive(), "the evaluator did not see the job end"
        ev.close()
        assert len(seen) >= 2 and seen == sorted(seen)
        assert "evaluation" in c.log("scheduler") and "val_accuracy 0.5000" in c.log("scheduler")


def test_early_stop_reaches_python_as_stop_requested():
    """The evaluator's reports stop improving: the scheduler stops the job, and the
    worker's next step raises pskv.StopRequested with the scheduler's reason."""
    args = ["--early-stop-metric", "val_loss", "--patience", "1"]
    with pskv.testing.LocalCluster(servers=1, workers=1, evaluators=1, scheduler_args=args) as c:
        opened = {}
        th = threading.Thread(target=lambda: opened.update(ev=pskv.Evaluator(scheduler=c.address)))
        th.start()
        w = pskv.Worker(scheduler=c.address, rank=0)
        th.join(60)
        ev = opened["ev"]
        t = w.table("m", size=10, updater="sum")
        ev.report(1, epoch=0.1, val_loss=1.0, val_accuracy=0.5)
        ev.report(2, epoch=0.2, val_loss=2.0, val_accuracy=0.4)   # worse: patience 1 is out
        end = time.monotonic() + 20
        with pytest.raises(pskv.StopRequested) as e:
            while time.monotonic() < end:
                w.check_stop()          # what DistributedOptimizer.step() does first
                t.push(np.ones(10, np.float32)).wait(timeout=10)
                w.clock()
                time.sleep(0.02)
        assert e.value.reason
        w.close()
        ev.close()
