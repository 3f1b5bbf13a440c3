"""python3 -m pskv.launch: a whole job on this machine, for Python workers.

    python3 -m pskv.launch --servers 1 --workers 2 [--evaluator] [--timeout S] \
        -- python3 python/examples/mlp_fmnist.py --epochs 2

Starts pskv-scheduler and the servers on loopback (pskv.testing.LocalCluster),
then the command once per rank with PSKV_SCHEDULER=127.0.0.1:PORT and
PSKV_RANK=R in its environment (PSKV_EVALUATOR=1 for the evaluator's copy, with
--evaluator), waits for the workers, and stops the daemons. Exit status: 0 when
every worker exited 0, else the first failing rank's; 124 on time-out.
"""

import argparse
import os
import subprocess
import sys
import time

from .testing import LocalCluster


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m pskv.launch")
    ap.add_argument("--servers", type=int, default=1)
    ap.add_argument("--workers", type=int, required=True)
    ap.add_argument("--evaluator", action="store_true")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--scheduler-arg", action="append", default=[])
    ap.add_argument("--server-arg", action="append", default=[])
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd or a.workers < 1 or a.servers < 1:
        ap.error("give --workers >= 1, --servers >= 1 and a command after --")
    with LocalCluster(servers=a.servers, workers=a.workers, evaluators=int(a.evaluator),
                      scheduler_args=a.scheduler_arg, server_args=a.server_arg) as c:
        print("pskv.launch: scheduler %s, logs in %s" % (c.address, c.log_dir), flush=True)
        procs = []
        for r in range(a.workers):
            env = dict(os.environ, PSKV_SCHEDULER=c.address, PSKV_RANK=str(r))
            procs.append(subprocess.Popen(cmd, env=env))
        ev = None
        if a.evaluator:
            ev = subprocess.Popen(cmd, env=dict(os.environ, PSKV_SCHEDULER=c.address,
                                                PSKV_EVALUATOR="1"))
        end = time.monotonic() + a.timeout
        try:
            while any(p.poll() is None for p in procs):
                if time.monotonic() > end:
                    print("pskv.launch: time-out after %g s" % a.timeout, file=sys.stderr)
                    for p in procs + [ev] if ev else procs:
                        if p.poll() is None:
                            p.kill()
                    return 124
                time.sleep(0.05)
            if ev is not None:
                try:
                    ev.wait(30)
                except subprocess.TimeoutExpired:
                    ev.kill()
        except KeyboardInterrupt:
            for p in procs + ([ev] if ev else []):
                if p.poll() is None:
                    p.terminate()
            return 130
        for p in procs:
            if p.returncode:
                return p.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
