"""pskv for PyTorch: DistributedOptimizer, broadcast_parameters, Embedding and
EmbeddingBag over pskv tables. Imports torch (the rest of pskv works without it).

DistributedOptimizer keeps the usual loop, zero_grad(); loss.backward(); step():

  mode="ps" (the parameter server): the wrapped optimizer's hyper-parameters
    become the table's updater on the servers (SGD with momentum and weight decay,
    Adagrad, Adam, AdamW; any other optimizer raises, naming it). A step is one
    dense push of the gradients and one pull of the weights, neither copied in
    Python: the gradients are gathered (one copy, torch.cat) into a push buffer
    of the library's (with shm=1 the server's shared memory, which the server
    reads in place), and the weights are pulled as a View (with shm=1 the
    region the server wrote them to) that the parameters are re-homed into. So
    the parameters live in the library's memory: DistributedOptimizer copies
    them out when the Worker closes, and they are not to be written to (the
    next step replaces them anyway). prefetch=True (async and ssp) sends the
    next step's pull right after this step's push and waits for it, and for the
    previous step's push, only at the next step() (the C trainer's --prefetch:
    at most two pushes of a worker in flight): the weights a step uses are then
    one step staler. pushpull=True makes a step one Table.pushpull_view of the
    gradients with the clock instead (the C trainer's --prefetch --pushpull), where
    the library takes pskv_pushpull (with shm=1 through shared memory both ways; not
    with filters or a 16-bit wire yet: the first step finds out, once, and falls
    back to push, clock, pull): the same weights step for step. pushpull=None (the
    default) takes it with prefetch through shared memory (shm=1) or without
    replicas (one server has none), as the C trainer's --pushpull left unset does (the MLP
    1.16x over TCP to one server, 1.31x with shm=1); pushpull=False never. Learning-rate schedulers work
    for every updater: step() sees the wrapped optimizer's lr and, when it
    changed, sets it on the servers (Table.set_lr, pskv_table_set_lr) before
    pushing, so the servers apply this step's gradient with it, as the local
    optimizer would (SGD's momentum included). Make the scheduler over the
    wrapped optimizer (DistributedOptimizer.optimizer: torch's schedulers take
    a torch.optim.Optimizer). The table is opened with the group's initial_lr
    when a scheduler set one, so that every process opens it alike. A step at
    lr 0 (a schedule's end) pushes nothing: the weights would not move.
  mode="allreduce" (Horovod's semantics): the gradients are averaged over the
    workers with pskv_allreduce, then the wrapped optimizer steps locally.

Early stopping: step() raises pskv.StopRequested(reason) at the start of the step
after the scheduler asked the job to stop (a clock boundary).
"""

import time

import numpy as np
import torch
import torch.nn.functional as F

from . import errors

_UPDATERS = {"SGD": "sgd", "Adagrad": "adagrad", "Adam": "adam", "AdamW": "adamw"}
# torch 2 has untyped_storage() (storage() warns there); 1.13 (Debian's) only storage()
_UNTYPED = hasattr(torch.Tensor, "untyped_storage")


def _table_opts(opt):
    """The pskv_table_opts of a torch optimizer with one parameter group."""
    name = type(opt).__name__
    if name not in _UPDATERS:
        raise TypeError("DistributedOptimizer(mode='ps'): no server-side updater for %s; "
                        "use SGD, Adagrad, Adam or AdamW, or mode='allreduce'" % name)
    g = opt.param_groups[0]
    for other in opt.param_groups[1:]:
        for k in g:
            if k != "params" and other.get(k) != g[k]:
                raise ValueError("DistributedOptimizer(mode='ps'): parameter groups differ "
                                 "in '%s'; one table takes one set of hyper-parameters" % k)
    # a scheduler made before this records the lr it started from: every process
    # (workers, an evaluator) opens the table with that one
    o = {"updater": _UPDATERS[name], "lr": float(g.get("initial_lr", g["lr"]))}

    def refuse(key, bad):
        if key in g and g[key] != bad and g[key]:
            raise ValueError("DistributedOptimizer(mode='ps'): %s(%s=%r) has no server-side "
                             "equivalent" % (name, key, g[key]))
    if name == "SGD":
        refuse("nesterov", False)
        refuse("dampening", 0)
        o["momentum"] = float(g.get("momentum", 0))
        o["l2"] = float(g.get("weight_decay", 0))
    elif name == "Adagrad":
        refuse("lr_decay", 0)
        refuse("initial_accumulator_value", 0)
        o["eps"] = float(g["eps"])
        o["l2"] = float(g.get("weight_decay", 0))
    else:
        refuse("amsgrad", False)
        refuse("maximize", False)
        o["beta1"], o["beta2"] = (float(b) for b in g["betas"])
        o["eps"] = float(g["eps"])
        o["weight_decay" if name == "AdamW" else "l2"] = float(g.get("weight_decay", 0))
    return o


