"""The wording of a card (``gapscope.analysis.cards``): the smell per class, the "why"
sentence and the per-class advice (first experiment, forbidden next step, proof).

The advice follows the design's defaults (launch → CUDA graphs / ``torch.compile`` /
batching; host → take the work off the critical path; copy → keep tensors on the
device, pinned + ``non_blocking``; sync → no ``.item()`` / ``print`` in the loop, CUDA
events for timing), specialised by the evidence: the ``.item()`` call site, the host
range, the copy and its bytes. Durations are quoted from int64 ns, sizes from bytes.
Names from the trace are quoted literally between backticks.
"""

from __future__ import annotations

import re

import numpy as np

from gapscope.parsers.model import Kind

from gapscope.analysis.classify import rank_classes
from gapscope.analysis.evidence import enclosing_step_range
from gapscope.analysis.types import Cause, Evidence
from gapscope.analysis.waits import WAIT_NAME_RE

SMELLS = {
    Cause.LAUNCH: "launch-bound gap",
    Cause.HOST: "host island",
    Cause.COPY: "copy on the path",
    Cause.SYNC: "sync cliff",
    Cause.UNCLASSIFIED: "unexplained white space",
}


def _ms(ns: float) -> str:
    ns = float(ns)
    if abs(ns) >= 100_000:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e3:.1f} µs"


def _bytes(n: int) -> str:
    if n < 0:
        return "unknown size"
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n / k:.1f} {unit}"
    return f"{n} B"


def _quote(name: str) -> str:
    return "`" + name.replace("`", "'") + "`"


def _call_site(diag, ev: int) -> str | None:
    """Innermost Python frame enclosing event ``ev`` on its lane (the call site), or None."""
    trace = diag.trace
    if ev < 0 or diag._index is None:
        return None
    s, e = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
    idx = diag._index.overlapping(trace, int(trace.lane[ev]), s, s + 1)
    m = (trace.kind[idx] == int(Kind.PYTHON)) & (trace.start_ns[idx] + trace.dur_ns[idx] >= e) & (idx != ev)
    if not m.any():
        return None
    cand = idx[m]
    return trace.name(int(cand[np.argmax(trace.depth[cand])]))


def _aggregate(evidence: list[Evidence]) -> dict[tuple[Cause, str], int]:
    agg: dict[tuple[Cause, str], int] = {}
    for ev in evidence:
        if ev.event >= 0:
            key = (ev.cause, ev.name)
            agg[key] = agg.get(key, 0) + ev.overlap_ns
    return agg


#: Evidence events checked for nesting in one another (the sentence names a few).
_NESTING_CHECK_MAX = 256


def _containers(trace, evidence: list[Evidence]) -> dict[int, str]:
    """{event: name of the outermost evidence event on its lane that encloses it}, so
    the sentence does not add a call to the op running inside it (``aten::div`` inside
    ``DataLoader.__next__`` is not extra time)."""
    evs = [e for e in evidence if e.event >= 0][:_NESTING_CHECK_MAX]
    out: dict[int, str] = {}
    for e in evs:
        s, d = int(trace.start_ns[e.event]), int(trace.dur_ns[e.event])
        best = None
        for o in evs:
            if o.event == e.event or o.lane != e.lane:
                continue
            os_, od = int(trace.start_ns[o.event]), int(trace.dur_ns[o.event])
            if os_ <= s and s + d <= os_ + od and trace.depth[o.event] < trace.depth[e.event]:
                if best is None or trace.depth[o.event] < trace.depth[best.event]:
                    best = o
        if best is not None:
            out[e.event] = best.name
    return out


