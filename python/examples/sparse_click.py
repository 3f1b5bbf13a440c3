"""A sparse click model (logistic regression over hashed ids) with
pskv.torch.EmbeddingBag, on gen-sparse data (LIBSVM files):

    scripts/gen-sparse --examples 200000 --features 1000000 --out /tmp/click
    PYTHONPATH=python /usr/bin/python3 -m pskv.launch --servers 2 --workers 2 -- \
        /usr/bin/python3 python/examples/sparse_click.py --train /tmp/click.train \
        --test /tmp/click.test --epochs 3

The weights are a sparse table of width 1 (one row per feature id, made on its
first push, as the C sparse-lr's): an example's logit is the EmbeddingBag "sum" of
its features' rows weighted by their values, plus a bias row (key 0, which no
feature id uses). The table's updater (adagrad by default) runs on the servers.
Each worker reads every W-th example of the training file. Rank 0 prints the test
AUC and the examples/s of all workers: "result {json}".
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pskv  # noqa: E402
import pskv.torch as pt  # noqa: E402


def read_libsvm(path, part=0, parts=1):
    """(labels float32, ids int64, values float32, offsets int64) of every parts-th
    example from part on."""
    labels, ids, vals, offs = [], [], [], []
    n = 0
    with open(path) as f:
        for i, line in enumerate(f):
            if i % parts != part:
                continue
            tok = line.split()
            if not tok:
                continue
            labels.append(1.0 if float(tok[0]) > 0 else 0.0)
            offs.append(n)
            for t in tok[1:]:
                k, v = t.split(":")
                ids.append(int(k))
                vals.append(float(v))
                n += 1
    return (np.array(labels, np.float32), np.array(ids, np.int64),
            np.array(vals, np.float32), np.array(offs, np.int64))


def auc(scores, labels):
    order = np.argsort(scores, kind="mergesort")
    ranks = np.empty(len(scores))
    ranks[order] = np.arange(1, len(scores) + 1)
    pos = labels > 0.5
    npos, nneg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - npos * (npos + 1) / 2) / max(1, npos * nneg))


def batches(data, batch):
    y, ids, vals, offs = data
    n = len(y)
    ends = np.append(offs[1:], len(ids))
    for s in range(0, n, batch):
        e = min(n, s + batch)
        lo, hi = offs[s], ends[e - 1]
        # the bias row (key 0) once per example, weight 1
        b_ids = np.concatenate([ids[lo:hi], np.zeros(e - s, np.int64)])
        b_vals = np.concatenate([vals[lo:hi], np.ones(e - s, np.float32)])
        b_offs = offs[s:e] - lo
        bag = np.repeat(np.arange(e - s), np.diff(np.append(b_offs, hi - lo)))
        bag = np.concatenate([bag, np.arange(e - s)])
        order = np.argsort(bag, kind="stable")
        counts = np.bincount(bag, minlength=e - s)
        yield (torch.from_numpy(y[s:e]), torch.from_numpy(b_ids[order]),
               torch.from_numpy(b_vals[order]),
               torch.from_numpy(np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--updater", default="adagrad")
    ap.add_argument("--lr", type=float, default=0.05)
    a = ap.parse_args()
    torch.set_num_threads(1)
    w = pskv.Worker(rank=int(os.environ.get("PSKV_RANK", "-1")), request_timeout_ms=60000)
    train = read_libsvm(a.train, w.rank, w.num_workers)
    emb = pt.EmbeddingBag(1, w, name="click", mode="sum", updater=a.updater, lr=a.lr,
                          init="zero")
    lossf = torch.nn.BCEWithLogitsLoss()
    w.barrier(timeout=600)
    t0 = time.perf_counter()
    for ep in range(a.epochs):
        for y, ids, vals, offs in batches(train, a.batch):
            logit = emb(ids, offs, per_sample_weights=vals).reshape(-1)
            lossf(logit, y).backward()
            w.clock()
    emb.flush()
    w.barrier(timeout=600)
    dt = time.perf_counter() - t0
    if w.rank == 0:
        test = read_libsvm(a.test)
        emb.eval()
        scores = []
        with torch.no_grad():
            for y, ids, vals, offs in batches(test, 4096):
                scores.append(emb(ids, offs, per_sample_weights=vals).reshape(-1).numpy())
        a_ = auc(np.concatenate(scores), test[0])
        n = len(train[0]) * w.num_workers * a.epochs  # about: rank 0's share x workers
        print("result " + json.dumps({"auc": a_, "train_s": dt, "examples_per_s": n / dt}),
              flush=True)
    w.close()


if __name__ == "__main__":
    main()
