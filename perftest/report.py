#!/usr/bin/python3
"""report.py OUTDIR - turn perftest/run-bench.sh samples into results.csv,
report.md and gnuplot inputs (plots/plots.gp + plots/*.dat).

Input: OUTDIR/raw/samples.csv (figure,layer,transport,variant,unit,better,
rep,value,status,note), OUTDIR/meta.env, OUTDIR/logs/ucp-lanes-*.txt.
Transports "cxl" (hardware coherence), "cxl-sw" (UCX_CXL_COHERENCE=sw on a
real pool file) and "cxl-emu" (the emulate-nc emulator) are the cxl labels;
sw_hw.csv and the report's sw/hw ratios compare cxl-sw with cxl.
Standard library only (Debian's /usr/bin/python3); plots are gnuplot's job.
It reports numbers and comparisons; it asserts nothing about timings.
"""
import csv
import math
import os
import re
import statistics
import sys
from collections import OrderedDict

OUT = sys.argv[1]
RAW = os.path.join(OUT, "raw")
LOGS = os.path.join(OUT, "logs")
PLOTS = os.path.join(OUT, "plots")

meta = {}
with open(os.path.join(OUT, "meta.env")) as f:
    for line in f:
        if "=" in line:
            k, v = line.rstrip("\n").split("=", 1)
            meta[k] = v
REPS = int(meta.get("reps", "5"))


def cxl_md_registers():
    """Does the cxl MD advertise registration (ucx_info -d of this run)?"""
    try:
        text = open(os.path.join(OUT, "logs", "ucx_info-d.txt")).read()
    except OSError:
        return False
    m = re.search(r"# Memory domain: cxl\n(.*?)(?:\n#\s*\n|# Memory domain:|\Z)", text, re.S)
    return bool(m and re.search(r"^#\s+register:", m.group(1), re.M))


CXL_MD_REG = cxl_md_registers()

# --------------------------------------------------------------------------
# Aggregate
# --------------------------------------------------------------------------
# key: (layer, figure, transport, variant, unit)
series = OrderedDict()
# (layer, figure) in definition order (raw/figures.txt), then in the order
# they were measured
fig_order = OrderedDict()
na_order = OrderedDict()
try:
    with open(os.path.join(RAW, "figures.txt")) as f:
        for line in f:
            if "|" in line:
                ly, fg = line.rstrip("\n").split("|", 1)
                fig_order.setdefault((ly, fg), None)
except OSError:
    pass
with open(os.path.join(RAW, "samples.csv"), newline="") as f:
    for row in csv.reader(f):
        if len(row) < 10:
            continue
        fig, layer, tl, var, unit, better, rep, val, status, note = row[:10]
        key = (layer, fig, tl, var, unit)
        s = series.setdefault(key, {"better": better, "reps": {}, "na": None,
                                    "notes": []})
        if status == "na":
            na_order.setdefault((layer, fig), None)
        else:
            fig_order.setdefault((layer, fig), None)
        if status == "na":
            s["na"] = note
        elif status == "ok":
            try:
                s["reps"][int(rep)] = float(val)
            except ValueError:
                s["reps"][int(rep)] = None
                s["notes"].append("unparsable value %r" % val)
        else:
            s["reps"][int(rep)] = None
            if note and note not in s["notes"]:
                s["notes"].append(note)

for k in na_order:
    fig_order.setdefault(k, None)

for s in series.values():
    vals = [v for v in s["reps"].values() if v is not None]
    s["ok"] = len(vals)
    s["n"] = len(s["reps"])
    if vals:
        s["median"] = statistics.median(vals)
        s["min"] = min(vals)
        s["max"] = max(vals)
    else:
        s["median"] = s["min"] = s["max"] = None


def get(layer, fig, tl, var, unit):
    return series.get((layer, fig, tl, var, unit))


def layer_series(layer, tl, var, units):
    """(fig, unit, series) of transport tl, in figure order, where measured"""
    for (ly, fig) in fig_order:
        if ly != layer:
            continue
        for unit in units:
            s = get(layer, fig, tl, var, unit)
            if s is not None:
                yield fig, unit, s


def overlap(sc, sp):
    """True when the min-max ranges of two series overlap."""
    if not sc or not sp or sc["median"] is None or sp["median"] is None:
        return False
    return sc["min"] <= sp["max"] and sp["min"] <= sc["max"]


def med(layer, fig, tl, var, unit):
    s = get(layer, fig, tl, var, unit)
    return None if s is None else s["median"]


# --------------------------------------------------------------------------
# results.csv
# --------------------------------------------------------------------------
def num(v):
    if v is None:
        return ""
    if v == 0:
        return "0"
    mag = abs(v)
    if mag >= 100:
        return "%.1f" % v
    if mag >= 1:
        return "%.3f" % v
    return "%.4g" % v