def table_options(optimizer, consistency="async"):
    """The options DistributedOptimizer(mode="ps") opens its table with, for another
    process that opens the same table (an evaluator): updater, lr, ..., consistency."""
    o = _table_opts(optimizer)
    o["consistency"] = consistency
    return o


def _params(opt):
    return [p for g in opt.param_groups for p in g["params"]]


def _contiguous_strides(shape):
    strides, k = [], 1
    for d in reversed(shape):
        strides.append(k)
        k *= max(d, 1)
    return tuple(reversed(strides))


def _rehome(params, flat, grads=None):
    """Points each parameter (and its grad) at its slice of flat (and grads)."""
    sizes = [p.numel() for p in params]
    for p, v in zip(params, flat.split(sizes)):
        p.data = v.view_as(p)
    if grads is not None:
        for p, v in zip(params, grads.split(sizes)):
            p.grad = v.view_as(p)


class DistributedOptimizer:
    """Wraps a torch optimizer; see the module's comment. name: the table's (ps).
    .times: nanoseconds spent in step() so far, by stage (see step())."""

    def __init__(self, optimizer, worker, mode="ps", name="model", consistency="async",
                 prefetch=None, table_opts=None, pushpull=None):
        if mode not in ("ps", "allreduce"):
            raise ValueError("DistributedOptimizer: mode must be 'ps' or 'allreduce', got %r"
                             % (mode,))
        self.optimizer, self.worker, self.mode = optimizer, worker, mode
        self.params = _params(optimizer)
        for p in self.params:
            if p.device.type != "cpu" or p.dtype != torch.float32:
                raise TypeError("DistributedOptimizer: parameters must be float32 on the CPU, "
                                "got %s on %s" % (p.dtype, p.device))
        self._sizes = [p.numel() for p in self.params]
        self.n = sum(self._sizes)
        # (parameter, offset in the flat buffer, shape, contiguous strides): _use's
        self._geometry, o = [], 0
        for p, n in zip(self.params, self._sizes):
            self._geometry.append((p, o, p.shape, _contiguous_strides(p.shape)))
            o += n
        self.flat = torch.cat([p.detach().reshape(-1) for p in self.params]).contiguous()
        self.times = dict.fromkeys(("steps", "gather", "send", "clock", "wait_pull",
                                    "wait_push", "pull"), 0)
        self.table = None
        self._pending = None    # the next weights' View, in flight (prefetch)
        self._push = None       # the previous step's push (prefetch)
        # pushpull (ps, asked for, or left None where it was faster: see the module's
        # comment): None, not yet known whether the library takes pskv_pushpull here
        # (the first step finds out); True: a step is one pushpull_view; False: push
        # buffer, clock, pull_view (allreduce: never; ps: set below)
        self.pushpull = False
        self._gbufs, self._gi = None, 0  # pushpull: the two gradient buffers, lent by turns
        if mode == "allreduce":
            self.grads = torch.zeros(self.n)
            _rehome(self.params, self.flat, self.grads)
            return
        _rehome(self.params, self.flat)
        opts = _table_opts(optimizer)
        opts.update(table_opts or {})
        self.lr_table = float(opts["lr"])  # the lr the servers apply (as set last)
        opts.setdefault("consistency", consistency)
        self.prefetch = (opts["consistency"] != "bsp") if prefetch is None else prefetch
        if self.prefetch and opts["consistency"] == "bsp":
            raise ValueError("DistributedOptimizer: prefetch under bsp would wait for "
                             "the clock it is in: pass prefetch=False")
        if pushpull is None:
            pushpull = self.prefetch and (bool(worker._cfg.shm) or worker.num_replicas == 1)
        self.pushpull = None if pushpull else False
        self.table = worker.table(name, size=self.n, **opts)
        broadcast_parameters(self.params, worker, table=self.table)
        # the weights live in the library's memory from the first step on: copied
        # out before the Worker closes, so that the model outlives it
        worker._before_close(self._own_weights)

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def state_dict(self):
        return self.optimizer.state_dict()

    def zero_grad(self, set_to_none=True):
        """ps: the gradients are set to None (set_to_none, torch 2's default: backward's
        own tensors become them, and step() gathers them into the push with one copy)
        or zeroed where they are. allreduce: the flat gradient buffer they are
        re-homed into is zeroed (whatever set_to_none)."""
        if self.mode == "ps":
            for p in self.params:
                if set_to_none:
                    p.grad = None
                elif p.grad is not None:
                    p.grad.detach_().zero_()
            return
        self.grads.zero_()
        for p, g in zip(self.params, self._grad_views()):
            if p.grad is None or p.grad.data_ptr() != g.data_ptr():
                p.grad = g

    def _grad_views(self):
        o = 0
        for p in self.params:
            n = p.numel()
            yield self.grads[o:o + n].view_as(p)
            o += n

    def _gather_grads(self):
        """allreduce: copies into the flat buffer any grad that is not already a view
        of it (after model.zero_grad(set_to_none=True), say)."""
        for p, g in zip(self.params, self._grad_views()):
            if p.grad is None:
                g.zero_()
                p.grad = g
            elif p.grad.data_ptr() != g.data_ptr():
                g.copy_(p.grad)
                p.grad = g

    def _gather(self, g):
        """ps: the gradients into g (a flat tensor; one copy, torch.cat, when all are
        set)."""
        grads = [p.grad for p in self.params]
        if all(x is not None for x in grads):
            torch.cat([x.reshape(-1) for x in grads], out=g)
            return
        o = 0
        for p, x in zip(self.params, grads):
            n = p.numel()
            if x is None:
                g[o:o + n].zero_()
            else:
                g[o:o + n].copy_(x.reshape(-1))
            o += n

    def _send_grads(self):
        """ps: the gradients, gathered into a push buffer of the library's (with shm,
        the server's shared memory: no further copy), sent. Returns the Handle."""
        pb = self.table.push_buffer()
        g = pb.torch()
        self._gather(g)
        del g
        t = time.perf_counter_ns()
        h = pb.send()
        self.times["send"] += time.perf_counter_ns() - t
        return h

    def _pushpull(self):
        """ps, pushpull: the gradients gathered into the buffer not lent last step
        (its pushpull was waited for at this step's start: over) and sent in one
        pskv_pushpull with the clock, lent (no copy), its values into a view.
        Returns the View, or None when the library refuses pushpull here
        (filters, a 16-bit wire: nothing sent), which the first step finds out:
        from then on push, clock, pull."""
        if self._gbufs is None:
            self._gbufs = [torch.empty(self.n) for _ in range(2)]
            self._gnp = [b.numpy() for b in self._gbufs]  # the table's fast path: numpy
        self._gi ^= 1
        self._gather(self._gbufs[self._gi])
        t = time.perf_counter_ns()
        try:
            v = self.table.pushpull_view(self._gnp[self._gi], clock=True, copy=False)
        except errors.InvalidArgumentError as e:
            # PSKV_EINVAL on the first step: not with filters or a 16-bit wire
            if self.pushpull is not None or e.name != "PSKV_EINVAL":
                raise
            self.pushpull = False
            self._gbufs = self._gnp = None
            return None
        self.pushpull = True
        self.times["send"] += time.perf_counter_ns() - t
        return v

    def _use(self, view):
        """Points the parameters at a pulled View's memory (no copy); the weights
        they left are given back once nothing references them. Each parameter is
        set_ onto the view's storage at its offset (under no_grad: the parameter
        objects, their grads and the optimizer's state stay): no new tensor a
        parameter, where split() and .data = made eight."""
        view.map()
        flat = view.torch()
        view.release()
        st = flat.untyped_storage() if _UNTYPED else flat.storage()
        with torch.no_grad():
            for p, o, shape, stride in self._geometry:
                p.set_(st, o, shape, stride)
        self.flat = flat

    def step(self, closure=None):
        """allreduce: the mean gradient, then the wrapped optimizer's step. ps: pushes
        the gradients (self.times["gather"], ["send"], ["clock"]: gathered into a
        push buffer, sent, then the clock) and makes the parameters the next weights: with
        prefetch, the ones pulled during this step's compute (["wait_pull"]), after
        waiting for the previous step's push (["wait_push"]: at most two in flight),
        then sends the next pull (["pull"]); without, pushes, waits and pulls."""
        loss = closure() if closure is not None else None
        self.worker.check_stop()
        if self.mode == "allreduce":
            self._gather_grads()
            self.worker.allreduce(self.grads, op="mean")
            self.optimizer.step()
            return loss
        # the servers step, not the wrapped optimizer: count it for lr schedulers
        # (they warn when optimizer.step() seems never called)
        self.optimizer._step_count = getattr(self.optimizer, "_step_count", 0) + 1
        lr = float(self.optimizer.param_groups[0]["lr"])
        if lr < 0 or lr != lr:
            raise ValueError("DistributedOptimizer: lr %r; a table's lr is a number >= 0" % lr)
        if lr != self.lr_table and lr > 0:  # a scheduler changed it: this step's push goes with it
            self.table.set_lr(lr)
            self.lr_table = lr
        tm, now = self.times, time.perf_counter_ns
        send0 = tm["send"]
        t0 = now()
        if self.pushpull is not False and lr > 0:
            # over TCP the last step's values are taken before this request goes, as
            # the C trainer does: a request sent while the previous reply still came
            # down the same connection cost the server's kernel a fifth more a step
            # (docs/benchmarks.md, "A pushpull's request waits for the previous reply")
            first = (self.pushpull is True and self.prefetch and self._pending is not None
                     and not self.worker._cfg.shm)
            tw = 0
            if first:
                self._use(self._pending)
                self._pending = None
                tw = now() - t0
            v = self._pushpull()
            if v is not None:
                t1 = now()
                # the weights for the next step: with prefetch, the values the last
                # step's pushpull brought (this one's travel during the next compute),
                # the weights push-then-pull's prefetch uses, step for step: its first
                # step waits for its values and sends the next weights' pull;
                # without prefetch, this step's values
                if first:
                    self._pending = v
                elif self.prefetch and self._pending is not None:
                    self._use(self._pending)
                    self._pending = v
                else:
                    self._use(v)
                    if self.prefetch:
                        self._pending = self.table.pull_view()
                t2 = now()
                tm["gather"] += t1 - t0 - tw - (tm["send"] - send0)
                tm["wait_pull"] += t2 - t1 + tw
                tm["steps"] += 1
                return loss
        # lr 0 (a schedule's last steps): the weights would not move, so nothing is
        # pushed (the servers' optimizer state does not see this gradient); the clock
        # and the pull go on
        push = self._send_grads() if lr > 0 else None
        t1 = now()
        self.worker.clock()
        t2 = now()
        if not self.prefetch or self._pending is None:  # no prefetch, or its first step
            if push is not None:
                push.wait()
            t3 = now()
            self._use(self.table.pull_view())
            t4 = now()
            if self.prefetch:
                self._pending = self.table.pull_view()
            tm["wait_push"] += t3 - t2
            tm["wait_pull"] += t4 - t3
        else:
            self._use(self._pending)
            t3 = now()
            if self._push is not None:
                self._push.wait()
            self._push = push
            t4 = now()
            self._pending = self.table.pull_view()  # after this step's push: sees it
            tm["wait_pull"] += t3 - t2
            tm["wait_push"] += t4 - t3
        tm["pull"] += now() - t4
        tm["gather"] += t1 - t0 - (tm["send"] - send0)
        tm["clock"] += t2 - t1
        tm["steps"] += 1
        return loss

    def synchronize(self, latest=False):
        """Waits for a prefetched pull and uses its weights (before evaluating);
        latest=True then pulls the table's weights as they are now (every worker's
        pushes the servers applied) and uses those."""
        if self.mode != "ps":
            return
        if self._pending is not None:
            self._use(self._pending)
            self._pending = None
        if self._push is not None:
            self._push.wait()
            self._push = None
        if latest:
            self._use(self.table.pull_view())

    def _own_weights(self):
        """The Worker closes: the weights (and a pending pull) leave its memory."""
        self._pending = self._push = None
        own = self.flat.clone()
        _rehome(self.params, own)
        self.flat = own


