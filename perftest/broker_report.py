#!/usr/bin/python3
"""broker_report.py OUTDIR - turn perftest/run-broker-bench.sh output into
results.csv, report.md and gnuplot inputs (plots/plots.gp, plots/*.dat).

Input (OUTDIR): meta.env, samples.csv (rep,label, then broker_bench's total
row), readers.csv (the per-reader rows), check.csv (correctness pass),
cold.csv (cold epoch), failures.txt (label|record|readers|what),
raw/profile-self.txt and raw/profile-dso.txt (perf report), raw/ls-warm.json.

Figures: per (record size, readers, mode) the median of the repetitions
and their min-max; ratios are of medians, with the min-max of the per-rep
ratios (the modes of one repetition ran next to each other).  Targets of
issue 13: warm throughput >= 0.8x memcpy for 1 MiB samples (broker GB/s
over the memcpy limit of the same reader count, 1 GiB source); >= 2x the
page-cache baseline's samples/s at 4 KiB (pread; mmap shown as well); cold
epoch >= 0.8x raw read bandwidth (broker first epoch over dd of the same
file after the page cache was dropped).  Standard library only; plots are
gnuplot's job.  It reports; it asserts nothing.
"""
import csv
import json
import os
import re
import statistics
import sys
from collections import OrderedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report_pages import pool_pages_line  # noqa: E402

OUT = sys.argv[1]
PLOTS = os.path.join(OUT, "plots")
os.makedirs(PLOTS, exist_ok=True)

MODES = ["broker", "broker-get", "view", "pread", "mmap", "memcpy", "memcpy-ds"]
BRK_MODES = ("broker", "broker-get", "view")
DESC = {
    "broker": "cxl_broker_read_batch() through the broker: pin (bitmap or message), then a memcpy out of the reader's own mapping of the pool (the default for readers that map it)",
    "broker-get": "cxl_broker_read_batch() with CXL_BROKER_COPY=get: a ucp_get per sample from the pool into the reader's buffer (what readers in other pods do, over tcp)",
    "view": "cxl_broker_view() (the zero-copy view of a resident sample, readers that map the pool) and a memcpy out of it into the reader's buffer",
    "pread": "pread() of sample i at i × size from the file in the page cache (one fd per reader)",
    "mmap": "memcpy of sample i out of an mmap (MAP_POPULATE) of the file",
    "memcpy": "the limit: memcpy of size-byte blocks at random offsets out of a 1 GiB buffer (> LLC), same processes",
    "memcpy-ds": "memcpy as above out of a buffer of the dataset's size (1 MiB only): what a copy costs when the source fits where the dataset fits",
}
TGT_MEMCPY = 0.8
TGT_PREAD = 2.0
TGT_COLD = 0.8


def read_kv(path):
    d = {}
    try:
        with open(path) as f:
            for line in f:
                if "=" in line:
                    k, v = line.rstrip("\n").split("=", 1)
                    d[k] = v
    except OSError:
        pass
    return d


