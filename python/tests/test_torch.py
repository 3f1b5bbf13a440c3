"""pskv.torch against PyTorch itself: DistributedOptimizer in both modes equals a
single-process reference (bsp, one worker), Embedding equals nn.Embedding under
sgd, optimizers without a server-side updater are refused, and the Fashion-MNIST
MLP trains to >= 0.85 in 2 epochs with two workers. Never skipped under CI=true."""

import os
import subprocess
import sys

import numpy as np
import pytest

import pskv
from conftest import need_torch

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))


def _model(torch):
    torch.manual_seed(1)
    return torch.nn.Sequential(torch.nn.Linear(10, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def _data(torch):
    g = torch.Generator().manual_seed(2)
    return torch.randn(64, 10, generator=g), torch.randint(0, 3, (64,), generator=g)


def _train(torch, model, opt, steps=8):
    X, y = _data(torch)
    lossf = torch.nn.CrossEntropyLoss()
    for s in range(steps):
        idx = slice(8 * s % 64, 8 * s % 64 + 8)
        opt.zero_grad()
        lossf(model(X[idx]), y[idx]).backward()
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


OPTS = [
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=1e-3)),
    ("Adam", dict(lr=0.01, weight_decay=1e-3)),
    ("AdamW", dict(lr=0.01, weight_decay=0.05)),
    ("Adagrad", dict(lr=0.1)),
]


@pytest.mark.parametrize("mode", ["ps", "allreduce"])
@pytest.mark.parametrize("name,kw", OPTS, ids=[o[0] for o in OPTS])
def test_distributed_optimizer_equals_reference(cluster, mode, name, kw):
    torch = need_torch()
    import pskv.torch as pt
    ref_model = _model(torch)
    ref = _train(torch, ref_model, getattr(torch.optim, name)(ref_model.parameters(), **kw))
    with pskv.Worker(scheduler=cluster.address) as w:
        model = _model(torch)
        opt = pt.DistributedOptimizer(getattr(torch.optim, name)(model.parameters(), **kw), w,
                                      mode=mode, consistency="bsp", name="m_" + name,
                                      pushpull=mode == "ps")
        got = _train(torch, model, opt)
        assert opt.pushpull is (mode == "ps")  # ps: one pskv_pushpull a step (bsp: waited)
    for a, b in zip(ref, got):
        assert torch.allclose(a, b, atol=2e-5, rtol=1e-4), (a - b).abs().max()


@pytest.mark.parametrize("shm", [0, 1])
def test_optimizer_pushpull_or_push_then_pull(cluster, shm):
    """mode ps, async with prefetch, pushpull=True: a step is one pskv_pushpull into a
    view (with shm=1 through shared memory both ways), as the library takes it
    over TCP and with shm alike: the same weights as push, clock and pull
    (pushpull=False), step for step (one worker)."""
    torch = need_torch()
    import pskv.torch as pt
    got = {}
    with pskv.Worker(scheduler=cluster.address, shm=shm) as w:
        for pp in (True, False):
            model = _model(torch)
            opt = pt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), w,
                                          name="pp%d%d" % (shm, pp), pushpull=pp)
            got[pp] = _train(torch, model, opt, steps=12)
            opt.synchronize()
            assert opt.pushpull is pp
            h = w.held()
            assert h["views"] <= 2 and h["kept_arrays"] <= 2, h
    for a, b in zip(got[True], got[False]):
        assert torch.allclose(a, b, atol=1e-6), (a - b).abs().max()


def test_optimizer_pushpull_default(cluster2):
    """pushpull left None: one pskv_pushpull a step with prefetch and no replicas (here
    two servers, R = 1, over TCP), as the C trainer's --pushpull left unset; off
    without prefetch and when turned off (pushpull=False); the same weights step
    for step either way (one worker)."""
    torch = need_torch()
    import pskv.torch as pt
    got = {}
    with pskv.Worker(scheduler=cluster2.address, shm=0) as w:
        assert (w.num_servers, w.num_replicas) == (2, 1)
        for name, kw, want in (("auto", {}, True), ("off", {"pushpull": False}, False),
                               ("noprefetch", {"prefetch": False}, False)):
            model = _model(torch)
            opt = pt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), w,
                                          name="ppd_" + name, **kw)
            got[name] = _train(torch, model, opt, steps=12)
            opt.synchronize()
            assert opt.pushpull is want, name
    for a, b in zip(got["auto"], got["off"]):
        assert torch.allclose(a, b, atol=1e-6), (a - b).abs().max()


