"""8. GPU staging.  Without a CUDA device (this project's machines) the GPU
tests skip with cuda_status()'s message, and asking for CUDA gives one
RuntimeError with that message (that part runs here)."""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest
import torch

from ucx_cxl.data import CXLDataset, StagingRing, cuda_status, to_device
from ucx_cxl.data import device as devmod


def need_cuda():
    ok, why = cuda_status()
    if not ok:
        pytest.skip(why)


def test_no_device_error(datasets):
    ok, why = cuda_status()
    if ok:
        pytest.skip("a CUDA device is present: no error to check")
    assert why, "cuda_status() gives no reason"
    with pytest.raises(RuntimeError) as e:
        CXLDataset(datasets["raw"].name, device="cuda")
    assert why in str(e.value)
    with pytest.raises(RuntimeError, match=re.escape(why)):
        to_device(torch.zeros(4))
    with pytest.raises(RuntimeError, match=re.escape(why)):
        StagingRing(depth=2, slot_bytes=4096)


def test_staging_ring_roundtrip():
    """Bytes through pinned slots and cudaMemcpyAsync to the device, and
    back: unchanged, with the ring reused several times over."""
    need_cuda()
    rt = devmod._cudart
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    ring = StagingRing(depth=3, slot_bytes=1 << 20)
    rng = np.random.Generator(np.random.PCG64(1))
    try:
        for rep in range(8):
            n = int(rng.integers(1, 1 << 20))
            data = rng.bytes(n)
            dev = vp()
            assert rt.cudaMalloc(ctypes.byref(dev), sz(n)) == 0
            k = ring.slot()
            ring.host_buffer(k, n)[:] = data
            ring.to_device(k, dev.value, n)
            ring.synchronize()
            back = ctypes.create_string_buffer(n)
            assert rt.cudaMemcpy(back, dev, sz(n), 2) == 0   # device to host
            assert rt.cudaFree(dev) == 0
            assert back.raw == data, f"round {rep}: bytes changed"
    finally:
        ring.close()


def test_dataset_on_device(datasets):
    need_cuda()
    if not torch.cuda.is_available():
        pytest.skip(f"torch {torch.__version__} has no CUDA support")
    spec = datasets["npy"]
    ds = CXLDataset(spec.name, device="cuda")
    for i in (0, spec.n // 2, spec.n - 1):
        t = ds[i]
        assert t.is_cuda
        assert np.array_equal(t.cpu().numpy(), spec.expected(i))