def read_csv(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def num(v, default=None):
    try:
        return float(v)
    except (TypeError, ValueError):
        return default


meta = read_kv(os.path.join(OUT, "meta.env"))
REPS = int(meta.get("reps", "1"))
NCPU = int(meta.get("ncpu", "1") or 1)
samples = read_csv(os.path.join(OUT, "samples.csv"))
readers_rows = read_csv(os.path.join(OUT, "readers.csv"))
check = read_csv(os.path.join(OUT, "check.csv"))
cold = read_csv(os.path.join(OUT, "cold.csv"))
failures = []
try:
    with open(os.path.join(OUT, "failures.txt")) as f:
        failures = [l.rstrip("\n").split("|", 3) for l in f if l.strip()]
except OSError:
    pass

# ---- samples -----------------------------------------------------------------
# (record, readers, label) -> {rep: row}
data = OrderedDict()
records, nreaders = set(), set()
for r in samples:
    try:
        key = (int(r["record"]), int(r["readers"]), r["label"])
        rep = int(r["rep"])
    except (KeyError, ValueError):
        continue
    if num(r.get("samples"), 0) <= 0:
        continue    # a failed run: not a measurement
    data.setdefault(key, {})[rep] = r
    records.add(key[0])
    nreaders.add(key[1])
records = sorted(records)
nreaders = sorted(nreaders)
# per-reader spread: (record, readers, label) -> [per-reader samples/s of every rep]
spread = {}
for r in readers_rows:
    try:
        key = (int(r["record"]), int(r["readers"]), r["label"])
        spread.setdefault(key, []).append(float(r["samples_per_s"]))
    except (KeyError, ValueError):
        pass


def stats(key, field):
    reps = data.get(key)
    if not reps:
        return None
    vals = {k: num(v.get(field)) for k, v in reps.items()}
    vals = {k: v for k, v in vals.items() if v is not None}
    if not vals:
        return None
    vs = list(vals.values())
    return {"median": statistics.median(vs), "min": min(vs), "max": max(vs),
            "n": len(vs), "reps": vals}


def ratio(a, b):
    """median ratio of two stats and the min-max of per-rep ratios"""
    if not a or not b or b["median"] == 0:
        return None
    per = [a["reps"][k] / b["reps"][k] for k in a["reps"] if k in b["reps"] and b["reps"][k]]
    return {"median": a["median"] / b["median"],
            "min": min(per) if per else None, "max": max(per) if per else None}


def fmt(v, unit=""):
    if v is None:
        return "-"
    a = abs(v)
    if a >= 1e6:
        s = "%.2fM" % (v / 1e6)
    elif a >= 1e4:
        s = "%.0fk" % (v / 1e3)
    elif a >= 1000:
        s = "%.2fk" % (v / 1e3)
    elif a >= 100:
        s = "%.0f" % v
    elif a >= 10:
        s = "%.1f" % v
    else:
        s = "%.2f" % v
    return s + unit


def cell(s, unit=""):
    if not s:
        return "-"
    if s["n"] == 1:
        return fmt(s["median"], unit)
    return "%s [%s–%s]" % (fmt(s["median"], unit), fmt(s["min"]), fmt(s["max"]))


def rcell(r):
    if not r:
        return "-"
    if r["min"] is None or r["min"] == r["max"]:
        return "%.2f×" % r["median"]
    return "%.2f× [%.2f–%.2f]" % (r["median"], r["min"], r["max"])


def size_label(n):
    if n >= 1048576 and n % 1048576 == 0:
        return "%d MiB" % (n // 1048576)
    if n >= 1024 and n % 1024 == 0:
        return "%d KiB" % (n // 1024)
    return "%d B" % n


def readers_label(n):
    return "%d%s" % (n, " (oversubscribed)" if n > NCPU else "")


def mib(kib):
    return None if kib is None else kib / 1024.0


# ---- results.csv -------------------------------------------------------------
FIGS = [("samples_per_s", "samples/s", "higher"), ("gb_per_s", "GB/s", "higher"),
        ("pss_kib", "KiB", "lower"), ("pss_anon_kib", "KiB", "lower"),
        ("pss_file_kib", "KiB", "lower"), ("pss_shmem_kib", "KiB", "lower"),
        ("other_pss_kib", "KiB", "lower"), ("file_cache_kib", "KiB", "lower")]
with open(os.path.join(OUT, "results.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["figure", "record", "readers", "mode", "unit", "better"]
               + ["rep%d" % i for i in range(1, REPS + 1)]
               + ["median", "min", "max", "ok_reps", "note"])
    for rec in records:
        for n in nreaders:
            for m in MODES:
                for fig, unit, better in FIGS:
                    s = stats((rec, n, m), fig)
                    if not s:
                        continue
                    note = ""
                    if fig == "other_pss_kib":
                        note = "PSS of the broker daemon"
                        if m not in BRK_MODES:
                            continue
                    w.writerow([fig, rec, n, m, unit, better]
                               + [("%.4g" % s["reps"][i]) if i in s["reps"] else ""
                                  for i in range(1, REPS + 1)]
                               + ["%.6g" % s["median"], "%.6g" % s["min"], "%.6g" % s["max"],
                                  s["n"], note])
    # cold epoch
    ckeys = OrderedDict()
    for r in cold:
        try:
            k = ("cold_gb_per_s", int(r["record"]), int(r["readers"]), r["kind"])
            ckeys.setdefault(k, {})[int(r["rep"])] = float(r["gb_per_s"])
        except (KeyError, ValueError):
            pass
    for k, reps in ckeys.items():
        vs = list(reps.values())
        w.writerow([k[0], k[1], k[2], k[3], "GB/s", "higher"]
                   + [("%.4g" % reps[i]) if i in reps else "" for i in range(1, REPS + 1)]
                   + ["%.6g" % statistics.median(vs), "%.6g" % min(vs), "%.6g" % max(vs),
                      len(vs), "page cache dropped (%s) before" % meta.get("drop", "?")])


def cold_stats(rec, n, kind):
    vals = {}
    for r in cold:
        try:
            if int(r["record"]) == rec and int(r["readers"]) == n and r["kind"] == kind \
                    and r.get("ok") == "1":
                vals[int(r["rep"])] = float(r["gb_per_s"])
        except (KeyError, ValueError):
            pass
    if not vals:
        return None
    vs = list(vals.values())
    return {"median": statistics.median(vs), "min": min(vs), "max": max(vs), "n": len(vs),
            "reps": vals}


# ---- targets ------------------------------------------------------------------
targets = []   # (name, condition text, ratio dict or None, bound, detail)
if 1048576 in records:
    for n in nreaders:
        b = stats((1048576, n, "broker"), "gb_per_s")
        mc = stats((1048576, n, "memcpy"), "gb_per_s")
        targets.append(("warm 1 MiB, %s reader%s" % (readers_label(n), "s" if n > 1 else ""),
                        "broker GB/s ≥ %.1f× memcpy limit" % TGT_MEMCPY, ratio(b, mc), TGT_MEMCPY,
                        "%s vs %s GB/s" % (fmt(b and b["median"]), fmt(mc and mc["median"]))))
if 4096 in records:
    for via in ("broker", "broker-get", "view"):
        for n in nreaders:
            b = stats((4096, n, via), "samples_per_s")
            if not b:
                continue
            for base in ("pread", "mmap"):
                p = stats((4096, n, base), "samples_per_s")
                targets.append(("warm 4 KiB%s vs %s, %s reader%s" % (
                                    {"broker": "", "broker-get": " (ucp_get path)",
                                     "view": " (view API)"}[via], base, readers_label(n),
                                    "s" if n > 1 else ""),
                                "%s samples/s ≥ %.0f× %s" % (via, TGT_PREAD, base), ratio(b, p), TGT_PREAD,
                                "%s vs %s samples/s" % (fmt(b and b["median"]), fmt(p and p["median"]))))
def raw_stats(rec):
    """raw read bandwidth per rep: the faster of dd and the sequential preads"""
    a, b = cold_stats(rec, 1, "raw-dd"), cold_stats(rec, 1, "raw-pread")
    reps = {}
    for s_ in (a, b):
        for k, v in (s_["reps"].items() if s_ else ()):
            reps[k] = max(reps.get(k, 0), v)
    if not reps:
        return None
    vs = list(reps.values())
    return {"median": statistics.median(vs), "min": min(vs), "max": max(vs), "n": len(vs),
            "reps": reps}


cold_readers = sorted({int(r["readers"]) for r in cold if r.get("kind") == "broker-epoch"
                       and r.get("readers", "").isdigit()})
for rec in records:
    raw = raw_stats(rec)
    for n in cold_readers:
        b = cold_stats(rec, n, "broker-epoch")
        targets.append(("cold epoch %s, %s reader%s" % (size_label(rec), readers_label(n), "s" if n > 1 else ""),
                        "first epoch through the broker ≥ %.1f× raw read (the faster of dd and "
                        "sequential pread, per rep)" % TGT_COLD,
                        ratio(b, raw), TGT_COLD,
                        "%s vs %s GB/s" % (fmt(b and b["median"]), fmt(raw and raw["median"]))))


def verdict(r, bound):
    if not r:
        return "not evaluated"
    met = r["median"] >= bound
    close = r["min"] is not None and r["min"] < bound <= r["max"]
    return ("✓ met" if met else "✗ missed") + (" (≈: the per-rep ratios straddle the bound)"
                                              if close else "")


# ---- report.md -----------------------------------------------------------------
L = []
L.append("# Dataset-chunk broker against pread/mmap of the page cache (perftest/run-broker-bench.sh)")
L.append("")
L.append("| | |")
L.append("|---|---|")
L.append("| date | %s |" % meta.get("date", "?"))
L.append("| machine | %s, **%s cores**, LLC %s, %s RAM, %s |" % (
    meta.get("cpu", "?"), meta.get("ncpu", "?"), meta.get("llc", "?"), meta.get("mem", "?"),
    meta.get("kernel", "?")))
L.append("| software | UCX %s; git %s; libuct_cxl.so %s…, libcxl_broker.so %s… (sha256) |" % (
    meta.get("ucx", "?"), meta.get("git", "?"), meta.get("module_sha256", "?"),
    meta.get("libbroker_sha256", "?")))
L.append("| load average (1/5/15 min) | start %s, end %s |" % (meta.get("load_start", "?"),
                                                               meta.get("load_end", "?")))
runs = read_csv(os.path.join(OUT, "runs.csv"))
loads = sorted(float(r["load1"]) for r in runs if num(r.get("load1")) is not None)
busy = sorted(int(r["cpu_busy_pct"]) for r in runs if r.get("cpu_busy_pct", "").isdigit())
if loads:
    L.append("| other work during the warm runs | 1-min load before each run %.2f–%.2f (median %.2f)%s "
             "(runs.csv) |" % (loads[0], loads[-1], statistics.median(loads),
                               ("; CPUs busy in the second before each run: median %d %%, %d–%d %%%s"
                                % (statistics.median(busy), busy[0], busy[-1],
                                   ("; waited for ≤ %s %% busy" % meta["wait_idle"])
                                   if meta.get("wait_idle", "0") != "0" else ""))
                               if busy else ""))
over = [n for n in nreaders if n > NCPU]
L.append("| readers | %s%s |" % (", ".join(str(n) for n in nreaders),
                                 (" — **%s oversubscribed** (more reader processes than the %d cores; "
                                  "the broker daemon shares them too)" % (", ".join(map(str, over)), NCPU))
                                 if over else ""))
recs = meta.get("records", "").split()
nrec = meta.get("nrecords", "").split()
mibs = meta.get("mib", "").split()
dsd = ", ".join("%s: %s samples = %s MiB" % (size_label(int(a)), b, c)
                for a, b, c in zip(recs, nrec, mibs))
L.append("| datasets | one raw file of fixed-size records per size, on %s (%s): %s; "
         "registered `--format raw --policy pin`, warmed, all resident |"
         % (meta.get("data_fs", "?"), meta.get("data_dir", "?"), dsd))
L.append("| pool | %s, 1 GiB, broker cache %s MiB, 4 MiB chunks |" % (
    meta.get("pool", "?"), meta.get("capacity_mib", "?")))
L.append("| pool pages | %s |" % pool_pages_line(meta))
L.append("| run | %s mode, %d repetitions, modes alternating (broker, broker-get, view, pread, mmap, memcpy[, memcpy-ds]) "
         "per size and reader count; %s s timed after %s s untimed warm-up per run; batch %s; "
         "%s s in all |" % (meta.get("mode", "?"), REPS, meta.get("seconds", "?"),
                            meta.get("warmup", "?"), meta.get("batch", "?"),
                            meta.get("duration_s", "?")))
L.append("")
L.append("Cells: median of the repetitions [min–max]. samples/s and GB/s (10^9 B/s) are summed over "
         "the readers (samples of all readers / the parent's timed window). Ratios: of medians, "
         "[min–max] of the per-repetition ratios.")
L.append("")

# modes
L.append("## Modes")
L.append("")
L.append("| mode | what |")
L.append("|---|---|")
for m in MODES:
    if any(k[2] == m for k in data):
        L.append("| %s | %s |" % (m, DESC[m]))
L.append("")

# correctness
L.append("## Correctness pass")
L.append("")
if check:
    L.append("Every sample read once (a seeded permutation, 2 readers) in each mode with `--check`: each "
             "sample compared with its bytes in the file (pread at i × size, not through the broker's "
             "metadata); the digest (Σ CRC32C(sample) × (2i + 1)) must be the same in every mode.")
    L.append("")
    L.append("| size | mode | samples | samples differing from the file | digest | exit |")
    L.append("|---|---|---|---|---|---|")
    for r in check:
        L.append("| %s | %s | %s | %s | `%s` | %s |" % (size_label(int(r["record"])), r["mode"],
                                                       r["samples"], r["errors"], r["digest"], r["rc"]))
    L.append("")
    by = {}
    for r in check:
        by.setdefault(r["record"], set()).add(r["digest"])
    bad = [k for k, v in by.items() if len(v) != 1]
    errs = sum(int(r["errors"] or 0) for r in check)
    rcs = [r for r in check if r["rc"] != "0"]
    if not bad and errs == 0 and not rcs:
        L.append("**All reads correct**: every sample equal to the file, the same digest in every mode.")
    else:
        L.append("**CORRECTNESS FAILED**: %s%s%s" % (
            ("digests differ at %s; " % ", ".join(size_label(int(b)) for b in bad)) if bad else "",
            ("%d samples differ from the file; " % errs) if errs else "",
            ("%d runs failed" % len(rcs)) if rcs else ""))
    L.append("")
else:
    L.append("No correctness pass recorded.")
    L.append("")

# targets
L.append("## Targets (issue 13)")
L.append("")
if targets:
    met = sum(1 for t in targets if t[2] and t[2]["median"] >= t[3])
    L.append("**%d of %d met.** Warm targets per reader count; the 4 KiB target against both "
             "page-cache baselines; cold per reader count of the first epoch." % (met, len(targets)))
    L.append("")
    L.append("| target | condition | measured | ratio | result |")
    L.append("|---|---|---|---|---|")
    for name, cond, r, bound, det in targets:
        L.append("| %s | %s | %s | %s | %s |" % (name, cond, det, rcell(r), verdict(r, bound)))
    L.append("")
else:
    L.append("Not evaluated (no 1 MiB / 4 KiB results).")
    L.append("")

# warm tables per size
L.append("## Warm: random samples, all chunks resident, files in the page cache")
L.append("")
for rec in records:
    L.append("### %s samples" % size_label(rec))
    L.append("")
    L.append("| readers | mode | samples/s | GB/s | per-reader samples/s (min–max over readers and reps) "
             "| % of memcpy | broker / this |")
    L.append("|---|---|---|---|---|---|---|")
    for n in nreaders:
        b = stats((rec, n, "broker"), "samples_per_s")
        mc = stats((rec, n, "memcpy"), "gb_per_s")
        for m in MODES:
            s = stats((rec, n, m), "samples_per_s")
            if not s:
                continue
            g = stats((rec, n, m), "gb_per_s")
            sp = spread.get((rec, n, m), [])
            pct = "%.0f %%" % (100 * g["median"] / mc["median"]) if (g and mc and mc["median"]) else "-"
            vs = rcell(ratio(b, s)) if m not in BRK_MODES else ""
            L.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                readers_label(n), m, cell(s), cell(g),
                ("%s–%s" % (fmt(min(sp)), fmt(max(sp)))) if sp else "-", pct, vs))
    L.append("")

# memory
L.append("## Memory: PSS of the readers while they read")
L.append("")
L.append("Read from /proc/PID/smaps_rollup half-way through each timed run (after the warm-up); medians "
         "over the repetitions, MiB. What the numbers mean:")
L.append("")
L.append("- **readers PSS**: Σ Pss over the reader processes; split into *private* (Pss_Anon: the "
         "reader's buffer, heap, UCX's own memory) and *shared* (Pss_File + Pss_Shmem: mapped files, "
         "the pool for broker readers, the mmap'd dataset for mmap readers; a shared page counts "
         "1/mappers in each).")
L.append("- **broker**: the broker daemon's PSS (broker and view modes only). The pool pages the readers touched "
         "are shared between them and the broker, so *readers shared + broker* is the one copy in the "
         "pool (plus libraries): it does not grow with readers.")
L.append("- **page cache**: the dataset file's bytes in the page cache (mincore). pread readers map "
         "none of it, so it is **not** in their PSS: their copy of the data is this one, shared by "
         "every process of the host. mmap readers map it: their shared PSS is that same page cache. "
         "Broker and view modes: the readers do not use the file; the broker's fills read it with "
         "buffered pread, so it stays in the page cache next to the pool copy (a second copy on the "
         "broker's host) until something evicts it (0 here: dropped since, e.g. by other work's "
         "drop_caches on a shared machine).")
L.append("- **broker PSS** covers the pool pages of every resident dataset of the run (the broker "
         "maps all of them), not only this size's: *readers + broker* is that one copy, shared by "
         "every reader, plus each process's own memory.")
L.append("- **added per reader**: what one more reader process costs: its buffer (batch × sample "
         "size), its heap and libraries, and, in broker mode, the UCX cxl transport's own state of "
         "that process in the pool (its interface's channels: `cxlpool info` shows one more extent "
         "per process), which is Shmem of that reader alone. None of it is dataset bytes.")
L.append("- **data copies per host**: broker: 1 in the pool (for every host of the pod) + the broker "
         "host's page cache; pread/mmap: 1 in each host's page cache (plus, for pread, a copy in each "
         "reader's buffer of what it just read, as in every mode).")
L.append("")
for rec in records:
    L.append("### %s samples" % size_label(rec))
    L.append("")
    L.append("| mode | readers | readers PSS | private | shared | broker PSS | readers + broker | "
             "page cache | added per reader (readers + broker) |")
    L.append("|---|---|---|---|---|---|---|---|---|")
    for m in ("broker", "broker-get", "view", "pread", "mmap"):
        base = None
        for n in nreaders:
            k = (rec, n, m)
            p = stats(k, "pss_kib")
            if not p:
                continue
            an = stats(k, "pss_anon_kib")
            fi = stats(k, "pss_file_kib")
            sh = stats(k, "pss_shmem_kib")
            ot = stats(k, "other_pss_kib") if m in BRK_MODES else None
            fc = stats(k, "file_cache_kib")
            tot = p["median"] + (ot["median"] if ot else 0)
            if base is None:
                base = (n, tot)
                per = "-"
            else:
                per = "%.1f" % (mib(tot - base[1]) / (n - base[0]))
            L.append("| %s | %s | %.1f | %.1f | %.1f | %s | %.1f | %s | %s |" % (
                m, readers_label(n), mib(p["median"]), mib(an["median"]) if an else 0,
                mib((fi["median"] if fi else 0) + (sh["median"] if sh else 0)),
                ("%.1f" % mib(ot["median"])) if ot else "-", mib(tot),
                ("%.1f" % mib(fc["median"])) if fc and fc["median"] >= 0 else "-", per))
    L.append("")

# cold
L.append("## Cold: the first epoch")
L.append("")
if cold:
    L.append("Before each run the page cache was dropped (%s) and, for the broker, the dataset's chunks "
             "evicted. raw-dd: `dd bs=4M` of the file (sequential, one stream, the process's start "
             "and open timed too); raw-pread: sequential 4 MiB preads by broker_bench, timed after the "
             "open like the epochs; *raw* = the faster of the two in each repetition. "
             "broker-warm: `cxl-broker warm` (the broker's own fill, chunk after chunk). broker-epoch: "
             "every sample once in a random permutation through the broker (readers split it). "
             "pread-epoch: the same permutation with pread (what a loader's first epoch costs today). "
             "GB/s = dataset bytes / wall time (broker-warm: of the CLI command, its connect "
             "included). *fill/dataset*: bytes the broker read from the file "
             "(stat file_bytes_read) over the dataset's size."
             % {"global": "echo 3 > /proc/sys/vm/drop_caches, then posix_fadvise DONTNEED",
                "file": "posix_fadvise DONTNEED of the file"}.get(meta.get("drop", ""), "?"))
    L.append("")
    L.append("| size | kind | readers | GB/s | / raw | fill/dataset | in cache before (KiB, max) |")
    L.append("|---|---|---|---|---|---|---|")
    kinds = ["raw-dd", "raw-pread", "broker-warm", "broker-epoch", "pread-epoch"]
    for rec in records:
        raw = raw_stats(rec)
        for kind in kinds:
            for n in sorted({int(r["readers"]) for r in cold if r["kind"] == kind}):
                s = cold_stats(rec, n, kind)
                if not s:
                    continue
                rows = [r for r in cold if int(r["record"]) == rec and int(r["readers"]) == n
                        and r["kind"] == kind]
                fills = [num(r["fill_bytes"]) / num(r["bytes"]) for r in rows
                         if num(r.get("fill_bytes")) is not None and num(r.get("bytes"))]
                cb = [int(num(r["cache_before_kib"], 0)) for r in rows]
                L.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                    size_label(rec), kind, readers_label(n), cell(s),
                    rcell(ratio(s, raw)) if not kind.startswith("raw") else "",
                    ("%.2f" % statistics.median(fills)) if fills else "",
                    max(cb) if cb else "-"))
    L.append("")
    crc = {k: cold_stats(4194304, 1, k) for k in ("crc", "crc-hw")}
    if crc["crc"]:
        L.append("**The fill's CPU ceiling**: the broker computes CRC32C over every chunk it fills "
                 "(brk_fill.c, `cxlpool_crc32c()` of src/pool/pool_crc.c). One thread, 4 MiB "
                 "chunks: **%s GB/s** with `cxlpool_crc32c()` as built; %s GB/s with broker_bench's "
                 "own loop of the SSE4.2 crc32 instruction (--mode crc / crc-hw). Fills run in %s "
                 "reader threads on %d cores." % (cell(crc["crc"]), cell(crc["crc-hw"]),
                                                   "4 (the default)", NCPU))
        L.append("")
    bad = [r for r in cold if r.get("ok") != "1"]
    if bad:
        L.append("**%d cold runs failed** (cold.csv, ok = 0)." % len(bad))
        L.append("")
