"""pskv's exceptions: one class per family of PSKV_E* codes (include/pskv/pskv_errors.h).

Every exception raised for a failed C call is a pskv.Error carrying .code (the
positive PSKV_E* number), .name ("PSKV_ETIMEDOUT") and, as its message, what the
library's pskv_last_error() said, prefixed with the call that failed. Families
also derive from the built-in they resemble, so `except TimeoutError` catches
pskv.TimeoutError too.
"""

import builtins

CODES = {
    1: "PSKV_EINVAL", 2: "PSKV_ENOMEM", 3: "PSKV_ETIMEDOUT", 4: "PSKV_EPROTO",
    5: "PSKV_EVERSION", 6: "PSKV_EJOB", 7: "PSKV_ENOTABLE", 8: "PSKV_ERANGE",
    9: "PSKV_EMISMATCH", 10: "PSKV_EREFUSED", 11: "PSKV_ENET", 12: "PSKV_ECLOSED",
    13: "PSKV_ENOTFOUND", 14: "PSKV_EBADVALUE", 15: "PSKV_EIO", 16: "PSKV_ELATE",
    17: "PSKV_ESTALE", 18: "PSKV_ELOST", 19: "PSKV_ENOTREADY", 20: "PSKV_EPERM",
    21: "PSKV_EPEERDEAD", 22: "PSKV_EKEYMISS", 25: "PSKV_ENOSHM", 26: "PSKV_ESHMREF",
    31: "PSKV_EQUOTA", 32: "PSKV_EACCES",
}


class Error(Exception):
    """A failed pskv call. code: the PSKV_E* number (0 when raised by the package
    itself, e.g. for a closed handle); name: its symbol."""

    def __init__(self, message, code=0):
        super().__init__(message)
        self.code = code
        self.name = CODES.get(code, "")


class InvalidArgumentError(Error, ValueError):
    """PSKV_EINVAL, PSKV_ERANGE, PSKV_EBADVALUE: the call's input was refused."""


class TimeoutError(Error, builtins.TimeoutError):
    """PSKV_ETIMEDOUT: a wait passed its time-out (the request may be in flight)."""


class NetworkError(Error, ConnectionError):
    """PSKV_ENET, PSKV_EPROTO, PSKV_EVERSION, PSKV_EJOB, PSKV_ENOSHM, PSKV_ESHMREF,
    PSKV_EKEYMISS: the peers could not be reached or spoke unexpectedly."""


class PeerDeadError(Error, ConnectionError):
    """PSKV_EPEERDEAD: a worker of the all-reduce ring died or left."""


class LostError(Error):
    """PSKV_ELOST, PSKV_ESTALE, PSKV_ENOTREADY: a partition's data is gone or moving."""


class ClosedError(Error):
    """PSKV_ECLOSED: the job is over or the handle is closed; also raised by the
    package for a Worker, view or push buffer used after it was closed."""


class RefusedError(Error):
    """PSKV_EREFUSED, PSKV_EPERM, PSKV_EQUOTA, PSKV_EACCES: the scheduler or a server
    refused (rank taken, role not permitted, namespace quota, a reader key writing)."""


class TableError(Error):
    """PSKV_ENOTABLE, PSKV_EMISMATCH: unknown table, or reopened with other options."""


class NotFoundError(Error, LookupError):
    """PSKV_ENOTFOUND: no such timestamp, node or interface."""


class LateError(Error):
    """PSKV_ELATE: bsp with backup workers: the push's clock had closed (dropped)."""


class IOError(Error, OSError):
    """PSKV_EIO, PSKV_ENOMEM: a file could not be written or memory was short."""


class ForkError(Error, RuntimeError):
    """A Worker opened before fork() used in the child (its sockets are the parent's)."""


class StopRequested(Error):
    """The scheduler asked the job to stop early; .reason says why. Raised by
    DistributedOptimizer.step() and Worker.check_stop() at a clock boundary."""

    def __init__(self, reason):
        super().__init__("the scheduler asked the job to stop: " + reason)
        self.reason = reason


_FAMILY = {
    1: InvalidArgumentError, 8: InvalidArgumentError, 14: InvalidArgumentError,
    3: TimeoutError,
    4: NetworkError, 5: NetworkError, 6: NetworkError, 11: NetworkError, 22: NetworkError,
    25: NetworkError, 26: NetworkError,
    21: PeerDeadError,
    17: LostError, 18: LostError, 19: LostError,
    12: ClosedError,
    10: RefusedError, 20: RefusedError, 31: RefusedError, 32: RefusedError,
    7: TableError, 9: TableError,
    13: NotFoundError,
    16: LateError,
    2: IOError, 15: IOError,
}


def error_for(code, message):
    """The exception for negated or positive PSKV_E* code `code`."""
    code = abs(int(code))
    return _FAMILY.get(code, Error)(message, code)
