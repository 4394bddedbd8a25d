"""gapscope diff's kernel-family table beside HTA's ``TraceDiff.compare_traces``.

Usage (HTA is never a dependency: it runs in its own virtual environment)::

    python3 -m venv /tmp/htavenv && /tmp/htavenv/bin/pip install holistictraceanalysis==0.5.0
    .venv/bin/python bench/diff_hta.py --hta-python /tmp/htavenv/bin/python [CONTROL TEST]

Default pair: ``../shared/traces/public/hta/control.json.gz`` and ``test.json.gz`` (HTA's
own trace-diff test data). HTA reads a directory per trace, so each file is linked into
a temporary directory (outside the repository). Prints a Markdown table per family:
HTA's total duration over all iterations (``compare_traces(..., control_iteration=all,
test_iteration=all, device_type=GPU, use_short_name=True)``) and over its default (the
first iteration only), and gapscope's busy time per family (sum of kernel durations)
over all steps and per steady step, with the matching rules of each (HTA: ``short_name``,
gapscope: ``gapscope.diff.names.family``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

#: Every load here is a first load: the trace cache is neither read nor written (nor by
#: the subprocesses this starts, which inherit it).
os.environ["GAPSCOPE_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gapscope.analysis import diagnose  # noqa: E402
from gapscope.diff.document import build_diff_document  # noqa: E402
from gapscope.diff.names import families_of  # noqa: E402
from gapscope.parsers import Kind, load  # noqa: E402

CORPUS = ROOT.parent / "shared" / "traces" / "public"

_HTA = r"""
import json, logging, sys, warnings
warnings.filterwarnings("ignore"); logging.disable(logging.WARNING)
from hta.trace_diff import TraceDiff, LabeledTrace, DeviceType
c = LabeledTrace(label="Control", trace_dir=sys.argv[1])
t = LabeledTrace(label="Test", trace_dir=sys.argv[2])
out = {"iterations": [c.iterations(), t.iterations()], "ranks": [c.ranks(), t.ranks()]}
for key, kw in (("first", {}), ("all", dict(control_iteration=c.iterations(), test_iteration=t.iterations()))):
    df = TraceDiff.compare_traces(c, t, device_type=DeviceType.GPU, use_short_name=True, **kw)
    out[key] = {name: [float(r["Control_counts"]), float(r["Control_total_duration"]), float(r["Test_counts"]),
                       float(r["Test_total_duration"])] for name, r in df.iterrows()}
print(json.dumps(out))
"""


def hta_compare(hta_python: str, control: Path, test: Path) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        dirs = []
        for name, p in (("control", control), ("test", test)):
            d = Path(tmp) / name
            d.mkdir()
            (d / p.name).symlink_to(p.resolve())
            dirs.append(str(d))
        proc = subprocess.run([hta_python, "-c", _HTA, *dirs], capture_output=True, text=True, timeout=600)
        if proc.returncode:
            raise SystemExit(f"HTA failed: {proc.stderr[-2000:]}")
        return json.loads(proc.stdout.strip().splitlines()[-1])


def family_totals_us(path: Path) -> tuple[dict[str, float], int]:
    """Sum of kernel durations per family over every kernel of the trace (µs), and the
    number of steps."""
    trace = load(path)
    diag = diagnose(trace)
    k = np.flatnonzero(trace.kind == int(Kind.KERNEL))
    fam, labels = families_of(trace.names, trace.name_id[k])
    tot = np.bincount(fam, weights=trace.dur_ns[k], minlength=len(labels)) / 1e3
    return dict(zip(labels, tot.tolist())), len(diag.steps) if diag.steps is not None else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "pair", nargs="*", type=Path, default=[CORPUS / "hta" / "control.json.gz", CORPUS / "hta" / "test.json.gz"]
    )
    ap.add_argument("--hta-python", required=True, help="an interpreter with holistictraceanalysis importable")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args(argv)
    control, test = args.pair
    hta = hta_compare(args.hta_python, control, test)
    b, a = load(control), load(test)
    doc = build_diff_document(b, diagnose(b), a, diagnose(a))
    fams = {r["family"]: r for r in doc["kernels"]["families"]}
    gb, nb = family_totals_us(control)
    ga, na = family_totals_us(test)
    print(
        f"HTA ranks {hta['ranks']}, iterations {hta['iterations']}; gapscope steps {nb} and {na}, "
        f"{doc['per_step']['steps_before']} and {doc['per_step']['steps_after']} steady"
    )
    print()
    print(
        "| HTA short_name | HTA control µs (all it.) | HTA test µs (all it.) | HTA Δ first it. µs | gapscope family | "
        "gapscope control µs (all) | gapscope test µs (all) | gapscope per steady step, ms |"
    )
    print("| --- | ---: | ---: | ---: | --- | ---: | ---: | --- |")
    rows = sorted(hta["all"].items(), key=lambda kv: -abs(kv[1][3] - kv[1][1]))[: args.top]
    from gapscope.diff.names import family

    for name, (cc, cd, tc, td) in rows:
        f = family(name)
        first = hta["first"].get(name, [0, 0, 0, 0])
        r = fams.get(f)
        per = f"{r['before_ns'] / 1e6:.3f} → {r['after_ns'] / 1e6:.3f}" if r else "- (not a kernel)"
        print(
            f"| `{name}` | {cd:,.0f} ({cc:.0f}) | {td:,.0f} ({tc:.0f}) | {first[3] - first[1]:+,.0f} | `{f}` | "
            f"{gb.get(f, 0):,.0f} | {ga.get(f, 0):,.0f} | {per} |"
        )
    tot_c = sum(v[1] for v in hta["all"].values())
    tot_t = sum(v[3] for v in hta["all"].values())
    print()
    print(
        f"HTA totals (all iterations, GPU ops incl. copies, µs): {tot_c:,.0f} → {tot_t:,.0f}; "
        f"gapscope kernel totals (all steps, µs): {sum(gb.values()):,.0f} → {sum(ga.values()):,.0f}; "
        f"gapscope per steady step: GPU busy {doc['per_step']['gpu_busy_ns']['before_ns'] / 1e6:.3f} → "
        f"{doc['per_step']['gpu_busy_ns']['after_ns'] / 1e6:.3f} ms (union), verdict: {doc['verdict']['line']}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
