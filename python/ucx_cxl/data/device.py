"""Batches to a CUDA device through a ring of pinned host staging buffers.

The CUDA runtime is loaded at run time (``libcudart`` from ``$CUDA_HOME``,
``/usr/local/cuda`` or the loader's path), so the package works without
it.  A sample travels: read_batch from the pool into a pinned slot (a
copy out of this process's mapping of the pool, or ucp_get), then
``cudaMemcpyAsync`` on that slot's stream, an event recorded behind it; a
slot is reused only after its event completes (FFCV-style, ``depth``
slots).  Without a usable GPU every entry point raises one error that
says why (the runtime's own message).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from typing import List, Optional, Tuple

_cudart: Optional[ctypes.CDLL] = None
_why: Optional[str] = None

cudaMemcpyHostToDevice = 1


def _load() -> Tuple[Optional[ctypes.CDLL], str]:
    global _cudart, _why
    if _cudart is not None or _why is not None:
        return _cudart, _why or ""
    names = []
    home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    for sub in ("lib64", "lib", "targets/x86_64-linux/lib"):
        d = os.path.join(home, sub)
        if os.path.isdir(d):
            names += [os.path.join(d, f) for f in sorted(os.listdir(d))
                      if f.startswith("libcudart.so")]
    found = ctypes.util.find_library("cudart")
    if found:
        names.append(found)
    for n in names:
        try:
            lib = ctypes.CDLL(n)
            break
        except OSError:
            continue
    else:
        _why = "the CUDA runtime (libcudart) was not found"
        return None, _why
    lib.cudaGetErrorString.restype = ctypes.c_char_p
    count = ctypes.c_int()
    err = lib.cudaGetDeviceCount(ctypes.byref(count))
    if err != 0 or count.value == 0:
        msg = lib.cudaGetErrorString(err).decode() if err else "no devices"
        _why = f"no CUDA device: cudaGetDeviceCount: {msg}"
        return None, _why
    _cudart = lib
    return lib, ""


def cuda_status() -> Tuple[bool, str]:
    """(True, "") when a CUDA device is usable, else (False, why)."""
    lib, why = _load()
    return lib is not None, why


def _check(err: int, what: str) -> None:
    if err != 0:
        raise RuntimeError(f"{what}: {_cudart.cudaGetErrorString(err).decode()}")


class StagingRing:
    """``depth`` pinned host slots of ``slot_bytes``, one stream each."""

    def __init__(self, depth: int = 4, slot_bytes: int = 4 << 20) -> None:
        lib, why = _load()
        if lib is None:
            raise RuntimeError(f"ucx_cxl staging: {why}")
        self.depth, self.slot_bytes = depth, slot_bytes
        self.host: List[ctypes.c_void_p] = []
        self.streams: List[ctypes.c_void_p] = []
        self.events: List[ctypes.c_void_p] = []
        self.next = 0
        for _ in range(depth):
            p, s, e = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
            _check(lib.cudaHostAlloc(ctypes.byref(p), ctypes.c_size_t(slot_bytes),
                                     0), "cudaHostAlloc")
            _check(lib.cudaStreamCreate(ctypes.byref(s)), "cudaStreamCreate")
            _check(lib.cudaEventCreate(ctypes.byref(e)), "cudaEventCreate")
            self.host.append(p)
            self.streams.append(s)
            self.events.append(e)

    def slot(self) -> int:
        """The next slot, once the copy that used it last is done."""
        k = self.next
        self.next = (k + 1) % self.depth
        _check(_cudart.cudaEventSynchronize(self.events[k]), "cudaEventSynchronize")
        return k

    def host_buffer(self, k: int, nbytes: int):
        return (ctypes.c_char * nbytes).from_address(self.host[k].value)

    def to_device(self, k: int, dst_ptr: int, nbytes: int) -> None:
        _check(_cudart.cudaMemcpyAsync(ctypes.c_void_p(dst_ptr), self.host[k],
                                       ctypes.c_size_t(nbytes),
                                       cudaMemcpyHostToDevice, self.streams[k]),
               "cudaMemcpyAsync")
        _check(_cudart.cudaEventRecord(self.events[k], self.streams[k]),
               "cudaEventRecord")

    def synchronize(self) -> None:
        for e in self.events:
            _check(_cudart.cudaEventSynchronize(e), "cudaEventSynchronize")

    def close(self) -> None:
        if _cudart is None:
            return
        self.synchronize()
        for p, s, e in zip(self.host, self.streams, self.events):
            _cudart.cudaFreeHost(p)
            _cudart.cudaStreamDestroy(s)
            _cudart.cudaEventDestroy(e)
        self.host, self.streams, self.events = [], [], []


def to_device(batch, device: str = "cuda", non_blocking: bool = True):
    """Move a tensor (or a list/tuple/dict of them) to ``device``.

    Needs a CUDA device and a torch built with CUDA (Debian's python3-torch
    is not): either missing gives one RuntimeError saying which.
    """
    import torch
    ok, why = cuda_status()
    if not ok:
        raise RuntimeError(f"to_device({device!r}): {why}")
    if not torch.cuda.is_available():
        raise RuntimeError(f"to_device({device!r}): this torch "
                           f"({torch.__version__}) has no CUDA support")
    if isinstance(batch, torch.Tensor):
        return batch.pin_memory().to(device, non_blocking=non_blocking)
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(b, device, non_blocking) for b in batch)
    if isinstance(batch, dict):
        return {k: to_device(v, device, non_blocking) for k, v in batch.items()}
    return batch
