"""The ``cxl`` comm: distributed's Comm, Connector, Listener and Backend.

Wire format of one distributed message: a head message, then (for large
messages) one UCP message per frame, all on one endpoint, in order:

    head = u32 magic, u32 flags, u64 nframes, u64 nbytes[nframes] [, frames]

With ``INLINE`` the frames follow inside the head (messages under 64 KiB:
one UCP message, one small copy); otherwise each frame is its own message,
sent from the frame's own memory and received straight into a buffer
allocated for it (rendezvous: no intermediate copy), so numpy arrays are
deserialised from that buffer directly.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import struct
from typing import Any, List, Optional

from distributed.comm.addressing import parse_host_port, unparse_host_port
from distributed.comm.core import Comm, CommClosedError, Connector, Listener
from distributed.comm.registry import Backend
from distributed.comm.utils import (ensure_concrete_host, from_frames,
                                    host_array, to_frames)
from distributed.utils import ensure_ip, get_ip, nbytes

from . import _ucp
from .loop import CommError, engine

logger = logging.getLogger(__name__)

PREFIX = "cxl://"
MAGIC = 0x4C584344          # "DCXL"
F_INLINE = 1
INLINE_MAX = 64 << 10


class CXLComm(Comm):
    def __init__(self, eng, ep: int, local_addr: str, peer_addr: str,
                 deserialize: bool = True) -> None:
        super().__init__(deserialize=deserialize)
        self._eng = eng
        self._ep: Optional[int] = ep
        self._local_addr = local_addr
        self._peer_addr = peer_addr
        self._closed = False
        self._waiter: Optional[asyncio.Future] = None
        eng.comms.add(self)

    # -- messages --

    def _status(self) -> int:
        return self._eng.lib.cxl_comm_ep_status(self._ep) if self._ep else -1

    def _poll(self) -> None:
        """Called by the engine after progress: wake the reader."""
        w = self._waiter
        if w is None or w.done():
            return
        n = ctypes.c_size_t()
        if self._ep and self._eng.lib.cxl_comm_recv_peek(self._ep, ctypes.byref(n)):
            w.set_result(n.value)
        elif self._closed or self._status():
            w.set_exception(CommClosedError(
                f"{self._peer_addr}: connection closed ({self._why()})"))

    def _why(self) -> str:
        st = self._status()
        return "closed locally" if self._closed else f"UCS status {st}"

    async def _next_len(self) -> int:
        if self._closed or self._ep is None:
            raise CommClosedError(f"{self._peer_addr}: comm closed")
        n = ctypes.c_size_t()
        if self._eng.lib.cxl_comm_recv_peek(self._ep, ctypes.byref(n)):
            return n.value      # already here: no trip through the loop
        self._waiter = self._eng.loop.create_future()
        self._poll()
        self._eng.kick()
        try:
            return await self._waiter
        finally:
            self._waiter = None

    async def _recv_into(self, buf) -> None:
        req = self._eng.lib.cxl_comm_recv(self._ep, _ucp.buffer_address(buf),
                                          nbytes(buf))
        if self._eng.done_now(req):
            return
        try:
            await self._eng.track(req, buf)
        except CommError as e:
            self.abort()
            raise CommClosedError(f"{self._peer_addr}: {e}") from e

    async def read(self, deserializers=None):
        n = await self._next_len()
        head = host_array(n)
        await self._recv_into(head)
        mv = memoryview(head).cast("B")
        if n < 16:
            self.abort()
            raise CommClosedError(f"{self._peer_addr}: short head ({n} bytes)")
        magic, flags, nframes = struct.unpack_from("<IIQ", mv, 0)
        if magic != MAGIC or 16 + 8 * nframes > n:
            self.abort()
            raise CommClosedError(f"{self._peer_addr}: garbled message head")
        sizes = struct.unpack_from(f"<{nframes}Q", mv, 16)
        frames: List[Any] = []
        if flags & F_INLINE:
            off = 16 + 8 * nframes
            for s in sizes:
                frames.append(mv[off:off + s])
                off += s
        else:
            for s in sizes:
                got = await self._next_len()
                if got != s:
                    self.abort()
                    raise CommClosedError(f"{self._peer_addr}: frame of {got} "
                                          f"bytes, expected {s}")
                buf = host_array(s)
                if s:
                    await self._recv_into(buf)
                else:
                    await self._recv_into(bytearray(0))
                frames.append(buf)
        try:
            return await from_frames(frames, deserialize=self.deserialize,
                                     deserializers=deserializers,
                                     allow_offload=self.allow_offload)
        except EOFError:
            self.abort()
            raise CommClosedError(f"{self._peer_addr}: truncated message")

    async def write(self, msg, serializers=None, on_error="message"):
        if self._closed or self._ep is None or self._status():
            raise CommClosedError(f"{self._peer_addr}: comm closed ({self._why()})")
        frames = await to_frames(
            msg, allow_offload=self.allow_offload, serializers=serializers,
            on_error=on_error,
            context={"sender": self.local_info, "recipient": self.remote_info,
                     **self.handshake_options})
        frames = [f if memoryview(f).contiguous else bytes(f) for f in frames]
        sizes = [nbytes(f) for f in frames]
        total = sum(sizes)
        head = struct.pack(f"<IIQ{len(sizes)}Q", MAGIC,
                           F_INLINE if total < INLINE_MAX else 0,
                           len(sizes), *sizes)
        if total < INLINE_MAX:
            msgs = [head + b"".join(bytes(memoryview(f).cast("B")) for f in frames)]
        else:
            msgs = [head, *frames]
        lib, futs = self._eng.lib, []
        for m in msgs:
            req = lib.cxl_comm_send(self._ep, _ucp.buffer_address(m), nbytes(m))
            if not self._eng.done_now(req):
                futs.append(self._eng.track(req, m))
        try:
            if futs:
                await asyncio.gather(*futs)
        except CommError as e:
            self.abort()
            raise CommClosedError(f"{self._peer_addr}: {e}") from e
        return total + len(head)

    # -- lifetime --

    async def close(self):
        self._close(force=False)

    def abort(self) -> None:
        self._close(force=True)

    def _close(self, force: bool) -> None:
        ep, self._ep = self._ep, None
        self._closed = True
        if ep:
            self._eng.lib.cxl_comm_ep_close(ep, int(force))
            self._eng.kick()
        self._poll_closed()

    def _poll_closed(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_exception(CommClosedError(f"{self._peer_addr}: comm closed"))

    def closed(self) -> bool:
        return self._closed

    @property
    def local_address(self) -> str:
        return self._local_addr

    @property
    def peer_address(self) -> str:
        return self._peer_addr


class CXLConnector(Connector):
    prefix = PREFIX
    async def connect(self, address: str, deserialize: bool = True,
                      **connection_args) -> CXLComm:
        host, port = parse_host_port(address)
        eng = engine()
        ep = ctypes.c_void_p()
        st = eng.lib.cxl_comm_connect(eng.w, host.encode(), port, ctypes.byref(ep))
        if st != 0:
            raise CommClosedError(f"{PREFIX}{address}: {_ucp.last_error()}")
        eng.kick()
        local = PREFIX + unparse_host_port(get_ip(host), 0)
        return CXLComm(eng, ep.value, local, PREFIX + address, deserialize)


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
        eng.listeners.add(self)

    def _accept(self) -> None:
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
