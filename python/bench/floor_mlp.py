"""The compute floor of the Fashion-MNIST MLP from Python: what no torch-based
data-parallel trainer on this machine can exceed.

The model, data, permutation and global batch of python/examples/mlp_fmnist.py
(and of PyTorch DDP, shared/reference/tddp.py): --workers processes (spawned) x
one torch thread, each taking its share of every global batch and doing only
forward, backward and a local optimizer step on its own copy of the model. No
communication at all: the processes meet at a barrier at each epoch's ends only
(as tddp's dist.barrier), so an epoch's time is the slower one's.

--variant:
  plain  zero_grad(set_to_none=True); loss.backward(); SGD(momentum).step(),
         as tddp.py and shared/reference/tsingle.py do.
  loop   the loop exactly as the example writes it: opt.zero_grad() (torch's
         default: grads zeroed in place, backward adds into them), the batch
         indexed as perm[i:i+B][r*lb:(r+1)*lb], then step(); plus one
         set_progress-sized Python call a step.
  flat   the weights and gradients re-homed into flat buffers, as
         pskv.torch.DistributedOptimizer re-homes them: grads gathered into one
         flat buffer (torch.cat) and the momentum step done on it in two flat
         ops, writing the next weights into a second buffer that the
         parameters are then re-homed into (a prefetched pull swaps the
         storage in the same way). Its cost over plain is what the re-homing costs.

Prints one line per epoch (rank 0: seconds, samples/s of the whole job, the test
accuracy of rank 0's own copy, which saw only its share of each batch), then
"total train T s avg S samples/s final acc A" (tddp's) and "result {json}" (the
example's).

--flush-denormal: denormal floats flushed to zero (torch.set_flush_denormal): the
local momentum step over weights whose gradient stays 0 otherwise meets denormals
(DDP's step too; pskv's workers do not step locally).

Usage: PYTHONPATH=python /usr/bin/python3 python/bench/floor_mlp.py [--variant plain|loop|flat]
           [--flush-denormal] [--epochs 5] [--batch 64] [--lr 0.01] [--momentum 0.9] [--workers 2]
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "examples"))


def _flat_views(params, flat):
    o, out = 0, []
    for p in params:
        n = p.numel()
        out.append(flat[o:o + n].view_as(p))
        o += n
    return out


def worker(rank, a, barrier, results):
    import torch
    import torch.nn as nn
    from mlp_fmnist import accuracy, load, make_model
    torch.set_num_threads(1)
    if a.flush_denormal:
        torch.set_flush_denormal(True)
    X, y, Xt, yt = load()
    model = make_model()
    params = list(model.parameters())
    opt = torch.optim.SGD(params, lr=a.lr, momentum=a.momentum)
    lossf = nn.CrossEntropyLoss()
    W, lb, N, B = a.workers, a.batch // a.workers, len(X), a.batch
    g = torch.Generator().manual_seed(0)
    if a.variant == "flat":
        n = sum(p.numel() for p in params)
        flats = [torch.cat([p.detach().reshape(-1) for p in params]), torch.empty(n)]
        grads, mom = torch.empty(n), torch.zeros(n)
        for p, v in zip(params, _flat_views(params, flats[0])):
            p.data = v
        cur = 0
    progress = [0, 0, 0]
    out, total, acc, cpu, steps = [], 0.0, 0.0, 0.0, 0
    for ep in range(1, a.epochs + 1):
        perm = torch.randperm(N, generator=g)   # the same on every rank
        barrier.wait()
        t0, c0 = time.perf_counter(), time.process_time()
        steps += (N + B - 1) // B
        if a.variant == "plain":
            for i in range(0, N, B):
                idx = perm[i + rank * lb:i + (rank + 1) * lb]
                opt.zero_grad(set_to_none=True)
                lossf(model(X[idx]), y[idx]).backward()
                opt.step()
        elif a.variant == "loop":
            for step, i in enumerate(range(0, N, B)):
                idx = perm[i:i + B][rank * lb:(rank + 1) * lb]
                opt.zero_grad()
                lossf(model(X[idx]), y[idx]).backward()
                opt.step()
                progress[:] = ep, step, i
        else:
            for i in range(0, N, B):
                idx = perm[i + rank * lb:i + (rank + 1) * lb]
                for p in params:
                    p.grad = None
                lossf(model(X[idx]), y[idx]).backward()
                torch.cat([p.grad.reshape(-1) for p in params], out=grads)
                mom.mul_(a.momentum).add_(grads)              # torch SGD: v = m v + g
                nxt = flats[1 - cur]
                torch.add(flats[cur], mom, alpha=-a.lr, out=nxt)  # w' = w - lr v
                for p, v in zip(params, _flat_views(params, nxt)):
                    p.data = v
                cur = 1 - cur
        cpu += time.process_time() - c0
        barrier.wait()
        dt = time.perf_counter() - t0
        total += dt
        if rank == 0:
            acc = accuracy(model, Xt, yt)
            print("epoch %d: %.2fs %.0f samples/s (global) test_acc %.4f (rank 0's own copy)"
                  % (ep, dt, N / dt, acc), flush=True)
            out.append({"epoch": ep, "sec": dt, "sps": N / dt, "acc": acc})
    print("rank %d cpu per step %.0f us (this process's CPU time: a load hardly changes it)"
          % (rank, cpu * 1e6 / steps), flush=True)
    if rank == 0:
        results.put({"variant": a.variant, "epochs": out, "train_s": total,
                     "sps": a.epochs * N / total, "acc": acc})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variant", default="plain", choices=["plain", "loop", "flat"])
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64, help="global batch")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--flush-denormal", action="store_true",
                    help="torch.set_flush_denormal(True): the momentum of weights whose "
                    "gradient stays 0 (the images' empty border pixels) decays through "
                    "denormal floats, which the local step then computes slowly")
    a = ap.parse_args()
    import multiprocessing as mp
    # one thread a process, OpenBLAS's too (torch.set_num_threads does not bound
    # the pool of the OpenBLAS Debian's torch calls; the spawned processes inherit this)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    ctx = mp.get_context("spawn")   # torch's thread pools do not cross fork
    barrier, results = ctx.Barrier(a.workers), ctx.Queue()
    print("floor: %s%s, %d processes x 1 thread, global batch %d, no communication"
          % (a.variant, ", denormals flushed" if a.flush_denormal else "", a.workers, a.batch),
          flush=True)
    procs = [ctx.Process(target=worker, args=(r, a, barrier, results)) for r in range(a.workers)]
    for p in procs:
        p.start()
    res = results.get()
    for p in procs:
        p.join()
    if any(p.exitcode for p in procs):
        sys.exit("floor: a process failed")
    print("total train %.2fs avg %.0f samples/s final acc %.4f"
          % (res["train_s"], res["sps"], res["acc"]))
    print("result " + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
