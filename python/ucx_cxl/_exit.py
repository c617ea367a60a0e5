"""Work a process must do when it ends, multiprocessing children included.

DataLoader workers and Dask's worker processes are multiprocessing
children: they end with os._exit() and run no atexit handler, only
multiprocessing's finalizers (which the main process also runs from its
atexit handler).  So what must happen at exit is registered as one of
those, once per process: a child's registry starts empty, and a forked
child inherits the parent's "already registered" record.
"""

from __future__ import annotations

import os
from typing import Callable, Dict

_registered: Dict[Callable[[], None], int] = {}   # callback -> pid


def at_exit(fn: Callable[[], None]) -> bool:
    """Run fn when this process ends; True if registered by this call
    (False: it already is, in this process)."""
    pid = os.getpid()
    if _registered.get(fn) == pid:
        return False
    import multiprocessing.util as mpu   # registers its atexit handler
    mpu.Finalize(None, fn, exitpriority=100)
    _registered[fn] = pid
    return True
