"""The broker's client, in Python.

>>> b = Broker()                       # $CXL_BROKER or the default address
>>> ds = b.open("imagenet")            # newest version
>>> buf = bytearray(ds.sample_len(0)); ds.read_into(0, buf)

One ``Broker`` is one UCP connection and must stay in the process that
made it: ``ucx_cxl.data`` connects lazily in each DataLoader worker.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import weakref
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from . import _exit, _lib, _pid

# cxl_broker_status_t
OK, ERR_INVAL, ERR_NOT_FOUND, ERR_CONNECT, ERR_DISCONNECTED, ERR_TIMEOUT, \
    ERR_NO_SPACE, ERR_IO, ERR_CORRUPT, ERR_STALE, ERR_UNSUPPORTED, ERR_UCX, \
    ERR_NO_MEMORY, ERR_EXISTS, ERR_BUSY = range(15)

FORMATS = {"auto": 0, "files": 1, "npy": 2, "tar": 3, "raw": 4}
FORMAT_NAMES = {v: k for k, v in FORMATS.items()}
POLICIES = {"pin": 0, "lru": 1, "plan": 2}


class BrokerError(RuntimeError):
    """A broker call failed; the message is the broker's (or the library's)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class BrokerConnectionError(BrokerError, ConnectionError):
    """No broker at the address, or it went away."""


class DatasetNotFound(BrokerError, LookupError):
    """No such dataset or version."""


def _raise(status: int, what: str = "") -> None:
    lib = _lib.lib()
    msg = (lib.cxl_broker_last_error() or b"").decode(errors="replace")
    if not msg:
        msg = lib.cxl_broker_strerror(status).decode()
    if what:
        msg = f"{what}: {msg}"
    if status in (ERR_CONNECT, ERR_DISCONNECTED, ERR_TIMEOUT):
        raise BrokerConnectionError(status, msg)
    if status == ERR_NOT_FOUND:
        raise DatasetNotFound(status, msg)
    raise BrokerError(status, msg)


# UCX does not survive a fork: the child has the parent's UCX state but not
# its progress thread, and a new connection there hangs.  So before a fork
# every connection of the process is closed (its datasets reopen lazily),
# unless zero-copy views still pin chunks through it: then the child is
# marked, and connecting there fails with an error instead of hanging.
_live: "weakref.WeakSet[Broker]" = weakref.WeakSet()
_fork_tainted = False


def _before_fork() -> None:
    global _fork_tainted
    for b in list(_live):
        if b._pid != _pid.pid() or not b._h:
            continue
        if b._pins:
            _fork_tainted = True
        else:
            b.close()


def _after_fork_parent() -> None:
    global _fork_tainted
    _fork_tainted = False


os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_parent)


# A process that ends without disconnecting leaves the broker to find out
# by an endpoint timeout, so every process that connects closes its
# connections at exit (_exit.at_exit: DataLoader workers end with
# os._exit()).  Workers still alive when the main process ends
# (persistent_workers) are ended with SIGTERM by multiprocessing: a
# multiprocessing child whose SIGTERM is the default closes its
# connections first, then dies of the signal.


def _on_sigterm(signum, frame) -> None:
    _close_at_exit()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _close_at_exit() -> None:
    for b in list(_live):
        if b._pid == _pid.pid() and b._h:
            try:
                b.close()
            except Exception:   # exiting: nothing to report to
                pass


def _hook_exit() -> None:
    if not _exit.at_exit(_close_at_exit):
        return
    import multiprocessing
    if (multiprocessing.parent_process() is not None and
            threading.current_thread() is threading.main_thread() and
            signal.getsignal(signal.SIGTERM) == signal.SIG_DFL):
        signal.signal(signal.SIGTERM, _on_sigterm)


