"""Frames in the pool: a large message between two processes of one pool
moves with one copy.

Through the transport a frame is copied twice: by the sender into the
pool (the ring of its channel) and by the receiver out of it into the
buffer it deserialises from; at 16 MiB the two copies are most of a
transfer (two thirds of it, perf of a put).  Here the receiver lends the
sender an extent of the pool (``cxl_comm_pool_lend``: its allocation, in
its host partition), the sender copies the frames straight into it, and
the receiver's frames are memoryviews of the pool: numpy arrays are
deserialised in place.  When the last view, array or frame over it dies
(a finalizer) the extent waits, idle, for the next loan, and is freed
after IDLE_S unused; the receiver's other allocations go with it when the
receiver dies; the sender owns nothing of it.

``CXL_COMM_POOL_FRAMES`` bounds the bytes one process holds in frames,
idle extents included (default: half the pool, so the transport keeps room for its rings;
``0`` turns loans off, which leaves the two-copy path).  The sender's
copy of 4 MiB and more is shared with a helper thread
(``CXL_COMM_COPY_THREADS``, default 2; 1: the sender's thread alone).  A loan that does
not fit is refused and the message goes through the transport, counted
in ``no_room``.  Protocol and ordering: doc/design/comm-pool-frames.md.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
import weakref
from typing import List, Optional, Tuple

from . import rxbuf

logger = logging.getLogger(__name__)

UUID_LEN = 16
# smaller messages: the loan's round trip costs more than the copy saved
MIN_BYTES = 1 << 20
IDLE_S = 2.0                # an idle extent kept longer is freed
# A loan whose comm ended between GRANT and DONE may still be written by
# its sender (its copy has no way to learn of the end): its extent is held
# this long, then freed, never lent again before.
QUARANTINE_S = 10.0


class Loan(ctypes.Structure):
    _fields_ = [("offset", ctypes.c_uint64), ("length", ctypes.c_uint64),
                ("index", ctypes.c_uint32), ("gen", ctypes.c_uint32)]


def setting() -> Optional[int]:
    """CXL_COMM_POOL_FRAMES in bytes; None when unset."""
    env = os.environ.get("CXL_COMM_POOL_FRAMES")
    if env is None:
        return None
    try:
        return rxbuf.parse_bytes(env)
    except ValueError:
        raise ValueError(f"CXL_COMM_POOL_FRAMES={env!r}: not a size (bytes, "
                         f"or a number with K, M or G)") from None


def copy_threads_setting() -> int:
    """CXL_COMM_COPY_THREADS (comm_copy.c): 1 or 2 (default)."""
    env = os.environ.get("CXL_COMM_COPY_THREADS", "2")
    if env.strip() not in ("1", "2"):
        raise ValueError(f"CXL_COMM_COPY_THREADS={env!r}: 1 (the sender's "
                         f"thread alone) or 2 (and a helper thread)")
    return int(env)


def cap_setting(pool_size: int) -> int:
    v = setting()
    return pool_size // 2 if v is None else v


class _Book:
    """The process's extents for frames: lent (a view of them alive) and
    idle (kept for the next loan: an allocation and a free cost about as
    much as the wake-up of the peer, 0.14 ms each here).  Finalizers run
    on any thread, so everything is under the lock, a reentrant one: a
    collection that runs while this thread holds it may run a finalizer
    (``back``) right there."""

    def __init__(self, lib, handle: int, cap: int) -> None:
        self.lock = threading.RLock()
        self.lib, self.handle, self.cap = lib, handle, cap
        self.lent_bytes = 0
        self.lent = 0                   # loans with a view alive
        self.idle: List[Tuple[float, Loan]] = []
        self.idle_bytes = 0
        self.quarantined: List[Tuple[float, memoryview]] = []
        self.tainted: set = set()      # offsets of quarantined loans
        self.closed = False
        self._trimmed = 0.0

    def take(self, n: int) -> Tuple[Optional[Loan], bool]:
        """An idle extent for n bytes, else a reservation for a new one
        (True), else neither (no room under the cap)."""
        with self.lock:
            best = -1
            for i, (_, ln) in enumerate(self.idle):
                if n <= ln.length <= 2 * n and (
                        best < 0 or ln.length < self.idle[best][1].length):
                    best = i
            if best >= 0:
                loan = self.idle.pop(best)[1]
                self.idle_bytes -= loan.length
                self.lent_bytes += loan.length
                self.lent += 1
                return loan, False
            while self.idle and self.lent_bytes + self.idle_bytes + n > self.cap:
                self._free_locked(0)
            if self.lent_bytes + self.idle_bytes + n > self.cap:
                return None, False
            self.lent_bytes += n
            self.lent += 1
            return None, True

    def unreserve(self, n: int) -> None:
        with self.lock:
            self.lent_bytes -= n
            self.lent -= 1

    def back(self, loan: Loan) -> None:
        """A loan's last view died: its extent waits for the next loan."""
        with self.lock:
            self.lent_bytes -= loan.length
            self.lent -= 1
            if self.closed:
                return
            if loan.offset in self.tainted:
                self.tainted.discard(loan.offset)
                self.idle.append((0.0, loan))
                self.idle_bytes += loan.length
                self._free_locked(len(self.idle) - 1)
                return
            self.idle.append((time.monotonic(), loan))
            self.idle_bytes += loan.length

    def quarantine(self, loan: Loan, view: memoryview) -> None:
        """A loan granted and never completed: held for QUARANTINE_S, then
        freed (see QUARANTINE_S)."""
        with self.lock:
            self.tainted.add(loan.offset)
            self.quarantined.append((time.monotonic() + QUARANTINE_S, view))

    def _free_locked(self, i: int) -> None:
        loan = self.idle.pop(i)[1]
        self.idle_bytes -= loan.length
        if self.lib.cxl_comm_pool_reclaim(self.handle, loan.offset) != 0:
            logger.warning("cxl comm: %s",
                           (self.lib.cxl_comm_last_error() or b"").decode())

    def free_idle(self) -> None:
        with self.lock:
            while self.idle:
                self._free_locked(0)

    def trim(self, now: float) -> None:
        """Free extents idle for IDLE_S, and quarantined ones whose time is
        up (cheap: runs once a second)."""
        if now - self._trimmed < 1.0 or not (self.idle or self.quarantined):
            return
        with self.lock:
            self._trimmed = now
            i = 0
            while i < len(self.idle):
                if now - self.idle[i][0] > IDLE_S:
                    self._free_locked(i)
                else:
                    i += 1
            done = [q for q in self.quarantined if q[0] <= now]
            self.quarantined = [q for q in self.quarantined if q[0] > now]
        del done                # (outside the lock: their finalizers take it)