def _why(diag, rows: np.ndarray, class_ns: np.ndarray, evidence: list[Evidence], head: str, lead: str = "") -> str:
    """One sentence: ``head`` (who/how long), then the evidence of ``rows`` (one
    occurrence), introduced by ``lead`` (e.g. "in the median step, "), then the launch
    lateness and, for idle no evidence explains, what is known. ``class_ns``: the ns
    per class the card reports (its primary class's evidence is named first)."""
    trace = diag.trace
    g = diag.gaps
    parts = []
    gpu_parts = []
    primary = _rank(class_ns)[0]
    # the stated class's evidence first, so the sentence supports the card's class
    inside = _containers(trace, evidence)
    agg = sorted(_aggregate([e for e in evidence if e.event not in inside]).items(),
                 key=lambda kv: (kv[0][0] != primary, -kv[1]))
    inner: dict[str, dict[str, int]] = {}  # container name -> {inner name: ns}
    for e in evidence:
        if e.event in inside:
            d = inner.setdefault(inside[e.event], {})
            d[e.name] = d.get(e.name, 0) + e.overlap_ns
    verbs = {Cause.SYNC: "blocked in", Cause.COPY: "copying in", Cause.LAUNCH: "launching in", Cause.HOST: "busy in"}
    waits = {e.name for e in evidence if e.event >= 0 and e.cause == Cause.SYNC and WAIT_NAME_RE.search(e.name)
             and g.wait_event is not None and e.event in set(g.wait_event[rows].tolist())}
    on_gpu = {e.name for e in evidence if e.event >= 0 and trace.lanes[e.lane].is_gpu}
    for (cause, name), ns in agg:
        if name in waits:
            if len(gpu_parts) < 2:
                ev = next(e for e in evidence if e.name == name and e.cause == cause)
                ln = trace.lanes[ev.lane]
                label = ln.thread_name or ln.tid
                by = "" if ln.is_gpu else f" (enqueued by {'' if label.lower().startswith('thread') else 'thread '}{_quote(label)})"
                gpu_parts.append(f"the next op was queued behind the stream wait {_quote(name)}{by} and waited "
                                 f"{_ms(ns)} for the event it names")
        elif name in on_gpu:
            if len(gpu_parts) < 2:
                ev = next(e for e in evidence if e.name == name and e.cause == cause)
                if cause == Cause.COPY:
                    extra = f" ({_bytes(ev.bytes)}{', pageable host memory' if ev.pageable else ''})" if ev.bytes >= 0 else ""
                    gpu_parts.append(f"the copy {_quote(name)}{extra} ran for {_ms(ns)} with no kernel beside it")
                else:
                    gpu_parts.append(f"a host wait {_quote(name)} is recorded on the device for {_ms(ns)}")
        elif len(parts) < 3:
            within = sorted(((k, v) for k, v in inner.pop(name, {}).items() if v <= ns), key=lambda kv: -kv[1])[:2]
            of_which = (" (of which " + ", ".join(f"{_ms(v)} in {_quote(k)}" for k, v in within) + ")") if within else ""
            parts.append(f"{_ms(ns)} {verbs.get(cause, 'in')} {_quote(name)}{of_which}")
    evidence = [e for e in evidence if e.name not in waits]  # the wait is no thread activity
    rep_dur = int(g.dur_ns[rows].sum())
    # uninstrumented time as the evidence lists measured it (nested events not added twice)
    quiet = sum(e.overlap_ns for e in evidence if e.event < 0)
    has_cpu = any((not ln.is_gpu) and trace.lane_offsets[ln.index + 1] > trace.lane_offsets[ln.index] for ln in trace.lanes)
    # of the occurrence described (``rows``), not of a whole group
    unexplained = int(g.class_ns[rows, int(Cause.UNCLASSIFIED)].sum()) if g.class_ns is not None else rep_dur
    queued = _queued(diag, rows)
    if quiet > 0 and quiet >= rep_dur // 20 and has_cpu and not (queued and unexplained):
        parts.append(_quiet_txt(diag, rows, quiet))
    lanes = {e.lane for e in evidence if e.event >= 0 and not trace.lanes[e.lane].is_gpu}
    who = "the launching thread"
    if len(lanes) == 1:
        ln = trace.lanes[next(iter(lanes))]
        label = ln.thread_name or ln.tid
        who = _quote(label) if label.lower().startswith("thread") else f"thread {_quote(label)}"
    if not parts and not gpu_parts:
        body = "; no CPU event covers it" + (" (the trace has no CPU activity)" if not has_cpu else "") + (" and no launch is linked to the next kernel" if (g.launch[rows] < 0).all() else "")
    else:
        body = ""
        if gpu_parts:
            body += ": " + lead + "; ".join(gpu_parts)
        if parts:
            body += ("; meanwhile " if gpu_parts else ": " + lead) + f"{who} spent " + ", ".join(parts)
    late = g.lateness_ns[rows]
    has = g.launch[rows] >= 0
    tail = ""
    edge = g.edge[rows] if g.edge is not None else np.zeros(rows.size, np.int8)
    if has.any():
        L = int(np.median(late[has]))
        if (edge == 2).any() and (edge == 1).any():  # step-boundary stretch: idle starts at the trailing gap
            L += int(g.dur_ns[rows][edge == 2].sum())
        if L > 0:
            tail = f"; the next launch call started {_ms(L)} after the GPU went idle"
        elif L == 0:
            tail = "; the next launch call started just as the GPU went idle"
        else:
            tail = f"; the next kernel was already queued {_ms(-L)} before the GPU went idle"
    if queued and unexplained:
        ln = int(g.launch[rows][has][0])
        if _GRAPH_RE.search(trace.name(ln)):
            tail += f" (by {_quote(trace.name(ln))}: it is a node of a CUDA graph)"
        tail += (" and" if unexplained == rep_dur else f"; for {_ms(unexplained)} of it") + (
            " nothing recorded on the CPU explains the wait: look at other streams of this device and at other"
            " ranks (collectives, cross-stream event waits)")
    elif unexplained and unexplained == rep_dur:
        tail += " (no evidence: unclassified)"
    return head + body + tail + "."


