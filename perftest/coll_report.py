#!/usr/bin/python3
"""coll_report.py OUTDIR - turn perftest/run-coll-bench.sh output into
results.csv, report.md and gnuplot inputs (plots/plots.gp, plots/*.dat).

Input (OUTDIR): meta.env, samples.csv (config,rep,collective,bytes,np,
iters,warmup,min_us,avg_us,max_us,errors,cxl_calls,cxl_fallbacks),
configs.txt (label|state|note), selection.txt (label|enabled coll
components), validation.csv (label,collective,bytes,errors,cxl_calls,
cxl_fallbacks), failures.txt (label|what), raw/limits.csv.

The figure is coll_bench's avg_us (mean over ranks of the per-rank mean
latency, OSU's "Avg Latency"); per configuration the median of the
repetitions and their min-max spread.  Targets of issue 12 (medians):
coll/cxl latency <= 0.5x the best baseline up to 4 KiB and bandwidth
>= 1.3x (latency <= 1/1.3x) from 256 KiB, for bcast, allgather, allreduce,
reduce_scatter_block and alltoall; barrier <= 0.5x.  Standard library
only; plots are gnuplot's job.  It reports; it asserts nothing.
"""
import csv
import math
import os
import statistics
import sys
from collections import OrderedDict

OUT = sys.argv[1]
PLOTS = os.path.join(OUT, "plots")
os.makedirs(PLOTS, exist_ok=True)

COLLS = ["barrier", "bcast", "reduce", "allreduce", "gather", "scatter",
         "allgather", "reduce_scatter_block", "alltoall"]
CONFIGS = ["tuned-ucx", "ob1-vader", "cxl", "cxl-sw"]
BASELINES = ["tuned-ucx", "ob1-vader"]
DESC = {
    "tuned-ucx": "Open MPI default selection (coll/tuned) over pml ucx, UCX_TLS=cxl",
    "ob1-vader": "pml ob1 + btl vader (shared memory), coll/tuned: Open MPI's default on one host",
    "cxl": "coll/cxl over pml ucx, UCX_TLS=cxl, hw-coherent pool",
    "cxl-sw": "coll/cxl, software coherence on the emulate-nc emulator (measures the emulator)",
}
TARGET_COLLS = {"bcast", "allgather", "allreduce", "reduce_scatter_block", "alltoall"}
LAT_MAX_BYTES = 4096
BW_MIN_BYTES = 262144
LAT_BOUND = 0.5
BW_BOUND = 1.3


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


def read_bar(path, n):
    rows = []
    try:
        with open(path) as f:
            for line in f:
                parts = line.rstrip("\n").split("|", n - 1)
                if len(parts) == n:
                    rows.append(parts)
    except OSError:
        pass
    return rows


meta = read_kv(os.path.join(OUT, "meta.env"))
REPS = int(meta.get("reps", "1"))
state = OrderedDict((l, ("missing", "not configured")) for l in CONFIGS)
for label, st, note in read_bar(os.path.join(OUT, "configs.txt"), 3):
    state[label] = (st, note)
selection = dict(read_bar(os.path.join(OUT, "selection.txt"), 2))
failures = {}
for label, what in read_bar(os.path.join(OUT, "failures.txt"), 2):
    failures[label] = what
validation = {}
try:
    with open(os.path.join(OUT, "validation.csv"), newline="") as f:
        for row in csv.reader(f):
            if len(row) == 6:
                v = validation.setdefault(row[0], [0, 0])
                v[0] += 1
                v[1] += int(row[3])
except (OSError, ValueError):
    pass

# ---- samples -------------------------------------------------------------
# (coll, bytes, config) -> {rep: avg_us}; plus max errors seen
data = OrderedDict()
errors = {}
calls = {}   # (coll, bytes, config) -> [library calls, fallbacks] summed over reps
sizes_of = OrderedDict((c, set()) for c in COLLS)
with open(os.path.join(OUT, "samples.csv"), newline="") as f:
    rd = csv.reader(f)
    header = next(rd, None)
    for row in rd:
        if len(row) != 13:
            continue
        cfg, rep, coll, nbytes = row[0], int(row[1]), row[2], int(row[3])
        try:
            avg = float(row[8])
            err = int(row[10])
            ncalls, nfb = int(row[11]), int(row[12])
        except ValueError:
            continue
        if ncalls >= 0 and nfb >= 0:
            c = calls.setdefault((coll, nbytes, cfg), [0, 0])
            c[0] += ncalls
            c[1] += nfb
        data.setdefault((coll, nbytes, cfg), {})[rep] = avg
        if err:
            errors[(coll, nbytes, cfg)] = errors.get((coll, nbytes, cfg), 0) + err
        sizes_of.setdefault(coll, set()).add(nbytes)


# ---- runs: one row per measured run, with the round trip before it ---------
runs = []
try:
    with open(os.path.join(OUT, "runs.csv"), newline="") as f:
        for row in csv.DictReader(f):
            runs.append(row)
except OSError:
    pass
run_rtt = OrderedDict()   # (config, rep) -> ns, runs without a probe left out
for r in runs:
    try:
        run_rtt[(r["config"], int(r["rep"]))] = float(r.get("rtt_ns") or "x")
    except (KeyError, ValueError):
        pass

# This VM's two cores trade cache lines at ~50-120 ns round trip or at
# ~410-500 ns, flipping while the host moves its vCPUs; a median over
# repetitions of both states compares configurations measured in
# different states.  state_of() tells a repetition's state by the round
# trip measured right before its run.
STATE_SPLIT_NS = 200.0


