"""ucx_cxl._pid: the cached pid that tells a forked child from its parent
(the read paths ask it per sample; os.getpid() is a system call)."""

from __future__ import annotations

import multiprocessing
import os

from ucx_cxl import _pid


def _report(q) -> None:
    q.put((_pid.pid(), os.getpid()))


def test_pid_is_renewed_in_forked_children():
    assert _pid.pid() == os.getpid()
    r, w = os.pipe()
    child = os.fork()
    if child == 0:                      # the child: its own pid, not ours
        ok = _pid.pid() == os.getpid() != os.getppid()
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    os.waitpid(child, 0)
    assert got == b"1", "a child of os.fork() kept its parent's pid"
    q = multiprocessing.get_context("fork").SimpleQueue()
    p = multiprocessing.get_context("fork").Process(target=_report, args=(q,))
    p.start()
    cached, real = q.get()
    p.join()
    assert cached == real == p.pid
