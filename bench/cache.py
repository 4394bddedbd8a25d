"""Benchmark the trace cache: a first load against a cached re-open of the same file.

Usage (from the repository root)::

    .venv/bin/python bench/cache.py                       # the generated 1M-event trace
    .venv/bin/python bench/cache.py PATH [--repeat 7]     # any trace

Without PATH the 1M-event Kineto trace of ``bench/load.py`` is used (generated into
``bench/out/`` on first use). The cache lives in a temporary directory for the run
(``GAPSCOPE_CACHE_DIR``), never the user's. One priming run loads with the cache on
and waits for its entry to be written ("write s": the background write, after
``load`` returned). Then fresh loads (``GAPSCOPE_NO_CACHE=1``) and cached re-opens
alternate, each in a fresh subprocess; each reports the in-process wall time of
``gapscope.parsers.load`` (imports done before), the process's peak RSS
(``ru_maxrss``, imports included; "base" is the RSS before the load) and the time
of the first ``args_of`` (which, on a cached trace, reads the original file).
Medians are printed, and fresh/cached as a ratio. Target (issue 15): a cached
re-open of 1M events in ≤ 0.15 s.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

_RUN = r"""
import json, resource, sys, time
from gapscope import parsers
from gapscope.parsers import detect
import gapscope.parsers.chrome.loader, gapscope.parsers.nsys.loader  # noqa: F401  imports are not load time
from gapscope.parsers.cache import store
store.build_id()
fresh = []
real = detect._load_fresh
detect._load_fresh = lambda p, *a, **k: (fresh.append(p), real(p, *a, **k))[1]  # counts the loads that were not hits
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
tr = parsers.load(sys.argv[1])
dt = time.perf_counter() - t0
t1 = time.perf_counter()
store.wait_for_writes()
write = time.perf_counter() - t1
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t2 = time.perf_counter()
tr.args_of(len(tr) // 2)
args_s = time.perf_counter() - t2
print(json.dumps({"time_s": dt, "write_s": write, "peak_kb": peak, "base_kb": base, "args_s": args_s,
                  "events": len(tr), "names": len(tr.names), "extent": list(tr.extent_ns),
                  "hit": not fresh}))
"""


def run(path: Path, cache_dir: Path, cached: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "GAPSCOPE_NO_CACHE"}
    env["GAPSCOPE_CACHE_DIR"] = str(cache_dir)
    if not cached:
        env["GAPSCOPE_NO_CACHE"] = "1"
    cp = subprocess.run(
        [sys.executable, "-c", _RUN, str(path)], capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=1200
    )
    if cp.returncode != 0:
        raise SystemExit(f"run failed: {(cp.stderr or cp.stdout).strip().splitlines()[-1:]}")
    return json.loads(cp.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="First load against cached re-open (gapscope trace cache)")
    ap.add_argument("path", nargs="?", help="trace file (default: the generated 1M-event Kineto trace)")
    ap.add_argument("--repeat", type=int, default=5, help="runs of each kind, alternating (default 5)")
    a = ap.parse_args(argv)
    if a.path:
        path = Path(a.path)
    else:
        from bench.load import trace_path

        path = trace_path(1_000_000)
    cache_dir = Path(tempfile.mkdtemp(prefix="gapscope-bench-cache-"))
    try:
        prime = run(path, cache_dir, cached=True)
        entry = sum(p.stat().st_size for p in (cache_dir / "traces").glob("*.trace"))
        print(
            f"{path} ({path.stat().st_size / 1e6:.0f} MB, {prime['events']:,} events): "
            f"first load {prime['time_s']:.2f} s, then the entry written in {prime['write_s']:.2f} s "
            f"({entry / 1e6:.0f} MB)",
            flush=True,
        )
        if not entry:
            print(
                "no entry was written: the trace is below GAPSCOPE_CACHE_MIN_BYTES (8 MiB of text by "
                "default; set it to 0 to measure small traces) or cannot be cached",
                flush=True,
            )
        runs: dict[str, list[dict]] = {"fresh": [], "cached": []}
        for _ in range(max(1, a.repeat)):
            runs["fresh"].append(run(path, cache_dir, cached=False))
            runs["cached"].append(run(path, cache_dir, cached=True))
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    med = {k: statistics.median(r["time_s"] for r in v) for k, v in runs.items()}
    same = all(
        (r["events"], r["names"], r["extent"]) == (prime["events"], prime["names"], prime["extent"])
        for v in runs.values()
        for r in v
    )
    print(f"{'':8} {'load s':>8} {'peak RSS':>10} {'base':>8} {'1st args_of s':>14}")
    for k, v in runs.items():
        peak = max(r["peak_kb"] for r in v) * 1024
        base = min(r["base_kb"] for r in v) * 1024
        args_s = statistics.median(r["args_s"] for r in v)
        print(f"{k:8} {med[k]:8.3f} {peak / 2**20:7.0f} MB {base / 2**20:5.0f} MB {args_s:14.3f}")
    hits = sum(1 for r in runs["cached"] if r["hit"])
    target = "MET" if med["cached"] <= 0.15 else "MISSED"
    print(
        f"fresh / cached: {med['fresh'] / med['cached']:.0f}x; cached re-open {med['cached'] * 1000:.0f} ms "
        f"[target ≤ 0.15 s: {target}]; {hits}/{len(runs['cached'])} cached runs were hits; "
        f"same events, names and extent: {same}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
