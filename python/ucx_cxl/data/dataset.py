"""``CXLDataset``: a map-style dataset whose samples live in the pool.

Each process that reads samples (the main one, every DataLoader worker,
whether forked or spawned) opens its own connection on first use: nothing
unpicklable crosses a fork or a pickle, and per-sample metadata is one flat
array per process (or the pool itself), never Python objects.

UCX does not survive a fork (its progress thread and endpoints stay with
the parent), so the constructor and ``announce_epoch`` use a connection of
their own that they close again: the main process holds no UCX state when
the DataLoader forks its workers, unless it reads samples itself.
"""

from __future__ import annotations

import warnings
from typing import Any, List, Optional

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info

from .. import _pid
from ..broker import Broker, BrokerDataset
from . import decode, handover

handover.register_collate()

OUTPUTS = ("tensor", "numpy", "bytes")


def _batch_buffer(nbytes: int, shared: bool = True):
    """A fresh uint8 buffer for a batch, as (tensor or None, array over it).

    In a DataLoader worker the tensor is in shared memory, as torch's
    default collate allocates it, so that the batch crosses to the main
    process without a copy (a tensor made by torch.from_numpy would be
    copied into shared memory when it is sent)."""
    if shared and nbytes and get_worker_info() is not None:
        try:
            st = torch.empty(0, dtype=torch.uint8).storage()._new_shared(nbytes)
            t = torch.empty(0, dtype=torch.uint8).new(st)
            return t, t.numpy()
        except (AttributeError, RuntimeError, TypeError):
            pass            # another torch: an ordinary buffer still works
    return None, np.empty(nbytes, dtype=np.uint8)


_ro_quiet = False


def _from_readonly(buf: np.ndarray) -> "torch.Tensor":
    """torch.from_numpy of a read-only array (a view of the pool: its
    pages are mapped read-only, a write faults) without torch's warning
    about it.  torch 1.13 warns once per process: once a call under the
    filter records no warning, later calls skip the filter, which cost
    as much as the rest of a view (20 -> 14 us per sample)."""
    global _ro_quiet
    if _ro_quiet:
        return torch.from_numpy(buf)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", UserWarning)
        t = torch.from_numpy(buf)
    _ro_quiet = not seen
    return t


def _torch_view(t: "torch.Tensor", dtype: np.dtype, shape) -> "torch.Tensor":
    """t (uint8) seen as dtype with shape, in torch (the storage kept)."""
    if dtype != np.uint8:
        t = t.view(torch.from_numpy(np.empty(0, dtype=dtype)).dtype)
    return t.reshape(shape)


