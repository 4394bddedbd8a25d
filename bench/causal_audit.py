"""Causal audit of the diagnosis: queued (blocked) gaps must not blame the CPU.

Usage (from the repository root)::

    .venv/bin/python bench/causal_audit.py            # every corpus trace with kernels
    .venv/bin/python bench/causal_audit.py --quick    # without the four slowest
    .venv/bin/python bench/causal_audit.py --top 40 path/to/trace.json.gz ...

For every JSON / JSON.gz Chrome (Kineto) trace under ``/work/shared/traces/public``
(``--root``; ``.sqlite`` and files the gapscope loader refuses are skipped) this script

1. parses the raw events itself (``gzip`` + ``json``, times re-read from the number's
   text as ``Decimal`` so epoch-µs floats give the exact ns), independently of
   gapscope's parsers and analysis;
2. collects the kernel intervals per device (``cat`` ``kernel``/``Kernel``, device from
   ``args.device``, else ``pid``), merges them and takes the idle gaps >= 2 µs between
   the first and last kernel of the device;
3. finds the next kernel of each gap (the kernels starting at the gap end) and its
   launch call by ``args.correlation``: CPU events with ``cat`` ``cuda_runtime`` /
   ``cuda_driver`` / ``Runtime`` and the same correlation (a ``*GraphLaunch*`` call
   first: the nodes of a CUDA graph share its correlation; then the runtime call over
   the driver call). When several kernels start at the gap end, the one whose launch
   returned first decides (the GPU had that one queued);
4. sorts the gaps into **queued** (launch call end <= gap start: the GPU was blocked),
   **late** (launch end > gap start: the GPU was starved) and **other** (no launch
   call found);
5. runs ``gapscope.analysis.diagnose`` on the same file, matches its gaps by exact
   (start ns, end ns), and reports per bucket the share of matched idle that gapscope
   puts on the CPU-side classes (sync + launch + host), on copy, on dependency and on
   unclassified.

Targets (design "Definitions": first starved or blocked): <= 5 % of queued idle on
CPU-side classes; >= 90 % of late idle on CPU-side classes (copy counts as neither;
copy is GPU copy time only, so the thread's time in a copy call is CPU-side: sync or
host).
The "worst offenders" list names the gaps that break the rule: queued idle on CPU-side
classes, late idle on dependency.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import gzip
import json
import os
import sys
import time
from collections import defaultdict
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from pathlib import Path

#: Every load here is a first load: the trace cache is neither read nor written (nor by
#: the subprocesses this starts, which inherit it).
os.environ["GAPSCOPE_NO_CACHE"] = "1"

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CORPUS = Path("/work/shared/traces/public")
MIN_GAP_NS = 2_000
KERNEL_CATS = {"kernel"}
LAUNCH_CATS = {"cuda_runtime", "cuda_driver", "runtime"}
#: Skipped by --quick (the slowest to parse and diagnose on a 2-core machine).
SLOWEST = (
    "tracelens/xdit_sd_3.5/profile_trace_rank_0.json.gz",
    "hta/df_index_resolver.json.gz",
    "hta/control.json.gz",
    "hta/test.json.gz",
)
BUCKETS = ("queued", "late", "other")
COLS = ("cpu", "copy", "dep", "uncl")
#: A late gap is listed when at least this many of its CPU-side ns lie after its launch
#: call returned (the op was queued; the GPU idled anyway).
POSTQ_REPORT_NS = 50_000


# ---------------------------------------------------------------- raw parsing
def _ns(v) -> int | None:
    """Exact int ns of a Chrome-trace time in µs (int, or float kept as its text)."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v * 1000
    try:
        return int((Decimal(str(v)) * 1000).to_integral_value(ROUND_HALF_EVEN))
    except (InvalidOperation, ValueError, OverflowError):
        return None


def read_events(path: Path) -> list:
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw, parse_float=str)  # floats stay text: exact ns later
    if isinstance(doc, dict):
        doc = doc.get("traceEvents") or []
    return doc if isinstance(doc, list) else []


@dataclasses.dataclass
class Call:
    start: int
    end: int
    name: str
    cat: str
    pid: object
    tid: object


