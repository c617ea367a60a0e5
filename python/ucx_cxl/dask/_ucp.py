"""ctypes binding of libcxl_comm (include/ucx_cxl/comm.h)."""

from __future__ import annotations

import ctypes
import threading
from typing import Optional

import numpy as np

from .. import _lib as _paths

_lock = threading.Lock()
_comm: Optional[ctypes.CDLL] = None

INPROGRESS = 1
CONTROL = 2         # cxl_comm_recv_peek: a control message


def lib() -> ctypes.CDLL:
    global _comm
    with _lock:
        if _comm is not None:
            return _comm
        _paths.lib()        # the transport module, loaded globally first
        path = _paths._find("libcxl_comm.so", [""])
        if path is None:
            raise OSError("ucx_cxl.dask: libcxl_comm.so not found (build the "
                          "project, or set CXL_LIBDIR)")
        c = ctypes.CDLL(path)
        P, SZ = ctypes.c_void_p, ctypes.c_size_t
        sig = {
            "cxl_comm_last_error": ([], ctypes.c_char_p),
            "cxl_comm_worker_create": ([ctypes.POINTER(P)], ctypes.c_int),
            "cxl_comm_worker_destroy": ([P], None),
            "cxl_comm_worker_efd": ([P], ctypes.c_int),
            "cxl_comm_progress": ([P], ctypes.c_uint),
            "cxl_comm_worker_arm": ([P], ctypes.c_int),
            "cxl_comm_progress_wait": ([P, ctypes.c_uint], ctypes.c_uint),
            "cxl_comm_poll": ([P, ctypes.POINTER(SZ), ctypes.c_int], ctypes.c_int),
            "cxl_comm_listen": ([P, ctypes.c_char_p, ctypes.c_uint,
                                 ctypes.POINTER(P)], ctypes.c_int),
            "cxl_comm_listener_port": ([P], ctypes.c_uint),
            "cxl_comm_listener_set_user": ([P, SZ], None),
            "cxl_comm_accept": ([P], P),
            "cxl_comm_listener_close": ([P], None),
            "cxl_comm_connect": ([P, ctypes.c_char_p, ctypes.c_uint,
                                  ctypes.POINTER(P)], ctypes.c_int),
            "cxl_comm_ep_status": ([P], ctypes.c_int),
            "cxl_comm_ep_peer": ([P], ctypes.c_char_p),
            "cxl_comm_ep_local": ([P], ctypes.c_char_p),
            "cxl_comm_ep_info": ([P, ctypes.c_char_p, SZ], ctypes.c_int),
            "cxl_comm_ep_set_user": ([P, SZ], None),
            "cxl_comm_ep_close": ([P, ctypes.c_int], None),
            "cxl_comm_send": ([P, P, SZ], P),
            "cxl_comm_send_nb": ([P, P, SZ, ctypes.POINTER(P)], ctypes.c_int),
            "cxl_comm_recv_nb": ([P, P, SZ, ctypes.POINTER(P)], ctypes.c_int),
            "cxl_comm_recv_peek": ([P, ctypes.POINTER(SZ)], ctypes.c_int),
            "cxl_comm_recv": ([P, P, SZ], P),
            "cxl_comm_req_status": ([P], ctypes.c_int),
            "cxl_comm_req_free": ([P], None),
            "cxl_comm_send_control_nb": ([P, P, SZ, ctypes.POINTER(P)], ctypes.c_int),
            "cxl_comm_pool_open": ([ctypes.POINTER(P)], ctypes.c_int),
            "cxl_comm_pool_close": ([P], None),
            "cxl_comm_pool_exit": ([], None),
            "cxl_comm_pool_uuid": ([P, P], None),
            "cxl_comm_pool_base": ([P], SZ),
            "cxl_comm_pool_size": ([P], ctypes.c_uint64),
            "cxl_comm_pool_lend": ([P, ctypes.c_uint64, P], ctypes.c_int),
            "cxl_comm_pool_reclaim": ([P, ctypes.c_uint64], ctypes.c_int),
            "cxl_comm_pool_write": ([P, P, ctypes.c_uint64, P, SZ], ctypes.c_int),
            "cxl_comm_pool_publish": ([P], None),
            "cxl_comm_pool_acquire": ([P, P], None),
        }
        for name, (args, res) in sig.items():
            fn = getattr(c, name)
            fn.argtypes = args
            fn.restype = res
        _comm = c
        return c


def last_error() -> str:
    return (lib().cxl_comm_last_error() or b"").decode(errors="replace")


def bytearray_address(buf: bytearray) -> int:
    """Address of a bytearray's bytes (one receive writes into it)."""
    return ctypes.addressof((ctypes.c_char * len(buf)).from_buffer(buf))


def buffer_address(buf) -> int:
    """Address of a contiguous buffer, read-only ones (bytes) included:
    numpy takes it through the buffer protocol; UCP only reads a frame it
    sends, and the caller keeps ``buf`` alive until the send completes."""
    mv = memoryview(buf)
    if not mv.contiguous:
        raise ValueError("non-contiguous frame")
    if mv.nbytes == 0:
        return 0
    return int(np.frombuffer(mv.cast("B"), dtype=np.uint8).ctypes.data)
