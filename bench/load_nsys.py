"""Benchmark ``gapscope.parsers.load`` on a generated Nsight Systems export against a
generated Kineto trace, in alternating runs (issue 16: a 1M-kernel export with its
runtime rows should load in about the time of a 1M-event Kineto file).

Usage (from the repository root)::

    .venv/bin/python bench/load_nsys.py                  # 1M kernels vs 1M Kineto events, 5 runs each
    .venv/bin/python bench/load_nsys.py --kernels 100k --events 100k --repeat 7

Inputs are made by ``bench/gen_nsys.generate`` and ``bench/gen_kineto.generate`` (seed
0) and cached under ``bench/out/`` (git-ignored), named with their layout versions.
Every run is a fresh subprocess (imports excluded from the timing); runs alternate
Nsight, Kineto, Nsight, ... so both see the same machine load. Reported per format:
median and min wall seconds, median CPU seconds (user + sys of the process and its
children: the Kineto loader forks a helper for big files), peak RSS, events loaded;
then the ratio of the medians. Timings on a shared machine vary: read the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

#: Every load here is a first load: the trace cache is neither read nor written (nor by
#: the subprocesses this starts, which inherit it).
os.environ["GAPSCOPE_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT))

from bench import gen_kineto, gen_nsys  # noqa: E402

_RUN = r"""
import json, resource, sys, time
from gapscope.parsers import load
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
c0, t0 = cpu(), time.perf_counter()
t = load(sys.argv[1])
wall, used = time.perf_counter() - t0, cpu() - c0
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({"wall": wall, "cpu": used, "rss_mb": rss / 1024, "events": len(t)}))
"""


def _count(text: str) -> int:
    return gen_kineto.parse_count(text)


def inputs(kernels: int, events: int) -> tuple[Path, Path]:
    """(Nsight export, Kineto trace), generated once and cached."""
    OUT.mkdir(parents=True, exist_ok=True)
    nsys = OUT / f"nsys-{kernels}-v{gen_nsys.LAYOUT_VERSION}.sqlite"
    if not nsys.exists():
        tmp = nsys.with_suffix(".tmp")
        gen_nsys.generate(tmp, kernels, seed=0)
        tmp.replace(nsys)
    kineto = OUT / f"kineto-{events}-v{gen_kineto.LAYOUT_VERSION}.json"
    if not kineto.exists():
        tmp = kineto.with_suffix(".tmp")
        gen_kineto.generate(tmp, events, seed=0)
        tmp.replace(kineto)
    return nsys, kineto


def _once(path: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", _RUN, str(path)], capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernels", default="1M", help="kernels in the Nsight export (default 1M)")
    ap.add_argument("--events", default="1M", help="events in the Kineto trace (default 1M)")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args(argv)
    nsys, kineto = inputs(_count(a.kernels), _count(a.events))
    runs: dict[str, list[dict]] = {"nsys": [], "kineto": []}
    _once(nsys), _once(kineto)  # warm the page cache
    for _ in range(a.repeat):
        runs["nsys"].append(_once(nsys))
        runs["kineto"].append(_once(kineto))
    med = {}
    for name, path in (("nsys", nsys), ("kineto", kineto)):
        r = runs[name]
        med[name] = statistics.median(x["wall"] for x in r)
        print(
            f"{name:7s} {path.name:32s} {path.stat().st_size / 1e6:8.1f} MB  {r[0]['events']:>9,} events  "
            f"wall median {med[name]:.2f} s (min {min(x['wall'] for x in r):.2f})  "
            f"cpu median {statistics.median(x['cpu'] for x in r):.2f} s  "
            f"peak RSS {max(x['rss_mb'] for x in r):.0f} MB"
        )
    print(f"ratio nsys / kineto (median wall): {med['nsys'] / med['kineto']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
