"""7. CXLIterableDataset: every sample once per epoch (0 and 2 workers, two
ranks), consecutive samples from few chunks, the chunk order new each
epoch."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from torch.utils.data import DataLoader

from conftest import Spec, add, make_raw
from helpers import collate_list, digest
from ucx_cxl import Broker
from ucx_cxl.data import CXLIterableDataset

WINDOW, BATCH = 2, 16


@pytest.fixture(scope="module")
def chunked(broker, workdir):
    """1280 samples of 128 B in 40 chunks of 32."""
    rng = np.random.Generator(np.random.PCG64(8))
    spec = add(Spec("t-iter", "raw", make_raw(workdir / "iter", rng, 128, [1280]),
                    record_size=128), chunk_size=4096)
    assert spec.chunks == 40
    with Broker() as b:
        ds = b.open(spec.name)
        chunk_of = np.empty(spec.n, dtype=np.int64)
        for c in range(ds.nchunks):
            first, count = ds.chunk_samples(c)
            chunk_of[first:first + count] = c
    index = {digest(spec.expected(i)): i for i in range(spec.n)}
    assert len(index) == spec.n
    return spec, chunk_of, index


def epoch(spec, index, epoch, workers=0, **kw):
    """The batches of one epoch, as sample indices."""
    it = CXLIterableDataset(spec.name, window=WINDOW, seed=3, **kw)
    it.set_epoch(epoch)
    extra = {"multiprocessing_context": "fork"} if workers else {}
    loader = DataLoader(it, batch_size=BATCH, num_workers=workers,
                        collate_fn=collate_list, **extra)
    return [[index[digest(x)] for x in b] for b in loader]


def chunk_order(batches, chunk_of):
    seen = []
    for b in batches:
        for i in b:
            if chunk_of[i] not in seen:
                seen.append(chunk_of[i])
    return seen


@pytest.mark.parametrize("workers", [0, 2])
def test_each_sample_once_and_local(chunked, workers):
    spec, chunk_of, index = chunked
    batches = epoch(spec, index, 0, workers)
    flat = [i for b in batches for i in b]
    dup = [i for i, c in Counter(flat).items() if c > 1]
    assert sorted(set(flat)) == list(range(spec.n)) and not dup, \
        f"{len(set(flat))} distinct of {spec.n}, duplicated {dup[:10]}"
    # a batch comes from one worker's stream: within a window of chunks,
    # or across the boundary of two (a shuffle of all samples would give
    # about 13 chunks in a batch of 16)
    spread = [len({int(chunk_of[i]) for i in b}) for b in batches]
    assert max(spread) <= 2 * WINDOW, f"chunks per batch: {spread}"
    assert flat != sorted(flat), "not shuffled inside the windows"


def test_chunk_order_changes_with_epoch(chunked):
    spec, chunk_of, index = chunked
    e0 = chunk_order(epoch(spec, index, 0), chunk_of)
    assert chunk_order(epoch(spec, index, 0), chunk_of) == e0, "not deterministic"
    e1 = chunk_order(epoch(spec, index, 1), chunk_of)
    assert sorted(e0) == sorted(e1) == list(range(spec.chunks))
    assert e0 != e1, "epoch 1 streams the chunks in epoch 0's order"
    assert e0 != list(range(spec.chunks)), "chunks not shuffled"


def test_two_ranks(chunked):
    spec, chunk_of, index = chunked
    r = [[i for b in epoch(spec, index, 2, num_replicas=2, rank=k) for i in b]
         for k in (0, 1)]
    assert not set(r[0]) & set(r[1]), "the ranks overlap"
    assert sorted(r[0] + r[1]) == list(range(spec.n))
    assert {int(chunk_of[i]) for i in r[0]}.isdisjoint(
        {int(chunk_of[i]) for i in r[1]}), "a chunk read by both ranks"