_GRAPH_RE = re.compile(r"GraphLaunch", re.IGNORECASE)


def _step_range(diag, rows: np.ndarray) -> str | None:
    """Name of the step range (``ProfilerStep#8``, ``decode_step``) enclosing the
    uninstrumented time of ``rows`` on its thread, or None."""
    g = diag.gaps
    for r in rows.tolist():
        lane = int(g.thread_lane[r]) if g.thread_lane is not None else int(g.launch_lane[r])
        ev = enclosing_step_range(diag.trace, diag._exclude, lane, int(g.start_ns[r]), int(g.end_ns[r]))
        if ev >= 0:
            return diag.trace.name(ev)
    return None


def _quiet_txt(diag, rows: np.ndarray, quiet_ns: int) -> str:
    """"0.200 ms inside `decode_step` with no finer event recorded (...)": the
    enclosing step range is named as where the time went, never as the work."""
    step = _step_range(diag, rows)
    if step is not None:
        return f"{_ms(quiet_ns)} inside {_quote(step)} with no finer event recorded (uninstrumented Python or untraced work)"
    return f"{_ms(quiet_ns)} with no recorded events (uninstrumented Python or untraced work)"


#: A single launch call at least this long (ns) is first-use cost, not dispatch overhead.
SLOW_LAUNCH_NS = 1_000_000


def slow_launch(diag, evidence: list[Evidence], rows: np.ndarray) -> bool:
    """Whether a launch-class gap (outside picket fences) is mostly one launch call of
    at least ``SLOW_LAUNCH_NS``: first-use cost, not the per-kernel dispatch tax."""
    top = [e for e in evidence if e.cause == Cause.LAUNCH and e.event >= 0]
    return bool(top) and not (diag.gaps.episode[rows] >= 0).any() \
        and diag.trace.kind[top[0].event] == int(Kind.LAUNCH) and top[0].overlap_ns >= SLOW_LAUNCH_NS


def _issues_gpu_work(trace, ev: int) -> bool:
    """Whether event ``ev`` encloses a launch call on its lane (it issues GPU work)."""
    if ev < 0 or trace.kind[ev] == int(Kind.LAUNCH):
        return False
    sl = trace.lane_slice(int(trace.lane[ev]))
    starts = trace.start_ns[sl]
    s, e = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
    a, b = np.searchsorted(starts, s, side="left"), np.searchsorted(starts, e, side="left")
    return bool((trace.kind[sl][a:b] == int(Kind.LAUNCH)).any())