class PoolFrames:
    """The process's handle on the pool for frames."""

    def __init__(self, lib, cap: Optional[int] = None) -> None:
        self.lib = lib
        h = ctypes.c_void_p()
        if lib.cxl_comm_pool_open(ctypes.byref(h)) != 0:
            raise OSError((lib.cxl_comm_last_error() or b"").decode())
        self.handle = h.value
        buf = (ctypes.c_uint8 * UUID_LEN)()
        lib.cxl_comm_pool_uuid(self.handle, buf)
        self.uuid = bytes(buf)
        self.base = lib.cxl_comm_pool_base(self.handle)
        self.size = lib.cxl_comm_pool_size(self.handle)
        self.book = _Book(lib, self.handle,
                          cap_setting(self.size) if cap is None else cap)
        self.lent = 0           # loans made, ever (tests, diagnostics)
        self.reused = 0         # of them on an idle extent
        self.written = 0        # loans this process wrote as the sender
        self.no_room = 0        # loans refused: the cap or the pool full
        self._warned = False

    @property
    def cap(self) -> int:
        return self.book.cap

    @cap.setter
    def cap(self, v: int) -> None:
        self.book.cap = v

    def lend(self, n: int, count_refusal: bool = True
             ) -> Optional[Tuple[Loan, memoryview]]:
        """A loan of at least n bytes and the view of all of it, or None
        (no room)."""
        book = self.book
        loan, new = book.take(n)
        if loan is None and new:
            loan = Loan()
            st = self.lib.cxl_comm_pool_lend(self.handle, n, ctypes.byref(loan))
            if st != 0:
                book.free_idle()        # (the pool may need them back)
                st = self.lib.cxl_comm_pool_lend(self.handle, n, ctypes.byref(loan))
            if st != 0:
                book.unreserve(n)
                if not self._warned:
                    self._warned = True
                    logger.info("cxl comm: %s; such messages go through the "
                                "transport", (self.lib.cxl_comm_last_error() or b"").decode())
                loan = None
        elif loan is not None:
            self.reused += 1
        if loan is None:
            self.no_room += count_refusal
            return None
        # The view covers the whole extent, not just n: an idle extent
        # reused here may be up to 2n long, the loan tells the sender its
        # length, and an offer may be filled to it.
        size = max(loan.length, 1)
        arr = (ctypes.c_char * size).from_address(self.base + loan.offset)
        weakref.finalize(arr, book.back, loan)
        self.lent += 1
        return loan, memoryview(arr).cast("B")[:loan.length]

    def trim(self, now: float) -> None:
        self.book.trim(now)

    def quarantine(self, loan: Loan, view: memoryview) -> None:
        self.book.quarantine(loan, view)

    def close(self) -> None:
        """Free the idle extents and drop this handle (tests: the process's
        handle lives until exit)."""
        self.book.free_idle()
        self.book.closed = True
        self.lib.cxl_comm_pool_close(self.handle)

    def write(self, loan: Loan, at: int, addr: int, n: int) -> bool:
        return self.lib.cxl_comm_pool_write(self.handle, ctypes.byref(loan), at,
                                            addr, n) == 0

    def publish(self) -> None:
        self.written += 1
        self.lib.cxl_comm_pool_publish(self.handle)

    def acquire(self, loan: Loan) -> None:
        self.lib.cxl_comm_pool_acquire(self.handle, ctypes.byref(loan))