class Broker:
    """A connection to ``cxl-broker serve``."""

    def __init__(self, addr: Optional[str] = None, timeout: float = 0.0,
                 local: Optional[bool] = None) -> None:
        if _fork_tainted:
            raise BrokerError(ERR_UNSUPPORTED, "ucx_cxl: this process was "
                              "forked while its parent held zero-copy views "
                              "(UCX does not survive a fork): use "
                              "multiprocessing_context='spawn', or drop the "
                              "views before the DataLoader starts")
        lib = _lib.lib()
        p = _lib._Params()
        lib.cxl_broker_params_init(ctypes.byref(p))
        self._addr_b = addr.encode() if addr else None
        p.addr = self._addr_b
        p.timeout_s = timeout
        p.local = -1 if local is None else int(bool(local))
        h = ctypes.c_void_p()
        st = lib.cxl_broker_connect(ctypes.byref(p), ctypes.byref(h))
        if st != OK:
            _raise(st)
        self._h = h
        self._pid = _pid.pid()
        self._pins = 0
        self._datasets: "weakref.WeakSet[BrokerDataset]" = weakref.WeakSet()
        self._lock = threading.Lock()
        _live.add(self)
        _hook_exit()

    @staticmethod
    def default_addr() -> str:
        buf = ctypes.create_string_buffer(64)
        return _lib.lib().cxl_broker_default_addr(buf, 64).decode()

    @property
    def is_local(self) -> bool:
        """Whether this process maps the broker's pool (zero-copy views)."""
        return bool(_lib.lib().cxl_broker_is_local(self._h))

    @property
    def closed(self) -> bool:
        return not getattr(self, "_h", None)

    def close(self) -> None:
        if getattr(self, "_h", None) and self._pid == _pid.pid():
            for ds in list(self._datasets):
                ds.close()
        h, self._h = getattr(self, "_h", None), None
        # a forked child must not tear down its parent's connection
        if h and self._pid == _pid.pid():
            _lib.lib().cxl_broker_disconnect(h)

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> "Broker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __reduce__(self):
        raise TypeError("a Broker connection cannot cross processes; "
                        "ucx_cxl.data datasets connect in each worker")

    # -- datasets --

    def open(self, name: str, version: Optional[int] = None) -> "BrokerDataset":
        return BrokerDataset(self, name, version or 0)

    def add(self, name: str, paths: Sequence[str], format: str = "auto",
            policy: str = "pin", chunk_size: int = 0, record_size: int = 0,
            pin_bytes: int = 0) -> Dict[str, int]:
        lib = _lib.lib()
        if format not in FORMATS or policy not in POLICIES:
            raise ValueError(f"format {format!r} / policy {policy!r}")
        prm = _lib._AddParams()
        lib.cxl_broker_add_params_init(ctypes.byref(prm))
        prm.format, prm.policy = FORMATS[format], POLICIES[policy]
        prm.chunk_size, prm.record_size = chunk_size, record_size
        prm.pin_bytes = pin_bytes
        enc = [os.path.abspath(p).encode() for p in paths]
        arr = (ctypes.c_char_p * len(enc))(*enc)
        info = _lib._DsInfo()
        st = lib.cxl_broker_add(self._h, name.encode(), arr, len(enc),
                                ctypes.byref(prm), ctypes.byref(info))
        if st != OK:
            _raise(st, f"add {name}")
        return {"version": info.version, "samples": info.nsamples,
                "chunks": info.nchunks, "bytes": info.bytes,
                "new": bool(info.epoch)}

    def evict(self, name: Optional[str] = None) -> int:
        n = ctypes.c_uint64()
        st = _lib.lib().cxl_broker_evict(self._h, name.encode() if name else None,
                                         ctypes.byref(n))
        if st != OK:
            _raise(st, "evict")
        return n.value


# cxl_broker_iov_t as numpy sees it (read_many fills it without a loop)
_IOV_DTYPE = np.dtype({"names": ["index", "buf", "len", "got", "status"],
                       "formats": ["<u8", "<u8", "<u8", "<u8", "<i4"],
                       "offsets": [_lib._Iov.index.offset, _lib._Iov.buf.offset,
                                   _lib._Iov.len.offset, _lib._Iov.got.offset,
                                   _lib._Iov.status.offset],
                       "itemsize": ctypes.sizeof(_lib._Iov)})


