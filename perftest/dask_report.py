#!/usr/bin/python3
"""dask_report.py OUTDIR - report.md from perftest/run-dask-bench.sh output.

Input (OUTDIR): results.csv (figure,size,scheme,unit,better,rep1..repN,
median,min,max), meta.json, limits.csv (perftest/limits.c: memcpy lines).

Per figure the median of the repetitions, its [min-max] spread, and the
ratio of medians cxl/tcp (for put: how many times tcp's throughput; for
rtt: the fraction of tcp's round trip), marked "≈" when the spreads
overlap.  Targets of issue 15: put throughput >= 3x tcp for every size
from 16 MiB; small-message round trip <= 0.5x tcp.  Met/missed per size,
with the ratio and the machine's limits.  Standard library only; it
reports, it asserts nothing.
"""

import csv
import json
import os
import sys

OUT = sys.argv[1]
PUT_MIN = 16 << 20
PUT_BOUND = 3.0
RTT_BOUND = 0.5


def load_results():
    rows = {}
    with open(os.path.join(OUT, "results.csv")) as f:
        for r in csv.DictReader(f):
            reps = [float(r[k]) for k in r if k.startswith("rep") and r[k]]
            rows[(r["figure"], r["size"], r["scheme"])] = {
                "median": float(r["median"]), "min": float(r["min"]),
                "max": float(r["max"]), "unit": r["unit"], "reps": reps}
    return rows


def size_label(n):
    n = int(n)
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def fmt(v):
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def cell(d):
    return f"{fmt(d['median'])} [{fmt(d['min'])}–{fmt(d['max'])}]" if d else "n/a"


def overlap(a, b):
    return a["min"] <= b["max"] and b["min"] <= a["max"]


