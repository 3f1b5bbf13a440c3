"""Shared by the follow_*.py tools: pskv-serve following a namespace of a
pskv.testing.LocalCluster, and its answers read through real HTTP."""

import json
import os
import signal
import subprocess
import urllib.request

from pskv.testing import free_port


def start_serve(c, ns, sync_ms):
    """pskv-serve following namespace ns of cluster c every sync_ms; its log in the
    cluster's log directory. Returns (process, HTTP port, log file)."""
    port = free_port()
    log = open(os.path.join(c.log_dir, "serve.log"), "w")
    proc = subprocess.Popen([os.path.join(c.bin, "pskv-serve"), "--scheduler", c.address,
                             "--namespace", ns, "--http-port", str(port),
                             "--sync-ms", str(sync_ms)], stdout=log, stderr=log)
    return proc, port, log


def stop_serve(proc):
    proc.send_signal(signal.SIGTERM)
    proc.wait(10)


def lookup(port, table, keys):
    """The values /v1/lookup gives for keys of table (None for a key not held), or
    None when it does not answer (503 before the first version)."""
    body = json.dumps({"table": table, "keys": keys}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/lookup" % port, data=body, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())["values"]
    except (OSError, ValueError):
        return None
