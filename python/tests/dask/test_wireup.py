"""libcxl_comm below the backend: sends at the earliest moment a binding can
make them (in a child process: the failure this guards against was an
abort inside UCP).

UCP 1.13 sends a message posted while it wires an endpoint up with the
protocol of the endpoint's first configuration (tcp only) on the lanes of
the final one (cxl), whose limits differ: 'Invalid am_short_iov length' for
a short message, an assertion in ucp_am_zcopy_common (abort) for a zcopy
one.  libcxl_comm refuses sends until the endpoint is wired up, a listener
hands out only wired-up endpoints and a connector says when it is.
"""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import PYDIR

CHILD = r"""
import ctypes, sys, time
from ucx_cxl.dask import _ucp
lib = _ucp.lib()
w = ctypes.c_void_p(); assert lib.cxl_comm_worker_create(ctypes.byref(w)) == 0
l = ctypes.c_void_p(); assert lib.cxl_comm_listen(w, b"127.0.0.1", 0, ctypes.byref(l)) == 0
port = lib.cxl_comm_listener_port(l)
a = ctypes.c_void_p()
assert lib.cxl_comm_connect(w, b"127.0.0.1", port, ctypes.byref(a)) == 0
req = ctypes.c_void_p()
early = lib.cxl_comm_send_nb(a, b"x" * 300, 300, ctypes.byref(req))
print("early", early, lib.cxl_comm_ep_status(a), _ucp.last_error(), flush=True)
b = None
t0 = time.time()
while time.time() - t0 < 20:
    lib.cxl_comm_progress(w)
    if b is None:
        b = lib.cxl_comm_accept(l)
    if b and lib.cxl_comm_ep_status(a) == 0:
        break
assert b and lib.cxl_comm_ep_status(a) == 0, "not connected in 20 s"
n = int(sys.argv[1])
bufs = []
for ep, tag in ((a, 1), (b, 2)):        # at once, both directions
    buf = ctypes.create_string_buffer(bytes([tag]) * n, n)
    bufs.append(buf)
    st = lib.cxl_comm_send_nb(ep, buf, n, ctypes.byref(req))
    assert st in (0, 1), _ucp.last_error()
    if st == 1:
        bufs.append(req.value)
got = {}
ln = ctypes.c_size_t()
t0 = time.time()
while len(got) < 2 and time.time() - t0 < 20:
    lib.cxl_comm_progress(w)
    for ep, tag in ((b, 1), (a, 2)):
        if tag not in got and lib.cxl_comm_recv_peek(ep, ctypes.byref(ln)):
            rb = ctypes.create_string_buffer(ln.value)
            st = lib.cxl_comm_recv_nb(ep, rb, ln.value, ctypes.byref(req))
            while st == 1 and lib.cxl_comm_req_status(req) == 1:
                lib.cxl_comm_progress(w)
            got[tag] = rb.raw == bytes([tag]) * n
print("got", sorted(got.items()), flush=True)
"""


def test_sends_right_after_wireup():
    env = dict(os.environ, PYTHONPATH=str(PYDIR))
    sizes = [241, 9000, 20000, 200000]
    for n in sizes:
        for _ in range(2):
            r = subprocess.run([sys.executable, "-c", CHILD, str(n)], env=env,
                               capture_output=True, text=True, timeout=90)
            assert r.returncode == 0, (n, r.stdout, r.stderr[-2000:])
            out = r.stdout.splitlines()
            early = out[0].split()
            # a send before wire-up is refused (UCS_ERR_NOT_CONNECTED), not sent
            assert early[1] == "-24" and early[2] == "1", out[0]
            assert "not connected yet" in out[0]
            assert out[-1] == "got [(1, True), (2, True)]", (n, out, r.stderr[-2000:])
            assert "Invalid am_short_iov" not in r.stderr
