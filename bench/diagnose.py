"""Benchmark ``gapscope.analysis.diagnose`` on a generated Kineto-shaped trace (default 1M events).

Usage (from the repository root)::

    .venv/bin/python bench/diagnose.py                 # 1M events, 3 repeats
    .venv/bin/python bench/diagnose.py --sizes 100k,1M --repeat 5

The trace comes from ``bench/gen_kineto.generate`` (seed 0), cached under ``bench/out/``
(git-ignored). It is loaded once (time reported, not counted); then the full diagnosis
(steps, busy unions, gaps, classes, episodes, groups, budget) runs ``--repeat`` times and
the median is reported beside a per-stage breakdown, the cards of the 10 largest gaps and
``to_json()``. Target (issue 4, 2-core machine): full diagnosis of 1M events < 1 s after
load. Timings on a shared machine vary: read ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

#: Every load here is a first load: the trace cache is neither read nor written (nor by
#: the subprocesses this starts, which inherit it).
os.environ["GAPSCOPE_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
sys.path.insert(0, str(ROOT))

from bench.gen_kineto import generate, parse_count  # noqa: E402


def _stages(trace, params):
    """Time each stage of ``diagnose`` separately (same calls, same order)."""
    import numpy as np

    from gapscope.analysis import budget as _budget
    from gapscope.analysis.busy import valid_timing_mask
    from gapscope.analysis.classify import classify
    from gapscope.analysis.diagnose import Diagnosis
    from gapscope.analysis.gaps import concat_gaps, find_gaps, launch_of
    from gapscope.analysis.picket import find_episodes
    from gapscope.analysis.steps import find_steps, group_gaps, step_annotation_mask

    out = {}
    t = time.perf_counter()
    valid = valid_timing_mask(trace)
    launches = launch_of(trace)
    out["masks+links"] = time.perf_counter() - t
    t = time.perf_counter()
    steps = find_steps(trace, valid)
    exclude = step_annotation_mask(trace, steps)
    out["steps"] = time.perf_counter() - t
    t = time.perf_counter()
    s0 = steps.start_ns if steps else None
    s1 = steps.end_ns if steps else None
    gaps = concat_gaps(
        [
            find_gaps(trace, d, params.min_gap_ns, steps_start_ns=s0, steps_end_ns=s1, valid=valid, launches=launches)
            for d in trace.devices()
        ]
    )
    out["gaps"] = time.perf_counter() - t
    t = time.perf_counter()
    eps, ep_of = find_episodes(trace, gaps, params, launches)
    out["episodes"] = time.perf_counter() - t
    t = time.perf_counter()
    gaps = classify(trace, gaps, params, valid=valid, launches=launches, episode_of=ep_of, exclude=exclude)
    out["classify"] = time.perf_counter() - t
    t = time.perf_counter()
    groups, _ = group_gaps(trace, gaps, steps, gaps.class_ns)
    out["groups"] = time.perf_counter() - t
    _ = (np, _budget, Diagnosis, eps, groups)
    return out, len(gaps)


def run(n_events: int, repeat: int) -> None:
    from gapscope.analysis import Params, diagnose
    from gapscope.analysis.card import card_for_gap
    from gapscope.analysis.jsonout import diagnosis_to_json
    from gapscope.parsers import load

    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"kineto_{n_events}_s0.json"
    if not path.exists():
        print(f"generating {path} ...", flush=True)
        generate(path, n_events, seed=0)
    t = time.perf_counter()
    trace = load(path)
    load_s = time.perf_counter() - t
    times = []
    diag = None
    for _ in range(repeat):
        t = time.perf_counter()
        diag = diagnose(trace, Params())
        times.append(time.perf_counter() - t)
    stages, n_gaps = _stages(trace, Params())
    t = time.perf_counter()
    for i in diag.order_by_size()[:10]:
        card_for_gap(diag, int(i))
    cards_s = time.perf_counter() - t
    t = time.perf_counter()
    diagnosis_to_json(diag)
    json_s = time.perf_counter() - t
    tot = diag.class_totals_ns()
    assert sum(tot.values()) == diag.total_idle_ns()
    print(
        f"\n{n_events:,} events ({len(trace):,} loaded), {n_gaps:,} gaps, "
        f"{len(diag.episodes)} picket episodes, {len(diag.groups)} groups, "
        f"steps: {diag.steps.source if diag.steps else None} x {len(diag.steps) if diag.steps else 0}"
    )
    print(f"  load (not counted)        {load_s:7.3f} s")
    print(
        f"  diagnose, median of {repeat}     {statistics.median(times):7.3f} s   (min {min(times):.3f}, target < 1 s)"
    )
    for k, v in stages.items():
        print(f"    {k:<22} {v:7.3f} s")
    print(f"  10 cards (first time)     {cards_s:7.3f} s")
    print(f"  to_json()                 {json_s:7.3f} s")
    print("  idle per class: " + ", ".join(f"{c.label} {v / 1e6:.3f} ms" for c, v in tot.items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1M", help="comma-separated event counts (100k, 1M, ...)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    for s in args.sizes.split(","):
        run(parse_count(s), args.repeat)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
