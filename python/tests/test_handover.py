"""Batches from DataLoader workers reach the main process through the
workers' hand-over arenas (ucx_cxl.data.handover), not a new shared
segment per batch: every batch right, the arena's place given back only
when the last tensor over a batch (a view included) is freed, torch's path
when an arena is full, no descriptor kept and the arenas of ended workers
unmapped, and CXL_HANDOVER=0 turns it off.
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from helpers import same
from ucx_cxl.data import CXLDataset, handover

pytestmark = pytest.mark.filterwarnings(
    "ignore:This DataLoader will create:UserWarning")

BATCH = 32


def _arena_fds() -> int:
    n = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            n += "memfd:ucx-cxl-handover" in os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return n


def _arena_maps() -> int:
    with open("/proc/self/maps") as f:
        return sum("memfd:ucx-cxl-handover" in line for line in f)


def _expected(spec, k: int, batch: int = BATCH) -> np.ndarray:
    lo, hi = k * batch, min(spec.n, (k + 1) * batch)
    return np.stack([spec.expected(i) for i in range(lo, hi)])


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_batches_are_handed_over(datasets, method):
    """DataLoader(batch_size) with the default collate: each batch is the
    whole arena batch (the collate gives it back), one per batch."""
    spec = datasets["raw"]
    before = handover.stats()["received"]
    loader = DataLoader(CXLDataset(spec.name), batch_size=BATCH, num_workers=2,
                        multiprocessing_context=method)
    n = 0
    for k, b in enumerate(loader):
        assert type(b) is torch.Tensor, type(b)
        assert np.array_equal(b.numpy(), _expected(spec, k)), f"batch {k}"
        n += 1
    assert n == (spec.n + BATCH - 1) // BATCH
    got = handover.stats()["received"] - before
    assert got == n, f"{got} of {n} batches came through an arena"
    # Python's mmap keeps a descriptor of its own; the one that came with
    # the batch is closed
    assert _arena_fds() <= _arena_maps(), "an arena's descriptor leaked"


def test_arenas_of_ended_workers_are_unmapped(datasets):
    """Once a loader's workers ended and its batches are gone, the next
    arena mapped drops the old mappings: one loader's worth stays."""
    spec = datasets["raw"]
    for _ in range(3):
        loader = DataLoader(CXLDataset(spec.name), batch_size=BATCH,
                            num_workers=2, multiprocessing_context="fork")
        for b in loader:
            pass
        del b, loader
        gc.collect()
    assert _arena_maps() <= 2, f"{_arena_maps()} arenas mapped"
    assert _arena_fds() <= 2


def test_view_outlives_its_batch(datasets, monkeypatch):
    """A view of a batch keeps the batch's place: the worker reuses it only
    after the view went, however many batches pass meanwhile."""
    spec = datasets["raw"]
    # an arena of a few batches, so that places are reused many times
    monkeypatch.setattr(handover, "SIZE", 4 * BATCH * spec.record_size + 4096)
    ds = CXLDataset(spec.name)
    loader = DataLoader(ds, batch_size=BATCH, num_workers=1,
                        multiprocessing_context="fork")
    it = iter(loader)
    first = next(it)
    keep = first[3:5]               # a view; the batch itself goes
    del first
    rounds = 0
    for _ in range(3):
        for b in it:
            rounds += 1
        it = iter(loader)
    assert rounds > 20
    assert np.array_equal(keep.numpy(), _expected(spec, 0)[3:5]), \
        "the place of a batch still viewed was reused"


def test_full_arena_takes_torchs_path(datasets, monkeypatch):
    """The main process holds every batch: once the arena is full the
    batches come the torch way, and all are right."""
    spec = datasets["raw"]
    monkeypatch.setattr(handover, "SIZE", 3 * BATCH * spec.record_size + 4096)
    before = handover.stats()["received"]
    loader = DataLoader(CXLDataset(spec.name), batch_size=BATCH, num_workers=1,
                        multiprocessing_context="fork")
    held = list(loader)
    got = handover.stats()["received"] - before
    assert 0 < got < len(held), f"{got} of {len(held)} through the arena"
    for k, b in enumerate(held):
        assert np.array_equal(b.numpy(), _expected(spec, k)), f"batch {k}"


