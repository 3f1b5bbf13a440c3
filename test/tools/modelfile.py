#!/usr/bin/env python3
"""Writes pskv model files (common/modelfile.h's format) for the serving tests, and
prints what a model predicts, computed apart from pskv-serve's C code.

  modelfile.py write KIND IN HIDDEN OUT SEED PATH   dense (softmax, mlp) or sparse-lr
                                                    (IN = number of features; bias too)
  modelfile.py predict PATH ROWS_JSON               the scores pskv-serve should answer
"""
import json
import math
import random
import struct
import sys
import zlib

KINDS = {"softmax": 1, "mlp": 2, "sparse-lr": 3}
BIAS = 2**64 - 1


def write(kind, n_in, hidden, out, seed, path):
    rng = random.Random(seed)
    k = KINDS[kind]
    if k == 3:
        keys = sorted(rng.sample(range(1, 10 * n_in), n_in)) + [BIAS]
        rng.shuffle(keys)  # a server's save order is its hash order: pskv-serve sorts
        rows = b"".join(struct.pack("<Qf", key, rng.uniform(-1, 1)) for key in keys)
        head = struct.pack("<8sIIIIIQI", b"PSKVMODL", 1, 3, 0, 0, 1, len(keys), 1)
    else:
        n = n_in * hidden + hidden + hidden * out + out if hidden else n_in * out + out
        rows = struct.pack("<%df" % n, *[rng.uniform(-1, 1) for _ in range(n)])
        head = struct.pack("<8sIIIIIQI", b"PSKVMODL", 1, k, n_in, hidden, out, n, 0)
    body = head + rows
    with open(path, "wb") as f:
        f.write(body + struct.pack("<I", zlib.crc32(body)))


def load(path):
    data = open(path, "rb").read()
    _, _, kind, n_in, hidden, out, n, flags = struct.unpack("<8sIIIIIQI", data[:40])
    off = 40 + (32 if flags & 2 else 0) + (8 if flags & 4 else 0)
    if flags & 1:
        w = {}
        for i in range(n):
            key, v = struct.unpack_from("<Qf", data, off + 12 * i)
            w[key] = v
        return kind, n_in, hidden, out, w
    return kind, n_in, hidden, out, list(struct.unpack_from("<%df" % n, data, off))


def dense(p, n_in, n_out, x, relu):
    w, b = p[: n_in * n_out], p[n_in * n_out : n_in * n_out + n_out]
    y = [b[j] + sum(x[i] * w[i * n_out + j] for i in range(n_in)) for j in range(n_out)]
    return [max(v, 0.0) for v in y] if relu else y


def predict(path, rows):
    kind, n_in, hidden, out, w = load(path)
    scores = []
    for row in rows:
        if kind == 3:
            z = w.get(BIAS, 0.0)
            for f in row:
                key, v = f.split(":")
                z += w.get(int(key), 0.0) * float(v)
            scores.append(1 / (1 + math.exp(-z)))
            continue
        if kind == 2:
            h = dense(w, n_in, hidden, row, True)
            z = dense(w[n_in * hidden + hidden :], hidden, out, h, False)
        else:
            z = dense(w, n_in, out, row, False)
        m = max(z)
        e = [math.exp(v - m) for v in z]
        scores.append([v / sum(e) for v in e])
    print(json.dumps(scores))


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], *map(int, sys.argv[3:7]), sys.argv[7])
    else:
        predict(sys.argv[2], json.loads(sys.argv[3]))
