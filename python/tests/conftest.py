"""The broker and the datasets the tests read.

One ``cxl-broker serve`` for the session, on a pool in a temporary
directory under /dev/shm (build-release/cxlpool create), listening on 127.0.0.1 at a port
derived from this process's id; UCX_CXL_POOL and CXL_BROKER point the
tests (and the processes they start) at it.  The binaries are in
$CXL_BUILDDIR (default REPO/build-release); the libraries in
$CXL_LIBDIR (default $CXL_BUILDDIR/.libs).

Datasets, one per format, written here with random contents and added
through ``ucx_cxl.Broker.add``; ``Spec.expected(i)`` is sample i as the
dataset should decode it, read back from the source files (not from what
was generated), so a scanner or decoder that reorders, drops or changes
samples is caught.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import pytest

from helpers import BrokerProc

REPO = Path(__file__).resolve().parents[2]
BUILDDIR = Path(os.environ.get("CXL_BUILDDIR", REPO / "build-release"))
LIBDIR = Path(os.environ.get("CXL_LIBDIR", BUILDDIR / ".libs"))
os.environ.setdefault("CXL_LIBDIR", str(LIBDIR))
# the processes the tests start import ucx_cxl and helpers too
_pp = [str(REPO / "python"), str(Path(__file__).resolve().parent)]
os.environ["PYTHONPATH"] = os.pathsep.join(
    _pp + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
           if p and p not in _pp])
# the main broker's port, from the pid; spares count down from it
PORT = 20000 + (os.getpid() * 7) % 20000


def pytest_report_header(config):
    return f"ucx_cxl: build {BUILDDIR}, libraries {LIBDIR}"


# the session's broker, for the report of a failed test
_main_broker: List[BrokerProc] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test's report ends with the session broker's log: what the
    broker saw (clients, drops, errors) is what explains a failure that
    shows up only in CI."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and _main_broker:
        rep.sections.append(("cxl-broker serve (main): log tail",
                             _main_broker[0].log()))


@pytest.fixture(scope="session")
def workdir():
    d = tempfile.mkdtemp(prefix="ucx-cxl-pytest.")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def pooldir():
    """Pools under /dev/shm: the transport's wake-up events need a pool that
    cannot span hosts (an emulated one); on a pool file elsewhere a broker
    that sleeps sees each request only at its 100 ms tick."""
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
    d = tempfile.mkdtemp(prefix="ucx-cxl-pytest.", dir=base)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def broker(workdir, pooldir):
    """The session's broker; its address and pool in os.environ."""
    for exe in ("cxlpool", "cxl-broker"):
        if not (BUILDDIR / exe).exists():
            pytest.exit(f"{BUILDDIR / exe} not found: build first "
                        "(contrib/build.sh release) or set CXL_BUILDDIR", 99)
    b = BrokerProc(str(BUILDDIR), str(LIBDIR), str(workdir), "main",
                   capacity="128m", pooldir=pooldir)
    b.start(PORT)
    _main_broker.append(b)
    saved = {k: os.environ.get(k) for k in ("UCX_CXL_POOL", "CXL_BROKER")}
    os.environ["UCX_CXL_POOL"] = b.pool
    os.environ["CXL_BROKER"] = b.addr
    yield b
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    rc = b.stop()
    _main_broker.clear()
    b.destroy()
    assert rc == 0, f"the broker exited {rc} at SIGTERM: {b.log()}"


_spare_port = [PORT - 100]


@pytest.fixture
def spare_broker(workdir, pooldir):
    """A factory of brokers of their own (own pool, capacity), for tests
    that kill one or need a small cache; stopped at the test's end."""
    made: List[BrokerProc] = []

    def make(capacity: str = "16m", pool_size: str = "128m",
             args: Sequence[str] = ()) -> BrokerProc:
        b = BrokerProc(str(BUILDDIR), str(LIBDIR), str(workdir),
                       f"spare{len(made)}.{_spare_port[0]}", capacity=capacity,
                       pool_size=pool_size, pooldir=pooldir, args=args)
        made.append(b)
        _spare_port[0] -= 1
        b.start(_spare_port[0])
        return b

    yield make
    for b in made:
        b.stop()
        b.destroy()


# -- datasets --

@dataclass
class Spec:
    name: str
    format: str
    paths: List[str]
    n: int = 0
    version: int = 0
    chunks: int = 0
    record_size: int = 0
    _cache: Optional[List[Any]] = field(default=None, repr=False)

    def expected(self, i: int) -> Any:
        """Sample i decoded as CXLDataset should give it, from the files."""
        if self._cache is None:
            self._cache = READERS[self.format](self)
        return self._cache[i]

    def all(self) -> List[Any]:
        return [self.expected(i) for i in range(self.n)]


def _read_files(spec: Spec) -> List[Any]:
    root = Path(spec.paths[0])
    rel = sorted((p.relative_to(root).as_posix().encode(), p)
                 for p in root.rglob("*") if p.is_file())
    return [np.frombuffer(p.read_bytes(), dtype=np.uint8) for _, p in rel]