else:
    L.append("Not run (--no-cold).")
    L.append("")

# profile
prof = os.path.join(OUT, "raw", "profile-self.txt")
L.append("## Profile: one broker reader at %s" % size_label(records[0] if records else 4096))
L.append("")
CATS = [
    ("copy (memcpy out of the pool)", re.compile(r"memmove|memcpy|rep_movs|copy_user")),
    ("broker client: pin cache, touch, seqlock check (brk_*, cxl_broker_*)", re.compile(r"^brk_|^cxl_broker_")),
    ("UCP progress (ucp_worker_progress, callback queues, uct progress)",
     re.compile(r"progress|ucs_callbackq|ucs_arbiter|uct_.*_iface_progress")),
    ("UCP get path (ucp_get_nbx, protocol selection, requests)", re.compile(r"^ucp_")),
    ("UCT cxl transport (uct_cxl_*)", re.compile(r"^uct_cxl|^uct_")),
    ("UCS (memory pools, logs, timers)", re.compile(r"^ucs_")),
    ("benchmark loop (random index, accounting)", re.compile(r"^bb_|^xs_|^main$|^digest_of")),
    ("kernel", re.compile(r"^\[k\]|^0x|^entry_|^__x64|^syscall|^do_|^page_fault|^asm_exc")),
]
if os.path.exists(prof):
    tops, cats = [], OrderedDict((c[0], 0.0) for c in CATS)
    cats["other"] = 0.0
    with open(prof) as f:
        for line in f:
            mt = re.match(r"\s*([0-9.]+)%\s+\[([.k])\]\s+(\S+)", line)
            if not mt:
                continue
            pct, kind, sym = float(mt.group(1)), mt.group(2), mt.group(3)
            tops.append((pct, kind, sym))
            name = "[k]" if kind == "k" else sym
            for cname, rx in CATS:
                if rx.search(name) or (kind == "k" and cname == "kernel"):
                    cats[cname] += pct
                    break
            else:
                cats["other"] += pct
    if tops:
        L.append("`perf record -g` of broker_bench --mode broker --readers 1 (3 s); self time by symbol "
                 "(raw/profile-self.txt; symbols ≥ 0.3 % only, so the categories do not add up to 100 %):")
        L.append("")
        L.append("| where | self % |")
        L.append("|---|---|")
        for k, v in cats.items():
            if v > 0:
                L.append("| %s | %.1f |" % (k, v))
        L.append("")
        L.append("Top symbols: " + ", ".join("`%s` %.1f %%" % (s, p) for p, k, s in tops[:12]) + ".")
        L.append("")
    else:
        L.append("perf produced no samples (raw/profile-self.txt).")
        L.append("")
