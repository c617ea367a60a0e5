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

import os
from typing import Any, Optional

import numpy as np
import torch
from torch.utils.data import Dataset

from ..broker import Broker, BrokerDataset
from . import decode

OUTPUTS = ("tensor", "numpy", "bytes")


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
        self._pid = os.getpid()
        return self._ds

    @property
    def handle(self) -> BrokerDataset:
        """This process's open dataset (connecting if it has none)."""
        if (self._pid != os.getpid() or self._ds is None or
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
        if self._pid == os.getpid() and self._broker is not None:
            self._broker.close()
        self._ds = self._broker = None

    # -- Dataset --

    def __len__(self) -> int:
        return self._len

    def raw(self, i: int) -> np.ndarray:
        """Sample i's bytes as a uint8 array (a view when copy=False)."""
        ds = self.handle
        if not self.copy:
            return ds.view(i)
        buf = np.empty(ds.sample_len(i), dtype=np.uint8)
        ds.read_into(i, buf)
        return buf

    def __getitem__(self, i: int) -> Any:
        if i < 0:
            i += self._len
        buf = self.raw(int(i))
        if self.output == "bytes":
            return buf.tobytes()
        if self.decode and self.format == "tar":
            return decode.tar_members(buf.tobytes())
        if self.decode and self.format == "npy":
            buf = decode.npy(buf, self.handle.sample_info(int(i)))
        if self.output == "numpy":
            return buf
        if not buf.flags.writeable:
            # torch warns on read-only numpy; the tensor must not be written
            # (a view of the pool: its pages are mapped read-only, a write
            # faults)
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                t = torch.from_numpy(buf)
        else:
            t = torch.from_numpy(buf)
        if self.device is not None:
            from .device import to_device
            t = to_device(t, self.device)
        return t

    def announce_epoch(self, epoch: int, order: Optional[np.ndarray] = None) -> None:
        """Tell the broker the epoch (and its global order, for ``plan``).

        Uses this process's connection if it has one, else a short-lived
        one, so that workers forked afterwards inherit no UCX state.
        """
        if (self._pid == os.getpid() and self._ds is not None and
                not self._broker.closed):
            self._ds.epoch(epoch, order)
            return
        with Broker(self.broker_addr, timeout=self.timeout) as b:
            ds = b.open(self.name, self.version)
            try:
                ds.epoch(epoch, order)
            finally:
                ds.close()