def broadcast_parameters(params, worker, root_rank=0, table=None):
    """Makes every worker's parameters rank root_rank's. params: a module, its
    state_dict(), or a list of tensors. With a table (mode ps), the root assigns
    them to it and every worker pulls after a barrier; else an all-reduce sum
    with the other ranks' values zeroed (no table needed)."""
    if isinstance(params, torch.nn.Module):
        params = list(params.state_dict().values())
    elif isinstance(params, dict):
        params = list(params.values())
    tensors = [p for p in params if torch.is_tensor(p) and p.is_floating_point()]
    flat = torch.cat([p.detach().reshape(-1).float() for p in tensors]).contiguous()
    if table is not None:
        if worker.rank == root_rank:
            table.assign(flat).wait()
        worker.barrier()
        table.pull(out=flat).wait()
    else:
        if worker.rank != root_rank:
            flat.zero_()
        worker.allreduce(flat, op="sum")
    o = 0
    with torch.no_grad():
        for p in tensors:
            n = p.numel()
            p.copy_(flat[o:o + n].view_as(p))
            o += n


class _SparseTable(torch.nn.Module):
    """What Embedding and EmbeddingBag share: a sparse table of width D, rows
    pulled for a batch's distinct ids, their gradients pushed in backward."""

    def __init__(self, embedding_dim, worker, name, updater, lr, consistency, **opts):
        super().__init__()
        opts.setdefault("init", "normal")
        opts.setdefault("init_scale", 0.01)
        self.dim, self.worker = embedding_dim, worker
        self.table = worker.table(name, kind="sparse", width=embedding_dim, updater=updater,
                                  lr=lr, consistency=consistency, **opts)
        self._pushes = []

    def load(self, weight):
        """Assigns rows 0..N-1 (a float32 N x D tensor), e.g. from nn.Embedding."""
        w = weight.detach().contiguous().float()
        self.table.assign(w.reshape(-1), keys=np.arange(w.shape[0], dtype=np.uint64)).wait()

    def flush(self):
        """Waits for the gradients pushed so far."""
        while self._pushes:
            self._pushes.pop().wait()

    def rows(self, ids):
        """(rows D-wide, requiring grad, inverse index of ids into them)."""
        if ids.dtype != torch.int64:
            raise TypeError("%s: ids must be torch.int64, got %s"
                            % (type(self).__name__, ids.dtype))
        if ids.numel() and int(ids.min()) < 0:
            raise ValueError("%s: negative id %d" % (type(self).__name__, int(ids.min())))
        self.flush()  # the next pull sees this worker's previous gradients
        uniq, inverse = torch.unique(ids.reshape(-1), return_inverse=True)
        out = torch.empty(uniq.numel(), self.dim)
        self.table.pull(out=out, keys=uniq.contiguous()).wait()
        out.requires_grad_(self.training)
        if self.training:
            keys = uniq.contiguous()

            def push(grad):
                self._pushes.append(self.table.push(grad.contiguous(), keys=keys))
            out.register_hook(push)
        return out, inverse.reshape(ids.shape)