_lock = threading.Lock()
_pools: dict = {}


def get(lib) -> Optional[PoolFrames]:
    """The process's PoolFrames; None where loans are off (the setting is
    0) or the pool cannot be opened (said once)."""
    pid = os.getpid()
    with _lock:
        if pid in _pools:
            return _pools[pid]
        pf: Optional[PoolFrames] = None
        copy_threads_setting()
        if setting() != 0:
            try:
                pf = PoolFrames(lib)
            except OSError as e:
                logger.warning("cxl comm: frames through the pool are off: %s", e)
        _pools.clear()          # (a parent's: its attachment is not ours)
        _pools[pid] = pf
        return pf


def exit() -> None:
    """At process exit (after the workers): detach from the pool, loans
    still alive included (they go with the attachment)."""
    with _lock:
        pf = _pools.get(os.getpid())
    if pf is not None:
        pf.book.closed = True
        pf.lib.cxl_comm_pool_exit()


def stats() -> Optional[dict]:
    """This process's loans so far (None: loans off or not used yet):
    messages written into loans as the sender, loans made as the receiver
    (offers included), loans on an idle extent, loans refused for room,
    and the bytes lent and idle now."""
    with _lock:
        pf = _pools.get(os.getpid())
    if pf is None:
        return None
    return {"written": pf.written, "lent": pf.lent, "reused": pf.reused,
            "no_room": pf.no_room, "lent_bytes": pf.book.lent_bytes,
            "idle_bytes": pf.book.idle_bytes}
