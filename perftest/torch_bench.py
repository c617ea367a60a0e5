#!/usr/bin/python3
"""torch_bench.py - a training loop's data path: CXLDataset against the
datasets PyTorch users write, one measurement per call.

perftest/run-torch-bench.sh drives it (pool, broker, datasets, the
alternating repetitions, the report); the subcommands can also be run by
hand (PYTHONPATH=python, UCX_CXL_POOL, CXL_BROKER set):

  gen DIR --small N:BYTES --large N:BYTES
      DIR/small/s%06d.bin, DIR/small.npy (the same samples as rows),
      DIR/large/..., DIR/large.npy; pseudo-random bytes (seeded)
  epoch --set small|large --mode MODE --data DIR --name NAME
        [--workers 0,1,2,4] [--warm 3] [--batch 64] [--rep R] [--csv F]
        [--no-cold] [--cold-workers LIST] [--check] [--cli CXL-BROKER]
      per worker count: a cold epoch (the broker's copy evicted with
      `cxl-broker evict NAME`, the page cache dropped; where the count is
      not in --cold-workers an uncounted "first" epoch instead), then
      --warm warm epochs, one DataLoader (persistent workers) for all of
      them; one CSV row per epoch (header: COLUMNS below)
  memcpy [--block 1M] [--buf BYTES] [--csv F]
      the copy limit: numpy copies of 1 MiB blocks out of a buffer
      bigger than the last-level cache, single thread; also the touch
      limit (the loop's own int64 sum over the same blocks)
  profile --set small --mode cxl|cxl-batch --data DIR --name NAME --out F
      cProfile of one warm epoch in the main process (num_workers 0)
  cuda --set small|large --data DIR --name NAME [--csv F] [--check]
  (or epoch --device cuda ...)
      to the GPU: CXLDataset reads into a StagingRing slot (pinned) and
      cudaMemcpyAsync to device memory, against the baseline
      pin_memory=True + .cuda() (with a torch built without CUDA, as
      Debian's: the same path through cudart, pageable batch -> pinned
      copy -> cudaMemcpyAsync, into cudaMalloc'd memory); exits 77 with
      cuda_status()'s message where there is no usable GPU

Modes: cxl (CXLDataset, copy=True, in a DataLoader as users write it:
batch_size, default collate; torch calls CXLDataset.__getitems__, one
read_batch per batch), cxl-item (the same with __getitems__ disabled:
__getitem__ per sample, as before the batch path), cxl-batch (the batch
path: DataLoader(batch_size=None, sampler=BatchSampler(...)), the
batch stacked by the reads, no collate), cxl-nocopy (copy=False, zero-copy views; large
set), files (a map-style Dataset that reads the sample's file with
np.fromfile), pread (one big file, os.preadv of the record into a fresh
array), npy (np.load(mmap_mode='r'), a row copied out).  The small set
is read in batches (--batch, default_collate), the large set sample by
sample (batch_size=None: no stacking copy of 1 MiB samples).  The loop
touches every byte: an int64 sum of each batch (--check: a CRC32 of each
sample compared with the file's, every sample exactly once per epoch).
"""

from __future__ import annotations

import argparse
import csv
import gc
import json
import os
import subprocess
import sys
import threading
import time
import zlib
from typing import Dict, List, Optional

import numpy as np

COLUMNS = ["set", "mode", "workers", "rep", "kind", "epoch", "samples",
           "bytes", "seconds", "samples_per_s", "gb_per_s", "pss_peak_mib",
           "pss_mean_mib", "pss_pool_mib", "nproc", "pss_samples",
           "fill_bytes", "evicted", "resident_after_evict", "dropped",
           "check", "load1"]

SETS = ("small", "large")
# in the order of a repetition: cxl, baseline, cxl, baseline, ...
MODES = {"small": ("cxl-item", "files", "cxl", "npy", "cxl-batch", "pread"),
         "large": ("cxl", "files", "cxl-nocopy", "npy", "pread")}
CXL_MODES = ("cxl-item", "cxl", "cxl-batch", "cxl-nocopy")
BASELINES = ("files", "pread", "npy")


