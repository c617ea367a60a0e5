"""Batches from DataLoader workers to the main process through memory that
stays mapped, instead of a new shared-memory segment per batch.

torch sends a tensor from a worker by moving its storage into a fresh
shared-memory segment and passing that segment's file descriptor over a
unix socket, one connection per batch (torch.multiprocessing's
``file_descriptor`` strategy).  On two cores that caps a DataLoader at
about 55 k samples/s of 4 KiB, whatever the dataset reads.  A worker of
``CXLDataset`` instead reads each batch into its own *arena*, a memfd
that both sides map once, and sends only where the batch lies.  The
arena's file descriptor goes along (as torch sends one) only until the
main process has mapped it; it has no name, so nothing is left behind
when both processes are gone, however they end.  The main process builds
the tensor over its mapping; the batch's place goes back to the worker
when the last tensor over it (a view included) is freed there.

Arena layout: a header page with ``ENTRIES`` state bytes and the
``MAPPED`` byte, then up to ``size`` bytes used as a ring in allocation
order.  Entry state 1: the batch may be in use (set by the worker before
it sends); 0: free (set by the main process when its last tensor over the
batch went, or by the worker for a batch it never sent).  One writer at a
time, handed over by the send.  ``MAPPED`` is written by the main process
only (1 once it mapped the arena).  The worker reuses space from its
oldest batch on, as entries become 0.  Where the ring has no room (the
main process holds many batches), or the memory none, the batch takes
torch's path: ``stats()`` counts both.
"""

from __future__ import annotations

import collections
import mmap
import os
import secrets
import weakref
from multiprocessing.reduction import DupFd
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch

from .. import _pid

ENTRIES = 1024
MAPPED = 2048                   # header byte: the main process mapped it
HDR = 4096
ALIGN = 64
STEP = 8 << 20                  # /dev/shm space reserved as the ring grows
SIZE = int(os.environ.get("CXL_HANDOVER_MB", "256")) << 20
MIN_SAMPLE = 64 << 10           # single samples below: torch's path

_stats = {"handed": 0, "fallback": 0, "received": 0}


def stats() -> Dict[str, int]:
    """This process's counts: batches handed over through its arena and
    batches that took torch's path (worker side); batches received
    through arenas (main process)."""
    return dict(_stats)


def enabled() -> bool:
    """Hand-over on (the default); CXL_HANDOVER=0 turns it off."""
    return os.environ.get("CXL_HANDOVER", "1") not in ("0", "no", "off") \
        and SIZE > 0


class _Handle:
    """One batch in a worker's arena."""

    __slots__ = ("arena", "entry", "off", "nbytes", "sent")

    def __init__(self, arena: "_Arena", entry: int, off: int, nbytes: int):
        self.arena, self.entry, self.off, self.nbytes = arena, entry, off, nbytes
        self.sent = False

    def unused(self) -> None:
        """The worker's last array over the batch went: free the place
        unless the batch was sent (then the main process frees it)."""
        if not self.sent and self.arena.pid == _pid.pid():
            self.arena.state[self.entry] = 0


