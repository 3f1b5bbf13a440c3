"""Reading a served model: pskv-serve's ZeroMQ side (its --zmq-port) through
libpskv's pskv_serve_lookup, the same rows POST /v1/lookup answers.

    rows, clock = pskv.serve_lookup("127.0.0.1:8781", "sparse-lr.w", [3, 17])

No Worker is needed: a serving client is no member of a training job. Against a
pskv-serve run with --keys, set PSKV_KEYS to the client's key directory (with
pskv-serve's node.pub copied in as serve.pub): the call then speaks CURVE.
"""

import ctypes

import numpy as np

from . import _lib
from .errors import error_for

L = _lib.lib


def serve_lookup(endpoint, table, keys, timeout=5.0, max_width=4096):
    """The rows of `keys` (uint64) of `table` at the pskv-serve `endpoint`
    ("HOST:PORT", its --zmq-port): a float32 array of shape (len(keys), width), NaN
    for a key the table does not hold, and the served version's clock. Raises the
    pskv error of the failure (NotFoundError-like TableError for an unknown table,
    TimeoutError, ...) with the reason."""
    k = np.ascontiguousarray(np.asarray(keys, dtype=np.uint64).reshape(-1))
    n = k.size
    cap = max(1, n * max_width)
    out = np.empty(cap, dtype=np.float32)
    width, clock = ctypes.c_uint32(), ctypes.c_int64()
    why = ctypes.create_string_buffer(512)
    rc = L.pskv_serve_lookup(endpoint.encode(), table.encode(), k.ctypes.data, n,
                             out.ctypes.data, cap, ctypes.byref(width), ctypes.byref(clock),
                             int(timeout * 1000), why, len(why))
    if rc < 0:
        raise error_for(rc, "serve_lookup %s at %s: %s" % (table, endpoint, why.value.decode()))
    w = width.value or 1
    return out[: n * w].reshape(n, w).copy(), clock.value