def _read_npy(spec: Spec) -> List[Any]:
    out = []
    for p in spec.paths:
        a = np.load(p)
        out += [np.array(a[k]) for k in range(a.shape[0])]
    return out


def _read_tar(spec: Spec) -> List[Any]:
    out: List[Dict[str, bytes]] = []
    for p in spec.paths:
        key = None
        with tarfile.open(p) as tf:
            for m in tf:
                if not m.isfile():
                    continue
                base = m.name.rsplit("/", 1)[-1]
                k = m.name[:len(m.name) - len(base)] + base.split(".", 1)[0]
                ext = base.split(".", 1)[1] if "." in base else ""
                if k != key:
                    out.append({})
                    key = k
                out[-1][ext] = tf.extractfile(m).read()
    return out


def _read_raw(spec: Spec) -> List[Any]:
    out = []
    for p in spec.paths:
        data = Path(p).read_bytes()
        r = spec.record_size
        out += [np.frombuffer(data[k:k + r], dtype=np.uint8)
                for k in range(0, len(data), r)]
    return out


READERS = {"files": _read_files, "npy": _read_npy, "tar": _read_tar,
           "raw": _read_raw}


def add(spec: Spec, **kw: Any) -> Spec:
    from ucx_cxl import Broker
    with Broker() as b:
        r = b.add(spec.name, spec.paths, format=spec.format,
                  record_size=spec.record_size, **kw)
    spec.n, spec.version, spec.chunks = r["samples"], r["version"], r["chunks"]
    assert spec.n == len(READERS[spec.format](spec)), \
        f"{spec.name}: the broker counts {spec.n} samples"
    return spec


def make_files(d: Path, rng: np.random.Generator, n: int) -> None:
    """n files of random lengths (one empty), some in a subdirectory;
    'a.bin' < 'a/x' bytewise."""
    (d / "a").mkdir(parents=True)
    for k in range(n):
        name = f"f{k:03d}.bin" if k % 5 else f"a/f{k:03d}.bin"
        size = 0 if k == 7 else int(rng.integers(1, 9000))
        (d / name).write_bytes(rng.bytes(size))
    (d / "a.bin").write_bytes(rng.bytes(333))


def make_npy(d: Path, rng: np.random.Generator) -> List[str]:
    d.mkdir(parents=True)
    arrays = {"a.npy": rng.standard_normal((40, 3, 8, 8)).astype(np.float32),
              "b.npy": rng.integers(-2**62, 2**62, (60, 16), dtype=np.int64),
              "c.npy": rng.standard_normal((25, 3, 8, 8)).astype(np.float32)}
    for name, a in arrays.items():
        np.save(d / name, a)
    return [str(d / name) for name in sorted(arrays)]


def make_tar(d: Path, rng: np.random.Generator, shards: int = 2,
             keys: int = 40) -> List[str]:
    """WebDataset shards: per key a .jpg (random bytes) and a .cls."""
    d.mkdir(parents=True)
    paths = []
    for s in range(shards):
        p = d / f"shard-{s:04d}.tar"
        with tarfile.open(p, "w", format=tarfile.USTAR_FORMAT) as tf:
            for k in range(keys):
                key = f"sample{s:02d}{k:04d}"
                for ext, data in (("jpg", rng.bytes(int(rng.integers(10, 3000)))),
                                  ("cls", str(int(rng.integers(0, 1000))).encode())):
                    ti = tarfile.TarInfo(f"{key}.{ext}")
                    ti.size = len(data)
                    ti.mtime = 1700000000
                    tf.addfile(ti, io.BytesIO(data))
        paths.append(str(p))
    return paths


def make_raw(d: Path, rng: np.random.Generator, record: int,
             counts: List[int]) -> List[str]:
    d.mkdir(parents=True)
    paths = []
    for k, c in enumerate(counts):
        p = d / f"part{k}.raw"
        p.write_bytes(rng.bytes(record * c))
        paths.append(str(p))
    return paths


@pytest.fixture(scope="session")
def datasets(broker, workdir) -> Dict[str, Spec]:
    """One dataset per format, several chunks each."""
    rng = np.random.Generator(np.random.PCG64(1234))
    make_files(workdir / "files", rng, 50)
    out = {
        "files": add(Spec("t-files", "files", [str(workdir / "files")]),
                     chunk_size=32 << 10),
        "npy": add(Spec("t-npy", "npy", make_npy(workdir / "npy", rng)),
                   chunk_size=16 << 10),
        "tar": add(Spec("t-tar", "tar", make_tar(workdir / "tar", rng)),
                   chunk_size=16 << 10),
        "raw": add(Spec("t-raw", "raw", make_raw(workdir / "raw", rng, 96,
                                                 [600, 601]),
                        record_size=96), chunk_size=16 << 10),
    }
    for s in out.values():
        assert s.chunks > 2, f"{s.name}: {s.chunks} chunks, want several"
    return out


@pytest.fixture(scope="session")
def cli(broker):
    return broker.cli
