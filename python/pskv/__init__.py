"""pskv from Python: a worker of a pskv parameter-server job, over libpskv with ctypes.

    import pskv
    with pskv.Worker(scheduler="127.0.0.1:7700") as w:
        t = w.table("weights", size=1000, updater="sgd", lr=0.1)
        t.push(grads).wait()            # numpy float32 array or torch CPU float32 tensor
        t.pull(out=weights).wait()      # written in place
        w.clock()

pskv.torch (imported on its own) holds DistributedOptimizer, broadcast_parameters,
Embedding and EmbeddingBag; pskv.Evaluator reports evaluations to the scheduler.
docs/python.md is the guide.
"""

from ._lib import path as library_path
from .errors import (Error, InvalidArgumentError, TimeoutError, NetworkError, PeerDeadError,
                     LostError, ClosedError, RefusedError, TableError, NotFoundError, LateError,
                     IOError, ForkError, StopRequested)
from .table import Table, Handle, View, PushBuffer
from .worker import Worker
from .evaluator import Evaluator, Snapshot
from .serving import serve_lookup

__all__ = ["Worker", "Table", "Handle", "View", "PushBuffer", "Evaluator", "Snapshot",
           "Error", "InvalidArgumentError", "TimeoutError", "NetworkError", "PeerDeadError",
           "LostError", "ClosedError", "RefusedError", "TableError", "NotFoundError",
           "LateError", "IOError", "ForkError", "StopRequested", "library_path",
           "serve_lookup"]
__version__ = "0.1.0"
