"""This process's pid, without a system call each time it is asked.

os.getpid() is a system call (glibc does not cache the pid), about 1 us
in a VM whose system calls trap, and the read paths ask it twice per
sample to tell a forked DataLoader worker from its parent.  The cached
value is renewed in every child that os.fork() makes (multiprocessing's
fork start method, DataLoader workers); spawned children import it anew.
"""

from __future__ import annotations

import os

_pid = os.getpid()


def _renew() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_renew)


def pid() -> int:
    """os.getpid() of this process."""
    return _pid
