"""Benchmark ``gapscope.parsers.load`` on large ASCII event lists, beside a regex floor.

Usage (from the repository root)::

    .venv/bin/python bench/ascii_load.py                     # 100k and 1M lines, style typical
    .venv/bin/python bench/ascii_load.py --sizes 100k --style mixed --repeat 9

Event lists come from ``bench/gen_ascii.generate`` (seed 0) and are cached under
``bench/out/`` (git-ignored). Everything runs in this one process, after the imports:
for each size the two rows below are measured alternately (floor, load, floor, load,
...) ``--repeat`` times (default 5), with the garbage collector as a user has it (on),
and the medians are printed in µs per line of the file, with their ratio:

- ``floor``: the least a regex-based reader of the same file does: read the bytes,
  decode UTF-8, one ``re.findall`` of a simple line pattern (number, unit, lane, text)
  over the whole text, and ``np.array(..., dtype=np.int64)`` of the integer parts of
  the times.
- ``gapscope.parsers.load``: the whole load as a user gets it (read, detect, parse,
  link launch calls, build and sort the ``Trace``).

Target (issue 15): ``load`` at most 5 µs per line at 100k and 1M lines. The machine
is shared: read the ratio to the floor more than the absolute times.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from pathlib import Path

import numpy as np

#: Every load here is a first load: from the trace cache a list of 8 MiB or more came
#: back in 0.08 µs a line after the warm-up load wrote its entry.
os.environ["GAPSCOPE_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT))

from bench.gen_ascii import LAYOUT_VERSION, STYLES, generate  # noqa: E402
from bench.gen_kineto import parse_count  # noqa: E402

#: The floor's line pattern: a number (integer part captured), a unit, a lane, the text.
FLOOR_LINE = re.compile(r"^[ \t]*(\d*)[.\d]*[ \t]*[a-zµμ]*[ \t]+(\S+)[ \t]+(.*)$", re.M)


def list_path(n: int, style: str) -> Path:
    """The cached event list of ``n`` lines in ``style`` (written on first use)."""
    p = OUT / f"ascii_{style}_{n}_v{LAYOUT_VERSION}.txt"
    if not p.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            fh.write(generate(n, style=style, seed=0))
        tmp.replace(p)
    return p


def floor(path: Path) -> int:
    """The floor row's work on ``path``; returns the number of lines it matched."""
    text = path.read_bytes().decode("utf-8")
    found = FLOOR_LINE.findall(text)
    whole = np.array([m[0] or "0" for m in found], dtype=np.int64)
    return int(whole.shape[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Load time of ASCII event lists, beside a regex floor")
    ap.add_argument("--sizes", default="100k,1M", help="comma list of line counts, e.g. 100k,1M")
    ap.add_argument("--style", default="typical", choices=STYLES, help="bench/gen_ascii.py style")
    ap.add_argument("--repeat", type=int, default=5, help="alternating runs of each row (median reported)")
    a = ap.parse_args(argv)

    from gapscope import parsers
    from gapscope.parsers.ascii import load_ascii  # noqa: F401 - import cost is not load cost

    print(f"{'lines':>7}  {'MB':>5}  {'floor µs/line':>13}  {'load µs/line':>12}  {'ratio':>5}  events")
    for n in (parse_count(s) for s in a.sizes.split(",") if s.strip()):
        path = list_path(n, a.style)
        lines = n
        parsers.load(path)  # warm the page cache and the regex caches
        t_floor, t_load = [], []
        events = 0
        for _ in range(max(1, a.repeat)):
            t0 = time.perf_counter()
            floor(path)
            t1 = time.perf_counter()
            trace = parsers.load(path)
            t2 = time.perf_counter()
            t_floor.append(t1 - t0)
            t_load.append(t2 - t1)
            events = len(trace)
            del trace
        f_us = 1e6 * statistics.median(t_floor) / lines
        l_us = 1e6 * statistics.median(t_load) / lines
        label = f"{n // 1000}k" if n < 1_000_000 else f"{n / 1e6:g}M"
        size = path.stat().st_size / 1e6
        print(f"{label:>7}  {size:5.1f}  {f_us:13.2f}  {l_us:12.2f}  {l_us / f_us:5.1f}  {events}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
