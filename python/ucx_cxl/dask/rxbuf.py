"""Receive buffers for large messages.

Two costs dominated a large transfer's receiving side before this module
(perf of a 256 MiB put, 2 vCPUs):

* distributed splits frames above ``distributed.comm.shard`` (64 MiB) into
  shards and joins them again on the receiver.  The join is free only when
  the shards are adjacent slices of one buffer (``merge_memoryviews``);
  shards received into buffers of their own were copied once more by
  ``bytearray().join``.  ``plan`` lays every frame of a message out in one
  buffer, each at a 64-byte aligned offset (numpy arrays on it stay
  aligned; shards, whose sizes are multiples of the shard size, stay
  adjacent).
* a fresh buffer is fresh pages: the kernel faults and zeroes each of them
  before the copy out of the pool writes it again (``clear_page_erms``:
  a fifth of the receiver's time).  ``RxCache`` keeps a few large buffers
  and hands one out again once nothing refers to it any more: no numpy
  array, memoryview or frame over it lives (its reference count, read in
  CPython, is the cache's own).  A buffer idle for ``IDLE_S`` is released,
  so an idle process does not keep them.

``CXL_COMM_RX_CACHE`` bounds the bytes the cache keeps (default 1G,
``0`` turns it off; suffixes K, M, G).
"""

from __future__ import annotations

import os
import sys
import time
from typing import List, Optional, Sequence, Tuple

import numpy as np

ALIGN = 64
MIN_CACHED = 1 << 20        # smaller buffers are cheap to allocate
IDLE_S = 2.0
DEFAULT_CAP = 1 << 30
# a head may claim anything; more than this in one message is refused
MAX_MESSAGE = 1 << 40


def parse_bytes(text: str) -> int:
    """'512M' -> 536870912 (K, M, G: powers of 1024; a plain number: bytes)."""
    t = text.strip().upper().removesuffix("B")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    try:
        if t and t[-1] in mult:
            v = int(t[:-1]) * mult[t[-1]]
        else:
            v = int(t)
    except ValueError:
        raise ValueError(f"CXL_COMM_RX_CACHE={text!r}: not a size "
                         f"(bytes, or a number with K, M or G)") from None
    if v < 0:
        raise ValueError(f"CXL_COMM_RX_CACHE={text!r}: negative")
    return v


def cache_cap() -> int:
    env = os.environ.get("CXL_COMM_RX_CACHE")
    return DEFAULT_CAP if env is None else parse_bytes(env)


def plan(sizes: Sequence[int]) -> Optional[Tuple[List[int], int]]:
    """Offsets of the frames in one buffer and its length; None when the
    sizes cannot be a real message."""
    offs: List[int] = []
    end = 0
    for s in sizes:
        end = (end + ALIGN - 1) & ~(ALIGN - 1)
        offs.append(end)
        end += s
        if end > MAX_MESSAGE:
            return None
    return offs, end


class RxCache:
    """Large receive buffers handed out again once unreferenced."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.bufs: List[np.ndarray] = []
        self.used: List[float] = []      # when each was last handed out
        self.total = 0
        self.reused = 0                  # buffers handed out again (tests)
        self._trimmed = 0.0

    def _free(self, i: int) -> bool:
        # references: the list's and getrefcount's argument
        return sys.getrefcount(self.bufs[i]) == 2

    def get(self, n: int) -> np.ndarray:
        """A uint8 array of at least n bytes (exactly n when new)."""
        now = time.monotonic()
        if n < MIN_CACHED or not self.cap:
            return np.empty(n, dtype=np.uint8)
        bufs = self.bufs
        best = -1
        for i in range(len(bufs)):
            c = bufs[i].nbytes
            if n <= c <= 2 * n and self._free(i) and (
                    best < 0 or c < bufs[best].nbytes):
                best = i
        if best >= 0:
            self.used[best] = now
            self.reused += 1
            return bufs[best]
        buf = np.empty(n, dtype=np.uint8)
        if n <= self.cap:
            i = 0
            while self.total + n > self.cap and i < len(bufs):
                if self._free(i):
                    self._drop(i)
                else:
                    i += 1
            if self.total + n <= self.cap:
                bufs.append(buf)
                self.used.append(now)
                self.total += n
        return buf

    def _drop(self, i: int) -> None:
        self.total -= self.bufs[i].nbytes
        del self.bufs[i]
        del self.used[i]

    def trim(self, now: float) -> None:
        """Release buffers nobody used for IDLE_S (cheap: runs once a second)."""
        if now - self._trimmed < 1.0 or not self.bufs:
            return
        self._trimmed = now
        i = 0
        while i < len(self.bufs):
            if now - self.used[i] > IDLE_S and self._free(i):
                self._drop(i)
            else:
                i += 1

    def clear(self) -> None:
        self.bufs.clear()
        self.used.clear()
        self.total = 0