class _Arena:
    """A worker's arena: batches in allocation order, in a ring that is
    only as long as it needs to be (``limit``, from 8 batches up to
    ``size``), so that the pages it touches stay few."""

    def __init__(self, size: int) -> None:
        self.pid = _pid.pid()
        self.key = f"{self.pid}-{secrets.token_hex(4)}"
        fd = os.memfd_create("ucx-cxl-handover", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, HDR + size)
            os.posix_fallocate(fd, 0, HDR)
            self.mm = mmap.mmap(fd, HDR + size)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        self.state = np.frombuffer(self.mm, dtype=np.uint8, count=ENTRIES)
        self.base = self.state.ctypes.data  # the mapping's address
        self.size = size
        self.limit = 0              # where the ring wraps
        self.reserved = 0           # bytes backed by /dev/shm space
        self.nalloc = 0
        # batches out, oldest first: (entry, start, end)
        self.fifo: "collections.deque[Tuple[int, int, int]]" = collections.deque()

    def _reclaim(self) -> None:
        while self.fifo and self.state[self.fifo[0][0]] == 0:
            self.fifo.popleft()

    def _reserve(self, end: int) -> bool:
        if end <= self.reserved:
            return True
        new = min(self.size, (end + STEP - 1) // STEP * STEP)
        try:
            os.posix_fallocate(self.fd, HDR + self.reserved, new - self.reserved)
        except OSError:
            return False            # no memory for it: torch's path
        self.reserved = new
        return True

    def _place(self, n: int) -> Optional[int]:
        if not self.fifo:
            return 0 if n <= self.limit else None
        first, head = self.fifo[0][1], self.fifo[-1][2]
        if head >= first:           # [first, head) out: room above and below
            if head + n <= self.limit:
                return head
            return 0 if n <= first else None
        return head if head + n <= first else None  # wrapped

    def alloc(self, nbytes: int) -> Optional[_Handle]:
        n = (nbytes + ALIGN - 1) // ALIGN * ALIGN
        if n == 0 or n > self.size:
            return None
        self._reclaim()
        if len(self.fifo) >= ENTRIES - 1:
            return None
        if self.limit == 0:
            self.limit = min(self.size, max(1 << 20, 8 * n))
        start = self._place(n)
        while start is None and self.limit < self.size:
            self.limit = min(self.size, 2 * self.limit)
            start = self._place(n)
        if start is None or not self._reserve(start + n):
            return None
        # entries go round in allocation order, and at most ENTRIES - 1
        # batches are out: this one's entry belonged to a reclaimed batch
        entry = self.nalloc % ENTRIES
        self.nalloc += 1
        self.state[entry] = 1
        self.fifo.append((entry, start, start + n))
        return _Handle(self, entry, HDR + start, nbytes)


_arena: Optional[_Arena] = None
_arena_failed = False


def buffer(nbytes: int) -> Tuple[Optional[_Handle], Optional[np.ndarray]]:
    """A worker's place for a batch of nbytes: (handle, uint8 array over
    it), or (None, None) where it has none (torch's path then)."""
    global _arena, _arena_failed
    if _arena is None or _arena.pid != _pid.pid():
        _arena = None
        if _arena_failed:
            _stats["fallback"] += 1
            return None, None
        try:
            _arena = _Arena(SIZE)
        except OSError:
            _arena_failed = True
            _stats["fallback"] += 1
            return None, None
    h = _arena.alloc(nbytes)
    if h is None:
        _stats["fallback"] += 1
        return None, None
    arr = np.frombuffer(_arena.mm, dtype=np.uint8, count=nbytes, offset=h.off)
    weakref.finalize(arr, h.unused).atexit = False
    return h, arr


class HandedTensor(torch.Tensor):
    """A batch in a worker's arena: pickles as where it lies."""

    _cxl_handle: Optional[_Handle] = None

    def __reduce_ex__(self, proto: Any) -> Any:
        h = self._cxl_handle
        plain = self.as_subclass(torch.Tensor)
        if h is None or not plain.is_contiguous() or \
                plain.numel() * plain.element_size() != h.nbytes or \
                plain.data_ptr() != h.arena.base + h.off:
            return plain.__reduce_ex__(proto)   # not the whole batch
        h.sent = True
        _stats["handed"] += 1
        # the descriptor until the main process says it has the mapping
        df = DupFd(h.arena.fd) if h.arena.mm[MAPPED] == 0 else None
        return (_rebuild, (h.arena.key, df, h.entry, h.off, h.nbytes,
                           str(plain.dtype).split(".")[-1],
                           tuple(plain.shape)))


def handed(t: "torch.Tensor", h: _Handle) -> HandedTensor:
    """t, the whole batch h holds, as a tensor that pickles by place."""
    out = t.as_subclass(HandedTensor)
    out._cxl_handle = h
    return out


class BatchRows(list):
    """The rows of one batch, as ``CXLDataset.__getitems__`` returns them
    to the fetcher: its default collate gives back the batch they are views
    of, instead of stacking them into a copy (in a worker, into a new
    shared segment).  Any change to the list drops that."""

    __slots__ = ("whole",)

    def __init__(self, whole: "torch.Tensor") -> None:
        plain = whole if type(whole) is torch.Tensor else \
            whole.as_subclass(torch.Tensor)
        super().__init__(plain.unbind(0))
        self.whole: Optional["torch.Tensor"] = whole


def _changes(name: str):
    base = getattr(list, name)

    def changed(self, *args, **kw):
        self.whole = None
        return base(self, *args, **kw)
    changed.__name__ = name
    return changed


for _name in ("__setitem__", "__delitem__", "__iadd__", "__imul__", "append",
              "extend", "insert", "pop", "remove", "sort", "reverse", "clear"):
    setattr(BatchRows, _name, _changes(_name))


def register_collate() -> None:
    """default_collate (torch >= 1.13: its documented registry of collate
    functions by element type) gives back the batch of a BatchRows list;
    every other batch of tensors goes to the function registered before."""
    try:
        from torch.utils.data._utils.collate import default_collate_fn_map
    except ImportError:
        return                      # an older torch: rows get stacked
    prev = default_collate_fn_map.get(torch.Tensor)
    if prev is None or getattr(prev, "_cxl_rows", False):
        return

    def collate_tensors(batch, *, collate_fn_map=None):
        if type(batch) is BatchRows and batch.whole is not None:
            return batch.whole
        return prev(batch, collate_fn_map=collate_fn_map)
    collate_tensors._cxl_rows = True
    default_collate_fn_map[torch.Tensor] = collate_tensors


# ---- the main process ----

# arena key ("PID-TOKEN") -> (this process's pid, mapping, entry states)
_maps: Dict[str, Tuple[int, mmap.mmap, np.ndarray]] = {}


def _release(pid: int, state: np.ndarray, entry: int) -> None:
    if _pid.pid() == pid:          # not in a child forked meanwhile
        state[entry] = 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


def _forget_gone() -> None:
    """Arenas of workers that ended: the tensors still over them keep the
    mapping (their arrays hold it), nothing else does."""
    for key in list(_maps):
        if not _alive(int(key.split("-")[0])):
            del _maps[key]


def _rebuild(key: str, df: Any, entry: int, off: int, nbytes: int,
             dtype: str, shape: Tuple[int, ...]) -> "torch.Tensor":
    m = _maps.get(key)
    if m is not None and m[0] != _pid.pid():
        m = None                    # a forked child: its own mappings
    fd = df.detach() if df is not None else -1
    try:
        if m is None:
            if fd < 0:
                raise RuntimeError(f"hand-over arena {key}: a batch arrived "
                                   "without the arena's descriptor, before "
                                   "this process mapped it")
            _forget_gone()
            mm = mmap.mmap(fd, 0)
            m = (_pid.pid(), mm,
                 np.frombuffer(mm, dtype=np.uint8, count=ENTRIES))
            _maps[key] = m
            mm[MAPPED] = 1          # the worker stops sending the fd
    finally:
        if fd >= 0:
            os.close(fd)
    arr = np.frombuffer(m[1], dtype=np.uint8, count=nbytes, offset=off)
    # the array is what torch's storage holds on to: freed with the last
    # tensor over the batch (views included), and then the place is
    weakref.finalize(arr, _release, m[0], m[2], entry).atexit = False
    _stats["received"] += 1
    t = torch.from_numpy(arr)
    tdt = getattr(torch, dtype)
    if tdt != torch.uint8:
        t = t.view(tdt)
    return t.reshape(shape)
