"""gapscope's idle time beside HolisticTraceAnalysis's idle time breakdown, explained.

Usage (from the repository root)::

    .venv/bin/python bench/hta_compare.py                       # every corpus trace with kernels
    .venv/bin/python bench/hta_compare.py --hta-python /tmp/htavenv/bin/python
    .venv/bin/python bench/hta_compare.py FILE [FILE ...] --markdown

HTA 0.5.0 (``TraceAnalysis.get_idle_time_breakdown``, ``hta/analyzers/
breakdown_analysis.py``) defines idle time **per stream**: sort the stream's kernels,
memcpys and memsets by start; for each op, ``idle = ts - previous op's end`` (the
previous op in start order, not the running maximum, so overlapping or duplicated
records give negative intervals that are summed as they are); it is "host wait" when
the op's runtime call started after the previous op ended, else "kernel wait" when the
interval is below ``consecutive_kernel_delay`` (30, documented as ns but compared with
the trace's µs, so effectively 30 µs), else "other". Totals are summed over streams.

gapscope defines idle per **device**: the window [first GPU op, last GPU op] (widened to
the steps when steps are known) minus the union of kernel intervals over all streams,
kept as gaps of at least ``min_gap`` (2 µs); copies inside a gap are evidence, not busy.

This script computes, per trace: gapscope's device idle; the same with copies counted
busy ("fully idle"); HTA's definition re-implemented here in numpy on the same loaded
trace ("HTA def."); and, when an interpreter with ``hta`` importable is given (or
``$GAPSCOPE_HTA_PYTHON`` is set), HTA 0.5.0 itself in a subprocess. The difference is
split into its causes:

- ``streams``: HTA def. minus the device-level idle of the same ops with no threshold
  and no window widening (per-stream sums count time when another stream is busy, and
  negative intervals from overlaps subtract);
- ``copies``: idle with copies counted busy minus idle of kernels only;
- ``min_gap``: idle in gaps shorter than ``min_gap`` (in HTA, not in gapscope);
- ``window``: idle added by widening the window to the steps' edges;
- ``edges``: idle between the device's first/last op and a stream's own first/last op
  is not idle to HTA (each stream starts at its first op).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

#: Every load here is a first load: the trace cache is neither read nor written (nor by
#: the subprocesses this starts, which inherit it).
os.environ["GAPSCOPE_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gapscope.analysis import Params, diagnose  # noqa: E402
from gapscope.analysis.busy import complement, device_event_mask, union_intervals, valid_timing_mask  # noqa: E402
from gapscope.analysis.gaps import launch_of  # noqa: E402
from gapscope.parsers import Kind, TraceFormatError, load  # noqa: E402

CORPUS = Path(os.environ.get("GAPSCOPE_SHARED", ROOT.parent / "shared")) / "traces" / "public"
HTA_KERNEL_DELAY_US = 30

_HTA_SCRIPT = r"""
import sys, json, os, logging, warnings
logging.disable(logging.CRITICAL); warnings.filterwarnings("ignore")
from hta.trace_analysis import TraceAnalysis
p = sys.argv[1]
ta = TraceAnalysis(trace_files={0: p}, trace_dir=os.path.dirname(p))
df, _ = ta.get_idle_time_breakdown(ranks=[0], visualize=False)
print("HTAJSON" + df.to_json(orient="records"))
"""


def hta_definition(trace, device: int, cutoff_ns: int | None = None, whole_us: bool = False) -> dict:
    """HTA 0.5.0's per-stream idle breakdown, re-implemented (see the module docstring).

    Returns ns totals: ``total``, ``host_wait``, ``kernel_wait``, ``other``, and
    ``streams`` (number of streams with ops). ``cutoff_ns``: ops starting at or after it
    are dropped (HTA drops the last ``ProfilerStep#N`` by default,
    ``include_last_profiler_step=False``). ``whole_us``: truncate ``ts`` and ``dur`` to
    whole µs first, as HTA 0.5.0's parser stores them (int64 µs)."""
    valid = valid_timing_mask(trace)
    launches = launch_of(trace)
    res = {"total": 0, "host_wait": 0, "kernel_wait": 0, "other": 0, "streams": 0}
    for ln in trace.lanes:
        if not (ln.is_gpu and ln.device == device):
            continue
        sl = trace.lane_slice(ln.index)
        idx = np.arange(sl.start, sl.stop)
        m = np.isin(trace.kind[idx], np.array([Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET], dtype=np.int8)) & valid[idx]
        idx = idx[m]
        if cutoff_ns is not None:
            idx = idx[trace.start_ns[idx] < cutoff_ns]
        if idx.size == 0:
            continue
        res["streams"] += 1
        idx = idx[np.argsort(trace.start_ns[idx], kind="stable")]
        start = trace.start_ns[idx]
        dur = trace.dur_ns[idx]
        if whole_us:
            start, dur = start // 1000 * 1000, dur // 1000 * 1000
        end = start + dur
        interval = start[1:] - end[:-1]
        rt = launches[idx[1:]]
        rt_start = trace.start_ns[np.maximum(rt, 0)]
        if whole_us:
            rt_start = rt_start // 1000 * 1000
        rt_ts = np.where(rt >= 0, rt_start, np.iinfo(np.int64).min)
        host = rt_ts > end[:-1]
        kernel = ~host & (interval < HTA_KERNEL_DELAY_US * 1000)
        other = ~host & ~kernel
        res["host_wait"] += int(interval[host].sum())
        res["kernel_wait"] += int(interval[kernel].sum())
        res["other"] += int(interval[other].sum())
    res["total"] = res["host_wait"] + res["kernel_wait"] + res["other"]
    return res


