"""`import pskv` in a fresh environment after `make install` into a temporary
prefix: the installed package finds the installed library, no source tree."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.normpath(os.path.join(HERE, "..", ".."))


def test_import_after_make_install(tmp_path):
    build = os.environ.get("PSKV_BUILD", os.path.join(TOP, "build"))
    prefix = tmp_path / "prefix"
    build = os.path.relpath(build, TOP)  # as the Makefile names its objects: no rebuild
    r = subprocess.run(["make", "-s", "-C", TOP, "install", "BUILD=" + build,
                        "PREFIX=" + str(prefix)], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=600)
    assert r.returncode == 0, r.stdout.decode()[-2000:]
    ver = "%d.%d" % sys.version_info[:2]
    site = prefix / "lib" / ("python" + ver) / "dist-packages"
    assert (site / "pskv" / "__init__.py").exists()
    assert not list(site.glob("pskv/__pycache__"))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    r = subprocess.run([sys.executable, "-c", "import pskv, pskv.torch; print(pskv.library_path)"],
                       cwd=str(tmp_path), env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=120)
    out = r.stdout.decode()
    assert r.returncode == 0, out
    assert out.strip() == str(prefix / "lib" / "libpskv.so.1"), out