def test_bsp_table_after_async_steps(cluster2):
    """A bsp table opened by a worker whose clock an async table already moved on:
    its first pull (broadcast_parameters) is answered, not parked for CLOCKs that
    came before the table existed (it hung until the request time-out), and its
    steps give what a bsp run from scratch gives (one worker)."""
    torch = need_torch()
    import pskv.torch as pt
    with pskv.Worker(scheduler=cluster2.address, request_timeout_ms=10000) as w:
        model = _model(torch)
        opt = pt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), w,
                                      name="first_async")
        _train(torch, model, opt, steps=12)
        opt.synchronize()
        ref_model = _model(torch)
        ref = _train(torch, ref_model, torch.optim.SGD(ref_model.parameters(), lr=0.1))
        model = _model(torch)
        opt = pt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), w,
                                      name="then_bsp", consistency="bsp")
        got = _train(torch, model, opt)
    for a, b in zip(ref, got):
        assert torch.allclose(a, b, atol=2e-5, rtol=1e-4), (a - b).abs().max()


def test_optimizer_pushpull_falls_back_with_filters(cluster):
    """pushpull=True on a table with wire filters (lz4, lossless): the library
    refuses pskv_pushpull there (PSKV_EINVAL, nothing sent), the first step finds
    out and every step is push, clock, pull: the same weights as pushpull=False
    without filters, bit for bit."""
    torch = need_torch()
    import pskv.torch as pt
    got = {}
    with pskv.Worker(scheduler=cluster.address) as w:
        for pp in (True, False):
            model = _model(torch)
            opt = pt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1), w,
                                          name="ppf%d" % pp, pushpull=pp,
                                          table_opts={"filters": "lz4"} if pp else None)
            got[pp] = _train(torch, model, opt, steps=6)
            opt.synchronize()
            assert opt.pushpull is False
    for a, b in zip(got[True], got[False]):
        assert torch.equal(a, b), (a - b).abs().max()


def test_optimizer_weights_in_views_outlive_worker(cluster):
    """mode ps, async with prefetch: the parameters are re-homed into pulled views
    (the library's memory; no more than the current and the prefetched one held,
    whatever the steps), push buffers are all sent, zero_grad either way; close()
    copies the weights out, so the model still computes after it."""
    torch = need_torch()
    import pskv.torch as pt
    X, y = _data(torch)
    lossf = torch.nn.CrossEntropyLoss()
    w = pskv.Worker(scheduler=cluster.address)
    model = _model(torch)
    opt = pt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), w,
                                  name="outlive")
    first = [p.detach().clone() for p in model.parameters()]
    ptrs = set()
    for s in range(24):
        opt.zero_grad(set_to_none=s % 2 == 0)
        lossf(model(X[:8]), y[:8]).backward()
        opt.step()
        ptrs.add(model[0].weight.data_ptr())
        h = w.held()
        assert h["views"] <= 2 and h["push_buffers"] == 0, h
    assert len(ptrs) >= 2 and opt.times["steps"] == 24
    opt.synchronize(latest=True)
    before = [p.detach().clone() for p in model.parameters()]
    assert any(not torch.equal(a, b) for a, b in zip(first, before))
    w.close()
    assert all(torch.equal(a, p.detach()) for a, p in zip(before, model.parameters()))
    assert model(X).shape == (64, 3)


