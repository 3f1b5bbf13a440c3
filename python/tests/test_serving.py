"""pskv.serve_lookup against a real pskv-serve (--model, --zmq-port): the rows and
version POST /v1/lookup answers, NaN for a key the model lacks, and an unknown
table refused with the reason."""

import json
import math
import os
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

import pskv
from pskv.testing import bin_dir, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
MODELFILE = os.path.join(HERE, "..", "..", "test", "tools", "modelfile.py")


@pytest.fixture
def served(tmp_path):
    model = str(tmp_path / "slr.model")
    subprocess.run([sys.executable, MODELFILE, "write", "sparse-lr", "50", "0", "1", "3", model],
                   check=True)
    hp, zp = free_port(), free_port()
    log = open(str(tmp_path / "serve.log"), "w")
    p = subprocess.Popen([os.path.join(bin_dir(), "pskv-serve"), "--model", model, "--http-port",
                          str(hp), "--zmq-port", str(zp)], stdout=log, stderr=log)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/v1/model" % hp, timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        yield hp, zp
    finally:
        p.terminate()
        p.wait(10)


def test_serve_lookup_matches_http(served):
    hp, zp = served
    body = json.dumps({"table": "sparse-lr.w", "keys": [0, 1, 2, 123456]}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/lookup" % hp, data=body, method="POST")
    want = json.loads(urllib.request.urlopen(req, timeout=5).read())
    rows, clock = pskv.serve_lookup("127.0.0.1:%d" % zp, "sparse-lr.w", [0, 1, 2, 123456])
    assert rows.shape == (4, 1)
    assert clock == want["version"]["clock"]
    for got, w in zip(rows[:, 0], want["values"]):
        assert (w is None and math.isnan(got)) or got == np.float32(w)


def test_serve_lookup_unknown_table(served):
    _, zp = served
    with pytest.raises(pskv.Error, match="no-such-table"):
        pskv.serve_lookup("127.0.0.1:%d" % zp, "no-such-table", [1])