else:
    L.append("Not profiled (--no-profile, smoke mode, or no perf).")
    L.append("")
fprof = os.path.join(OUT, "raw", "profile-broker-fill.txt")
if os.path.exists(fprof):
    tops = []
    with open(fprof) as f:
        for line in f:
            mt = re.match(r"\s*([0-9.]+)%\s+\[([.k])\]\s+(\S+)", line)
            if mt:
                tops.append((float(mt.group(1)), mt.group(2), mt.group(3)))
    if tops:
        kern = sum(p for p, k, _ in tops if k == "k")
        L.append("The broker daemon during a cold `cxl-broker warm` of the largest dataset "
                 "(raw/profile-broker-fill.txt), self time: " +
                 ", ".join("`%s`%s %.1f %%" % (s_, " [k]" if k == "k" else "", p)
                           for p, k, s_ in tops[:8]) +
                 "; kernel symbols %.1f %% in all (file reads, page faults of the pool file)." % kern)
        L.append("")

if failures:
    L.append("## Failed runs")
    L.append("")
    for f_ in failures:
        L.append("- %s" % " ".join(f_))
    L.append("")

L.append("## Notes")
L.append("")
L.append("- The memcpy limit is measured in the same run, by the same program (same fork, warm-up and "
         "timing), per reader count; its source is 1 GiB, larger than the LLC (%s). The datasets are "
         "smaller than that LLC (the VM reports the host's), so a mode reading a warm dataset can run "
         "above the limit; memcpy-ds (1 MiB) copies out of a dataset-sized buffer for comparison."
         % meta.get("llc", "?"))