def state_of(cfg, rep):
    v = run_rtt.get((cfg, rep))
    if v is None:
        return None
    return "fast" if v <= STATE_SPLIT_NS else "slow"


def summarize(reps, cfg, st=None):
    """median, min, max of {rep: value} (of VM state st only, if given)"""
    if st is not None:
        reps = {rep: v for rep, v in reps.items() if state_of(cfg, rep) == st}
    if not reps:
        return None
    vals = list(reps.values())
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "n": len(vals), "reps": reps}


def stats(coll, nbytes, cfg, st=None):
    """median, min, max over the repetitions (of VM state st only, if given)"""
    return summarize(data.get((coll, nbytes, cfg)) or {}, cfg, st)


measured = [c for c in CONFIGS if any(k[2] == c for k in data)]
have_cxl = "cxl" in measured
have_sw = "cxl-sw" in measured


def best_baseline(coll, nbytes, st=None):
    best = None
    for b in BASELINES:
        s = stats(coll, nbytes, b, st)
        if s and (best is None or s["median"] < best[1]["median"]):
            best = (b, s)
    return best


SUMMARY_SIZES = (8, 4096, 262144, 4194304)   # the summary's columns


def target_of(coll, nbytes):
    """(kind, bound) or None: kind 'lat' (cxl/best <= bound) or 'bw'
    (best/cxl >= bound)"""
    if coll == "barrier":
        return ("lat", LAT_BOUND)
    if coll in TARGET_COLLS:
        if nbytes <= LAT_MAX_BYTES:
            return ("lat", LAT_BOUND)
        if nbytes >= BW_MIN_BYTES:
            return ("bw", BW_BOUND)
    return None


def overlap(a, b):
    return a["min"] <= b["max"] and b["min"] <= a["max"]


def fmt(v):
    if v is None:
        return "-"
    if v >= 1000:
        return "%.0f" % v
    if v >= 100:
        return "%.1f" % v
    if v >= 10:
        return "%.2f" % v
    return "%.3f" % v


def cell(s):
    if not s:
        return "-"
    if s["n"] == 1:
        return fmt(s["median"])
    return "%s [%s–%s]" % (fmt(s["median"]), fmt(s["min"]), fmt(s["max"]))


