"""pskv.Table and what its calls return: Handle (a request in flight), View (a
pull into the library's memory) and PushBuffer (a push from it).

Lifetimes: a push with copy=False and a pull into `out` lend the caller's array
to the library; the Worker keeps it alive (by timestamp) until the request is
over, whether or not the Handle is waited on or kept. A View's memory stays held
while any array made from it is alive, and is given back at the Worker's next
call after the last one dies; the View itself refuses use after its `with` block.
A PushBuffer's memory is the library's again once sent: an array over it still
referenced when the block ends is an error (the buffer is dropped unsent).
"""

import ctypes
import sys
import time
import weakref

import numpy as np

from . import _lib, arrays, errors

L = _lib.lib
_ETIMEDOUT = 3
SLICE_MS = 100  # a wait's slice: Ctrl-C is seen between slices (worker.py's SLICE_MS)
_ndarray, _F32 = np.ndarray, np.dtype(np.float32)
_addressof, _from_buffer = ctypes.addressof, ctypes.c_char.from_buffer
_KINDS = {"dense": 1, "sparse": 2}
# the hot calls, bound once (a step's Python is a few attribute loads shorter)
_wait, _push, _push_nocopy, _pull = L.pskv_wait, L.pskv_push, L.pskv_push_nocopy, L.pskv_pull
_pushpull = L.pskv_pushpull
_PP_CLOCK, _PP_NOCOPY, _PP_VIEW = 1, 2, 4  # include/pskv/pskv.h's PSKV_PP_*
_torch = None  # the torch module, imported on the first torch() (pskv works without it)


def _frombuffer(buf):
    """A torch float32 tensor over a ctypes array (no copy)."""
    global _torch
    if _torch is None:
        import torch
        _torch = torch
    return _torch.frombuffer(buf, dtype=_torch.float32)


def _ready(w):
    """The open handle of Worker w, its finished lent buffers released first; raises
    when w is closed or stuck. Called with w._lock held, before a request is sent."""
    p = w._ptr
    if p is None or w._stuck:
        w._dead()
    if w._release:
        w._flush()
    return p


class Handle:
    """A request in flight: done() polls, wait(timeout) blocks (in slices, so
    Ctrl-C works) and returns the pull's array (None for a push), or raises the
    request's error. Waiting again returns (or raises) the same."""

    __slots__ = ("_w", "ts", "_out", "_state", "_err", "__weakref__")

    def __init__(self, w, ts, out=None):
        self._w, self.ts, self._out, self._state, self._err = w, ts, out, 0, None

    def _end(self, rc):
        self._w._forget(self.ts)
        self._state = 1
        if rc < 0:
            self._err = self._w._fail(rc, "request %d" % self.ts)
            self._out = None

    def done(self):
        """True once the request is over (succeeded or failed)."""
        if not self._state:
            w = self._w
            with w._lock:
                # 1 ms, not 0: pskv_wait(ts, 0) returns before taking in any reply
                rc = L.pskv_wait(w._h(), self.ts, 1)
                if rc != -_ETIMEDOUT or not L.pskv_request_pending(w._ptr, self.ts):
                    self._end(rc)
        return bool(self._state)

    def wait(self, timeout=None):
        """Waits until the request is over; timeout in seconds (None: until the
        library ends it, at the latest the request time-out). Raises
        pskv.TimeoutError when timeout passes first (the request stays in flight)."""
        if not self._state:
            w = self._w
            ts = self.ts
            if timeout is None:
                end, sl = None, SLICE_MS
            else:  # at least 1 ms: pskv_wait with 0 takes in no reply
                end = time.monotonic() + timeout
                sl = max(1, min(SLICE_MS, int(timeout * 1000)))
            while True:
                with w._lock:
                    p = w._ptr
                    if p is None or w._stuck:
                        w._dead()
                    rc = _wait(p, ts, sl)
                    if rc == 0:  # the common case, in as few steps as it takes
                        w._keep.pop(ts, None)
                        self._state = 1
                        return self._out  # no error: the state was 0
                    # -ETIMEDOUT is also a request that ended unanswered: over then
                    if rc != -_ETIMEDOUT or not L.pskv_request_pending(p, ts):
                        self._end(rc)
                        break
                    if end is not None:
                        left = end - time.monotonic()
                        if left <= 0:
                            raise w._fail(rc, "wait")
                        sl = max(1, min(100, int(left * 1000)))
        if self._err is not None:
            raise self._err
        return self._out


