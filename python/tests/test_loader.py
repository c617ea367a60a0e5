"""1. DataLoader over each format: every sample of the epoch exactly once,
equal to the files (npy rows keep dtype and shape; tar samples are dicts of
members), in the sampler's order.

The matrix: spawned workers import torch (1-2 s each on this machine's 2
shared cores), so the full matrix (num_workers 0, 2, 4 x fork, spawn x
shuffled, not) runs for the raw format only; every other format runs with
0 workers (not shuffled), 2 forked workers (shuffled) and 2 spawned workers
(shuffled).  18 spawned workers in all; the 20 runs take about 15 s.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from helpers import collate_list, digest, same
from ucx_cxl.data import CXLDataset, EpochSampler

pytestmark = pytest.mark.filterwarnings(
    "ignore:This DataLoader will create:UserWarning")

MATRIX = [("raw", 0, None, False), ("raw", 0, None, True)] + \
    [("raw", w, m, s) for w in (2, 4) for m in ("fork", "spawn")
     for s in (False, True)] + \
    [(f, w, m, s) for f in ("files", "npy", "tar")
     for (w, m, s) in ((0, None, False), (2, "fork", True), (2, "spawn", True))]


def _id(p):
    f, w, m, s = p
    return f"{f}-w{w}{'-' + m if m else ''}-{'shuffled' if s else 'ordered'}"


def check_epoch(spec, delivered, order):
    """delivered[k] is sample order[k] of the files; order is a permutation."""
    n = spec.n
    assert sorted(order) == list(range(n)), "the order is not a permutation"
    assert len(delivered) == n, f"{len(delivered)} samples delivered of {n}"
    want = {digest(spec.expected(i)): i for i in range(n)}
    assert len(want) == n, "test data: samples not distinct"
    got = Counter(digest(x) for x in delivered)
    missing = [want[d] for d in want if d not in got]
    extra = sum(1 for d in got if d not in want)
    dup = [want[d] for d, c in got.items() if c > 1 and d in want]
    assert not missing and not extra and not dup, \
        f"missing samples {missing[:10]}, {extra} unknown, duplicated {dup[:10]}"
    for k, (x, i) in enumerate(zip(delivered, order)):
        assert same(x, spec.expected(i)), \
            f"position {k}: sample {i} differs from the files"


@pytest.mark.parametrize("fmt,workers,method,shuffle", MATRIX, ids=[_id(p) for p in MATRIX])
def test_dataloader_epoch(datasets, fmt, workers, method, shuffle):
    spec = datasets[fmt]
    ds = CXLDataset(spec.name)
    assert len(ds) == spec.n and ds.format == fmt and ds.version == spec.version
    sampler = EpochSampler(ds, shuffle=shuffle, seed=11)
    sampler.set_epoch(2)
    order = [int(i) for i in sampler.order()]
    if shuffle:
        assert order != list(range(spec.n)), "shuffle=True gave the identity"
    else:
        assert order == list(range(spec.n))
    kw = {} if workers == 0 else {"multiprocessing_context": method}
    loader = DataLoader(ds, batch_size=16, sampler=sampler, num_workers=workers,
                        collate_fn=collate_list, **kw)
    delivered = [x for batch in loader for x in batch]
    check_epoch(spec, delivered, order)
    if fmt == "tar":
        assert all(isinstance(x, dict) and set(x) == {"jpg", "cls"}
                   for x in delivered)
    else:
        assert all(isinstance(x, torch.Tensor) for x in delivered)
    if fmt == "npy":
        kinds = Counter((str(x.dtype), tuple(x.shape)) for x in delivered)
        assert kinds == {("torch.float32", (3, 8, 8)): 65,
                         ("torch.int64", (16,)): 60}, kinds


def test_outputs(datasets):
    """output="numpy" / "bytes", decode=False, negative indices."""
    spec = datasets["npy"]
    i = 50                                   # a row of b.npy (int64, 16)
    a = CXLDataset(spec.name, output="numpy")[i]
    assert isinstance(a, np.ndarray) and same(a, spec.expected(i))
    b = CXLDataset(spec.name, output="bytes")[i]
    assert b == spec.expected(i).tobytes()
    r = CXLDataset(spec.name, decode=False)[i]
    assert r.dtype == torch.uint8 and r.numpy().tobytes() == b
    ds = CXLDataset(spec.name)
    assert same(ds[-1], spec.expected(spec.n - 1))
    t = datasets["files"]
    empty = [i for i in range(t.n) if t.expected(i).size == 0]
    assert len(empty) == 1
    x = CXLDataset(t.name)[empty[0]]
    assert x.shape == (0,) and x.dtype == torch.uint8