def test_samples_and_batch_sampler(datasets, monkeypatch):
    """batch_size=None: single samples (npy rows keep dtype and shape) are
    handed over from MIN_SAMPLE bytes on, and ds[list] batches from a
    BatchSampler are too."""
    spec = datasets["npy"]
    ds = CXLDataset(spec.name)
    for min_sample, handed in ((handover.MIN_SAMPLE, 0), (0, spec.n)):
        monkeypatch.setattr(handover, "MIN_SAMPLE", min_sample)
        before = handover.stats()["received"]
        loader = DataLoader(ds, batch_size=None, num_workers=2,
                            multiprocessing_context="fork")
        got = list(loader)
        assert len(got) == spec.n
        assert all(same(x, spec.expected(i)) for i, x in enumerate(got))
        assert handover.stats()["received"] - before == handed, min_sample

    raw = datasets["raw"]
    before = handover.stats()["received"]
    loader = DataLoader(CXLDataset(raw.name), batch_size=None, num_workers=2,
                        multiprocessing_context="fork",
                        sampler=BatchSampler(SequentialSampler(range(raw.n)),
                                             BATCH, False))
    for k, b in enumerate(loader):
        assert np.array_equal(b.numpy(), _expected(raw, k)), f"batch {k}"
    assert handover.stats()["received"] - before == k + 1


def test_off(datasets, monkeypatch):
    """CXL_HANDOVER=0: torch's path for every batch, the same data."""
    spec = datasets["raw"]
    monkeypatch.setenv("CXL_HANDOVER", "0")
    before = handover.stats()["received"]
    loader = DataLoader(CXLDataset(spec.name), batch_size=BATCH, num_workers=2,
                        multiprocessing_context="fork")
    for k, b in enumerate(loader):
        assert np.array_equal(b.numpy(), _expected(spec, k)), f"batch {k}"
    assert handover.stats()["received"] == before


def test_custom_collate_gets_plain_rows(datasets):
    """A collate of the user's own gets the rows; what it returns takes
    torch's path and is right."""
    spec = datasets["raw"]
    loader = DataLoader(CXLDataset(spec.name), batch_size=BATCH, num_workers=1,
                        multiprocessing_context="fork",
                        collate_fn=lambda rows: torch.stack(rows) + 0)
    for k, b in enumerate(loader):
        assert type(b) is not handover.HandedTensor
        assert np.array_equal(b.numpy(), _expected(spec, k)), f"batch {k}"
        if k == 3:
            break


def test_default_collate_takes_the_batch_whole(datasets):
    """In any process: __getitems__'s rows are views of one batch, and the
    default collate returns that batch (no stacking copy) unless the list
    was changed, then it stacks what the list holds."""
    from torch.utils.data import default_collate
    spec = datasets["raw"]
    ds = CXLDataset(spec.name)
    rows = ds.__getitems__(list(range(BATCH)))
    b = default_collate(rows)
    assert type(b) is torch.Tensor
    assert b.data_ptr() == rows[0].data_ptr(), "the rows were stacked"
    assert np.array_equal(b.numpy(), _expected(spec, 0))

    rows = ds.__getitems__(list(range(BATCH)))
    rows[1] = rows[0]               # a collate of the user's own changed it
    b = default_collate(rows)
    assert b.data_ptr() != rows[0].data_ptr()
    want = _expected(spec, 0)
    want[1] = want[0]
    assert np.array_equal(b.numpy(), want)
    # a tensor batch of another origin: torch's collate as before
    t = [torch.arange(3), torch.arange(3)]
    assert default_collate(t).tolist() == [[0, 1, 2], [0, 1, 2]]