def _queued(diag, rows: np.ndarray) -> bool:
    """True when the next op of every gap in ``rows`` that has a linked launch was
    queued before the gap (L <= 0), and at least one has one (no step-boundary pair)."""
    g = diag.gaps
    has = g.launch[rows] >= 0
    edge = g.edge[rows] if g.edge is not None else np.zeros(rows.size, np.int8)
    if not has.any() or ((edge == 2).any() and (edge == 1).any()):
        return False
    return bool((g.lateness_ns[rows][has] <= 0).all())


def _advice(diag, cause: Cause, evidence: list[Evidence], rows: np.ndarray, dur_txt: str) -> tuple[str, str, str]:
    trace = diag.trace
    p = diag.params
    top = [e for e in evidence if e.cause == cause and e.event >= 0]
    name = _quote(top[0].name) if top else None
    if cause == Cause.SYNC:
        site = _call_site(diag, top[0].event) if top else None
        where = f"{name}" + (f" (called from {_quote(site)})" if site else "") if name else "the host read"
        return (f"Remove the host read {where} from the loop: keep the value on the GPU (mask or torch.where instead "
                f"of a Python branch on it), or collect the values and read them once after the loop; time with CUDA "
                f"events instead of synchronizing.",
                "Do not speed up the kernels around the gap: the GPU is idle because the CPU waits for it, and a "
                "faster kernel only makes that wait start sooner.",
                f"On a new capture of the same steps, the idle at this position ({dur_txt}) and the number of "
                f"synchronizing calls per step (cudaStreamSynchronize, aten::item) should drop to about zero.")
    if cause == Cause.COPY:
        cp = [e for e in evidence if e.cause == Cause.COPY]
        big = max(cp, key=lambda e: (e.bytes, e.overlap_ns)) if cp else None
        what = _quote(big.name) if big else "the copy"
        bits = []
        if big is not None and big.bytes >= 0:
            bits.append(_bytes(big.bytes))
        if big is not None and big.pageable:
            bits.append("from pageable host memory")
        detail = f" ({', '.join(bits)})" if bits else ""
        return (f"Keep the data on the device so {what}{detail} is not needed (drop the .cpu()/numpy round trip); "
                f"where a copy must stay, use pinned host memory and non_blocking=True so it overlaps compute.",
                "Do not optimise the kernels: the GPU waits for data to move, not for compute.",
                f"Exposed copy time per step (memcpy outside kernels) and the idle at this position ({dur_txt}) "
                f"on a new capture; the copy should vanish or run under a kernel.")
    if cause == Cause.LAUNCH and slow_launch(diag, evidence, rows):
        # one launch call of a millisecond or more is no per-kernel dispatch tax
        return (f"Find why the launch call {name} took {_ms(top[0].overlap_ns)}: a single call that long is "
                f"first-use cost (CUDA module loading, JIT compilation, autotuning, memory allocation), not the "
                f"per-kernel tax. Warm up before profiling (run a few steps first; CUDA_MODULE_LOADING=EAGER loads "
                f"modules at start) and compare a steady-state step.",
                "Do not capture CUDA graphs or fuse ops for this gap: one slow call, not many small launches, "
                "left the GPU idle.",
                f"The same position on a capture of warmed-up steps: the idle ({dur_txt}) should be gone.")
    if cause == Cause.LAUNCH:
        eps = {int(e) for e in diag.gaps.episode[rows] if e >= 0}
        fence = ""
        if eps:
            ep = diag.episodes[min(eps)]
            launch_txt = f", launch calls of median {_ms(ep.median_launch_ns)}" if ep.median_launch_ns >= 0 else ""
            fence = (f" ({ep.kernel_count} short kernels of median {_ms(ep.median_kernel_ns)}{launch_txt}, "
                     f"{_ms(ep.idle_ns)} idle between them)")
        return (f"Issue the work with fewer launches{fence}: capture the step in a CUDA graph (torch.compile with "
                f"mode='reduce-overhead', or torch.cuda.graphs), fuse the small ops, or batch more requests per step.",
                "Do not write a faster kernel: the kernels already finish before the next launch arrives.",
                f"GPU busy share and launch calls per step before and after; gaps in this stretch should fall "
                f"below {_ms(p.min_gap_ns)} and the idle at this position ({dur_txt}) shrink.")
    if cause == Cause.HOST:
        quiet = [e for e in evidence if e.cause == cause and e.event < 0]
        quiet_ns = sum(e.overlap_ns for e in quiet)
        if quiet and (not top or quiet_ns > top[0].overlap_ns):
            # most of the host time has no event of its own: say where it is, not what to move
            first = (f"Find out what the CPU does for the {_quiet_txt(diag, rows, quiet_ns)}: capture with "
                     f"with_stack=True or wrap the suspects in torch.profiler.record_function ranges, then take "
                     f"that work off the critical path (after the step, every N steps, or another thread) and "
                     f"launch the next GPU work before it.")
        elif top and _issues_gpu_work(trace, top[0].event):
            # the culprit is the model's own code issuing GPU work (nn.Module, an op that
            # launches kernels): it cannot leave the critical path, its CPU cost can shrink
            first = (f"{name} issues GPU work itself (it encloses launch calls): the CPU takes longer to issue the "
                     f"work than the GPU to run it. Cut the CPU cost per kernel: torch.compile (mode="
                     f"'reduce-overhead' adds CUDA graphs), fewer and larger ops (fuse, batch more per step), and "
                     f"keep Python work such as logging and checks out of the step.")
        else:
            what = name or "the CPU work between launches"
            first = (f"Take {what} off the critical path: run it after the step, every N steps, or in another "
                     f"thread/process, and launch the next GPU work before doing it so the two overlap.")
        return (first,
                "Do not reach for cuBLAS settings or a faster kernel: the GPU has nothing queued while the CPU "
                "is busy, so faster kernels only widen this gap's share of the step.",
                f"Idle at this position ({dur_txt}) and step time{' and tokens/s' if _decode(diag) else ''} on a new "
                f"capture with the same ranges named.")
    if _queued(diag, rows) and any(not ln.is_gpu for ln in trace.lanes):
        return ("Find what the queued kernel waited for: capture with a recent torch.profiler (its 'cuda_sync' "
                "records name the stream an event wait is on) and capture every rank in the same window; check "
                "cross-stream waits (wait_stream, wait_event), collectives on other streams and ranks, and waits "
                "captured inside CUDA graphs.",
                "Do not optimise the kernels around the gap or the CPU code before it: the next kernel was already "
                "queued, so neither the CPU nor the kernels next to the gap held it back.",
                f"The same gap ({dur_txt}) on the new capture, with the wait it sits behind named.")
    return ("Capture again with CPU activity recorded (torch.profiler activities CPU and CUDA, with_stack=True) "
            "so the launching thread and its calls are visible.",
            "Do not pick a kernel to optimise from the GPU lanes alone.",
            f"The same gap ({dur_txt}) classified on the new capture.")


def _rank(class_ns: np.ndarray) -> tuple[Cause, float, Cause | None, float]:
    """(primary, its share, secondary or None, its share) of one class_ns row; shares
    of the row's total, the same rule as the gaps' columns (``classify.rank_classes``)."""
    cn = np.asarray(class_ns, dtype=np.int64).reshape(1, -1)
    p, ps, s, ss = rank_classes(cn, cn.sum(axis=1))
    return Cause(int(p[0])), float(ps[0]), (Cause(int(s[0])) if s[0] >= 0 else None), float(ss[0])


def _mix(class_ns: np.ndarray) -> str:
    """"host (77%), then sync (22%)" for a class_ns row."""
    p, ps, s, ss = _rank(class_ns)
    return f"{p.label} ({ps:.0%})" + (f", then {s.label} ({ss:.0%})" if s is not None else "")


def _decode(diag) -> bool:
    """True when a step makes one token (``gapscope.analysis.budget.is_decode``)."""
    b = getattr(diag, "budget", None)
    return bool(getattr(b, "decode", False))