@dataclasses.dataclass
class RawGap:
    device: object
    start: int
    end: int
    next_name: str
    call: Call | None
    bucket: str
    ambiguous: bool  # kernels starting at the gap end disagree on queued vs late
    zero_inside: int = 0  # zero-length kernels strictly inside the gap


def _pick_call(cands: list[Call]) -> Call:
    graph = [c for c in cands if "graphlaunch" in c.name.lower()]
    if graph:
        return max(graph, key=lambda c: c.end)
    rt = [c for c in cands if c.cat.lower() != "cuda_driver"] or cands
    return max(rt, key=lambda c: c.end - c.start)


#: A kernel as the raw pass keeps it: (start ns, end ns, correlation, name).
Kernel = tuple[int, int, object, str]


def _kernels_and_calls(events: list) -> tuple[dict[object, list[Kernel]], dict[object, list[Call]]]:
    """The complete ("X") kernels by device and the launch calls by correlation id."""
    kernels: dict[object, list[Kernel]] = defaultdict(list)
    calls: dict[object, list[Call]] = defaultdict(list)
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        cat = str(e.get("cat") or "").lower()
        if cat not in KERNEL_CATS and cat not in LAUNCH_CATS:
            continue
        s, d = _ns(e.get("ts")), _ns(e.get("dur"))
        if s is None or d is None or d < 0:
            continue
        args = e.get("args") or {}
        corr = args.get("correlation") if isinstance(args, dict) else None
        if cat in KERNEL_CATS:
            dev = args.get("device", e.get("pid")) if isinstance(args, dict) else e.get("pid")
            kernels[dev].append((s, s + d, corr, str(e.get("name", ""))))
        elif corr is not None:
            calls[corr].append(Call(s, s + d, str(e.get("name", "")), cat, e.get("pid"), e.get("tid")))
    return kernels, calls


def _gap_before(dev: object, gap_start: int, nxt: list[Kernel], launch: dict[object, Call]) -> RawGap:
    """The gap from ``gap_start`` to the kernels ``nxt`` (all starting at its end), bucketed
    by the launch call that returned first (none found: "other")."""
    found = [(launch[k[2]], k) for k in nxt if k[2] is not None and k[2] in launch]
    if not found:
        return RawGap(dev, gap_start, nxt[0][0], nxt[0][3], None, "other", False)
    call, k = min(found, key=lambda ck: ck[0].end)
    bucket = "queued" if call.end <= gap_start else "late"
    amb = len({c.end <= gap_start for c, _ in found}) > 1
    return RawGap(dev, gap_start, k[0], k[3], call, bucket, amb)


def _device_gaps(dev: object, allk: list[Kernel], launch: dict[object, Call]) -> list[RawGap]:
    """The idle gaps >= ``MIN_GAP_NS`` in the union of one device's kernels."""
    # zero-length kernels (sub-µs kernels at Kineto's 1 µs resolution) cover nothing in
    # a union of half-open intervals: they do not end a gap (counted: ``zero_inside``)
    ks = sorted((k for k in allk if k[1] > k[0]), key=lambda k: (k[0], k[1]))
    zeros = sorted(k[0] for k in allk if k[1] == k[0])
    out: list[RawGap] = []
    if not ks:
        return out
    cur_end = ks[0][1]
    for i in range(1, len(ks)):
        s = ks[i][0]
        if s - cur_end >= MIN_GAP_NS:
            j = i
            while j < len(ks) and ks[j][0] == s:
                j += 1
            gap = _gap_before(dev, cur_end, ks[i:j], launch)
            gap.zero_inside = bisect.bisect_left(zeros, s) - bisect.bisect_right(zeros, cur_end)
            out.append(gap)
        cur_end = max(cur_end, ks[i][1])
    return out


def raw_gaps(events: list) -> tuple[list[RawGap], int, dict]:
    """Idle gaps from the raw events, the number of kernels seen, and the launch calls
    of the kernels by start ns (for gaps gapscope finds at a widened window's edge)."""
    kernels, calls = _kernels_and_calls(events)
    launch = {k: _pick_call(v) for k, v in calls.items()}
    by_start: dict[int, list] = defaultdict(list)
    for allk in kernels.values():
        for k in allk:
            by_start[k[0]].append((launch.get(k[2]) if k[2] is not None else None, k[3]))
    out: list[RawGap] = []
    for dev, allk in kernels.items():
        out.extend(_device_gaps(dev, allk, launch))
    return out, sum(len(allk) for allk in kernels.values()), by_start