class Embedding(_SparseTable):
    """nn.Embedding over a pskv sparse table (any int64 id >= 0, no num_embeddings
    bound): forward pulls the batch's distinct rows, backward pushes their
    gradients, the table's updater (sgd, adagrad, ftrl, adam) runs on the servers."""

    def __init__(self, embedding_dim, worker, name="embedding", updater="adagrad", lr=0.01,
                 consistency="async", **opts):
        super().__init__(embedding_dim, worker, name, updater, lr, consistency, **opts)

    def forward(self, ids):
        rows, inverse = self.rows(ids)
        return F.embedding(inverse, rows)


class EmbeddingBag(_SparseTable):
    """nn.EmbeddingBag (mode "sum" or "mean") over a pskv sparse table."""

    def __init__(self, embedding_dim, worker, name="embedding_bag", mode="sum",
                 updater="adagrad", lr=0.01, consistency="async", **opts):
        super().__init__(embedding_dim, worker, name, updater, lr, consistency, **opts)
        if mode not in ("sum", "mean"):
            raise ValueError("EmbeddingBag: mode must be 'sum' or 'mean', got %r" % (mode,))
        self.mode = mode

    def forward(self, ids, offsets=None, per_sample_weights=None):
        rows, inverse = self.rows(ids)
        return F.embedding_bag(inverse, rows, offsets, mode=self.mode,
                               per_sample_weights=per_sample_weights)


__all__ = ["DistributedOptimizer", "broadcast_parameters", "Embedding", "EmbeddingBag",
           "table_options"]
