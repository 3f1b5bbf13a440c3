"""CPU per step of the Fashion-MNIST MLP through pskv.torch.DistributedOptimizer
(python/examples/mlp_fmnist.py's model, data order, optimizer and global batch;
async, prefetch, shm), for the worker processes and the server: what a change to
the package or the library saves, measured in CPU time, which a busy machine
disturbs far less than samples/s.

For each run: a fresh cluster (1 server, 2 workers); each worker does --warm steps,
meets the other at a barrier, then does --steps steps. Over those steps it prints
its process's CPU time (every thread: the library's and ZeroMQ's too) and its main
thread's; rank 0 reads the server's CPU time (/proc/PID/task/*/schedstat, every
thread) at the two barriers around them, divided by the steps of both workers.

--perf FILE: perf record of both workers and the server over the measured steps
(FILE.RUN; perf report -i FILE.RUN --sort comm,dso,sym).
--floor: the same loop with torch's own SGD step and no pskv, in one process (torch's
CPU per step: what pskv adds is the rest).

Usage: PYTHONPATH=python /usr/bin/python3 python/bench/step_cpu.py [--steps 600]
           [--warm 100] [--runs 3] [--perf FILE] [--floor]
Prints per run and rank: run=N rank=R steps=S cpu_us=... main_us=... faults=...
switches=... (faults: minor page faults a step; switches: context switches
of every thread a step) and per run: run=N server_cpu_us=... server_faults=...
server_switches=... (per step of one worker) push_apply_us=... pull_copy_us=... (the
server's own account at exit, wall time); then the medians:
  worker_cpu_us=... worker_main_us=... server_cpu_us=...
"""

import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def sched_ns(pid):
    """CPU time of every thread of pid so far, in ns (schedstat's first field)."""
    total = 0
    for f in glob.glob("/proc/%d/task/*/schedstat" % pid):
        try:
            with open(f) as fh:
                total += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total


def switches(pid):
    """Context switches of every thread of pid so far (voluntary and not)."""
    total = 0
    for f in glob.glob("/proc/%d/task/*/status" % pid):
        try:
            with open(f) as fh:
                total += sum(int(x.split()[1]) for x in fh if "ctxt_switches" in x)
        except (OSError, ValueError, IndexError):
            pass
    return total


def minflt(pid):
    """Minor page faults of pid so far (every thread: /proc/PID/stat's field 10)."""
    with open("/proc/%d/stat" % pid) as f:
        return int(f.read().rsplit(")", 1)[1].split()[7])


def child(a):
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    import torch
    import torch.nn as nn
    import pskv
    import pskv.torch as pt
    from mlp_fmnist import load, make_model
    torch.set_num_threads(1)
    rank = int(os.environ["PSKV_RANK"])
    spid = int(os.environ["STEP_CPU_SERVER"])
    w = pskv.Worker(rank=rank, shm=1, request_timeout_ms=120000)
    X, y, _, _ = load()
    model = make_model()
    opt = pt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9),
                                  w, mode="ps", consistency="async")
    lossf = nn.CrossEntropyLoss()
    lb, B, N = 64 // w.num_workers, 64, len(X)
    g = torch.Generator().manual_seed(0)

    def batches():
        while True:
            perm = torch.randperm(N, generator=g)
            for i in range(0, N, B):
                yield perm[i:i + B][rank * lb:(rank + 1) * lb]

    it = batches()

    def steps(n):
        for _ in range(n):
            idx = next(it)
            opt.zero_grad()
            lossf(model(X[idx]), y[idx]).backward()
            opt.step()
            w.set_progress(0, 0, 0)

    steps(a.warm)
    w.barrier()
    s0 = sched_ns(spid) if rank == 0 else 0
    f0, sf0 = minflt(os.getpid()), minflt(spid)
    x0, sx0 = switches(os.getpid()), switches(spid)
    perf = None
    if rank == 0 and a.perf:  # every worker and the server, sampled on CPU time
        with open(os.environ["STEP_CPU_PIDS"]) as f:
            pids = f.read().split() + [str(spid)]
        perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "1999", "-g",
                                 "-o", a.perf, "-p", ",".join(pids)])
    c0, m0 = time.process_time_ns(), time.thread_time_ns()
    steps(a.steps)
    c1, m1 = time.process_time_ns(), time.thread_time_ns()
    f1, x1 = minflt(os.getpid()), switches(os.getpid())
    if perf:
        perf.send_signal(2)
        perf.wait(60)
    opt.synchronize()
    w.barrier()
    s1, sf1, sx1 = (sched_ns(spid), minflt(spid), switches(spid)) if rank == 0 else (0, 0, 0)
    print("rank=%d steps=%d cpu_us=%.1f main_us=%.1f faults=%.2f switches=%.2f"
          % (rank, a.steps, (c1 - c0) / 1e3 / a.steps, (m1 - m0) / 1e3 / a.steps,
             (f1 - f0) / a.steps, (x1 - x0) / a.steps), flush=True)
    if rank == 0:
        n = w.num_workers * a.steps
        print("server_cpu_us=%.1f server_faults=%.2f server_switches=%.2f"
              % ((s1 - s0) / 1e3 / n, (sf1 - sf0) / n, (sx1 - sx0) / n), flush=True)
    w.close()


