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

from gapscope.analysis.busy import coverage, union_intervals
from gapscope.analysis.classify import SLOW_LAUNCH_NS, rank_classes
from gapscope.analysis.evidence import enclosing_step_range
from gapscope.analysis.evidence_kinds import BLOCKING_SYNC_RE, COLLECTIVE_RE, GRAPH_LAUNCH_RE, SYNC_OP_NAMES
from gapscope.analysis.types import Cause, Evidence, Trust, WaitKind
from gapscope.parsers.model import CopyKind, Kind

SMELLS = {
    Cause.LAUNCH: "launch-bound gap",
    Cause.HOST: "host island",
    Cause.COPY: "copy on the path",
    Cause.SYNC: "sync cliff",
    Cause.UNCLASSIFIED: "unexplained white space",
    Cause.DEPENDENCY: "queued, waiting on the GPU side",
}

#: The smell of a queued (dependency) gap by what it waited on.
DEPENDENCY_SMELLS = {
    WaitKind.NOTHING_RECORDED: "queued, waiting on the GPU side",
    WaitKind.STREAM_WAIT: "cross-stream wait",
    WaitKind.COLLECTIVE: "collective wait",
    WaitKind.GRAPH: "graph ordering",
    WaitKind.DISPATCH: "dispatch jitter (not actionable)",
}


def fmt_ms(ns: float) -> str:
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


def _thread_label(trace, lane: int) -> str:
    """ "thread `main`" / "`thread 783658 (python3.8)`" for a CPU lane."""
    if lane < 0:
        return "the launching thread"
    ln = trace.lanes[lane]
    label = ln.thread_name or ln.tid
    return _quote(label) if str(label).lower().startswith("thread") else f"thread {_quote(label)}"