# ---------------------------------------------------------------- audit
@dataclasses.dataclass
class Tally:
    n: int = 0
    idle: int = 0
    matched: int = 0
    matched_idle: int = 0
    cpu: int = 0
    copy: int = 0
    dep: int = 0
    uncl: int = 0

    def add(self, o: Tally) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(o, f.name))


@dataclasses.dataclass
class Result:
    trace: str
    kernels: int
    tallies: dict[str, Tally]
    gs_gaps: int
    gs_idle: int
    gs_unmatched: int
    gs_unmatched_idle: int
    queued_disagree: int
    ambiguous: int
    offenders: list[tuple]
    secs: float
    zero_gaps: int = 0
    zero_idle: int = 0
    gs_only_largest: str = ""
    edge: dict = dataclasses.field(default_factory=dict)
    thread_mismatch: int = 0
    postq: Tally = dataclasses.field(default_factory=Tally)


@dataclasses.dataclass(frozen=True)
class GapView:
    """One gapscope gap with its raw bucket: bounds in ns, the raw launch call of the
    kernel at its end, and gapscope's row of class ns (``Gaps.class_ns[i]``)."""

    i: int  # gapscope's gap index
    device: object
    start: int
    end: int
    bucket: str
    call: Call | None
    next_name: str
    row: object  # gapscope's class ns of the gap, indexed by ``Cause``
    cpu: int  # ns on the CPU-side classes
    copy: int  # ns on copy
    dep: int  # ns on dependency
    uncl: int  # ns unclassified
    queued: bool | None  # gapscope's queued flag


