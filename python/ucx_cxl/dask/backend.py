"""The ``cxl`` comm: distributed's Comm, Connector, Listener and Backend.

Wire format of one distributed message: a head message, then (for large
messages) one UCP message per frame, all on one endpoint, in order:

    head = u32 magic, u32 flags, u64 nframes, u64 nbytes[nframes] [, frames]

With ``INLINE`` the frames follow inside the head (messages under 64 KiB:
one UCP message, one small copy); otherwise each frame is its own message,
sent from the frame's own memory and received straight into a buffer
allocated for it (rendezvous: no intermediate copy), so numpy arrays are
deserialised from that buffer directly.

Messages of poolframes.MIN_BYTES and more, between processes of one
pool, are copied once into pool memory the receiver lends (``POOL`` or
``OFFERED`` heads and control messages: loans.py).

Connections: the connector waits until UCP has wired the endpoint up (a
connection nobody accepts fails with an OSError, and distributed retries
until its timeout); a listener hands out only wired-up endpoints.  Every
message is received as soon as it arrives, so writes complete without the
peer reading (as with tcp's socket buffers).
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import functools
import logging
import re
import struct
import weakref
from typing import Any, Deque, Dict, List, Optional

import numpy as np

from distributed.comm.addressing import parse_host_port, unparse_host_port
from distributed.comm.core import Comm, CommClosedError, Connector, Listener
from distributed.comm.registry import Backend
from distributed.comm.utils import ensure_concrete_host, from_frames, to_frames
from distributed.utils import ensure_ip, get_ip, nbytes

from . import _ucp, poolframes, rxbuf
from .loans import F_OFFERED, F_POOL, MAGIC, LoanProtocol
from .loop import CommError, engine

logger = logging.getLogger(__name__)

PREFIX = "cxl://"
F_INLINE = 1
INLINE_MAX = 64 << 10


def _parse_head(head) -> Optional[tuple]:
    """(flags, frame sizes) of a message head, or None when it is not one."""
    if len(head) < 16:
        return None
    magic, flags, nframes = struct.unpack_from("<IIQ", head, 0)
    if magic != MAGIC or 16 + 8 * nframes > len(head):
        return None
    return flags, struct.unpack_from(f"<{nframes}Q", head, 16)


class CXLComm(LoanProtocol, Comm):
    """One UCP endpoint.  Every message that arrives is received at once
    (into a new buffer of its length: straight into it for a rendezvous),
    so a write completes without waiting for the peer's read, as on tcp;
    ``read`` takes the next complete message from that queue."""

    def __init__(self, eng, ep: int, local_addr: str, peer_addr: str,
                 deserialize: bool = True) -> None:
        super().__init__(deserialize=deserialize)
        self._eng = eng
        self._ep: Optional[int] = ep
        self._local_addr = local_addr
        self._peer_addr = peer_addr
        self._closed = False
        self._failed: Optional[str] = None
        self._waiter: Optional[asyncio.Future] = None
        # arrived messages in order: [buffer, done]
        self._rx: Deque[list] = collections.deque()
        self._n = ctypes.c_size_t()
        self._req = ctypes.c_void_p()
        self._gone = 0          # the endpoint's status once nothing can come
        # the frames of the message being received: [memoryview of its
        # buffer, its address, offsets, sizes, index of the next frame]
        self._plan: Optional[list] = None
        self._loans_init(eng.pool)
        self._cookie = eng.register(self)
        eng.lib.cxl_comm_ep_set_user(ep, self._cookie)
        self._finalizer = weakref.finalize(self, _drop_ep, eng, ep, self._cookie)
        self._news()            # what came before it was accepted

    # -- arrivals (called by the engine) --

    def _news(self) -> None:
        if self._ep is not None:
            self._pump()
        if self._ep is None or self._failed or self._gone:
            self._loans_gone()
        w = self._waiter
        if w is None or w.done():
            return
        try:
            frames = self._take()
        except CommClosedError as e:
            w.set_exception(e)
            return
        if frames is not None:
            w.set_result(frames)
        elif self._ep is None or self._failed or (
                self._gone and all(e[1] for e in self._rx)):
            # (receives still in flight complete first, well or not)
            w.set_exception(CommClosedError(
                f"{self._peer_addr}: connection closed ({self._why()})"))

    def _pump(self) -> None:
        """Receive every message that has arrived (and learn, from the last
        peek, whether more can come).  The frames of a message whose head
        arrived go into one buffer laid out by its head (rxbuf.plan)."""
        lib, ep, n, req = self._eng.lib, self._ep, self._n, self._req
        while True:
            st = lib.cxl_comm_recv_peek(ep, ctypes.byref(n))
            if st <= 0:
                self._gone = st     # < 0: failed or closed by the peer
                return
            size = n.value
            if st == _ucp.CONTROL:
                if not self._control(size):
                    return
                continue
            plan = self._plan
            head = False
            if plan is not None:
                mv, base, offs, sizes, i = plan
                if size != sizes[i]:
                    self._fail(f"frame of {size} bytes, expected {sizes[i]}")
                    return
                buf: Any = mv[offs[i]:offs[i] + size]
                addr = base + offs[i] if size else None
                if i + 1 == len(sizes):
                    self._plan = None
                else:
                    plan[4] = i + 1
            elif size < INLINE_MAX:
                buf = bytearray(size)
                addr = _ucp.bytearray_address(buf) if size else None
                head = True
            else:
                buf = self._eng.rx.get(size)[:size]
                addr = buf.ctypes.data
            st = lib.cxl_comm_recv_nb(ep, addr, size, ctypes.byref(req))
            if st == 0:
                entry = [buf, True, None]
                self._rx.append(entry)
                if head and not self._head_done(entry):
                    return
            elif st == _ucp.INPROGRESS:
                entry = [buf, False, None]
                self._rx.append(entry)
                self._eng.track(req.value, functools.partial(
                    self._recv_done, entry, head), buf)
            else:
                self._fail(f"receive failed: {_ucp.last_error()}")
                return

    def _head_done(self, entry: list) -> bool:
        """After a complete head of a message with separate frames: one
        buffer for all of them, or a loan of the pool (loans.py).  False
        (and the comm failed) when the head cannot be right."""
        head = entry[0]
        parsed = _parse_head(head)
        if parsed is None or parsed[0] & F_INLINE or not parsed[1]:
            return True             # (_take reports a bad head)
        flags, sizes = parsed
        laid = rxbuf.plan(sizes)
        if laid is None:
            self._fail("garbled message head (frames too large)")
            return False
        offs, total = laid
        if flags & (F_POOL | F_OFFERED):
            done = self._loan_head(entry, flags, sizes, offs, total)
            if done is not None:
                return done
        raw = self._eng.rx.get(total)
        self._plan = [memoryview(raw)[:total], raw.ctypes.data, offs, sizes, 0]
        return True

    def _recv_done(self, entry: list, head: bool, st: int) -> None:
        if st != 0:
            self._fail(f"receive failed (UCS status {st})")
        else:
            entry[1] = True
            # (a head that was still in flight: frames pumped meanwhile got
            # buffers of their own; a loan's frames wait for its GRANT)
            parsed = _parse_head(entry[0]) if head else None
            if parsed is not None and parsed[0] & (F_POOL | F_OFFERED):
                self._head_done(entry)
        self._news()

    def _send_frames(self, msgs: list) -> Optional[List[int]]:
        """Send each of msgs (bytes or buffers) as a message; the requests
        in flight, or None when one failed (the comm with it)."""
        lib, ep, req = self._eng.lib, self._ep, self._req
        pending: List[int] = []
        for m in msgs:
            if isinstance(m, bytes):
                st = lib.cxl_comm_send_nb(ep, m, len(m), ctypes.byref(req))
            else:
                st = lib.cxl_comm_send_nb(ep, _ucp.buffer_address(m),
                                          nbytes(m), ctypes.byref(req))
            if st == _ucp.INPROGRESS:
                pending.append(req.value)
            elif st != 0:
                if pending:     # their buffers must outlive them
                    self._eng.wait(pending, msgs)
                self._fail(_ucp.last_error())
                return None
        return pending

    def _fail(self, why: str) -> None:
        self._failed = why
        self.abort()

    def _take(self) -> Optional[List[Any]]:
        """The frames of the next complete message, or None."""
        rx = self._rx
        if not rx or not rx[0][1]:
            return None
        head = rx[0][0]
        n = len(head)
        if n < 16:
            self._garbled(f"short head ({n} bytes)")
        parsed = _parse_head(head)
        if parsed is None:
            self._garbled("garbled message head")
        flags, sizes = parsed
        nframes = len(sizes)
        lent = rx[0][2]
        if lent is not None:
            rx.popleft()
            view, offs = lent
            return [view[o:o + s] for o, s in zip(offs, sizes)]
        if flags & F_INLINE:
            rx.popleft()
            mv = memoryview(head)
            off = 16 + 8 * nframes
            frames = []
            for s in sizes:
                frames.append(mv[off:off + s])
                off += s
            if off != n:
                self._garbled("inline frames do not fill the message")
            return frames
        if len(rx) <= nframes:
            return None
        for i in range(1, nframes + 1):
            if not rx[i][1]:
                return None
        rx.popleft()
        frames = []
        for s in sizes:
            buf = rx.popleft()[0]
            if len(buf) != s:
                self._garbled(f"frame of {len(buf)} bytes, expected {s}")
            frames.append(buf.data if isinstance(buf, np.ndarray) else buf)
        return frames

    def _garbled(self, why: str):
        self._fail(why)
        raise CommClosedError(f"{self._peer_addr}: {why}")

    def _status(self) -> int:
        return self._eng.lib.cxl_comm_ep_status(self._ep) if self._ep else -1

    def _why(self) -> str:
        if self._failed:
            return self._failed
        if self._closed:
            return "closed locally"
        st = self._status()
        if st in (-25, -24, -6):
            return "closed by the peer"
        return f"UCS status {st}"

    # -- messages --

    async def read(self, deserializers=None):
        frames = self._take()
        if frames is None:
            if self._ep is None or self._failed or (
                    self._gone and all(e[1] for e in self._rx)):
                raise CommClosedError(f"{self._peer_addr}: connection closed "
                                      f"({self._why()})")
            self._waiter = w = self._eng.loop.create_future()
            try:
                frames = await w
            finally:
                self._waiter = None
        try:
            return await from_frames(frames, deserialize=self.deserialize,
                                     deserializers=deserializers,
                                     allow_offload=self.allow_offload)
        except EOFError:
            self.abort()
            raise CommClosedError(f"{self._peer_addr}: truncated message")

    async def write(self, msg, serializers=None, on_error="message"):
        if self._ep is None or self._failed or self._gone:
            raise CommClosedError(f"{self._peer_addr}: comm closed ({self._why()})")
        frames = await to_frames(
            msg, allow_offload=self.allow_offload, serializers=serializers,
            on_error=on_error,
            context={"sender": self.local_info, "recipient": self.remote_info,
                     **self.handshake_options})
        while self._wturn is not None:      # a pooled write in flight
            await asyncio.shield(self._wturn)
        if self._ep is None:    # closed while serialising (offload)
            raise CommClosedError(f"{self._peer_addr}: comm closed ({self._why()})")
        sizes = [nbytes(f) for f in frames]
        total = sum(sizes)
        nf = len(sizes)
        lib, ep, req = self._eng.lib, self._ep, self._req
        pf = self._loans
        if (pf is not None and total >= poolframes.MIN_BYTES
                and not self._pool_refused):
            msgs = [f if _contiguous(f) else bytes(f) for f in frames]
            if self._try_offer(pf, msgs, sizes):
                return total
            return await self._write_granted(pf, msgs, sizes)
        if total < INLINE_MAX:
            parts = [struct.pack(f"<IIQ{nf}Q", MAGIC, F_INLINE, nf, *sizes)]
            parts += [f if _contiguous(f) else bytes(f) for f in frames]
            data = b"".join(parts)
            st = lib.cxl_comm_send_nb(ep, data, len(data), ctypes.byref(req))
            if st == 0:
                return len(data)
            if st != _ucp.INPROGRESS:
                self._write_failed()
            pending = [req.value]
            keep: Any = data
        else:
            head = struct.pack(f"<IIQ{nf}Q", MAGIC, 0, nf, *sizes)
            msgs = [head] + [f if _contiguous(f) else bytes(f) for f in frames]
            got = self._send_frames(msgs)
            if got is None:
                raise CommClosedError(f"{self._peer_addr}: {self._why()}")
            if not got:
                return total + len(head)
            pending, keep = got, msgs
        await self._wait_sent(pending, keep)
        return total

    async def _wait_sent(self, pending: List[int], keep: Any) -> None:
        try:
            await self._eng.wait(pending, keep)
        except CommError as e:
            self.abort()
            raise CommClosedError(f"{self._peer_addr}: {e}") from e

    def _write_failed(self):
        why = _ucp.last_error()
        self.abort()
        raise CommClosedError(f"{self._peer_addr}: {why}")

    # -- diagnostics --

    def transport_info(self) -> str:
        """UCP's description of this comm's endpoint (ucp_ep_print_info)."""
        if self._ep is None:
            return ""
        buf = ctypes.create_string_buffer(1 << 14)
        self._eng.lib.cxl_comm_ep_info(self._ep, buf, len(buf))
        return buf.value.decode(errors="replace")

    def lanes(self) -> Dict[str, List[str]]:
        """The transports of this comm's UCP lanes by use: {"am": ["cxl/DEV"],
        "am_bw": [...], "keepalive": [...], ...} (from transport_info)."""
        return parse_lanes(self.transport_info())

    # -- lifetime --

    async def close(self):
        self._close(force=False)

    def abort(self) -> None:
        self._close(force=True)

    def _close(self, force: bool) -> None:
        if not force and self._ep is not None and not self._failed:
            self._return_offer()    # (before CLOSE: the peer frees it at once)
        ep, self._ep = self._ep, None
        self._closed = True
        if ep is not None:
            self._finalizer.detach()
            self._eng.unregister(self._cookie)
            if not self._eng._destroyed:
                self._eng.lib.cxl_comm_ep_close(ep, int(force))
                self._eng.kick()
        self._rx.clear()
        self._plan = None
        self._loans_end()
        w = self._waiter
        if w is not None and not w.done():
            w.set_exception(CommClosedError(
                f"{self._peer_addr}: comm closed ({self._why()})"))

    def closed(self) -> bool:
        return self._closed

    @property
    def local_address(self) -> str:
        return self._local_addr

    @property
    def peer_address(self) -> str:
        return self._peer_addr


_LANE = re.compile(r"lane\[\d+\]:\s+\d+:(\S+)\s.*?->\s+\S+\s+(.*)$")


def parse_lanes(text: str) -> Dict[str, List[str]]:
    """{use: [transport/device, ...]} from ucp_ep_print_info's lane lines,
    e.g. "lane[1]:  2:cxl/pool.0 md[1] -> md[1]/cxl/sysdev[255] am am_bw#0"."""
    uses: Dict[str, List[str]] = {}
    for line in text.splitlines():
        m = _LANE.search(line)
        if not m:
            continue
        tl = m.group(1).rsplit(".", 1)[0]
        for use in m.group(2).split():
            uses.setdefault(use.split("#")[0], []).append(tl)
    return uses


def comm_lanes() -> Dict[str, Dict[str, List[str]]]:
    """{peer address: lanes} of the open cxl comms of the event loop this
    runs on (e.g. ``client.run(comm_lanes)``; a UCP worker belongs to its
    loop's thread, so other loops' comms are left out)."""
    from .loop import _engines
    import os
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return {}
    e = _engines.get((os.getpid(), id(loop)))
    if e is None:
        return {}
    return {o.peer_address: o.lanes() for o in list(e.objs.values())
            if isinstance(o, CXLComm) and not o.closed()}


def _contiguous(f) -> bool:
    return isinstance(f, (bytes, bytearray)) or memoryview(f).contiguous


def _drop_ep(eng, ep: int, cookie: int) -> None:
    """A comm collected without close: its endpoint goes (no flush)."""
    eng.unregister(cookie)
    if not eng._destroyed:
        eng.lib.cxl_comm_ep_close(ep, 1)


class _Connecting:
    """A connection being made: done when UCP wired it up or failed it."""

    def __init__(self, eng, ep: int) -> None:
        self.eng, self.ep = eng, ep
        self.fut = eng.loop.create_future()
        self.cookie = eng.register(self)
        eng.lib.cxl_comm_ep_set_user(ep, self.cookie)
        self._news()

    def _news(self) -> None:
        st = self.eng.lib.cxl_comm_ep_status(self.ep)
        if st != _ucp.INPROGRESS and not self.fut.done():
            self.fut.set_result(st)


class CXLConnector(Connector):
    prefix = PREFIX

    async def connect(self, address: str, deserialize: bool = True,
                      **connection_args) -> CXLComm:
        host, port = parse_host_port(address)
        eng = engine()
        lib = eng.lib
        ep = ctypes.c_void_p()
        st = lib.cxl_comm_connect(eng.w, host.encode(), port, ctypes.byref(ep))
        if st != 0:
            raise CommClosedError(f"{PREFIX}{address}: {_ucp.last_error()}")
        ep = ep.value
        c = _Connecting(eng, ep)
        eng.kick()
        try:
            st = await c.fut
        except BaseException:       # cancelled (distributed's timeout)
            eng.unregister(c.cookie)
            lib.cxl_comm_ep_close(ep, 1)
            eng.kick()
            raise
        eng.unregister(c.cookie)
        if st != 0:
            lib.cxl_comm_ep_close(ep, 1)
            eng.kick()
            raise CommClosedError(f"{PREFIX}{address}: connection failed "
                                  f"(UCS status {st}: {_STATUS.get(st, '?')})")
        local = lib.cxl_comm_ep_local(ep).decode()
        if not local:
            local = unparse_host_port(get_ip(host), 0)
        return CXLComm(eng, ep, PREFIX + local, PREFIX + address, deserialize)


_STATUS = {-6: "unreachable", -24: "not connected", -25: "connection reset",
           -23: "rejected", -20: "timed out"}


class CXLListener(Listener):
    prefix = PREFIX             # the worker builds its address from it

    def __init__(self, address: str, comm_handler, deserialize: bool = True,
                 allow_offload: bool = True, default_host: Optional[str] = None,
                 default_port: int = 0, **connection_args) -> None:
        self.ip, self.port = parse_host_port(address, default_port)
        self.comm_handler = comm_handler
        self.deserialize = deserialize
        self.allow_offload = allow_offload
        self.default_host = default_host
        self._l: Optional[int] = None
        self._eng = None
        self._cookie = 0
        self._tasks: set = set()

    async def start(self) -> None:
        eng = engine()
        lst = ctypes.c_void_p()
        st = eng.lib.cxl_comm_listen(eng.w, (self.ip or "0.0.0.0").encode(),
                                     self.port or 0, ctypes.byref(lst))
        if st != 0:
            raise OSError(f"cxl listener on {self.ip}:{self.port}: "
                          f"{_ucp.last_error()}")
        self._eng, self._l = eng, lst.value
        self.port = eng.lib.cxl_comm_listener_port(self._l)
        self._cookie = eng.register(self)
        eng.lib.cxl_comm_listener_set_user(self._l, self._cookie)
        eng.kick()              # its tick takes connection requests

    def _news(self) -> None:
        while self._l:
            ep = self._eng.lib.cxl_comm_accept(self._l)
            if not ep:
                return
            peer = self._eng.lib.cxl_comm_ep_peer(ep).decode() or "?"
            comm = CXLComm(self._eng, ep, self.contact_address, PREFIX + peer,
                           self.deserialize)
            comm.allow_offload = self.allow_offload
            t = asyncio.ensure_future(self._serve(comm))
            self._tasks.add(t)
            t.add_done_callback(self._tasks.discard)

    async def _serve(self, comm: CXLComm) -> None:
        try:
            await self.on_connection(comm)
        except CommClosedError:
            logger.info("cxl: connection from %s closed before the handshake",
                        comm.peer_address)
            return
        await self.comm_handler(comm)

    def stop(self) -> None:
        lst, self._l = self._l, None
        if lst:
            self._eng.unregister(self._cookie)
            if not self._eng._destroyed:
                self._eng.lib.cxl_comm_listener_close(lst)

    def get_host_port(self):
        return self.ip or "0.0.0.0", self.port

    @property
    def listen_address(self) -> str:
        return PREFIX + unparse_host_port(*self.get_host_port())

    @property
    def contact_address(self) -> str:
        host, port = self.get_host_port()
        host = ensure_concrete_host(host, default_host=self.default_host)
        return PREFIX + unparse_host_port(host, port)


class CXLBackend(Backend):
    def get_connector(self):
        return CXLConnector()

    def get_listener(self, loc, handle_comm, deserialize, **connection_args):
        return CXLListener(loc, handle_comm, deserialize, **connection_args)

    def get_address_host(self, loc):
        return parse_host_port(loc)[0]

    def get_address_host_port(self, loc):
        return parse_host_port(loc)

    def resolve_address(self, loc):
        host, port = parse_host_port(loc)
        return unparse_host_port(ensure_ip(host), port)

    def get_local_address_for(self, loc):
        host, port = parse_host_port(loc)
        return unparse_host_port(get_ip(ensure_ip(host)), None)
