"""Fashion-MNIST MLP (784-256-10) trained with pskv.torch.DistributedOptimizer.

One process per worker; launch the whole job with
    PYTHONPATH=python python3 -m pskv.launch --servers 1 --workers 2 -- \
        /usr/bin/python3 python/examples/mlp_fmnist.py --epochs 5
(the scheduler's address and this worker's rank come from PSKV_SCHEDULER and
PSKV_RANK). The model, data order and global batch are those of the PyTorch DDP
reference (shared/reference/tddp.py): every rank draws the same permutation each
epoch and takes its share of each global batch. With --evaluator under
pskv.launch --evaluator, the same script runs as the job's evaluator
(python/examples/evaluator.py does the work).

--schedule cosine lowers the lr along a half cosine to --lr-min over the run (a torch
LambdaLR over the wrapped optimizer, stepped every --lr-every steps): the servers'
updater follows it (pskv_table_set_lr), whatever the optimizer. The 2-epoch, 2-worker
setting the tests use, --optimizer adam --lr 0.002 --schedule cosine, and the runs that
chose it are in docs/python.md.

Prints one line per epoch from rank 0: seconds, samples/s (global), test accuracy;
and a last line "result {json}" for scripts.
"""

import argparse
import gzip
import json
import math
import os
import sys
import time


def _blas_threads(argv):
    """--threads N also bounds OpenBLAS (unless OPENBLAS_NUM_THREADS says otherwise):
    Debian's torch calls OpenBLAS for its matrix products, and torch.set_num_threads
    does not reach OpenBLAS's own pool (one thread a core), which on a shared
    machine contends with the library's threads and the server. Set before torch
    loads OpenBLAS."""
    n = "1"
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            n = argv[i + 1]
        elif a.startswith("--threads="):
            n = a.split("=", 1)[1]
    os.environ.setdefault("OPENBLAS_NUM_THREADS", n)


_blas_threads(sys.argv)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import pskv  # noqa: E402
import pskv.torch as pt  # noqa: E402

DATA = "/usr/share/datasets/fashion-mnist"


def _idx(path, images):
    with gzip.open(path, "rb") as f:
        b = f.read()
    if images:
        n, r, c = (int.from_bytes(b[i:i + 4], "big") for i in (4, 8, 12))
        return np.frombuffer(b, np.uint8, offset=16).reshape(n, r * c).astype(np.float32) / 255
    return np.frombuffer(b, np.uint8, offset=8).astype(np.int64)


def load(data=DATA):
    return [torch.from_numpy(_idx("%s/%s-idx%d-ubyte.gz" % (data, name, 3 if img else 1), img))
            for name, img in (("train-images", 1), ("train-labels", 0),
                              ("t10k-images", 1), ("t10k-labels", 0))]


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))