def decompose(trace, diag, device: int) -> dict:
    """gapscope figures and the parts of the difference with HTA's definition (ns).

    W = [first GPU op, last GPU op] of the device (not widened). A = idle of the union
    of all GPU ops in W; B = idle of the union of kernels in W (no threshold);
    ``copies`` = B − A; ``min_gap`` = B − (gapscope gaps ∩ W); ``window`` = gapscope
    gaps outside W (step edges). So gapscope idle = A + copies − min_gap + window,
    exactly; and HTA def. = A + streams Δ."""
    valid = valid_timing_mask(trace)
    mk = device_event_mask(trace, device, (Kind.KERNEL,), valid)
    mw = device_event_mask(trace, device, (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET), valid)
    s, d = trace.start_ns, trace.dur_ns
    w0, w1 = int(s[mw].min()), int((s[mw] + d[mw]).max())
    ws, we = union_intervals(s[mw], s[mw] + d[mw])
    ks, ke = union_intervals(s[mk], s[mk] + d[mk])
    cs, ce = complement(ws, we, w0, w1)
    a_ns = int((ce - cs).sum())
    bs, be = complement(ks, ke, w0, w1)
    b_ns = int((be - bs).sum())
    g = diag.gaps
    sel = g.device == device
    gs, ge = g.start_ns[sel], g.end_ns[sel]
    in_w = np.maximum(np.minimum(ge, w1) - np.maximum(gs, w0), 0)
    total = int((ge - gs).sum())
    edges = 0
    for ln in trace.lanes:
        if ln.is_gpu and ln.device == device:
            sl = trace.lane_slice(ln.index)
            m = mw[sl]
            if m.any():
                st = s[sl][m]
                edges += (int(st.min()) - w0) + (w1 - int((st + d[sl][m]).max()))
    return {
        "device_idle": total,
        "fully_idle": int(g.fully_idle_ns[sel].sum()),
        "ops_idle": a_ns,
        "copies": b_ns - a_ns,
        "min_gap": b_ns - int(in_w.sum()),
        "window": total - int(in_w.sum()),
        "edges": edges,
    }


