"""Fixtures of the Dask comm backend's tests (python/tests/dask).

A private pool under /dev/shm for the whole session (cxl wake-up events
exist only for pools there), named in UCX_CXL_POOL before anything starts
UCX, so that the workers LocalCluster spawns inherit it; removed at the
end.  cxlpool: $CXLPOOL_BIN, else build-release/ or build/ of this tree.

Run: PYTHONPATH=REPO/python /usr/bin/python3 -m pytest -q python/tests/dask
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PYDIR = REPO / "python"


def _cxlpool() -> str:
    env = os.environ.get("CXLPOOL_BIN")
    if env:
        return env
    for build in ("build-release", "build"):
        p = REPO / build / "cxlpool"
        if p.exists():
            return str(p)
    pytest.exit("python/tests/dask: cxlpool not found (build the project: "
                "contrib/build.sh release, or set CXLPOOL_BIN)", returncode=4)


@pytest.fixture(scope="session", autouse=True)
def cxl_pool():
    path = f"/dev/shm/ucx-cxl-dask-test-{os.getpid()}.pool"
    tool = _cxlpool()
    r = subprocess.run([tool, "create", "--size", "512m", path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.exit(f"cxlpool create {path}: {r.stderr.strip()}", returncode=4)
    old = os.environ.get("UCX_CXL_POOL")
    os.environ["UCX_CXL_POOL"] = path
    # spawned workers find the package (and its entry point) like we do
    pp = os.environ.get("PYTHONPATH", "")
    if str(PYDIR) not in pp.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PYDIR), pp]))
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("UCX_CXL_POOL", None)
        else:
            os.environ["UCX_CXL_POOL"] = old
        subprocess.run([tool, "destroy", "--force", path], capture_output=True)
        if os.path.exists(path):
            os.unlink(path)


@pytest.fixture
def run():
    """Run a coroutine on a fresh event loop (one UCP worker per loop)."""
    def _run(coro, timeout=60):
        return asyncio.run(asyncio.wait_for(coro, timeout))
    return _run
