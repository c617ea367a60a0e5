"""One UCP worker per process and event loop, progressed from the loop.

The worker's wake-up fd is watched with ``loop.add_reader``; each wake-up
progresses the worker, completes the futures of finished requests, hands
accepted endpoints to their listeners and arrived messages to their comms,
then re-arms.  While requests are in flight a 2 ms timer progresses too
(a transport may complete a rendezvous without an event); when nothing is
in flight the loop sleeps: no core is burnt by an idle backend.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import weakref
from typing import Any, Dict, List, Optional, Tuple

from . import _ucp

def _cxl_events() -> bool:
    """Whether the cxl transport can wake this process: it signals only
    on pools that cannot span hosts (emulated, under /dev/shm) in hw mode,
    or where UCX_CXL_EVENTS=yes says every peer shares the host."""
    ev = os.environ.get("UCX_CXL_EVENTS", "try").lower()
    if ev in ("y", "yes", "on", "1"):
        return True
    if ev in ("n", "no", "off", "0"):
        return False
    if os.environ.get("UCX_CXL_COHERENCE", "auto").lower() == "sw":
        return False
    pool = os.environ.get("UCX_CXL_POOL", "auto")
    return pool in ("", "auto") or all(
        p.startswith("/dev/shm/") for p in pool.split(","))


# How often a waiting engine progresses without an event: connection
# requests never signal the fd (UCX 1.13), so a listener needs a slow tick;
# without cxl wake-up events, a waiting read polls every millisecond.
TICK_IDLE = 0.01 if _cxl_events() else 0.001
_engines: Dict[Tuple[int, int], "Engine"] = {}


class CommError(OSError):
    pass


def engine() -> "Engine":
    loop = asyncio.get_running_loop()
    key = (os.getpid(), id(loop))
    e = _engines.get(key)
    if e is None or e.loop is not loop:
        e = Engine(loop)
        _engines[key] = e
    return e


class Engine:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.lib = _ucp.lib()
        w = ctypes.c_void_p()
        st = self.lib.cxl_comm_worker_create(ctypes.byref(w))
        if st != 0:
            raise CommError(f"cxl comm: {_ucp.last_error()}")
        self.w = w
        self.efd = self.lib.cxl_comm_worker_efd(w)
        # (request, future, objects kept alive until it completes)
        self.inflight: List[Tuple[int, asyncio.Future, Any]] = []
        self.comms: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self.listeners: "weakref.WeakSet[Any]" = weakref.WeakSet()
        self._timer: Optional[asyncio.TimerHandle] = None
        self._scheduled = False
        if self.efd >= 0:
            loop.add_reader(self.efd, self.progress)
        self.kick()

    def kick(self) -> None:
        """Progress soon (after something was posted)."""
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self.progress)

    def progress(self) -> None:
        self._scheduled = False
        lib = self.lib
        for _ in range(64):
            lib.cxl_comm_progress(self.w)
            busy = self._complete()
            for lst in list(self.listeners):
                lst._accept()
            for c in list(self.comms):
                c._poll()
            if self.efd < 0:
                break
            if lib.cxl_comm_worker_arm(self.w) and not busy:
                break
        if self.inflight or self.efd < 0:
            delay = 0.002
        elif self.listeners or any(c._waiter is not None for c in self.comms):
            delay = TICK_IDLE
        else:
            return
        if self._timer is None:
            self._timer = self.loop.call_later(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self.progress()

    def _complete(self) -> bool:
        done = False
        still = []
        for req, fut, keep in self.inflight:
            st = self.lib.cxl_comm_req_status(req)
            if st == _ucp.INPROGRESS:
                still.append((req, fut, keep))
                continue
            self.lib.cxl_comm_req_free(req)
            done = True
            if fut.done():
                continue
            if st == 0:
                fut.set_result(keep)
            else:
                fut.set_exception(CommError(f"cxl comm: request failed ({st})"))
        self.inflight = still
        return done

    def done_now(self, req: int) -> bool:
        """Whether request ``req`` finished at once (most eager sends and
        every eager receive do); then it is released and nothing waits."""
        if req and self.lib.cxl_comm_req_status(req) == 0:
            self.lib.cxl_comm_req_free(req)
            return True
        return False

    def track(self, req: int, keep: Any) -> asyncio.Future:
        """A future for request ``req``; ``keep`` lives until it is done."""
        fut = self.loop.create_future()
        if not req:
            fut.set_exception(CommError(f"cxl comm: {_ucp.last_error()}"))
            return fut
        self.inflight.append((req, fut, keep))
        self.kick()
        return fut