# page faults in the timed windows (broker_bench's faults column): per
# mode, faults per 1000 samples over every run; a window that is mostly
# faults measures the kernel, not the copy
flt = OrderedDict()
for (rec, nr, lab), reps in data.items():
    for r in reps.values():
        f_, n_ = num(r.get("faults")), num(r.get("samples"), 0)
        if f_ is None or n_ <= 0:
            continue
        a_ = flt.setdefault(lab, [0.0, 0.0])
        a_[0] += f_
        a_[1] += n_
if flt:
    L.append("- Page faults in the timed windows, per 1000 samples (all sizes and reader counts; "
             "the memcpy source is mapped into every reader's page tables before it is timed): "
             + ", ".join("%s %.3g" % (lab, 1000.0 * f_ / n_) for lab, (f_, n_) in flt.items())
             + ".")
if over:
    L.append("- %s readers on %d cores: oversubscribed; aggregate rates there show the cores' "
             "throughput shared by more processes, not more parallelism." % (
                 "/".join(map(str, over)), NCPU))
L.append("- Nothing asserts timings. On a shared machine the numbers are noisy: see the load average "
         "above; every run's output is in raw/, the commands in logs/commands.log.")
L.append("")

with open(os.path.join(OUT, "report.md"), "w") as f:
    f.write("\n".join(L))