class BrokerDataset:
    """An open dataset version: sample lengths, reads, views, epochs."""

    def __init__(self, broker: Broker, name: str, version: int = 0) -> None:
        lib = _lib.lib()
        h = ctypes.c_void_p()
        st = lib.cxl_broker_open(broker._h, name.encode(), version, ctypes.byref(h))
        if st != OK:
            _raise(st, f"open {name}")
        self._broker = broker
        self._h = h
        broker._datasets.add(self)
        self.name = name
        info = _lib._DsInfo()
        lib.cxl_broker_ds_info(h, ctypes.byref(info))
        self.version = int(info.version)
        self.format = FORMAT_NAMES.get(int(info.format), "files")
        self.nsamples = int(lib.cxl_broker_nsamples(h))
        self.nchunks = int(lib.cxl_broker_nchunks(h))
        # flat, one array per process: no object per sample
        self.lens = np.empty(self.nsamples, dtype=np.uint64)
        lib.cxl_broker_sample_lens(h, self.lens.ctypes.data_as(ctypes.c_void_p))
        # the length of every sample when they have one (else 0): batches
        # of such a dataset are rows of one array (read_rows)
        self.row_len = (int(self.lens[0]) if self.nsamples and
                        self.lens.min() == self.lens.max() else 0)
        self._iov_cache: Optional[ctypes.Array] = None
        self._f_rows = lib.cxl_broker_read_rows
        self._f_view = lib.cxl_broker_view
        self._f_release = lib.cxl_broker_view_release

    def close(self) -> None:
        h, self._h = getattr(self, "_h", None), None
        if h and self._broker._h and self._broker._pid == _pid.pid():
            _lib.lib().cxl_broker_close(h)

    def __del__(self) -> None:
        self.close()

    def __len__(self) -> int:
        return self.nsamples

    def _check(self, i: int) -> int:
        if not 0 <= i < self.nsamples:
            raise IndexError(f"{self.name}: sample {i} of {self.nsamples}")
        return i

    def sample_len(self, i: int) -> int:
        return int(self.lens[self._check(i)])

    def _string(self, fn, i: int) -> str:
        n = ctypes.c_size_t()
        p = fn(self._h, self._check(i), ctypes.byref(n))
        return ctypes.string_at(p, n.value).decode(errors="replace") if p else ""

    def sample_info(self, i: int) -> str:
        return self._string(_lib.lib().cxl_broker_sample_info, i)

    def sample_path(self, i: int) -> str:
        return self._string(_lib.lib().cxl_broker_sample_path, i)

    def common_info(self) -> Optional[str]:
        """The format info all files share (a .npy row's dtype and shape),
        or None when they differ."""
        n = ctypes.c_size_t()
        p = _lib.lib().cxl_broker_common_info(self._h, ctypes.byref(n))
        return ctypes.string_at(p, n.value).decode(errors="replace") if p else None

    def chunk_samples(self, c: int) -> Tuple[int, int]:
        first, count = ctypes.c_uint64(), ctypes.c_uint64()
        if _lib.lib().cxl_broker_chunk_samples(self._h, c, ctypes.byref(first),
                                               ctypes.byref(count)):
            raise IndexError(f"{self.name}: chunk {c} of {self.nchunks}")
        return first.value, count.value

    def read_into(self, i: int, buf) -> int:
        """Copy sample i into a writable buffer; returns its length."""
        self._check(i)
        mv = memoryview(buf).cast("B")
        if mv.readonly:
            raise ValueError("read_into needs a writable buffer")
        addr = ctypes.addressof(ctypes.c_char.from_buffer(mv)) if len(mv) else 0
        got = ctypes.c_size_t()
        st = _lib.lib().cxl_broker_read(self._h, i, addr, len(mv), ctypes.byref(got))
        if st != OK:
            _raise(st, f"{self.name}[{i}]")
        return got.value

    def read_batch(self, indices: Sequence[int], bufs: Sequence) -> None:
        """Read many samples with several gets in flight."""
        n = len(indices)
        iov = (_lib._Iov * n)()
        for k, (i, b) in enumerate(zip(indices, bufs)):
            mv = memoryview(b).cast("B")
            iov[k].index = self._check(int(i))
            iov[k].buf = ctypes.addressof(ctypes.c_char.from_buffer(mv)) if len(mv) else None
            iov[k].len = len(mv)
        st = _lib.lib().cxl_broker_read_batch(self._h, iov, n)
        if st != OK:
            _raise(st, f"{self.name}: batch of {n}")

    def check_indices(self, indices) -> np.ndarray:
        """indices as a flat int64 array; IndexError if one is out of range."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < 0 or idx.max() >= self.nsamples):
            bad = idx[(idx < 0) | (idx >= self.nsamples)][0]
            raise IndexError(f"{self.name}: sample {bad} of {self.nsamples}")
        return idx

    def read_many(self, indices, out) -> np.ndarray:
        """Read samples ``indices`` back to back into ``out``; one call.

        ``out``: a writable contiguous buffer of at least the samples'
        summed length (``self.lens[indices].sum()``).  Sample k lands at
        ``offsets[k]``; returns the ``n + 1`` offsets (uint64).  The
        request vector is built with numpy in a buffer kept per dataset,
        so there is no per-sample Python work: the batch path of
        ``ucx_cxl.data.CXLDataset``.
        """
        idx = self.check_indices(indices)
        return self._read_many(idx, self.lens[idx], out)

    def _read_many(self, idx: np.ndarray, lens: np.ndarray, out) -> np.ndarray:
        """read_many of checked int64 indices whose lengths are lens."""
        n = idx.size
        offs = np.zeros(n + 1, dtype=np.uint64)
        np.cumsum(lens, out=offs[1:])
        mv = memoryview(out).cast("B")
        if mv.readonly:
            raise ValueError("read_many needs a writable buffer")
        if len(mv) < int(offs[-1]):
            raise ValueError(f"read_many: buffer of {len(mv)} bytes for "
                             f"{int(offs[-1])}")
        if n == 0:
            return offs
        base = ctypes.addressof(ctypes.c_char.from_buffer(mv)) if len(mv) else 0
        if self._iov_cache is None or len(self._iov_cache) < n:
            self._iov_cache = (_lib._Iov * max(n, 64))()
        iov = self._iov_cache
        a = np.frombuffer(iov, dtype=_IOV_DTYPE, count=n)
        a["index"] = idx
        a["buf"] = offs[:-1] + np.uint64(base)
        a["len"] = lens
        a["got"] = 0
        a["status"] = 0
        st = _lib.lib().cxl_broker_read_batch(self._h, iov, n)
        if st != OK:
            _raise(st, f"{self.name}: batch of {n}")
        return offs

    def read_rows(self, indices, out) -> None:
        """Read samples ``indices`` into the rows of ``out``; one call.

        For a dataset whose samples have one length (``row_len``, not 0):
        sample ``indices[k]`` lands at ``out[k * row_len:]``.  ``out``: a
        writable contiguous buffer of at least ``len(indices) * row_len``
        bytes.  IndexError for an index out of range.
        """
        idx = self.check_indices(indices)
        row = self.row_len
        if not row:
            raise ValueError(f"{self.name}: samples of different lengths "
                             "are no rows (read_many reads them)")
        mv = memoryview(out).cast("B")
        if mv.readonly or len(mv) < idx.size * row:
            raise ValueError(f"read_rows: a writable buffer of {idx.size * row} "
                             f"bytes is needed, not {len(mv)}"
                             f"{' (read-only)' if mv.readonly else ''}")
        if idx.size == 0:
            return
        st = self._read_rows_at(idx, ctypes.addressof(ctypes.c_char.from_buffer(mv)))
        if st != OK:
            _raise(st, f"{self.name}: rows of {idx.size}")

    def _read_rows_at(self, idx: np.ndarray, addr: int) -> int:
        """read_rows of a C-contiguous int64 array into memory at addr (its
        room checked by the caller): the C status.  Negative indices fail
        with CXL_BROKER_ERR_INVAL (as huge unsigned ones)."""
        return self._f_rows(self._h, idx.ctypes.data, idx.size, addr, self.row_len)

    def view(self, i: int) -> np.ndarray:
        """A read-only uint8 array over sample i in the pool (zero-copy).

        The sample's chunk stays pinned while the array, or anything made
        from it (a tensor of torch.from_numpy), is alive.
        """
        return _Pin(self, self._check(i)).array()

    def epoch(self, epoch: int, order: Optional[np.ndarray] = None) -> None:
        if order is None:
            st = _lib.lib().cxl_broker_epoch(self._h, epoch, None, 0)
        else:
            o = np.ascontiguousarray(order, dtype=np.uint64)
            st = _lib.lib().cxl_broker_epoch(self._h, epoch,
                                             o.ctypes.data_as(ctypes.c_void_p),
                                             o.size)
        if st != OK:
            _raise(st, f"{self.name}: epoch {epoch}")


class _Pin:
    """One view's pin, released when the last array over it is freed.

    The ctypes buffer the arrays are made from is its only owner, so there
    is no reference cycle and the release is prompt.  Lean on purpose: a
    view of a 1 MiB sample is a tenth of the time the loop takes to read
    it, and every attribute lookup here is part of that.
    """

    __slots__ = ("_ds", "_v")

    def __init__(self, ds: BrokerDataset, i: int) -> None:
        self._ds = ds
        v = self._v = _lib._View()
        st = ds._f_view(ds._h, i, ctypes.byref(v))
        if st != OK:
            self._v = None
            _raise(st, f"{ds.name}[{i}]: view")
        ds._broker._pins += 1

    def array(self) -> np.ndarray:
        v = self._v
        n = v.len
        raw = (ctypes.c_char * (n or 1)).from_address(v.data)
        raw._pin = self
        arr = np.frombuffer(raw, dtype=np.uint8, count=n)
        arr.flags.writeable = False
        return arr

    def __del__(self) -> None:
        v, self._v = self._v, None
        if v is None:
            return
        ds = self._ds
        b = ds._broker
        if ds._h and b._pid == _pid.pid():
            ds._f_release(ds._h, ctypes.byref(v))
        b._pins -= 1


