"""LocalCluster(protocol="cxl", n_workers=2, processes=True): results equal
to the same computation on tcp, and a worker killed with SIGKILL in the
middle of a computation (the scheduler recomputes what it held)."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pandas as pd
import pytest

import dask
import dask.array as da
import dask.dataframe as dd
from distributed import Client, LocalCluster, wait

# A computation that stalls (a message lost or garbled between workers:
# distributed logs it and waits) fails the test instead of hanging it.
RESULT_TIMEOUT = 120

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:Running on a single-machine")]


def cluster(protocol, **kw):
    return LocalCluster(protocol=protocol, n_workers=2, threads_per_worker=2,
                        processes=True, dashboard_address=":0",
                        host="127.0.0.1", **kw)


@pytest.fixture(scope="module")
def clients():
    with cluster("cxl") as cc, Client(cc) as c_cxl, \
            cluster("tcp") as tc, Client(tc) as c_tcp:
        yield {"cxl": c_cxl, "tcp": c_tcp}


def incoming_bytes(client):
    """Bytes the workers fetched from each other (get_data transfers)."""
    got = client.run(lambda dask_worker: sum(
        d["total"] for d in dask_worker.transfer_incoming_log))
    return sum(got.values())


def test_addresses_are_cxl(clients):
    info = clients["cxl"].scheduler_info()
    assert info["address"].startswith("cxl://")
    assert len(info["workers"]) == 2
    assert all(a.startswith("cxl://") for a in info["workers"])


def array_result(client):
    x = da.random.RandomState(42).random((3000, 3000), chunks=(500, 500))
    y = (x + x.T).sum(axis=0) + x[::2, ::3].mean()
    return client.compute(y, optimize_graph=False).result(timeout=RESULT_TIMEOUT)


def test_array_reduction_equals_tcp(clients):
    before = incoming_bytes(clients["cxl"])
    r_cxl = array_result(clients["cxl"])
    moved = incoming_bytes(clients["cxl"]) - before
    r_tcp = array_result(clients["tcp"])
    x = da.random.RandomState(42).random((3000, 3000), chunks=(500, 500))
    local = (x + x.T).sum(axis=0) + x[::2, ::3].mean()
    local = local.compute(scheduler="sync")
    assert r_cxl.shape == (3000,)
    assert np.array_equal(r_cxl, r_tcp)
    assert np.allclose(r_cxl, local)
    assert moved > 1 << 20, f"only {moved} bytes moved between the workers"


def frame_result(client):
    rng = np.random.default_rng(7)
    n = 200_000
    pdf = pd.DataFrame({"k": rng.integers(0, 1000, n),
                        "v": rng.random(n),
                        "s": rng.integers(0, 50, n).astype(str)})
    df = dd.from_pandas(pdf, npartitions=8)
    sh = df.shuffle("k", shuffle="tasks", npartitions=8)
    # each key in one partition after the shuffle
    per_part = sh.map_partitions(lambda p: p.groupby("k").v.sum())
    res = client.compute(per_part).result(timeout=RESULT_TIMEOUT).sort_index()
    parts = client.compute(sh.map_partitions(lambda p: pd.Series([sorted(set(p.k))]))).result(
        timeout=RESULT_TIMEOUT)
    return pdf, res, parts


def test_dataframe_shuffle_equals_tcp(clients):
    before = incoming_bytes(clients["cxl"])
    pdf, r_cxl, parts_cxl = frame_result(clients["cxl"])
    moved = incoming_bytes(clients["cxl"]) - before
    _, r_tcp, _ = frame_result(clients["tcp"])
    exp = pdf.groupby("k").v.sum().sort_index()
    pd.testing.assert_series_equal(r_cxl, r_tcp)
    assert r_cxl.index.is_unique        # a key is in one partition only
    pd.testing.assert_series_equal(r_cxl, exp, check_exact=False, rtol=1e-12,
                                   check_names=False)
    keys = [k for ks in parts_cxl for k in ks]
    assert len(keys) == len(set(keys)) == pdf.k.nunique()
    assert moved > 100_000, f"only {moved} bytes moved between the workers"


def test_in_process_cluster():
    """processes=False: scheduler and workers on one loop, the client on
    its own (two UCP workers in one process)."""
    with LocalCluster(protocol="cxl", n_workers=2, threads_per_worker=1,
                      processes=False, dashboard_address=":0",
                      host="127.0.0.1") as lc, Client(lc) as client:
        x = da.ones((2000, 2000), chunks=(250, 250))
        assert client.compute((x + x.T).sum()).result(timeout=RESULT_TIMEOUT) == 2 * 2000 ** 2


def slow_chunk(block, delay):
    time.sleep(delay)
    return block * 2


def test_worker_killed_mid_computation():
    """kill -9 of a worker while its tasks run and it holds results: the
    computation still returns the right result (the lost results are
    recomputed on the worker the nanny restarts, or the other one)."""
    with dask.config.set({"distributed.scheduler.allowed-failures": 5}), \
            cluster("cxl") as lc, Client(lc) as client:
        x = da.arange(200_000, chunks=5_000)           # 40 chunks
        y = x.map_blocks(slow_chunk, 0.15, dtype=x.dtype)
        total = (y + y[::-1]).sum()
        fut = client.compute(total)
        pids = client.run(os.getpid)
        addr, victim = sorted(pids.items())[0]
        # wait until the victim holds results, then kill it
        t0 = time.time()
        while time.time() - t0 < 60:
            held = client.run(lambda dask_worker: len(dask_worker.data),
                              workers=[addr]).get(addr, 0)
            if held >= 3:
                break
            time.sleep(0.05)
        assert held >= 3, "the victim never held results"
        assert not fut.done()
        os.kill(victim, signal.SIGKILL)
        t_kill = time.time()
        result = fut.result(timeout=120)
        took = time.time() - t_kill
        expected = int((np.arange(200_000) * 2 + np.arange(200_000)[::-1] * 2).sum())
        assert result == expected
        # the scheduler saw the death: the victim's address left
        t0 = time.time()
        while addr in client.scheduler_info()["workers"] and time.time() - t0 < 30:
            time.sleep(0.1)
        assert addr not in client.scheduler_info()["workers"]
        assert took < 90, took