def accuracy(model, X, y):
    model.eval()
    with torch.no_grad():
        acc = (model(X).argmax(1) == y).float().mean().item()
    model.train()
    return acc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--batch", type=int, default=64, help="global batch")
    ap.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    ap.add_argument("--schedule", default="none", choices=["none", "cosine"],
                    help="cosine: the lr falls from --lr to --lr-min along a half cosine "
                    "over the run, changed every --lr-every steps (on the servers: "
                    "pskv_table_set_lr)")
    ap.add_argument("--lr-min", type=float, default=0.0)
    ap.add_argument("--lr-every", type=int, default=10)
    ap.add_argument("--mode", default="ps", choices=["ps", "allreduce"])
    ap.add_argument("--consistency", default="async")
    ap.add_argument("--no-prefetch", action="store_true")
    ap.add_argument("--pushpull", action="store_true", default=None,
                    help="ps: one pskv_pushpull a step where the library takes it, not a "
                    "push, a clock and a pull (left out: DistributedOptimizer's default, on "
                    "with prefetch and --shm 1, one server or no replicas)")
    ap.add_argument("--no-pushpull", dest="pushpull", action="store_false",
                    help="ps: a push, a clock and a pull a step")
    ap.add_argument("--shm", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch's threads (torch.set_num_threads), and OpenBLAS's unless "
                    "OPENBLAS_NUM_THREADS is set")
    ap.add_argument("--request-timeout-ms", type=int, default=60000)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    if os.environ.get("PSKV_EVALUATOR") == "1":
        from evaluator import run_evaluator
        return run_evaluator(make_model, load, a)
    rank = int(os.environ.get("PSKV_RANK", "-1"))
    w = pskv.Worker(rank=rank, shm=a.shm, request_timeout_ms=a.request_timeout_ms)
    X, y, Xt, yt = load()
    model = make_model()
    local = (torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
             if a.optimizer == "sgd" else torch.optim.Adam(model.parameters(), lr=a.lr))
    opt = pt.DistributedOptimizer(local, w, mode=a.mode, consistency=a.consistency,
                                  prefetch=False if a.no_prefetch else None,
                                  pushpull=a.pushpull)
    if a.mode == "allreduce":
        pt.broadcast_parameters(model, w)
    lossf = nn.CrossEntropyLoss()
    W, r = w.num_workers, w.rank
    lb = a.batch // W
    g = torch.Generator().manual_seed(0)
    N = len(X)
    steps = a.epochs * ((N + a.batch - 1) // a.batch)
    sched = None
    if a.schedule == "cosine":  # over the wrapped optimizer: DistributedOptimizer follows
        changes = max(1, steps // a.lr_every)
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt.optimizer if a.mode == "ps" else local,
            lambda k: (a.lr_min + (a.lr - a.lr_min) * 0.5 * (1 + math.cos(math.pi * k / changes)))
            / a.lr)
    done = 0
    out, total, acc, cpu = [], 0.0, 0.0, 0.0
    try:
        for ep in range(1, a.epochs + 1):
            perm = torch.randperm(N, generator=g)
            w.barrier()
            t0, c0 = time.perf_counter(), time.process_time()
            for step, i in enumerate(range(0, N, a.batch)):
                idx = perm[i:i + a.batch][r * lb:(r + 1) * lb]
                opt.zero_grad()
                lossf(model(X[idx]), y[idx]).backward()
                opt.step()
                done += 1
                if sched is not None and done % a.lr_every == 0:
                    sched.step()
                w.set_progress(ep, step, i)
            opt.synchronize()
            cpu += time.process_time() - c0
            w.barrier()
            dt = time.perf_counter() - t0
            total += dt
            if r == 0:
                opt.synchronize(latest=True)   # ps: every worker's pushes
                acc = accuracy(model, Xt, yt)
                print("epoch %d: %.2fs %.0f samples/s (global) test_acc %.4f"
                      % (ep, dt, N / dt, acc), flush=True)
                out.append({"epoch": ep, "sec": dt, "sps": N / dt, "acc": acc})
    except pskv.StopRequested as e:
        print("rank %d: stopped early: %s" % (r, e.reason), flush=True)
    if a.mode == "ps" and opt.times["steps"]:
        tm, k = opt.times, 1e3 * opt.times["steps"]
        inside = sum(v for n, v in tm.items() if n != "steps")
        print("rank %d step (us, mean of %d): outside step() %.0f, gather %.0f, send %.0f, "
              "clock %.0f, wait pull %.0f, wait push %.0f, pull %.0f; cpu per step %.0f (the "
              "process's, its library threads too); waiting fraction %.3f"
              % (r, tm["steps"], (total * 1e9 - inside) / k, tm["gather"] / k, tm["send"] / k,
                 tm["clock"] / k, tm["wait_pull"] / k, tm["wait_push"] / k, tm["pull"] / k,
                 cpu * 1e9 / k, (tm["wait_pull"] + tm["wait_push"]) / (total * 1e9)), flush=True)
    if r == 0:
        print("result " + json.dumps({"mode": a.mode, "epochs": out, "train_s": total,
                                      "sps": a.epochs * N / total if total else 0,
                                      "acc": acc}), flush=True)
    w.close()


if __name__ == "__main__":
    main()
