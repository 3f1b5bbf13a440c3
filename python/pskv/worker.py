"""pskv.Worker: a libpskv worker handle, its tables and the blocking calls.

Threads: a libpskv handle is used by one thread at a time, and ctypes releases
the GIL inside every call, so each Worker serialises its calls with its own
lock: two Python threads sharing a Worker take turns, never crash.

Waits (Handle.wait, View) go in slices of SLICE_MS: between slices the
interpreter runs its signal handlers, so Ctrl-C raises KeyboardInterrupt within
a slice and the request stays in flight. Calls the library cannot resume after a
time-out (open, table open, barrier, allreduce, checkpoint) run in a helper
thread while the caller waits in slices; interrupted, the Worker is left unusable
(ClosedError) until close(), which first lets that call end.

Fork: a Worker opened before fork() belongs to the parent (its ZeroMQ sockets
and threads do not cross fork); in the child every call raises ForkError and
nothing is closed behind the parent's back.
"""

import atexit
import ctypes
import os
import threading
import time
import weakref

from . import _lib, errors
from .table import Table

L = _lib.lib
SLICE_MS = 100
_ETIMEDOUT = 3

_open = weakref.WeakSet()


def _after_fork_in_child():
    for w in list(_open):
        w._ptr = None
        w._forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def _setfields(struct, kwargs, what, names):
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError("%s: unknown option '%s' (known: %s)"
                            % (what, k, ", ".join(sorted(names))))
        if v is None:
            continue
        if isinstance(v, str):
            v = v.encode()
        elif isinstance(v, bool):
            v = int(v)
        try:
            setattr(struct, k, v)
        except TypeError:
            raise TypeError("%s: option '%s' must be %s, got %r"
                            % (what, k, _kind_of(struct, k), v)) from None


def _kind_of(struct, field):
    t = dict(struct._fields_)[field]
    if t is ctypes.c_char_p:
        return "a str"
    if t in (ctypes.c_float, ctypes.c_double):
        return "a number"
    return "an int"


def run_interruptible(fn, args, on_late=None):
    """fn(*args) in a helper thread while the caller waits in slices (Ctrl-C
    raises at once in the caller). Returns fn's result. When the caller is
    interrupted, on_late(result) runs in the helper once fn returns, and the
    helper thread is returned as the exception's .pskv_helper."""
    box = {}
    done = threading.Event()
    mu = threading.Lock()

    def run():
        rc = fn(*args)
        with mu:
            box["rc"] = rc
            late = box.get("abandoned")
            done.set()
        if late and on_late:
            on_late(rc)

    t = threading.Thread(target=run, name="pskv-call", daemon=True)
    t.start()
    try:
        while not done.wait(SLICE_MS / 1000.0):
            pass
    except BaseException as e:
        with mu:
            if not done.is_set():
                box["abandoned"] = True
                e.pskv_helper = t
                raise
        # the call ended as the signal came: use its result
    return box["rc"]