class View:
    """A pull into the library's memory (pskv_pull_view, or pskv_pushpull with
    PSKV_PP_VIEW), sent when the View is made; `with view:` waits for it and maps
    its values; numpy() / torch() give arrays over the library's memory
    (read-only by contract), valid while the array lives."""

    def __init__(self, table, count, ts, keys=None):
        self._t, self._w = table, table._w
        self._buf = None
        self._mapped = False
        self.count = count
        self._keys = keys
        self.ts = ts
        self._handle = Handle(table._w, ts)

    def __enter__(self):
        return self.map()

    def map(self, timeout=None):
        """Waits for the pull (as Handle.wait) and maps its values; returns self.
        What `with view:` does; the arrays made from it keep the Worker alive."""
        if self._buf is not None:
            return self
        if self._mapped:
            raise errors.ClosedError("pskv: View.map() after release()")
        self._handle.wait(timeout)
        w = self._w
        with w._lock:
            ptr = L.pskv_view(w._h(), self.ts)
            if not ptr:
                raise w._fail(-13, "view %d" % self.ts)
        buf = (ctypes.c_float * self.count).from_address(ptr)
        buf._worker = w  # not collected (its handle freed) under a live array
        weakref.finalize(buf, w._release.append, self.ts)
        self._buf = buf
        self._mapped = True
        return self

    def __exit__(self, *exc):
        self.release()

    def release(self):
        """Ends this View's use; its memory goes back once no array over it lives."""
        buf, self._buf = self._buf, None
        del buf
        w = self._w
        if w._ptr is not None and w._release:
            with w._lock:
                w._flush()

    def _mem(self, what):
        if self._buf is None:
            raise errors.ClosedError("pskv: View.%s() outside its with block (the view's "
                                     "memory may be given back)" % what)
        return self._buf

    def numpy(self):
        a = np.ctypeslib.as_array(self._mem("numpy"))
        a.flags.writeable = False
        return a

    def torch(self):
        return _frombuffer(self._mem("torch"))


class PushBuffer:
    """pskv_push_buffer: values written straight into the library's memory (shared
    memory with a server on this host when it can), sent when the `with` block ends
    without an exception (dropped when it raised). .handle is the push's Handle."""

    def __init__(self, table, keys, count, _k=None):
        self._t, self._w, self.count = table, table._w, count
        self._kaddr, self._nk, self._keys = _k or arrays.keys(keys, "push_buffer: keys")
        if not self._nk:
            self._nk = table._nkeys(0)
        w = self._w
        with w._lock:
            ptr = L.pskv_push_buffer(w._h(), table.id, self._kaddr or None, self._nk)
            if not ptr:
                raise w._fail(-1, "push_buffer of table '%s'" % table.name)
        self._ptr = ptr
        self._buf = (ctypes.c_float * count).from_address(ptr)
        self.handle = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if self._ptr is None:
            return
        if exc_type is not None:
            self.drop()
        else:
            self.send()

    def _mem(self, what):
        if self._buf is None:
            raise errors.ClosedError("pskv: PushBuffer.%s() after it was sent or dropped"
                                     % what)
        return self._buf

    def numpy(self):
        return np.ctypeslib.as_array(self._mem("numpy"))

    def torch(self):
        return _frombuffer(self._mem("torch"))

    def _give_back(self):
        buf, self._buf = self._buf, None
        refs = sys.getrefcount(buf) - 2  # buf and getrefcount's argument
        ptr, self._ptr = self._ptr, None
        return ptr, refs

    def send(self):
        """Pushes the buffer's values; returns the Handle."""
        self._mem("send")
        ptr, refs = self._give_back()
        w = self._w
        with w._lock:
            if refs > 0:
                L.pskv_push_buffer_drop(w._h(), ptr)
                raise BufferError("pskv: push buffer of table '%s': %d array(s) over its "
                                  "memory still referenced when sending; delete them (del) "
                                  "first: dropped unsent" % (self._t.name, refs))
            ts = L.pskv_push_buffer_send(w._h(), self._t.id, self._kaddr or None,
                                         self._nk, ptr)
            if ts < 0:
                raise w._fail(ts, "push_buffer send to table '%s'" % self._t.name)
        self.handle = Handle(w, ts)
        return self.handle

    def drop(self):
        """Gives the buffer back unsent."""
        if self._ptr is None:
            return
        ptr, _ = self._give_back()
        w = self._w
        with w._lock:
            if w._ptr is not None:
                L.pskv_push_buffer_drop(w._ptr, ptr)


