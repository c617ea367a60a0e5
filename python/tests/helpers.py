"""What the tests share with the processes they start (DataLoader workers
under ``spawn`` and the resume child import this module by name, so it
holds only module-level, picklable things).
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import time
from typing import Any, Dict, List, Sequence

import numpy as np


def collate_list(batch: List[Any]) -> List[Any]:
    """Samples of a batch as a list (their shapes and types differ)."""
    return batch


def as_numpy(sample: Any) -> np.ndarray:
    if hasattr(sample, "numpy"):
        return sample.numpy()
    return np.asarray(sample)


def digest(sample: Any) -> str:
    """A stable identity of a decoded sample: its type, dtype, shape, bytes."""
    h = hashlib.sha1()
    if isinstance(sample, dict):
        h.update(b"dict")
        for k in sorted(sample):
            h.update(k.encode() + b"\0" + hashlib.sha1(sample[k]).digest())
    elif isinstance(sample, (bytes, bytearray)):
        h.update(b"bytes" + bytes(sample))
    else:
        a = as_numpy(sample)
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def same(sample: Any, expected: Any) -> bool:
    """sample (tensor / array / dict of bytes) equals expected exactly:
    dtype and shape included."""
    if isinstance(expected, dict):
        return isinstance(sample, dict) and sample.keys() == expected.keys() \
            and all(bytes(sample[k]) == expected[k] for k in expected)
    a = as_numpy(sample)
    return a.dtype == expected.dtype and a.shape == expected.shape and \
        np.array_equal(a, expected)


def ucx_env(**kw: str) -> Dict[str, str]:
    """The environment for the C programs: UCX warns on stdout about every
    UCX_* variable it does not know, ucx_cxl's CXL_LIBDIR included."""
    env = dict(os.environ, **kw)
    env.pop("CXL_LIBDIR", None)
    return env


class Cli:
    """build-release/cxl-broker, for one broker address."""

    def __init__(self, bindir: str, libdir: str, addr: str) -> None:
        self.exe = os.path.join(bindir, "cxl-broker")
        self.preload = os.path.join(libdir, "libuct_cxl.so")
        self.addr = addr

    def run(self, *args: str, check: bool = True) -> str:
        env = ucx_env(CXL_BROKER=self.addr, LD_PRELOAD=self.preload)
        p = subprocess.run([self.exe, *args], env=env, capture_output=True,
                           text=True, timeout=120)
        if check and p.returncode != 0:
            raise RuntimeError(f"cxl-broker {' '.join(args)}: exit "
                               f"{p.returncode}: {p.stderr.strip()}")
        return p.stdout

    def stat(self) -> Dict[str, Any]:
        import json
        return json.loads(self.run("stat", "--json"))

    def ls(self) -> Dict[str, Dict[str, Any]]:
        import json
        return {d["name"]: d for d in json.loads(self.run("ls", "--json"))
                if d["active"]}


class BrokerProc:
    """A `cxl-broker serve` on its own pool, in its own process.

    The broker (a C program over UCX 1.13) needs libuct_cxl.so preloaded;
    the Python processes do not (ucx_cxl._lib loads it).
    """

    def __init__(self, bindir: str, libdir: str, workdir: str, name: str,
                 capacity: str = "64m", pool_size: str = "512m",
                 pooldir: str = "", args: Sequence[str] = ()) -> None:
        self.bindir, self.libdir, self.workdir = bindir, libdir, workdir
        self.args = list(args)          # more `cxl-broker serve` options
        self.name = name
        self.pool = os.path.join(pooldir or workdir, f"{name}.pool")
        self.capacity, self.pool_size = capacity, pool_size
        self.proc = None
        self.addr = None
        self.out = os.path.join(workdir, f"{name}.out")
        self.err = os.path.join(workdir, f"{name}.err")
        r = subprocess.run([os.path.join(bindir, "cxlpool"), "create",
                            "--size", pool_size, self.pool],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"cxlpool create {self.pool}: {r.stderr}")

    def start(self, port: int, tries: int = 20) -> "BrokerProc":
        """Serve on the first free port from ``port`` (the address may be
        taken by another session's process)."""
        last = ""
        for k in range(tries):
            p = port + k
            if self._start_at(p):
                return self
            last = self.log()
        raise RuntimeError(f"cxl-broker {self.name} did not start: {last}")

    def _start_at(self, port: int) -> bool:
        addr = f"127.0.0.1:{port}"
        env = ucx_env(LD_PRELOAD=os.path.join(self.libdir, "libuct_cxl.so"),
                      UCX_CXL_POOL=self.pool)
        with open(self.out, "w") as out, open(self.err, "w") as err:
            self.proc = subprocess.Popen(
                [os.path.join(self.bindir, "cxl-broker"), "serve", "--pool",
                 self.pool, "--listen", addr, "--capacity", self.capacity,
                 *self.args],
                stdout=out, stderr=err, env=env, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with open(self.out) as f:
                if re.search(r"^cxl-broker: ready", f.read(), re.M):
                    self.addr = addr
                    self.cli = Cli(self.bindir, self.libdir, addr)
                    return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"cxl-broker {self.name}: no 'ready' line within "
                           f"60 s: {self.log()}")

    def log(self) -> str:
        text = ""
        for p in (self.out, self.err):
            if os.path.exists(p):
                with open(p) as f:
                    text += f.read()
        return text[-4000:]

    def stop(self) -> int:
        """SIGTERM, then SIGKILL after 20 s; returns the exit status."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        rc = self.proc.returncode
        self.proc = None
        return rc

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def destroy(self) -> None:
        self.kill()
        for p in (self.pool,):
            if os.path.exists(p):
                os.unlink(p)


def rollup(pid: int) -> Dict[str, int]:
    """/proc/PID/smaps_rollup in KiB: Pss, Pss_Anon, Private_Dirty, ..."""
    out: Dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            k, _, rest = line.partition(":")
            v = rest.split()
            if v and v[0].isdigit():
                out[k] = int(v[0])
    return out