def size_arg(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s and s[-1] in mult:
        return int(float(s[:-1]) * mult[s[-1]])
    if s.endswith("IB") and s[-3] in mult:
        return int(float(s[:-3]) * mult[s[-3]])
    return int(s)


# ---------------------------------------------------------------------------
# datasets on disk
# ---------------------------------------------------------------------------

def gen(args) -> int:
    for setname, spec in (("small", args.small), ("large", args.large)):
        n, nbytes = spec.split(":")
        n, nbytes = int(n), size_arg(nbytes)
        d = os.path.join(args.dir, setname)
        os.makedirs(d, exist_ok=True)
        rng = np.random.Generator(np.random.PCG64(1234 + len(setname)))
        mm = np.lib.format.open_memmap(os.path.join(args.dir, setname + ".npy"),
                                       mode="w+", dtype=np.uint8,
                                       shape=(n, nbytes))
        step = max(1, (64 << 20) // nbytes)
        for a in range(0, n, step):
            b = min(n, a + step)
            block = rng.integers(0, 256, size=(b - a, nbytes), dtype=np.uint8)
            mm[a:b] = block
            for k in range(b - a):
                with open(os.path.join(d, f"s{a + k:06d}.bin"), "wb") as f:
                    f.write(block[k].tobytes())
        mm.flush()
        del mm
        print(f"torch_bench: {setname}: {n} samples of {nbytes} B in {d} "
              f"and {d}.npy")
    return 0


def ref_paths(data: str, setname: str) -> List[str]:
    d = os.path.join(data, setname)
    return sorted(os.path.join(d, f) for f in os.listdir(d))


def npy_header(path: str):
    """(data offset, rows, row bytes) of a 2-D uint8 .npy file."""
    with open(path, "rb") as f:
        version = np.lib.format.read_magic(f)
        shape, _, dtype = np.lib.format._read_array_header(f, version)
        return f.tell(), shape[0], int(np.prod(shape[1:])) * dtype.itemsize


# ---------------------------------------------------------------------------
# the baselines: what PyTorch users write
# ---------------------------------------------------------------------------

def baseline_classes():
    import torch
    from torch.utils.data import Dataset

    class FilesDataset(Dataset):
        """One file per sample; the paths in a list."""

        def __init__(self, paths: List[str]) -> None:
            self.paths = paths

        def __len__(self) -> int:
            return len(self.paths)

        def __getitem__(self, i: int):
            return torch.from_numpy(np.fromfile(self.paths[i], dtype=np.uint8))

    class PreadDataset(Dataset):
        """Fixed-size records in one big file, read with pread."""

        def __init__(self, path: str) -> None:
            self.path = path
            self.off, self.n, self.rec = npy_header(path)
            self.fd, self.pid = -1, None

        def __len__(self) -> int:
            return self.n

        def __getitem__(self, i: int):
            if self.pid != os.getpid():
                self.fd, self.pid = os.open(self.path, os.O_RDONLY), os.getpid()
            buf = np.empty(self.rec, dtype=np.uint8)
            got = os.preadv(self.fd, [buf], self.off + i * self.rec)
            if got != self.rec:
                raise IOError(f"{self.path}: record {i}: {got} bytes")
            return torch.from_numpy(buf)

        def __getstate__(self):
            st = self.__dict__.copy()
            st["fd"], st["pid"] = -1, None
            return st

    class NpyDataset(Dataset):
        """np.load(mmap_mode='r'), a row copied out per sample."""

        def __init__(self, path: str) -> None:
            self.path = path
            self.n = npy_header(path)[1]
            self.arr = None

        def __len__(self) -> int:
            return self.n

        def __getitem__(self, i: int):
            if self.arr is None:
                self.arr = np.load(self.path, mmap_mode="r")
            return torch.from_numpy(np.array(self.arr[i]))

        def __getstate__(self):
            st = self.__dict__.copy()
            st["arr"] = None
            return st

    return FilesDataset, PreadDataset, NpyDataset


def make_dataset(mode: str, args):
    FilesDataset, PreadDataset, NpyDataset = baseline_classes()
    if mode == "files":
        return FilesDataset(ref_paths(args.data, args.set))
    if mode == "pread":
        return PreadDataset(os.path.join(args.data, args.set + ".npy"))
    if mode == "npy":
        return NpyDataset(os.path.join(args.data, args.set + ".npy"))
    from ucx_cxl.data import CXLDataset
    if mode == "cxl-item":
        class ItemOnly(CXLDataset):
            __getitems__ = None     # torch's fetcher: one __getitem__ a sample
        return ItemOnly(args.name)
    return CXLDataset(args.name, copy=(mode != "cxl-nocopy"))


class Indexed:
    """--check: the dataset's samples with their indices."""

    def __init__(self, ds, batched: bool) -> None:
        self.ds, self.batched = ds, batched

    def __len__(self) -> int:
        return len(self.ds)

    def __getitem__(self, i):
        import torch
        if self.batched:
            return torch.as_tensor(np.asarray(i, dtype=np.int64)), self.ds[i]
        return i, self.ds[i]


def make_loader(ds, mode: str, args, nw: int, seed: int):
    """(loader, whether each item is one sample rather than a batch)."""
    import torch
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler
    g = torch.Generator()
    g.manual_seed(seed)
    sampler = RandomSampler(ds, generator=g)
    kw = dict(num_workers=nw, persistent_workers=nw > 0)
    if mode == "cxl-batch":
        return DataLoader(Indexed(ds, True) if args.check else ds, batch_size=None,
                          sampler=BatchSampler(sampler, args.batch, drop_last=False),
                          **kw), False
    if args.set == "large":
        return DataLoader(Indexed(ds, False) if args.check else ds,
                          batch_size=None, sampler=sampler, **kw), True
    return DataLoader(Indexed(ds, False) if args.check else ds,
                      batch_size=args.batch, sampler=sampler, **kw), False


# ---------------------------------------------------------------------------
# memory of the loader's processes
# ---------------------------------------------------------------------------

def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pool_pss_kib(pid: int, pool: str) -> int:
    """Pss of this process's mappings of the pool file."""
    total, inpool = 0, False
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for line in f:
                first = line.split(None, 1)[0]
                if "-" in first and not first.endswith(":"):
                    inpool = line.rstrip().endswith(pool)
                elif inpool and line.startswith("Pss:"):
                    total += int(line.split()[1])
    except OSError:
        pass
    return total


def loader_pids() -> List[int]:
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        kids = []
    # only python children (workers); not a `cxl-broker stat` in flight
    out = [me]
    for k in kids:
        try:
            with open(f"/proc/{k}/comm") as f:
                if f.read().strip().startswith("python"):
                    out.append(k)
        except OSError:
            pass
    return out


class PssSampler:
    """PSS summed over the main process and its workers, every `every` s."""

    def __init__(self, every: float = 0.05) -> None:
        self.every = every
        self.samples: List[int] = []
        self.nproc = 0
        self._stop = threading.Event()
        self._t: Optional[threading.Thread] = None

    def sample(self) -> None:
        pids = loader_pids()
        self.nproc = max(self.nproc, len(pids))
        self.samples.append(sum(_pss_kib(p) for p in pids))

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self) -> "PssSampler":
        self.sample()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()
        self.sample()


# ---------------------------------------------------------------------------
# cold: the broker's copy evicted, the page cache dropped
# ---------------------------------------------------------------------------

def broker_stat(cli: Optional[str]) -> Dict:
    if not cli:
        return {}
    env = dict(os.environ)
    mod = os.path.join(env.pop("CXL_LIBDIR", ""), "libuct_cxl.so")
    if os.path.exists(mod):
        env["LD_PRELOAD"] = mod     # UCX 1.13 loads no module by itself
    r = subprocess.run([cli, "stat", "--json"], capture_output=True, text=True,
                       env=env, timeout=60)
    for line in r.stdout.splitlines():  # UCX's warnings go to stdout too
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    print(f"torch_bench: {cli} stat --json: rc {r.returncode}: "
          f"{(r.stderr or r.stdout).strip()[-200:]}", file=sys.stderr)
    return {}


def make_cold(mode: str, args) -> Dict[str, object]:
    """Evict the dataset (cxl modes) and drop the page cache."""
    out: Dict[str, object] = {"evicted": "", "resident": "", "dropped": 0}
    if mode in CXL_MODES:
        from ucx_cxl import _lib
        from ucx_cxl.broker import Broker
        resident, evicted = -1, 0
        for attempt in range(50):
            with Broker() as b:
                evicted += b.evict(args.name)
                out["evicted"] = evicted
                ds = b.open(args.name)
                info = _lib._DsInfo()
                _lib.lib().cxl_broker_ds_info(ds._h, info)
                resident = int(info.resident_chunks)
                ds.close()
            if resident == 0:
                break
            time.sleep(0.1)     # pins of workers that just went away
        out["resident"] = resident
    subprocess.run(["sync"])
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        out["dropped"] = 1
    except OSError as e:
        if not getattr(make_cold, "_warned", False):
            print(f"torch_bench: cannot drop the page cache ({e}): the cold "
                  "epochs read files from the page cache", file=sys.stderr)
            make_cold._warned = True
    return out


# ---------------------------------------------------------------------------
# the loop
# ---------------------------------------------------------------------------

class Checker:
    def __init__(self, args, ds, mode: str) -> None:
        paths = ref_paths(args.data, args.set)
        self.crc = np.array([zlib.crc32(open(p, "rb").read()) for p in paths],
                            dtype=np.uint64)
        self.errors: List[str] = []
        if mode in CXL_MODES:
            h = ds.handle
            if h.nsamples != len(paths):
                self.errors.append(f"broker has {h.nsamples} samples, "
                                   f"the files {len(paths)}")
            else:
                for i in range(h.nsamples):
                    if os.path.realpath(h.sample_path(i)) != os.path.realpath(paths[i]):
                        self.errors.append(f"sample {i} is {h.sample_path(i)}, "
                                           f"expected {paths[i]}")
                        break
            ds.close()      # the loader's workers connect on their own
        self.seen = np.zeros(len(paths), dtype=np.int64)
        self.inject = getattr(args, "inject_error", False)
        self.injected = False

    def batch(self, idx, data) -> None:
        import torch
        if isinstance(idx, torch.Tensor):
            idx = idx.reshape(-1).tolist()
        elif not isinstance(idx, (list, tuple)):
            idx = [int(idx)]
        rows = data if isinstance(data, (list, tuple)) else \
            (data.reshape(len(idx), -1) if data.dim() > 1 or len(idx) > 1 else [data])
        for i, row in zip(idx, rows):
            b = np.ascontiguousarray(row.numpy()).tobytes()
            if self.inject and not self.injected:
                b = bytes([b[0] ^ 1]) + b[1:]     # negative control
                self.injected = True
            c = zlib.crc32(b)
            if c != int(self.crc[i]) and len(self.errors) < 10:
                self.errors.append(f"sample {i}: crc {c:08x}, file {int(self.crc[i]):08x}")
            self.seen[i] += 1

    def epoch_done(self) -> str:
        bad = np.flatnonzero(self.seen != 1)
        if bad.size and len(self.errors) < 10:
            self.errors.append(f"{bad.size} samples not read exactly once "
                               f"(sample {bad[0]}: {self.seen[bad[0]]} times)")
        self.seen[:] = 0
        self.injected = False
        msg = "ok" if not self.errors else "FAIL " + "; ".join(self.errors)
        self.errors = []
        return msg


def touch(batch) -> int:
    """Read every byte: an int64 sum (uint8 batches of 8-byte multiples)."""
    import torch
    if batch.numel() % 8 == 0 and batch.is_contiguous():
        return int(batch.view(-1).view(torch.int64).sum())
    return int(batch.sum())


def run_epoch(loader, per_sample: bool, checker: Optional[Checker]):
    """Samples and bytes of one epoch (the time is taken by the caller)."""
    n = nbytes = s = 0
    for item in loader:
        if checker is not None:
            idx, data = item
            checker.batch(idx, data)
        else:
            data = item
        s += touch(data)
        n += 1 if per_sample else data.shape[0]
        nbytes += data.numel() * data.element_size()
    return n, nbytes, s


def epoch_cmd(args) -> int:
    if args.device == "cuda":
        return cuda_cmd(args)
    import warnings
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    workers = [int(w) for w in args.workers.split(",") if w != ""]
    cold_workers = None if args.cold_workers in ("", "all") else \
        {int(w) for w in args.cold_workers.split(",") if w != ""}
    mode = args.mode
    if mode not in MODES[args.set]:
        print(f"torch_bench: mode {mode} not in {MODES[args.set]}", file=sys.stderr)
        return 2
    ds = make_dataset(mode, args)
    checker = Checker(args, ds, mode) if args.check else None
    if mode in CXL_MODES:
        ds.close()
    rows = []
    pool = os.environ.get("UCX_CXL_POOL", "")
    failed = 0
    for nw in workers:
        loader, per_sample = make_loader(ds, mode, args, nw, seed=1000 + args.rep)
        # a cold epoch, or (no cold one at this num_workers) a first epoch
        # that starts the workers and is not counted as warm
        cold_here = not args.no_cold and (cold_workers is None or nw in cold_workers)
        kinds = ["cold" if cold_here else "first"] + ["warm"] * args.warm
        for e, kind in enumerate(kinds):
            cold = {"evicted": "", "resident": "", "dropped": ""}
            fill0 = None
            if kind == "cold":
                if mode in CXL_MODES:
                    ds.close()      # this process's pins, if it read (nw 0)
                cold = make_cold(mode, args)
                if mode in CXL_MODES:
                    fill0 = broker_stat(args.cli).get("fill_bytes")
            gc.collect()
            with PssSampler() as pss:
                t0 = time.perf_counter()
                n, nbytes, _ = run_epoch(loader, per_sample, checker)
                dt = time.perf_counter() - t0
                pool_kib = sum(_pool_pss_kib(p, pool) for p in loader_pids()) \
                    if pool and mode in CXL_MODES else 0
            fill = ""
            if fill0 is not None:
                f1 = broker_stat(args.cli).get("fill_bytes")
                fill = (f1 - fill0) if f1 is not None else ""
            check = checker.epoch_done() if checker else ""
            if check.startswith("FAIL"):
                failed += 1
            if n != len(ds):
                check = (check + "; " if check else "FAIL ") + \
                    f"{n} samples delivered of {len(ds)}"
                failed += 1
            row = {
                "set": args.set, "mode": mode, "workers": nw, "rep": args.rep,
                "kind": kind, "epoch": e, "samples": n, "bytes": nbytes,
                "seconds": f"{dt:.6f}", "samples_per_s": f"{n / dt:.1f}",
                "gb_per_s": f"{nbytes / dt / 1e9:.4f}",
                "pss_peak_mib": f"{max(pss.samples) / 1024:.1f}",
                "pss_mean_mib": f"{sum(pss.samples) / len(pss.samples) / 1024:.1f}",
                "pss_pool_mib": f"{pool_kib / 1024:.1f}",
                "nproc": pss.nproc, "pss_samples": len(pss.samples),
                "fill_bytes": fill, "evicted": cold["evicted"],
                "resident_after_evict": cold["resident"],
                "dropped": cold["dropped"], "check": check,
                "load1": f"{os.getloadavg()[0]:.2f}"}
            rows.append(row)
            print(f"torch_bench: {args.set} {mode} workers {nw} {kind} "
                  f"{n / dt:10.0f} samples/s {nbytes / dt / 1e9:7.3f} GB/s "
                  f"PSS {row['pss_peak_mib']} MiB{' ' + check if check else ''}",
                  flush=True)
        del loader
        gc.collect()
    if mode in CXL_MODES:
        ds.close()
    write_rows(args.csv, rows)
    return 1 if failed else 0


def write_rows(path: Optional[str], rows: List[Dict]) -> None:
    if not path:
        w = csv.DictWriter(sys.stdout, COLUMNS)
        w.writeheader()
        w.writerows(rows)
        return
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        if new:
            w.writeheader()
        w.writerows(rows)


# ---------------------------------------------------------------------------
# the memcpy limit
# ---------------------------------------------------------------------------

def llc_bytes() -> int:
    best = 0
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for ix in os.listdir(base):
            try:
                with open(os.path.join(base, ix, "size")) as f:
                    best = max(best, size_arg(f.read().strip()))
            except (OSError, ValueError):
                pass
    except OSError:
        pass
    return best


def memcpy_cmd(args) -> int:
    import torch
    torch.set_num_threads(1)
    block = size_arg(args.block)
    llc = llc_bytes()
    size = size_arg(args.buf) if args.buf else max(256 << 20, min(2 * llc, 1 << 30))
    size -= size % block
    src = np.empty(size, dtype=np.uint8)
    src[:] = 1                     # fault every page in
    dst = np.empty(block, dtype=np.uint8)
    nblk = size // block
    rows = []
    for what in ("memcpy", "touch"):
        rates = []
        for p in range(args.passes):
            t0 = time.perf_counter()
            if what == "memcpy":
                for k in range(nblk):
                    np.copyto(dst, src[k * block:(k + 1) * block])
            else:
                tt = torch.from_numpy(src)
                for k in range(nblk):
                    int(tt[k * block:(k + 1) * block].view(torch.int64).sum())
            rates.append(size / (time.perf_counter() - t0) / 1e9)
        rates.sort()
        rows.append({"figure": what, "block": block, "buffer": size, "llc": llc,
                     "passes": args.passes, "median_gb_per_s": f"{rates[len(rates) // 2]:.3f}",
                     "min_gb_per_s": f"{rates[0]:.3f}", "max_gb_per_s": f"{rates[-1]:.3f}"})
        print(f"torch_bench: {what} {block} B blocks out of {size >> 20} MiB "
              f"(LLC {llc >> 20} MiB): {rates[len(rates) // 2]:.2f} GB/s "
              f"[{rates[0]:.2f}-{rates[-1]:.2f}]", flush=True)
    cols = list(rows[0].keys())
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, cols)
            w.writeheader()
            w.writerows(rows)
    return 0


