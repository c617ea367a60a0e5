"""Batches of a dataset whose samples have one length: rows of one tensor.

``CXLDataset.__getitems__`` reads such a batch with one C call
(``cxl_broker_read_rows``) straight into a fresh ``(n, row)`` tensor; the
general path (request vector, offsets) stays for everything else and gives
the errors.  Both must hand out the same samples.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader
from torch.utils.data._utils.collate import default_collate

from helpers import same
from ucx_cxl.data import CXLDataset


def test_row_len_only_for_samples_of_one_length(datasets):
    assert CXLDataset(datasets["raw"].name).handle.row_len == 96
    assert CXLDataset(datasets["files"].name).handle.row_len == 0


def test_rows_batch_equals_the_samples(datasets):
    spec = datasets["raw"]
    ds = CXLDataset(spec.name)
    idx = [spec.n - 1, 0, 17, 17, 600, 5]     # both files, a repeat
    rows = ds._rows_batch(idx)
    assert rows is not None, "the rows path did not take a plain batch"
    got = ds.__getitems__(idx)
    assert len(got) == len(idx)
    for x, i in zip(got, idx):
        assert x.dtype == torch.uint8 and x.shape == (96,)
        assert same(x, spec.expected(i)), f"sample {i}"
    whole = default_collate(got)
    assert whole.shape == (len(idx), 96)
    assert np.array_equal(whole.numpy(),
                          np.stack([spec.expected(i) for i in idx]))


def test_rows_batch_leaves_what_it_cannot_take_to_the_general_path(datasets):
    spec = datasets["raw"]
    ds = CXLDataset(spec.name)
    # negative indices count from the end there
    assert ds._rows_batch([0, -1]) is None
    got = ds.__getitems__([0, -1])
    assert same(got[1], spec.expected(spec.n - 1))
    with pytest.raises(IndexError, match=f"{spec.name}: sample {spec.n}"):
        ds.__getitems__([1, spec.n])
    # other outputs and other datasets are not rows
    assert CXLDataset(spec.name, output="numpy")._rows_batch([0]) is None
    assert CXLDataset(datasets["npy"].name)._rows_batch([0]) is None
    assert CXLDataset(datasets["files"].name)._rows_batch([0]) is None


def test_read_rows_checks(datasets):
    spec = datasets["raw"]
    h = CXLDataset(spec.name).handle
    out = np.zeros(3 * 96, dtype=np.uint8)
    h.read_rows([4, 2, 900], out)
    for k, i in enumerate((4, 2, 900)):
        assert same(out[k * 96:(k + 1) * 96], spec.expected(i))
    with pytest.raises(ValueError, match="writable buffer of 288"):
        h.read_rows([4, 2, 900], np.zeros(287, dtype=np.uint8))
    with pytest.raises(IndexError):
        h.read_rows([spec.n], out)
    idx = np.array([1, 2], dtype=np.int64)
    # the C side checks every index and length before it reads anything
    out[:] = 0
    assert h._read_rows_at(np.array([1, spec.n], dtype=np.int64),
                           out.ctypes.data) != 0
    assert h._read_rows_at(np.array([1, -1], dtype=np.int64),
                           out.ctypes.data) != 0
    assert not out.any(), "a batch with a bad index was read in part"
    h.row_len = 95
    try:
        assert h._read_rows_at(idx, out.ctypes.data) != 0
    finally:
        h.row_len = 96
    assert not out.any()
    with pytest.raises(ValueError, match="different lengths"):
        CXLDataset(datasets["files"].name).handle.read_rows([0], out)


def test_loader_default_collate_over_rows(datasets):
    """The DataLoader users write: batches equal to the files, in order."""
    spec = datasets["raw"]
    ds = CXLDataset(spec.name)
    loader = DataLoader(ds, batch_size=64)
    k = 0
    for batch in loader:
        assert batch.shape[1:] == (96,)
        want = np.stack([spec.expected(i) for i in range(k, k + len(batch))])
        assert np.array_equal(batch.numpy(), want), f"batch at {k}"
        k += len(batch)
    assert k == spec.n


def _npy_dataset(workdir, name, arrays):
    from conftest import Spec, add
    d = workdir / name
    d.mkdir()
    paths = []
    for k, a in enumerate(arrays):
        np.save(d / f"part{k}.npy", a)
        paths.append(str(d / f"part{k}.npy"))
    return add(Spec(name, "npy", paths), chunk_size=16 << 10)


def test_npy_rows_of_one_type(broker, workdir):
    """.npy files of one row type: the batch is (n, *shape) of their dtype,
    rows decoded as ds[i] decodes them; decode=False gives the bytes."""
    rng = np.random.default_rng(5)
    arrays = [rng.standard_normal((30, 2, 5)).astype(np.float32) for _ in range(3)]
    spec = _npy_dataset(workdir, "t-npy-one", arrays)
    ds = CXLDataset(spec.name)
    assert ds.handle.common_info() == "descr=<f4 shape=2,5"
    idx = [89, 0, 31, 60, 2]
    assert ds._rows_batch(idx) is not None
    got = ds.__getitems__(idx)
    for x, i in zip(got, idx):
        assert x.dtype == torch.float32 and x.shape == (2, 5)
        assert same(x, spec.expected(i)) and same(x, ds[i].numpy())
    whole = default_collate(got)
    assert whole.shape == (5, 2, 5) and whole.dtype == torch.float32
    raw = CXLDataset(spec.name, decode=False).__getitems__(idx)
    assert raw[0].dtype == torch.uint8 and raw[0].shape == (40,)
    assert raw[0].numpy().tobytes() == spec.expected(89).tobytes()


def test_npy_rows_of_one_length_but_two_types(broker, workdir):
    """Rows of the same length but another dtype in another file: not one
    array (the general path decodes each sample by its own file)."""
    a = np.arange(40, dtype=np.float32).reshape(10, 4)
    b = np.arange(40, dtype=np.int32).reshape(10, 4)
    spec = _npy_dataset(workdir, "t-npy-two", [a, b])
    ds = CXLDataset(spec.name)
    assert ds.handle.row_len == 16 and ds.handle.common_info() is None
    assert ds._rows_batch([0, 15]) is None
    x, y = ds.__getitems__([0, 15])
    assert x.dtype == torch.float32 and same(x, a[0])
    assert y.dtype == torch.int32 and same(y, b[5])
