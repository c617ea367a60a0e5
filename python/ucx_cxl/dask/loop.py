"""One UCP worker per process and event loop, progressed from the loop.

The worker's wake-up fd is watched with ``loop.add_reader``.  A wake-up
polls the worker (``cxl_comm_poll``: progress, then the endpoints and
listeners with news), hands the news to their comms and listeners and
completes finished requests.  When a poll found something the woken tasks
run first and the worker is polled again after them (``call_soon``): a
task that answers a message and waits for the next one costs one arm of
the fd, not one per step.  Only a poll that finds nothing arms the fd and
lets the loop sleep.

Timers: while requests are in flight a 2 ms tick polls too (a transport
may complete a rendezvous without an event), and while anything is open a
10 ms tick (UCX 1.13's connection requests and keepalive do not wake the
fd).

A transfer in flight (requests not done) is driven from C instead of
sleeping: ``cxl_comm_progress_wait`` polls for up to WAIT_US, yielding the
CPU when a round finds nothing (the peer may need this core to drain its
ring), and returns at the first completion or news; the loop gets control
back in between.  After QUIET_S without any event it falls back to the fd
and a 0.5 ms timer (a peer that does not drain), until the fd fires.  An
idle backend sleeps.

A conversation spins before it sleeps: when a poll found nothing, news
came within SPIN_WINDOW_S and no other callback is ready, the worker is
polled for up to SPIN_US (``CXL_COMM_SPIN_US``, default 250, 0: never)
once, then the fd is armed.  A wake-up through the fd (the peer's signal,
epoll, the scheduler moving this process back onto a CPU) cost more than
the wait for an answer here: a small round trip went 208 -> 67 us.  The
spin is once per arrival, so a conversation that stops sleeps within
SPIN_US.  What the spin catches is delivered in the same pass: another
pass of the loop (an epoll_wait, a system call that costs about 1 us in
this VM, and the loop's own bookkeeping) was a sixth of a small round
trip (alternating runs: 67-97 -> 57-88 us).
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import os
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import _ucp, poolframes, rxbuf
from .. import _exit


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
TICK_INFLIGHT = 0.002
WAIT_US = 1000


def _spin_us() -> int:
    v = os.environ.get("CXL_COMM_SPIN_US", "250")
    if not v.strip().isdigit():
        raise ValueError(f"CXL_COMM_SPIN_US={v!r}: not a number of microseconds")
    return int(v)


SPIN_US = _spin_us()
SPIN_WINDOW_S = 0.002
QUIET_S = 0.005
NEWS_MAX = 64
_engines: Dict[Tuple[int, int], "Engine"] = {}
logger = logging.getLogger(__name__)


class CommError(OSError):
    pass


def engine() -> "Engine":
    loop = asyncio.get_running_loop()
    key = (os.getpid(), id(loop))
    e = _engines.get(key)
    if e is None or e.loop is not loop:
        _reap()
        _exit.at_exit(_destroy_at_exit)
        e = Engine(loop)
        _engines[key] = e
    return e


# A worker freed at exit takes its pool attachment and interface blocks
# with it; one that is not stays on the pool as a dead owner's until the
# next attach recovers it (Dask's worker processes end with os._exit(),
# hence _exit.at_exit).  It runs after the loop stopped, so nothing posts
# on the workers any more.
def _destroy_at_exit() -> None:
    pid = os.getpid()
    for key, e in list(_engines.items()):
        if key[0] == pid:
            del _engines[key]
            try:
                e.destroy()
            except Exception:   # exiting: nothing to report to
                pass
    poolframes.exit()


def _reap() -> None:
    """Destroy the workers of engines whose loop is closed (asyncio.run per
    call, test loops) or that belong to another process (forked)."""
    pid = os.getpid()
    for key, e in list(_engines.items()):
        if key[0] != pid:
            del _engines[key]           # a parent's: UCX does not survive fork
        elif e.loop.is_closed():
            del _engines[key]
            e.destroy()


class Engine:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.rx = rxbuf.RxCache(rxbuf.cache_cap())  # a bad setting: before the worker
        self.lib = _ucp.lib()
        # frames through the pool (process-wide; None: off)
        self.pool = poolframes.get(self.lib)
        # comms holding an offer of their peer's (loans.py): returned idle
        self.offer_holders: "weakref.WeakSet[Any]" = weakref.WeakSet()
        w = ctypes.c_void_p()
        st = self.lib.cxl_comm_worker_create(ctypes.byref(w))
        if st != 0:
            raise CommError(f"cxl comm: {_ucp.last_error()}")
        self.w = w
        self.efd = self.lib.cxl_comm_worker_efd(w)
        # cookie -> comm, listener or connection being made (their _news())
        self.objs: "weakref.WeakValueDictionary[int, Any]" = weakref.WeakValueDictionary()
        self._next_id = 1
        self._news = (ctypes.c_size_t * NEWS_MAX)()
        # requests in flight: (request, callback(status), objects kept alive)
        self.inflight: List[Tuple[int, Callable[[int], None], Any]] = []
        self._timer: Optional[asyncio.TimerHandle] = None
        self._timer_at = 0.0
        self._scheduled = False
        self._quiet = 0.0
        self._spun = False
        self._news_at = 0.0
        self.spins = 0              # bounded spins before a sleep (tests)
        self.spin_caught = 0        # ... that delivered news at once (tests)
        self._destroyed = False
        if self.efd >= 0:
            loop.add_reader(self.efd, self._wakeup)

    # -- objects --

    def register(self, obj: Any) -> int:
        cookie = self._next_id
        self._next_id += 1
        self.objs[cookie] = obj
        return cookie

    def unregister(self, cookie: int) -> None:
        self.objs.pop(cookie, None)

    # -- progress --

    def kick(self) -> None:
        """Poll soon (after something was posted)."""
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self.progress)

    def _poll(self) -> bool:
        """Poll the worker, complete finished requests and deliver news:
        whether anything happened."""
        lib, w, news, objs = self.lib, self.w, self._news, self.objs
        found = False
        while True:
            n = lib.cxl_comm_poll(w, news, NEWS_MAX)
            # requests first: news of a failure must find the receives that
            # completed before it complete
            if self.inflight and self._complete():
                found = True
            for i in range(n):
                o = objs.get(news[i])
                if o is not None:
                    self._deliver(o)
            if n:
                found = True
            if n < NEWS_MAX:
                return found

    def progress(self) -> None:
        self._scheduled = False
        if self._destroyed:
            return
        lib, w = self.lib, self.w
        found = self._poll()
        if (not found and self.efd >= 0 and not self.inflight and SPIN_US
                and not self._spun and not getattr(self.loop, "_ready", True)
                and time.monotonic() - self._news_at < SPIN_WINDOW_S):
            # a conversation: the answer usually comes within a round trip,
            # and a wake-up through the fd costs more than the wait (see
            # the module's docstring); one bounded spin, then sleep.  What
            # the spin caught is delivered now: a second pass of the loop
            # (its epoll_wait, its callbacks) costs a tenth of a small
            # round trip.
            self._spun = True
            self.spins += 1
            if lib.cxl_comm_progress_wait(w, SPIN_US):
                found = self._poll()
                self.spin_caught += found
            if not found:
                self.kick()
                return
        if found:
            self._quiet = 0.0
            self._spun = False
            self._news_at = time.monotonic()
            self.kick()             # after the woken tasks: poll, then arm
        elif self.efd < 0:
            pass                    # no wake-up: the timers drive it
        elif self.inflight and self._quiet < QUIET_S:
            # a transfer in flight: drive it in C (the peer frees ring room
            # as it drains), handing the loop back every WAIT_US
            t0 = time.monotonic()
            if lib.cxl_comm_progress_wait(w, WAIT_US):
                self._quiet = 0.0
            else:
                self._quiet += time.monotonic() - t0
            self.kick()
            return
        elif not lib.cxl_comm_worker_arm(w):
            # events pending, or sends waiting for room that did not come
            # for QUIET_S (the peer is busy): poll again soon
            if self.inflight:
                self._set_timer(0.0005)
            else:
                self.kick()
            return
        if not self.inflight:
            self._quiet = 0.0
            now = time.monotonic()
            self.rx.trim(now)
            if self.pool is not None:
                self.pool.trim(now)
            for c in list(self.offer_holders):
                c._return_stale_offer(now)
        if self.inflight or self.efd < 0:
            self._set_timer(TICK_INFLIGHT)
        elif len(self.objs):
            self._set_timer(TICK_IDLE)

    @staticmethod
    def _deliver(o: Any) -> None:
        try:
            o._news()
        except Exception:
            # a bug in the binding must not leave the peer waiting on a
            # comm that will never move again: it fails, loudly
            logger.exception("cxl comm: %r failed", o)
            abort = getattr(o, "abort", None)
            if abort is not None:
                abort()

    def _wakeup(self) -> None:
        self._quiet = 0.0           # the fd fired: something moves
        self.progress()

    def _set_timer(self, delay: float) -> None:
        at = self.loop.time() + delay
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        self._timer = self.loop.call_at(at, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self.progress()

    def _complete(self) -> bool:
        lib, done, still = self.lib, [], []
        for item in self.inflight:
            st = lib.cxl_comm_req_status(item[0])
            if st == _ucp.INPROGRESS:
                still.append(item)
            else:
                lib.cxl_comm_req_free(item[0])
                done.append((item[1], st))
        if not done:
            return False
        self.inflight = still
        for cb, st in done:
            cb(st)
        return True

    def track(self, req: int, cb: Callable[[int], None], keep: Any) -> None:
        """Call ``cb(status)`` once request ``req`` is done; ``keep`` (the
        request's buffers) lives until then."""
        self.inflight.append((req, cb, keep))
        self._set_timer(TICK_INFLIGHT)

    def wait(self, reqs: List[int], keep: Any) -> "asyncio.Future":
        """A future done when all of ``reqs`` are (CommError if one failed)."""
        fut = self.loop.create_future()
        left = [len(reqs)]
        failed: List[int] = []

        def cb(st: int) -> None:
            if st != 0:
                failed.append(st)
            left[0] -= 1
            if left[0] == 0 and not fut.done():
                if failed:
                    fut.set_exception(CommError(
                        f"cxl comm: request failed (UCS status {failed[0]})"))
                else:
                    fut.set_result(None)

        for r in reqs:
            self.track(r, cb, keep)
        return fut

    def destroy(self) -> None:
        """Free the worker (its loop is gone: nothing can use it)."""
        if self._destroyed:
            return
        self._destroyed = True
        self.rx.clear()
        if self._timer is not None:
            self._timer.cancel()
        if self.efd >= 0 and not self.loop.is_closed():
            self.loop.remove_reader(self.efd)
        self.lib.cxl_comm_worker_destroy(self.w)
