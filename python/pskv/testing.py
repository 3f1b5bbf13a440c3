"""pskv.testing.LocalCluster: a real scheduler and servers on loopback, for tests
and examples.

    with LocalCluster(servers=1, workers=2) as c:
        w = pskv.Worker(scheduler=c.address, rank=0)

The daemons come from $PSKV_BIN_DIR, else the source tree's build/bin, else PATH;
each listens on loopback on a free port below the kernel's ephemeral range (as
scripts/launch-local.sh picks it). stop() (and the context's exit) ends them by
pid: SIGTERM, then SIGKILL after a grace period. Logs go to log_dir. The scheduler
runs at its defaults (its adaptive failure detector: docs/operations.md); a test of
that detector passes dead_after_ms (the upper bound, --dead-after-ms).
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time


def bin_dir():
    env = os.environ.get("PSKV_BIN_DIR")
    if env:
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.normpath(os.path.join(here, "..", "..", "build", "bin"))
    if os.path.exists(os.path.join(tree, "pskv-scheduler")):
        return tree
    found = shutil.which("pskv-scheduler")
    if found:
        return os.path.dirname(found)
    raise FileNotFoundError("pskv-scheduler not found: build pskv (make all) or set PSKV_BIN_DIR")


def _listening(port):
    s = socket.socket()
    try:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0
    finally:
        s.close()


def free_port():
    """A TCP port nobody listens on and nobody can take from the ephemeral range."""
    lo = 32768
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo = int(f.read().split()[0])
    except OSError:
        pass
    for _ in range(200):
        p = random.randrange(20000, max(lo, 21000))
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            continue
        finally:
            s.close()
        if not _listening(p):
            return p
    raise RuntimeError("no free TCP port found")


class LocalCluster:
    """pskv-scheduler and `servers` pskv-servers for a job of `workers` workers."""

    def __init__(self, servers=1, workers=1, evaluators=0, scheduler_args=(), server_args=(),
                 log_dir=None, start_timeout=10.0, dead_after_ms=None):
        self.servers, self.workers = servers, workers
        self.bin = bin_dir()
        self.log_dir = log_dir or tempfile.mkdtemp(prefix="pskv-py-")
        self.port = free_port()
        self.address = "127.0.0.1:%d" % self.port
        self.procs = {}
        self._logs = []
        sched = [os.path.join(self.bin, "pskv-scheduler"), "--port", str(self.port),
                 "--servers", str(servers), "--workers", str(workers)]
        if evaluators:
            sched += ["--evaluators", str(evaluators)]
        if dead_after_ms:
            sched += ["--dead-after-ms", str(dead_after_ms)]
        try:
            self._start("scheduler", sched + list(scheduler_args))
            end = time.monotonic() + start_timeout
            while not _listening(self.port):
                if self.procs["scheduler"].poll() is not None or time.monotonic() > end:
                    raise RuntimeError("pskv-scheduler did not listen on %d (log: %s)"
                                       % (self.port, self.log("scheduler")))
                time.sleep(0.02)
            for i in range(servers):
                self.start_server(i, server_args)
        except BaseException:
            self.stop()
            raise

    def _start(self, name, argv):
        log = open(os.path.join(self.log_dir, name + ".log"), "ab")
        self._logs.append(log)
        self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                            stderr=subprocess.STDOUT)

    def start_server(self, i, extra=()):
        self._start("server-%d" % i, [os.path.join(self.bin, "pskv-server"), "--scheduler",
                                      self.address] + list(extra))

    def log(self, name):
        """The text of daemon `name`'s log ("scheduler", "server-0", ...)."""
        with open(os.path.join(self.log_dir, name + ".log"), errors="replace") as f:
            return f.read()

    def kill(self, name, sig=signal.SIGKILL):
        """Sends sig to one daemon (by pid) and reaps it when it was SIGKILL."""
        p = self.procs[name]
        p.send_signal(sig)
        if sig == signal.SIGKILL:
            p.wait(10)

    def stop(self, grace=5.0):
        """Ends every daemon still running: SIGTERM, then SIGKILL after grace s."""
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        end = time.monotonic() + grace
        for p in self.procs.values():
            try:
                p.wait(max(0.0, end - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        for f in self._logs:
            f.close()
        self._logs = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def open_workers(address, n, **config):
    """Opens n Workers of one job at once (ranks 0..n-1), in threads: each open
    waits for the whole cluster, so one after the other would never return."""
    import pskv
    out, errs = [None] * n, []

    def run(r):
        try:
            out[r] = pskv.Worker(scheduler=address, rank=r, **config)
        except BaseException as e:  # reported below
            errs.append(e)

    ths = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in ths:
        t.start()
    for t in ths:
        t.join()
    if errs:
        for w in out:
            if w is not None:
                w.close()
        raise errs[0]
    return out