with open(os.path.join(OUT, "results.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["figure", "layer", "transport", "variant", "unit", "better"] +
               ["rep%d" % i for i in range(1, REPS + 1)] +
               ["median", "min", "max", "ok_reps", "note"])
    fpos = {k: i for i, k in enumerate(fig_order)}
    tpos = {"cxl": -4, "cxl-sw": -3, "cxl-xh": -2, "cxl-emu": -1}
    for k in series:
        tpos.setdefault(k[2], len(tpos))
    ordered = sorted(series.items(), key=lambda kv: (
        fpos.get((kv[0][0], kv[0][1]), 1 << 30), kv[0][3], kv[0][4], tpos[kv[0][2]]))
    for (layer, fig, tl, var, unit), s in ordered:
        if s["na"] is not None:
            w.writerow([fig, layer, tl, var, unit, s["better"]] +
                       [""] * REPS + ["n/a", "", "", "0/0", "n/a (%s)" % s["na"]])
            continue
        reps = []
        for i in range(1, REPS + 1):
            if i not in s["reps"]:
                reps.append("")
            elif s["reps"][i] is None:
                reps.append("FAILED")
            else:
                reps.append(num(s["reps"][i]))
        w.writerow([fig, layer, tl, var, unit, s["better"]] + reps +
                   [num(s["median"]) if s["median"] is not None else "FAILED",
                    num(s["min"]), num(s["max"]), "%d/%d" % (s["ok"], s["n"]),
                    "; ".join(s["notes"])])

# --------------------------------------------------------------------------
# Limits
# --------------------------------------------------------------------------
SIZE_RE = re.compile(r"(\d+)(B|KiB|MiB)\b")


def fig_size(fig):
    m = SIZE_RE.search(fig)
    if not m:
        return None
    return int(m.group(1)) * {"B": 1, "KiB": 1024, "MiB": 1 << 20}[m.group(2)]


memcpy = {}  # size -> MB/s median
for (layer, fig, tl, var, unit), s in series.items():
    if layer == "limit" and fig.startswith("memcpy") and s["median"]:
        memcpy[fig_size(fig)] = s["median"]
oneway_ns = med("limit", "cacheline one-way", "machine", "-", "ns(p50)")
rt_avg_ns = med("limit", "cacheline round trip", "machine", "-", "ns(avg)")
oneway_avg_ns = rt_avg_ns / 2 if rt_avg_ns else None
# software coherence: the same line ping-pong with write-back and
# invalidate, and the two halves of a sw bulk transfer (limits.c)
sw_oneway_ns = med("limit", "sw cacheline one-way", "machine", "-", "ns(p50)")
swcopy = {}  # size -> (copy-in MB/s, copy-out MB/s)
for (layer, fig, tl, var, unit), s in series.items():
    if layer == "limit" and fig.startswith("sw copy-in ") and s["median"]:
        out = med("limit", fig.replace("copy-in", "copy-out"), "machine", "-", "MB/s")
        inv = med("limit", fig.replace("copy-in", "invalidate"), "machine", "-", "MB/s")
        if out:
            swcopy[fig_size(fig)] = (s["median"], out, inv)


def memcpy_at_or_above(size):
    if not memcpy:
        return None
    cands = sorted(k for k in memcpy if k >= size)
    return memcpy[cands[0]] if cands else memcpy[max(memcpy)]


def limit_for(fig, unit):
    """(limit value, description) for a figure, or (None, reason)."""
    size = fig_size(fig)
    if unit == "MB/s":
        if "bibw" in fig:
            return None, "both directions"
        if size in memcpy:
            return memcpy[size], "memcpy %s" % fig_size_label(size)
        return None, "no memcpy at this size"
    if unit in ("us(p50)", "us(avg)"):
        ow = oneway_ns if unit == "us(p50)" else oneway_avg_ns
        if ow is None:
            return None, "no cache-line figure"
        lim = ow / 1000.0
        if size and size > 64:
            bw = memcpy_at_or_above(size)
            if bw:
                lim += size / (bw * 1048576.0) * 1e6
        return lim, "one-way line + size/memcpy"
    return None, "no limit for rates"


def fig_size_label(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return "%dMiB" % (size >> 20)
    if size >= 1024 and size % 1024 == 0:
        return "%dKiB" % (size >> 10)
    return "%dB" % size


def pct_of_limit(fig, unit, v):
    if v is None:
        return None
    lim, _ = limit_for(fig, unit)
    if lim is None or v == 0:
        return None
    if unit == "MB/s":
        return 100.0 * v / lim
    return 100.0 * lim / v


# --------------------------------------------------------------------------
# Targets
# --------------------------------------------------------------------------
targets = []        # dicts: name, cxl, baseline, required, met (True/False/None), detail, why
target_marks = {}   # (layer, fig, var, unit) -> "met"/"MISSED"


def lanes_hint():
    path = os.path.join(LOGS, "ucp-lanes-cxl.txt")
    try:
        text = open(path).read()
    except OSError:
        return None
    lanes = re.findall(r"lane\[\d+\]:.*", text)
    if not lanes:
        return None
    has_rma_bw = any("rma_bw" in l for l in lanes)
    m = re.search(r"tag_send: (.*)", text)
    proto = m.group(1).strip() if m else "?"
    if has_rma_bw:
        return ("`ucx_info -e` (UCX_TLS=cxl) lanes: %s; tag_send protocols: %s"
                % ("; ".join(l.split(":", 1)[1].strip() for l in lanes), proto))
    sm = ""
    try:
        smt = open(os.path.join(LOGS, "ucp-lanes-sm.txt")).read()
        sml = [l for l in re.findall(r"lane\[\d+\]:.*", smt) if "rma_bw" in l]
        if sml:
            sm = (" For comparison, UCX_TLS=sm has rma_bw lane(s): %s, so its "
                  "rendezvous copies once, by the kernel (cma)."
                  % "; ".join(re.sub(r"\s+", " ", l.split(":", 1)[1].strip())
                              for l in sml))
    except OSError:
        pass
    return ("`ucx_info -e` for UCX_TLS=cxl shows no rma_bw lane (the cxl MD "
            "advertises allocation but not registration), so UCP rendezvous "
            "cannot use put/get zcopy and moves large messages as active-"
            "message fragments on the am_bw lane (tag_send: %s)." % proto + sm)


def tmark(layer, fig, var, unit, met):
    target_marks[(layer, fig, var, unit)] = ("met" if met else
                                             ("MISSED" if met is False else
                                              "no data"))


def f3(v):
    return "—" if v is None else num(v)


def load_why(path):
    """perftest/why.md -> [(heading, [paragraph or '- item', ...])]"""
    entries, head, parts = [], None, []

    def close():
        if head is not None:
            entries.append((head, [p for p in parts if p]))

    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                text = line.strip()
                if line.startswith("## "):
                    close()
                    head, parts = line[3:].strip(), [""]
                elif head is None:
                    continue
                elif not text:
                    parts.append("")
                elif text.startswith("- "):
                    parts.append(text)
                else:
                    parts[-1] = (parts[-1] + " " + text).strip()
    except OSError:
        return []
    close()
    return entries


def why_for(entries, name):
    """The analysis of the target called name: the longest heading it starts with"""
    best = None
    for head, text in entries:
        if name.startswith(head) and (best is None or len(head) > len(best[0])):
            best = (head, text)
    return best[1] if best else None


def add_target(name, cxl, base, required, met, detail, why=None):
    targets.append({"name": name, "cxl": cxl, "base": base,
                    "required": required, "met": met, "detail": detail,
                    "why": why})


def overlap_note(layer, fig, var, unit, peer, peer_var=None):
    sc = get(layer, fig, "cxl", var, unit)
    sp = get(layer, fig, peer, peer_var or var, unit)
    if overlap(sc, sp):
        return ("; the min–max ranges overlap (cxl %s–%s, %s %s–%s): within run-to-run spread"
                % (num(sc["min"]), num(sc["max"]), peer, num(sp["min"]), num(sp["max"])))
    return ""


def avg_note(layer, fig, var):
    ca = med(layer, fig, "cxl", var, "us(avg)")
    pa = med(layer, fig, "posix", var, "us(avg)")
    if ca is None or pa is None:
        return ""
    return "; average latency: cxl %s vs posix %s us (ratio %s)" % (f3(ca), f3(pa), f3(ca / pa) if pa else "—")


# T1 am_lat 8 B <= posix
c = med("uct", "am_lat 8B short", "cxl", "-", "us(p50)")
p = med("uct", "am_lat 8B short", "posix", "-", "us(p50)")
met = None if (c is None or p is None) else c <= p
tmark("uct", "am_lat 8B short", "-", "us(p50)", met)
add_target("UCT am_lat 8 B (short) at or below posix [us, p50, lower is better]",
           c, p, "cxl <= posix", met,
           "cxl %s us vs posix %s us (ratio %s)%s%s" % (f3(c), f3(p),
                                                         f3(c / p) if c and p else "—",
                                                         avg_note("uct", "am_lat 8B short", "-"),
                                                         overlap_note("uct", "am_lat 8B short", "-",
                                                                      "us(p50)", "posix")),
           None if met else (overlap_note("uct", "am_lat 8B short", "-", "us(p50)", "posix")[2:] or None))

# T2 message rate >= 1.2 x posix
c = med("uct", "am_bw 8B short", "cxl", "-", "Mmsg/s")
p = med("uct", "am_bw 8B short", "posix", "-", "Mmsg/s")
met = None if (c is None or p is None) else c >= 1.2 * p
tmark("uct", "am_bw 8B short", "-", "Mmsg/s", met)
add_target("UCT message rate (am_bw 8 B short) at least 1.2x posix [Mmsg/s, higher is better]",
           c, p, ">= 1.2 x posix", met,
           "cxl %s vs posix %s Mmsg/s (ratio %s, needed 1.2)" %
           (f3(c), f3(p), f3(c / p) if c and p else "—"))

# T3/T4 UCP tag_bw 1 MiB / 4 MiB
hint = lanes_hint()
for size in ("1MiB", "4MiB"):
    fig = "tag_bw %s" % size
    best_host = [(med("ucp", fig, t, "host", "MB/s"), t) for t in ("sm", "sysv")]
    best_host = [x for x in best_host if x[0] is not None]
    bh = max(best_host) if best_host else None
    c = med("ucp", fig, "cxl", "host", "MB/s")
    met = None if (c is None or bh is None) else c >= bh[0]
    tmark("ucp", fig, "host", "MB/s", met)
    add_target("UCP tag_bw %s, ordinary buffers, at least the best of sm/sysv [MB/s, higher is better]" % size,
               c, bh[0] if bh else None, ">= best of sm/sysv (host buffers)", met,
               "cxl %s vs best %s (%s) MB/s; ratio %s%s" %
               (f3(c), f3(bh[0]) if bh else "—", bh[1] if bh else "—",
                f3(c / bh[0]) if c and bh else "—",
                overlap_note("ucp", fig, "host", "MB/s", bh[1]) if bh else ""), hint)
    # baseline: sm/sysv measured alternately with cxl(pool), i.e. in the pool
    # variant (their default allocation); the host-variant numbers were
    # taken in another time window and are only quoted
    same = [(med("ucp", fig, t, "pool", "MB/s"), t) for t in ("sm", "sysv")]
    same = [x for x in same if x[0] is not None]
    ba = max(same) if same else None
    c = med("ucp", fig, "cxl", "pool", "MB/s")
    met = None if (c is None or ba is None) else c >= 1.5 * ba[0]
    tmark("ucp", fig, "pool", "MB/s", met)
    add_target("UCP tag_bw %s, pool-resident buffers, at least 1.5x the best of sm/sysv [MB/s, higher is better]" % size,
               c, ba[0] if ba else None, ">= 1.5 x best of sm/sysv", met,
               "cxl(pool) %s vs best %s (%s, default allocation, run alternately with it) MB/s; "
               "ratio %s, needed 1.5; vs the best with ordinary buffers (%s %s MB/s, other "
               "time window): ratio %s" %
               (f3(c), f3(ba[0]) if ba else "—", ba[1] if ba else "—",
                f3(c / ba[0]) if c and ba else "—",
                bh[1] if bh else "—", f3(bh[0]) if bh else "—",
                f3(c / bh[0]) if c and bh else "—"), hint)

# T3b UCP tag_bw 64 KiB-4 MiB from ordinary buffers >= the best of posix/sysv
# (the mm transports users have without single-copy help; sm is the
# single-host line's comparison, in the MPI targets)
parts, allmet, anydata = [], True, False
for size in ("64KiB", "1MiB", "4MiB"):
    fig = "tag_bw %s" % size
    cands = [(med("ucp", fig, t, "host", "MB/s"), t) for t in ("posix", "sysv")]
    cands = [x for x in cands if x[0] is not None]
    c = med("ucp", fig, "cxl", "host", "MB/s")
    if c is None or not cands:
        parts.append("%s: no data" % size)
        allmet = False
        continue
    anydata = True
    b = max(cands)
    ok = c >= b[0]
    allmet = allmet and ok
    parts.append("%s: cxl %s vs %s %s MB/s (%s)%s" %
                 (size, f3(c), b[1], f3(b[0]), f3(c / b[0]),
                  overlap_note("ucp", fig, "host", "MB/s", b[1])))
add_target("UCP tag_bw 64 KiB–4 MiB, ordinary buffers, at least 1.0x the best of "
           "posix/sysv [MB/s, higher is better]", None, None,
           ">= best of posix/sysv at each size", allmet if anydata else None,
           "; ".join(parts))

UCT_PEERS_ALL = ["posix", "sysv", "cma", "tcp"]
UCP_PEERS_ALL = ["posix", "sysv", "cma+posix", "tcp", "sm"]

# T5 put/get bandwidth >= 90 % of memcpy from 64 KiB
bw_groups = [
    ("uct", "put_bw", "bcopy", "-"), ("uct", "put_bw", "zcopy", "-"),
    ("uct", "get", "bcopy", "-"), ("uct", "get", "zcopy", "-"),
    ("ucp", "ucp_put_bw", None, "host"), ("ucp", "ucp_put_bw", None, "pool"),
    ("ucp", "ucp_get", None, "host"), ("ucp", "ucp_get", None, "pool"),
]
for layer, op, layout, var in bw_groups:
    figs = [fg for (ly, fg) in fig_order if ly == layer and fg.split()[0] == op
            and (layout is None or fg.endswith(" " + layout))
            and (fig_size(fg) or 0) >= 65536]
    if not figs:
        continue
    parts, allmet, anydata = [], True, False
    for fg in sorted(figs, key=fig_size):
        sc = get(layer, fg, "cxl", var, "MB/s")
        v = sc["median"] if sc else None
        lim, _ = limit_for(fg, "MB/s")
        if sc is not None and sc["na"] is not None:
            parts.append("%s: n/a (%s)" % (fig_size_label(fig_size(fg)), sc["na"]))
            continue
        if v is None or lim is None:
            parts.append("%s: no data (failed)" % fig_size_label(fig_size(fg)))
            allmet = False
            continue
        anydata = True
        pct = 100.0 * v / lim
        ok = pct >= 90.0
        allmet = allmet and ok
        tmark(layer, fg, var, "MB/s", ok)
        parts.append("%s: %s of %s MB/s = %.0f%%" % (fig_size_label(fig_size(fg)),
                                                      f3(v), f3(lim), pct))
    met = allmet if anydata else None
    # what the peers reach at the same sizes (the best peer per size)
    peers = UCT_PEERS_ALL if layer == "uct" else UCP_PEERS_ALL
    best = []
    for fg in sorted(figs, key=fig_size):
        lim, _ = limit_for(fg, "MB/s")
        cands = [(med(layer, fg, p, var, "MB/s"), p) for p in peers]
        cands = [x for x in cands if x[0] is not None]
        v = med(layer, fg, "cxl", var, "MB/s")
        if cands and lim:
            b = max(cands)
            best.append((fig_size_label(fig_size(fg)), b[1], b[0], 100.0 * b[0] / lim,
                         (v / b[0]) if v else None))
    peer_hint = None
    if best and not met:
        txt = ", ".join("%s: %s %.0f%% (cxl/%s %s)" % (sz, p, pct, p, f3(r))
                        for sz, p, bv, pct, r in best)
        if all(pct < 90.0 for _, _, _, pct, _ in best):
            peer_hint = ("no peer reaches 90%% at these sizes either (best peer per size: %s)" % txt)
        else:
            halves = [sz for sz, p, bv, pct, r in best if r is not None and 0.4 <= r <= 0.6]
            peer_hint = "best peer per size: %s" % txt
            if halves:
                peer_hint += ("; at %s cxl gets about half of the best peer, what one extra "
                              "copy per byte would cost" % ", ".join(halves))
    label = "%s %s%s" % (layer.upper(), op, (" " + layout) if layout else "")
    if layer == "ucp":
        label += " (%s buffers)" % ("pool-resident" if var == "pool" else "ordinary")
    why = peer_hint
    if layer == "ucp" and var == "host" and not met:
        why = (("with ordinary (non-pool) buffers the cxl MD cannot register the "
                "remote buffer (it allocates, it does not register), so UCP has no "
                "usable rkey and emulates put/get with active messages (software RMA). "
                if not CXL_MD_REG else
                "the cxl MD registers ordinary memory in this build, with keys whose "
                "operations the owner process executes when it progresses (records in "
                "its channel, answers in the requester's), so every operation waits "
                "for the owner's progress, as UCP's own emulation does. ") +
               "posix and sysv cannot register ordinary memory either; cma can."
               + ((" " + peer_hint[0].upper() + peer_hint[1:]) if peer_hint else ""))
    add_target("%s from 64 KiB: at least 90%% of the memcpy limit [MB/s, higher is better]" % label,
               None, None, ">= 90% of memcpy at each size", met, "; ".join(parts), why)

# T6 atomics latency <= posix
for layer, fig, var in (("uct", "add_lat 8B", "-"), ("uct", "fadd 8B", "-"),
                        ("uct", "cswap 8B", "-"), ("ucp", "ucp_fadd 8B", "host"),
                        ("ucp", "ucp_fadd 8B", "pool")):
    c = med(layer, fig, "cxl", var, "us(p50)")
    p = med(layer, fig, "posix", var, "us(p50)")
    met = None if (c is None or p is None) else c <= p
    tmark(layer, fig, var, "us(p50)", met)
    vl = "" if var == "-" else (" (%s buffers)" % ("pool-resident" if var == "pool" else "ordinary"))
    add_target("%s %s%s latency at or below posix [us, p50, lower is better]" %
               (layer.upper(), fig, vl), c, p, "cxl <= posix", met,
               "cxl %s us vs posix %s us (ratio %s)%s%s" %
               (f3(c), f3(p), f3(c / p) if c and p else "—", avg_note(layer, fig, var),
                overlap_note(layer, fig, var, "us(p50)", "posix")),
               None if met else (overlap_note(layer, fig, var, "us(p50)", "posix")[2:] or None))

# T7-T9 MPI (mpi_bench, 2 ranks, malloc'd buffers): UCX_TLS=cxl against
# UCX_TLS=posix (the ordinary-buffer peer), and the README's single-host
# line "cxl+cma" (UCX_TLS=cxl,cma) against UCX_TLS=sm
MPI_SH = "cxl+cma"   # label of the single-host line
mpi_marks = {}       # (fig, unit, who) -> "met"/"MISSED"


def mpi_lanes_hint():
    """why the single-host line may lose: its lanes from ucx_info -e"""
    try:
        text = open(os.path.join(LOGS, "ucp-lanes-%s.txt" % MPI_SH)).read()
    except OSError:
        return None
    lanes = [l for l in re.findall(r"lane\[\d+\]:.*", text)]
    if not any("cma/" in l and "rma_bw" in l for l in lanes):
        return ("`ucx_info -e` for UCX_TLS=cxl,cma shows no cma rma_bw lane, so "
                "ordinary rendezvous buffers go through active messages: %s"
                % "; ".join(re.sub(r"\s+", " ", l) for l in lanes))
    return None


def mpi_target(name, who, peer, tests, unit, lo, hi, hint=None):
    """who against peer for every mpi_TEST SIZE with lo <= SIZE <= hi"""
    figs = [fg for (ly, fg) in fig_order if ly == "mpi"
            and fg.split()[0] in ["mpi_" + t for t in tests]
            and fig_size(fg) is not None and lo <= fig_size(fg) <= hi]
    figs.sort(key=lambda fg: (tests.index(fg.split()[0][4:]), fig_size(fg)))
    parts, allmet, anydata, spread = [], True, False, []
    for fg in figs:
        sc = get("mpi", fg, who, "-", unit)
        sp = get("mpi", fg, peer, "-", unit)
        c = sc["median"] if sc else None
        p = sp["median"] if sp else None
        if c is None or p is None:
            parts.append("%s: no data" % fg[4:])
            allmet = False
            continue
        anydata = True
        ok = (c >= p) if unit == "MB/s" else (c <= p)
        allmet = allmet and ok
        mpi_marks[(fg, unit, who)] = "met" if ok else "MISSED"
        ov = overlap(sc, sp)
        if not ok and ov:
            spread.append(fg[4:])
        parts.append("%s: %s vs %s %s (%s%s)" % (fg[4:], f3(c), f3(p),
                                                 "MB/s" if unit == "MB/s" else "us",
                                                 f3(c / p) if p else "—",
                                                 ", ranges overlap" if ov else ""))
    met = (allmet if anydata else None)
    why = None
    if met is False:
        why = hint
        if spread:
            why = ((why + "; " if why else "") +
                   "missed within the run-to-run spread at %s (min–max ranges overlap)"
                   % ", ".join(spread))
    add_target(name, None, None, "", met,
               ("%s vs %s, medians: " % (who, peer)) + "; ".join(parts) if parts else "no MPI data",
               why)


mpi_target("MPI bandwidth and bidirectional bandwidth, ordinary buffers, 64 KiB–4 MiB: "
           "UCX_TLS=cxl at least 1.0x UCX_TLS=posix [MB/s, higher is better]",
           "cxl", "posix", ["bw", "bibw"], "MB/s", 65536, 4 << 20)
mpi_target("MPI bandwidth and bidirectional bandwidth 64 KiB–4 MiB: the single-host line "
           "(UCX_TLS=cxl,cma) at least 1.0x UCX_TLS=sm [MB/s, higher is better]",
           MPI_SH, "sm", ["bw", "bibw"], "MB/s", 65536, 4 << 20, mpi_lanes_hint())
mpi_target("MPI latency 8 B–4 MiB: the single-host line (UCX_TLS=cxl,cma) at or below "
           "UCX_TLS=sm [us, average, lower is better]",
           MPI_SH, "sm", ["lat"], "us(avg)", 1, 4 << 20, mpi_lanes_hint())

# --------------------------------------------------------------------------
# Software coherence: cxl-sw vs cxl (hw), and the emulator
# --------------------------------------------------------------------------
SW_GROUPS = (("uct", "-", "UCT"), ("ucp", "host", "UCP, ordinary buffers"),
             ("ucp", "pool", "UCP, pool-resident buffers"))
SW_UNITS = ("us(p50)", "MB/s", "Mmsg/s")


def sw_path(layer, fig):
    """How cxl-sw does a figure (what its cost consists of)."""
    op = fig.split()[0]
    if layer == "uct":
        if op.startswith("am_"):
            return "AM channels, write-back + flush per record"
        return "plain loads/stores/CPU atomics (owner's host)"
    if op.startswith("tag_"):
        return "AM (eager; rendezvous get_zcopy from pool buffers)"
    if op in ("ucp_put_bw", "ucp_get"):
        return "cxl RMA lanes (owner's host: plain copies)"
    if op.startswith("ucp_fadd"):
        return "cxl CPU atomics (owner's host)"
    return ""


def advantage(sc, sp):
    """How many times better series sc is than sp (None if unknown)."""
    if not sc or not sp or sc["median"] is None or sp["median"] is None:
        return None
    if sc["median"] <= 0 or sp["median"] <= 0:
        return None
    r = sc["median"] / sp["median"]
    return r if sc["better"] == "higher" else 1.0 / r


def cost_factor(hw, sw):
    """How many times worse cxl-sw is than cxl (>1: sw worse)."""
    return advantage(hw, sw)


def sw_rows(layer, var):
    """[(fig, unit, hw, sw, emu)] where cxl-sw has a series"""
    return [(fig, unit, get(layer, fig, "cxl", var, unit), ss,
             get(layer, fig, "cxl-emu", var, unit))
            for fig, unit, ss in layer_series(layer, "cxl-sw", var, SW_UNITS)]


def geomean(vals):
    vals = [v for v in vals if v]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


HAVE_SW = any(k[2] == "cxl-sw" for k in series)


def sw_floor(fig, unit, hw, tl, var):
    """What the machine allows sw mode for a figure, from limits.c.  Only
    for the paths that pay software coherence: on the owner's host (cxl-sw)
    RMA, atomics and pool-resident rendezvous are plain loads and stores."""
    size = fig_size(fig)
    if tl == "cxl-sw" and var == "pool" and ("ucp_" in fig or "tag_bw" in fig or
                                             "rma_bench" in fig):
        return " (on the owner's host: plain loads and stores, no sw copy)"
    if unit == "us(p50)" and sw_oneway_ns and oneway_ns and hw and size and size <= 64:
        # an atomic through the owner is a request and an answer: two line
        # transfers where hw mode needs none (the CPU's own atomic)
        trips = 2 if "fadd" in fig else 1
        hw_floor = 0.0 if trips == 2 else oneway_ns / 1000.0
        # hw's own software overhead on top of the sw line transfers
        best = (trips * sw_oneway_ns / 1000.0 + max(hw - hw_floor, 0.0)) / hw
        return (" (floor: %s written back and read from memory, %s ns each, against "
                "%s ns coherent; with hw's software overhead on top, %s x is the best "
                "reachable)" % ("a request line and an answer line" if trips == 2 else
                                "one line one way", f3(sw_oneway_ns), f3(oneway_ns),
                                f3(best)))
    if unit == "MB/s" and size in swcopy and hw:
        cin, cout, inv = swcopy[size]
        if ("ucp_put" in fig or "rma_bench put" in fig) and inv:
            # through the owner: it cleans the lines before (write-back and
            # invalidate) and invalidates them after, two passes on its core
            lim = min(cin, inv / 2)
            how = "copy-in %s, owner's two invalidate passes %s" % (f3(cin), f3(inv / 2))
        elif ("ucp_get" in fig or "rma_bench get" in fig) and inv:
            # the owner cleans the lines, the reader invalidates and copies
            lim = min(cout, inv)
            how = "owner's clean %s, copy-out %s" % (f3(inv), f3(cout))
        else:
            lim = min(cin, cout)
            how = "copy-in %s, copy-out %s" % (f3(cin), f3(cout))
        return (" (limit: sw %s MB/s at this size: at most %s x hw)" % (how, f3(lim / hw)))
    return ""


def sw_target(name, items, bound, tl="cxl-sw"):
    """tl (a sw label) within 'bound' times cxl (hw) for each (layer, fig, var, unit)"""
    parts, allmet, anydata = [], True, False
    for layer, fig, var, unit in items:
        hw = get(layer, fig, "cxl", var, unit)
        sw = get(layer, fig, tl, var, unit)
        cf = cost_factor(hw, sw)
        if cf is None:
            na = sw["na"] if sw and sw.get("na") else "no data"
            parts.append("%s: %s" % (fig, na))
            allmet = False
            continue
        anydata = True
        ok = cf <= bound
        allmet = allmet and ok
        parts.append("%s%s: sw %s vs hw %s %s, %s x worse%s" %
                     (fig, "" if var in ("-", None) else " (%s)" % var,
                      f3(sw["median"]), f3(hw["median"]), unit, f3(cf),
                      sw_floor(fig, unit, hw["median"], tl, var)))
    if any(k[2] == tl for k in series):
        add_target(name, None, None, "cost factor <= %g" % bound,
                   allmet if anydata else None, "; ".join(parts))


sw_target("Software coherence: UCT am_lat and UCP tag_lat 8 B at most 3x hw mode "
          "[us, p50, lower is better]",
          [("uct", "am_lat 8B short", "-", "us(p50)"),
           ("ucp", "tag_lat 8B", "host", "us(p50)")], 3.0)
sw_target("Software coherence: AM message rate (UCT am_bw 8 B) at least 0.3x hw mode "
          "[Mmsg/s, higher is better]",
          [("uct", "am_bw 8B short", "-", "Mmsg/s")], 1 / 0.3)
sw_target("Software coherence: UCT am_bw 8 KiB and UCP tag_bw 1 MiB at least 0.4x hw "
          "mode [MB/s, higher is better]",
          [("uct", "am_bw 8KiB bcopy", "-", "MB/s"),
           ("ucp", "tag_bw 1MiB", "host", "MB/s"),
           ("ucp", "tag_bw 1MiB", "pool", "MB/s")], 1 / 0.4)
sw_target("Software coherence: UCP ucp_put_bw and ucp_get 1 MiB, pool-resident buffers, "
          "at least 0.3x hw mode [MB/s, higher is better]",
          [("ucp", "ucp_put_bw 1MiB", "pool", "MB/s"),
           ("ucp", "ucp_get 1MiB", "pool", "MB/s")], 1 / 0.3)
sw_target("Software coherence: UCP ucp_fadd 8 B, pool-resident buffers, at most 10x hw "
          "mode latency [us, p50, lower is better]",
          [("ucp", "ucp_fadd 8B", "pool", "us(p50)")], 10.0)
# the same two targets across sw hosts, where the memory's owner takes part
sw_target("Software coherence across hosts (cxl-xh, through the owner): UCP ucp_put_bw "
          "and ucp_get 1 MiB, pool-resident buffers, at least 0.3x hw mode "
          "[MB/s, higher is better]",
          [("ucp", "ucp_put_bw 1MiB", "pool", "MB/s"),
           ("ucp", "ucp_get 1MiB", "pool", "MB/s"),
           ("ucp", "ucp_get_x8 1MiB", "pool", "MB/s"),
           ("ucp", "rma_bench put 1MiB", "pool", "MB/s"),
           ("ucp", "rma_bench get 1MiB", "pool", "MB/s")], 1 / 0.3, tl="cxl-xh")
sw_target("Software coherence across hosts (cxl-xh, through the owner): UCP ucp_fadd 8 B, "
          "pool-resident buffers, at most 10x hw mode latency [us, p50, lower is better]",
          [("ucp", "ucp_fadd 8B", "pool", "us(p50)")], 10.0, tl="cxl-xh")
HAVE_EMU = any(k[2] == "cxl-emu" for k in series)

if HAVE_SW or HAVE_EMU:
    with open(os.path.join(OUT, "sw_hw.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["figure", "layer", "variant", "unit", "better", "hw_median",
                    "sw_median", "sw_over_hw", "sw_cost_factor", "emu_median", "sw_path",
                    "note"])
        for layer, var, _ in SW_GROUPS:
            for fig, unit, hw, sw, emu in sw_rows(layer, var):
                if sw["na"] is not None:
                    w.writerow([fig, layer, var, unit, sw["better"],
                                num(hw["median"]) if hw else "", "n/a", "", "", "", "",
                                "n/a (%s)" % sw["na"]])
                    continue
                r = (sw["median"] / hw["median"]) if (hw and hw["median"] and
                                                      sw["median"] is not None) else None
                cf = cost_factor(hw, sw)
                w.writerow([fig, layer, var, unit, sw["better"],
                            num(hw["median"]) if hw else "",
                            num(sw["median"]) if sw["median"] is not None else "FAILED",
                            "%.4g" % r if r is not None else "",
                            "%.4g" % cf if cf else "",
                            num(emu["median"]) if emu and emu["median"] is not None else "",
                            sw_path(layer, fig), "; ".join(sw["notes"])])

# --------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------
UCT_PEERS = ["posix", "sysv", "cma", "tcp"]
UCP_PEERS = ["posix", "sysv", "cma+posix", "tcp", "sm"]
MPI_PEERS = ["posix", "sm"]
MPI_ALL = ["cxl", MPI_SH, "posix", "sm"]
PRIMARY_UNITS = ("us(p50)", "MB/s", "Mmsg/s", "us(avg)")


def cell(s):
    if s is None:
        return "—"
    if s["na"] is not None:
        return "n/a (%s)" % s["na"]
    if s["median"] is None:
        return "FAILED (0/%d)" % s["n"]
    txt = "%s [%s–%s]" % (num(s["median"]), num(s["min"]), num(s["max"]))
    if s["ok"] < s["n"]:
        txt += " (%d/%d ok)" % (s["ok"], s["n"])
    return txt


def ratio_cell(sc, sp):
    if sc is None or sp is None:
        return "—"
    if sp["na"] is not None or sc["na"] is not None:
        return "n/a"
    if sc["median"] is None or sp["median"] is None:
        return "—"
    if sp["median"] == 0:
        return "—"
    r = sc["median"] / sp["median"]
    better = r > 1 if sc["better"] == "higher" else r < 1
    txt = ("%.3g" % r) if 0.001 <= r < 1000 else ("%.2e" % r)
    return "%s %s%s" % (txt, "✓" if better else ("=" if r == 1 else "✗"),
                        " ≈" if overlap(sc, sp) else "")


def has_sw(layer, variant):
    return any(k[0] == layer and k[2] == "cxl-sw" and k[3] == variant for k in series)


def md_table(layer, variant, peers, units=PRIMARY_UNITS):
    rows = []
    sw = has_sw(layer, variant)
    head = (["Figure", "unit", "better", "cxl"] + (["cxl-sw", "sw/hw"] if sw else []) +
            peers + ["cxl/" + p for p in peers] + ["cxl % of limit", "target"])
    rows.append("| " + " | ".join(head) + " |")
    rows.append("|" + "---|" * len(head))
    for fig, unit, sc in layer_series(layer, "cxl", variant, units):
        sps = [get(layer, fig, p, variant, unit) for p in peers]
        pct = pct_of_limit(fig, unit, sc["median"])
        mark = target_marks.get((layer, fig, variant, unit), "")
        if mark == "MISSED":
            mark = "**MISSED**"
        swc = []
        if sw:
            ss = get(layer, fig, "cxl-sw", variant, unit)
            swc = [cell(ss), ratio_cell(ss, sc)]
        rows.append("| " + " | ".join(
            [fig, unit, sc["better"], cell(sc)] + swc + [cell(x) for x in sps] +
            [ratio_cell(sc, x) for x in sps] +
            ["%.0f%%" % pct if pct is not None else "—", mark]) + " |")
    return "\n".join(rows)


def mpi_table(units=("us(avg)", "MB/s")):
    """every MPI figure: the four configurations, the three ratios of the
    targets, and which target marks the figure"""
    head = (["Figure", "unit", "better"] + ["`%s`" % t for t in MPI_ALL] +
            ["cxl/posix", "cxl+cma/sm", "cxl/sm", "target"])
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (ly, fig) in fig_order:
        if ly != "mpi":
            continue
        for unit in units:
            ss = [get("mpi", fig, t, "-", unit) for t in MPI_ALL]
            if all(x is None for x in ss):
                continue
            c, sh, px, sm = ss
            better = next(x["better"] for x in ss if x is not None)
            marks = []
            for who, txt in (("cxl", "cxl vs posix"), (MPI_SH, "cxl+cma vs sm")):
                m = mpi_marks.get((fig, unit, who))
                if m:
                    marks.append("%s %s" % (txt, "met" if m == "met" else "**MISSED**"))
            rows.append("| " + " | ".join(
                [fig, unit, better] + [cell(x) for x in ss] +
                [ratio_cell(c, px), ratio_cell(sh, sm), ratio_cell(c, sm),
                 "; ".join(marks)]) + " |")
    return "\n".join(rows)


def na_and_failures():
    lines = []
    for (layer, fig, tl, var, unit), s in series.items():
        if unit == "us(avg)":
            continue  # same runs as us(p50)
        where = "%s %s %s%s [%s]" % (layer, tl, fig, "" if var == "-" else " (%s)" % var, unit)
        if s["na"] is not None:
            lines.append(("n/a", where, s["na"]))
        elif s["ok"] < s["n"]:
            lines.append(("FAILED %d/%d" % (s["n"] - s["ok"], s["n"]), where,
                          "; ".join(s["notes"]) or "?"))
    return lines


def probe_text():
    try:
        idle = int(meta["probe_idle"])
        pool = int(meta["probe_pool"])
        host = int(meta["probe_host"])
    except (KeyError, ValueError):
        return "residency probe: no data"
    mib = 1048576.0
    verdict = ("the four 4 MiB buffers are in the pool" if pool - host >= 15 * mib
               else "**the buffers did NOT show up in the pool**")
    return ("residency probe, a 4 MiB tag_bw pair with UCX_TLS=cxl, pool used bytes "
            "sampled with `cxlpool info` during the run: %.1f MiB idle, %.1f MiB with "
            "md:cxl first, %.1f MiB with thp,mmap,heap: %s"
            % (idle / mib, pool / mib, host / mib, verdict))


md = []
md.append("# ucx-cxl side-by-side benchmarks")
md.append("")
md.append("| | |")
md.append("|---|---|")
md.append("| date | %s |" % meta.get("date", "?"))
md.append("| machine | %s (%s), %s CPUs%s |" % (meta.get("cpu", "?"), meta.get("host", "?"),
                                                meta.get("ncpu", "?"),
                                                (", hypervisor " + meta["hypervisor"]) if meta.get("hypervisor") else ""))
md.append("| kernel | %s |" % meta.get("kernel", "?"))
md.append("| UCX | %s |" % meta.get("ucx", "?"))
md.append("| MPI | %s |" % meta.get("ompi", "?"))
md.append("| module | `%s` (sha256 %s…, copied into the output folder before the run) |" %
          (meta.get("module", "?"), meta.get("module_sha256", "?")[:16]))
md.append("| pool | private, `%s`, 1 GiB, created and destroyed by the run |" % meta.get("pool", "?"))
if meta.get("pool_sw"):
    md.append("| cxl-sw pool | private, `%s`, 1 GiB, `cxlpool create --coherence sw --hosts 1` "
              "(a real file mapped directly, not emulated), `UCX_CXL_COHERENCE=sw` |"
              % meta["pool_sw"])
if meta.get("pool_xh"):
    md.append("| cxl-xh pool | private, `%s`, 1 GiB, `cxlpool create --coherence sw --hosts 2`, "
              "`UCX_CXL_COHERENCE=sw`; the server writes host partition 0, the client "
              "partition 1 (`UCX_CXL_HOST_INDEX`): RMA and atomics on the other's pool "
              "memory go through its owner |" % meta["pool_xh"])
if meta.get("pool_emu"):
    md.append("| cxl-emu pool | `%s` (`--coherence sw`, 8 host partitions; every process "
              "is its own emulated host) — **an emulator: its numbers measure memcpy "
              "through a file, not hardware** |" % meta["pool_emu"])
if meta.get("cxl_env"):
    md.append("| extra cxl environment | `%s` (--cxl-env) |" % meta["cxl_env"])
md.append("| mode | %s, %s repetitions per figure, alternating cxl and peers |" %
          (meta.get("mode", "?"), meta.get("reps", "?")))
md.append("| run time | %s s |" % meta.get("duration_s", "?"))
md.append("| load average (1/5/15 min) | start %s, end %s |" % (meta.get("load_start", "?"),
                                                            meta.get("load_end", "?")))
md.append("")
try:
    ls = float(meta.get("load_start", "0").split()[0])
    le = float(meta.get("load_end", "0").split()[0])
    nc = int(meta.get("ncpu", "2"))
    if max(ls, le) > 0.5 * nc:
        md.append("> **Note:** the machine was busy during the run (1-minute load "
                  "average %.1f at start, %.1f at end, %d CPUs). Both processes of a pair "
                  "spin on their cores, so other load shows up as noise and outliers; "
                  "cxl and the peers were run alternately, so the ratios are fairer "
                  "than the absolute numbers. Rerun on an idle machine for absolute figures." %
                  (ls, le, nc))
        md.append("")
except ValueError:
    pass

unstable = [k for k, v in series.items()
            if k[0] != "limit" and v["ok"] >= 3 and v["min"] and v["max"] / v["min"] > 2.0]
measured = [k for k, v in series.items() if k[0] != "limit" and v["ok"] >= 3]
if measured:
    md.append("Stability: %d of %d measured series have max/min > 2 across their "
              "repetitions%s." % (len(unstable), len(measured),
                                  " (the machine's state changed during the run; "
                                  "trust ratios of alternately measured pairs more than "
                                  "absolute numbers)" if len(unstable) > len(measured) // 10 else ""))
    md.append("")

md.append("## How to read this")
md.append("")
md.append("* Each cell: **median [min–max]** over the repetitions (cxl and every peer "
          "run alternately: cxl, peer1, peer2, …, cxl, peer1, …). `(k/N ok)`: N-k "
          "repetitions failed and are listed under *Failures*.")
md.append("* `cxl/peer`: ratio of the medians; ✓ = cxl better, ✗ = cxl worse "
          "(for `lower` figures a ratio below 1 is better); ≈ = the min–max ranges of "
          "the two overlap, i.e. the difference is within the run-to-run spread.")
md.append("* Units: `us(p50)` = ucx_perftest's *typical* (50th percentile) latency in "
          "microseconds (one-way for ping-pong tests); `us(avg)` = overall average; "
          "`MB/s` = 2^20 bytes/s (what ucx_perftest prints); `Mmsg/s` = million "
          "messages per second.")
md.append("* `cxl % of limit`: bandwidth / memcpy bandwidth at the same size; latency: "
          "(one-way cache-line transfer + size / memcpy bandwidth) / latency. Limits are "
          "under *Machine limits*. Above 100% means the figure beats that simple model "
          "(e.g. fadd/cswap/put_lat, whose target line is not touched by the peer and "
          "stays in the initiator's cache).")
md.append("* UCT buffers come from `uct_iface_mem_alloc()` (ucx_perftest): for cxl "
          "the runs set `UCX_CXL_ALLOC=md`, so they come from the cxl MD, i.e. the pool "
          "(cxl MD registration of ordinary memory in this build: %s); for posix/sysv "
          "from their own shared-memory MD; for cma/tcp ordinary registered memory."
          % ("yes" if CXL_MD_REG else "no"))
md.append("* UCP buffers: ucx_perftest allocates them with `ucp_mem_map(UCP_MEM_MAP_ALLOCATE)`, "
          "which follows `UCX_ALLOC_PRIO`. **host** = `UCX_ALLOC_PRIO=thp,mmap,heap` for "
          "every transport (ordinary anonymous memory). **pool** = for cxl "
          "`UCX_ALLOC_PRIO=md:cxl,thp,mmap,heap` (buffers in the pool; %s); the peers cannot allocate "
          "from the pool, so in this variant they run with UCX's default "
          "`md:sysv,md:posix,huge,thp,md:*,mmap,heap` (their own shared-memory segments "
          "where the MD is in use). `-m host` is the only memory type ucx_perftest "
          "1.13 offers; there is no option to place buffers in the pool other than "
          "the allocation order (`-z`, which passes the memory handle to the send calls, "
          "was not used)." % probe_text())
md.append("* **cxl** is the hardware-coherent mode (`UCX_CXL_COHERENCE=hw`). **cxl-sw** "
          "is the same transport with `UCX_CXL_COHERENCE=sw` on a second private pool file "
          "(created `--coherence sw --hosts 1`, mapped directly): every write another "
          "host must see is written back (CLWB/CLFLUSHOPT + fence) and every read of "
          "another host's data is preceded by a cache-line flush. RMA and CPU "
          "atomics are offered (not `get_short`); with one host partition both "
          "processes are on the memory owner's host, so put, get and atomics use "
          "plain loads, stores and CPU atomics as in hw mode (the path between "
          "hosts, through the owner, is not measured here). Both processes run on this one CPU, "
          "so the flushes cost what they cost here, but no line is actually fetched "
          "from another host's memory. `sw/hw` = ratio of medians cxl-sw/cxl (✓ sw "
          "better, ✗ sw worse, ≈ ranges overlap); cxl and cxl-sw were run alternately "
          "with the peers.")
md.append("* UCP configurations: `UCX_TLS=cxl | posix | sysv | cma,posix | tcp | sm` "
          "(tcp with `UCX_NET_DEVICES=lo`); `sm` is what UCP users get by default and "
          "does not include cxl. MPI: Open MPI with pml/osc ucx, `UCX_TLS=cxl`, "
          "the README's single-host line `UCX_TLS=cxl,cma` (`cxl+cma`), "
          "`UCX_TLS=posix` and `UCX_TLS=sm`, otherwise identical command lines (the "
          "module is preloaded in all).")
md.append("")

md.append("## Targets")
md.append("")
nmet = sum(1 for t in targets if t["met"] is True)
nmiss = sum(1 for t in targets if t["met"] is False)
nnod = sum(1 for t in targets if t["met"] is None)
md.append("%d targets: **%d met, %d missed**%s." % (len(targets), nmet, nmiss,
                                                    (", %d without data" % nnod) if nnod else ""))
md.append("")
md.append("| Target | result | numbers (medians) |")
md.append("|---|---|---|")
for t in targets:
    res = {True: "met", False: "**MISSED**", None: "**no data**"}[t["met"]]
    md.append("| %s | %s | %s |" % (t["name"], res, t["detail"]))
md.append("")
missed = [t for t in targets if t["met"] is not True]
if missed:
    analyses = load_why(os.path.join(os.path.dirname(os.path.abspath(__file__)), "why.md"))
    md.append("### Why (missed targets)")
    md.append("")
    md.append("The analyses are kept in `perftest/why.md` (profiles, traces and A/B runs "
              "of the session that made them); the hints are from this run.")
    md.append("")
    for t in missed:
        md.append("* **%s** — %s" % (t["name"], t["detail"]))
        text = why_for(analyses, t["name"])
        if not text:
            md.append("  * **Why:** not analysed (no entry in perftest/why.md)")
        else:
            md.append("  * **Why:** %s" % text[0])
            for part in text[1:]:
                md.append("    * %s" % (part[2:] if part.startswith("- ") else part))
        if t["why"]:
            md.append("  * **Hint from this run:** %s" % t["why"])
    md.append("")

md.append("## Machine limits")
md.append("")
md.append("| limit | median [min–max] | |")
md.append("|---|---|---|")
for fig, unit, s in layer_series("limit", "machine", "-", ("MB/s", "ns(p50)", "ns(avg)")):
    extra = ""
    if unit == "MB/s" and s["median"]:
        extra = "%.2f GB/s (10^9 B/s)" % (s["median"] * 1048576 / 1e9)
    md.append("| %s [%s] | %s | %s |" % (fig, unit, cell(s), extra))
md.append("")
md.append("memcpy: one thread on core 0 copying between two buffers of that size "
          "(8 KiB–1 MiB stay in cache, 64 MiB does not); cache line: two threads on cores 0 "
          "and 1 ping-ponging a counter in one 64-byte line, median single round trip "
          "(p50) and median of chunk averages (avg).")
md.append("")

md.append("## UCT (ucx_perftest -x TL -d DEV)")
md.append("")
md.append(md_table("uct", "-", UCT_PEERS, ("us(p50)", "MB/s", "Mmsg/s")))
md.append("")
md.append("## UCP, ordinary buffers (host)")
md.append("")
md.append(md_table("ucp", "host", UCP_PEERS, ("us(p50)", "MB/s", "Mmsg/s")))
md.append("")
md.append("## UCP, pool-resident buffers for cxl (pool; peers: UCX default allocation)")
md.append("")
md.append(md_table("ucp", "pool", UCP_PEERS, ("us(p50)", "MB/s", "Mmsg/s")))
md.append("")
md.append("## MPI (perftest/mpi_bench.c, Open MPI pml/osc ucx)")
md.append("")
md.append(mpi_table())
md.append("")
md.append("`mpi_lat`: ping-pong, one-way; `mpi_bw`: window of 64 MPI_Isend; `mpi_bibw`: "
          "both directions, bytes of both counted; `mpi_put/get/acc_lat`: one op + "
          "MPI_Win_flush on an MPI_Win_allocate window (lock_all), average. "
          "Point-to-point buffers are malloc'd (ordinary memory). Configurations, run "
          "alternately: `cxl` = `UCX_TLS=cxl`; `cxl+cma` = the README's single-host "
          "line, `UCX_TLS=cxl,cma UCX_CXL_RKEY_PTR=yes` with "
          "`UCX_ALLOC_PRIO=md:cxl,huge,thp,mmap,heap` (windows in the pool; cma "
          "copies ordinary rendezvous buffers once); "
          "`posix` = `UCX_TLS=posix`; `sm` = `UCX_TLS=sm`. Ratios: ✓ = the first "
          "better, ≈ = ranges overlap.")
md.append("")

if HAVE_SW:
    md.append("## Cost of software coherence (cxl-sw vs cxl)")
    md.append("")
    md.append("The same ucx_perftest cases as `cxl`, with `UCX_CXL_COHERENCE=sw` on a real "
              "(non-emulated) pool file. `cost` = how many times worse cxl-sw is "
              "(latency sw/hw, bandwidth and rate hw/sw; `sw path`: how sw mode does "
              "it). RMA and atomics run on cxl's own lanes; with one host partition "
              "both processes are on the owner's host, where no round trip to the "
              "owner is needed. MPI was not run in sw mode.")
    md.append("")
    summ = []
    for layer, var, title in SW_GROUPS:
        cf = [cost_factor(hw, sw) for _, _, hw, sw, _ in sw_rows(layer, var)]
        cf = [c for c in cf if c]
        g = geomean(cf)
        if g:
            summ.append("%s: %s× over %d figures (range %s–%s×)" %
                        (title, f3(g), len(cf), f3(min(cf)), f3(max(cf))))
    if summ:
        md.append("Geometric mean of the cost: " + "; ".join(summ) + ".")
        md.append("")
    for layer, var, title in SW_GROUPS:
        rows = sw_rows(layer, var)
        if not rows:
            continue
        md.append("### " + title)
        md.append("")
        md.append("| Figure | unit | better | cxl (hw) | cxl-sw | sw/hw | cost | sw path |")
        md.append("|---|---|---|---|---|---|---|---|")
        na = OrderedDict()
        for fig, unit, hw, sw, _ in rows:
            if sw["na"] is not None and sw["na"].startswith("not advertised in sw mode"):
                na.setdefault(fig, None)
                continue
            cf = cost_factor(hw, sw)
            md.append("| %s | %s | %s | %s | %s | %s | %s | %s |" %
                      (fig, unit, sw["better"], cell(hw), cell(sw), ratio_cell(sw, hw),
                       ("%s×" % f3(cf)) if cf else "—", sw_path(layer, fig)))
        if na:
            md.append("| %s | | | (see the %s table) | n/a (not advertised in sw mode) | n/a | — | "
                      "needs the owner inside the call (get_short) |" %
                      (", ".join(OrderedDict((f.split()[0], None) for f in na)), title))
        md.append("")
if HAVE_EMU:
    md.append("## Emulator (emulate-nc) — not hardware")
    md.append("")
    md.append("`UCX_CXL_POOL=emulate-nc:POOL` with `UCX_CXL_COHERENCE=sw`: every process "
              "is its own emulated host with a private view of the pool, and write-back / "
              "invalidate are memcpy between that view and the shared file. These numbers "
              "measure **the emulator's memcpy**, not a CXL device or the coherence "
              "protocol; it exists to check correctness (a missing write-back is a visible "
              "bug there). A few UCP figures, ordinary buffers, small iteration counts.")
    md.append("")
    md.append("| Figure | unit | better | cxl-emu (emulator) | cxl-sw | cxl (hw) | emu/sw |")
    md.append("|---|---|---|---|---|---|---|")
    for fig, unit, se in layer_series("ucp", "cxl-emu", "host", SW_UNITS):
        ss = get("ucp", fig, "cxl-sw", "host", unit)
        md.append("| %s | %s | %s | %s | %s | %s | %s |" %
                  (fig, unit, se["better"], cell(se), cell(ss),
                   cell(get("ucp", fig, "cxl", "host", unit)), ratio_cell(se, ss)))
    md.append("")

md.append("## Average latencies (us(avg), same runs)")
md.append("")
for layer, var, peers, title in (("uct", "-", UCT_PEERS, "UCT"),
                                 ("ucp", "host", UCP_PEERS, "UCP host"),
                                 ("ucp", "pool", UCP_PEERS, "UCP pool")):
    md.append("### " + title)
    md.append("")
    md.append(md_table(layer, var, peers, ("us(avg)",)))
    md.append("")

md.append("## n/a and failures")
md.append("")
nf = na_and_failures()
if nf:
    md.append("| what | figure | reason |")
    md.append("|---|---|---|")
    for kind, where, why in nf:
        md.append("| %s | %s | %s |" % (kind, where, why.replace("|", "/")))
else:
    md.append("None.")
md.append("")
md.append("## UCP lanes (`ucx_info -e -u t`)")
md.append("")
for label in ("cxl", "cxl-sw", "cxl-xh", "cxl-emu", "posix", "sysv", "cma+posix", "tcp", "sm",
              MPI_SH):
    try:
        text = open(os.path.join(LOGS, "ucp-lanes-%s.txt" % label)).read()
    except OSError:
        continue
    keep = [re.sub(r"^#\s*", "", l).strip() for l in text.splitlines()
            if re.search(r"lane\[|tag_send:|rma_bw:", l)]
    md.append("* **%s**: %s" % (label, " · ".join("`%s`" % k for k in keep) or "(none)"))
md.append("")
md.append("## Plots")
md.append("")
for name, what in (("ratios_uct.png", "UCT: cxl advantage over each peer"),
                   ("ratios_ucp_host.png", "UCP host buffers: cxl advantage"),
                   ("ratios_ucp_pool.png", "UCP pool buffers: cxl advantage"),
                   ("ratios_mpi.png", "MPI: cxl advantage over posix and sm"),
                   ("ratios_mpi_single_host.png",
                    "MPI: the single-host line (cxl,cma) against sm"),
                   ("sw_cost.png", "cost of software coherence: cxl-sw vs cxl per figure"),
                   ("tag_bw_host.png", "UCP tag_bw vs size, ordinary buffers"),
                   ("tag_bw_pool.png", "UCP tag_bw vs size, pool buffers"),
                   ("tag_lat_host.png", "UCP tag_lat vs size, ordinary buffers"),
                   ("uct_get_bcopy.png", "UCT get bcopy bandwidth vs size"),
                   ("uct_get_zcopy.png", "UCT get zcopy bandwidth vs size")):
    md.append("* [%s](plots/%s) — %s" % (name, name, what))
md.append("")
md.append("\"Advantage\" in the ratio charts = cxl/peer for higher-is-better figures and "
          "peer/cxl for lower-is-better ones, so above 1 always means cxl is better "
          "(log scale). Raw data: `results.csv`, `raw/`; cxl-sw vs cxl: `sw_hw.csv`.")
md.append("")

with open(os.path.join(OUT, "report.md"), "w") as f:
    f.write("\n".join(md))

# --------------------------------------------------------------------------
# gnuplot inputs
# --------------------------------------------------------------------------
os.makedirs(PLOTS, exist_ok=True)
gp = []
gp.append('set terminal png size 1400,700 font ",10" noenhanced')
gp.append('set datafile separator "\\t"')
gp.append('set datafile missing "?"')
gp.append("set grid ytics")
gp.append("set key outside right top")


def ratio_plot(fname, layer, variant, peers, units, title, base="cxl"):
    rows = []
    for fig, unit, sc in layer_series(layer, base, variant, units):
        advs = [advantage(sc, get(layer, fig, p, variant, unit)) for p in peers]
        if all(a is None for a in advs):
            continue
        rows.append(["%s [%s]" % (fig, unit)] +
                    ["?" if a is None else "%.5g" % a for a in advs])
    if not rows:
        return
    dat = fname.replace(".png", ".dat")
    with open(os.path.join(PLOTS, dat), "w") as f:
        f.write("\t".join(["figure"] + peers) + "\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    vals = [float(x) for r in rows for x in r[1:] if x != "?"]
    lo = min(vals + [1.0]) / 1.5
    hi = max(vals + [1.0]) * 1.5
    gp.append("")
    gp.append('set output "%s"' % fname)
    gp.append('set title "%s (above 1: %s better; log scale)"' % (title, base))
    gp.append("set style data histograms")
    gp.append("set style histogram clustered gap 1")
    gp.append("set style fill solid 0.8 border -1")
    gp.append("set boxwidth 0.9")
    gp.append("set logscale y")
    gp.append("set yrange [%g:%g]" % (lo, hi))
    gp.append('set ylabel "%s advantage"' % base)
    gp.append("set xtics rotate by -45 scale 0")
    gp.append("unset xlabel")
    gp.append("set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb 'black'")
    parts = []
    for i, p in enumerate(peers):
        spec = '"%s" using %d%s title "vs %s"' % (dat, i + 2, ":xtic(1)" if i == 0 else "", p)
        parts.append(spec)
    gp.append("plot " + ", \\\n     ".join(parts))
    gp.append("unset arrow 1")
    gp.append("unset logscale y")
    gp.append("set yrange [*:*]")
    gp.append("set xtics norotate")


ratio_plot("ratios_uct.png", "uct", "-", UCT_PEERS, ("us(p50)", "MB/s", "Mmsg/s"),
           "UCT: cxl vs peers")
ratio_plot("ratios_ucp_host.png", "ucp", "host", UCP_PEERS, ("us(p50)", "MB/s", "Mmsg/s"),
           "UCP, ordinary buffers: cxl vs peers")
ratio_plot("ratios_ucp_pool.png", "ucp", "pool", UCP_PEERS, ("us(p50)", "MB/s", "Mmsg/s"),
           "UCP, pool buffers for cxl: cxl vs peers")
ratio_plot("ratios_mpi_single_host.png", "mpi", "-", ["sm"], ("us(avg)", "MB/s"),
           "MPI: the single-host line UCX_TLS=cxl,cma vs UCX_TLS=sm", base=MPI_SH)
ratio_plot("ratios_mpi.png", "mpi", "-", MPI_PEERS, ("us(avg)", "MB/s"),
           "MPI: UCX_TLS=cxl vs UCX_TLS=posix and UCX_TLS=sm")


def size_plot(fname, layer, op, suffix, variant, transports, unit, title, with_memcpy):
    figs = [fg for (ly, fg) in fig_order if ly == layer and fg.split()[0] == op
            and (suffix is None or fg.endswith(" " + suffix)) and fig_size(fg)]
    figs.sort(key=fig_size)
    if not figs:
        return
    dat = fname.replace(".png", ".dat")
    cols = list(transports) + (["memcpy limit"] if with_memcpy else [])
    with open(os.path.join(PLOTS, dat), "w") as f:
        f.write("\t".join(["size"] + cols) + "\n")
        for fg in figs:
            row = [str(fig_size(fg))]
            for t in transports:
                s = get(layer, fg, t, variant, unit)
                row.append("?" if not s or s["median"] is None else "%.6g" % s["median"])
            if with_memcpy:
                v = memcpy.get(fig_size(fg))
                row.append("?" if v is None else "%.6g" % v)
            f.write("\t".join(row) + "\n")
    gp.append("")
    gp.append('set output "%s"' % fname)
    gp.append('set title "%s"' % title)
    gp.append("set style data linespoints")
    gp.append("set logscale xy")
    gp.append('set xlabel "message size (bytes)"')
    gp.append('set ylabel "%s"' % unit)
    gp.append("set yrange [*:*]")
    gp.append("set xtics norotate")
    gp.append("set xtics (%s)" % ", ".join('"%s" %d' % (fig_size_label(fig_size(fg)), fig_size(fg))
                                           for fg in figs))
    parts = []
    for i, t in enumerate(cols):
        style = " dt 2 lw 2 lc rgb 'black'" if t == "memcpy limit" else " lw 2"
        parts.append('"%s" using 1:%d title "%s"%s' % (dat, i + 2, t, style))
    gp.append("plot " + ", \\\n     ".join(parts))
    gp.append("unset logscale xy")
    gp.append("set xtics autofreq")
    gp.append("unset xlabel")


def sw_cost_plot(fname):
    """cost factor cxl-sw vs cxl per figure, one bar per layer/variant"""
    cols = [(ly, v, t) for ly, v, t in SW_GROUPS if sw_rows(ly, v)]
    if not cols:
        return
    rows = OrderedDict()
    for ci, (ly, v, _) in enumerate(cols):
        for fig, unit, hw, sw, _ in sw_rows(ly, v):
            cf = cost_factor(hw, sw)
            if cf is None:
                continue
            r = rows.setdefault("%s %s [%s]" % (ly.upper(), fig, unit), ["?"] * len(cols))
            r[ci] = "%.5g" % cf
    if not rows:
        return
    dat = fname.replace(".png", ".dat")
    with open(os.path.join(PLOTS, dat), "w") as f:
        f.write("\t".join(["figure"] + [t for _, _, t in cols]) + "\n")
        for k, r in rows.items():
            f.write("\t".join([k] + r) + "\n")
    vals = [float(x) for r in rows.values() for x in r if x != "?"]
    gp.append("")
    gp.append('set output "%s"' % fname)
    gp.append('set title "Cost of software coherence: cxl-sw vs cxl (hw) (above 1: sw worse; log scale)"')
    gp.append("set style data histograms")
    gp.append("set style histogram clustered gap 1")
    gp.append("set style fill solid 0.8 border -1")
    gp.append("set boxwidth 0.9")
    gp.append("set logscale y")
    gp.append("set yrange [%g:%g]" % (min(vals + [1.0]) / 1.5, max(vals + [1.0]) * 1.5))
    gp.append('set ylabel "cost factor (latency sw/hw, bandwidth hw/sw)"')
    gp.append("set xtics rotate by -45 scale 0")
    gp.append("unset xlabel")
    gp.append("set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead lw 2 lc rgb 'black'")
    parts = []
    for i, (_, _, t) in enumerate(cols):
        parts.append('"%s" using %d%s title "%s"' % (dat, i + 2, ":xtic(1)" if i == 0 else "", t))
    gp.append("plot " + ", \\\n     ".join(parts))
    gp.append("unset arrow 1")
    gp.append("unset logscale y")
    gp.append("set yrange [*:*]")
    gp.append("set xtics norotate")
    gp.append('set ylabel ""')


sw_cost_plot("sw_cost.png")

UCP_ALL = ["cxl"] + (["cxl-sw"] if HAVE_SW else []) + UCP_PEERS
UCT_ALL = ["cxl"] + UCT_PEERS
size_plot("tag_bw_host.png", "ucp", "tag_bw", None, "host", UCP_ALL, "MB/s",
          "UCP tag_bw, ordinary buffers (median)", True)
size_plot("tag_bw_pool.png", "ucp", "tag_bw", None, "pool", UCP_ALL, "MB/s",
          "UCP tag_bw, pool buffers for cxl, default allocation for peers (median)", True)
size_plot("tag_lat_host.png", "ucp", "tag_lat", None, "host", UCP_ALL, "us(p50)",
          "UCP tag_lat, ordinary buffers (median of p50)", False)
size_plot("uct_get_bcopy.png", "uct", "get", "bcopy", "-", UCT_ALL, "MB/s",
          "UCT get bcopy bandwidth (median)", True)
size_plot("uct_get_zcopy.png", "uct", "get", "zcopy", "-", UCT_ALL, "MB/s",
          "UCT get zcopy bandwidth (median)", True)

with open(os.path.join(PLOTS, "plots.gp"), "w") as f:
    f.write("\n".join(gp) + "\n")