def size_label(n):
    if n >= 1048576 and n % 1048576 == 0:
        return "%d MiB" % (n // 1048576)
    if n >= 1024 and n % 1024 == 0:
        return "%d KiB" % (n // 1024)
    return "%d B" % n


def size_key(n):
    if n >= 1048576 and n % 1048576 == 0:
        return "%dMiB" % (n // 1048576)
    if n >= 1024 and n % 1024 == 0:
        return "%dKiB" % (n // 1024)
    return "%dB" % n


def fallback_note(coll, nbytes, cfg):
    """' (fallback: F of N calls)' when coll/cxl handed calls back"""
    c = calls.get((coll, nbytes, cfg))
    if not c or c[1] == 0:
        return ""
    return " **(fallback: %d of %d calls)**" % (c[1], c[0] + c[1])


# ---- limits ------------------------------------------------------------------
memcpy = OrderedDict()
swcopy = {"swcopy_in": OrderedDict(), "swcopy_out": OrderedDict()}
cl = {}
xread, xwrite = {}, {}
try:
    with open(os.path.join(OUT, "raw", "limits.csv")) as f:
        for row in csv.reader(f):
            if len(row) >= 3:
                if row[0] == "memcpy":
                    memcpy[int(row[1])] = float(row[2])
                elif row[0] == "xread":
                    xread[int(row[1])] = float(row[2]) / 1000.0    # us
                elif row[0] == "xwrite":
                    xwrite[int(row[1])] = float(row[2]) / 1000.0
                elif row[0] in swcopy:
                    swcopy[row[0]][int(row[1])] = float(row[2])
                elif row[0] in ("cacheline_rt", "cacheline_oneway", "swline_rt",
                                "swline_oneway"):
                    cl[row[0]] = float(row[2])
except (OSError, ValueError):
    pass



# Floors at np = 2 (perftest/limits.c, xread: the median time one core
# needs to copy SIZE bytes that the other core has just written, whatever
# the protocol).  Every rank that must receive SIZE bytes from the other
# spends at least that; a rank that only gives need not, so a rooted
# collective's average over the two ranks is at least half of it.
FLOOR_RECEIVERS = {"barrier": None, "bcast": 0.5, "allreduce": 1.0,
                   "allgather": 1.0, "reduce_scatter_block": 1.0,
                   "alltoall": 1.0}


def floor_of(coll, nbytes):
    """lower bound (us) of the average latency of coll at np 2, or None"""
    if meta.get("np") != "2" or coll not in FLOOR_RECEIVERS:
        return None
    if coll == "barrier":
        ow = cl.get("cacheline_oneway")
        return ow / 1000.0 if ow else None
    if nbytes not in xread:
        return None
    return FLOOR_RECEIVERS[coll] * xread[nbytes]


# The hand-written reference (perftest/ref_coll.c, one run per
# repetition, config "hand-written" in runs.csv): the pattern of each
# latency target between two threads with nothing but cache lines, timed
# as coll_bench times MPI's.  (pattern, size) -> {rep: mean of the two
# ranks' averages, us}.
REF_CFG = "hand-written"
REF_OF = {"barrier": "barrier", "bcast": "bcast", "allreduce": "allreduce",
          "allgather": "exchange", "reduce_scatter_block": "exchange",
          "alltoall": "exchange"}
ref = {}
for rep in range(1, REPS + 1):
    try:
        with open(os.path.join(OUT, "raw", "ref_coll-r%d.csv" % rep)) as f:
            for row in csv.reader(f):
                if len(row) >= 6 and row[0] == "refcoll":
                    ref.setdefault((row[1], int(row[2])), {})[rep] = float(row[3]) / 1000.0
    except (OSError, ValueError):
        pass


def ref_stats(coll, nbytes, st=None):
    """median, min, max of the hand-written reference of coll's pattern"""
    if coll not in REF_OF:
        return None
    return summarize(ref.get((REF_OF[coll], 0 if coll == "barrier" else nbytes)) or {},
                     REF_CFG, st)


# ---- targets ---------------------------------------------------------------
targets = []   # dicts: coll, bytes, kind, bound, value, met, close, best
for coll in COLLS:
    for nbytes in sorted(sizes_of.get(coll, ())):
        t = target_of(coll, nbytes)
        if not t:
            continue
        bb = best_baseline(coll, nbytes)
        sc = stats(coll, nbytes, "cxl")
        entry = {"coll": coll, "bytes": nbytes, "kind": t[0], "bound": t[1],
                 "best": bb[0] if bb else None, "value": None, "met": None,
                 "close": False, "floor": None, "ref": None}
        if bb and sc:
            r = sc["median"] / bb[1]["median"]
            if t[0] == "lat":
                entry["value"] = r
                entry["met"] = r <= t[1]
            else:
                entry["value"] = 1.0 / r
                entry["met"] = (1.0 / r) >= t[1]
            entry["close"] = overlap(sc, bb[1])
            fl = floor_of(coll, nbytes)
            if fl is not None:
                # the best ratio any protocol could reach: floor / best
                r_fl = fl / bb[1]["median"]
                entry["floor"] = r_fl if t[0] == "lat" else 1.0 / r_fl
            rs = ref_stats(coll, nbytes)
            if rs is not None and t[0] == "lat":
                entry["ref"] = rs["median"] / bb[1]["median"]
        targets.append(entry)


def target_text(e):
    if e is None:
        return ""
    if e["value"] is None:
        return "not evaluated"
    if e["kind"] == "lat":
        txt = "lat %.2f× (≤ %.1f×)" % (e["value"], e["bound"])
    else:
        txt = "bw %.2f× (≥ %.1f×)" % (e["value"], e["bound"])
    if not e["met"] and e["floor"] is not None:
        txt += "; floor %.2f×" % e["floor"]
    if not e["met"] and e["ref"] is not None:
        txt += "; hand-written %.2f×" % e["ref"]
    return ("✓ met: " if e["met"] else "✗ missed: ") + txt


tmap = {(e["coll"], e["bytes"]): e for e in targets}

# ---- results.csv -------------------------------------------------------------
with open(os.path.join(OUT, "results.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["collective", "bytes", "config", "unit"]
               + ["rep%d" % i for i in range(1, REPS + 1)]
               + ["median", "min", "max", "ok_reps", "note"])
    for coll in COLLS:
        for nbytes in sorted(sizes_of.get(coll, ())):
            for cfg in CONFIGS:
                s = stats(coll, nbytes, cfg)
                if not s:
                    continue
                note = []
                if (coll, nbytes, cfg) in errors:
                    note.append("%d wrong elements" % errors[(coll, nbytes, cfg)])
                w.writerow([coll, nbytes, cfg, "us(avg)"]
                           + [("%.3f" % s["reps"][i]) if i in s["reps"] else ""
                              for i in range(1, REPS + 1)]
                           + ["%.3f" % s["median"], "%.3f" % s["min"], "%.3f" % s["max"],
                              s["n"], "; ".join(note)])

# ---- report.md ---------------------------------------------------------------
L = []
np_ = meta.get("np", "?")
oversub = meta.get("oversubscribed") == "1"
NONBLOCKING = meta.get("nonblocking") == "1"
OVERLAP = meta.get("overlap_us", "0")
if NONBLOCKING and OVERLAP not in ("0", ""):
    L.append("# MPI collectives started non-blocking with %s µs of computation before "
             "MPI_Wait: the time beyond it, coll/cxl against Open MPI's defaults "
             "(perftest/run-coll-bench.sh --overlap %s)" % (OVERLAP, OVERLAP))
else:
    L.append("# MPI collectives%s: coll/cxl against Open MPI's defaults (perftest/run-coll-bench.sh%s)"
             % (" started non-blocking (MPI_Ibcast... + MPI_Wait)" if NONBLOCKING else "",
                " --nonblocking" if NONBLOCKING else ""))
L.append("")
L.append("| | |")
L.append("|---|---|")
L.append("| date | %s |" % meta.get("date", "?"))
L.append("| machine | %s, **%s cores**, %s |" % (meta.get("cpu", "?"), meta.get("ncpu", "?"),
                                                meta.get("kernel", "?")))
L.append("| software | UCX %s, %s |" % (meta.get("ucx", "?"), meta.get("ompi", "?")))
L.append("| ranks | np = %s%s |" % (np_, " — **oversubscribed** (more ranks than cores)"
                                     if oversub else ", one per core (--bind-to core)"))
if memcpy:
    L.append("| memcpy bandwidth (1 core) | %s |" % ", ".join(
        "%s: %.0f MB/s" % (size_label(k), v) for k, v in memcpy.items()))
else:
    L.append("| memcpy bandwidth | not measured (raw/limits.err) |")
if cl:
    L.append("| cache-line round trip core 0 ↔ 1 | %.0f ns (one way %.0f ns) |"
             % (cl.get("cacheline_rt", float("nan")), cl.get("cacheline_oneway", float("nan"))))
if "swline_oneway" in cl or swcopy["swcopy_in"]:
    L.append("| sw-coherence floors (cxl-sw) | line one way %s ns; copy in (write-back) %s; "
             "copy out (invalidate) %s |" % (
                 ("%.0f" % cl["swline_oneway"]) if "swline_oneway" in cl else "?",
                 ", ".join("%s: %.0f MB/s" % (size_label(k), v)
                           for k, v in swcopy["swcopy_in"].items()) or "?",
                 ", ".join("%s: %.0f MB/s" % (size_label(k), v)
                           for k, v in swcopy["swcopy_out"].items()) or "?"))
L.append("| load average (1/5/15 min) | start %s, end %s |" % (meta.get("load_start", "?"),
                                                               meta.get("load_end", "?")))
if runs:
    busy = sorted(int(r["cpu_busy_pct"]) for r in runs if r.get("cpu_busy_pct", "").isdigit())
    loads = sorted(float(r["load1"]) for r in runs if r.get("load1"))
    if busy and loads:
        L.append("| other work before the measured runs | CPUs busy (1 s before each run) median %d %%, "
                 "%d–%d %%; 1-min load %.2f–%.2f%s (runs.csv) |"
                 % (statistics.median(busy), busy[0], busy[-1], loads[0], loads[-1],
                    ("; waited for ≤ %s %% busy" % meta["wait_idle"])
                    if meta.get("wait_idle", "0") != "0" else ""))
if run_rtt:
    # the VM state each run met: every short collective pays line transfers
    rtt = OrderedDict()
    for (c, _), v in run_rtt.items():
        rtt.setdefault(c, []).append(v)
    if rtt:
        allv = sorted(v for vs in rtt.values() for v in vs)
        L.append("| cache-line round trip right before each run | median %.0f ns, %.0f–%.0f; %s "
                 "(runs.csv: the host moves this VM's vCPUs, and short collectives pay it)%s |"
                 % (statistics.median(allv), allv[0], allv[-1],
                    ", ".join("%s %s" % (c, " ".join("%.0f" % v for v in vs))
                              for c, vs in rtt.items()),
                    ("; every run waited for ≤ %s ns, at most %s s"
                     % (meta["wait_rtt"], meta.get("wait_max", "?")))
                    if meta.get("wait_rtt", "0") != "0" else ""))
L.append("| run | %s mode, %d repetitions per configuration (alternating), budget %s s per "
         "collective and size, sizes %s, %s s in all |"
         % (meta.get("mode", "?"), REPS, meta.get("budget", "?"), meta.get("sizes", "?"),
            meta.get("duration_s", "?")))
L.append("| builds | libuct_cxl.so sha256 %s…; mca_coll_cxl.so %s |"
         % (meta.get("module_sha256", "?")[:12],
            ("%s (sha256 %s…)" % (meta.get("component"), meta.get("component_sha256", "")[:12]))
            if meta.get("component") else "**missing**"))
L.append("")
L.append("Figure: coll_bench's average latency in µs (per-rank mean over the timed iterations, "
         "averaged over ranks, as OSU's \"Avg Latency\"); data rewritten before every iteration "
         "(data-varying), untimed MPI_Barrier between iterations. Cells: median of the "
         "repetitions [min–max]. Bandwidth ratios are the inverse latency ratios (same bytes). "
         "`≈`: the min–max ranges of coll/cxl and the best baseline overlap.")
L.append("")

L.append("## Configurations")
L.append("")
L.append("| label | what | state | coll components on MPI_COMM_WORLD (priority) | check run (-c) |")
L.append("|---|---|---|---|---|")
for label in CONFIGS:
    st, note = state.get(label, ("missing", "not configured"))
    v = validation.get(label)
    vtxt = "-" if not v else ("%d cells, all right" % v[0] if v[1] == 0
                              else "**%d wrong elements** in %d cells" % (v[1], v[0]))
    sttxt = {"ok": "measured", "missing": "**MISSING**", "failed": "**FAILED**",
             "skipped": "skipped"}.get(st, st)
    if st == "ok" and label not in measured:
        sttxt = "**no results**"
    detail = DESC[label] if st == "ok" else "%s — %s" % (DESC[label], note)
    if label in failures:
        detail += "; failed runs: " + failures[label]
    L.append("| %s | %s | %s | %s | %s |" % (label, detail, sttxt,
                                             selection.get(label, "-") or "-", vtxt))
L.append("")
if not have_cxl:
    st, note = state.get("cxl", ("missing", ""))
    L.append("**coll/cxl was not measured** (%s: %s): the tables show the baselines only and "
             "the targets are not evaluated." % (st, note))
    L.append("")

# targets summary
L.append("## Targets (issue 12)")
L.append("")
if have_cxl:
    met = sum(1 for e in targets if e["met"])
    ev = sum(1 for e in targets if e["met"] is not None)
    L.append("coll/cxl against the better of tuned-ucx and ob1-vader, per cell: latency ≤ %.1f× "
             "up to %s and bandwidth ≥ %.1f× from %s for bcast, allgather, allreduce, "
             "reduce_scatter_block and alltoall; barrier ≤ %.1f×. **%d of %d met.**"
             % (LAT_BOUND, size_label(LAT_MAX_BYTES), BW_BOUND, size_label(BW_MIN_BYTES),
                LAT_BOUND, met, ev))
    L.append("")
    L.append("| collective | latency ≤ %.1f× (≤ %s) | bandwidth ≥ %.1f× (≥ %s) | misses |"
             % (LAT_BOUND, size_label(LAT_MAX_BYTES), BW_BOUND, size_label(BW_MIN_BYTES)))
    L.append("|---|---|---|---|")
    for coll in COLLS:
        es = [e for e in targets if e["coll"] == coll and e["met"] is not None]
        if not es:
            continue
        lat = [e for e in es if e["kind"] == "lat"]
        bw = [e for e in es if e["kind"] == "bw"]
        miss = ", ".join("%s%s %.2f×%s" % ((size_label(e["bytes"]) + " ") if coll != "barrier"
                                           else "", e["kind"], e["value"],
                                           " ≈" if e["close"] else "")
                         for e in es if not e["met"])
        L.append("| %s | %s | %s | %s |" % (
            coll,
            ("%d/%d" % (sum(e["met"] for e in lat), len(lat))) if lat else "-",
            ("%d/%d" % (sum(e["met"] for e in bw), len(bw))) if bw else "-",
            miss or "none"))
    L.append("")
else:
    L.append("Not evaluated: coll/cxl has no results.")
    L.append("")

# ---- by VM state: each state's targets on its own repetitions ---------------
def crossing_floor(coll, c_us):
    """low bound (us) of the mean of the two ranks' times, c one crossing
    (a store of one core seen by the other): each rank of an all-publish
    collective, or of a barrier, must see a store the other made after it
    entered, at least c even if both enter at once; a bcast's root need
    see nothing, so its mean is at least c / 2.  What an implementation
    adds, with any barrier between the calls: its own work, and half the
    barrier's exit skew (test/coll/coll_skew)."""
    if coll == "bcast":
        return c_us / 2.0
    if coll in ("barrier", "allreduce", "allgather", "reduce_scatter_block", "alltoall"):
        return c_us
    return None


def per_state_table():
    """the summary's cells, each VM state on its own repetitions"""
    T = []
    T.append("Medians per state, µs: best baseline / coll/cxl (ratio; from 256 KiB the "
             "bandwidth ratio best / cxl), ✓/✗ the target, and the hand-written reference "
             "with its ratio to the best baseline.")
    T.append("")
    hdr = ["collective"]
    for st in ("fast", "slow"):
        hdr += ["%s: best / cxl" % st, "%s: hand-written" % st]
    T.append("| " + " | ".join(hdr) + " |")
    T.append("|" + "---|" * len(hdr))
    for coll in COLLS:
        if coll not in REF_OF:
            continue
        for nbytes in ([0] if coll == "barrier" else SUMMARY_SIZES):
            if nbytes not in sizes_of.get(coll, ()):
                continue
            t = target_of(coll, nbytes)
            row = [coll if coll == "barrier" else "%s %s" % (coll, size_label(nbytes))]
            for st in ("fast", "slow"):
                sc = stats(coll, nbytes, "cxl", st)
                bb = best_baseline(coll, nbytes, st)
                rs = ref_stats(coll, nbytes, st)
                if sc is None or bb is None:
                    row += ["-", "-"]
                    continue
                r = sc["median"] / bb[1]["median"]
                if t and t[0] == "bw":
                    txt = "bw %.2f× %s" % (1.0 / r, "✓" if 1.0 / r >= t[1] else "✗")
                else:
                    txt = "%.2f× %s" % (r, "✓" if t and r <= t[1] else "✗")
                row.append("%s / %s: %s" % (fmt(bb[1]["median"]), fmt(sc["median"]), txt))
                row.append("%s: %.2f×" % (fmt(rs["median"]), rs["median"] / bb[1]["median"])
                           if rs else "")
            T.append("| " + " | ".join(row) + " |")
    return T


if have_cxl and run_rtt and meta.get("np") == "2":
    L.append("## Targets by VM state")
    L.append("")
    L.append("Each configuration's repetitions split by the cache-line round trip right before "
             "the run: **fast** ≤ %.0f ns < **slow**. Medians over the repetitions of one "
             "state only. *Floor*: a latency target below c (barrier, allreduce, allgather, "
             "reduce_scatter_block, alltoall) or c/2 (bcast), c = half the state's median round "
             "trip (one crossing: a store of one core seen by the other), is out of reach of any "
             "implementation in that state: each rank must see a store the other made after "
             "entering, a bcast's root nothing. Above the floor every implementation also pays "
             "its own work and half the exit skew of the untimed barrier between the calls "
             "(test/coll/coll_skew: about half a crossing for coll/cxl's barrier here). "
             "*Hand-written*: a latency target below the state's median of the hand-written "
             "reference (perftest/ref_coll.c: the same pattern between two threads, nothing but "
             "cache lines, timed as coll_bench times MPI's) is missed by that code too: reaching "
             "it would take a faster pattern than one flag per rank, or less than nothing of "
             "MPI, library and timer."
             % STATE_SPLIT_NS)
    L.append("")
    L.append("| state | repetitions (config: reps) | round trip | met | missed, target below the floor "
             "| missed, target below the hand-written reference | missed, otherwise |")
    L.append("|---|---|---|---|---|---|---|")
    for st in ("fast", "slow"):
        reps_in = OrderedDict()
        for cfg in CONFIGS:
            rs = sorted(rep for (c, rep) in run_rtt if c == cfg and state_of(cfg, rep) == st)
            if rs and cfg in measured:
                reps_in[cfg] = rs
        rtts = sorted(v for (c, rep), v in run_rtt.items()
                      if state_of(c, rep) == st and c in measured)
        if "cxl" not in reps_in or not any(b in reps_in for b in BASELINES):
            L.append("| %s | %s | %s | not evaluated: no run of coll/cxl and a baseline began "
                     "in this state | | | |" % (
                         st, ", ".join("%s: %s" % (c, " ".join(map(str, r)))
                                       for c, r in reps_in.items()) or "none",
                         ("%.0f ns" % statistics.median(rtts)) if rtts else "-"))
            continue
        c_us = statistics.median(rtts) / 2000.0
        met, below, below_ref, above = [], [], [], []
        for e in targets:
            coll, nbytes = e["coll"], e["bytes"]
            sc = stats(coll, nbytes, "cxl", st)
            bb = best_baseline(coll, nbytes, st)
            if sc is None or bb is None:
                continue
            sc, bm = sc["median"], bb[1]["median"]
            name = "%s%s" % (coll, "" if coll == "barrier" else " " + size_label(nbytes))
            if e["kind"] == "lat":
                r = sc / bm
                if r <= e["bound"]:
                    met.append(name)
                    continue
                fl = crossing_floor(coll, c_us)
                rs = ref_stats(coll, nbytes, st)
                txt = "%s %.2f×" % (name, r)
                if fl is not None and e["bound"] * bm < fl:
                    below.append(txt)
                elif rs is not None and e["bound"] * bm < rs["median"]:
                    below_ref.append("%s (hand-written %.2f×)" % (txt, rs["median"] / bm))
                else:
                    above.append(txt)
            else:
                r = bm / sc
                if r >= e["bound"]:
                    met.append(name)
                else:
                    above.append("%s bw %.2f×" % (name, r))
        n = len(met) + len(below) + len(below_ref) + len(above)
        ref_reps = [r for r in range(1, REPS + 1) if state_of(REF_CFG, r) == st]
        if ref_reps:
            reps_in[REF_CFG] = ref_reps
        L.append("| %s | %s | median %.0f ns (c = %.3f µs) | **%d of %d** | %d | %s | %s |" % (
            st, ", ".join("%s: %s" % (c, " ".join(map(str, r))) for c, r in reps_in.items()),
            statistics.median(rtts), c_us, len(met), n, len(below),
            "%d: %s" % (len(below_ref), ", ".join(below_ref)) if below_ref else "0",
            ", ".join(above) or "none"))
    L.append("")
    L += per_state_table()
    L.append("")

# per collective
L.append("## Latency per collective (µs)")
L.append("")
for coll in COLLS:
    szs = sorted(sizes_of.get(coll, ()))
    if not szs:
        continue
    L.append("### %s" % coll)
    L.append("")
    cols = [c for c in CONFIGS if c in measured and c != "cxl-sw"]
    hdr = ["size"] + cols + ["best baseline"]
    floors = [floor_of(coll, n) for n in szs]
    has_floor = any(f is not None for f in floors)
    if have_cxl:
        hdr += ["cxl / best", "target"]
    has_ref = any(ref_stats(coll, n) is not None for n in szs)
    if has_floor:
        hdr += ["floor", "cxl / floor", "best / floor"]
    if has_ref:
        hdr += ["hand-written", "cxl / hand-written", "hand-written / best"]
    if have_sw:
        hdr += ["cxl-sw", "sw / hw"]
    L.append("| " + " | ".join(hdr) + " |")
    L.append("|" + "---|" * len(hdr))
    for nbytes in szs:
        row = [size_label(nbytes) if coll != "barrier" else "-"]
        for c in cols:
            txt = cell(stats(coll, nbytes, c))
            if (coll, nbytes, c) in errors:
                txt += " **(%d wrong)**" % errors[(coll, nbytes, c)]
            txt += fallback_note(coll, nbytes, c)
            row.append(txt)
        bb = best_baseline(coll, nbytes)
        row.append(bb[0] if bb else "-")
        if have_cxl:
            sc = stats(coll, nbytes, "cxl")
            if sc and bb:
                r = sc["median"] / bb[1]["median"]
                row.append("%.2f×%s" % (r, " ≈" if overlap(sc, bb[1]) else ""))
            else:
                row.append("-")
            row.append(target_text(tmap.get((coll, nbytes))))
        if has_floor:
            fl = floor_of(coll, nbytes)
            sc = stats(coll, nbytes, "cxl")
            row.append(fmt(fl) if fl is not None else "-")
            row.append("%.1f×" % (sc["median"] / fl) if fl and sc else "-")
            row.append("%.1f×" % (bb[1]["median"] / fl) if fl and bb else "-")
        if has_ref:
            rs = ref_stats(coll, nbytes)
            sc = stats(coll, nbytes, "cxl")
            row.append(cell(rs) if rs else "-")
            row.append("%.2f×" % (sc["median"] / rs["median"]) if rs and sc else "-")
            row.append("%.2f×" % (rs["median"] / bb[1]["median"]) if rs and bb else "-")
        if have_sw:
            ss = stats(coll, nbytes, "cxl-sw")
            sh = stats(coll, nbytes, "cxl")
            row.append(cell(ss) + fallback_note(coll, nbytes, "cxl-sw"))
            row.append("%.2f×" % (ss["median"] / sh["median"]) if ss and sh else "-")
        L.append("| " + " | ".join(row) + " |")
    L.append("")

# rows missing (a run that failed part-way)
exp = meta.get("expected_rows")
if exp:
    short = []
    for cfg in measured:
        for rep in range(1, REPS + 1):
            n = sum(1 for k, v in data.items() if k[2] == cfg and rep in v)
            if n < int(exp):
                short.append("%s r%d: %d of %s" % (cfg, rep, n, exp))
    if short:
        L.append("**Incomplete runs** (rows of coll_bench): " + "; ".join(short))
        L.append("")

L.append("## Notes")
L.append("")
L.append("- Sizes: the whole buffer for bcast, reduce and allreduce; one rank's block for "
         "gather, scatter, allgather, reduce_scatter_block (recvcount) and alltoall (per pair). "
         "Reductions: MPI_FLOAT, MPI_SUM; the others MPI_CHAR.")
L.append("- tuned-ucx and ob1-vader run with `--mca coll ^cxl`; cxl and cxl-sw find "
         "mca_coll_cxl.so through `mca_base_component_path` (%s) with MCA `%s`."
         % (meta.get("component_path", "?"), meta.get("cxl_mca", "")))
L.append("- cxl-sw runs on the strict non-coherent emulator: write-back and invalidate are copies "
         "through a file, so its numbers show what the protocol costs on the emulator, not on "
         "hardware; sw / hw = cxl-sw median over cxl median.")
if oversub:
    L.append("- **Oversubscribed**: np = %s on %s cores (`--oversubscribe --bind-to none`): "
             "ranks share cores, waiting ranks must yield; numbers are not comparable to np ≤ cores."
             % (np_, meta.get("ncpu", "?")))
L.append("- coll/cxl's MPI_T counters (coll_cxl_calls, coll_cxl_fallbacks) are read around "
         "every cell; a cell where coll/cxl handed calls back to the module it replaced says "
         "`fallback: F of N calls` (the untimed barriers between iterations are counted too): "
         "such a cell measures, in part, the replaced module.")
if xread:
    L.append("- **floor** (np = 2): the least average latency any protocol can reach on this "
             "machine with these buffers. A rank that must receive S bytes from the other rank "
             "spends at least xread(S), the median time one core takes to copy S bytes the "
             "other core has just written (perftest/limits.c --xread: %s); bcast's root "
             "receives nothing, so its average over the two ranks is at least xread(S)/2; "
             "barrier: the one-way cache-line latency. `floor` in a missed target: the ratio "
             "the floor itself would give against the best baseline, the best any "
             "implementation could show. Writing the data for the other rank (xwrite: %s) "
             "is left out, so the floors are low bounds, not estimates."
             % (", ".join("%s %s µs" % (size_label(k), fmt(v)) for k, v in sorted(xread.items())),
                ", ".join("%s %s µs" % (size_label(k), fmt(v)) for k, v in sorted(xwrite.items()))))
if ref:
    L.append("- **hand-written** (np = 2, up to 256 B): perftest/ref_coll.c, run once per "
             "repetition after the configurations: two threads on the ranks' cores run "
             "coll_bench's loop (an untimed barrier of one flag line per rank, then the call "
             "between two clock_gettime reads, new data every call) with the fewest stores and "
             "loads each pattern needs: barrier (a flag each), bcast (the root stores the bytes "
             "and its flag, the other waits and copies), exchange for allgather, alltoall and "
             "reduce_scatter_block (both store S bytes and a flag, wait, copy the other's), "
             "allreduce (exchange, then the sum). No MPI, library, checks or slot reuse: a "
             "practical reference, not a proof. Up to a few lines one flag and the data beside "
             "it are the whole transfer, so an implementation beats it only with a faster "
             "pattern or by moving part of the call's wait into the untimed barrier's exit "
             "skew. `hand-written / best`: the ratio that code itself shows against the best "
             "baseline.")
L.append("- Nothing asserts timings. On a busy machine the numbers are noisy: see the load "
         "average above; raw output of every run is in raw/, commands in logs/commands.log.")
L.append("- Files: results.csv (per cell and configuration: every repetition, median, min, max), "
         "samples.csv (every coll_bench line with min/avg/max over ranks), plots/*.png.")
L.append("")

with open(os.path.join(OUT, "report.md"), "w") as f:
    f.write("\n".join(L))

# ---- summary.md: one compact table (for a README) -----------------------------
pick = [n for n in SUMMARY_SIZES if any(n in sizes_of.get(c, ()) for c in COLLS)]
S = []
S.append("np = %s%s, %s; medians of %d repetitions, µs (coll_bench avg latency, data-varying)%s."
         % (np_, " (oversubscribed)" if oversub else "", meta.get("date", "?"), REPS,
            "" if have_cxl else "; coll/cxl not measured"))
S.append("")
hdr = ["collective"]
for n in pick:
    hdr.append(size_label(n) + (": best baseline / cxl (ratio)" if have_cxl else
                                ": tuned-ucx / ob1-vader"))
S.append("| " + " | ".join(hdr) + " |")
S.append("|" + "---|" * len(hdr))
for coll in COLLS:
    szs = [0] if coll == "barrier" else pick
    if not any(n in sizes_of.get(coll, ()) for n in szs):
        continue
    row = [coll]
    for n in pick:
        m = 0 if coll == "barrier" else n
        if coll == "barrier" and n != pick[0]:
            row.append("")
            continue
        bb = best_baseline(coll, m)
        sc = stats(coll, m, "cxl")
        if have_cxl and bb and sc:
            e = tmap.get((coll, m))
            mark = "" if not e or e["met"] is None else (" ✓" if e["met"] else " ✗")
            row.append("%s (%s) / %s: %.2f×%s" % (fmt(bb[1]["median"]), bb[0],
                                                 fmt(sc["median"]),
                                                 sc["median"] / bb[1]["median"], mark))
        else:
            a, b = stats(coll, m, "tuned-ucx"), stats(coll, m, "ob1-vader")
            row.append("%s / %s" % (fmt(a["median"]) if a else "-", fmt(b["median"]) if b else "-"))
    S.append("| " + " | ".join(row) + " |")
S.append("")
if have_cxl:
    S.append("Ratio: cxl latency / best baseline latency (< 1: coll/cxl faster); ✓/✗: the "
             "issue's target for that cell (≤ 0.5× up to 4 KiB, bandwidth ≥ 1.3× i.e. ratio "
             "≤ 0.77× from 256 KiB, for bcast, allgather, allreduce, reduce_scatter_block, "
             "alltoall; barrier ≤ 0.5×).")
if ref:
    # what two bare threads take, for a reader of this summary alone
    parts = []
    for (pat, n), reps in ref.items():
        s = summarize(reps, REF_CFG)
        parts.append("%s%s %s" % (pat, "" if n == 0 else " " + size_label(n),
                                  fmt(s["median"])))
    S.append("")
    S.append("Hand-written reference (perftest/ref_coll.c: two threads, nothing "
             "but cache lines, timed the same way), medians, µs: %s." % ", ".join(parts))
if have_cxl and run_rtt and meta.get("np") == "2":
    states = {state_of(c, r) for (c, r) in run_rtt if c in measured}
    if len(states) > 1:
        # medians over repetitions of both VM states compare runs made in
        # different states: each state on its own too
        S.append("")
        S.append("The repetitions met both VM states (cache-line round trip ≤ %.0f ns: fast); "
                 "each on its own:" % STATE_SPLIT_NS)
        S.append("")
        S += per_state_table()
with open(os.path.join(OUT, "summary.md"), "w") as f:
    f.write("\n".join(S) + "\n")

# ---- gnuplot -------------------------------------------------------------------
gp = ['set terminal png size 1000,650 font ",10" noenhanced',
      'set datafile separator "\\t"', 'set datafile missing "?"',
      "set key top left", "set grid"]
plot_cfgs = [c for c in CONFIGS if c in measured]
for coll in COLLS:
    szs = sorted(n for n in sizes_of.get(coll, ()) if n > 0)
    if not szs:
        continue
    dat = "lat-%s.dat" % coll
    with open(os.path.join(PLOTS, dat), "w") as f:
        f.write("\t".join(["bytes"] + ["%s\t%s_min\t%s_max" % (c, c, c) for c in plot_cfgs]) + "\n")
        for n in szs:
            row = [str(n)]
            for c in plot_cfgs:
                s = stats(coll, n, c)
                row += (["%.6g" % s["median"], "%.6g" % s["min"], "%.6g" % s["max"]]
                        if s else ["?", "?", "?"])
            f.write("\t".join(row) + "\n")
    gp.append('set output "lat-%s.png"' % coll)
    gp.append('set title "%s, np %s%s: average latency (median, min-max of %d reps)"'
              % (coll, np_, " (oversubscribed)" if oversub else "", REPS))
    gp.append("set logscale xy")
    gp.append('set xlabel "bytes"')
    gp.append('set ylabel "us"')
    gp.append("set xtics (%s)" % ", ".join('"%s" %d' % (size_key(n), n) for n in szs))
    parts = []
    for i, c in enumerate(plot_cfgs):
        base = 2 + 3 * i
        parts.append('"%s" using 1:%d:%d:%d with yerrorlines lw 2 title "%s"'
                     % (dat, base, base + 1, base + 2, c))
    gp.append("plot " + ", \\\n     ".join(parts))
    gp.append("unset logscale xy")
    gp.append("set xtics autofreq")

if have_cxl:
    szs = sorted({n for c in COLLS if c != "barrier" for n in sizes_of.get(c, ()) if n > 0})
    pcolls = [c for c in COLLS if c != "barrier" and sizes_of.get(c)]
    with open(os.path.join(PLOTS, "speedup.dat"), "w") as f:
        f.write("\t".join(["bytes"] + pcolls) + "\n")
        for n in szs:
            row = [str(n)]
            for c in pcolls:
                bb, sc = best_baseline(c, n), stats(c, n, "cxl")
                row.append("%.6g" % (bb[1]["median"] / sc["median"]) if bb and sc else "?")
            f.write("\t".join(row) + "\n")
    gp.append('set output "speedup.png"')
    gp.append("set key outside right top")
    gp.append('set title "coll/cxl speed-up over the best baseline (best median / cxl median), np %s"'
              % np_)
    gp.append("set logscale xy")
    gp.append('set xlabel "bytes"')
    gp.append('set ylabel "speed-up (x)"')
    gp.append("set xtics (%s)" % ", ".join('"%s" %d' % (size_key(n), n) for n in szs))
    parts = ['"speedup.dat" using 1:%d with linespoints lw 2 title "%s"' % (i + 2, c)
             for i, c in enumerate(pcolls)]
    parts.append("%g with lines lw 2 lc rgb 'red' title 'latency target (<= %.1fx) up to 4 KiB'"
                 % (1 / LAT_BOUND, LAT_BOUND))
    parts.append("%g with lines lw 2 lc rgb 'blue' title 'bandwidth target (>= %.1fx) from 256 KiB'"
                 % (BW_BOUND, BW_BOUND))
    parts.append("1 with lines lc rgb 'gray' notitle")
    gp.append("plot " + ", \\\n     ".join(parts))
    gp.append("unset logscale xy")

with open(os.path.join(PLOTS, "plots.gp"), "w") as f:
    f.write("\n".join(gp) + "\n")
