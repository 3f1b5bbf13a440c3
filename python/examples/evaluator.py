"""The Python evaluator of the Fashion-MNIST MLP example (mlp_fmnist.py runs it as
the job's evaluator under `python3 -m pskv.launch --evaluator`).

It joins as the evaluator, opens the workers' table with the options their
DistributedOptimizer gives it (pskv.torch.table_options), and for each new
consistent snapshot evaluates the model on the test set and reports val_loss and
val_accuracy to the scheduler (whose --early-stop-metric may stop the job on
them); it keeps the best snapshot's weights in memory and prints them at the end.
"""

import numpy as np
import torch

import pskv
import pskv.torch as pt


def run_evaluator(make_model, load, a):
    _, _, Xt, yt = load()
    model = make_model()
    params = list(model.parameters())
    n = sum(p.numel() for p in params)
    flat = torch.zeros(n)
    pt._rehome(params, flat)
    local = (torch.optim.SGD(params, lr=a.lr, momentum=a.momentum) if a.optimizer == "sgd"
             else torch.optim.Adam(params, lr=a.lr))
    opts = pt.table_options(local, consistency=a.consistency)
    ev = pskv.Evaluator()
    t = ev.table("model", size=n, **opts)
    W = max(1, ev.num_workers)
    steps_per_epoch = (len(Xt) * 6 + a.batch - 1) // a.batch  # 60,000 training images
    lossf = torch.nn.CrossEntropyLoss()
    best = None
    for snap in ev.snapshots(t, out=flat, poll=0.5):
        with torch.no_grad():
            logits = model(Xt)
            loss = lossf(logits, yt).item()
            acc = (logits.argmax(1) == yt).float().mean().item()
        epoch = snap.clock / steps_per_epoch
        ev.report(snap.clock, epoch=epoch, val_loss=loss, val_accuracy=acc)
        print("evaluator: clock %d epoch %.2f val_loss %.4f val_accuracy %.4f"
              % (snap.clock, epoch, loss, acc), flush=True)
        if best is None or acc > best[1]:
            best = (snap.clock, acc, flat.numpy().copy())
    if best:
        print("evaluator: best clock %d val_accuracy %.4f (%d workers)" % (best[0], best[1], W))
    ev.close()
    return 0