@dataclasses.dataclass
class TraceAudit:
    """The running sums of one trace's audit: raw gaps matched to gapscope's, then the
    gapscope-only gaps bucketed by the raw launches."""

    rel: str
    gaps: object  # gapscope's ``Gaps`` table
    lanes: list
    cpu_cols: list[int]
    index: dict[tuple[int, int], list[int]] = dataclasses.field(init=False)
    used: set[int] = dataclasses.field(default_factory=set)
    tallies: dict[str, Tally] = dataclasses.field(default_factory=lambda: {b: Tally() for b in BUCKETS})
    edge: dict[str, Tally] = dataclasses.field(default_factory=lambda: {b: Tally() for b in BUCKETS})
    postq: Tally = dataclasses.field(default_factory=Tally)
    offenders: list[tuple] = dataclasses.field(default_factory=list)
    disagree: int = 0
    thread_mismatch: int = 0

    def __post_init__(self) -> None:
        index: dict[tuple[int, int], list[int]] = defaultdict(list)
        for i, (s, e) in enumerate(zip(self.gaps.start_ns.tolist(), self.gaps.end_ns.tolist())):
            index[(s, e)].append(i)
        self.index = index

    def view(self, i: int, device: object, start: int, end: int, bucket: str, call: Call | None, name: str) -> GapView:
        from gapscope.analysis import Cause

        g = self.gaps
        row = g.class_ns[i]
        return GapView(
            i,
            device,
            start,
            end,
            bucket,
            call,
            name,
            row,
            int(row[self.cpu_cols].sum()),
            int(row[int(Cause.COPY)]),
            int(row[int(Cause.DEPENDENCY)]),
            int(row[int(Cause.UNCLASSIFIED)]),
            bool(g.queued[i]) if g.queued is not None else None,
        )

    def add_classes(self, t: Tally, v: GapView) -> None:
        """Count a matched gap's idle and gapscope's class ns in ``t``."""
        t.matched += 1
        t.matched_idle += v.end - v.start
        t.cpu += v.cpu
        t.copy += v.copy
        t.dep += v.dep
        t.uncl += v.uncl

    def offend(self, v: GapView, bad: int, label: str) -> None:
        """List ``v`` as an offender with ``bad`` offending ns."""
        from gapscope.analysis import Cause

        cls = {c.label: int(v.row[int(c)]) for c in Cause if v.row[int(c)]}
        call = v.call
        self.offenders.append(
            (
                bad,
                self.rel,
                label,
                v.device,
                v.start,
                v.end - v.start,
                cls,
                v.queued,
                int(v.i),
                call.end - v.start if call else None,
                call.name if call else "",
                str(call.tid) if call else "",
                v.next_name,
            )
        )

    def judge(self, v: GapView, prefix: str) -> None:
        """Apply the rules to a gap (``prefix``: "" for a matched raw gap, "edge-" for a
        gapscope-only one): queued idle must not be CPU-side, late idle not dependency,
        and the stretch of a late gap after its launch returned is judged as queued."""
        if v.bucket == "late" and v.call is not None:
            # the stretch of a late gap after its launch call returned: the op sat in the
            # queue and the GPU still did not run it. gapscope may put at most
            # (call end - gap start) of CPU-side ns before it, so the rest of its
            # CPU-side ns lies in the queued stretch (an exact lower bound)
            pre = v.call.end - v.start
            post = max(0, v.end - v.start - pre)
            pq_cpu = max(0, v.cpu - pre)
            self.postq.n += 1 if post > 0 else 0
            self.postq.idle += post
            self.postq.matched_idle += post
            self.postq.cpu += pq_cpu
            if pq_cpu >= POSTQ_REPORT_NS:
                self.postq.uncl += pq_cpu  # (re-used field: CPU-side ns of the listed gaps)
                self.offend(v, pq_cpu, prefix + "late, CPU-side ns after the launch returned")
        bad = v.cpu if v.bucket == "queued" else v.dep if v.bucket == "late" else 0
        if bad > 0:
            self.offend(v, bad, prefix + v.bucket)

    def match_raw(self, rg: RawGap) -> None:
        """Tally a raw gap; where gapscope has a gap with the same (start, end), compare."""
        t = self.tallies[rg.bucket]
        t.n += 1
        t.idle += rg.end - rg.start
        cands = [i for i in self.index.get((rg.start, rg.end), ()) if i not in self.used]
        if not cands:
            return
        i = cands[0]
        self.used.add(i)
        v = self.view(i, rg.device, rg.start, rg.end, rg.bucket, rg.call, rg.next_name)
        self.add_classes(t, v)
        if rg.call is not None and self.gaps.thread_lane is not None:
            tl = int(self.gaps.thread_lane[i])
            ln = self.lanes[tl] if tl >= 0 else None
            if ln is None or (str(ln.pid), str(ln.tid)) != (str(rg.call.pid), str(rg.call.tid)):
                self.thread_mismatch += 1
        if rg.bucket in ("queued", "late") and v.queued is not None and v.queued != (rg.bucket == "queued"):
            self.disagree += 1
        self.judge(v, "")

    def add_gapscope_only(self, i: int, by_start: dict) -> None:
        """Tally a gap the raw pass lacks (its window widened to steps or to the first/last
        copy), bucketed by the raw launch of the kernel starting at its end (none at a
        trailing edge: "other")."""
        s, e = int(self.gaps.start_ns[i]), int(self.gaps.end_ns[i])
        found = [(c, nm) for c, nm in by_start.get(e, ()) if c is not None]
        if found:
            call, nm = min(found, key=lambda cn_: cn_[0].end)
            b = "queued" if call.end <= s else "late"
        else:
            call, nm, b = None, (by_start.get(e) or [(None, "")])[0][1], "other"
        v = self.view(i, int(self.gaps.device[i]), s, e, b, call, nm)
        t = self.edge[b]
        t.n += 1
        t.idle += e - s
        self.add_classes(t, v)
        self.judge(v, "edge-")


def _largest_gapscope_only(g, un: list[int]) -> str:
    """The longest of gapscope's gaps ``un`` (indices) and where it lies, as text."""
    if not un:
        return ""
    j = max(un, key=lambda i: int(g.dur_ns[i]))
    edge = {0: "inside", 1: "leading edge", 2: "trailing edge"}.get(int(g.edge[j]) if g.edge is not None else 0, "?")
    return f"largest {int(g.dur_ns[j]) / 1e6:.3f} ms at {int(g.start_ns[j])} ({edge})"