# ---------------------------------------------------------------------------
# profile of one warm epoch (num_workers 0)
# ---------------------------------------------------------------------------

def profile_cmd(args) -> int:
    import cProfile
    import io
    import pstats
    import warnings
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    args.check = False
    ds = make_dataset(args.mode, args)
    loader, per_sample = make_loader(ds, args.mode, args, 0, seed=7)
    run_epoch(loader, per_sample, None)     # warm: resident, pins cached
    t0 = time.perf_counter()
    n, _, _ = run_epoch(loader, per_sample, None)
    plain = time.perf_counter() - t0
    if args.perf_ctl:
        # perf record -D -1 --control fifo:CTL,ACK: sample only these epochs
        with open(args.perf_ctl, "w") as ctl, open(args.perf_ack) as ack:
            ctl.write("enable\n")
            ctl.flush()
            ack.readline()
            for _ in range(args.perf_epochs):
                run_epoch(loader, per_sample, None)
            ctl.write("disable\n")
            ctl.flush()
            ack.readline()
    prof = cProfile.Profile()
    prof.enable()
    run_epoch(loader, per_sample, None)
    prof.disable()
    s = io.StringIO()
    st = pstats.Stats(prof, stream=s)
    st.sort_stats("tottime").print_stats(25)
    tot = sum(v[2] for v in st.stats.values())    # tottime summed
    with open(args.out, "w") as f:
        f.write(f"# {args.set} {args.mode}, num_workers 0, batch {args.batch}: "
                f"{n} samples, {plain / n * 1e6:.2f} us/sample without the "
                f"profiler ({n / plain:.0f} samples/s)\n")
        f.write(f"# profiled: {tot / n * 1e6:.2f} us/sample of tottime\n")
        # per-sample attribution of the top entries
        f.write("# us/sample (tottime) by function:\n")
        for (fn, line, name), v in sorted(st.stats.items(), key=lambda kv: -kv[1][2])[:25]:
            f.write(f"#   {v[2] / n * 1e6:7.3f}  {os.path.basename(fn)}:{line}({name})\n")
        f.write(s.getvalue())
    with open(args.out + ".json", "w") as f:
        json.dump({"set": args.set, "mode": args.mode, "batch": args.batch,
                   "samples": n, "seconds": plain, "profiled_tottime": tot,
                   "functions": [{"file": fn, "line": line, "name": name,
                                  "ncalls": v[1], "tottime": v[2]}
                                 for (fn, line, name), v in st.stats.items()]}, f)
    if args.mode in CXL_MODES:
        ds.close()
    print(f"torch_bench: profile {args.set} {args.mode}: {plain / n * 1e6:.2f} us/sample "
          f"-> {args.out}")
    return 0