def _items(
    diag, rows: np.ndarray, evidence: list[Evidence], cause: Cause, limit: int = 2, cap_ns: int | None = None
) -> list[str]:
    """The ``limit`` largest items of ``cause`` as "0.060 ms in `name`" (uninstrumented
    time named as such), largest first; an event nested in a listed one is not added to
    it but named inside it ("(of which 30.0 µs in `aten::cat`)")."""
    mine = [e for e in evidence if e.cause == cause]
    inside = _containers(diag.trace, mine)
    agg: dict[tuple[int, str], int] = {}
    inner: dict[str, dict[str, int]] = {}
    for e in mine:
        if e.event in inside:
            d = inner.setdefault(inside[e.event], {})
            d[e.name] = d.get(e.name, 0) + e.overlap_ns
            continue
        key = (0 if e.event >= 0 else 1, e.name)
        agg[key] = agg.get(key, 0) + e.overlap_ns
    out = []
    listed = 0
    for (quiet, name), ns in sorted(agg.items(), key=lambda kv: -kv[1])[:limit]:
        if cap_ns is not None:
            ns = min(ns, cap_ns - listed)  # an op's time under launch calls or copies is theirs
            if ns <= 0:
                break
        listed += ns
        if quiet:
            out.append(_quiet_txt(diag, rows, ns))
            continue
        within = sorted(((k, v) for k, v in inner.get(name, {}).items() if v <= ns), key=lambda kv: -kv[1])[:2]
        of_which = (" (of which " + ", ".join(f"{fmt_ms(v)} in {_quote(k)}" for k, v in within) + ")") if within else ""
        out.append(f"{fmt_ms(ns)} in {_quote(name)}{of_which}")
    if cap_ns is not None and out and cap_ns - listed >= max(1_000, cap_ns // 100):
        out.append(f"{fmt_ms(cap_ns - listed)} in other work")  # so the items add up to the part
    return out


def _copy_phrase(trace, evidence: list[Evidence], copy_ns: int) -> str:
    cp = [e for e in evidence if e.cause == Cause.COPY]
    if not cp:
        return f"{fmt_ms(copy_ns)} copying"
    # the largest item; the GPU's own copy when it is at least half as large
    big = max(cp, key=lambda e: (e.overlap_ns, e.bytes))
    gpu = [e for e in cp if trace.lanes[e.lane].is_gpu and 2 * e.overlap_ns >= big.overlap_ns]
    big = max(gpu, key=lambda e: (e.overlap_ns, e.bytes)) if gpu else big
    bits = []
    if big.bytes >= 0:
        bits.append(_bytes(big.bytes))
    if big.pageable:
        bits.append("pageable host memory")
    where = "the GPU ran the copy" if trace.lanes[big.lane].is_gpu else "the thread was in the copy call"
    return f"{fmt_ms(copy_ns)} copying ({where} {_quote(big.name)}" + (f", {', '.join(bits)}" if bits else "") + ")"


def why_sentence(
    diag, rows: np.ndarray, class_ns: np.ndarray, evidence: list[Evidence], head: str, lead: str = ""
) -> str:
    """One sentence on the occurrence ``rows`` (a gap, or a step-boundary pair): ``head``
    (how long), then its parts in time order, each with the ns ``class_ns`` gives its
    class, so the parts add up to the occurrence: for a queued gap, what the queued op
    waited on (and the copies); for a starved one, what the launching thread did before
    the sync cliff (host), the cliff (the blocking wait and the host work after it),
    the exposed launch path and the copies; then the launch lateness."""
    trace = diag.trace
    g = diag.gaps
    # parts that round to nothing are not named (the partition still holds their ns)
    cn = {c: (int(class_ns[int(c)]) if int(class_ns[int(c)]) >= 50 else 0) for c in Cause}
    lane = int(g.thread_lane[rows[0]]) if g.thread_lane is not None else int(g.launch_lane[rows[0]])
    who = _thread_label(trace, lane)
    if lane >= 0 and bool((g.launch[rows] < 0).all()) and bool((g.next_op[rows] >= 0).any()):
        who += " (it launched the previous kernel; the next op has no linked launch call)"
    has = g.launch[rows] >= 0
    if queued_occurrence(diag, rows):
        r = int(rows[has][0]) if has.any() else int(rows[0])
        nxt, call = int(g.next_op[r]), int(g.launch[r])
        if call >= 0:
            L = int(np.median(g.lateness_ns[rows][has]))
            body = (
                f", although the next op {_quote(trace.name(nxt))} was already queued: its launch call "
                f"{_quote(trace.name(call))} on {_thread_label(trace, int(trace.lane[call]))} had returned "
                f"{fmt_ms(-L)} before the GPU went idle"
            )
        else:  # a node of a graph whose launch call the trace lacks; a sibling node ran before
            body = (
                f", although the next op {_quote(trace.name(nxt))} was already queued: it is a node of a CUDA "
                f"graph whose earlier nodes had already run (the graph's launch call is not in the trace)"
            )
        parts = [_dependency_phrase(diag, r, cn[Cause.DEPENDENCY], evidence)] if cn[Cause.DEPENDENCY] else []
        if cn[Cause.COPY]:
            parts.append(_copy_phrase(trace, evidence, cn[Cause.COPY]))
        text = lead + "; ".join(parts)
        text = (text[:1].upper() + text[1:] + ". ") if text else ""
        return head + body + ". " + text + "What the CPU did meanwhile is not the cause."
    parts = []
    if cn[Cause.HOST]:
        items = _items(diag, rows, evidence, Cause.HOST, cap_ns=cn[Cause.HOST])
        parts.append(f"{fmt_ms(cn[Cause.HOST])} on host work" + (f" ({', '.join(items)})" if items else ""))
    if cn[Cause.COPY]:
        parts.append(_copy_phrase(trace, evidence, cn[Cause.COPY]))
    if cn[Cause.SYNC]:
        waits = [e for e in evidence if e.cause == Cause.SYNC and e.event >= 0 and _is_wait(trace, e.event)]
        if waits:
            w = max(waits, key=lambda e: e.overlap_ns)
            w_ns = sum(e.overlap_ns for e in waits if e.name == w.name)
            after = cn[Cause.SYNC] - w_ns
            gpu = (
                " (a small device-to-host copy ran meanwhile)"
                if any(trace.lanes[e.lane].is_gpu for e in evidence if e.cause == Cause.SYNC)
                else ""
            )
            cliff = bool((g.sync_from_ns[rows] < g.launch_from_ns[rows]).any()) if g.sync_from_ns is not None else False
            if after > 0 and cliff:
                parts.append(
                    f"{fmt_ms(cn[Cause.SYNC])} in the sync cliff ({fmt_ms(w_ns)} blocked in {_quote(w.name)}{gpu}, "
                    f"then {fmt_ms(after)} of host work after it until the next launch)"
                )
            else:
                parts.append(
                    f"{fmt_ms(cn[Cause.SYNC])} blocked in {_quote(w.name)}{gpu}"
                    + (" (the sync cliff)" if cliff else "")
                )
        else:
            parts.append(f"{fmt_ms(cn[Cause.SYNC])} waiting for the device")
    if cn[Cause.LAUNCH]:
        eps = {int(e) for e in g.episode[rows] if e >= 0}
        calls = [e for e in evidence if e.cause == Cause.LAUNCH and e.event >= 0]
        if calls and not eps and max(e.overlap_ns for e in calls) >= SLOW_LAUNCH_NS:
            slow = max(calls, key=lambda e: e.overlap_ns)
            parts.append(
                f"{fmt_ms(cn[Cause.LAUNCH])} in the launch path, {fmt_ms(slow.overlap_ns)} of it in one launch "
                f"call {_quote(slow.name)} (a first-use cost, not the per-kernel tax)"
            )
        elif eps or (cn[Cause.LAUNCH] >= 0.5 * sum(cn.values()) and not cn[Cause.HOST]):
            parts.append(
                f"{fmt_ms(cn[Cause.LAUNCH])} issuing GPU work as fast as it could"
                + (
                    f" (the launch call {_quote(calls[0].name)} took {fmt_ms(calls[0].overlap_ns)} of it)"
                    if calls
                    else ""
                )
            )
        else:
            # the call is named only where launch is the story (a small launch part
            # of a host or sync gap would point the reader at the kernel it launches)
            named = calls and cn[Cause.LAUNCH] >= max(cn.values())
            parts.append(
                f"{fmt_ms(cn[Cause.LAUNCH])} in the launch path of the next op"
                + (f" ({_quote(calls[0].name)})" if named else "")
            )
    if cn[Cause.UNCLASSIFIED]:
        none_cpu = not any(
            (not ln.is_gpu) and trace.lane_offsets[ln.index + 1] > trace.lane_offsets[ln.index] for ln in trace.lanes
        )
        next_ops = [int(n) for n in g.next_op[rows] if n >= 0]
        what = _quote(trace.name(next_ops[0])) if next_ops else "the next op"
        coll = (
            " (a collective: NCCL/RCCL launch their kernels without a runtime call the profiler links)"
            if next_ops and COLLECTIVE_RE.search(trace.name(next_ops[0]))
            else ""
        )
        parts.append(
            f"{fmt_ms(cn[Cause.UNCLASSIFIED])} with no recorded event"
            + (
                " (the trace has no CPU activity)"
                if none_cpu
                else f"; {what} has no launch call linked to it{coll}, so whether it was queued or launched late is unknown "
                f"(unclassified)"
            )
        )
    if not parts:
        return head + "."
    body = (
        ": " + lead + f"{who} spent " + ", ".join(parts)
        if (cn[Cause.HOST] or cn[Cause.SYNC] or cn[Cause.LAUNCH])
        else ": " + lead + "; ".join(parts)
    )
    tail = ""
    if has.any():
        L = int(np.median(g.lateness_ns[rows][has]))
        edge = g.edge[rows] if g.edge is not None else np.zeros(rows.size, np.int8)
        if (edge == 2).any() and (edge == 1).any():  # step-boundary stretch: idle starts at the trailing gap
            L += int(g.dur_ns[rows][edge == 2].sum())
        if L > 0:
            tail = f"; the next op reached the queue {fmt_ms(L)} after the GPU went idle"
    if cn[Cause.DEPENDENCY]:  # a late op that then waited in the queue
        tail += (
            ". After its launch call returned, "
            + _dependency_phrase(diag, int(rows[0]), cn[Cause.DEPENDENCY], evidence)
            + "; what the CPU did in that time is not the cause"
        )
    return head + body + tail + "."


def _is_wait(trace, ev: int) -> bool:
    """Whether event ``ev`` is itself a blocking wait (not host work after one)."""
    return (
        bool(BLOCKING_SYNC_RE.search(trace.name(ev)))
        or trace.name(ev) in SYNC_OP_NAMES
        or trace.kind[ev] in (int(Kind.SYNC_CALL), int(Kind.SYNC_MARKER))
    )


def _dependency_phrase(diag, r: int, dep_ns: int, evidence: list[Evidence]) -> str:
    """What the queued op of gap ``r`` waited on, in words, with its ns."""
    trace, g = diag.trace, diag.gaps
    kind = (
        WaitKind(int(g.wait_kind[r])) if g.wait_kind is not None and g.wait_kind[r] >= 0 else WaitKind.NOTHING_RECORDED
    )
    if kind == WaitKind.DISPATCH:
        return (
            f"the {fmt_ms(dep_ns)} between two queued ops is at the trace's timestamp resolution: GPU-side "
            f"dispatch, not actionable"
        )
    if kind == WaitKind.STREAM_WAIT:
        w = int(g.wait_event[r])
        ln = trace.lanes[int(trace.lane[w])]
        by = "" if ln.is_gpu else f" (enqueued by {_thread_label(trace, ln.index)})"
        return (
            f"it sat {fmt_ms(dep_ns)} behind the stream wait {_quote(trace.name(w))}{by}, waiting for an event "
            f"recorded on another stream or device"
        )
    if kind == WaitKind.COLLECTIVE:
        nxt, prv = int(g.next_op[r]), int(g.prev_op[r])
        coll = nxt if COLLECTIVE_RE.search(trace.name(nxt)) else prv
        return (
            f"for {fmt_ms(dep_ns)} it waited on the collective {_quote(trace.name(coll))} and its peers "
            f"(other ranks or devices)"
        )
    if kind == WaitKind.GRAPH:
        by = (
            f"launched by {_quote(trace.name(int(g.launch[r])))}"
            if g.launch[r] >= 0
            else "(its launch is not in the trace)"
        )
        return (
            f"it waited {fmt_ms(dep_ns)} on the ordering of the CUDA graph {by} or on graph work the trace does "
            f"not record"
        )
    return (
        f"for {fmt_ms(dep_ns)} it waited on something the trace does not record (an event from another stream "
        f"or device, a host callback, or the GPU's own scheduling)"
    )


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
    """ "0.200 ms inside `decode_step` with no finer event recorded (...)": the
    enclosing step range is named as where the time went, never as the work."""
    step = _step_range(diag, rows)
    if step is not None:
        return f"{fmt_ms(quiet_ns)} inside {_quote(step)} with no finer event recorded (uninstrumented Python or untraced work)"
    return f"{fmt_ms(quiet_ns)} with no recorded events (uninstrumented Python or untraced work)"


def slow_launch(diag, evidence: list[Evidence], rows: np.ndarray) -> bool:
    """Whether a launch-class gap (outside picket fences) is mostly one launch call of
    at least ``SLOW_LAUNCH_NS``: first-use cost, not the per-kernel dispatch tax."""
    top = [e for e in evidence if e.cause == Cause.LAUNCH and e.event >= 0]
    return (
        bool(top)
        and not (diag.gaps.episode[rows] >= 0).any()
        and diag.trace.kind[top[0].event] == int(Kind.LAUNCH)
        and top[0].overlap_ns >= SLOW_LAUNCH_NS
    )


def _issues_gpu_work(trace, ev: int) -> bool:
    """Whether event ``ev`` encloses a launch call on its lane (it issues GPU work)."""
    if ev < 0 or trace.kind[ev] == int(Kind.LAUNCH):
        return False
    sl = trace.lane_slice(int(trace.lane[ev]))
    starts = trace.start_ns[sl]
    s, e = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
    a, b = np.searchsorted(starts, s, side="left"), np.searchsorted(starts, e, side="left")
    return bool((trace.kind[sl][a:b] == int(Kind.LAUNCH)).any())


def _mostly_own_time(diag, item: Evidence) -> bool:
    """Whether a host item of a millisecond or more spends most of its time outside any
    finer event recorded inside it (uninstrumented work inside a recorded range)."""
    trace = diag.trace
    ev = item.event
    if ev < 0 or item.overlap_ns < 1_000_000 or diag._index is None:
        return False
    s, e = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
    idx = diag._index.overlapping(trace, int(trace.lane[ev]), s, e)
    kids = idx[(trace.depth[idx] > trace.depth[ev]) & (trace.start_ns[idx] >= s)]
    if kids.size == 0:
        return True
    us, ue = union_intervals(trace.start_ns[kids], np.minimum(trace.start_ns[kids] + trace.dur_ns[kids], e))
    covered = int(coverage(us, ue, np.array([s]), np.array([e]))[0])
    return covered <= 0.5 * (e - s)


def _enclosing_op(diag, ev: int) -> str | None:
    """Name of the innermost CPU op enclosing event ``ev`` on its lane, or None."""
    trace = diag.trace
    if ev < 0 or diag._index is None:
        return None
    s, e = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
    idx = diag._index.overlapping(trace, int(trace.lane[ev]), s, s + 1)
    m = (
        (trace.kind[idx] == int(Kind.CPU_OP))
        & (trace.start_ns[idx] <= s)
        & (trace.start_ns[idx] + trace.dur_ns[idx] >= e)
        & (idx != ev)
    )
    if not m.any():
        return None
    cand = idx[m]
    return trace.name(int(cand[np.argmax(trace.depth[cand])]))


def queued_occurrence(diag, rows: np.ndarray) -> bool:
    """True when every gap of the occurrence ``rows`` was queued (``Gaps.queued``: its
    next op's launch call had returned before the gap began)."""
    g = diag.gaps
    if g.queued is None:
        return False
    return bool(g.queued[rows].all())


_ALLOC_RE = re.compile(
    r"^(cuda|hip)(Malloc|Free|HostAlloc|MallocHost)|^cuMem(Alloc|Free)|CachingAllocator|empty_cache", re.IGNORECASE
)
_DATALOADER_RE = re.compile(
    r"DataLoader|dataloader|_MultiProcessingDataLoaderIter|_SingleProcessDataLoaderIter|collate"
)


def _multi_rank(trace) -> bool:
    ws = trace.source.world_size
    return ws is not None and ws > 1


def _sync_advice(diag, evidence, name, dur_txt):
    top = [e for e in evidence if e.cause == Cause.SYNC and e.event >= 0 and _is_wait(diag.trace, e.event)]
    inside = _enclosing_op(diag, top[0].event) if top else None
    if inside in ("aten::to", "aten::_to_copy", "aten::copy_"):
        return (
            f"The wait {_quote(top[0].name)} is inside {_quote(inside)}: a copy to or from pageable host memory "
            f"waits for the GPU. Pin the host tensor (pin_memory()) and copy with non_blocking=True, or keep "
            f"the data on the device; issue the copy before the work that needs it.",
            "Do not speed up the kernels around the gap: the copy waits for the GPU to drain, and a faster "
            "kernel only makes that wait start sooner.",
            f"On a new capture of the same steps, the idle at this position ({dur_txt}) and the blocking calls "
            f"inside {_quote(inside)} should be gone.",
        )
    site = _call_site(diag, top[0].event) if top else None
    name = _quote(top[0].name) if top else name
    where = f"{name}" + (f" (called from {_quote(site)})" if site else "") if name else "the host read"
    return (
        f"Remove the blocking wait {where} from the loop: keep the value on the GPU (mask or torch.where instead "
        f"of a Python branch on it), or collect the values and read them once after the loop; time with CUDA "
        f"events instead of synchronizing. Then launch the next work before any host step that must stay.",
        "Do not speed up the kernels around the gap: the GPU is idle because the CPU waited for it to drain "
        "and only then prepared the next launch; a faster kernel only makes that wait start sooner.",
        f"On a new capture of the same steps, the idle at this position ({dur_txt}) and the number of "
        f"blocking calls per step (cudaStreamSynchronize, aten::item) should drop to about zero.",
    )


def _copy_advice(diag, evidence, dur_txt):
    trace = diag.trace
    cp = [e for e in evidence if e.cause == Cause.COPY]
    big = max(cp, key=lambda e: (e.overlap_ns, e.bytes)) if cp else None
    gpu = [e for e in cp if big is not None and trace.lanes[e.lane].is_gpu and 2 * e.overlap_ns >= big.overlap_ns]
    big = max(gpu, key=lambda e: (e.overlap_ns, e.bytes)) if gpu else big
    what = _quote(big.name) if big else "the copy"
    bits = []
    if big is not None and big.bytes >= 0:
        bits.append(_bytes(big.bytes))
    if big is not None and big.pageable:
        bits.append("from pageable host memory")
    detail = f" ({', '.join(bits)})" if bits else ""
    proof = (
        f"Exposed copy time per step (memcpy outside kernels) and the idle at this position ({dur_txt}) "
        f"on a new capture; the copy should vanish or run under a kernel."
    )
    forbidden = "Do not optimise the kernels: the GPU waits for data to move, not for compute."
    ck = int(trace.copy_kind[big.event]) if big is not None and big.event >= 0 and trace.lanes[big.lane].is_gpu else -1
    is_memset = big is not None and big.event >= 0 and trace.kind[big.event] == int(Kind.MEMSET)
    if is_memset or ck == int(CopyKind.D2D):
        kind = "memset" if is_memset else "device-to-device copy"
        return (
            f"Fuse or remove the {kind} {what}{detail}: it is the GPU moving data it already has (a "
            f".contiguous(), clone, dtype cast or zero-fill between kernels); an in-place op, a fused kernel "
            f"or a preallocated buffer avoids it.",
            forbidden,
            proof,
        )
    if ck == int(CopyKind.H2D):
        return (
            f"Make {what}{detail} overlap compute: pinned host memory (pin_memory=True) and "
            f"non_blocking=True, issued a step ahead (prefetch), or keep the data on the device.",
            forbidden,
            proof,
        )
    if big is not None and not trace.lanes[big.lane].is_gpu:
        return (
            f"The thread waited inside the copy call {what}{detail}: a synchronous or pageable copy. Use pinned "
            f"host memory and non_blocking=True so the call returns at once, or keep the data on the device.",
            forbidden,
            proof,
        )
    return (
        f"Keep the data on the device so {what}{detail} is not needed (drop the .cpu()/numpy round trip); "
        f"where a copy must stay, use pinned host memory and non_blocking=True so it overlaps compute.",
        forbidden,
        proof,
    )


def _dependency_advice(diag, rows, dur_txt):
    g = diag.gaps
    r = int(rows[0])
    kind = (
        WaitKind(int(g.wait_kind[r])) if g.wait_kind is not None and g.wait_kind[r] >= 0 else WaitKind.NOTHING_RECORDED
    )
    queued = g.queued is not None and bool(g.queued[r])
    forbidden = (
        "Do not optimise the CPU code before the gap or the kernels next to it: the next op was "
        + ("already queued" if queued else "in the queue for most of the gap, waiting on the GPU side")
        + ", so neither held it back."
    )
    proof = f"The same gap ({dur_txt}) on a new capture, with what it waits on named."
    if kind == WaitKind.DISPATCH:
        return (
            "Nothing to do at this gap: it is at the trace's timestamp resolution between queued ops (GPU-side "
            "dispatch). Work on the larger gaps first.",
            "Do not chase it with launch or host changes: the work was already queued.",
            "None needed; the gap will stay at the timestamp resolution.",
        )
    if kind == WaitKind.STREAM_WAIT:
        w = _quote(diag.trace.name(int(g.wait_event[r])))
        return (
            f"Find the event {w} waits for: the stream or device that records it and what ran there before it "
            f"(a recent torch.profiler names the awaited stream in its cuda_sync records). Record the event "
            f"earlier, split the producing work, or drop a wait that is not needed (wait_stream / "
            f"record_stream).",
            forbidden,
            proof,
        )
    if kind == WaitKind.COLLECTIVE:
        if _multi_rank(diag.trace):
            first = (
                "Look at the other ranks at this step: a collective starts when its slowest peer arrives. "
                "Capture every rank in the same window and compare when each launched this collective; fix the "
                "late rank (its data loading, host work or imbalance), not this one."
            )
        else:
            first = (
                "The collective waited for its peers: capture the other devices or ranks of the job in the same "
                "window to see which arrived last, and overlap communication with compute (bucketing, "
                "async collectives)."
            )
        return (first, forbidden, proof)
    if kind == WaitKind.GRAPH:
        return (
            "Trace the graph's own nodes (Nsight Systems --cuda-graph-trace=node, or a torch.profiler that records "
            "graph kernels) to see the order inside the graph and what this node waited for; a wait captured in "
            "the graph (an event, a host node) shows there.",
            forbidden,
            proof,
        )
    return (
        "Find what the queued op waited for: capture with a recent torch.profiler (its cuda_sync records name the "
        "stream an event wait is on); check cross-stream waits (wait_stream, wait_event), copies or kernels on "
        "other devices, and host callbacks."
        + (" Capture every rank in the same window." if _multi_rank(diag.trace) else ""),
        forbidden,
        proof,
    )


def _instrument_hint(trace) -> str:
    """How to see finer CPU work in this kind of trace."""
    if str(trace.source.format).startswith("nsys"):
        return "add NVTX ranges around the suspects (torch.cuda.nvtx.range, nvtx.annotate) or profile with nsys --sample=cpu"
    return "capture with with_stack=True or wrap the suspects in torch.profiler.record_function ranges"


def _host_advice(diag, evidence, rows, name, top, dur_txt):
    trace = diag.trace
    quiet_ns = sum(e.overlap_ns for e in evidence if e.cause == Cause.HOST and e.event < 0)
    by_name: dict[str, int] = {}
    for e in evidence:
        if e.cause == Cause.HOST and e.event >= 0:
            by_name[e.name] = by_name.get(e.name, 0) + e.overlap_ns
    ranked = sorted(by_name.items(), key=lambda kv: -kv[1])
    lead_name, lead_ns = ranked[0] if ranked else (None, 0)
    hint = _instrument_hint(trace)
    # the advice follows what holds most of the host time: an unrecorded stretch, or the
    # largest named work
    if quiet_ns > lead_ns:
        first = (
            f"Find out what the CPU does for the {_quiet_txt(diag, rows, quiet_ns)}: {hint}, then take that work "
            f"off the critical path (after the step, every N steps, or another thread) and launch the next GPU "
            f"work before it."
        )
    elif lead_name is not None and _ALLOC_RE.search(lead_name):
        first = (
            f"The thread is allocating or freeing device memory ({_quote(lead_name)}, {fmt_ms(lead_ns)}): let the "
            "caching allocator keep its blocks (no torch.cuda.empty_cache() in the loop, stable tensor shapes, "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True) or preallocate the buffers once."
        )
    elif lead_name is not None and _DATALOADER_RE.search(lead_name):
        first = (
            f"The step waits for the next batch in {_quote(lead_name)}: load in parallel (DataLoader "
            f"num_workers > 0, persistent_workers=True), pin_memory=True, and prefetch (prefetch_factor) so a "
            f"batch is ready when the GPU finishes."
        )
    elif top and _mostly_own_time(diag, top[0]):
        first = (
            f"Find out what the CPU does inside {_quote(lead_name or top[0].name)} ({fmt_ms(lead_ns)} of the gap, "
            f"almost none of it in a finer recorded event): {hint}; then cut that work or move it off the "
            f"critical path."
        )
    elif top and _issues_gpu_work(trace, top[0].event):
        first = (
            f"{name} issues GPU work itself (it encloses launch calls): the CPU takes longer to issue the "
            f"work than the GPU to run it. Cut the CPU cost per kernel: torch.compile (mode="
            f"'reduce-overhead' adds CUDA graphs), fewer and larger ops (fuse, batch more per step), and "
            f"keep Python work such as logging and checks out of the step."
        )
    else:
        what = _quote(lead_name) if lead_name else "the CPU work between launches"
        first = (
            f"Take {what} off the critical path: run it after the step, every N steps, or in another "
            f"thread/process, and launch the next GPU work before doing it so the two overlap."
        )
    return (
        first,
        "Do not reach for cuBLAS settings or a faster kernel: the GPU has nothing queued while the CPU "
        "is busy, so faster kernels only widen this gap's share of the step.",
        f"Idle at this position ({dur_txt}) and step time{' and tokens/s' if is_decode_trace(diag) else ''} on a new "
        f"capture with the same ranges named.",
    )