class Table:
    """A table open on every server (pskv_table_open); made by Worker.table()."""

    def __init__(self, w, name, opts):
        o = _lib.TableOpts()
        L.pskv_table_opts_init(ctypes.byref(o))
        opts = dict(opts)
        kind = opts.pop("kind", None)
        if kind is None:
            kind = "dense" if opts.get("size") else "sparse"
        if kind not in _KINDS:
            raise ValueError("table '%s': kind must be 'dense' or 'sparse', got %r" % (name, kind))
        if kind == "dense" and not opts.get("size"):
            raise ValueError("table '%s': a dense table needs size > 0" % name)
        from .worker import _setfields
        _setfields(o, opts, "table '%s'" % name,
                   {f for f, _ in _lib.TableOpts._fields_} - {"kind"})
        o.kind = _KINDS[kind]
        self._w, self.name, self.kind = w, name, kind
        self.size, self.width = o.size, o.width
        self._floats = o.size * o.width if kind == "dense" else -1  # see _dense
        self.opts = o
        self._labels = self.labels(name)
        self.id = w._blocking("table_open '%s'" % name, L.pskv_table_open, name.encode(),
                              ctypes.byref(o))

    @staticmethod
    def labels(name):
        """The arguments' names in error messages, per operation: made once, not at
        every push and pull."""
        labels = {op: ("%s '%s'" % (op, name), "%s '%s': values" % (op, name),
                       "%s '%s': out" % (op, name), "%s '%s': keys" % (op, name))
                  for op in ("push to", "assign to", "pull from")}
        labels["pushpull"] = ("pushpull with '%s'" % name, "pushpull with '%s': grad" % name,
                              "pushpull with '%s': out" % name,
                              "pushpull with '%s': keys" % name)
        return labels

    def _nkeys(self, nk):
        if nk:
            return nk
        if self.kind != "dense":
            raise ValueError("table '%s' is sparse: keys are required" % self.name)
        return self.size

    def _dense(self, vals, keys):
        """The address of vals when a call is a dense table's whole step from a numpy
        array (keys None, float32 in native order, size * width floats, C-contiguous,
        writable, what the buffer protocol hands ctypes only for such an array), else
        0: then _args makes every check and names what is wrong. The same checks
        as _args', in fewer Python steps: a step's Python runs on cold caches beside
        the library's threads, where each step costs several times its warm time."""
        if keys is None and type(vals) is _ndarray and vals.dtype is _F32 and \
                vals.size == self._floats:
            try:
                return _addressof(_from_buffer(vals))
            except (TypeError, ValueError):  # read-only or not contiguous
                pass
        return 0

    def _args(self, vals, keys, op, writable=False):
        what, vlabel, olabel, klabel = self._labels[op]
        vaddr, nv = arrays.values(vals, olabel if writable else vlabel, writable)
        kaddr, nk, kobj = arrays.keys(keys, klabel)
        nk = self._nkeys(nk)
        if nv != nk * self.width:
            raise ValueError("%s: %s has %d floats, expected %d (%d keys x width %d)"
                             % (what, (olabel if writable else vlabel).rsplit(": ", 1)[1],
                                nv, nk * self.width,
                                nk, self.width))
        return vaddr, kaddr or None, nk, kobj

    def push(self, values, keys=None, copy=True):
        """Pushes values (float32, len(keys) * width, or a dense table's size * width
        when keys is None). copy=True: the library copies (values reusable at once);
        copy=False: sent from values' own memory, kept alive until the push is over."""
        w = self._w
        vaddr = self._dense(values, keys)
        if vaddr:
            kaddr, nk, kobj = None, self.size, None
        else:
            vaddr, kaddr, nk, kobj = self._args(values, keys, "push to")
        with w._lock:
            p = _ready(w)
            ts = (_push if copy else _push_nocopy)(p, self.id, kaddr, nk, vaddr)
            if ts < 0:
                raise w._fail(ts, "push to table '%s'" % self.name)
            if not copy:
                keep = w._keep
                keep[ts] = values if kobj is None else (values, kobj)
                if len(keep) > 256:
                    w._prune()
        return Handle(w, ts)

    def assign(self, values, keys=None):
        """Overwrites stored values and clears their optimizer state (pskv_assign)."""
        w = self._w
        vaddr, kaddr, nk, kobj = self._args(values, keys, "assign to")
        with w._lock:
            ts = L.pskv_assign(w._h(), self.id, kaddr, nk, vaddr)
            if ts < 0:
                raise w._fail(ts, "assign to table '%s'" % self.name)
        return Handle(w, ts)

    def pull(self, out=None, keys=None):
        """Pulls into out (float32, written in place; a new numpy array when None).
        The Handle's wait() returns out."""
        w = self._w
        if out is None:
            out = np.empty(self._nkeys(arrays.keys(keys, "pull: keys")[1]) * self.width,
                           dtype=np.float32)
        vaddr = self._dense(out, keys)
        if vaddr:
            kaddr, nk, kobj = None, self.size, None
        else:
            vaddr, kaddr, nk, kobj = self._args(out, keys, "pull from", True)
        with w._lock:
            p = _ready(w)
            ts = _pull(p, self.id, kaddr, nk, vaddr)
            if ts < 0:
                raise w._fail(ts, "pull from table '%s'" % self.name)
            keep = w._keep
            keep[ts] = out if kobj is None else (out, kobj)
            if len(keep) > 256:
                w._prune()
        return Handle(w, ts, out)

    def pull_view(self, keys=None):
        """A View of the values (pskv_pull_view), sent now; use it in a with block."""
        kaddr, nk, kobj = arrays.keys(keys, "pull_view: keys")
        nk = self._nkeys(nk)
        w = self._w
        with w._lock:
            w._flush()
            ts = L.pskv_pull_view(w._h(), self.id, kaddr or None, nk)
            if ts < 0:
                raise w._fail(ts, "pull_view of table '%s'" % self.name)
        return View(self, nk * self.width, ts, kobj)

    def pushpull(self, grad, keys=None, out=None, clock=False, copy=True):
        """Pushes grad and pulls the rows' values after that push, in one request per
        server (pskv_pushpull): the Handle's wait() returns out (a new numpy array
        when None), written in place. clock=True ends this worker's clock right
        after the push (as Worker.clock()) and pulls the next clock's values (bsp:
        once every worker's push of this clock is applied). copy as push's (with
        copy=False out must not overlap grad). A refused push (a NaN, a late bsp
        push) raises from wait() and leaves out unwritten (one server; with
        several, the rows of the servers that answered first are written).
        With shm=1 large parts go through shared memory both ways. The library
        refuses it (pskv.InvalidArgumentError, nothing sent) with wire filters or
        a 16-bit wire: push, then pull there."""
        # a dense table's whole step from numpy arrays: the short path (see _dense)
        gaddr = self._dense(grad, keys)
        oaddr = gaddr and self._dense(out, None)
        if oaddr:
            kaddr, nk, kobj = None, self.size, None
        else:
            if out is None:
                out = np.empty(self._nkeys(arrays.keys(keys, "pushpull: keys")[1]) *
                               self.width, dtype=np.float32)
            gaddr, kaddr, nk, kobj = self._args(grad, keys, "pushpull")
            oaddr = self._args(out, keys, "pushpull", True)[0]
        span = 4 * nk * self.width
        if not copy and oaddr < gaddr + span and gaddr < oaddr + span:
            raise ValueError("pushpull with '%s': out overlaps grad (copy=False sends grad "
                             "from where it is while the values are written to out)"
                             % self.name)
        ts = self._pp_send(grad, out, gaddr, kaddr, nk, kobj, oaddr, clock, copy)
        return Handle(self._w, ts, out)

    def pushpull_view(self, grad, keys=None, clock=False, copy=True):
        """pushpull with the values in the library's memory (PSKV_PP_VIEW): a View,
        sent now, to use in a with block as pull_view()'s."""
        gaddr = self._dense(grad, keys)
        if gaddr:
            kaddr, nk, kobj = None, self.size, None
        else:
            gaddr, kaddr, nk, kobj = self._args(grad, keys, "pushpull")
        ts = self._pp_send(grad, None, gaddr, kaddr, nk, kobj, None, clock, copy)
        return View(self, nk * self.width, ts, kobj)

    def _pp_send(self, grad, out, gaddr, kaddr, nk, kobj, oaddr, clock, copy):
        """Sends a checked pushpull; keeps what the library may still touch (a lent
        grad, out, the keys) alive until it is over. Returns the timestamp."""
        flags = (_PP_CLOCK if clock else 0) | (0 if copy else _PP_NOCOPY) | \
            (_PP_VIEW if oaddr is None else 0)
        w = self._w
        with w._lock:
            p = _ready(w)
            ts = _pushpull(p, self.id, kaddr, nk, gaddr, oaddr, flags)
            if ts < 0:
                raise w._fail(ts, "pushpull with table '%s'" % self.name)
            if out is not None or not copy:
                keep = w._keep
                keep[ts] = (out, kobj) if copy else (grad, out, kobj)
                if len(keep) > 256:
                    w._prune()
        return ts

    def push_buffer(self, keys=None):
        """A PushBuffer for one push of these keys; use it in a with block."""
        k = arrays.keys(keys, "push_buffer: keys")
        return PushBuffer(self, keys, self._nkeys(k[1]) * self.width, k)

    def pull_all(self, timeout=30.0):
        """(keys uint64, values float32 n x width): every row the servers hold."""
        k, v, n = ctypes.POINTER(ctypes.c_uint64)(), ctypes.POINTER(ctypes.c_float)(), ctypes.c_size_t()
        w = self._w
        w._blocking("pull_all of '%s'" % self.name, L.pskv_pull_all, self.id, ctypes.byref(k),
                    ctypes.byref(v), ctypes.byref(n), int(timeout * 1000))
        try:
            keys = np.ctypeslib.as_array(k, (n.value,)).copy() if n.value else np.empty(0, np.uint64)
            vals = (np.ctypeslib.as_array(v, (n.value * self.width,)).copy()
                    if n.value else np.empty(0, np.float32))
        finally:
            L.free(ctypes.cast(k, ctypes.c_void_p))
            L.free(ctypes.cast(v, ctypes.c_void_p))
        return keys, vals.reshape(n.value, self.width)

    def set_lr(self, lr):
        """Changes the lr of the table's updater on every server (pskv_table_set_lr):
        this worker's pushes after the call are applied with it. lr: a finite
        number > 0 (else ValueError naming it, nothing sent). Blocks until every
        server acknowledged."""
        if isinstance(lr, bool) or not isinstance(lr, (int, float, np.floating, np.integer)):
            raise TypeError("table '%s': set_lr: lr must be a number, got %s"
                            % (self.name, type(lr).__name__))
        lr = float(lr)
        if not (lr > 0 and lr != float("inf")):  # NaN too
            raise ValueError("table '%s': set_lr: lr %r refused: it must be a finite number > 0"
                             % (self.name, lr))
        self._w._blocking("set_lr of table '%s'" % self.name, L.pskv_table_set_lr, self.id, lr)

    def set_loss_scale(self, scale):
        with self._w._lock:
            rc = L.pskv_set_loss_scale(self._w._h(), self.id, float(scale))
            if rc < 0:
                raise self._w._fail(rc, "set_loss_scale")
