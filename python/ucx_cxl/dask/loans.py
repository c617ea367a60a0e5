"""The loan protocol of a comm: large messages copied once, into pool
memory the receiver lends (doc/design/comm-pool-frames.md).

Two ways to a loan, both ending with the frames as views of the pool on
the receiver (poolframes.py):

* GRANT: the sender's head carries ``POOL`` and its pool's uuid and no
  frames; the receiver lends (or refuses) in a control message; the sender
  copies and sends DONE.  A refusal (another pool, loans off, no room)
  makes the sender send the frames as messages at once, from the grant's
  handler, so nothing else comes between the head and its frames; the
  comm's writes wait while such a write is in flight (``_wturn``).
* OFFER: once a loaned message is complete the receiver lends the next one
  ahead (an extent of the same size, while its loans stay under half the
  cap), so a stream of similar messages skips the GRANT round trip: the
  sender copies into the offer and sends a head with ``OFFERED`` and the
  offer's offset, and that head completes the message.  An offer too small
  for a message, or unused for IDLE_S, goes back (RETURN); only the sender
  decides an offer's fate, so no message races a revocation.

A loan the receiver's comm ends with (granted and not DONE, offered and
not used) while the peer is still there may be written by it yet: it is
quarantined (poolframes.QUARANTINE_S), never lent again before it is
freed.  Once the peer's end arrived it comes back at once.
"""

from __future__ import annotations

import asyncio
import collections
import ctypes
import struct
import time
from typing import Deque, Dict, List, Optional, Tuple

from distributed.comm.core import CommClosedError

from . import _ucp, poolframes, rxbuf

MAGIC = 0x4C584344          # "DCXL", the head of every message
F_POOL = 2                  # asks for a GRANT; the pool's uuid follows the sizes
F_OFFERED = 4               # in an offer; its offset follows the sizes
GRANT_MAGIC = 0x4E415247    # "GRAN"
OFFER_MAGIC = 0x5246464F    # "OFFR"
DONE_MAGIC = 0x454E4F44     # "DONE"
RETURN_MAGIC = 0x4E525452   # "RTRN"
LOAN = struct.Struct("<IIQQII")     # magic, answer, offset, length, index, gen
DONE = struct.Struct("<II")         # magic, 0
RETURN = struct.Struct("<IIQ")      # magic, 0, offset
G_OK, G_OTHER_POOL, G_OFF, G_NO_ROOM = 0, 1, 2, 3


def _ignore(st: int) -> None:
    pass