def advice(diag, cause: Cause, evidence: list[Evidence], rows: np.ndarray, dur_txt: str) -> tuple[str, str, str]:
    """(first experiment, forbidden next step, proof) for the class ``cause`` of the
    occurrence ``rows``, specialised by its evidence (design: "The card")."""
    trace = diag.trace
    p = diag.params
    g = diag.gaps
    top = [e for e in evidence if e.cause == cause and e.event >= 0]
    name = _quote(top[0].name) if top else None
    if (
        g.one_time is not None
        and bool(g.one_time[rows].all())
        and not (cause == Cause.LAUNCH and slow_launch(diag, evidence, rows))
    ):
        return (
            "This is a one-time cost (warm-up: allocator growth, module or lazy loading, handle creation, a "
            "first-use launch): warm up before profiling (run a few steps first; CUDA_MODULE_LOADING=EAGER "
            "loads modules at start) and capture a steady-state window.",
            "Do not optimise the steady-state loop for it: it happens once and is not in later steps.",
            f"A capture of warmed-up steps: this idle ({dur_txt}) should be gone.",
        )
    if cause == Cause.DEPENDENCY:
        return _dependency_advice(diag, rows, dur_txt)
    if cause == Cause.SYNC:
        return _sync_advice(diag, evidence, name, dur_txt)
    if cause == Cause.COPY:
        return _copy_advice(diag, evidence, dur_txt)
    if cause == Cause.LAUNCH and slow_launch(diag, evidence, rows):
        return (
            f"Find why the launch call {name} took {fmt_ms(top[0].overlap_ns)}: a single call that long is "
            f"first-use cost (CUDA module loading, JIT compilation, autotuning, memory allocation), not the "
            f"per-kernel tax. Warm up before profiling (run a few steps first; CUDA_MODULE_LOADING=EAGER loads "
            f"modules at start) and compare a steady-state step.",
            "Do not capture CUDA graphs or fuse ops for this gap: one slow call, not many small launches, "
            "left the GPU idle.",
            f"The same position on a capture of warmed-up steps: the idle ({dur_txt}) should be gone.",
        )
    if cause == Cause.LAUNCH and top and GRAPH_LAUNCH_RE.search(top[0].name):
        return (
            f"The step already runs as a CUDA graph: what is left is the graph launch {name} itself and the "
            f"host time around it, a fixed cost per step. Amortise it over more work per launch: a larger batch, "
            f"several decode steps per graph, or speculative decoding; keep host work out of the window between "
            f"steps.",
            "Do not capture the step in a CUDA graph again or tune kernels: the launch of one graph per step is "
            "what remains, not many small launches or slow kernels.",
            f"Idle at this position ({dur_txt}) against the work per launch: it should stay about constant "
            f"while the batch grows.",
        )
    if cause == Cause.LAUNCH:
        eps = {int(e) for e in g.episode[rows] if e >= 0}
        fence = ""
        if eps:
            ep = diag.episodes[min(eps)]
            launch_txt = f", launch calls of median {fmt_ms(ep.median_launch_ns)}" if ep.median_launch_ns >= 0 else ""
            fence = (
                f" ({ep.kernel_count} short kernels of median {fmt_ms(ep.median_kernel_ns)}{launch_txt}, "
                f"{fmt_ms(ep.idle_ns)} idle between them)"
            )
        return (
            f"Issue the work with fewer launches{fence}: capture the step in a CUDA graph (torch.compile with "
            f"mode='reduce-overhead', or torch.cuda.graphs), fuse the small ops, or batch more requests per step.",
            "Do not write a faster kernel: the kernels already finish before the next launch arrives.",
            f"GPU busy share and launch calls per step before and after; gaps in this stretch should fall "
            f"below {fmt_ms(p.min_gap_ns)} and the idle at this position ({dur_txt}) shrink.",
        )
    if cause == Cause.HOST:
        return _host_advice(diag, evidence, rows, name, top, dur_txt)
    has_cpu = any(
        (not ln.is_gpu) and trace.lane_offsets[ln.index + 1] > trace.lane_offsets[ln.index] for ln in trace.lanes
    )
    nxt = [int(n) for n in g.next_op[rows] if n >= 0]
    if has_cpu and nxt and COLLECTIVE_RE.search(trace.name(nxt[0])):
        return (
            (
                f"The next op {_quote(trace.name(nxt[0]))} is a collective with no linked launch: find when each "
                f"rank reached it (capture every rank in the same window) and what this rank's main thread did "
                f"before issuing it; a rank that arrives last makes the others wait."
            )
            if _multi_rank(trace)
            else (
                f"The next op {_quote(trace.name(nxt[0]))} is a collective with no linked launch: find what the "
                f"process did before issuing it (the thread in the collective's Python range) and whether its "
                f"peers were late."
            ),
            "Do not optimise the kernels next to the gap: a collective waits for its peers, not for compute.",
            f"The same gap ({dur_txt}) on a capture of every rank.",
        )
    if has_cpu:
        return (
            "The next op has no launch call linked to it, so the trace cannot say whether it was queued or "
            "launched late: capture with a torch.profiler that records the runtime calls and their correlation "
            "(activities CPU and CUDA), then read the launching thread at this gap.",
            "Do not pick a kernel to optimise from the GPU lanes alone.",
            f"The same gap ({dur_txt}) classified on the new capture.",
        )
    return (
        "Capture again with CPU activity and its launch links recorded (torch.profiler activities CPU and CUDA, "
        "with_stack=True) so the launching thread and its calls are visible.",
        "Do not pick a kernel to optimise from the GPU lanes alone.",
        f"The same gap ({dur_txt}) classified on the new capture.",
    )