# ---- gnuplot -------------------------------------------------------------------
gp = ['set terminal png size 900,600 font ",10" noenhanced',
      'set datafile separator "\\t"', 'set datafile missing "?"',
      "set key top left", "set grid"]
for rec in records:
    pm = [m for m in MODES if any(k[0] == rec and k[2] == m for k in data)]
    dat = "sps-%d.dat" % rec
    with open(os.path.join(PLOTS, dat), "w") as f:
        f.write("\t".join(["readers"] + ["%s\t%s_min\t%s_max" % (m, m, m) for m in pm]) + "\n")
        for n in nreaders:
            row = [str(n)]
            for m in pm:
                s = stats((rec, n, m), "samples_per_s")
                row += (["%.6g" % s["median"], "%.6g" % s["min"], "%.6g" % s["max"]]
                        if s else ["?", "?", "?"])
            f.write("\t".join(row) + "\n")
    gp.append('set output "sps-%s.png"' % size_label(rec).replace(" ", ""))
    gp.append('set title "%s random samples: samples/s (all readers) vs reader processes, median and min-max of %d reps"'
              % (size_label(rec), REPS))
    gp.append('set xlabel "reader processes (%d cores)"' % NCPU)
    gp.append('set ylabel "samples/s"')
    gp.append("set xtics (%s)" % ", ".join('"%d" %d' % (n, n) for n in nreaders))
    gp.append("set yrange [0:*]")
    parts = []
    for i, m in enumerate(pm):
        b = 2 + 3 * i
        parts.append('"%s" using 1:%d:%d:%d with yerrorlines lw 2 title "%s"' % (dat, b, b + 1, b + 2, m))
    gp.append("plot " + ", \\\n     ".join(parts))
if records:
    rec = records[-1]
    with open(os.path.join(PLOTS, "pss.dat"), "w") as f:
        f.write("readers\tbroker\tpread\tmmap\n")
        for n in nreaders:
            row = [str(n)]
            for m in ("broker", "pread", "mmap"):
                p = stats((rec, n, m), "pss_kib")
                o = stats((rec, n, m), "other_pss_kib") if m == "broker" else None
                row.append("%.6g" % mib(p["median"] + (o["median"] if o else 0)) if p else "?")
            f.write("\t".join(row) + "\n")
    gp.append('set output "pss.png"')
    gp.append('set title "%s samples: PSS of the readers (+ the broker in broker mode), MiB; page cache not in PSS"'
              % size_label(rec))
    gp.append('set xlabel "reader processes"')
    gp.append('set ylabel "MiB"')
    gp.append('plot "pss.dat" using 1:2 with linespoints lw 2 title "broker (readers + broker)", '
              '"pss.dat" using 1:3 with linespoints lw 2 title "pread (readers)", '
              '"pss.dat" using 1:4 with linespoints lw 2 title "mmap (readers)"')
with open(os.path.join(PLOTS, "plots.gp"), "w") as f:
    f.write("\n".join(gp) + "\n")