# ---------------------------------------------------------------------------
# to the GPU
# ---------------------------------------------------------------------------

def cuda_cmd(args) -> int:
    from ucx_cxl.data import cuda_status
    ok, why = cuda_status()
    if not ok:
        print(f"SKIP: torch_bench cuda: {why}")
        return 77
    import ctypes
    import torch
    from torch.utils.data import DataLoader
    from ucx_cxl.data import CXLDataset, StagingRing
    from ucx_cxl.data import device as dev
    cudart = dev._cudart
    torch_cuda = torch.cuda.is_available()
    c_size = ctypes.c_size_t

    def chk(err, what):
        if err != 0:
            raise RuntimeError(f"{what}: {cudart.cudaGetErrorString(err).decode()}")

    paths = ref_paths(args.data, args.set)
    n = len(paths)
    rec = os.path.getsize(paths[0])
    bs = args.batch if args.set == "small" else max(1, args.batch // 8)
    nbytes = bs * rec
    depth = args.depth
    # device memory: one batch per ring slot (cudaMalloc: torch may have no CUDA)
    dbuf = []
    for _ in range(depth):
        p = ctypes.c_void_p()
        chk(cudart.cudaMalloc(ctypes.byref(p), c_size(nbytes)), "cudaMalloc")
        dbuf.append(p)
    order = np.random.Generator(np.random.PCG64(5)).permutation(n)
    batches = [order[i:i + bs] for i in range(0, n, bs)]
    crc = None
    if args.check:
        crc = [zlib.crc32(open(p, "rb").read()) for p in paths]
    errors: List[str] = []

    def verify(k: int, idx) -> None:
        """Copy slot k's device batch back and compare every sample."""
        host = np.empty(len(idx) * rec, dtype=np.uint8)
        chk(cudart.cudaDeviceSynchronize(), "cudaDeviceSynchronize")
        chk(cudart.cudaMemcpy(ctypes.c_void_p(host.ctypes.data), dbuf[k],
                              c_size(host.size), 2), "cudaMemcpy D2H")
        for j, i in enumerate(idx):
            c = zlib.crc32(host[j * rec:(j + 1) * rec].tobytes())
            if c != crc[int(i)] and len(errors) < 10:
                errors.append(f"sample {int(i)} on the device: crc {c:08x}, "
                              f"file {crc[int(i)]:08x}")

    checks: Dict[str, str] = {}

    def timed(mode: str, fn) -> float:
        del errors[:]
        fn()                                  # warm-up epoch
        t0 = time.perf_counter()
        fn()
        dt = time.perf_counter() - t0
        if crc is not None:
            checks[mode] = "ok" if not errors else "FAIL " + "; ".join(errors[:10])
        return dt

    rows = []
    ring = StagingRing(depth=depth, slot_bytes=nbytes)
    # cxl: UCP get from the pool into a pinned slot, cudaMemcpyAsync from it
    ds = CXLDataset(args.name)

    def cxl_epoch() -> None:
        for b, idx in enumerate(batches):
            k = ring.slot()
            ds.handle.read_many(idx, ring.host_buffer(k, len(idx) * rec))
            ring.to_device(k, dbuf[k].value, len(idx) * rec)
            if crc is not None and b % 7 == 0:
                verify(k, idx)
        ring.synchronize()
    rows.append(("cxl-staging", timed("cxl-staging", cxl_epoch)))
    ds.close()
    # baseline: a files Dataset, default collate, pin_memory=True, .cuda()
    FilesDataset, _, _ = baseline_classes()
    fds = FilesDataset(paths)
    if torch_cuda:
        loader = DataLoader(fds, batch_size=bs, sampler=[int(i) for i in order],
                            pin_memory=True)

        def base_epoch() -> None:
            for batch in loader:
                batch.cuda(non_blocking=True)
            torch.cuda.synchronize()
        rows.append(("baseline-pin_memory", timed("baseline-pin_memory", base_epoch)))
    else:
        # the same path through cudart: the collated (pageable) batch is
        # copied into pinned memory (what pin_memory does), then to the device
        loader = DataLoader(fds, batch_size=bs, sampler=[int(i) for i in order])

        def base_epoch() -> None:
            for b, batch in enumerate(loader):
                k = ring.slot()
                hb = ring.host_buffer(k, batch.numel())
                np.copyto(np.frombuffer(hb, dtype=np.uint8), batch.numpy().reshape(-1))
                ring.to_device(k, dbuf[k].value, batch.numel())
                if crc is not None and b % 7 == 0:
                    verify(k, batches[b])
            ring.synchronize()
        rows.append(("baseline-pin_memory-cudart", timed("baseline-pin_memory-cudart", base_epoch)))
    ring.close()
    for p in dbuf:
        cudart.cudaFree(p)
    out = []
    for mode, dt in rows:
        check = checks.get(mode, "")
        row = {c: "" for c in COLUMNS}
        row.update({"set": args.set, "mode": mode, "workers": 0, "rep": args.rep,
                    "kind": "warm", "epoch": 1, "samples": n, "bytes": n * rec,
                    "seconds": f"{dt:.6f}", "samples_per_s": f"{n / dt:.1f}",
                    "gb_per_s": f"{n * rec / dt / 1e9:.4f}", "nproc": 1,
                    "check": check, "load1": f"{os.getloadavg()[0]:.2f}"})
        out.append(row)
        print(f"torch_bench: cuda {args.set} {mode} (batch {bs}, ring {depth}): "
              f"{n / dt:.0f} samples/s {n * rec / dt / 1e9:.3f} GB/s", flush=True)
    write_rows(args.csv, out)
    bad = [f"{m}: {c}" for m, c in checks.items() if c.startswith("FAIL")]
    for b in bad:
        print(f"FAIL: torch_bench cuda {args.set} {b}")
    return 1 if bad else 0


# ---------------------------------------------------------------------------

def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="torch_bench.py",
                                 description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("dir")
    g.add_argument("--small", default="20000:4K")
    g.add_argument("--large", default="200:1M")

    def common(p):
        p.add_argument("--set", choices=SETS, required=True)
        p.add_argument("--data", required=True)
        p.add_argument("--name", default="", help="the dataset's name at the broker")
        p.add_argument("--batch", type=int, default=64)
        p.add_argument("--rep", type=int, default=1)
        p.add_argument("--csv")
        p.add_argument("--check", action="store_true")

    e = sub.add_parser("epoch")
    common(e)
    e.add_argument("--mode", required=True)
    e.add_argument("--workers", default="0,1,2,4")
    e.add_argument("--warm", type=int, default=3)
    e.add_argument("--no-cold", action="store_true")
    e.add_argument("--cold-workers", default="all",
                   help="num_workers values with a cold epoch (default all); the "
                        "others begin with an uncounted first epoch")
    e.add_argument("--cli", help="cxl-broker, for the fill counters of cold epochs")
    e.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cuda: the GPU section (as the cuda command)")
    e.add_argument("--depth", type=int, default=4, help="--device cuda: ring slots")
    e.add_argument("--inject-error", action="store_true",
                   help="--check's negative control: flip a bit of one sample per epoch")
    m = sub.add_parser("memcpy")
    m.add_argument("--block", default="1M")
    m.add_argument("--buf", default="")
    m.add_argument("--passes", type=int, default=5)
    m.add_argument("--csv")
    p = sub.add_parser("profile")
    common(p)
    p.add_argument("--mode", default="cxl")
    p.add_argument("--out", required=True)
    p.add_argument("--perf-ctl", help="perf's control FIFO (perf record --control)")
    p.add_argument("--perf-ack", help="perf's ack FIFO")
    p.add_argument("--perf-epochs", type=int, default=10,
                   help="warm epochs recorded by perf (default 10)")
    c = sub.add_parser("cuda")
    common(c)
    c.add_argument("--depth", type=int, default=4)
    args = ap.parse_args(argv)
    if getattr(args, "mode", None) in CXL_MODES and not args.name:
        ap.error("--name: the dataset's name at the broker")
    return {"gen": gen, "epoch": epoch_cmd, "memcpy": memcpy_cmd,
            "profile": profile_cmd, "cuda": cuda_cmd}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
