"""Fixtures: a real pskv-scheduler and pskv-server on loopback per test that asks
for one (pskv.testing.LocalCluster), stopped by pid at the test's end.

Torch tests: skipped when torch cannot be imported, except under CI=true, where
a missing torch fails them (a torch feature never goes silently untested)."""

import os

import pytest

from pskv.testing import LocalCluster


@pytest.fixture
def cluster():
    with LocalCluster(servers=1, workers=1) as c:
        yield c


@pytest.fixture
def cluster2():
    """Two servers, one worker."""
    with LocalCluster(servers=2, workers=1) as c:
        yield c


def need_torch():
    try:
        import torch  # noqa: F401
        return torch
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("torch is not importable under CI=true (apt-get install python3-torch)")
        pytest.skip("torch is not installed")