class LoanProtocol:
    """Mixed into CXLComm: its loan state and messages."""

    def _loans_init(self, pool: Optional[poolframes.PoolFrames]) -> None:
        self._loans = pool      # None: loans off in this process
        # receiver: lent, waiting for DONE: (rx entry, view, loan, offsets)
        self._lent: Deque[tuple] = collections.deque()
        # receiver: offers made, not used or returned: offset -> (loan, view)
        self._offered: Dict[int, Tuple[poolframes.Loan, memoryview]] = {}
        # sender: our write waiting for its GRANT: [future, frame messages]
        self._granting: Optional[list] = None
        self._wturn: Optional[asyncio.Future] = None  # a GRANT write in flight
        self._pool_refused = False      # the peer has another pool or none
        self._offer: Optional[Tuple[poolframes.Loan, float]] = None
        self.grants = 0                 # loans by GRANT / OFFER (tests)
        self.offers_used = 0

    # -- receiver --

    def _loan_head(self, entry: list, flags: int, sizes, offs: List[int],
                   total: int) -> Optional[bool]:
        """A head asking for a loan or in an offer: True when handled (the
        message's frames come as a loan), False when the comm failed, None
        when its frames follow as messages (the caller plans for them)."""
        head = entry[0]
        at = 16 + 8 * len(sizes)
        pf = self._loans
        if flags & F_OFFERED:
            (offset,) = struct.unpack_from("<Q", head, at) if len(head) >= at + 8 else (-1,)
            got = self._offered.pop(offset, None)
            if got is None or pf is None:
                self._fail("a message in an offer never made")
                return False
            loan, view = got
            if total > loan.length:
                self._fail(f"a message of {total} bytes in an offer of {loan.length}")
                return False
            pf.acquire(loan)
            entry[2] = (view[:total], offs)
            self._offer_next(total)
            return True
        uuid = bytes(head[at:at + poolframes.UUID_LEN])
        lent = None
        if pf is None:
            answer = G_OFF
        elif uuid != pf.uuid:
            answer = G_OTHER_POOL
        else:
            lent = pf.lend(total)
            answer = G_OK if lent is not None else G_NO_ROOM
        if lent is None:
            if not self._send_control(LOAN.pack(GRANT_MAGIC, answer, 0, 0, 0, 0)):
                return False
            return None
        loan, view = lent
        entry[1] = False        # complete at DONE
        self._lent.append((entry, view, loan, offs))
        return self._send_control(LOAN.pack(GRANT_MAGIC, G_OK, loan.offset,
                                            loan.length, loan.index, loan.gen))

    def _offer_next(self, total: int) -> None:
        """After a loaned message: lend the next one ahead."""
        pf = self._loans
        if (pf is None or self._offered or self._ep is None
                or pf.book.lent_bytes + total > pf.cap // 2):
            return
        lent = pf.lend(total, count_refusal=False)
        if lent is None:
            return
        loan, view = lent
        if self._send_control(LOAN.pack(OFFER_MAGIC, G_OK, loan.offset,
                                        loan.length, loan.index, loan.gen),
                              optional=True):
            self._offered[loan.offset] = (loan, view)
        # (not sent: its view dies here, the extent goes idle)

    def _loan_done(self) -> bool:
        if not self._lent:
            self._fail("DONE for no loan")
            return False
        entry, view, loan, offs = self._lent.popleft()
        self._loans.acquire(loan)
        entry[2] = (view, offs)
        entry[1] = True
        self._offer_next(loan.length)
        return True

    def _loan_returned(self, offset: int) -> bool:
        if self._offered.pop(offset, None) is None:
            self._fail("RETURN of an offer never made")
            return False
        return True             # (its view dies: the extent goes idle)

    # -- control messages --

    def _send_control(self, data: bytes, optional: bool = False) -> bool:
        """Send a control message; a failure fails the comm unless the
        message is optional (an offer, a return: the peer may be closing,
        and the messages that arrived before stay readable)."""
        req = self._req
        st = self._eng.lib.cxl_comm_send_control_nb(self._ep, data, len(data),
                                                    ctypes.byref(req))
        if st == _ucp.INPROGRESS:
            self._eng.track(req.value, _ignore if optional else self._control_sent,
                            data)
        elif st != 0:
            if not optional:
                self._fail(f"control message: {_ucp.last_error()}")
            return False
        return True

    def _control_sent(self, st: int) -> None:
        if st != 0:
            self._fail(f"control message failed (UCS status {st})")

    def _control(self, size: int) -> bool:
        """Receive and act on the control message that is next."""
        req = self._req
        buf = bytearray(size)
        addr = _ucp.bytearray_address(buf) if size else None
        st = self._eng.lib.cxl_comm_recv_nb(self._ep, addr, size, ctypes.byref(req))
        if st != 0:
            # (eager, a few bytes: anything else is not ours)
            if st == _ucp.INPROGRESS:
                self._eng.track(req.value, _ignore, buf)
            self._fail(f"control message of {size} bytes not received at once")
            return False
        magic = struct.unpack_from("<I", buf)[0] if size >= 4 else 0
        if size == LOAN.size and magic == GRANT_MAGIC:
            return self._granted(LOAN.unpack(buf))
        if size == LOAN.size and magic == OFFER_MAGIC:
            _, _, offset, length, index, gen = LOAN.unpack(buf)
            if self._offer is not None:     # (one at a time: a broken peer)
                self._fail("an offer over an offer")
                return False
            self._offer = (poolframes.Loan(offset, length, index, gen),
                           time.monotonic())
            self._eng.offer_holders.add(self)
            return True
        if size == DONE.size and magic == DONE_MAGIC:
            return self._loan_done()
        if size == RETURN.size and magic == RETURN_MAGIC:
            return self._loan_returned(RETURN.unpack(buf)[2])
        self._fail(f"unknown control message ({size} bytes)")
        return False

    # -- sender --

    def _granted(self, grant: tuple) -> bool:
        g, self._granting = self._granting, None
        if g is None or g[0].done():
            self._fail("GRANT for no message")
            return False
        _, answer, offset, length, index, gen = grant
        fut, msgs = g
        if answer == G_OK:
            fut.set_result(poolframes.Loan(offset, length, index, gen))
            return True
        if answer in (G_OTHER_POOL, G_OFF):
            self._pool_refused = True
        # the frames follow the head now, before anything else is sent
        pending = self._send_frames(msgs)
        if pending is None:
            fut.set_exception(CommClosedError(f"{self._peer_addr}: {self._why()}"))
            return False
        fut.set_result(pending)
        return True

    def _return_offer(self) -> None:
        offer, self._offer = self._offer, None
        self._eng.offer_holders.discard(self)
        if offer is not None and self._ep is not None:
            self._send_control(RETURN.pack(RETURN_MAGIC, 0, offer[0].offset),
                               optional=True)

    def _return_stale_offer(self, now: float) -> None:
        """(the engine, once a second while idle)"""
        if self._offer is not None and now - self._offer[1] > poolframes.IDLE_S:
            self._return_offer()

    def _copy_into(self, pf, loan, msgs: list, sizes: List[int]) -> None:
        offs, _ = rxbuf.plan(sizes)
        for m, o, s in zip(msgs, offs, sizes):
            if s and not pf.write(loan, o, _ucp.buffer_address(m), s):
                self._fail(f"pool loan: {_ucp.last_error()}")
                raise CommClosedError(f"{self._peer_addr}: {self._why()}")
        pf.publish()

    def _try_offer(self, pf, msgs: list, sizes: List[int]) -> bool:
        """Send the message in the peer's offer when it fits (True)."""
        offer = self._offer
        if offer is None:
            return False
        _, total = rxbuf.plan(sizes)
        if total > offer[0].length:
            self._return_offer()
            return False
        self._offer = None
        self._eng.offer_holders.discard(self)
        loan = offer[0]
        self._copy_into(pf, loan, msgs, sizes)
        nf = len(sizes)
        head = struct.pack(f"<IIQ{nf}QQ", MAGIC, F_OFFERED, nf, *sizes, loan.offset)
        got = self._send_frames([head])
        if got is None:
            raise CommClosedError(f"{self._peer_addr}: {self._why()}")
        if got:                 # (its failure fails the comm)
            self._eng.track(got[0], self._control_sent, head)
        self.offers_used += 1
        return True

    async def _write_granted(self, pf, msgs: list, sizes: List[int]) -> int:
        """Ask for a loan (head with the pool's uuid), then copy the frames
        into it and send DONE, or (refused) send them as messages."""
        nf = len(sizes)
        head = struct.pack(f"<IIQ{nf}Q{poolframes.UUID_LEN}s", MAGIC, F_POOL,
                           nf, *sizes, pf.uuid)
        loop = self._eng.loop
        turn = self._wturn = loop.create_future()
        fut = loop.create_future()
        try:
            self._granting = [fut, msgs]
            got = self._send_frames([head])
            if got is None:
                self._granting = None
                raise CommClosedError(f"{self._peer_addr}: {self._why()}")
            if got:
                self._eng.track(got[0], _ignore, head)
            self._eng.kick()
            grant = await fut
            if isinstance(grant, list):         # refused: frames were sent
                if grant:
                    await self._wait_sent(grant, msgs)
                return sum(sizes)
            self.grants += 1
            self._copy_into(pf, grant, msgs, sizes)
            if not self._send_control(DONE.pack(DONE_MAGIC, 0)):
                raise CommClosedError(f"{self._peer_addr}: {self._why()}")
            return sum(sizes)
        finally:
            self._wturn = None
            turn.set_result(None)

    # -- the end --

    def _loans_gone(self) -> None:
        """Nothing more can arrive: a loan still waiting for DONE never
        completes; a write waiting for GRANT fails."""
        if self._lent and self._failed is None:
            # (its DONE would have come before the end)
            self._fail("the peer went before it wrote the frames lent to it")
        g = self._granting
        if g is not None:
            self._granting = None
            if not g[0].done():
                g[0].set_exception(CommClosedError(
                    f"{self._peer_addr}: connection closed ({self._why()})"))

    def _loans_end(self) -> None:
        """At close.  The peer's copy into a loan runs inside its write,
        before anything else it sends, so once its end arrived (closed or
        failed: ``_gone``) it writes no loan of ours any more and they come
        back at once.  A comm this side ends while the peer is there may
        have a copy running into them: those are quarantined."""
        peer_done = self._gone < 0
        for _, view, loan, _ in self._lent:
            if not peer_done:
                self._loans.quarantine(loan, view)
        self._lent.clear()
        for loan, view in self._offered.values():
            if not peer_done:
                self._loans.quarantine(loan, view)
        self._offered.clear()
        self._offer = None
        self._eng.offer_holders.discard(self)
        g, self._granting = self._granting, None
        if g is not None and not g[0].done():
            g[0].set_exception(CommClosedError(
                f"{self._peer_addr}: comm closed ({self._why()})"))