def audit(path: Path, rel: str) -> Result | str:
    """The audit of one trace file (``rel``: its name in the report), or why it is skipped."""
    t0 = time.perf_counter()
    try:
        events = read_events(path)
    except (OSError, EOFError, ValueError, RecursionError) as exc:  # not (gzipped) JSON: not a Chrome trace
        return f"unreadable ({type(exc).__name__})"
    gaps, nk, by_start = raw_gaps(events)
    del events
    if nk == 0:
        return "no kernels"
    from gapscope.analysis import Cause, diagnose
    from gapscope.parsers import load
    from gapscope.parsers.errors import TraceFormatError

    try:
        trace = load(str(path))
    except (TraceFormatError, OSError, ValueError) as exc:
        return f"loader refuses ({type(exc).__name__}: {str(exc)[:60]})"
    g = diagnose(trace).gaps
    ta = TraceAudit(rel, g, trace.lanes, [int(c) for c in Cause if c.cpu_side])
    for rg in gaps:
        ta.match_raw(rg)
    un = [i for i in range(len(g)) if i not in ta.used]
    for i in un:
        ta.add_gapscope_only(i, by_start)
    zg = [rg for rg in gaps if rg.zero_inside]
    return Result(
        rel,
        nk,
        ta.tallies,
        len(g),
        int(g.dur_ns.sum()),
        len(un),
        int(g.dur_ns[un].sum()) if un else 0,
        ta.disagree,
        sum(1 for rg in gaps if rg.ambiguous),
        ta.offenders,
        time.perf_counter() - t0,
        len(zg),
        sum(rg.end - rg.start for rg in zg),
        _largest_gapscope_only(g, un),
        ta.edge,
        ta.thread_mismatch,
        ta.postq,
    )


def corpus_files(root: Path, quick: bool) -> list[Path]:
    out = []
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.suffix == ".sqlite":
            continue
        if not (p.name.endswith(".json") or p.name.endswith(".gz")):
            continue
        if quick and str(p.relative_to(root)) in SLOWEST:
            continue
        out.append(p)
    return out


# ---------------------------------------------------------------- report
def _ms(ns: int) -> str:
    return f"{ns / 1e6:10.3f}"


def _pct(x: int, tot: int) -> str:
    return f"{100.0 * x / tot:6.1f}" if tot else "     -"


def _row(label: str, b: str, t: Tally) -> str:
    m = t.matched_idle
    return (
        f"{label:<58} {b:<6} {t.n:>6} {t.matched:>6} {_ms(t.idle)} {_ms(m)} "
        f"{_pct(t.cpu, m)} {_pct(t.copy, m)} {_pct(t.dep, m)} {_pct(t.uncl, m)}"
    )


HEADER = (
    f"{'trace':<58} {'bucket':<6} {'gaps':>6} {'match':>6} {'idle ms':>10} {'match ms':>10} "
    f"{'cpu%':>6} {'copy%':>6} {'dep%':>6} {'uncl%':>6}"
)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", help="trace files, or paths under --root (default: the corpus)")
    ap.add_argument("--root", default=str(CORPUS), help="corpus folder (default %(default)s)")
    ap.add_argument("--quick", action="store_true", help="skip the four slowest traces: " + ", ".join(SLOWEST))
    ap.add_argument("--top", type=int, default=25, help="worst offenders listed (default %(default)s)")
    return ap.parse_args(argv)


def _audit_files(files: list[Path], root: Path) -> tuple[list[Result], list[tuple[str, str]]]:
    """The audits of ``files`` (names relative to ``root`` where under it) and the
    (name, why) of those skipped."""
    results: list[Result] = []
    skipped: list[tuple[str, str]] = []
    for p in files:
        try:
            rel = str(p.resolve().relative_to(root.resolve()))
        except ValueError:
            rel = str(p)
        r = audit(p, rel)
        if isinstance(r, str):
            skipped.append((rel, r))
        else:
            results.append(r)
            print(f"  audited {rel} ({r.secs:.1f} s)", file=sys.stderr, flush=True)
    return results, skipped


