#!/usr/bin/python3
"""torch_report.py OUT - the report of perftest/run-torch-bench.sh.

Reads OUT/samples.csv (every epoch), OUT/limits.csv, OUT/meta.env,
OUT/raw/profile-*.txt.json and OUT/cuda.csv; writes OUT/results.csv
(median [min-max] over the repetitions per dataset, mode, num_workers,
epoch kind and figure) and OUT/report.md (targets of issue 14 met or
missed with the ratios, tables, profile notes).

Per repetition: a warm figure is the median of that run's warm epochs, a
cold one its cold epoch, PSS the peak over all its epochs at that
num_workers.  Reported: the median over the repetitions with min-max.
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import sys
from collections import defaultdict
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_pages import pool_pages_line  # noqa: E402
from torch_bench import BASELINES, COLUMNS, CXL_MODES, MODES  # noqa: E402

WARM_X_SMALL = 2.0          # warm 4 KiB samples/s: >= 2x the baseline's
MEMCPY_FRAC = 0.8           # 1 MiB copy=False: >= 0.8x memcpy
WORKER_MIB = 40.0           # PSS per worker beyond the first (as python/tests)

MODE_TEXT = {
    "cxl": "CXLDataset in DataLoader(batch_size=B) (torch calls __getitems__: one read_batch a batch, then default_collate)",
    "cxl-item": "CXLDataset, __getitem__ per sample (__getitems__ disabled: the path before the batch read)",
    "cxl-batch": "CXLDataset batch path: DataLoader(batch_size=None, sampler=BatchSampler(...)), ds[list] stacks by reading",
    "cxl-nocopy": "CXLDataset(copy=False): zero-copy views of the pool, sample by sample",
    "files": "baseline: map-style Dataset, np.fromfile of the sample's file",
    "pread": "baseline: map-style Dataset, os.preadv of the record from one big file",
    "npy": "baseline: np.load(mmap_mode='r'), the row copied out (np.array)",
}


def read_meta(out: str) -> Dict[str, str]:
    meta = {}
    try:
        with open(os.path.join(out, "meta.env")) as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    meta[k] = v
    except OSError:
        pass
    return meta


def read_csv(path: str) -> List[Dict[str, str]]:
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def fnum(x: str) -> Optional[float]:
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


class Stat:
    def __init__(self, reps: Dict[int, float]) -> None:
        self.reps = reps
        vals = sorted(reps.values())
        self.n = len(vals)
        self.median = statistics.median(vals) if vals else None
        self.min = vals[0] if vals else None
        self.max = vals[-1] if vals else None

    def fmt(self, digits: int = 3, spread: bool = True) -> str:
        if self.median is None:
            return "n/a"
        m = sig(self.median, digits)
        if not spread or self.n < 2:
            return m
        return f"{m} [{sig(self.min, digits)}–{sig(self.max, digits)}]"


def sig(x: float, digits: int = 3) -> str:
    if x is None:
        return "n/a"
    if abs(x) >= 10 ** digits:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def aggregate(rows: List[Dict[str, str]]):
    """{(set, mode, workers, kind, figure): Stat}."""
    per: Dict[Tuple, Dict[int, List[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        key = (r["set"], r["mode"], int(r["workers"]))
        rep = int(r["rep"])
        for fig in ("samples_per_s", "gb_per_s"):
            v = fnum(r[fig])
            if v is not None:
                per[key + (r["kind"], fig)][rep].append(v)
        v = fnum(r["pss_peak_mib"])
        if v is not None:
            per[key + ("all", "pss_peak_mib")][rep].append(v)
        v = fnum(r["pss_pool_mib"])
        if v is not None:
            per[key + ("all", "pss_pool_mib")][rep].append(v)
        if r["kind"] == "cold":
            v = fnum(r["fill_bytes"])
            if v is not None:
                per[key + ("cold", "fill_bytes")][rep].append(v)
    out = {}
    for k, reps in per.items():
        if k[-1].startswith("pss"):
            out[k] = Stat({rep: max(v) for rep, v in reps.items()})
        else:
            out[k] = Stat({rep: statistics.median(v) for rep, v in reps.items()})
    return out


def write_results(out: str, agg) -> None:
    nrep = max((max(s.reps) for s in agg.values() if s.reps), default=0)
    units = {"samples_per_s": "samples/s", "gb_per_s": "GB/s",
             "pss_peak_mib": "MiB", "pss_pool_mib": "MiB", "fill_bytes": "B"}
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["set", "mode", "workers", "kind", "figure", "unit"] +
                   [f"rep{i}" for i in range(1, nrep + 1)] +
                   ["median", "min", "max", "n"])
        for k in sorted(agg):
            s = agg[k]
            w.writerow(list(k[:4]) + [k[4], units.get(k[4], "")] +
                       [s.reps.get(i, "") for i in range(1, nrep + 1)] +
                       [s.median, s.min, s.max, s.n])


def ratio_text(a: Stat, b: Stat) -> Tuple[Optional[float], str]:
    if a.median is None or b.median is None or not b.median:
        return None, "n/a"
    r = a.median / b.median
    if a.n > 1 and b.n > 1 and b.max and b.min:
        return r, f"{r:.2f}× [{a.min / b.max:.2f}–{a.max / b.min:.2f}]"
    return r, f"{r:.2f}×"


def verdict(ok: Optional[bool]) -> str:
    return "n/a" if ok is None else ("✓ met" if ok else "✗ missed")


def profile_notes(out: str) -> List[str]:
    """Where the time per sample goes, from the cProfile JSON files."""
    lines: List[str] = []
    raw = os.path.join(out, "raw")
    cats = [
        ("broker client (Python wrapper + the ctypes call into libcxl_broker)",
         lambda f, n: f.endswith("broker.py") or n in ("from_buffer", "addressof", "byref")),
        ("CXLDataset Python (dataset.py: handle, batch assembly, decode)",
         lambda f, n: f.endswith("dataset.py") and "ucx_cxl" in f or f.endswith("decode.py")),
        ("numpy allocation and array ops", lambda f, n: n in (
            "numpy.empty", "numpy.zeros", "numpy.frombuffer", "numpy.asarray", "numpy.array")
            or "numpy" in f or "method 'reshape'" in n or "method 'view'" in n and "numpy" in n
            or n.startswith("<method 'cumsum'") or n.startswith("<method 'all'")
            or n.startswith("<method 'sum' of 'numpy")),
        ("torch.from_numpy / tensor views", lambda f, n: "from_numpy" in n or
            (("_TensorBase" in n or "torch._C" in n) and ("view" in n or "reshape" in n))),
        ("collate (default_collate, torch.stack)", lambda f, n: f.endswith("collate.py") or "stack" in n),
        ("DataLoader, fetcher, sampler", lambda f, n: any(f.endswith(x) for x in (
            "dataloader.py", "fetch.py", "sampler.py", "worker.py"))),
        ("baseline file I/O (open/read/pread/mmap)", lambda f, n: "fromfile" in n or "preadv" in n
            or "posix.open" in n or f.endswith("memmap.py") or f.endswith("format.py")
            or f.endswith("npyio.py")),
        ("the loop's touch (int64 sum)", lambda f, n: f.endswith("torch_bench.py") or
            "method 'sum' of 'torch" in n or "'item'" in n),
    ]
    files = sorted(x for x in os.listdir(raw) if x.startswith("profile-small-") and x.endswith(".json")) \
        if os.path.isdir(raw) else []
    if not files:
        return ["No profile in this run (--smoke, or it failed: raw/profile.log)."]
    lines.append("cProfile of one warm small-set epoch per mode, num_workers 0 "
                 "(raw/profile-small-MODE.txt); µs per sample of *tottime* (a ctypes "
                 "call's C time is counted in its Python caller), the un-profiled "
                 "time per sample first:")
    lines.append("")
    header = ["category"]
    cols = []
    for fn in files:
        with open(os.path.join(raw, fn)) as f:
            d = json.load(f)
        n = d["samples"] or 1
        got = defaultdict(float)
        for e in d["functions"]:
            for name, pred in cats:
                try:
                    hit = pred(e["file"], e["name"])
                except Exception:
                    hit = False
                if hit:
                    got[name] += e["tottime"]
                    break
            else:
                got["other"] += e["tottime"]
        cols.append((d["mode"], d["seconds"] / n * 1e6, d["profiled_tottime"] / n * 1e6,
                     {k: v / n * 1e6 for k, v in got.items()},
                     sorted(d["functions"], key=lambda e: -e["tottime"])[:6], n))
        header.append(d["mode"])
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    lines.append("| **µs/sample without the profiler** | " +
                 " | ".join(f"**{c[1]:.2f}**" for c in cols) + " |")
    lines.append("| µs/sample profiled (sum of tottime) | " +
                 " | ".join(f"{c[2]:.2f}" for c in cols) + " |")
    for name in [c[0] for c in cats] + ["other"]:
        vals = [c[3].get(name, 0.0) for c in cols]
        if max(vals) < 0.005:
            continue
        lines.append(f"| {name} | " + " | ".join(f"{v:.2f}" for v in vals) + " |")
    lines.append("")
    by = {c[0]: c for c in cols}
    bc = "broker client (Python wrapper + the ctypes call into libcxl_broker)"
    coll = "collate (default_collate, torch.stack)"
    if "cxl-item" in by and "cxl" in by:
        it, cx = by["cxl-item"], by["cxl"]
        lines.append(
            f"Reading: per sample (cxl-item) the broker client costs "
            f"{it[3].get(bc, 0):.2f} µs (a ctypes call with its argument conversion "
            f"and one cxl_broker_read, i.e. pin check + ucp_get + seqlock check, per "
            f"sample) and CXLDataset's Python {it[3].get(cats[1][0], 0):.2f} µs; with "
            f"__getitems__ (cxl) one read_batch a batch brings the broker client to "
            f"{cx[3].get(bc, 0):.2f} µs a sample, and what is left is the DataLoader's "
            f"own work: collate {cx[3].get(coll, 0):.2f} µs (torch.stack copies the "
            f"batch), fetcher/sampler {cx[3].get(cats[5][0], 0):.2f} µs, tensor "
            f"views {cx[3].get(cats[3][0], 0):.2f} µs."
            + (f"  The batch path (cxl-batch) skips the collate and the per-sample "
               f"views: {by['cxl-batch'][1]:.2f} µs a sample, of which read_many "
               f"{by['cxl-batch'][3].get(bc, 0):.2f} µs (the request vector filled by "
               f"numpy, the C call: its 4 KiB copies and UCX's share are in the perf "
               f"line below)." if "cxl-batch" in by else ""))
        lines.append("")
    lines.append("Top functions by tottime (µs/sample):")
    lines.append("")
    for mode, _, _, _, top, n in cols:
        items = "; ".join(f"`{os.path.basename(e['file'])}:{e['name'][:48]}` {e['tottime'] / n * 1e6:.2f}"
                          for e in top)
        lines.append(f"* {mode}: {items}")
    for mode in ("cxl-item", "cxl", "cxl-batch"):
        p = os.path.join(raw, f"perf-{mode}-dso.txt")
        if not os.path.exists(p):
            continue
        dsos, share = [], defaultdict(float)
        with open(p) as f:
            for line in f:
                t = line.split()
                if len(t) >= 2 and t[0].endswith("%") and not line.startswith("#"):
                    dsos.append(f"{t[1]} {t[0]}")
                    for lib in ("libcxl_broker", "libucp", "libuct", "libucs"):
                        if t[1].startswith(lib):
                            share["ucx"] += float(t[0].rstrip("%"))
        memmove = 0.0
        sp = os.path.join(raw, f"perf-{mode}-sym.txt")
        if os.path.exists(sp):
            with open(sp) as f:
                for line in f:
                    t = line.split()
                    if len(t) >= 4 and t[0].endswith("%") and "memmove" in line or \
                            len(t) >= 4 and t[0].endswith("%") and "memcpy" in line:
                        memmove += float(t[0].rstrip("%"))
        if dsos:
            lines.append(f"* perf, {mode} (10 warm epochs, by library): " + ", ".join(dsos[:7])
                         + f"; the broker client and UCX (libcxl_broker, libucp, libuct, libucs) "
                         f"{share['ucx']:.1f} %, memmove/memcpy (the bytes themselves) {memmove:.1f} %")
    return lines


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    meta = read_meta(out)
    rows = read_csv(os.path.join(out, "samples.csv"))
    for r in rows:
        if list(r.keys()) != COLUMNS:
            print("torch_report: samples.csv has other columns", file=sys.stderr)
            return 1
    agg = aggregate(rows)
    write_results(out, agg)
    limits = {r["figure"]: r for r in read_csv(os.path.join(out, "limits.csv"))}
    memcpy = fnum(limits.get("memcpy", {}).get("median_gb_per_s"))
    touch_lim = fnum(limits.get("touch", {}).get("median_gb_per_s"))
    workers = sorted({int(r["workers"]) for r in rows})
    ncpu = int(meta.get("ncpu", "0") or 0)
    L: List[str] = []
    L.append("# PyTorch data loading on the broker (issue 14): benchmark")
    L.append("")
    L.append(f"`perftest/run-torch-bench.sh` ({meta.get('mode', '?')}), {meta.get('date', '?')}, "
             f"commit {meta.get('commit', '?')}; {meta.get('reps', '?')} repetition(s), modes "
             f"alternating in every repetition, each run a fresh process.")
    L.append("")
    L.append("## Machine")
    L.append("")
    L.append(f"* CPU: {meta.get('cpu', '?')}, **{ncpu} cores**, LLC {meta.get('llc', '?')}, "
             f"memory {meta.get('mem', '?')}; {meta.get('kernel', '?')}")
    over = [w for w in workers if ncpu and w > ncpu]
    full = [w for w in workers if ncpu and w == ncpu]
    if over or full:
        parts = []
        if over:
            parts.append(f"**num_workers {', '.join(map(str, over))} is oversubscribed** "
                         f"(more workers than the {ncpu} cores)")
        if full:
            parts.append(f"num_workers {', '.join(map(str, full))} fills the cores, with the "
                         f"main process (collate, the loop) on top")
        L.append("* " + "; ".join(parts) + ": the loader's processes share "
                 f"{ncpu} cores, so workers cannot add throughput here, and every "
                 "worker's batch crosses to the main process: the baselines' in a new "
                 "shared-memory segment whose descriptor goes over a unix socket "
                 "(torch's way, which costs more than reading a 4 KiB sample), "
                 "CXLDataset's through its workers' hand-over arenas "
                 "(doc/design/handover.md; CXL_HANDOVER=0 gives torch's way).")
    L.append(f"* load average (1, 5, 15 min) at the start {meta.get('load_start', '?')}, at the "
             f"end {meta.get('load_end', '?')}; the machine is shared with other sessions, so "
             f"the numbers are noisy (spreads in brackets).  Run time {meta.get('duration_s', '?')} s.")
    L.append(f"* Python {meta.get('python', '?')}, torch {meta.get('torch', '?')}, numpy "
             f"{meta.get('numpy', '?')}")
    lim = []
    if memcpy:
        lim.append(f"memcpy {memcpy:.2f} GB/s (numpy copies of 1 MiB blocks out of "
                   f"{int(limits['memcpy']['buffer']) >> 20} MiB, one thread)")
    if touch_lim:
        lim.append(f"the loop's touch {touch_lim:.2f} GB/s (int64 sum of the same blocks)")
    if lim:
        L.append("* limits: " + "; ".join(lim))
    L.append(f"* datasets: small {meta.get('small', '?')}, large {meta.get('large', '?')} (samples:bytes), "
             f"in {meta.get('data_fs', '?')}; pool {meta.get('pool', '?')} "
             f"(pages {pool_pages_line(meta)}; 1 GiB, broker capacity 768 MiB)")
    dropped = {r["dropped"] for r in rows if r["kind"] == "cold"}
    L.append("* cold epochs: the broker's copy evicted (`cxl-broker evict`), "
             + ("the page cache dropped (`echo 3 > /proc/sys/vm/drop_caches`)"
                if dropped == {"1"} else "**the page cache could not be dropped** (not root): "
                "cold baselines read from the page cache"))
    L.append(f"* loader: small set batch_size {meta.get('batch', '?')}, shuffled "
             f"(RandomSampler, the same seed for every mode), large set sample by sample "
             f"(batch_size=None); num_workers {','.join(map(str, workers))} with persistent "
             f"workers; at num_workers {meta.get('cold_workers', 'all')} a cold epoch, at "
             f"the others an uncounted first epoch, then {meta.get('warm', '?')} warm epochs "
             f"(a repetition's warm figure: their median)")
    L.append("")

    def st(s, m, w, kind, fig):
        return agg.get((s, m, w, kind, fig), Stat({}))

    def best_base(s, w, kind="warm", fig="samples_per_s"):
        cands = [(st(s, b, w, kind, fig), b) for b in BASELINES]
        cands = [c for c in cands if c[0].median is not None]
        return max(cands, key=lambda c: c[0].median) if cands else (Stat({}), "n/a")

    # ---- targets
    L.append("## Targets (issue 14)")
    L.append("")
    L.append("| target | num_workers | cxl | reference | ratio [range] | verdict |")
    L.append("|---|---|---|---|---|---|")
    tgt = {"met": 0, "missed": 0}

    def count(ok):
        if ok is not None:
            tgt["met" if ok else "missed"] += 1
    for mode in ("cxl", "cxl-batch", "cxl-item"):
        if mode not in MODES["small"]:
            continue
        for w in workers:
            a = st("small", mode, w, "warm", "samples_per_s")
            b, bname = best_base("small", w)
            r, txt = ratio_text(a, b)
            ok = None if r is None else r >= WARM_X_SMALL
            count(ok)
            L.append(f"| 4 KiB warm samples/s ≥ {WARM_X_SMALL:g}× baseline: {mode} | {w} | "
                     f"{a.fmt()} | {bname} {b.fmt()} | {txt} | {verdict(ok)} |")
    # the best configuration of each side, whatever its num_workers
    cx = [(st("small", m, w, "warm", "samples_per_s"), f"{m}, {w} workers")
          for m in MODES["small"] if m in CXL_MODES for w in workers]
    bs = [(st("small", m, w, "warm", "samples_per_s"), f"{m}, {w} workers")
          for m in BASELINES for w in workers]
    cx = [c for c in cx if c[0].median is not None]
    bs = [c for c in bs if c[0].median is not None]
    if cx and bs:
        a, an = max(cx, key=lambda c: c[0].median)
        b, bn = max(bs, key=lambda c: c[0].median)
        r, txt = ratio_text(a, b)
        ok = r >= WARM_X_SMALL
        count(ok)
        L.append(f"| 4 KiB warm samples/s ≥ {WARM_X_SMALL:g}× baseline: best configuration "
                 f"of each | any | {an}: {a.fmt()} | {bn}: {b.fmt()} | {txt} | {verdict(ok)} |")
    if memcpy:
        for w in workers:
            a = st("large", "cxl-nocopy", w, "warm", "gb_per_s")
            if a.median is None:
                continue
            r = a.median / memcpy
            if w == 0:
                ok = r >= MEMCPY_FRAC
                count(ok)
                v = verdict(ok)
            else:
                v = ("not counted: a view cannot cross processes, the worker's sample "
                     "is copied into shared memory and sent")
            L.append(f"| 1 MiB copy=False warm GB/s ≥ {MEMCPY_FRAC:g}× memcpy | {w} | "
                     f"{a.fmt()} GB/s | memcpy {memcpy:.2f} GB/s | {r:.2f}× "
                     f"[{a.min / memcpy:.2f}–{a.max / memcpy:.2f}] | {v} |")
    pos = [w for w in workers if w >= 1]
    w_lo = pos[0] if len(pos) >= 2 else (workers[0] if workers else None)
    w_hi = max(workers) if workers else None
    if w_lo is not None and w_hi is not None and w_hi > w_lo:
        for mode in MODES["small"]:
            a, b = st("small", mode, w_hi, "all", "pss_peak_mib"), st("small", mode, w_lo, "all", "pss_peak_mib")
            if a.median is None or b.median is None:
                continue
            per = (a.median - b.median) / (w_hi - w_lo)
            ok = per <= WORKER_MIB if mode in CXL_MODES else None
            if mode in CXL_MODES:
                count(ok)
            L.append(f"| PSS flat in workers (4 KiB set): {mode} | {w_lo}→{w_hi} | "
                     f"{b.median:.0f} → {a.median:.0f} MiB | ≤ {WORKER_MIB:g} MiB per extra worker | "
                     f"{per:+.1f} MiB/worker, {a.median / b.median:.2f}× | "
                     f"{verdict(ok) if mode in CXL_MODES else 'baseline'} |")
    L.append("")
    L.append(f"Targets: {tgt['met']} met, {tgt['missed']} missed.  Ratios: median / "
             f"median; [range]: the worst and best pairing of the repetitions' min and max.  "
             f"The 4 KiB reference is the best of the three baselines (files, pread, npy) "
             f"at the same num_workers.  PSS: the peak over the epochs, summed over the "
             f"main process and its workers; 'flat' is read as at most {WORKER_MIB:g} MiB "
             f"per worker beyond the first (the bound of python/tests/test_memory.py: a "
             f"worker is an interpreter with torch, a UCP context and its pool mapping), "
             f"with the baselines' growth beside it.")
    L.append("")

    # ---- tables
    for s in ("small", "large"):
        modes = [m for m in MODES[s] if any(k[0] == s and k[1] == m for k in agg)]
        if not modes:
            continue
        size = meta.get(s, "?")
        L.append(f"## {s.capitalize()} samples ({size})")
        L.append("")
        for kind, fig, title, digits in (
                ("warm", "samples_per_s", "warm epochs, samples/s", 3),
                ("warm", "gb_per_s", "warm epochs, GB/s", 3),
                ("cold", "samples_per_s", "cold epoch, samples/s", 3),
                ("all", "pss_peak_mib", "PSS peak of the loader's processes, MiB", 4)):
            L.append(f"**{title}** (median [min–max] of the repetitions"
                     + ("; ratio: to the best baseline at the same num_workers" if fig == "samples_per_s" and kind == "warm" else "")
                     + ("; % of memcpy" if fig == "gb_per_s" and memcpy else "") + ")")
            L.append("")
            L.append("| mode | " + " | ".join(f"num_workers {w}" for w in workers) + " |")
            L.append("|---|" + "---|" * len(workers))
            for m in modes:
                cells = []
                for w in workers:
                    a = st(s, m, w, kind, fig)
                    c = a.fmt(digits)
                    if kind == "warm" and fig == "samples_per_s" and m in CXL_MODES:
                        b, _ = best_base(s, w)
                        r, _ = ratio_text(a, b)
                        if r is not None:
                            c += f" ({r:.2f}×)"
                    if kind == "warm" and fig == "gb_per_s" and memcpy and a.median is not None:
                        c += f" ({100 * a.median / memcpy:.0f} %)"
                    cells.append(c)
                L.append(f"| {m} | " + " | ".join(cells) + " |")
            L.append("")
        fills = []
        for m in modes:
            if m not in CXL_MODES:
                continue
            vals = [st(s, m, w, "cold", "fill_bytes").median for w in workers]
            vals = [v for v in vals if v is not None]
            if vals:
                fills.append(f"{m} {min(vals) / 2**20:.1f}–{max(vals) / 2**20:.1f} MiB")
        if fills:
            L.append("Cold epochs: bytes the broker read from the files per cold epoch "
                     "(its fill counter): " + ", ".join(fills) + ".")
            L.append("")
        L.append("Modes: " + "; ".join(f"**{m}**: {MODE_TEXT.get(m, m)}" for m in modes) + ".")
        L.append("")

    # ---- GPU
    L.append("## GPU")
    L.append("")
    cuda = read_csv(os.path.join(out, "cuda.csv"))
    if cuda:
        L.append(f"Samples to device memory (cudaMalloc), num_workers 0, warm; "
                 f"{meta.get('cuda', '')}.  cxl-staging: CXLDataset reads a batch "
                 f"(one read_batch) into a pinned StagingRing slot, cudaMemcpyAsync "
                 f"on the slot's stream; baseline: the files Dataset, default collate, "
                 f"pin_memory=True and .cuda() (`-cudart`: the same through cudart, "
                 f"where torch has no CUDA: the collated batch copied into pinned "
                 f"memory, then cudaMemcpyAsync).")
        L.append("")
        L.append("| set | mode | samples/s | GB/s | cxl / baseline | check |")
        L.append("|---|---|---|---|---|---|")
        per = defaultdict(list)
        for r in cuda:
            per[(r["set"], r["mode"])].append(r)
        stats = {k: Stat({int(r["rep"]): float(r["samples_per_s"]) for r in rs})
                 for k, rs in per.items()}
        for (s_, m), rs in sorted(per.items()):
            sp = stats[(s_, m)]
            gb = Stat({int(r["rep"]): float(r["gb_per_s"]) for r in rs})
            rat = ""
            if m == "cxl-staging":
                base = [stats[k] for k in stats if k[0] == s_ and k[1].startswith("baseline")]
                if base:
                    rat = ratio_text(sp, base[0])[1]
            checks = {r["check"] for r in rs if r["check"]}
            L.append(f"| {s_} | {m} | {sp.fmt()} | {gb.fmt()} | {rat} | "
                     f"{', '.join(sorted(checks)) or '-'} |")
    else:
        L.append(f"Not run: {meta.get('cuda', 'no --cuda')} "
                 "(test/gpu/run-gpu-tests.sh runs it where there is a GPU).")
    L.append("")

    # ---- profile
    L.append("## Where the time per 4 KiB sample goes")
    L.append("")
    L += profile_notes(out)
    L.append("")

    # ---- failures
    fails = read_csv_lines(os.path.join(out, "failures.txt"))
    bad_checks = [r for r in rows if r["check"].startswith("FAIL")]
    L.append("## Failures")
    L.append("")
    if not fails and not bad_checks:
        L.append("None: every run finished" + (", every sample checked against its file"
                                                if any(r["check"] == "ok" for r in rows) else "") + ".")
    for f in fails:
        L.append(f"* {f}")
    for r in bad_checks[:20]:
        L.append(f"* {r['set']} {r['mode']} workers {r['workers']} rep {r['rep']} "
                 f"{r['kind']}: {r['check']}")
    L.append("")
    text = "\n".join(L)
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write(text)
    return 0


def read_csv_lines(path: str) -> List[str]:
    try:
        with open(path) as f:
            return [line.strip() for line in f if line.strip()]
    except OSError:
        return []


if __name__ == "__main__":
    sys.exit(main())