def run_hta(python: str, path: Path, timeout_s: int) -> dict | None:
    """HTA 0.5.0's breakdown (µs summed over streams per category), or None."""
    try:
        out = subprocess.run([python, "-c", _HTA_SCRIPT, str(path)], capture_output=True, text=True, timeout=timeout_s)
    except (subprocess.TimeoutExpired, OSError):
        return None
    for line in out.stdout.splitlines():
        if line.startswith("HTAJSON"):
            rows = json.loads(line[len("HTAJSON") :])
            tot: dict = {"host_wait": 0.0, "kernel_wait": 0.0, "other": 0.0}
            for r in rows:
                tot[r["idle_category"]] = tot.get(r["idle_category"], 0.0) + float(r["idle_time"] or 0.0)
            tot["total"] = sum(v for k, v in tot.items() if k in ("host_wait", "kernel_wait", "other"))
            return tot
    return {"error": (out.stderr.strip().splitlines() or ["no output"])[-1][:80]}


def ms(ns: float) -> str:
    return f"{ns / 1e6:.3f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--hta-python", default=os.environ.get("GAPSCOPE_HTA_PYTHON"))
    ap.add_argument("--timeout", type=int, default=300)
    args = ap.parse_args(argv)
    files = args.files or sorted(p for p in CORPUS.rglob("*") if p.is_file() and p.name.endswith((".json", ".gz")))
    head = (
        "| trace | dev | streams | gapscope idle | fully idle | HTA def. | HTA def., whole µs, last step dropped | HTA 0.5.0 (host/kernel/other) | "
        "streams Δ | copies | <min_gap | window | stream edges |"
    )
    print(head)
    print("|" + "|".join(["---"] * (head.count("|") - 1)) + "|")
    for path in files:
        try:
            trace = load(path)
        except TraceFormatError:
            continue
        if not (trace.kind == int(Kind.KERNEL)).any():
            continue
        diag = diagnose(trace, Params())
        hta_real = run_hta(args.hta_python, path, args.timeout) if args.hta_python else None
        for dev in diag.devices:
            hd = hta_definition(trace, dev.device)
            cut = None
            if diag.steps is not None and diag.steps.source == "ProfilerStep" and len(diag.steps) > 1:
                cut = int(diag.steps.start_ns[-1])
            hd_cut = hta_definition(trace, dev.device, cut, whole_us=True)
            dc = decompose(trace, diag, dev.device)
            streams_delta = hd["total"] - dc["ops_idle"]
            assert dc["device_idle"] == hd["total"] - streams_delta + dc["copies"] - dc["min_gap"] + dc["window"]
            if hta_real is None:
                real = "n/a"
            elif "error" in hta_real:
                real = "error: " + hta_real["error"]
            else:
                real = (
                    f"{hta_real['total'] / 1e3:.3f} ({hta_real['host_wait'] / 1e3:.3f}/"
                    f"{hta_real['kernel_wait'] / 1e3:.3f}/{hta_real['other'] / 1e3:.3f})"
                )
            name = str(path.relative_to(CORPUS)) if CORPUS in path.parents else path.name
            print(
                f"| {name} | {dev.device} | {hd['streams']} | {ms(dc['device_idle'])} | {ms(dc['fully_idle'])} | "
                f"{ms(hd['total'])} ({ms(hd['host_wait'])}/{ms(hd['kernel_wait'])}/{ms(hd['other'])}) | "
                f"{ms(hd_cut['total'])} | {real} | "
                f"{ms(streams_delta)} | {ms(dc['copies'])} | {ms(dc['min_gap'])} | {ms(dc['window'])} | {ms(dc['edges'])} |",
                flush=True,
            )
    print(
        "\nAll figures in ms. gapscope idle = HTA def. − streams Δ + copies − <min_gap + window "
        "(stream edges are part of streams Δ: idle before a stream's first op is not idle to HTA)."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