def _print_buckets(results: list[Result]) -> dict[str, Tally]:
    """The table of raw gaps per trace and bucket; returns the totals per bucket."""
    print(HEADER)
    print("-" * len(HEADER))
    total = {b: Tally() for b in BUCKETS}
    for r in results:
        first = True
        for b in BUCKETS:
            t = r.tallies[b]
            total[b].add(t)
            if t.n == 0:
                continue
            print(_row(r.trace if first else "", b, t))
            first = False
    print("-" * len(HEADER))
    for b in BUCKETS:
        print(_row("TOTAL" if b == "queued" else "", b, total[b]))
    print()
    return total


def _print_edge(results: list[Result]) -> None:
    edge_total = {b: Tally() for b in BUCKETS}
    for r in results:
        for b in BUCKETS:
            edge_total[b].add(r.edge[b])
    print(
        "Gapscope-only gaps at a widened window's edge (steps, first/last copy), bucketed by the raw launch of "
        "the kernel at their end (none: 'other'):"
    )
    for b in BUCKETS:
        if edge_total[b].n:
            print(_row("EDGE GAPS", b, edge_total[b]))
    print()


def _print_after_return(results: list[Result]) -> Tally:
    """The line of late gaps' stretch after the launch returned; returns its total."""
    pq = Tally()
    for r in results:
        pq.add(r.postq)
    print(
        "Late gaps, the stretch after the launch call returned (the op was queued, the GPU still idle): CPU-side "
        "share is a lower bound, max(0, CPU-side ns - (call end - gap start)); the same rule as queued applies:"
    )
    print(
        f"{'LATE AFTER RETURN':<58} {'late':<6} {pq.n:>6} {pq.n:>6} {_ms(pq.idle)} {_ms(pq.idle)} "
        f"{_pct(pq.cpu, pq.idle)} {'-':>6} {'-':>6} {'-':>6}"
    )
    print()
    return pq


def _print_summary(results: list[Result], n_skipped: int, wall_s: float) -> None:
    """Counts over all traces: gaps, matches, disagreements."""
    n_gaps = sum(t.n for r in results for t in r.tallies.values())
    n_match = sum(t.matched for r in results for t in r.tallies.values())
    print(f"traces audited: {len(results)}  skipped: {n_skipped}  wall: {wall_s:.1f} s")
    print(
        f"raw gaps: {n_gaps}  matched to gapscope by exact (start, end): {n_match} "
        f"({100.0 * n_match / max(n_gaps, 1):.1f} %)"
    )
    print(
        f"gapscope gaps not matched (step/copy window edges, other kernel sets): "
        f"{sum(r.gs_unmatched for r in results)} of {sum(r.gs_gaps for r in results)}, "
        f"{sum(r.gs_unmatched_idle for r in results) / 1e6:.3f} ms of {sum(r.gs_idle for r in results) / 1e6:.3f} ms"
    )
    print(
        f"matched gaps where gapscope's queued flag disagrees with the raw bucket: "
        f"{sum(r.queued_disagree for r in results)}; gaps with several next kernels that disagree "
        f"on queued/late: {sum(r.ambiguous for r in results)}"
    )
    print(
        f"matched gaps with a raw launch call whose gapscope thread T is not that call's (pid, tid): "
        f"{sum(r.thread_mismatch for r in results)}"
    )


def _print_targets(total: dict[str, Tally], pq: Tally) -> None:
    """The three rules with PASS / FAIL."""
    q, late = total["queued"], total["late"]
    q_cpu = 100.0 * q.cpu / q.matched_idle if q.matched_idle else 0.0
    l_cpu = 100.0 * late.cpu / late.matched_idle if late.matched_idle else 0.0
    print(
        f"QUEUED idle on CPU-side classes: {q_cpu:6.2f} %   (target <= 5 %)   "
        f"{'PASS' if q_cpu <= 5.0 else 'FAIL'}   [{q.cpu / 1e6:.3f} of {q.matched_idle / 1e6:.3f} ms]"
    )
    pq_cpu = 100.0 * pq.cpu / pq.idle if pq.idle else 0.0
    print(
        f"LATE gaps after the launch returned, on CPU-side classes: >= {pq_cpu:6.2f} %   (same rule as queued: "
        f"<= 5 %)   {'PASS' if pq_cpu <= 5.0 else 'FAIL'}   [>= {pq.cpu / 1e6:.3f} of {pq.idle / 1e6:.3f} ms; "
        f"{pq.uncl / 1e6:.3f} ms of it in gaps with >= {POSTQ_REPORT_NS / 1e3:g} µs each (listed below); the rest in "
        f"gaps with less, mostly launch-to-start latency of a few µs]"
    )
    print(
        f"LATE   idle on CPU-side classes: {l_cpu:6.2f} %   (target >= 90 %)  "
        f"{'PASS' if l_cpu >= 90.0 else 'FAIL'}   [{late.cpu / 1e6:.3f} of {late.matched_idle / 1e6:.3f} ms; "
        f"copy {_pct(late.copy, late.matched_idle).strip()} %, dependency {_pct(late.dep, late.matched_idle).strip()} %, "
        f"unclassified {_pct(late.uncl, late.matched_idle).strip()} %]"
    )
    print()


