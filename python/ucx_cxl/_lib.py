"""Finding and binding the C libraries.

UCX 1.13 loads only the transport modules it was built with, so the cxl
transport (``libuct_cxl.so``) is loaded here, globally, before the broker
library initialises UCP: its constructor registers the transport, and no
``LD_PRELOAD`` is needed.

Search order for both libraries: ``$CXL_LIBDIR``; the build tree next
to this source tree (``build-release/.libs``, then ``build/.libs``); the
directory recorded at install time (``_paths.py``); the system's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from pathlib import Path
from typing import List, Optional

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


# UCX warns about every UCX_* variable it does not know: the old name of
# this one is moved to the new one, for this process and its children.
if "UCX_CXL_LIBDIR" in os.environ:
    os.environ.setdefault("CXL_LIBDIR", os.environ.pop("UCX_CXL_LIBDIR"))


def _candidates() -> List[Path]:
    dirs: List[Path] = []
    env = os.environ.get("CXL_LIBDIR")
    if env:
        dirs.append(Path(env))
    top = Path(__file__).resolve().parents[2]
    for build in ("build-release", "build"):
        dirs.append(top / build / ".libs")
    try:
        from . import _paths  # written by `make install`
        dirs.append(Path(_paths.LIBDIR))
    except ImportError:
        pass
    return dirs


def _find(name: str, subdirs: List[str]) -> Optional[str]:
    for d in _candidates():
        for sub in subdirs:
            p = d / sub / name
            if p.exists():
                return str(p)
    return None


class _Params(ctypes.Structure):
    _fields_ = [("addr", ctypes.c_char_p), ("timeout_s", ctypes.c_double),
                ("local", ctypes.c_int)]


class _AddParams(ctypes.Structure):
    _fields_ = [("format", ctypes.c_int), ("policy", ctypes.c_int),
                ("chunk_size", ctypes.c_uint64),
                ("record_size", ctypes.c_uint64),
                ("pin_bytes", ctypes.c_uint64)]


class _DsInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 48), ("version", ctypes.c_uint32),
                ("format", ctypes.c_uint32), ("policy", ctypes.c_uint32),
                ("active", ctypes.c_int), ("nsamples", ctypes.c_uint64),
                ("nchunks", ctypes.c_uint64), ("nfiles", ctypes.c_uint64),
                ("bytes", ctypes.c_uint64), ("chunk_size", ctypes.c_uint64),
                ("resident_chunks", ctypes.c_uint64),
                ("resident_bytes", ctypes.c_uint64),
                ("pin_bytes", ctypes.c_uint64), ("readers", ctypes.c_uint32),
                ("epoch", ctypes.c_uint32)]


class _Iov(ctypes.Structure):
    _fields_ = [("index", ctypes.c_uint64), ("buf", ctypes.c_void_p),
                ("len", ctypes.c_size_t), ("got", ctypes.c_size_t),
                ("status", ctypes.c_int)]


class _View(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("len", ctypes.c_size_t),
                ("chunk", ctypes.c_uint64)]


def _bind(lib: ctypes.CDLL) -> None:
    P, U64, SZ = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_size_t
    sig = {
        "cxl_broker_strerror": ([ctypes.c_int], ctypes.c_char_p),
        "cxl_broker_last_error": ([], ctypes.c_char_p),
        "cxl_broker_default_addr": ([ctypes.c_char_p, SZ], ctypes.c_char_p),
        "cxl_broker_params_init": ([ctypes.POINTER(_Params)], None),
        "cxl_broker_connect": ([ctypes.POINTER(_Params), ctypes.POINTER(P)],
                               ctypes.c_int),
        "cxl_broker_disconnect": ([P], None),
        "cxl_broker_is_local": ([P], ctypes.c_int),
        "cxl_broker_add_params_init": ([ctypes.POINTER(_AddParams)], None),
        "cxl_broker_add": ([P, ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p),
                            ctypes.c_uint, ctypes.POINTER(_AddParams),
                            ctypes.POINTER(_DsInfo)], ctypes.c_int),
        "cxl_broker_rm": ([P, ctypes.c_char_p], ctypes.c_int),
        "cxl_broker_evict": ([P, ctypes.c_char_p, ctypes.POINTER(U64)],
                             ctypes.c_int),
        "cxl_broker_open": ([P, ctypes.c_char_p, ctypes.c_uint32,
                             ctypes.POINTER(P)], ctypes.c_int),
        "cxl_broker_close": ([P], None),
        "cxl_broker_ds_info": ([P, ctypes.POINTER(_DsInfo)], None),
        "cxl_broker_nsamples": ([P], U64),
        "cxl_broker_nchunks": ([P], U64),
        "cxl_broker_chunk_samples": ([P, U64, ctypes.POINTER(U64),
                                      ctypes.POINTER(U64)], ctypes.c_int),
        "cxl_broker_sample_lens": ([P, P], ctypes.c_int),
        "cxl_broker_sample_len": ([P, U64], U64),
        "cxl_broker_sample_info": ([P, U64, ctypes.POINTER(SZ)], P),
        "cxl_broker_sample_path": ([P, U64, ctypes.POINTER(SZ)], P),
        "cxl_broker_common_info": ([P, ctypes.POINTER(SZ)], P),
        "cxl_broker_read": ([P, U64, P, SZ, ctypes.POINTER(SZ)], ctypes.c_int),
        "cxl_broker_read_batch": ([P, ctypes.POINTER(_Iov), SZ], ctypes.c_int),
        "cxl_broker_read_rows": ([P, P, SZ, P, SZ], ctypes.c_int),
        "cxl_broker_view": ([P, U64, ctypes.POINTER(_View)], ctypes.c_int),
        "cxl_broker_view_release": ([P, ctypes.POINTER(_View)], None),
        "cxl_broker_epoch": ([P, ctypes.c_uint32, P, U64], ctypes.c_int),
    }
    for name, (args, res) in sig.items():
        fn = getattr(lib, name)
        fn.argtypes = args
        fn.restype = res


def lib() -> ctypes.CDLL:
    """The bound libcxl_broker, loaded once per process."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        uct = _find("libuct_cxl.so", ["", "ucx"])
        if uct is None:
            raise OSError("ucx_cxl: libuct_cxl.so not found (build the project, "
                          "or set CXL_LIBDIR)")
        ctypes.CDLL(uct, mode=ctypes.RTLD_GLOBAL)
        path = _find("libcxl_broker.so", [""]) or \
            ctypes.util.find_library("cxl_broker")
        if path is None:
            raise OSError("ucx_cxl: libcxl_broker.so not found (build the "
                          "project, or set CXL_LIBDIR)")
        lb = ctypes.CDLL(path)
        _bind(lb)
        _lib = lb
        return lb
