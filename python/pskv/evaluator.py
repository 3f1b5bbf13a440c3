"""pskv.Evaluator: validation alongside training, from Python.

It joins the job as its evaluator (pskv_config.evaluator = 1: no rank, no clocks;
start the scheduler with --evaluators 1), opens the model's table as the workers
do, and snapshots() pulls whole snapshots while they train, as pskv-evaluator does
(worker/apps/train/app_eval.c): under bsp a snapshot is consistent when every
server answered at the same closed clock (else it is pulled again); under ssp and
async its clock is the slowest worker's in the replies' vector clock. Each new
snapshot is yielded once; report() sends val_loss / val_accuracy (and AUC) to the
scheduler, whose --early-stop-metric may stop the job on it. The iteration ends
when the job does (STOP, or every worker finished or died).
"""

import ctypes
import math
import time

from . import _lib, errors
from .worker import Worker

L = _lib.lib
_VC_MAX = 1024


class Snapshot:
    """One consistent snapshot: clock (bsp: the closed clock; ssp/async: the slowest
    worker's), lo and hi (the oldest and newest clock over servers), worker_clocks."""

    def __init__(self, clock, lo, hi, worker_clocks):
        self.clock, self.lo, self.hi, self.worker_clocks = clock, lo, hi, worker_clocks

    def __repr__(self):
        return "Snapshot(clock=%d, lo=%d, hi=%d)" % (self.clock, self.lo, self.hi)


class Evaluator(Worker):
    """A Worker with evaluator=1. Keyword arguments as Worker's."""

    def __init__(self, **config):
        config["evaluator"] = 1
        self._ended = False
        super().__init__(**config)

    def close(self):
        """As Worker.close(), except that once the job ended (snapshots() returned on
        it) a pull left in flight to servers already gone is not an error."""
        try:
            super().close()
        except (errors.TimeoutError, errors.NetworkError, errors.ClosedError):
            if not self._ended:
                raise

    def job_ending(self):
        with self._lock:
            return bool(L.pskv_job_ending(self._h()))

    @property
    def early_stop_metric(self):
        with self._lock:
            return L.pskv_early_stop_metric(self._h()).decode()

    def _clocks(self, bsp):
        lo, hi = ctypes.c_int64(), ctypes.c_int64()
        vc = (ctypes.c_int64 * _VC_MAX)()
        with self._lock:
            n = L.pskv_values_clocks(self._h(), ctypes.byref(lo), ctypes.byref(hi), vc, _VC_MAX)
        wc = list(vc[:n])
        clock = lo.value if bsp or not wc else min(wc)
        return Snapshot(clock, lo.value, hi.value, wc), (not bsp or lo.value == hi.value)

    def snapshots(self, table, out, keys=None, poll=0.05, max_retakes=1000):
        """Yields a Snapshot each time `out` (float32, written in place) holds a new
        one of `table`; ends when the job does. bsp is read from the table's
        consistency option."""
        bsp = (table.opts.consistency or b"").decode() == "bsp"
        last, retakes = None, 0
        while not self.job_ending():
            h = table.pull(out=out, keys=keys)
            while not h.done():
                if self.job_ending():
                    self._ended = True
                    return
                time.sleep(0.002)
            h.wait()
            snap, consistent = self._clocks(bsp)
            if not consistent:
                retakes += 1
                if retakes > max_retakes:
                    raise RuntimeError("evaluator: no consistent bsp snapshot in %d pulls"
                                       % max_retakes)
                time.sleep(0.002)
                continue
            retakes = 0
            if snap.clock == last:
                time.sleep(poll)
                continue
            last = snap.clock
            yield snap
        self._ended = True

    def report(self, clock, epoch=0.0, val_loss=math.nan, val_accuracy=math.nan,
               val_auc=math.nan):
        """Reports one evaluation of the snapshot at `clock` to the scheduler."""
        with self._lock:
            rc = L.pskv_report_eval(self._h(), int(clock), float(epoch), float(val_loss),
                                    float(val_accuracy), float(val_auc))
            if rc < 0:
                raise self._fail(rc, "report")
