"""run-demo.sh step 8: the same Dask computation on protocol "cxl" and "tcp"."""

import sys
import time

import dask.array as da
from distributed import Client, LocalCluster


def run(protocol: str) -> float:
    t0 = time.perf_counter()
    with LocalCluster(protocol=protocol, n_workers=2, threads_per_worker=1,
                      dashboard_address=None) as cluster, Client(cluster) as c:
        x = da.random.RandomState(0).random((4000, 4000), chunks=(1000, 1000))
        value = float((x + x.T).sum().compute())
        print(f"  {protocol}: scheduler {cluster.scheduler_address}, "
              f"(x + x.T).sum() = {value:.6f}, {time.perf_counter() - t0:.1f} s")
        return value


def main() -> int:
    a, b = run("cxl"), run("tcp")
    print(f"  same result on both: {a == b}")
    return 0 if a == b else 1


if __name__ == "__main__":
    sys.exit(main())