@pytest.mark.parametrize("name,kw", OPTS, ids=[o[0] for o in OPTS])
def test_lr_scheduler(cluster, name, kw):
    """A torch lr scheduler over the wrapped optimizer: the servers' updater follows
    it (pskv_table_set_lr), step for step as the local optimizer (bsp, one worker);
    the lr drops three times in 8 steps, and a run that kept the first lr differs."""
    torch = need_torch()
    import pskv.torch as pt
    X, y = _data(torch)
    lossf = torch.nn.CrossEntropyLoss()

    def run(model, opt, sched):
        for step in range(8):
            opt.zero_grad()
            lossf(model(X[8 * step:8 * step + 8]), y[8 * step:8 * step + 8]).backward()
            opt.step()
            if sched:
                sched.step()
        return [p.detach().clone() for p in model.parameters()]
    ref_model, flat_model = _model(torch), _model(torch)
    ref_opt = getattr(torch.optim, name)(ref_model.parameters(), **kw)
    ref = run(ref_model, ref_opt, torch.optim.lr_scheduler.StepLR(ref_opt, 2, 0.3))
    flat = run(flat_model, getattr(torch.optim, name)(flat_model.parameters(), **kw), None)
    with pskv.Worker(scheduler=cluster.address) as w:
        model = _model(torch)
        opt = pt.DistributedOptimizer(getattr(torch.optim, name)(model.parameters(), **kw), w,
                                      consistency="bsp", name="lrs_" + name)
        got = run(model, opt, torch.optim.lr_scheduler.StepLR(opt.optimizer, 2, 0.3))
        assert opt.lr_table == pytest.approx(kw["lr"] * 0.3 ** 3)
    for a, b, c in zip(ref, got, flat):
        assert torch.allclose(a, b, atol=2e-5, rtol=1e-4), (a - b).abs().max()
    assert max((a - c).abs().max().item() for a, c in zip(ref, flat)) > 1e-3


def test_lr_zero_steps_push_nothing(cluster):
    """A schedule that ends at lr 0 (cosine to 0): those steps push nothing, the
    weights stay where the last step with an lr left them; a negative lr raises."""
    torch = need_torch()
    import pskv.torch as pt
    X, y = _data(torch)
    lossf = torch.nn.CrossEntropyLoss()
    with pskv.Worker(scheduler=cluster.address) as w:
        model = _model(torch)
        opt = pt.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01), w,
                                      consistency="bsp", name="lr0")
        sched = torch.optim.lr_scheduler.LambdaLR(opt.optimizer, lambda k: 1.0 if k < 3 else 0.0)
        seen = []
        for step in range(6):
            opt.zero_grad()
            lossf(model(X[:8]), y[:8]).backward()
            opt.step()
            sched.step()
            seen.append(torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone())
        assert not torch.equal(seen[1], seen[2])
        assert all(torch.equal(seen[2], s) for s in seen[3:])
        opt.optimizer.param_groups[0]["lr"] = -0.1
        with pytest.raises(ValueError, match="lr -0.1"):
            opt.step()


def test_set_lr_refuses_bad_values(cluster):
    """Table.set_lr: NaN, 0, -1, inf and a non-number raise naming the value before
    anything is sent; a sum table (no lr) is refused by the library, naming it; the
    table keeps serving."""
    with pskv.Worker(scheduler=cluster.address) as w:
        t = w.table("lr_bad", size=10, updater="adam", lr=0.01)
        for bad, text in ((float("nan"), "nan"), (0, "0.0"), (-1.0, "-1.0"),
                          (float("inf"), "inf")):
            with pytest.raises(ValueError, match="lr %s refused" % text):
                t.set_lr(bad)
        with pytest.raises(TypeError, match="lr must be a number, got str"):
            t.set_lr("0.1")
        t.set_lr(0.005)
        s = w.table("lr_sum", size=10, updater="sum")
        with pytest.raises(pskv.InvalidArgumentError, match="updater sum takes no lr"):
            s.set_lr(0.1)
        s.push(np.ones(10, np.float32)).wait()
        assert np.all(s.pull().wait() == 1)


