"""pskv-serve's two lookup sides agree: libpskv's pskv_serve_lookup (ZeroMQ, the
daemon's --zmq-port, called through ctypes) and POST /v1/lookup (HTTP) answer the
same rows and version for the same keys of a model that no longer changes.

    zlookup.py ZMQPORT HTTPPORT TABLE KEY...

Also: an unknown table is refused with PSKV_ENOTABLE (7) naming it. Prints
"zlookup ok: N keys, width W, clock C" and exits 0, else 1 with the difference.
"""

import ctypes
import json
import math
import os
import sys
import urllib.request


def main():
    zport, hport, table = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    keys = [int(k) for k in sys.argv[4:]]
    lib = ctypes.CDLL(os.environ.get("PSKV_LIB", "build/lib/libpskv.so"))
    f = lib.pskv_serve_lookup
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                  ctypes.POINTER(ctypes.c_float), ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint32),
                  ctypes.POINTER(ctypes.c_int64), ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    n = len(keys)
    karr = (ctypes.c_uint64 * n)(*keys)
    out = (ctypes.c_float * (n * 16))()
    width, clock = ctypes.c_uint32(), ctypes.c_int64()
    why = ctypes.create_string_buffer(300)
    ep = ("127.0.0.1:%d" % zport).encode()
    rc = f(ep, table.encode(), karr, n, out, n * 16, ctypes.byref(width), ctypes.byref(clock), 5000, why, 300)
    if rc != 0:
        print("zlookup: FAILED: pskv_serve_lookup returned %d: %s" % (rc, why.value.decode()))
        return 1
    body = json.dumps({"table": table, "keys": keys}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/lookup" % hport, data=body, method="POST")
    got = json.loads(urllib.request.urlopen(req, timeout=5).read())
    w = width.value
    for i, v in enumerate(got["values"]):
        z = [out[i * w + j] for j in range(w)]
        h = [math.nan] * w if v is None else (v if isinstance(v, list) else [v])
        same = all((math.isnan(a) and math.isnan(b)) or a == b for a, b in zip(z, h))
        if not same or len(h) != w:
            print("zlookup: FAILED: key %d: ZeroMQ %s, HTTP %s" % (keys[i], z, h))
            return 1
    if got["version"]["clock"] != clock.value:
        print("zlookup: FAILED: clock %d over ZeroMQ, %d over HTTP" % (clock.value, got["version"]["clock"]))
        return 1
    rc = f(ep, b"no-such-table", karr, n, out, n * 16, None, None, 5000, why, 300)
    if rc != -7 or b"no-such-table" not in why.value:
        print("zlookup: FAILED: an unknown table gave %d: %s" % (rc, why.value.decode()))
        return 1
    print("zlookup ok: %d keys, width %d, clock %d" % (n, w, clock.value))
    return 0


if __name__ == "__main__":
    sys.exit(main())
