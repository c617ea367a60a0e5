"""4. Memory of the loader's processes: flat in num_workers, and no Python
object per sample.

Two raw datasets of 64-byte samples, SMALL (20k) and BIG (200k), read
shuffled through DataLoaders with 1 and 4 forked workers.  At batch
MEASURE_AT the main process sums /proc/PID/smaps_rollup over itself and
its workers (while they prefetch).

* Pss: the whole of it.  Each worker beyond the first may add at most
  WORKER_MB (measured here: about 18 MiB: an interpreter with torch, a UCP
  context and its pool interface); the 4 workers are within 15% of each
  other.
* Pss_Anon: what is not a file mapping, i.e. not the pool either.  The
  pool pages a worker reads (sample data, the shared metadata) are file
  pages shared with the broker, counted in Pss but not in Pss_Anon, and a
  shuffled order touches them in proportion to the data; the per-sample
  metadata of a process must be flat arrays (the sample lengths, 8 B a
  sample in each worker; the sampler's order, 8-16 B in the main process),
  so with 4 workers BIG's Pss_Anon may exceed SMALL's by at most those
  arrays + SLACK_MB, in the main process and in a worker (whose Pss_Anon
  also has its share of the main process's pages from before the fork).
The control: a dataset that keeps a tuple per sample (in the parent, so
that the workers' refcount updates copy its pages) must fail that bound,
in the main process and in the workers (measured: 7 and 10 MiB over).
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
from torch.utils.data import DataLoader

from conftest import Spec, add, make_raw
from helpers import rollup
from ucx_cxl.data import CXLDataset, EpochSampler

pytestmark = pytest.mark.filterwarnings(
    "ignore:This DataLoader will create:UserWarning")

SMALL, BIG, RECORD = 20_000, 200_000, 64
BATCH, MEASURE_AT = 256, 60
WORKER_MB = 40
SLACK_MB = 3                       # measured: main 0.4, a worker 0.9 MiB
LENS_B = 8                         # each process: the sample lengths
MAIN_B = 16                        # the main process: the sampler's order


class ObjectsDataset(CXLDataset):
    """The design this test must reject: a Python object per sample."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.meta = [(i, RECORD) for i in range(len(self))]

    def __getitem__(self, i):
        _ = self.meta[i]
        return super().__getitem__(i)


@pytest.fixture(scope="module")
def small_samples(broker, workdir):
    rng = np.random.Generator(np.random.PCG64(77))
    return {n: add(Spec(f"t-mem-{n}", "raw",
                        make_raw(workdir / f"mem{n}", rng, RECORD, [n]),
                        record_size=RECORD), chunk_size=1 << 20)
            for n in (SMALL, BIG)}


def measure(cls, name, workers):
    """KiB of Pss and Pss_Anon of [main, worker...] at batch MEASURE_AT."""
    gc.collect()           # what earlier tests left must not be forked
    ds = cls(name)
    s = EpochSampler(ds, seed=1)
    loader = DataLoader(ds, batch_size=BATCH, sampler=s, num_workers=workers,
                        multiprocessing_context="fork")
    it = iter(loader)
    for k, _ in enumerate(it):
        if k == MEASURE_AT:
            pids = [os.getpid()] + [w.pid for w in it._workers]
            r = [rollup(p) for p in pids]
            break
    del it
    return [x["Pss"] for x in r], [x["Pss_Anon"] for x in r]


def profile(cls, specs, workers=(1, 4)):
    return {(n, w): measure(cls, specs[n].name, w)
            for n in (SMALL, BIG) for w in workers}


def anon_excess(m):
    """KiB by which BIG's Pss_Anon exceeds SMALL's beyond the flat arrays,
    with 4 workers: (the main process, a worker on average)."""
    dn = BIG - SMALL
    main = m[BIG, 4][1][0] - m[SMALL, 4][1][0] - MAIN_B * dn / 1024
    worker = (np.mean(m[BIG, 4][1][1:]) - np.mean(m[SMALL, 4][1][1:]) -
              LENS_B * dn / 1024)
    return main, worker


def test_pss_flat(small_samples):
    m = profile(CXLDataset, small_samples)
    show = {k: (sum(v[0]) // 1024, [x // 1024 for x in v[0]]) for k, v in m.items()}
    for n in (SMALL, BIG):
        per_worker = (sum(m[n, 4][0]) - sum(m[n, 1][0])) / 3 / 1024
        assert per_worker <= WORKER_MB, \
            f"{n} samples: each worker beyond the first adds {per_worker:.1f} " \
            f"MiB of PSS (at most {WORKER_MB}); MiB: {show}"
        w = m[n, 4][0][1:]
        assert max(w) <= 1.15 * min(w), f"workers' PSS differ: {w} KiB"
    em, ew = anon_excess(m)
    print(f"PSS MiB {show}; Pss_Anon excess {em:.0f} / {ew:.0f} KiB")
    slack = SLACK_MB * 1024
    assert em <= slack and ew <= slack, \
        f"Pss_Anon grows with the samples beyond the flat arrays by {em:.0f} " \
        f"KiB (main process) / {ew:.0f} KiB (a worker); at most {slack}; " \
        f"Pss_Anon KiB: { {k: v[1] for k, v in m.items()} }"


def test_pss_control(small_samples):
    """The bound above rejects a Python object per sample."""
    m = profile(ObjectsDataset, small_samples, workers=(4,))
    em, ew = anon_excess(m)
    print(f"control: Pss_Anon excess {em:.0f} / {ew:.0f} KiB")
    assert em > SLACK_MB * 1024 and ew > SLACK_MB * 1024, \
        f"a tuple per sample went unnoticed: excess {em:.0f} / {ew:.0f} KiB"