def trust_note(diag, rows: np.ndarray, said_unlinked: bool = False) -> str:
    """A sentence on why the idle of ``rows`` may be unreliable (``Gaps.trust``), or "";
    ``said_unlinked``: the sentence already says the next op has no linked launch."""
    g = diag.gaps
    if g.trust is None:
        return ""
    bits = int(np.bitwise_or.reduce(g.trust[rows])) if rows.size else 0
    out = []
    if bits & Trust.GRAPH_UNRECORDED:
        out.append(
            "a CUDA graph launched shortly before has no recorded kernels, so its nodes may have run here "
            "unseen and this idle may not be idle"
        )
    if bits & Trust.UNLINKED and not said_unlinked:
        out.append("the next op has no launch call linked to it, so whether it was queued or launched late is unknown")
    return ("Trust: " + "; ".join(out) + ".") if out else ""


def rank_row(class_ns: np.ndarray) -> tuple[Cause, float, Cause | None, float]:
    """(primary, its share, secondary or None, its share) of one class_ns row; shares
    of the row's total, the same rule as the gaps' columns (``classify.rank_classes``)."""
    cn = np.asarray(class_ns, dtype=np.int64).reshape(1, -1)
    p, ps, s, ss = rank_classes(cn, cn.sum(axis=1))
    return Cause(int(p[0])), float(ps[0]), (Cause(int(s[0])) if s[0] >= 0 else None), float(ss[0])


def class_mix(class_ns: np.ndarray) -> str:
    """ "host (77%), then sync (22%)" for a class_ns row."""
    p, ps, s, ss = rank_row(class_ns)
    return f"{p.label} ({ps:.0%})" + (f", then {s.label} ({ss:.0%})" if s is not None else "")


def is_decode_trace(diag) -> bool:
    """True when a step makes one token (``gapscope.analysis.budget.is_decode``)."""
    b = getattr(diag, "budget", None)
    return bool(getattr(b, "decode", False))
