"""``CXLIterableDataset``: whole chunks in a locality-aware shuffled order.

For datasets larger than the pool: a reader that jumps between chunks at
random makes the broker fill (and evict) a chunk for every few samples.
This one shuffles the order of chunks, splits them between ranks and
workers, and shuffles samples only inside a window of ``window`` chunks
(WebDataset's shard shuffle plus buffer shuffle), so each chunk is filled
once per epoch and read while resident.
"""

from __future__ import annotations

import os
from typing import Any, Iterator, Optional

import numpy as np
from torch.utils.data import IterableDataset, get_worker_info

from .dataset import CXLDataset


class CXLIterableDataset(IterableDataset):
    def __init__(self, name: str, version: Optional[int] = None,
                 broker: Optional[str] = None, shuffle: bool = True,
                 seed: int = 0, window: int = 4, num_replicas: int = 1,
                 rank: int = 0, **kw: Any) -> None:
        if window < 1:
            raise ValueError("window: at least 1 chunk")
        if not 0 <= rank < num_replicas:
            raise ValueError(f"rank {rank} of {num_replicas}")
        self.maps = CXLDataset(name, version, broker, **kw)
        self.shuffle = shuffle
        self.seed = seed
        self.window = window
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def chunks(self) -> np.ndarray:
        """This rank's and worker's chunks, in this epoch's order."""
        n = self.maps.handle.nchunks
        rng = np.random.Generator(np.random.PCG64(self.seed + self.epoch))
        order = rng.permutation(n) if self.shuffle else np.arange(n)
        order = order[self.rank::self.num_replicas]
        info = get_worker_info()
        if info is not None:
            order = order[info.id::info.num_workers]
        return order

    def __iter__(self) -> Iterator[Any]:
        ds = self.maps.handle
        wid = get_worker_info().id if get_worker_info() is not None else 0
        rng = np.random.Generator(np.random.PCG64(
            (self.seed + self.epoch) * 1000003 + self.rank * 1009 + wid))
        chunks = self.chunks()
        for w in range(0, len(chunks), self.window):
            idx = np.concatenate([np.arange(*self._range(ds, int(c)))
                                  for c in chunks[w:w + self.window]])
            if self.shuffle:
                rng.shuffle(idx)
            for i in idx:
                yield self.maps[int(i)]

    @staticmethod
    def _range(ds, c: int):
        first, count = ds.chunk_samples(c)
        return first, first + count

    def __len__(self) -> int:
        return len(self.maps) // self.num_replicas
