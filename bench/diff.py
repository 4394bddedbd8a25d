"""Benchmark ``gapscope diff``: what the diff adds on top of loading and diagnosing both traces.

Usage (from the repository root)::

    .venv/bin/python bench/diff.py                       # the corpus pairs (largest: hta control/test)
    .venv/bin/python bench/diff.py --generated 1M        # plus two generated 1M-event traces (seeds 0, 1)
    .venv/bin/python bench/diff.py BEFORE AFTER          # any pair

For each pair: load both (``gapscope.parsers.load``), diagnose both, then build the diff
document (``gapscope.diff.document.build_diff_document``: steady steps, per-step
figures, kernel families, matching, verdict, one card) and render it as text; median of
``--repeat`` runs of each stage. The issue's budget: the diff costs no more than loading
and diagnosing both, i.e. ``diff / (load + diagnose) <= 1``. Generated traces are cached
under ``bench/out/`` (git-ignored). Timings on a shared machine vary: read ratios.
"""

from __future__ import annotations

import argparse
import io
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
CORPUS = ROOT.parent / "shared" / "traces" / "public"
sys.path.insert(0, str(ROOT))

from bench.gen_kineto import generate, parse_count  # noqa: E402

PAIRS = [
    ("hta control → test", CORPUS / "hta" / "control.json.gz", CORPUS / "hta" / "test.json.gz"),
    (
        "resnet50 num_workers 0 → 4",
        CORPUS / "kineto" / "resnet50_num_workers_0" / "worker0.1623143089861.pt.trace.json.gz",
        CORPUS / "kineto" / "resnet50_num_workers_4" / "worker0.1623212756351.pt.trace.json.gz",
    ),
    (
        "kineto before_fix → after_fix",
        CORPUS / "kineto" / "before_fix_trace.json",
        CORPUS / "kineto" / "after_fix_trace.json",
    ),
]


def _timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def bench_pair(label: str, before: Path, after: Path, repeat: int) -> dict:
    from gapscope import parsers
    from gapscope.analysis import diagnose
    from gapscope.diff.document import build_diff_document
    from gapscope.diff.text import render_diff_text
    from gapscope.report.text import make_console

    loads, diags, diffs, renders = [], [], [], []
    for _ in range(repeat):
        t_load, (b, a) = _timed(lambda: (parsers.load(before), parsers.load(after)))
        t_diag, (db, da) = _timed(lambda b=b, a=a: (diagnose(b), diagnose(a)))
        t_diff, doc = _timed(lambda b=b, a=a, db=db, da=da: build_diff_document(b, db, a, da))
        t_render, _ = _timed(lambda doc=doc: render_diff_text(doc, make_console(io.StringIO(), width=120, color=False)))
        loads.append(t_load)
        diags.append(t_diag)
        diffs.append(t_diff)
        renders.append(t_render)
    row = dict(
        label=label,
        events=len(b) + len(a),
        load_s=statistics.median(loads),
        diagnose_s=statistics.median(diags),
        diff_s=statistics.median(diffs),
        render_s=statistics.median(renders),
        positions=doc["before"]["position_count"] + doc["after"]["position_count"],
    )
    row["ratio"] = (row["diff_s"] + row["render_s"]) / (row["load_s"] + row["diagnose_s"])
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pair", nargs="*", type=Path)
    ap.add_argument("--generated", default="", help="also diff two generated traces of this size (e.g. 1M)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    pairs = [("given pair", *args.pair)] if args.pair else [p for p in PAIRS if p[1].exists() and p[2].exists()]
    if args.generated:
        n = parse_count(args.generated)
        OUT.mkdir(parents=True, exist_ok=True)
        paths = []
        for seed in (0, 1):
            p = OUT / f"kineto_{n}_seed{seed}.json"
            if not p.exists():
                generate(p, n, seed=seed)
            paths.append(p)
        pairs.append((f"generated {args.generated} seeds 0 → 1", *paths))
    print(
        "| pair | events (both) | load both, s | diagnose both, s | diff, s | render, s | positions | "
        "(diff + render) / (load + diagnose) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for label, before, after in pairs:
        r = bench_pair(label, before, after, args.repeat)
        print(
            f"| {r['label']} | {r['events']:,} | {r['load_s']:.3f} | {r['diagnose_s']:.3f} | {r['diff_s']:.3f} | "
            f"{r['render_s']:.3f} | {r['positions']:,} | {r['ratio']:.2f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
