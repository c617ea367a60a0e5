"""A process that used the backend leaves nothing on the pool when it ends.

Dask's worker processes are multiprocessing children: they end with
os._exit() and run no atexit handler.  A UCP worker left alive there kept
its pool attachment and its interface blocks (8 MiB of rings and a 512 KiB
bulk ring each) as a dead owner's until the next attach recovered them;
the demo's pool showed three dead attachments after a LocalCluster.  The
backend now frees its workers from a multiprocessing finalizer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import PYDIR, _cxlpool

SCRIPT = r"""
import asyncio, multiprocessing, sys

def child():
    from distributed.comm import connect, listen

    async def main():
        async def handle(comm):
            await comm.write(await comm.read())
            await comm.close()
        async with listen("cxl://127.0.0.1", handle) as lst:
            c = await connect(lst.contact_address)
            await c.write({"x": 1})
            assert await c.read() == {"x": 1}
            await c.close()

    asyncio.run(main())

if __name__ == "__main__":
    ctx = multiprocessing.get_context(sys.argv[1])
    p = ctx.Process(target=child)
    p.start()
    p.join(60)
    print(p.pid, p.exitcode, flush=True)
"""


def _attachments(pool: str):
    r = subprocess.run([_cxlpool(), "info", "--json", pool],
                       capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["attachments"]


def test_multiprocessing_child_detaches_at_exit(cxl_pool, tmp_path):
    script = tmp_path / "child_exit.py"
    script.write_text(SCRIPT)
    env = dict(os.environ)
    r = subprocess.run([sys.executable, str(script), "spawn"], env=env,
                       capture_output=True, text=True, timeout=120,
                       cwd=str(PYDIR))
    assert r.returncode == 0, r.stdout + r.stderr
    pid, code = (int(x) for x in r.stdout.split()[-2:])
    assert code == 0, r.stdout + r.stderr
    left = [a for a in _attachments(cxl_pool) if a.get("pid") == pid]
    assert left == [], f"the child (pid {pid}) left {left} on {cxl_pool}"


OPEN_LISTENER = r"""
import asyncio
from distributed.comm import listen

async def main():
    lst = await listen("cxl://127.0.0.1", lambda comm: None)
    print("listening", lst.contact_address, flush=True)

asyncio.run(main())         # the loop closes with the listener still open
print("done", flush=True)
"""


def test_listener_left_open_is_closed_with_its_worker(cxl_pool, tmp_path):
    """A program that never stops a listener: its worker, destroyed when
    the loop is gone, closes the listener first.  Destroyed with it open,
    UCP printed 'async ... handler ... not released' and 'releasing async
    context with 1 handlers' warnings (on stdout, into the program's
    output)."""
    script = tmp_path / "open_listener.py"
    script.write_text(OPEN_LISTENER)
    r = subprocess.run([sys.executable, str(script)], env=dict(os.environ),
                       capture_output=True, text=True, timeout=120,
                       cwd=str(PYDIR))
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "done" in r.stdout, out
    assert "UCX  WARN" not in out, out