def floor(a):
    """The same loop with a local SGD step and no pskv: torch's CPU per step."""
    sys.path.insert(0, os.path.join(HERE, "..", "examples"))
    import torch
    import torch.nn as nn
    from mlp_fmnist import load, make_model
    torch.set_num_threads(1)
    X, y, _, _ = load()
    model = make_model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    lossf = nn.CrossEntropyLoss()
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(X), generator=g)
    for k in range(a.warm + a.steps):
        if k == a.warm:
            c0, f0 = time.process_time_ns(), minflt(os.getpid())
        i = (k * 64) % (len(X) - 64)
        idx = perm[i:i + 64][:32]
        opt.zero_grad()
        lossf(model(X[idx]), y[idx]).backward()
        opt.step()
    print("floor steps=%d cpu_us=%.1f faults=%.2f" % (a.steps, (time.process_time_ns() - c0) / 1e3
                                                     / a.steps, (minflt(os.getpid()) - f0) / a.steps))


def one_run(a, run, tmp):
    from pskv.testing import LocalCluster
    res = {}
    logs = os.path.join(tmp, "logs.%d" % run)
    os.mkdir(logs)
    with LocalCluster(servers=1, workers=2, log_dir=logs) as c:
        procs = []
        for r in range(2):
            env = dict(os.environ, PSKV_SCHEDULER=c.address, PSKV_RANK=str(r),
                       STEP_CPU_SERVER=str(c.procs["server-0"].pid), OPENBLAS_NUM_THREADS="1")
            cmd = [sys.executable, os.path.abspath(__file__), "--child", "--steps", str(a.steps),
                   "--warm", str(a.warm)] + (["--perf", "%s.%d" % (a.perf, run)] if a.perf else [])
            env["STEP_CPU_PIDS"] = os.path.join(tmp, "pids.%d" % run)
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT))
        with open(os.path.join(tmp, "pids.%d" % run), "w") as f:
            f.write(" ".join(str(p.pid) for p in procs))
        for r, p in enumerate(procs):
            text = p.communicate(timeout=3600)[0].decode(errors="replace")
            m = re.search(r"rank=\d+ steps=\d+ cpu_us=([0-9.]+) main_us=([0-9.]+) "
                          r"faults=([0-9.]+) switches=([0-9.]+)", text)
            if p.returncode or not m:
                raise RuntimeError("rank %d failed (%s):\n%s" % (r, p.returncode, text[-3000:]))
            res[r] = {"cpu": float(m.group(1)), "main": float(m.group(2)),
                      "faults": float(m.group(3)), "switches": float(m.group(4))}
            s = re.search(r"server_cpu_us=([0-9.]+) server_faults=([0-9.]+) "
                          r"server_switches=([0-9.]+)", text)
            if s:
                res["server"], res["server_faults"], res["server_switches"] = (
                    float(s.group(1)), float(s.group(2)), float(s.group(3)))
    # the server's own account at exit: microseconds a push took to check and apply,
    # a pull to copy (over the whole job)
    m = re.search(r"pushes \(([0-9.]+) us each to check and apply\), \d+ pulls \(([0-9.]+) us",
                  c.log("server-0"))
    res["apply"], res["copy"] = (float(m.group(1)), float(m.group(2))) if m else (0.0, 0.0)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--warm", type=int, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--perf", metavar="FILE",
                    help="perf record (cpu-clock, call graphs) of the workers and the server "
                    "over the measured steps, into FILE.RUN")
    ap.add_argument("--floor", action="store_true",
                    help="the loop with a local SGD step, no pskv, in this process")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        return child(a)
    if a.floor:
        return floor(a)
    cpu, main_, srv = [], [], []
    with tempfile.TemporaryDirectory(prefix="pskv-step-cpu-") as tmp:
        for run in range(1, a.runs + 1):
            res = one_run(a, run, tmp)
            for r in (0, 1):
                x = res[r]
                print("run=%d rank=%d steps=%d cpu_us=%.1f main_us=%.1f faults=%.2f switches=%.2f"
                      % (run, r, a.steps, x["cpu"], x["main"], x["faults"], x["switches"]),
                      flush=True)
                cpu.append(x["cpu"])
                main_.append(x["main"])
            print("run=%d server_cpu_us=%.1f server_faults=%.2f server_switches=%.2f "
                  "push_apply_us=%.1f pull_copy_us=%.1f"
                  % (run, res["server"], res["server_faults"], res["server_switches"],
                     res["apply"], res["copy"]), flush=True)
            srv.append(res["server"])
    print("worker_cpu_us=%.1f worker_main_us=%.1f server_cpu_us=%.1f"
          % (statistics.median(cpu), statistics.median(main_), statistics.median(srv)))

if __name__ == "__main__":
    sys.exit(main())
