"""Reads pskv-serve's /v1/predict through real HTTP for a fixed body while it
follows a training group (test/integration/serve_follow.sh, t_serve_follow_sparse_lr).

    follow_predict.py moves PORT BODYFILE N SECONDS
        polls until N different score lists were answered (the served model moved
        as training went on); prints "moves: answers=A distinct=D"; exit 1 if fewer
        came within SECONDS
    follow_predict.py steady PORT BODYFILE SECONDS
        asks every 50 ms for SECONDS: every request must be answered (200), with one
        and the same scores (no training runs), and the staleness each answer reports
        must grow by most of SECONDS; prints "steady: answers=A staleness=S0..S1"
    follow_predict.py scores PORT BODYFILE
        prints the scores of one answer, as JSON text
    follow_predict.py held PORT BODYFILE ZMQPORT TABLE
        (pskv-serve --queue 1 --zmq-port ZMQPORT, PSKV_LIB set) a slow client holds
        the only place in the HTTP queue: /v1/predict must answer 503 within 4 s,
        and meanwhile the deltas must go on being applied: the rows of keys 1..16 of
        TABLE read over ZeroMQ (pskv_serve_lookup) change within 3 s; once the slow
        client leaves, /v1/predict answers again. Prints "held: ..."
"""

import ctypes
import json
import os
import socket
import sys
import time
import urllib.error
import urllib.request


def predict(port, body):
    req = urllib.request.Request("http://127.0.0.1:%d/v1/predict" % port, data=body, method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        return json.loads(r.read())


def zrows(zport, table):
    """The first float of keys 1..16 of TABLE's served version (NaN: not held), read
    through libpskv's pskv_serve_lookup."""
    f = ctypes.CDLL(os.environ["PSKV_LIB"]).pskv_serve_lookup
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                  ctypes.POINTER(ctypes.c_float), ctypes.c_size_t, ctypes.POINTER(ctypes.c_uint32),
                  ctypes.POINTER(ctypes.c_int64), ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t]
    key, out = (ctypes.c_uint64 * 16)(*range(1, 17)), (ctypes.c_float * 1024)()
    width, clock = ctypes.c_uint32(), ctypes.c_int64()
    why = ctypes.create_string_buffer(300)
    rc = f(("127.0.0.1:%d" % zport).encode(), table.encode(), key, 16, out, 1024, ctypes.byref(width),
           ctypes.byref(clock), 3000, why, 300)
    if rc != 0:
        raise OSError("pskv_serve_lookup: %d: %s" % (rc, why.value.decode()))
    return [repr(out[i * width.value]) for i in range(16)]


def held(port, body, zport, table):
    slow = socket.create_connection(("127.0.0.1", port))
    slow.sendall(b"POST /v1/predict HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n{\"rows\":")
    code = None
    end = time.monotonic() + 4
    while time.monotonic() < end and code != 503:
        try:
            predict(port, body)
            code = 200
        except urllib.error.HTTPError as e:
            code = e.code
        except OSError:
            code = -1
        time.sleep(0.05)
    if code != 503:
        print("held: FAILED: no 503 while a slow client held the queue (last %s)" % code)
        return 1
    c0 = c1 = zrows(zport, table)
    if all(v == "nan" for v in c0):
        print("held: FAILED: %s holds none of keys 1..16" % table)
        return 1
    end = time.monotonic() + 3
    while time.monotonic() < end and c1 == c0:
        time.sleep(0.1)
        c1 = zrows(zport, table)
    slow.close()
    if c1 == c0:
        print("held: FAILED: %s did not change while the HTTP queue was full: %s" % (table, c0))
        return 1
    end = time.monotonic() + 5
    while True:
        try:
            predict(port, body)
            break
        except OSError as e:
            if time.monotonic() > end:
                print("held: FAILED: no answer after the slow client left: %s" % e)
                return 1
            time.sleep(0.05)
    print("held: 503 while a slow client held the queue; %s's rows moved meanwhile (ZeroMQ): "
          "key 1 %s -> %s" % (table, c0[0], c1[0]))
    return 0


def main():
    cmd, port, body = sys.argv[1], int(sys.argv[2]), open(sys.argv[3], "rb").read()
    if cmd == "held":
        return held(port, body, int(sys.argv[4]), sys.argv[5])
    if cmd == "scores":
        print(json.dumps(predict(port, body)["scores"]))
        return 0
    if cmd == "moves":
        want, secs = int(sys.argv[4]), float(sys.argv[5])
        seen, answers = set(), 0
        end = time.monotonic() + secs
        while time.monotonic() < end and len(seen) < want:
            try:
                got = predict(port, body)
            except OSError:  # not served yet (400: no such table before the first copy)
                time.sleep(0.05)
                continue
            answers += 1
            seen.add(json.dumps(got["scores"]))
            time.sleep(0.02)
        print("moves: answers=%d distinct=%d" % (answers, len(seen)))
        return 0 if len(seen) >= want else 1
    if cmd == "steady":
        secs = float(sys.argv[4])
        first = last = None
        answers = 0
        end = time.monotonic() + secs
        while time.monotonic() < end:
            try:
                got = predict(port, body)
            except OSError as e:
                print("steady: FAILED: a request failed after %d answers: %s" % (answers, e))
                return 1
            answers += 1
            if first is None:
                first = got
            elif got["scores"] != first["scores"]:
                print("steady: FAILED: the scores changed with no training: %s, then %s" %
                      (first["scores"], got["scores"]))
                return 1
            last = got
            time.sleep(0.05)
        s0 = first["version"]["staleness_seconds"]
        s1 = last["version"]["staleness_seconds"]
        print("steady: answers=%d staleness=%.2f..%.2f" % (answers, s0, s1))
        if s1 - s0 < secs / 2:
            print("steady: FAILED: staleness grew by %.2f s in %.1f s" % (s1 - s0, secs))
            return 1
        return 0
    print("follow_predict.py: unknown command %s" % cmd)
    return 2


if __name__ == "__main__":
    sys.exit(main())
