"""5. Zero-copy: CXLDataset(copy=False) tensors view the pool and keep their
chunk pinned until they are freed.

A broker of its own with an 8 MiB cache (lru) and a 24 MiB dataset of 48
chunks: reading it through evicts most chunks, and `cxl-broker evict` drops
every chunk nobody pins; the held tensors' bytes must not change.  Readers
here cache a single pin (CXL_BROKER_PIN_CACHE=1), so what stays pinned is
what the views pin.
"""

from __future__ import annotations

import gc
import re
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch

from conftest import Spec, add
from helpers import same
from ucx_cxl import Broker, BrokerError
from ucx_cxl.data import CXLDataset

HELD = (0, 1, 11, 40)          # samples of chunks 0, 5 and 20 (2 a chunk)


def pool_ranges(pool):
    """This process's mappings of the pool file."""
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            if line.rstrip().endswith(pool):
                a, b = (int(x, 16) for x in line.split()[0].split("-"))
                out.append((a, b))
    return out


def evicted(cli, name):
    return int(re.match(r"(\d+) chunks evicted", cli.run("evict", name)).group(1))


@pytest.fixture
def small_cache(spare_broker, workdir, monkeypatch):
    b = spare_broker(capacity="8m")
    monkeypatch.setenv("CXL_BROKER", b.addr)
    monkeypatch.setenv("UCX_CXL_POOL", b.pool)
    monkeypatch.setenv("CXL_BROKER_PIN_CACHE", "1")
    d = workdir / f"zc-{b.name}"
    d.mkdir()
    rng = np.random.Generator(np.random.PCG64(5))
    for k in range(48 * 2):
        (d / f"s{k:03d}.bin").write_bytes(rng.bytes(256 << 10))
    spec = add(Spec("t-zc", "files", [str(d)]), policy="lru",
               chunk_size=512 << 10)
    assert spec.chunks == 48
    return b, spec


def test_views_stay_pinned(small_cache):
    b, spec = small_cache
    cli = b.cli
    v = CXLDataset(spec.name, copy=False)
    held = {i: v[i] for i in HELD}
    ranges = pool_ranges(b.pool)
    for i, t in held.items():
        assert isinstance(t, torch.Tensor)
        p = t.data_ptr()
        assert any(a <= p < e for a, e in ranges), \
            f"sample {i} at {p:#x} is not in the pool's mapping {ranges}"
        assert np.array_equal(t.numpy(), spec.expected(i))
    chunks = len({i // 2 for i in HELD})
    a = CXLDataset(spec.name, copy=False, output="numpy")[HELD[-1]]
    assert not a.flags.writeable, "a view of the pool must be read-only"
    del a
    del v                                   # the tensors keep what they need
    gc.collect()
    st = cli.stat()
    assert st["pinned_chunks"] >= 3, st

    # pressure: the whole dataset read through a cache of a third of it,
    # then everything that is not pinned evicted
    ev0 = st["evictions"]
    c = CXLDataset(spec.name)
    for i in range(spec.n):
        assert np.array_equal(c[i].numpy(), spec.expected(i)), f"sample {i}"
    c.close()
    st = cli.stat()
    assert st["evictions"] - ev0 >= spec.chunks // 2, \
        f"no pressure: {st['evictions'] - ev0} evictions"
    evicted(cli, spec.name)
    st = cli.stat()
    assert st["pinned_chunks"] == chunks == st["resident_chunks"], st
    for i, t in held.items():
        assert np.array_equal(t.numpy(), spec.expected(i)), \
            f"held sample {i} changed under pressure"

    # freed: the chunks can go
    some = held.pop(HELD[0])
    del held, t                             # (t: the loops' last tensor)
    gc.collect()
    st = cli.stat()
    assert st["pinned_chunks"] == 1, f"one tensor is still held: {st}"
    assert evicted(cli, spec.name) == chunks - 1
    assert np.array_equal(some.numpy(), spec.expected(HELD[0]))
    del some
    gc.collect()
    assert cli.stat()["pinned_chunks"] == 0
    assert evicted(cli, spec.name) == 1
    assert cli.stat()["resident_chunks"] == 0


def test_view_needs_local(small_cache):
    """A connection that does not map the pool reads, but has no views."""
    b, spec = small_cache
    with Broker(local=False) as br:
        assert not br.is_local
        ds = br.open(spec.name)
        buf = bytearray(ds.sample_len(3))
        ds.read_into(3, buf)
        assert bytes(buf) == spec.expected(3).tobytes()
        with pytest.raises(BrokerError):
            ds.view(3)
    with Broker() as br:
        assert br.is_local


WRITER = """
import sys
from ucx_cxl.data import CXLDataset
t = CXLDataset(sys.argv[1], copy=False)[int(sys.argv[2])]
t[0] = int(t[0]) ^ 0xff
print("written")
"""


def test_view_write_faults(datasets):
    """A tensor cannot be read-only: a write through a zero-copy one must
    fault (views use a read-only mapping of the arena), not change the
    chunk for every reader."""
    spec = datasets["files"]
    i = 3
    p = subprocess.run([sys.executable, "-c", WRITER, spec.name, str(i)],
                       capture_output=True, text=True, timeout=120)
    assert "written" not in p.stdout, "a write through a view went through"
    assert p.returncode in (-signal.SIGSEGV, -signal.SIGBUS), \
        f"exit {p.returncode}: {p.stderr[-2000:]}"
    assert np.array_equal(CXLDataset(spec.name)[i].numpy(), spec.expected(i))


def test_no_readonly_warning(small_cache):
    """Views are read-only arrays, which torch.from_numpy warns about (once
    per process in torch 1.13): no warning reaches the user, neither on the
    first view nor on later ones.  In a fresh interpreter with warnings as
    errors, as this session's earlier views have already used up torch's
    one warning."""
    _b, spec = small_cache
    code = ("from ucx_cxl.data import CXLDataset; "
            f"ds = CXLDataset({spec.name!r}, copy=False); "
            "ts = [ds[i] for i in range(5)]; "
            "print(sum(int(t.sum()) for t in ts))")
    r = subprocess.run([sys.executable, "-W", "error", "-c", code],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Warning" not in r.stderr, r.stderr[-2000:]
    want = sum(int(spec.expected(i).sum()) for i in range(5))  # uint8 arrays
    assert int(r.stdout.split()[-1]) == want
