"""Loading libpskv and declaring its C API for ctypes.

The library is looked for, in order: $PSKV_LIB (a path to libpskv.so), the source
tree's build/lib/ (when this package is imported from python/ of a checkout), the
directory prefix/lib of an install under prefix (this file in
prefix/lib/python3/dist-packages/pskv/), then the system's loader (libpskv.so.1).

Every function Python calls is declared here with its argument and return types:
ctypes' default return type is a C int, which would cut int64_t timestamps and
pointers short. The Structures mirror include/pskv/pskv.h and are checked at import
against pskv_struct_layout(), the library's own sizeof/offsetof: a library built
with another layout is refused with an ImportError naming the field.

Calls go through ctypes.CDLL, which releases the GIL for the duration of each call,
so other Python threads run while one waits in the library.
"""

import ctypes
import os

c_int, c_int64, c_uint64, c_size_t = ctypes.c_int, ctypes.c_int64, ctypes.c_uint64, ctypes.c_size_t
c_double, c_float, c_char_p, c_void_p = ctypes.c_double, ctypes.c_float, ctypes.c_char_p, ctypes.c_void_p
P_FLOAT = ctypes.POINTER(c_float)
P_U64 = ctypes.POINTER(c_uint64)
P_I64 = ctypes.POINTER(c_int64)


class Config(ctypes.Structure):
    """pskv_config (include/pskv/pskv.h)."""
    _fields_ = [
        ("scheduler", c_char_p), ("rank", c_int), ("advertise", c_char_p),
        ("interface", c_char_p), ("connect_timeout_s", c_double),
        ("join_timeout_s", c_double), ("request_timeout_ms", c_int), ("window", c_int),
        ("job_id", c_uint64), ("max_message", c_int64), ("chunk_bytes", c_size_t),
        ("spin_us", c_int), ("retry_ms", c_int), ("keys", c_char_p), ("insecure", c_int),
        ("metrics_port", c_int), ("metrics_bind", c_char_p), ("evaluator", c_int),
        ("listen_port", c_int), ("listen_bind", c_char_p), ("allreduce_wire", c_int),
        ("shm", c_int), ("slice_us", c_int), ("table_namespace", c_char_p),
        ("quota_bytes", c_uint64), ("group", c_char_p), ("group_size", c_int),
    ]


class TableOpts(ctypes.Structure):
    """pskv_table_opts (include/pskv/pskv.h); kind is the enum pskv_kind (an int)."""
    _fields_ = [
        ("kind", c_int), ("size", c_uint64), ("width", ctypes.c_uint32),
        ("updater", c_char_p), ("lr", c_float), ("momentum", c_float), ("l2", c_float),
        ("eps", c_float), ("l1", c_float), ("beta1", c_float), ("beta2", c_float),
        ("weight_decay", c_float), ("beta", c_float), ("init", c_char_p),
        ("init_scale", c_float), ("seed", c_uint64), ("consistency", c_char_p),
        ("backup", ctypes.c_uint32), ("bsp_mean_pushed", c_int),
        ("admit_after", ctypes.c_uint32), ("evict_after", ctypes.c_uint32),
        ("filters", c_char_p), ("wire", c_char_p),
    ]


class Traffic(ctypes.Structure):
    """pskv_traffic."""
    _fields_ = [
        ("sent", c_uint64), ("sent_raw", c_uint64), ("received", c_uint64),
        ("received_raw", c_uint64), ("filter_s", c_double), ("name", c_char_p),
    ]


class Held(ctypes.Structure):
    """pskv_held: what a handle holds, by the library's counters."""
    _fields_ = [("requests", c_int), ("views", c_int), ("push_buffers", c_int),
                ("draining", c_int), ("lent", c_uint64)]


STRUCTS = {"pskv_config": Config, "pskv_table_opts": TableOpts,
           "pskv_traffic": Traffic, "pskv_held": Held}

W = c_void_p  # pskv_worker *
# Data pointers (float *, uint64_t *) are declared void *: a Python int (an array's
# address) passes without a ctypes cast, which costs a microsecond per call.
VP = c_void_p