def test_unsupported_optimizer_named(cluster):
    torch = need_torch()
    import pskv.torch as pt
    with pskv.Worker(scheduler=cluster.address) as w:
        m = _model(torch)
        with pytest.raises(TypeError, match="no server-side updater for RMSprop"):
            pt.DistributedOptimizer(torch.optim.RMSprop(m.parameters()), w)
        with pytest.raises(ValueError, match="nesterov"):
            pt.DistributedOptimizer(torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9,
                                                    nesterov=True), w)
        with pytest.raises(TypeError, match="float32"):
            pt.DistributedOptimizer(torch.optim.SGD(_model(torch).double().parameters(),
                                                    lr=0.1), w)


@pytest.mark.parametrize("bag", [False, True])
def test_embedding_equals_torch(cluster, bag):
    """Same rows as torch's nn.Embedding / nn.EmbeddingBag after 10 sgd steps."""
    torch = need_torch()
    import pskv.torch as pt
    torch.manual_seed(3)
    N, D = 50, 8
    ref = torch.nn.EmbeddingBag(N, D, mode="mean") if bag else torch.nn.Embedding(N, D)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.5)
    with pskv.Worker(scheduler=cluster.address) as w:
        emb = (pt.EmbeddingBag(D, w, mode="mean", updater="sgd", lr=0.5, name="eb") if bag
               else pt.Embedding(D, w, updater="sgd", lr=0.5, name="e"))
        emb.load(ref.weight)
        g = torch.Generator().manual_seed(4)
        for _ in range(10):
            ids = torch.randint(0, N, (6, 4), generator=g)   # repeats within a batch
            target = torch.randn(6, D, generator=g) if bag else torch.randn(6, 4, D, generator=g)
            for m in (ref, emb):
                loss = ((m(ids) - target) ** 2).sum()
                loss.backward()
            ropt.step()
            ropt.zero_grad()
        emb.flush()
        rows = emb.table.pull(keys=np.arange(N, dtype=np.uint64)).wait().reshape(N, D)
        assert torch.allclose(torch.from_numpy(rows), ref.weight.detach(), atol=1e-5)
        with pytest.raises(ValueError, match="negative id"):
            emb(torch.tensor([[1, -2]]))
        with pytest.raises(TypeError, match="int64"):
            emb(torch.tensor([[1, 2]], dtype=torch.int32))


def test_torch_tensors_push_and_pull_in_place(cluster):
    torch = need_torch()
    with pskv.Worker(scheduler=cluster.address) as w:
        t = w.table("tt", size=100, updater="sum")
        t.push(torch.ones(100)).wait()
        out = torch.zeros(100)
        ptr = out.data_ptr()
        t.pull(out=out).wait()
        assert out.data_ptr() == ptr and torch.all(out == 1)
        with pytest.raises(ValueError, match="values: the tensor is not contiguous"):
            t.push(torch.ones(200)[::2])
        with pytest.raises(TypeError, match="values: tensor dtype torch.float64"):
            t.push(torch.ones(100, dtype=torch.float64))
        with t.pull_view() as v:
            assert torch.all(v.torch() == 1)


def test_mlp_two_workers_two_epochs():
    """The example trains the Fashion-MNIST MLP to >= 0.85 test accuracy in 2 epochs
    with two workers (Adam on the servers, lr 0.002 falling to 0 along a cosine,
    set on the servers every 10 steps; async, prefetch, shm), launched by
    pskv.launch. The runs behind these settings are in docs/python.md."""
    need_torch()
    env = dict(os.environ, PYTHONPATH=os.path.join(TOP, "python"))
    p = subprocess.run([sys.executable, "-m", "pskv.launch", "--servers", "1", "--workers", "2",
                        "--timeout", "240", "--", sys.executable,
                        os.path.join(TOP, "python", "examples", "mlp_fmnist.py"),
                        "--epochs", "2", "--optimizer", "adam", "--lr", "0.002",
                        "--schedule", "cosine"],
                       env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 0, out[-3000:]
    import json
    res = json.loads([ln for ln in out.splitlines() if ln.startswith("result ")][-1][7:])
    assert res["acc"] >= 0.85, out[-3000:]
