#!/usr/bin/python3
"""dask_bench.py - Dask's comm layer: the ``cxl`` backend against ``tcp``.

Two processes on one host (this one and a server it spawns), connected with
``distributed.comm.connect``/``listen`` once per scheme, as two Dask workers
are.  Figures (run alternating: for every figure and repetition each scheme
in turn, the order reversed every other repetition):

  put SIZE   one message {"op": "put", "x": to_serialize(numpy array of SIZE
             bytes)} to the server, which deserialises it (a numpy array on
             the received buffer) and answers with a small ack: what a
             worker's get_data reply costs.  MB/s = SIZE / time per put+ack
             (2^20 bytes); one sample is the mean over enough puts to last
             --budget seconds.  The first put of every size and scheme is a
             checked one (crc32 of the array on both sides; not timed).
  rtt small  a small message {"op": "echo", "i": i} and its echo: round trip
             in microseconds, one sample is the median over --rtt-iters.
  rtt 1KiB   the same with a 1 KiB bytes value in the message.

Writes into --out: samples.csv (figure,size,scheme,rep,value,unit,iters),
results.csv (figure,size,scheme,unit,better,rep1..repN,median,min,max) and
meta.json (versions, environment, load at start and end, checks).  Exit
status 0 iff every checked transfer arrived intact and every run finished.

Usage: dask_bench.py --out DIR [--reps N] [--schemes cxl,tcp]
         [--sizes 1K,...,256M] [--budget S] [--rtt-iters N] [--smoke]
         [--inject-error]
  --smoke         sizes 1K,64K,1M, one repetition, few iterations, every put
                  checked (the registered test)
  --inject-error  flip one byte of every array after its checksum was taken
                  (negative control: every check must fail)
Needs PYTHONPATH=REPO/python and, for cxl, UCX_CXL_POOL (a pool under
/dev/shm: wake-up events); run it through perftest/run-dask-bench.sh.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import multiprocessing as mp
import os
import platform
import statistics
import sys
import time
import zlib

DEFAULT_SIZES = "1K,4K,16K,64K,256K,1M,4M,16M,64M,256M"


def parse_size(s: str) -> int:
    s = s.strip().upper()
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if s and s[-1] in mult:
        return int(s[:-1]) * mult[s[-1]]
    return int(s)


def size_label(n: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


# ---------------------------------------------------------------------------
# server (spawned)
# ---------------------------------------------------------------------------

def _path_of(comm, x) -> str:
    """How an array reached the server: "loan" (in pool memory the server
    lent, ucx_cxl/dask/poolframes.py), else "comm" (the comm's own buffer)."""
    pf = getattr(comm, "_loans", None)
    a = x.__array_interface__["data"][0]
    if pf is not None and pf.base <= a < pf.base + pf.size:
        return "loan"
    return "comm"


def server_main(schemes, conn) -> None:
    import numpy as np
    from distributed.comm import CommClosedError, listen

    async def handle(comm):
        try:
            while True:
                msg = await comm.read()
                op = msg.get("op")
                if op == "echo":
                    await comm.write(msg)
                elif op == "put":
                    x = msg["x"]
                    reply = {"op": "ack", "n": int(x.nbytes)}
                    if msg.get("check"):
                        reply["crc"] = zlib.crc32(memoryview(x).cast("B"))
                        reply["type"] = type(x).__name__
                        reply["path"] = _path_of(comm, x)
                    await comm.write(reply)
                elif op == "bye":
                    await comm.write({"op": "bye"})
                    await comm.close()
                    return
        except CommClosedError:
            return

    async def main():
        listeners = []
        addrs = {}
        for s in schemes:
            lst = await listen(f"{s}://127.0.0.1:0", handle)
            listeners.append(lst)
            addrs[s] = lst.contact_address
        conn.send(addrs)
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        loop.add_reader(conn.fileno(), lambda: done.done() or done.set_result(None))
        await done              # the client closed its end: finish
        for lst in listeners:
            lst.stop()

    del np
    asyncio.run(main())


# ---------------------------------------------------------------------------
# client
# ---------------------------------------------------------------------------

class Bench:
    def __init__(self, args) -> None:
        self.args = args
        self.samples = []       # (figure, size, scheme, rep, value, unit, iters)
        self.checks = []        # (scheme, size, ok, why)
        self.paths = []         # (scheme, size, "loan" or "comm")

    async def put_check(self, comm, scheme, arr) -> None:
        from distributed.protocol import to_serialize
        crc = zlib.crc32(memoryview(arr).cast("B"))
        if self.args.inject_error:
            arr.view("u1")[arr.nbytes // 2] ^= 0xFF
        await comm.write({"op": "put", "x": to_serialize(arr), "check": True})
        r = await comm.read()
        if self.args.inject_error:
            arr.view("u1")[arr.nbytes // 2] ^= 0xFF
        why = ""
        if r.get("n") != arr.nbytes:
            why = f"{r.get('n')} bytes arrived, {arr.nbytes} sent"
        elif r.get("crc") != crc:
            why = f"crc32 {r.get('crc'):08x} arrived, {crc:08x} sent"
        elif r.get("type") != "ndarray":
            why = f"deserialised as {r.get('type')}, not a numpy array"
        self.checks.append((scheme, arr.nbytes, not why, why))
        self.paths.append((scheme, arr.nbytes, r.get("path", "?")))
        if why:
            print(f"dask_bench: CHECK FAILED {scheme} {size_label(arr.nbytes)}: "
                  f"{why}", file=sys.stderr)

    async def put(self, comm, scheme, arr, rep, first) -> None:
        from distributed.protocol import to_serialize
        if first or self.args.smoke:
            await self.put_check(comm, scheme, arr)
        # one untimed put estimates the iterations for --budget
        t0 = time.perf_counter()
        await comm.write({"op": "put", "x": to_serialize(arr)})
        await comm.read()
        one = max(time.perf_counter() - t0, 1e-6)
        iters = int(min(max(self.args.budget / one, self.args.min_iters),
                        self.args.max_iters))
        t0 = time.perf_counter()
        for _ in range(iters):
            await comm.write({"op": "put", "x": to_serialize(arr)})
            await comm.read()
        dt = time.perf_counter() - t0
        mbs = arr.nbytes * iters / dt / (1 << 20)
        self.samples.append(("put", arr.nbytes, scheme, rep, mbs, "MB/s", iters))

    async def rtt(self, comm, scheme, label, payload, rep) -> None:
        n = self.args.rtt_iters
        for i in range(max(n // 10, 5)):            # warm-up
            await comm.write({"op": "echo", "i": i, "p": payload})
            await comm.read()
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            await comm.write({"op": "echo", "i": i, "p": payload})
            r = await comm.read()
            times.append(time.perf_counter() - t0)
            if r.get("i") != i:
                self.checks.append((scheme, 0, False, f"echo {r.get('i')} for {i}"))
                return
        us = statistics.median(times) * 1e6
        self.samples.append(("rtt", label, scheme, rep, us, "us", n))

    async def run(self, addrs) -> None:
        import numpy as np
        from distributed.comm import connect
        comms = {}
        for s in self.args.schemes:
            comms[s] = await connect(addrs[s], timeout=30)
        order = list(self.args.schemes)
        for label, payload in (("small", None), ("1KiB", b"x" * 1024)):
            for rep in range(self.args.reps):
                for s in (order if rep % 2 == 0 else order[::-1]):
                    await self.rtt(comms[s], s, label, payload, rep)
            self.progress("rtt", label, label)
        for size in self.args.sizes:
            arr = np.arange(size, dtype=np.uint8)
            for rep in range(self.args.reps):
                for s in (order if rep % 2 == 0 else order[::-1]):
                    await self.put(comms[s], s, arr, rep, rep == 0)
            self.progress("put", size, size_label(size))
            del arr
        for s, c in comms.items():
            await c.write({"op": "bye"})
            await c.read()
            await c.close()

    def progress(self, fig, key, label) -> None:
        last = {}
        for f, size, s, rep, v, unit, _ in self.samples:
            if (f, size) == (fig, key):
                last.setdefault(s, []).append(v)
        txt = "  ".join(f"{s} {statistics.median(v):.1f}" for s, v in last.items())
        unit = "us" if fig == "rtt" else "MB/s"
        print(f"dask_bench: {fig} {label:8s} {txt} ({unit}, median)",
              file=sys.stderr, flush=True)


def write_outputs(args, bench, meta) -> None:
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "samples.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["figure", "size", "scheme", "rep", "value", "unit", "iters"])
        for fig, size, s, rep, v, unit, iters in bench.samples:
            w.writerow([fig, size, s, rep + 1, f"{v:.3f}", unit, iters])
    groups = {}
    for fig, size, s, rep, v, unit, _ in bench.samples:
        groups.setdefault((fig, size, s, unit), {})[rep] = v
    with open(os.path.join(args.out, "results.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["figure", "size", "scheme", "unit", "better"]
                   + [f"rep{i + 1}" for i in range(args.reps)]
                   + ["median", "min", "max"])
        for (fig, size, s, unit), reps in groups.items():
            vals = [reps[r] for r in sorted(reps)]
            w.writerow([fig, size, s, unit, "lower" if fig == "rtt" else "higher"]
                       + [f"{reps[r]:.3f}" if r in reps else "" for r in range(args.reps)]
                       + [f"{statistics.median(vals):.3f}", f"{min(vals):.3f}",
                          f"{max(vals):.3f}"])
    with open(os.path.join(args.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--schemes", default="cxl,tcp")
    p.add_argument("--sizes", default=None)
    p.add_argument("--budget", type=float, default=0.2)
    p.add_argument("--min-iters", type=int, default=3)
    p.add_argument("--max-iters", type=int, default=2000)
    p.add_argument("--rtt-iters", type=int, default=2000)
    p.add_argument("--smoke", action="store_true")
    p.add_argument("--inject-error", action="store_true")
    args = p.parse_args()
    if args.smoke:
        args.sizes = args.sizes or "1K,64K,1M"
        args.reps, args.budget, args.min_iters, args.rtt_iters = 1, 0.01, 2, 50
    args.sizes = [parse_size(s) for s in (args.sizes or DEFAULT_SIZES).split(",")]
    args.schemes = [s.strip() for s in args.schemes.split(",") if s.strip()]

    import dask
    import distributed
    import numpy
    meta = {
        "start": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_start": open("/proc/loadavg").read().split()[:3],
        "host": platform.node(), "cpus": os.cpu_count(),
        "cpu_model": next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                           if ln.startswith("model name")), "?"),
        "python": sys.version.split()[0], "dask": dask.__version__,
        "distributed": distributed.__version__, "numpy": numpy.__version__,
        "env": {k: v for k, v in os.environ.items()
                if k.startswith("UCX_") or k in ("PYTHONPATH",)},
        "schemes": args.schemes, "sizes": args.sizes, "reps": args.reps,
        "budget_s": args.budget, "rtt_iters": args.rtt_iters,
        "smoke": args.smoke, "inject_error": args.inject_error,
    }
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    srv = ctx.Process(target=server_main, args=(args.schemes, child), daemon=True)
    srv.start()
    child.close()
    bench = Bench(args)
    rc = 0
    try:
        if not parent.poll(60):
            raise RuntimeError("the server did not report its addresses in 60 s")
        addrs = parent.recv()
        asyncio.run(bench.run(addrs))
    except Exception as e:              # reported, and the run fails
        print(f"dask_bench: run failed: {type(e).__name__}: {e}", file=sys.stderr)
        meta["error"] = f"{type(e).__name__}: {e}"
        rc = 1
    finally:
        parent.close()
        srv.join(10)
        if srv.is_alive():
            srv.kill()
    meta["load_end"] = open("/proc/loadavg").read().split()[:3]
    meta["end"] = time.strftime("%Y-%m-%d %H:%M:%S")
    meta["checks"] = [{"scheme": s, "size": n, "ok": ok, "why": why}
                      for s, n, ok, why in bench.checks]
    bad = [c for c in bench.checks if not c[2]]
    meta["checks_failed"] = len(bad)
    meta["paths"] = [{"scheme": s, "size": n, "path": p} for s, n, p in bench.paths]
    write_outputs(args, bench, meta)
    print(f"dask_bench: {len(bench.checks) - len(bad)} checks passed, "
          f"{len(bad)} failed", file=sys.stderr)
    return 1 if (rc or bad) else 0


if __name__ == "__main__":
    sys.exit(main())