def _print_matching(results: list[Result]) -> None:
    """Per trace, the gaps only one side has."""
    print(
        "MATCHING per trace (raw gaps gapscope lacks; gapscope gaps the raw pass lacks, e.g. a window widened to "
        "steps or to the first/last copy; raw gaps spanning zero-length kernels)"
    )
    for r in results:
        raw_un = sum(t.n - t.matched for t in r.tallies.values())
        raw_un_ns = sum(t.idle - t.matched_idle for t in r.tallies.values())
        if raw_un or r.gs_unmatched or r.zero_gaps:
            print(
                f"  {r.trace:<66} raw-only {raw_un:>4} ({raw_un_ns / 1e6:.3f} ms)  gapscope-only {r.gs_unmatched:>4} "
                f"({r.gs_unmatched_idle / 1e6:.3f} ms{'; ' + r.gs_only_largest if r.gs_only_largest else ''})  "
                f"spanning 0-ns kernels {r.zero_gaps} ({r.zero_idle / 1e6:.3f} ms)"
            )
    print()


def _print_offenders(results: list[Result], top: int) -> None:
    """Offending ns per trace and rule, then the ``top`` worst gaps."""
    offenders = sorted((o for r in results for o in r.offenders), key=lambda o: -o[0])
    print(
        f"WORST OFFENDERS ({len(offenders)} gaps: queued with CPU-side ns, late with dependency ns, or late with "
        f">= {POSTQ_REPORT_NS / 1e3:g} µs of CPU-side ns after the launch returned; top {top} by offending ns)"
    )
    per_trace: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for o in offenders:
        per_trace[f"{o[1]} [{o[2]}]"][0] += 1
        per_trace[f"{o[1]} [{o[2]}]"][1] += o[0]
    for k, (n, ns) in sorted(per_trace.items(), key=lambda kv: -kv[1][1]):
        print(f"  {k:<70} {n:>5} gaps {ns / 1e6:10.3f} ms offending")
    print()
    for o in offenders[:top]:
        bad, rel, b, dev, start, dur, cls, gq, gi, lat, cname, tid, nname = o
        lat_s = f"{lat / 1e3:+.3f} µs" if lat is not None else "-"
        print(
            f"  {rel} dev {dev} gap#{gi} start {start} ns len {dur / 1e3:.3f} µs [{b}; gapscope queued={gq}] "
            f"offending {bad / 1e3:.3f} µs"
        )
        print(f"      launch {cname!r} tid {tid} end-gap.start {lat_s}; next {nname[:70]!r}")
        print(f"      class_ns {cls}")


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    root = Path(args.root)
    files = [Path(p) if Path(p).exists() else root / p for p in args.paths] or corpus_files(root, args.quick)
    t_all = time.perf_counter()
    results, skipped = _audit_files(files, root)
    total = _print_buckets(results)
    _print_edge(results)
    pq = _print_after_return(results)
    _print_summary(results, len(skipped), time.perf_counter() - t_all)
    _print_targets(total, pq)
    _print_matching(results)
    _print_offenders(results, args.top)
    if skipped:
        print()
        print("skipped: " + "; ".join(f"{r} ({why})" for r, why in skipped))
    return 0


if __name__ == "__main__":
    sys.exit(main())