class Worker:
    """A worker of a pskv job (pskv_worker_open). Keyword arguments are the fields
    of pskv_config (scheduler="HOST:PORT", rank, request_timeout_ms, window, shm,
    evaluator, ...); unknown names raise TypeError. A context manager; closed at
    exit if still open."""

    def __init__(self, **config):
        cfg = _lib.Config()
        L.pskv_config_init(ctypes.byref(cfg))
        _setfields(cfg, config, "Worker", {f for f, _ in _lib.Config._fields_})
        self._cfg = cfg  # keeps the encoded strings alive
        self._lock = threading.RLock()
        self._ptr = None
        self._forked = False
        self._stuck = None  # (helper thread, call name) after an interrupted call
        self._keep = {}     # ts -> objects the library may still touch
        self._release = []  # view timestamps whose memory no array references any more
        self._tables = {}
        self._closing = []  # weakref.WeakMethod: called before the handle is freed
        self.request_timeout_ms = cfg.request_timeout_ms
        box = ctypes.c_void_p()

        def close_late(rc):
            if rc == 0:
                L.pskv_worker_close(ctypes.byref(box))

        rc = run_interruptible(L.pskv_worker_open, (ctypes.byref(cfg), ctypes.byref(box)),
                               close_late)
        if rc < 0:
            raise errors.error_for(rc, "pskv_worker_open (scheduler %s): %s" % (
                (cfg.scheduler or b"$PSKV_SCHEDULER").decode(),
                L.pskv_strerror(rc).decode()))
        self._ptr = box.value
        self._pid = os.getpid()
        self.rank = L.pskv_rank(self._ptr)
        self.num_workers = L.pskv_num_workers(self._ptr)
        self.num_servers = L.pskv_num_servers(self._ptr)
        self.num_replicas = L.pskv_num_replicas(self._ptr)
        _open.add(self)
        self._finalizer = weakref.finalize(self, Worker._close_ptr, [self._ptr], self._pid)

    # ---- life ---------------------------------------------------------------

    @staticmethod
    def _close_ptr(cell, pid):
        if cell[0] and os.getpid() == pid:
            p = ctypes.c_void_p(cell[0])
            cell[0] = None
            return L.pskv_worker_close(ctypes.byref(p))
        return 0

    def close(self):
        """Waits (bounded) for requests in flight, tells the scheduler this worker
        is done, frees the handle. Idempotent. Raises the first error seen."""
        if self._forked:
            return
        with self._lock:
            if self._stuck:
                self._stuck[0].join()  # the interrupted call ends at its own time-out
                self._stuck = None
            if self._ptr is None:
                return
            for ref in self._closing:
                fn = ref()
                if fn is not None:
                    fn()
            self._closing.clear()
            self._ptr = None
            rc = self._finalizer()
            self._keep.clear()
            self._release.clear()
        if rc and rc < 0:
            raise errors.error_for(rc, "pskv_worker_close: " + L.pskv_strerror(rc).decode())

    def _before_close(self, method):
        """method() runs in close() while the handle is still open (a
        DistributedOptimizer copies its weights out of the library's memory); held
        weakly."""
        self._closing.append(weakref.WeakMethod(method))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def closed(self):
        return self._ptr is None

    def _h(self):
        """The handle, or the reason there is none."""
        p = self._ptr
        if p is None or self._stuck:
            self._dead()
        return p

    def _dead(self):
        if self._forked:
            raise errors.ForkError("pskv: this Worker was opened in process %d before "
                                   "fork(); open a new Worker in the child (pid %d)"
                                   % (self._pid, os.getpid()))
        if self._stuck:
            raise errors.ClosedError("pskv: %s() was interrupted and may still be running "
                                     "in the library; close() this Worker" % self._stuck[1])
        raise errors.ClosedError("pskv: the Worker is closed", 12)

    def _fail(self, rc, what):
        """The exception for a failed call, with pskv_last_error's text."""
        msg = L.pskv_last_error(self._ptr) if self._ptr else None
        msg = msg.decode(errors="replace") if msg else L.pskv_strerror(rc).decode()
        return errors.error_for(rc, "%s: %s" % (what, msg))

    def _blocking(self, name, fn, *args):
        """fn(handle, *args) under the lock, interruptible (see the module's comment)."""
        with self._lock:
            p = self._h()
            self._flush()
            try:
                rc = run_interruptible(fn, (p,) + args)
            except BaseException as e:
                t = getattr(e, "pskv_helper", None)
                if t is not None:
                    self._stuck = (t, name)
                raise
            if rc < 0:
                raise self._fail(rc, name)
            return rc

    def _flush(self):
        """Gives back view memory no array references any more (lock held)."""
        while self._release:
            L.pskv_view_release(self._ptr, self._release.pop())

    def _forget(self, ts):
        self._keep.pop(ts, None)

    def _prune(self):
        """Drops what finished requests kept alive (handles never waited on)."""
        for ts in list(self._keep):
            if not L.pskv_request_pending(self._ptr, ts):
                del self._keep[ts]

    # ---- tables and steps ---------------------------------------------------

    def table(self, name, **opts):
        """Opens (creating on first open) table `name`. Keyword arguments are the
        fields of pskv_table_opts: kind ("dense", default when size is given, or
        "sparse"), size, width, updater, lr, momentum, l2, ..., consistency."""
        return Table(self, name, opts)

    def clock(self):
        """Ends this worker's iteration (pskv_clock)."""
        with self._lock:
            rc = L.pskv_clock(self._h())
            if rc < 0:
                raise self._fail(rc, "clock")

    @property
    def current_clock(self):
        return L.pskv_current_clock(self._h())

    @property
    def values_clock(self):
        return L.pskv_values_clock(self._h())

    def wait_all(self, timeout=None):
        """Waits for every request in flight (in slices); raises the first error."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                sl = SLICE_MS if end is None else \
                    max(1, min(SLICE_MS, int((end - time.monotonic()) * 1000)))
                rc = L.pskv_wait_all(self._h(), sl)
                h = _lib.Held()
                L.pskv_held_get(self._ptr, ctypes.byref(h))
                if rc != -_ETIMEDOUT or h.requests == 0:  # else: requests still in flight
                    self._keep.clear()
                    if rc < 0:
                        raise self._fail(rc, "wait_all")
                    return
                if end is not None and time.monotonic() >= end:
                    raise self._fail(rc, "wait_all")

    def barrier(self, timeout=None):
        """Waits for this worker's requests, then for every worker (pskv_barrier).
        timeout in seconds (default: the request time-out x 4)."""
        ms = int(timeout * 1000) if timeout is not None else 4 * self.request_timeout_ms
        self._blocking("barrier", L.pskv_barrier, ms)
        self._keep.clear()

    def allreduce(self, array, op="sum", table=None):
        """In-place all-reduce of a float32 array or tensor among the job's workers
        (pskv_allreduce); op "sum" or "mean". Returns array."""
        from . import arrays
        ops = {"sum": 1, "mean": 2}
        if op not in ops:
            raise ValueError("allreduce: op must be 'sum' or 'mean', got %r" % (op,))
        addr, n = arrays.values(array, "allreduce: array", writable=True)
        tid = -1 if table is None else table.id
        self._blocking("allreduce", L.pskv_allreduce, tid, addr, n, ops[op])
        return array

    def checkpoint(self, timeout=600.0):
        """Asks for a checkpoint of every server and waits; returns its number."""
        return self._blocking("checkpoint", L.pskv_checkpoint, int(timeout * 1000))

    def set_progress(self, epoch, step, position):
        with self._lock:
            L.pskv_set_progress(self._h(), int(epoch), int(step), int(position))

    def resume_progress(self):
        """(epoch, step, position) in a job resumed from a checkpoint, else None."""
        e, s, p = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
        with self._lock:
            if L.pskv_resume_progress(self._h(), ctypes.byref(e), ctypes.byref(s),
                                      ctypes.byref(p)) != 1:
                return None
        return e.value, s.value, p.value

    def stop_requested(self):
        """The scheduler's reason when it asked the job to stop early, else None."""
        with self._lock:
            if L.pskv_stop_requested(self._h(), None, 0) != 1:  # every step: no buffer
                return None
            buf = ctypes.create_string_buffer(512)
            L.pskv_stop_requested(self._ptr, buf, len(buf))
        return buf.value.decode(errors="replace")

    def check_stop(self):
        """Raises pskv.StopRequested when the scheduler asked the job to stop."""
        why = self.stop_requested()
        if why is not None:
            raise errors.StopRequested(why)

    def workers_active(self):
        with self._lock:
            return L.pskv_workers_active(self._h())

    def held(self):
        """What the handle holds by the library's counters (pskv_held) plus the
        arrays the package keeps alive for requests in flight."""
        h = _lib.Held()
        with self._lock:
            self._flush()
            L.pskv_held_get(self._h(), ctypes.byref(h))
            return {"requests": h.requests, "views": h.views,
                    "push_buffers": h.push_buffers, "draining": h.draining,
                    "kept_arrays": len(self._keep), "lent": h.lent}

    def traffic(self, table=None):
        """Bytes sent and received (pskv_traffic_get), of one table or all."""
        t = _lib.Traffic()
        with self._lock:
            rc = L.pskv_traffic_get(self._h(), -1 if table is None else table.id,
                                    ctypes.byref(t))
            if rc < 0:
                raise self._fail(rc, "traffic")
        return {"sent": t.sent, "sent_raw": t.sent_raw, "received": t.received,
                "received_raw": t.received_raw, "filter_s": t.filter_s}


@atexit.register
def _close_all():
    for w in list(_open):
        try:
            w.close()
        except Exception:
            pass
