"""``EpochSampler``: the epoch order every rank agrees on, resumable.

Like ``torch.utils.data.DistributedSampler``: a permutation seeded by
``seed + epoch`` (numpy's PCG64, so the order does not depend on the torch
version or the number of workers), padded or cut to a multiple of
``num_replicas``, split as ``indices[rank::num_replicas]``.  Plus:

* ``state_dict()`` / ``load_state_dict()``: epoch, seed and position, a
  handful of integers; a restarted job continues at the exact next sample.
  With a DataLoader the sampler runs ahead of the training loop (workers
  prefetch), so pass what the loop consumed: ``state_dict(samples_seen=
  batches * batch_size)``, counted from where this run of the epoch
  started (a resumed sampler adds the position it resumed at).
* ``set_epoch()`` also tells the broker the epoch's global order, which its
  ``plan`` policy uses to prefetch and to evict by next use.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, Optional

import numpy as np
from torch.utils.data import Sampler


def _dist_default(what: str) -> int:
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size() if what == "world" else dist.get_rank()
    return 1 if what == "world" else 0


class EpochSampler(Sampler):
    def __init__(self, dataset, num_replicas: Optional[int] = None,
                 rank: Optional[int] = None, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False,
                 announce: bool = True) -> None:
        self.dataset = dataset
        self.num_replicas = _dist_default("world") if num_replicas is None else num_replicas
        self.rank = _dist_default("rank") if rank is None else rank
        if not 0 <= self.rank < self.num_replicas:
            raise ValueError(f"rank {self.rank} of {self.num_replicas}")
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.announce = announce
        self.epoch = 0
        self.position = 0      # samples of this rank's share already given
        self._base = 0         # the position this run of the epoch began at
        n = len(dataset)
        if drop_last:
            self.num_samples = n // self.num_replicas
        else:
            self.num_samples = -(-n // self.num_replicas)
        self.total_size = self.num_samples * self.num_replicas

    def order(self, epoch: Optional[int] = None) -> np.ndarray:
        """The epoch's global order, before the split between ranks."""
        n = len(self.dataset)
        e = self.epoch if epoch is None else epoch
        if self.shuffle:
            idx = np.random.Generator(np.random.PCG64(self.seed + e)).permutation(n)
        else:
            idx = np.arange(n)
        if self.total_size > n:
            reps = -(-(self.total_size - n) // n)
            idx = np.concatenate([idx] + [idx] * reps)[:self.total_size]
        return idx[:self.total_size].astype(np.uint64)

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.position = 0
            self._base = 0
        self.epoch = epoch
        if self.announce and hasattr(self.dataset, "announce_epoch") and self.rank == 0:
            self.dataset.announce_epoch(epoch, self.order())

    def __iter__(self) -> Iterator[int]:
        mine = self.order()[self.rank::self.num_replicas]
        start, self.position = self.position, 0
        self._base = start
        for k in range(start, len(mine)):
            self.position = k + 1
            yield int(mine[k])
        self.position = 0

    def __len__(self) -> int:
        return self.num_samples - self.position

    def state_dict(self, samples_seen: Optional[int] = None) -> Dict[str, Any]:
        pos = self.position if samples_seen is None else \
            self._base + samples_seen
        return {"epoch": self.epoch, "seed": self.seed, "position": int(pos),
                "num_replicas": self.num_replicas, "shuffle": self.shuffle,
                "drop_last": self.drop_last, "len": len(self.dataset)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        for k in ("num_replicas", "shuffle", "drop_last", "len"):
            mine = len(self.dataset) if k == "len" else getattr(self, k)
            if state.get(k, mine) != mine:
                raise ValueError(f"sampler state: {k} was {state[k]}, is {mine}")
        self.epoch = int(state["epoch"])
        self.seed = int(state["seed"])
        self.position = int(state["position"])
        self._base = self.position