# name: (restype, argtypes)
SIGNATURES = {
    "pskv_config_init": (None, [ctypes.POINTER(Config)]),
    "pskv_table_opts_init": (None, [ctypes.POINTER(TableOpts)]),
    "pskv_worker_open": (c_int, [ctypes.POINTER(Config), ctypes.POINTER(W)]),
    "pskv_worker_close": (c_int, [ctypes.POINTER(W)]),
    "pskv_table_open": (c_int, [W, c_char_p, ctypes.POINTER(TableOpts)]),
    "pskv_push": (c_int64, [W, c_int, VP, c_size_t, VP]),
    "pskv_push_nocopy": (c_int64, [W, c_int, VP, c_size_t, VP]),
    "pskv_assign": (c_int64, [W, c_int, VP, c_size_t, VP]),
    "pskv_push_buffer": (VP, [W, c_int, VP, c_size_t]),
    "pskv_push_buffer_send": (c_int64, [W, c_int, VP, c_size_t, VP]),
    "pskv_push_buffer_drop": (c_int, [W, VP]),
    "pskv_pull": (c_int64, [W, c_int, VP, c_size_t, VP]),
    "pskv_pull_view": (c_int64, [W, c_int, VP, c_size_t]),
    "pskv_pushpull": (c_int64, [W, c_int, VP, c_size_t, VP, VP, c_int]),
    "pskv_view": (VP, [W, c_int64]),
    "pskv_view_release": (c_int, [W, c_int64]),
    "pskv_pull_all": (c_int, [W, c_int, ctypes.POINTER(P_U64), ctypes.POINTER(P_FLOAT),
                              ctypes.POINTER(c_size_t), c_int]),
    "pskv_wait": (c_int, [W, c_int64, c_int]),
    "pskv_wait_all": (c_int, [W, c_int]),
    "pskv_clock": (c_int, [W]),
    "pskv_current_clock": (c_int64, [W]),
    "pskv_values_clock": (c_int64, [W]),
    "pskv_values_clocks": (c_int, [W, P_I64, P_I64, P_I64, c_int]),
    "pskv_barrier": (c_int, [W, c_int]),
    "pskv_checkpoint": (c_int64, [W, c_int]),
    "pskv_set_progress": (None, [W, c_int64, c_int64, c_int64]),
    "pskv_resume_progress": (c_int, [W, P_I64, P_I64, P_I64]),
    "pskv_stop_requested": (c_int, [W, ctypes.c_char_p, c_size_t]),
    "pskv_workers_active": (c_int, [W]),
    "pskv_job_ending": (c_int, [W]),
    "pskv_early_stop_metric": (c_char_p, [W]),
    "pskv_report_eval": (c_int, [W, c_int64, c_double, c_double, c_double, c_double]),
    "pskv_allreduce": (c_int, [W, c_int, VP, c_size_t, c_int]),
    "pskv_rank": (c_int, [W]),
    "pskv_num_workers": (c_int, [W]),
    "pskv_num_servers": (c_int, [W]),
    "pskv_num_replicas": (c_int, [W]),
    "pskv_last_error": (c_char_p, [W]),
    "pskv_strerror": (c_char_p, [c_int]),
    "pskv_traffic_get": (c_int, [W, c_int, ctypes.POINTER(Traffic)]),
    "pskv_set_loss_scale": (c_int, [W, c_int, c_float]),
    "pskv_table_set_lr": (c_int, [W, c_int, c_float]),
    "pskv_struct_layout": (c_int64, [c_char_p, c_char_p]),
    "pskv_held_get": (None, [W, ctypes.POINTER(Held)]),
    "pskv_request_pending": (c_int, [W, c_int64]),
    "pskv_serve_lookup": (c_int, [c_char_p, c_char_p, VP, c_size_t, VP, c_size_t,
                                  ctypes.POINTER(ctypes.c_uint32), P_I64, c_int, c_char_p,
                                  c_size_t]),
    "free": (None, [VP]),
}


def _candidates():
    env = os.environ.get("PSKV_LIB")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    tree = os.path.normpath(os.path.join(here, "..", "..", "build", "lib", "libpskv.so"))
    out.append(tree)
    # prefix/lib/python3*/{dist,site}-packages/pskv -> prefix/lib
    lib = os.path.normpath(os.path.join(here, "..", "..", ".."))
    out.append(os.path.join(lib, "libpskv.so.1"))
    out.append("libpskv.so.1")
    return out


def _load():
    tried = []
    env = os.environ.get("PSKV_LIB")
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path + " (absent)")
            continue
        try:
            return ctypes.CDLL(path, use_errno=False)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
            if env:
                break
    raise ImportError("pskv: cannot load libpskv; tried: " + "; ".join(tried) +
                      ". Build it (make all) or set PSKV_LIB to the path of libpskv.so")


def _declare(lib):
    for name, (res, args) in SIGNATURES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise ImportError("pskv: libpskv at %s lacks %s (an older library?)" % (lib._name, name))
        fn.restype = res
        fn.argtypes = args


def check_layout(lib, structs=None):
    """Compares every mirrored Structure with the library's layout; raises
    ImportError naming the first field that differs."""
    for cname, cls in (structs or STRUCTS).items():
        size = lib.pskv_struct_layout(cname.encode(), None)
        if size < 0:
            raise ImportError("pskv: libpskv does not know struct %s" % cname)
        for fname, _ in cls._fields_:
            off = lib.pskv_struct_layout(cname.encode(), fname.encode())
            mine = getattr(cls, fname).offset
            if off < 0:
                raise ImportError("pskv: libpskv's %s has no field '%s' (the package "
                                  "and the library differ in version)" % (cname, fname))
            if off != mine:
                raise ImportError("pskv: %s.%s is at offset %d in libpskv but %d in "
                                  "python/pskv/_lib.py: the package and the library "
                                  "differ in version" % (cname, fname, off, mine))
        if size != ctypes.sizeof(cls):
            raise ImportError("pskv: sizeof(%s) is %d in libpskv but %d in the package: "
                              "a field is missing from python/pskv/_lib.py"
                              % (cname, size, ctypes.sizeof(cls)))


lib = _load()
_declare(lib)
check_layout(lib)
path = lib._name