class CXLDataset(Dataset):
    """Dataset ``name`` of the broker at ``broker`` (default: $CXL_BROKER).

    ``version``: None for the newest when constructed; every worker then
    reads that same version.  ``output``: "tensor" (default), "numpy" or
    "bytes".  ``copy=False``: zero-copy arrays/tensors over the pool (the
    chunk stays pinned while they live); only where the pool is mapped.
    ``decode``: .npy rows keep their dtype and shape, .tar samples become
    {extension: bytes}; other formats are uint8 arrays.
    ``device``: "cuda" returns samples on the GPU through
    ``ucx_cxl.data.to_device``.

    In a DataLoader worker, tensors are read into the worker's hand-over
    arena and reach the main process by where they lie
    (``ucx_cxl.data.handover``; ``CXL_HANDOVER=0`` turns it off).
    """

    def __init__(self, name: str, version: Optional[int] = None,
                 broker: Optional[str] = None, output: str = "tensor",
                 copy: bool = True, decode: bool = True,
                 device: Optional[str] = None, timeout: float = 0.0) -> None:
        if output not in OUTPUTS:
            raise ValueError(f"output {output!r}: one of {OUTPUTS}")
        self.name = name
        self.broker_addr = broker
        self.output = output
        self.copy = copy
        self.decode = decode
        self.device = device
        self.timeout = timeout
        self._pid: Optional[int] = None
        self._broker: Optional[Broker] = None
        self._ds: Optional[BrokerDataset] = None
        ds = self._open(version)
        self.version = ds.version
        self.format = ds.format
        self._len = ds.nsamples
        local = self._broker.is_local
        self.close()
        if not copy and not local:
            raise ValueError(f"{name}: copy=False needs the broker's pool "
                             "mapped in this process (same pool)")
        if device is not None:
            from .device import cuda_status
            ok, why = cuda_status()
            if not ok:
                raise RuntimeError(f"{name}: device={device!r}: {why}")

    # -- the per-process connection --

    def _open(self, version: Optional[int]) -> BrokerDataset:
        self._broker = Broker(self.broker_addr, timeout=self.timeout)
        self._ds = self._broker.open(self.name, version)
        self._pid = _pid.pid()
        return self._ds

    @property
    def handle(self) -> BrokerDataset:
        """This process's open dataset (connecting if it has none)."""
        if (self._pid != _pid.pid() or self._ds is None or
                self._broker is None or self._broker.closed):
            # a forked worker: leave the parent's objects alone
            self._ds = None
            self._broker = None
            self._open(self.version)
        return self._ds

    def __getstate__(self) -> dict:
        st = self.__dict__.copy()
        st["_pid"] = None
        st["_broker"] = None
        st["_ds"] = None
        return st

    def __setstate__(self, st: dict) -> None:
        self.__dict__.update(st)

    def close(self) -> None:
        if self._pid == _pid.pid() and self._broker is not None:
            self._broker.close()
        self._ds = self._broker = None

    # -- Dataset --

    def __len__(self) -> int:
        return self._len

    def raw(self, i: int) -> np.ndarray:
        """Sample i's bytes as a uint8 array (a view when copy=False)."""
        return self._raw(i)[1]

    def _raw(self, i: int):
        """(hand-over handle or None, sample i's bytes as a uint8 array)."""
        ds = self.handle
        if not self.copy:
            return None, ds.view(i)
        n = ds.sample_len(i)
        h = None
        # a single sample goes by hand-over only where that pays: small
        # ones are usually collated into a batch in the worker (then the
        # arena place is only overhead: 39 -> 31 k samples/s of 4 KiB)
        if n >= handover.MIN_SAMPLE and self._handing():
            h, buf = handover.buffer(n)
        if h is None:
            buf = np.empty(n, dtype=np.uint8)
        ds.read_into(i, buf)
        return h, buf

    def _handing(self) -> bool:
        """Tensors of this process go to the main one by hand-over."""
        return (self.output == "tensor" and self.device is None and
                get_worker_info() is not None and handover.enabled())

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, (list, tuple, np.ndarray, torch.Tensor)) and \
                getattr(i, "ndim", 1) > 0:
            return self.get_batch(i)
        if i < 0:
            i += self._len
        h, buf = self._raw(int(i))
        if self.output == "bytes":
            return buf.tobytes()
        if self.decode and self.format == "tar":
            return decode.tar_members(buf.tobytes())
        if self.decode and self.format == "npy":
            buf = decode.npy(buf, self.handle.sample_info(int(i)))
        if self.output == "numpy":
            return buf
        t = torch.from_numpy(buf) if buf.flags.writeable else _from_readonly(buf)
        if h is not None:
            return handover.handed(t, h)
        if self.device is not None:
            from .device import to_device
            t = to_device(t, self.device)
        return t

    # -- batches: one read_batch call per batch --

    def __getitems__(self, indices: Any) -> List[Any]:
        """The samples ``indices`` as a list, read with one call.

        What the DataLoader's fetcher calls for a batch when the dataset
        has it (Debian's torch 1.13 does, as torch >= 2.0), then collates;
        the same as ``[ds[i] for i in indices]``: views of one buffer.
        """
        rows = self._rows_batch(indices)
        if rows is not None:
            return rows
        idx = self._indices(indices)
        if not self._batchable():
            return [self[int(i)] for i in idx]
        # in a worker the batch is read into the hand-over arena; either
        # way the fetcher's collate gives it back whole (a user's collate
        # gets the rows)
        h, flat_t, flat, offs, shape, dtype = self._read_flat(idx, shared=False)
        if shape is None or dtype is None:
            return self._samples_from(idx, flat_t, flat, offs)
        batch = self._finish(flat_t, flat, 0, int(offs[-1]), dtype,
                             (len(idx),) + shape)
        if self.output == "numpy":
            return list(batch)
        # the rows as views, made in C (unbind); the default collate gives
        # the batch back instead of stacking them (handover.BatchRows)
        return handover.BatchRows(handover.handed(batch, h) if h is not None
                                  else batch)

    def _rows_batch(self, indices: Any) -> Optional[List[Any]]:
        """__getitems__ of a dataset whose samples are rows of one length,
        dtype and shape (raw bytes, or .npy files of one row type), in the
        process that consumes the batch: one C call writes the rows of a
        fresh buffer (the request vector, offsets and checks of the general
        path cost as much as the reads of 64 samples of 4 KiB).  None where
        it does not apply or a check fails: the general path then gives the
        answer or the error."""
        ds = self.handle
        row = ds.row_len
        if not row or not self._rows_ok:
            return None
        kind = self._row_kind(ds)
        if kind is None:
            return None
        idx = np.asarray(indices, dtype=np.int64)
        if idx.ndim != 1 or idx.size == 0 or self._handing():
            return None
        flat = np.empty(idx.size * row, dtype=np.uint8)
        if ds._read_rows_at(idx, flat.ctypes.data) != 0:
            return None             # (negative, out of range: see there)
        return handover.BatchRows(self._finish(None, flat, 0, flat.size, kind[0],
                                               (idx.size,) + kind[1]))

    @property
    def _rows_ok(self) -> bool:
        """Samples of this dataset are tensors, read with copy."""
        return (self._batchable() and self.output == "tensor" and
                self.device is None)

    def _row_kind(self, ds: BrokerDataset):
        """(dtype, shape) of every sample as decoded, or None when the files
        differ (.npy rows of other types); kept with the process's handle."""
        cache = ds.__dict__.setdefault("_row_kinds", {})
        decode_npy = self.decode and self.format == "npy"
        if decode_npy not in cache:
            if decode_npy:
                info = ds.common_info()
                cache[decode_npy] = decode.npy_row(info) if info else None
            else:
                cache[decode_npy] = (np.dtype(np.uint8), (ds.row_len,))
        return cache[decode_npy]

    def get_batch(self, indices: Any) -> Any:
        """The samples ``indices`` as one batch, read with one call.

        ``ds[[i, j, ...]]`` is this.  Samples of one length (and, for
        .npy, of one dtype and shape) come back stacked, a tensor (or
        array) of shape ``(len(indices), *sample_shape)`` as the default
        collate would make it, but written by the reads themselves: no
        per-sample Python work, no copy to stack.  In a DataLoader worker
        the batch is allocated in shared memory, so that sending it to
        the main process copies nothing.  Otherwise (lengths differ,
        ``copy=False``, ``output="bytes"``, decoded .tar) a list of
        samples.  For torch 1.13's DataLoader, which never hands a dataset
        a whole batch, let a ``BatchSampler`` make the batches::

            DataLoader(ds, batch_size=None, num_workers=4,
                       sampler=BatchSampler(EpochSampler(ds), 64, False))
        """
        idx = self._indices(indices)
        if not self._batchable():
            return [self[int(i)] for i in idx]
        h, flat_t, flat, offs, shape, dtype = self._read_flat(idx, shared=True)
        if shape is None or dtype is None:      # lengths or rows differ
            return self._samples_from(idx, flat_t, flat, offs)
        batch = self._finish(flat_t, flat, 0, int(offs[-1]), dtype,
                             (len(idx),) + shape)
        return handover.handed(batch, h) if h is not None else batch

    def _samples_from(self, idx: np.ndarray, flat_t, flat, offs) -> List[Any]:
        """Each sample of a batch read into one buffer, decoded on its own."""
        out = []
        for k, i in enumerate(idx):
            a, b = int(offs[k]), int(offs[k + 1])
            dtype, shape = np.dtype(np.uint8), (b - a,)
            if self.decode and self.format == "npy":
                dtype, shape = decode.npy_row(self.handle.sample_info(int(i)))
            out.append(self._finish(flat_t, flat, a, b, dtype, shape))
        return out

    def _batchable(self) -> bool:
        # a subclass that overrides __getitem__ (labels, transforms) gets
        # it called per sample, as without the batch path
        return (type(self).__getitem__ is CXLDataset.__getitem__ and
                self.copy and self.output != "bytes" and
                not (self.decode and self.format == "tar"))

    def _indices(self, indices: Any) -> np.ndarray:
        """Flat int64 indices, negative ones from the end; IndexError for
        one out of range."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size:
            lo, hi = idx.min(), idx.max()
            if lo < 0:
                idx = np.where(idx < 0, idx + self._len, idx)
                lo, hi = idx.min(), idx.max()
            if lo < 0 or hi >= self._len:
                bad = idx[(idx < 0) | (idx >= self._len)][0]
                raise IndexError(f"{self.name}: sample {bad} of {self._len}")
        return idx

    def _read_flat(self, idx: np.ndarray, shared: bool):
        """Read idx into one buffer: (hand-over handle or None, shared
        tensor or None, uint8 array, offsets, sample shape, dtype); shape
        and dtype None when the samples differ in length or (.npy) in
        dtype and shape.  The handle only when the samples make one batch
        (one shape), which then is the whole buffer."""
        ds = self.handle
        lens = ds.lens[idx]                 # idx checked by _indices
        nbytes = int(lens.sum())
        one_len = bool(idx.size) and bool((lens == lens[0]).all())
        h = None
        if one_len and self._handing():
            h, flat = handover.buffer(nbytes)
            flat_t = None
        if h is None:
            flat_t, flat = _batch_buffer(nbytes, shared)
        offs = ds._read_many(idx, lens, flat)
        if not one_len:
            return None, flat_t, flat, offs, None, None
        if self.decode and self.format == "npy":
            infos = {ds.sample_info(int(i)) for i in idx}
            if len(infos) != 1:
                # rows of other files: samples of their own, from the arena
                # or not (a worker's array, freed by it if never sent)
                return None, flat_t, flat, offs, None, None
            dtype, shape = decode.npy_row(infos.pop())
            return h, flat_t, flat, offs, shape, dtype
        return h, flat_t, flat, offs, (int(lens[0]),), np.dtype(np.uint8)

    def _finish(self, flat_t, flat: np.ndarray, a: int, b: int,
                dtype: np.dtype, shape) -> Any:
        if self.output == "numpy" or flat_t is None:
            arr = flat[a:b].view(dtype).reshape(shape)
            if self.output == "numpy":
                return arr
            t = torch.from_numpy(arr)
        else:
            t = _torch_view(flat_t[a:b], dtype, shape)
        if self.device is not None:
            from .device import to_device
            t = to_device(t, self.device)
        return t

    def announce_epoch(self, epoch: int, order: Optional[np.ndarray] = None) -> None:
        """Tell the broker the epoch (and its global order, for ``plan``).

        Uses this process's connection if it has one, else a short-lived
        one, so that workers forked afterwards inherit no UCX state.
        """
        if (self._pid == _pid.pid() and self._ds is not None and
                not self._broker.closed):
            self._ds.epoch(epoch, order)
            return
        with Broker(self.broker_addr, timeout=self.timeout) as b:
            ds = b.open(self.name, self.version)
            try:
                ds.epoch(epoch, order)
            finally:
                ds.close()
