"""run-demo.sh step 8: the same Dask computation on protocol "cxl" and "tcp"."""

import sys
import time

import dask.array as da
from distributed import Client, LocalCluster


def run(protocol: str) -> float:
    """The computation on a fresh cluster; start-up and compute timed apart
    (the first cluster of the process also pays the imports)."""
    t0 = time.perf_counter()
    with LocalCluster(protocol=protocol, n_workers=2, threads_per_worker=1,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        t1 = time.perf_counter()
        x = da.random.RandomState(0).random((4000, 4000), chunks=(1000, 1000))
        value = float((x + x.T).sum().compute())
        t2 = time.perf_counter()
        print(f"  {protocol}: scheduler {cluster.scheduler_address}, "
              f"(x + x.T).sum() = {value:.6f}: cluster up in {t1 - t0:.1f} s, "
              f"computed in {t2 - t1:.2f} s")
        if protocol == "cxl":
            got = c.run(_loans)
            sent = sum(g["written"] for g in got.values() if g)
            print(f"  cxl: {sent} worker-to-worker messages (8 MB chunks) "
                  f"copied once, into pool memory their receiver lent")
        return value


def _loans(dask_worker=None):
    from ucx_cxl.dask import poolframes
    return poolframes.stats()


def main() -> int:
    a, b = run("cxl"), run("tcp")
    print(f"  same result on both: {a == b}")
    return 0 if a == b else 1


if __name__ == "__main__":
    sys.exit(main())