def main():
    rows = load_results()
    try:
        meta = json.load(open(os.path.join(OUT, "meta.json")))
    except (OSError, ValueError):
        meta = {}
    limits = {}
    try:
        for line in open(os.path.join(OUT, "limits.csv")):
            p = line.strip().split(",")
            if p[0] == "memcpy" and len(p) >= 4:
                limits[int(p[1])] = float(p[2])
    except OSError:
        pass
    sizes = sorted({int(s) for (f, s, _) in rows if f == "put"})
    rtts = [s for s in ("small", "1KiB") if ("rtt", s, "cxl") in rows]
    L = []
    L.append("# Dask comm benchmark: cxl against tcp\n")
    L.append(f"Run {meta.get('start', '?')} – {meta.get('end', '?')} on "
             f"{meta.get('host', '?')}: {meta.get('cpus', '?')} CPUs "
             f"({meta.get('cpu_model', '?')}); load average at start "
             f"{' '.join(meta.get('load_start', []))}, at end "
             f"{' '.join(meta.get('load_end', []))}.  Python {meta.get('python', '?')}, "
             f"dask {meta.get('dask', '?')}, distributed {meta.get('distributed', '?')}, "
             f"numpy {meta.get('numpy', '?')}; {meta.get('reps', '?')} repetitions, "
             f"alternating; put samples of {meta.get('budget_s', '?')} s, rtt samples "
             f"of {meta.get('rtt_iters', '?')} round trips.")
    env = meta.get("env", {})
    extra = {k: v for k, v in env.items() if k.startswith("UCX_") and k != "UCX_CXL_POOL"}
    L.append(f"cxl: UCX_TLS={extra.get('UCX_TLS', 'cxl,tcp (default)')}"
             + "".join(f", {k}={v}" for k, v in sorted(extra.items()) if k != "UCX_TLS")
             + f"; pool {env.get('UCX_CXL_POOL', '?')}.  tcp: Dask's default comm.\n")
    checks = meta.get("checks", [])
    bad = [c for c in checks if not c.get("ok")]
    L.append(f"Checked transfers: {len(checks) - len(bad)} intact, {len(bad)} failed"
             + ("" if not bad else ": " + "; ".join(
                 f"{c['scheme']} {size_label(c['size'])}: {c['why']}" for c in bad)) + ".")
    if meta.get("error"):
        L.append(f"\n**The run failed**: {meta['error']}")
    loans = sorted({p["size"] for p in meta.get("paths", [])
                    if p["scheme"] == "cxl" and p["path"] == "loan"})
    comm = sorted({p["size"] for p in meta.get("paths", [])
                   if p["scheme"] == "cxl" and p["path"] != "loan"})
    if loans or comm:
        L.append("\ncxl puts by path (where the checked array arrived): "
                 f"one copy into a pool loan: {', '.join(map(size_label, loans)) or 'none'}; "
                 f"through the transport (a copy into the pool and one out): "
                 f"{', '.join(map(size_label, comm)) or 'none'}.")
    if limits:
        L.append("\nMachine limit, memcpy (one thread; a loan's copy is split "
                 "between the sender's thread and a helper): " + ", ".join(
                     f"{size_label(s)} {limits[s]:.0f} MB/s" for s in sorted(limits)) + ".")

    L.append("\n## Targets (issue 15)\n")
    L.append("| target | size | cxl | tcp | ratio | verdict |")
    L.append("|---|---|---|---|---|---|")
    met = missed = 0
    for s in sizes:
        if s < PUT_MIN:
            continue
        c, t = rows.get(("put", str(s), "cxl")), rows.get(("put", str(s), "tcp"))
        if not c or not t:
            L.append(f"| put >= {PUT_BOUND:g}x tcp | {size_label(s)} | {cell(c)} | {cell(t)} | n/a | not measured |")
            missed += 1
            continue
        r = c["median"] / t["median"]
        ok = r >= PUT_BOUND
        met, missed = met + ok, missed + (not ok)
        L.append(f"| put >= {PUT_BOUND:g}x tcp | {size_label(s)} | {fmt(c['median'])} MB/s | "
                 f"{fmt(t['median'])} MB/s | {r:.2f}x | {'met' if ok else 'MISSED'} |")
    c, t = rows.get(("rtt", "small", "cxl")), rows.get(("rtt", "small", "tcp"))
    if c and t:
        r = c["median"] / t["median"]
        ok = r <= RTT_BOUND
        met, missed = met + ok, missed + (not ok)
        L.append(f"| rtt <= {RTT_BOUND:g}x tcp | small | {fmt(c['median'])} us | "
                 f"{fmt(t['median'])} us | {r:.2f}x | {'met' if ok else 'MISSED'} |")
    else:
        L.append(f"| rtt <= {RTT_BOUND:g}x tcp | small | n/a | n/a | n/a | not measured |")
        missed += 1
    L.append(f"\n{met} met, {missed} missed.")
    big = [s for s in sizes if s >= PUT_MIN and ("put", str(s), "cxl") in rows]
    if big and limits:
        lim = limits.get(max(k for k in limits)) if limits else None
        if lim:
            L.append(f"\nFor scale: one thread's memcpy of large buffers is "
                     f"{lim:.0f} MB/s here: the bound of a loan's one copy on one "
                     f"thread (two copies through the transport: {lim / 2:.0f}); "
                     f"{PUT_BOUND:g}x tcp's "
                     + ", ".join(f"{size_label(s)} is {PUT_BOUND * rows[('put', str(s), 'tcp')]['median']:.0f} MB/s"
                                 for s in big if ("put", str(s), "tcp") in rows) + ".")

    L.append("\n## put: one numpy array per message, deserialised, acked (MB/s, higher is better)\n")
    L.append("| size | cxl | tcp | cxl/tcp |")
    L.append("|---|---|---|---|")
    for s in sizes:
        c, t = rows.get(("put", str(s), "cxl")), rows.get(("put", str(s), "tcp"))
        ratio = ""
        if c and t:
            r = c["median"] / t["median"]
            ratio = f"{r:.2f}x " + ("≈" if overlap(c, t) else "✓" if r > 1 else "✗")
        L.append(f"| {size_label(s)} | {cell(c)} | {cell(t)} | {ratio} |")
    L.append("\n## rtt: a message and its echo (us, lower is better)\n")
    L.append("| message | cxl | tcp | cxl/tcp |")
    L.append("|---|---|---|---|")
    for s in rtts:
        c, t = rows.get(("rtt", s, "cxl")), rows.get(("rtt", s, "tcp"))
        ratio = ""
        if c and t:
            r = c["median"] / t["median"]
            ratio = f"{r:.2f}x " + ("≈" if overlap(c, t) else "✓" if r < 1 else "✗")
        L.append(f"| {s} | {cell(c)} | {cell(t)} | {ratio} |")
    L.append("\nMedian [min–max] of the repetitions; ✓/✗ cxl better/worse, ≈ the spreads "
             "overlap.  Samples: samples.csv; per repetition: results.csv.")
    text = "\n".join(L) + "\n"
    with open(os.path.join(OUT, "report.md"), "w") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
