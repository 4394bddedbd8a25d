"""The wording of a card (``gapscope.analysis.card``): the smell per class, the "why"
sentence (its parts follow the classification's time partition of the gap, so they add
up to it), the trust note, and the small wording helpers the advice
(``gapscope.analysis.card.rules``) shares. Durations are quoted from int64 ns, sizes
from bytes. Names from the trace are quoted literally between backticks.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import numpy as np

from gapscope.analysis.busy import coverage, union_intervals
from gapscope.analysis.card.copies import SHORT_COPY_NS, UNKNOWN_DIRECTION, CopyLead, copy_lead
from gapscope.analysis.card.program import is_mtia, is_rocm, program_kind
from gapscope.analysis.causes import CAUSES
from gapscope.analysis.classify import (
    SLOW_LAUNCH_NS,
    launched_before,
    launched_before_window,
    operator_sample,
    rank_classes,
)
from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.evidence import enclosing_step_range, step_ranges_overlapping
from gapscope.analysis.evidence_kinds import (
    BLOCKING_SYNC_RE,
    COLLECTIVE_RE,
    SYNC_OP_NAMES,
    blocking_copy_calls,
    earlier_runs,
    ids_matching,
    slow_launch_calls,
)
from gapscope.analysis.framework_work import graph_first_node
from gapscope.analysis.types import Cause, Evidence, Trust, WaitKind
from gapscope.analysis.waits import device_timed_wait_ids, searchable, wait_name_ids
from gapscope.parsers.kinds import copy_kind_of
from gapscope.parsers.model import CopyKind, Kind
from gapscope.units import fmt_bytes, fmt_dur, fmt_offset

#: The smell per class, from the table of causes.
SMELLS = {c: info.smell for c, info in CAUSES.items()}

#: The smell of a queued (dependency) gap by what it waited on.
DEPENDENCY_SMELLS = {
    WaitKind.NOTHING_RECORDED: "queued, waiting on the GPU side",
    WaitKind.STREAM_WAIT: "cross-stream wait",
    WaitKind.COLLECTIVE: "queued next to a collective",
    WaitKind.GRAPH: "graph ordering",
    WaitKind.DISPATCH: "dispatch jitter (not actionable)",
}


#: The smell of a sync gap whose blocking wait began after the GPU went idle (rule 4
#: of docs/definitions.md "Cause classes": no queue was drained, so no cliff).
BLOCKING_WAIT_SMELL = "blocking wait in the gap"


def graph_word(trace) -> str:
    """What a captured step is called on the trace's device: a CUDA graph, a HIP graph
    (ROCm; ``torch.cuda.graphs`` captures those there), or a graph (MTIA)."""
    return "graph" if is_mtia(trace) else "HIP graph" if is_rocm(trace) else "CUDA graph"


def in_sync_cliff(gaps, rows) -> bool:
    """Whether some gap of ``rows`` has a sync cliff: a blocking wait that began before
    the GPU went idle drained the queue (``sync_from_ns`` before ``launch_from_ns``;
    rule 3 of docs/definitions.md "Cause classes")."""
    if gaps.sync_from_ns is None:
        return False
    return bool((gaps.sync_from_ns[rows] < gaps.launch_from_ns[rows]).any())


def _same_calls(trace, event: int) -> np.ndarray:
    """int64 indices of the events of ``event``'s lane and name; of a blocking copy call,
    the blocking ones alone (the same name issues pinned copies that return at once)."""
    sl = trace.lane_slice(int(trace.lane[event]))
    same = sl.start + np.flatnonzero(trace.name_id[sl] == trace.name_id[event])
    blocking = blocking_copy_calls(trace)
    return same[blocking[same]] if blocking[event] else same


def _same_calls_ns(trace, event: int, spans: list[tuple[int, int]]) -> int:
    """ns inside ``spans`` (``[start, end)`` pairs) covered by the events of ``event``'s
    lane and name: every such call, not only those the evidence list names (it stops at
    its limit: 9 of a gap's 16 ``aten::item`` round trips on the H200 sync-cliff trace)."""
    same = _same_calls(trace, event)
    us, ue = union_intervals(trace.start_ns[same], trace.start_ns[same] + trace.dur_ns[same])
    return int(coverage(us, ue, np.array([a for a, _ in spans]), np.array([b for _, b in spans])).sum())


def _under_copies_ns(diag: Diagnosis, rows: np.ndarray, event: int) -> int:
    """ns of the calls of ``event``'s lane and name under the copy-class GPU copies of the
    gaps ``rows``: that time is the copy's, not the wait's (a blocking copy call waits
    through its own copy; copy is GPU copy time only)."""
    trace = diag.trace
    same = _same_calls(trace, event)
    us, ue = union_intervals(trace.start_ns[same], trace.start_ns[same] + trace.dur_ns[same])
    cps = [(int(r), e.event) for r in rows.tolist() for e in diag.gpu_copies(int(r)) if e.cause == Cause.COPY]
    if not cps or not us.size:
        return 0
    g = diag.gaps
    ev = np.array([e for _, e in cps], dtype=np.int64)
    rr = np.array([r for r, _ in cps], dtype=np.int64)
    cs, ce = union_intervals(
        np.maximum(trace.start_ns[ev], g.start_ns[rr]), np.minimum(trace.start_ns[ev] + trace.dur_ns[ev], g.end_ns[rr])
    )
    return int(coverage(us, ue, cs, ce).sum())


def quote_name(name: str) -> str:
    return "`" + name.replace("`", "'") + "`"


#: Evidence events checked for nesting in one another (the sentence names a few).
_NESTING_CHECK_MAX = 256


def _containers(trace, evidence: list[Evidence]) -> dict[int, tuple[str, bool, int]]:
    """{event: (name of the outermost evidence event on its lane that encloses it,
    whether it is directly inside that one (one level deeper in the trace), that
    event)}, so the sentence does not add a call to the op running inside it
    (``aten::div`` inside ``DataLoader.__next__`` is not extra time), and names inside
    an op only the calls directly in it (a deeper call is part of one of those)."""
    evs = [e for e in evidence if e.event >= 0][:_NESTING_CHECK_MAX]
    out: dict[int, tuple[str, bool, int]] = {}
    for e in evs:
        s, d = int(trace.start_ns[e.event]), int(trace.dur_ns[e.event])
        outer = None
        for o in evs:
            if o.event == e.event or o.lane != e.lane:
                continue
            os_, od = int(trace.start_ns[o.event]), int(trace.dur_ns[o.event])
            # nested by time: the trace's depths count events open at a start, which
            # partial overlaps inflate (xdit's `call` at depth 29 inside a range at 30)
            same = os_ == s and od == d
            if os_ <= s and s + d <= os_ + od and (not same or trace.depth[o.event] < trace.depth[e.event]):
                if outer is None or (int(trace.start_ns[o.event]), -od) < (
                    int(trace.start_ns[outer.event]),
                    -int(trace.dur_ns[outer.event]),
                ):
                    outer = o
        if outer is not None:
            direct = int(trace.depth[e.event]) == int(trace.depth[outer.event]) + 1
            out[e.event] = (outer.name, direct, outer.event)
    return out


def _direct_children(
    trace, parents: set[int], windows: list[tuple[int, int]], cause: np.ndarray
) -> dict[str, tuple[int, int, bool]]:
    """{name: (how many, ns in the windows, whether host work)} of the events lying
    directly inside (one level deeper than) one of the events ``parents`` and
    overlapping one of the ``windows`` (ns); the ns are raw overlaps (calls inside them
    not taken out). ``cause``: each event's own class (``EvidenceIndex.cause``)."""
    got: dict[int, int] = {}
    for p in parents:
        sl = trace.lane_slice(int(trace.lane[p]))
        st = trace.start_ns[sl]
        ps, pe = int(trace.start_ns[p]), int(trace.start_ns[p] + trace.dur_ns[p])
        lo, hi = sl.start + int(np.searchsorted(st, ps, "left")), sl.start + int(np.searchsorted(st, pe, "left"))
        depth = int(trace.depth[p]) + 1
        for k in range(lo, hi):
            if k == p or int(trace.depth[k]) != depth:
                continue
            ks, ke = int(trace.start_ns[k]), int(trace.start_ns[k] + trace.dur_ns[k])
            ov = sum(max(0, min(ke, b) - max(ks, a)) for a, b in windows)
            if ke <= pe and ov > 0:
                got[k] = ov
    out: dict[str, tuple[int, int, bool]] = {}
    for k, ov in got.items():
        n, t, h = out.get(trace.name(k), (0, 0, False))
        out[trace.name(k)] = (n + 1, t + ov, h or int(cause[k]) == int(Cause.HOST))
    return out


def _span_events(trace, p: int) -> int:
    """How many events of ``p``'s lane start inside ``p``."""
    st = trace.start_ns[trace.lane_slice(int(trace.lane[p]))]
    ps = int(trace.start_ns[p])
    return int(np.searchsorted(st, ps + int(trace.dur_ns[p]), "left") - np.searchsorted(st, ps, "left"))


#: Most events ``_direct_children`` walks per op (a sentence names two calls; a range
#: holding 100k calls is not walked for them).
_CHILD_WALK_MAX = 20_000


def thread_label(trace, lane: int) -> str:
    """ "thread `main`" / "`thread 783658 (python3.8)`" for a CPU lane."""
    if lane < 0:
        return "the launching thread"
    ln = trace.lanes[lane]
    label = ln.thread_name or ln.tid
    return quote_name(label) if str(label).lower().startswith("thread") else f"thread {quote_name(label)}"


def _within(
    diag: Diagnosis,
    name: str,
    ns: int,
    ops: set[int],
    inner: dict[str, int],
    counted: dict[tuple[str, str], int],
    windows: list[tuple[int, int]],
) -> list[tuple[str, int]]:
    """The largest calls directly inside the item ``name`` (its events ``ops``), not of
    its own name, adding to at most its ``ns``: at most two, each named only when the
    evidence kept all its calls there, and none when a larger call directly inside is
    not named (left out of the evidence as a container, or not all its calls kept)."""
    trace = diag.trace
    within: list[tuple[str, int]] = []
    room = ns
    walk = sum(_span_events(trace, p) for p in ops)
    children = _direct_children(trace, ops, windows, diag.evidence_index().cause) if walk <= _CHILD_WALK_MAX else {}
    for k, v in sorted(inner.items(), key=lambda kv: -kv[1]):
        if k == name or v > room or len(within) >= 2:
            continue
        # a sum of only the calls the evidence list kept would be a part passed off
        # as the whole: such a call is not named
        if children.get(k, (0, 0, True))[0] != counted[(name, k)]:
            continue
        within.append((k, v))
        room -= v
    if within and any(
        is_host and m != name and m not in dict(within) and raw > min(v for _, v in within)
        for m, (_, raw, is_host) in children.items()
    ):
        return []
    return within


def _items(
    diag: Diagnosis, rows: np.ndarray, evidence: list[Evidence], cause: Cause, limit: int = 2, cap_ns: int | None = None
) -> list[str]:
    """The ``limit`` largest items of ``cause`` as "0.060 ms in `name`" (uninstrumented
    time named as such), largest first; an event nested in a listed one is not added to
    it but named inside it ("(of which 30.0 µs in `aten::cat`)")."""
    mine = [e for e in evidence if e.cause == cause]
    trace = diag.trace
    inside = _containers(trace, mine)
    agg: dict[tuple[int, str], int] = {}
    inner: dict[str, dict[str, int]] = {}
    counted: dict[tuple[str, str], int] = {}  # (op, call) -> calls of the evidence
    parents: dict[str, set[int]] = {}
    for e in mine:
        if e.event in inside:
            outer, direct, outer_event = inside[e.event]
            if direct:  # a call inside another named one is in that one's time already
                d = inner.setdefault(outer, {})
                d[e.name] = d.get(e.name, 0) + e.overlap_ns
                counted[(outer, e.name)] = counted.get((outer, e.name), 0) + 1
                parents.setdefault(outer, set()).add(outer_event)
            continue
        key = (0 if e.event >= 0 else 1, e.name)
        agg[key] = agg.get(key, 0) + e.overlap_ns
    out = []
    listed = 0
    windows = [(int(diag.gaps.start_ns[r]), int(diag.gaps.end_ns[r])) for r in rows]
    part = _class_windows(diag, rows, cause)
    ranked = sorted(agg.items(), key=lambda kv: -kv[1])
    for (quiet, name), ns in ranked[:limit]:
        if cap_ns is not None:
            ns = min(ns, cap_ns - listed)  # an op's time under launch calls or copies is theirs
            if ns <= 0:
                break
        listed += ns
        if quiet:
            out.append(quiet_text(diag, rows, ns))
            continue
        within = _within(diag, name, ns, parents.get(name, set()), inner.get(name, {}), counted, windows)
        of_which = (
            (" (of which " + ", ".join(f"{fmt_dur(v)} in {quote_name(k)}" for k, v in within) + ")") if within else ""
        )
        # a name's sum over only the calls the evidence list kept (it is cut to its
        # largest entries, and leaves out ranges that contain listed ones) is said to be
        # of those calls, not passed off as the whole
        kept, calls = _calls_listed(trace, mine, name, part, ns)
        if kept < calls:
            out.append(f"{fmt_dur(ns)} in {kept:,} of the {calls:,} calls of {quote_name(name)}{of_which}")
        else:
            out.append(f"{fmt_dur(ns)} in {quote_name(name)}{of_which}")
    if cap_ns is not None and out and cap_ns - listed >= max(1_000, cap_ns // 1000):
        out.append(f"{fmt_dur(cap_ns - listed)} in other work")  # so the items add up to the part
    return out


#: Host time is told by the frame holding it when no one name of the evidence holds
#: this share of it, and that frame (the narrowest host event on the thread that does
#: not span the whole gap) holds at least this share.
HOT_FRAME_MIN_SHARE = 0.5
#: Inside that frame, the calls of one name holding this share of its time name the
#: work better ("of it in 5 calls of ...").
HOT_INNER_MIN_SHARE = 0.8
#: Most events of the thread a frame search looks at per gap (a bound on the work).
_HOT_FRAME_EVENTS_MAX = 200_000


class StepWait(NamedTuple):
    """The blocking waits of one name in a step on the occurrence's thread
    (``card.facts.step_waits``): the first such wait (event index), the name of the
    innermost user range around it (``timing``; "" for none), how many there are and
    their own time in all (ns), and whether one of them lies in the occurrence's gaps."""

    event: int
    where: str
    calls: int
    ns: int
    in_gap: bool


def step_wait_label(trace, w: StepWait) -> str:
    """```cudaDeviceSynchronize` in `timing``: a wait's name and its user range."""
    return quote_name(trace.name(w.event)) + (f" in {quote_name(w.where)}" if w.where else "")


def step_wait_phrase(trace, w: StepWait, in_step: bool = True) -> str:
    """```aten::item` 3 times (0.110 ms in all; in this gap)``: one name's waits in a
    step (``in_step``; else in the occurrence, which needs no "in this gap")."""
    times = f" {w.calls} times" if w.calls > 1 else ""
    total = f"{fmt_dur(w.ns)} in all" if w.calls > 1 else fmt_dur(w.ns)
    here = "; in this gap" if w.in_gap and in_step else ""
    return f"{step_wait_label(trace, w)}{times} ({total}{here})"


#: At most this many wait names of a step are listed (the longest, in step order).
STEP_WAITS_LISTED = 5


def listed_step_waits(waits: tuple[StepWait, ...]) -> tuple[StepWait, ...]:
    """The ``STEP_WAITS_LISTED`` longest of ``waits`` (by their time in all), in step order."""
    keep = sorted(range(len(waits)), key=lambda k: -waits[k].ns)[:STEP_WAITS_LISTED]
    return tuple(waits[k] for k in sorted(keep))


def step_waits_list(trace, waits: tuple[StepWait, ...], in_step: bool) -> str:
    """The listed waits (``listed_step_waits``), each with its time, and how many more
    there are with their time in all."""
    shown = listed_step_waits(waits)
    out = ", ".join(step_wait_phrase(trace, w, in_step) for w in shown)
    rest = [w for w in waits if w not in shown]
    if rest:
        n = sum(w.calls for w in rest)
        out += f", and {n} more ({fmt_dur(sum(w.ns for w in rest))} in all)"
    return out


def step_waits_sentence(trace, waits: tuple[StepWait, ...], in_step: bool) -> str:
    """The sentence that names every blocking wait of the step (issue 43: a second
    ``cudaDeviceSynchronize`` in a ``timing`` range was folded into the first), or ""
    when the step holds one wait name only."""
    if len(waits) < 2:
        return ""
    n = sum(w.calls for w in waits)
    where = "this step" if in_step else "this gap"
    return f"In {where} the thread blocked on the device {n} times: " + step_waits_list(trace, waits, in_step) + "."


class HotFrame(NamedTuple):
    """The work holding most of an occurrence's host time (``hot_frame``): ``calls``
    calls named ``name`` (outermost ones: recursive calls inside them are not counted
    again), ``event`` the largest, with ``ns`` of host time in the gaps; ``inner``: the
    name of the calls inside them holding ``inner_ns`` of that time in ``inner_calls``
    calls, or None."""

    event: int
    name: str
    calls: int
    ns: int
    inner: str | None
    inner_calls: int
    inner_ns: int


def _outermost(st: np.ndarray, en: np.ndarray) -> int:
    """How many of the intervals [st, en) lie inside no earlier one of them."""
    order = np.argsort(st, kind="stable")
    e_sorted = en[order]
    prev = np.maximum.accumulate(np.concatenate(([np.iinfo(np.int64).min], e_sorted[:-1])))
    return int((prev < e_sorted).sum())


def _name_groups(
    trace, idx: np.ndarray, st: np.ndarray, en: np.ndarray, m: np.ndarray, rough_ns: np.ndarray, windows, min_ns: float
) -> list[tuple[int, int, int, np.ndarray, int]]:
    """[(ns in the ``windows``, lowest depth, name id, members, ns of their calls in
    all)] of the names of the
    events ``m`` (positions in ``idx``) whose calls hold at least ``min_ns`` of the
    windows together (their union, so nested calls of a name count once);
    ``rough_ns``: each event's own ns there, an upper bound that skips most names."""
    if m.size == 0:
        return []
    nid = trace.name_id[idx[m]]
    upper = np.bincount(nid, weights=rough_ns[m])
    out = []
    for name_id in np.flatnonzero(upper >= min_ns).tolist():
        mm = m[nid == name_id]
        us, ue = union_intervals(st[mm], en[mm])
        got = sum(int(coverage(us, ue, np.array([a]), np.array([b]))[0]) for a, b in windows)
        if got >= min_ns:
            out.append((got, int(trace.depth[idx[mm]].min()), int(name_id), mm, int((ue - us).sum())))
    return out


def _host_by_name(evidence: list[Evidence]) -> dict[str, int]:
    """Host ns of the evidence per event name."""
    by_name: dict[str, int] = {}
    for e in evidence:
        if e.cause == Cause.HOST and e.event >= 0:
            by_name[e.name] = by_name.get(e.name, 0) + e.overlap_ns
    return by_name


def _one_lane(thread_lane: np.ndarray, rows: np.ndarray) -> int:
    """The launching thread of every gap of ``rows``, or -1 when they differ or none."""
    lane = int(thread_lane[rows[0]])
    return lane if lane >= 0 and all(int(thread_lane[r]) == lane for r in rows) else -1


def hot_frame(diag: Diagnosis, rows: np.ndarray, evidence: list[Evidence], host_ns: int) -> HotFrame | None:
    """Where the host time of the occurrence ``rows`` lies when the evidence, which
    lists the finest events and leaves out the ranges around them
    (``evidence.CONTAINER_MIN_SHARE``), breaks it into fragments: when the two largest
    names of the host evidence (those the sentence names) hold under
    ``HOT_FRAME_MIN_SHARE`` of ``host_ns`` together, the calls of the one name on the
    launching thread that hold that share of it, counted in the host part of the gaps
    (``_class_windows``) less the copy, sync and launch calls and the GPU's copies, and
    that lie in that part (``HOT_INNER_MIN_SHARE`` of their time): the widest such, if
    the evidence does not list it already (a call around the gap or running on past
    it, a step or the pipeline's ``__call__``, is context, not the gap's own work); then
    the calls of one name inside those holding ``HOT_INNER_MIN_SHARE`` of their time
    (the narrowest such). tracelens/xdit #0: 14.9 ms of host work, its two largest
    names 0.60 ms; the frame is `pipeline_utils.py(1135): _execution_device` (13.1 ms),
    12.5 ms of it in 5 calls of
    `group_offloading.py(916): _get_top_level_group_offload_hook`. None otherwise."""
    trace, g = diag.trace, diag.gaps
    if host_ns <= 0 or diag._index is None or g.thread_lane is None:
        return None
    by_name = _host_by_name(evidence)
    if sum(sorted(by_name.values())[-2:]) >= HOT_FRAME_MIN_SHARE * host_ns:
        return None  # the two items the sentence names hold the time already
    lane = _one_lane(g.thread_lane, rows)
    if lane < 0:
        return None
    index = diag._index
    windows = [(a, b) for a, b in _class_windows(diag, rows, Cause.HOST) if b > a]
    spans = [(int(g.start_ns[r]), int(g.end_ns[r])) for r in rows]
    idx = np.unique(np.concatenate([index.overlapping(trace, lane, a, b) for a, b in windows] or [_NONE]))
    if idx.size == 0 or idx.size > _HOT_FRAME_EVENTS_MAX:
        return None
    st, en = trace.start_ns[idx], index.end[idx]
    host = index.cause[idx] == int(Cause.HOST)
    calls = (index.cause[idx] != int(Cause.HOST)) & (index.cause[idx] >= 0)
    # nor is the GPU's copy time in the gap (the copy part of the sentence holds it)
    gpu = np.array([e.event for e in evidence if e.event >= 0 and trace.lanes[e.lane].is_gpu], dtype=np.int64)
    xs, xe = union_intervals(
        np.concatenate((st[calls], trace.start_ns[gpu])), np.concatenate((en[calls], index.end[gpu]))
    )
    ns = np.zeros(idx.size, dtype=np.int64)
    for a, b in windows:
        lo, hi = np.clip(st, a, b), np.clip(en, a, b)
        ns += (hi - lo) - (coverage(xs, xe, lo, hi) if xs.size else 0)
    whole = np.zeros(idx.size, dtype=bool)
    for a, b in spans:
        whole |= (st <= a) & (en >= b)
    groups = _name_groups(trace, idx, st, en, np.flatnonzero(host & ~whole), ns, windows, HOT_FRAME_MIN_SHARE * host_ns)
    if not groups:
        return None
    # the widest work of the gap itself: calls lying (HOT_INNER_MIN_SHARE) in its host part
    own = [x for x in groups if x[0] >= HOT_INNER_MIN_SHARE * x[4]]
    if not own:
        return None
    got, _, name_id, mm, _ = max(own, key=lambda x: (x[0], -x[1]))
    # the copy, sync and launch calls inside them are not host time
    us, ue = union_intervals(st[mm], en[mm])
    inside_calls = (
        int(sum(coverage(xs, xe, np.clip(us, a, b), np.clip(ue, a, b)).sum() for a, b in windows)) if xs.size else 0
    )
    frame_ns = min(max(got - inside_calls, 0), host_ns)
    if frame_ns < HOT_FRAME_MIN_SHARE * host_ns:
        return None
    if trace.names[name_id] in by_name:
        return None  # the sentence names that work already
    ev = int(idx[mm[int(np.argmax(ns[mm]))]])
    # the calls of one name inside them
    k = np.searchsorted(us, st, side="right") - 1
    within = host & (k >= 0) & (en <= ue[np.maximum(k, 0)]) & (trace.name_id[idx] != name_id)
    inner = _name_groups(trace, idx, st, en, np.flatnonzero(within), ns, windows, HOT_INNER_MIN_SHARE * frame_ns)
    hot = HotFrame(ev, trace.names[name_id], _outermost(st[mm], en[mm]), frame_ns, None, 0, 0)
    if not inner:
        return hot
    i_ns, _, i_id, im, _ = min(inner, key=lambda x: (x[0], -x[1]))
    return hot._replace(inner=trace.names[i_id], inner_calls=_outermost(st[im], en[im]), inner_ns=min(i_ns, frame_ns))


def _calls_of(n: int) -> str:
    return "one call" if n == 1 else f"{n:,} calls"


def hot_inner_text(hot: HotFrame) -> str:
    """ ", 12.530 ms of it in 5 calls of `g`" for the calls inside ``hot``, or ""."""
    if hot.inner is None:
        return ""
    return f", {fmt_dur(hot.inner_ns)} of it in {_calls_of(hot.inner_calls)} of {quote_name(hot.inner)}"


def hot_frame_text(hot: HotFrame) -> str:
    """ "13.116 ms in `f`, 12.530 ms of it in 5 calls of `g`" for ``hot_frame``'s
    result ("in 2 calls of `f`" when the frame's name has several)."""
    calls = "" if hot.calls == 1 else f"{hot.calls:,} calls of "
    return f"{fmt_dur(hot.ns)} in {calls}{quote_name(hot.name)}{hot_inner_text(hot)}"


_NONE = np.zeros(0, dtype=np.int64)


def _class_windows(diag: Diagnosis, rows: np.ndarray, cause: Cause) -> list[tuple[int, int]]:
    """The parts of the gaps ``rows`` (ns) the evidence of ``cause`` comes from: host
    work before the sync cliff, sync up to the launch path, else the whole gap
    (``evidence.evidence_for_gap``)."""
    g = diag.gaps
    out = []
    for r in rows:
        a, b = int(g.start_ns[r]), int(g.end_ns[r])
        lf = int(g.launch_from_ns[r]) if g.launch_from_ns is not None else b
        sf = int(g.sync_from_ns[r]) if g.sync_from_ns is not None else lf
        out.append((a, sf) if cause == Cause.HOST else (a, lf) if cause == Cause.SYNC else (a, b))
    return out


def _calls_listed(
    trace, evidence: list[Evidence], name: str, windows: list[tuple[int, int]], listed_ns: int
) -> tuple[int, int]:
    """(the events named ``name`` in ``evidence``, the events so named on the lanes it
    lists them on that overlap one of the ``windows`` (ns, the part of the gap the
    item's class is from) outside the events the list holds): the list is cut to its
    largest entries, so it may hold only some of a name's calls. When the calls left
    out hold under ``UNLISTED_MAX_SHARE`` of ``listed_ns`` (or under 1 µs) of such time,
    both counts are the listed one: those calls change no figure the sentence gives."""
    mine = {e.event for e in evidence if e.name == name and e.event >= 0}
    if not mine:
        return 0, 0
    nid = int(trace.name_id[next(iter(mine))])
    total, left_ns = len(mine), 0
    for lane in {int(trace.lane[ev]) for ev in mine}:
        sl = trace.lane_slice(lane)
        st = trace.start_ns[sl]
        en = st + trace.dur_ns[sl]
        named = np.flatnonzero(trace.name_id[sl] == nid)
        named = named[~np.isin(sl.start + named, np.fromiter(mine, dtype=np.int64, count=len(mine)))]
        if not named.size:
            continue
        # the time already in the listed events (a call nested in one of them) is not left out
        listed = np.array([e.event for e in evidence if e.event >= 0 and e.lane == lane], dtype=np.int64)
        ls, le = union_intervals(trace.start_ns[listed], trace.start_ns[listed] + trace.dur_ns[listed])
        # nor is a range around listed events: the list leaves those out by design
        # (``evidence.CONTAINER_MIN_SHARE``), not because it was cut
        inner = np.sort(trace.start_ns[listed])
        holds = np.searchsorted(inner, en[named], "left") > np.searchsorted(inner, st[named], "left")
        named = named[~holds]
        for a, b in windows:
            lo, hi = np.clip(st[named], a, b), np.clip(en[named], a, b)
            out_ns = (hi - lo) - coverage(ls, le, lo, hi)
            total += int((hi > lo).sum())
            left_ns += int(out_ns.sum())
    if left_ns < max(1_000, UNLISTED_MAX_SHARE * listed_ns):
        return len(mine), len(mine)
    return len(mine), total


#: The share of a named item's time its calls left out of the evidence list may hold
#: before the sentence says the item is of some of the calls only.
UNLISTED_MAX_SHARE = 0.1


def _copy_way(lead: CopyLead) -> str:
    """The direction of copies whose name does not say it (MTIA's `dma_request`), or ""."""
    known = [wc for wc in lead.directions if wc[0] != UNKNOWN_DIRECTION]
    if not known or copy_kind_of(lead.big.name) != CopyKind.UNKNOWN or not lead.same_name:
        return ""
    if len(lead.directions) == 1:
        return f" ({'' if lead.count == 1 else 'all '}{lead.directions[0][0]})"
    return " (" + ", ".join(f"{n} {w}" for w, n in lead.directions) + ")"


def _many_pageable(diag: Diagnosis, rows: np.ndarray, lead: CopyLead) -> str:
    """ ", from pageable host memory" for several copies: with pageable host memory
    either way (hta/rank0 #733: a D2H to pageable and an H2D from it read "2 copies ...
    from pageable host memory"), or only the largest."""
    if not lead.big.pageable:
        return ""
    copies = [e for r in rows.tolist() for e in diag.gpu_copies(int(r)) if e.cause == Cause.COPY]
    kinds = {int(diag.trace.copy_kind[e.event]) for e in copies if e.event >= 0}
    host_way = "to" if kinds == {int(CopyKind.D2H)} else "from" if kinds == {int(CopyKind.H2D)} else "with"
    every = bool(copies) and all(e.pageable for e in copies)
    return f", {host_way} pageable host memory" if every else ", the largest with pageable host memory"


def _largest_copies(lead: CopyLead, size: list[str]) -> tuple[str, str, list[str]]:
    """(which, how long each, size words) of the largest of several copies of unequal
    length: the one, or the ``like_big`` ones like it."""
    big = lead.big
    largest = "the largest" if lead.same_name else f"the largest {quote_name(big.name)}"
    if lead.like_big <= 1:
        return largest, fmt_dur(big.overlap_ns), size
    largest = f"the {lead.like_big} largest" + ("" if lead.same_name else f" {quote_name(big.name)}")
    lo_ns, lo_b, hi_b = lead.like_big_range
    each = (
        f"{fmt_dur(big.overlap_ns)} each"
        if fmt_dur(lo_ns) == fmt_dur(big.overlap_ns)
        else f"{fmt_dur(lo_ns)} to {fmt_dur(big.overlap_ns)}"
    )
    if big.bytes >= 0 and lo_b >= 0:
        size = [f"{fmt_bytes(hi_b)} each" if fmt_bytes(lo_b) == fmt_bytes(hi_b) else f"up to {fmt_bytes(hi_b)}"]
        size += ["pageable host memory"] if big.pageable else []
    return largest, each, size


def _many_copies_phrase(
    diag: Diagnosis, rows: np.ndarray, copy_ns: int, lead: CopyLead, ran: str, size: list[str]
) -> str:
    """The copy phrase of several copies: each length (up to three), their median (of
    one length, or all short), else the largest and the short ones in all."""
    big = lead.big
    total = f", {fmt_bytes(lead.bytes_total)} in all" if lead.bytes_total >= 0 else ""
    named = f" {quote_name(big.name)}{_copy_way(lead)}" if lead.same_name else ""
    pageable = _many_pageable(diag, rows, lead)
    if lead.count <= 3:  # a median of two or three says little: each one
        txt = [fmt_dur(v) for v in lead.lengths_ns]
        each = f"{txt[0]} each" if len(set(txt)) == 1 else ", ".join(txt[:-1]) + " and " + txt[-1]
        return f"{fmt_dur(copy_ns)} copying ({ran} {lead.count} {lead.noun}{named}, {each}{total}{pageable})"
    if lead.uniform or lead.short_count == lead.count:
        return (
            f"{fmt_dur(copy_ns)} copying ({ran} {lead.count} {lead.noun}{named}, "
            f"{fmt_dur(lead.median_ns)} median each{total}{pageable})"
        )
    largest, each, size = _largest_copies(lead, size)
    short = (
        f"; {lead.short_count} took {fmt_dur(SHORT_COPY_NS)} or less each, {fmt_dur(lead.short_ns)} in all"
        if lead.short_count >= 2
        else ""
    )
    return (
        f"{fmt_dur(copy_ns)} copying ({ran} {lead.count} {lead.noun}{named}{total}; {largest} "
        f"{each}" + (f", {', '.join(size)}" if size else "") + f"{short})"
    )


def _copy_phrase(
    diag: Diagnosis, rows: np.ndarray, copy_ns: int, lead: CopyLead | None, ran: str = "the GPU ran"
) -> str:
    """ "0.314 ms copying (...)": the one copy (name, size, pageable), or how many ran
    (``_many_copies_phrase``). Copy is GPU copy time only: the thread's time in its copy
    calls is told with the host work or the wait. ``ran``: the words before the GPU's
    copies ("running" when the GPU is the sentence's subject)."""
    if lead is None:
        return f"{fmt_dur(copy_ns)} copying"
    big = lead.big
    size = [fmt_bytes(big.bytes)] if big.bytes >= 0 else []
    if big.pageable:
        size.append("pageable host memory")
    if lead.count > 1:
        return _many_copies_phrase(diag, rows, copy_ns, lead, ran, size)
    on_gpu = diag.trace.lanes[big.lane].is_gpu
    memset = big.event >= 0 and diag.trace.kind[big.event] == int(Kind.MEMSET)
    where = (f"{ran} the memset" if memset else f"{ran} the copy") if on_gpu else "the thread was in the copy call"
    return (
        f"{fmt_dur(copy_ns)} copying ({where} {quote_name(big.name)}{_copy_way(lead) if on_gpu else ''}"
        + (f", {', '.join(size)}" if size else "")
        + ")"
    )


def _who(diag: Diagnosis, rows: np.ndarray, lane: int) -> str:
    """The launching thread's label, with why this thread where no launch call is
    linked to the next op (it launched the previous kernel, or it is the device's
    launching or busiest thread)."""
    trace, g = diag.trace, diag.gaps
    who = thread_label(trace, lane)
    if lane < 0 or not bool((g.launch[rows] < 0).all()) or not bool((g.next_op[rows] >= 0).any()):
        return who
    # say why this thread only when it is true: it launched the kernel before the gap
    launches = diag._launches
    prev = [int(p) for p in g.prev_op[rows] if p >= 0]
    if launches is not None and any(launches[p] >= 0 and int(trace.lane[int(launches[p])]) == lane for p in prev):
        return who + " (it launched the previous kernel; the next op has no linked launch call)"
    sl = trace.lane_slice(lane)
    if bool((trace.kind[sl] == int(Kind.LAUNCH)).any()):
        return who + " (the device's launching thread; neither op around the gap has a linked launch call)"
    return who + " (the busiest CPU thread; no launch call is linked to the ops around the gap)"


def _queued_body(diag: Diagnosis, rows: np.ndarray, r: int) -> str:
    """Why the next op of gap ``r`` was already queued: a node of a running graph, a
    launch call that had returned, a launch before the trace, or an earlier id."""
    trace, g = diag.trace, diag.gaps
    nxt, call = int(g.next_op[r]), int(g.launch[r])
    has = g.launch[rows] >= 0
    if call >= 0 and in_running_graph_launch(diag, r):
        at = fmt_offset(int(trace.start_ns[call]) - int(trace.extent_ns[0]))
        return (
            f": the next op {quote_name(trace.name(nxt))} is a node of the {graph_word(trace)} that "
            f"{quote_name(trace.name(call))} on {thread_label(trace, int(trace.lane[call]))} launched at {at}, "
            f"and the graph's earlier nodes had already run"
        )
    queued = f", although the next op {quote_name(trace.name(nxt))} was already queued: "
    if call >= 0:
        L = int(np.median(g.lateness_ns[rows][has]))
        return (
            queued + f"its launch call {quote_name(trace.name(call))} on {thread_label(trace, int(trace.lane[call]))} "
            f"had returned {fmt_dur(-L)} before the GPU went idle"
        )
    if launched_before_window(trace, nxt):
        return (
            queued + f"it was launched before the trace began (its correlation id {int(trace.correlation[nxt])} "
            f"precedes every runtime call the trace recorded)"
        )
    if bool(launched_before(trace, np.array([nxt]), np.array([int(g.start_ns[r])]))[0]):
        return (
            queued + f"its launch call is not in the trace, but its correlation id {int(trace.correlation[nxt])} "
            f"precedes that of a runtime call made before the GPU went idle"
        )
    # a node of a graph whose launch call the trace lacks; a sibling node ran before
    return (
        queued + "it is a node of a CUDA graph whose earlier nodes had already run (the graph's launch call is "
        "not in the trace)"
    )


def _queued_sentence(
    diag: Diagnosis, rows: np.ndarray, cn: dict[Cause, int], evidence: list[Evidence], head: str, lead: str
) -> str:
    """The sentence of a queued occurrence: why the op was queued, then what it waited
    on (dependency) and the copies; what the CPU did meanwhile is not the cause."""
    g = diag.gaps
    has = g.launch[rows] >= 0
    r = int(rows[has][0]) if has.any() else int(rows[0])
    body = _queued_body(diag, rows, r)
    parts = [_dependency_phrase(diag, r, cn[Cause.DEPENDENCY], evidence)] if cn[Cause.DEPENDENCY] else []
    if cn[Cause.COPY]:
        parts.append(_copy_phrase(diag, rows, cn[Cause.COPY], copy_lead(diag, rows, evidence)))
    text = lead + "; ".join(parts)
    text = (text[:1].upper() + text[1:] + ". ") if text else ""
    if int(g.launch[r]) >= 0 and in_running_graph_launch(diag, r):
        return head + body + ". " + text + "The CPU code around the launch call is not the cause."
    return head + body + ". " + text + "What the CPU did meanwhile is not the cause."


def _host_part(diag: Diagnosis, rows: np.ndarray, evidence: list[Evidence], host_ns: int, hot: HotFrame | None) -> str:
    """The host part: ``host_ns`` on host work, the hot frame or the largest items."""
    if hot is not None:
        items = [hot_frame_text(hot)]
        if host_ns - hot.ns >= max(1_000, host_ns // 1000):
            items.append(f"{fmt_dur(host_ns - hot.ns)} in other work")
    else:
        items = _items(diag, rows, evidence, Cause.HOST, cap_ns=host_ns)
    sep = "; " if hot is not None else ", "
    return f"{fmt_dur(host_ns)} on host work" + (f" ({sep.join(items)})" if items else "")


def _copy_part(diag: Diagnosis, rows: np.ndarray, evidence: list[Evidence], copy_ns: int) -> tuple[str, bool]:
    """The copy part and whether it is the GPU's alone: copy is GPU copy time only, so
    the thread never "spent" it copying (extrap/con_kernel #3 sat in
    cudaEventSynchronize meanwhile; its copy calls are host work or a wait)."""
    gpu_copy = copy_lead(diag, rows, evidence)
    gpu_only = gpu_copy is not None and diag.trace.lanes[gpu_copy.big.lane].is_gpu
    return _copy_phrase(diag, rows, copy_ns, gpu_copy, "running" if gpu_only else "the GPU ran"), gpu_only


def _later_waits(trace, w: Evidence, waits: list[Evidence], after_ns: int) -> str:
    """ ", N of it blocked again in `X`" for the other blocking waits of the cliff after
    ``w`` (issue 43: a second cudaDeviceSynchronize in a `timing` range was folded into
    the first and never named), at most ``after_ns`` in all; else ""."""
    others: dict[str, int] = {}
    for e in waits:
        if e.event != w.event and e.overlap_ns >= 1_000 and trace.start_ns[e.event] >= trace.start_ns[w.event]:
            others[e.name] = others.get(e.name, 0) + e.overlap_ns
    if not others:
        return ""
    ranked = sorted(others.items(), key=lambda kv: -kv[1])[:2]
    total = min(sum(v for _, v in ranked), after_ns)
    names = " and ".join(quote_name(n) for n, _ in ranked)
    return f", {fmt_dur(total)} of it blocked again in {names}"


#: Host work after a blocking wait is named in the sentence when one name holds at
#: least this share of it (issue 43: 1 ms of ``write()`` sat in the evidence list only).
AFTER_WORK_MIN_SHARE = 0.25


def _after_work(trace, w: Evidence, evidence: list[Evidence], after_ns: int) -> str:
    """ ", N of it in `X`" for the traced host call (an OS runtime call such as
    ``read`` or ``write``, a range) holding at least ``AFTER_WORK_MIN_SHARE`` of the
    ``after_ns`` of host work after the wait ``w``; else ""."""
    by_name: dict[str, int] = {}
    for e in evidence:
        if (
            e.cause == Cause.SYNC
            and e.event >= 0
            and e.event != w.event
            and not trace.lanes[e.lane].is_gpu
            and not is_wait(trace, e.event)
            and trace.start_ns[e.event] >= trace.start_ns[w.event]
        ):
            by_name[e.name] = by_name.get(e.name, 0) + e.overlap_ns
    if not by_name or after_ns <= 0:
        return ""
    name, ns = max(by_name.items(), key=lambda kv: kv[1])
    if ns < AFTER_WORK_MIN_SHARE * after_ns:
        return ""
    return f", {fmt_dur(min(ns, after_ns))} of it in {quote_name(name)}"


def _inside_call(trace, call: int, spans: list[tuple[int, int]], call_ns: int) -> str:
    """ "; N of it in K `ioctl` calls inside it" for the OS runtime calls (and other
    untyped host calls, ``Kind.OTHER``) nested in the API call ``call`` on its thread,
    counted inside ``spans`` (ns), when one name holds ``AFTER_WORK_MIN_SHARE`` of the
    call's ``call_ns`` there: the card names the CUDA call, and says what it waited in
    (an Nsight export's ``ioctl`` to the driver); else ""."""
    sl = trace.lane_slice(int(trace.lane[call]))
    cs, ce = int(trace.start_ns[call]), int(trace.start_ns[call] + trace.dur_ns[call])
    st = trace.start_ns[sl]
    en = st + trace.dur_ns[sl]
    idx = np.flatnonzero((st >= cs) & (en <= ce) & (trace.kind[sl] == int(Kind.OTHER)))
    idx = idx[sl.start + idx != call]
    if not idx.size or call_ns <= 0:
        return ""
    ns = np.zeros(idx.size, dtype=np.int64)
    for a, b in spans:
        ns += np.maximum(np.minimum(en[idx], b) - np.maximum(st[idx], a), 0)
    by_name: dict[int, tuple[int, int]] = {}
    for k, v in zip(trace.name_id[sl][idx].tolist(), ns.tolist()):
        if v > 0:
            tot, n = by_name.get(k, (0, 0))
            by_name[k] = (tot + v, n + 1)
    if not by_name:
        return ""
    name, (tot, n) = max(by_name.items(), key=lambda kv: kv[1][0])
    if tot < AFTER_WORK_MIN_SHARE * call_ns:
        return ""
    calls = f"{n:,} {quote_name(trace.names[name])} calls" if n > 1 else f"a {quote_name(trace.names[name])} call"
    return f"; {fmt_dur(min(tot, call_ns))} of it in {calls} inside it"


def _sync_wait_part(
    diag: Diagnosis, rows: np.ndarray, evidence: list[Evidence], sync_ns: int, w: Evidence, waits: list[Evidence]
) -> str:
    """The sync part when the evidence holds the blocking wait ``w`` (the largest of
    ``waits``): its own time in the gap (a small copy under it included), the small
    device-to-host copy, and the host work after it until the next launch (the cliff),
    with the later blocking waits in it named (``_later_waits``)."""
    trace, g = diag.trace, diag.gaps
    spans = [(int(g.start_ns[r]), int(g.end_ns[r])) for r in rows]
    w_ns = min(_same_calls_ns(trace, w.event, spans) - _under_copies_ns(diag, rows, w.event), sync_ns)
    after = sync_ns - w_ns
    # the sync signature's small device-to-host copy: under the wait, or before it
    # (control #1081: inside the cudaMemcpyAsync that came first)
    ws, we = int(trace.start_ns[w.event]), int(trace.start_ns[w.event] + trace.dur_ns[w.event])
    small = [e for e in evidence if e.cause == Cause.SYNC and e.event >= 0 and trace.lanes[e.lane].is_gpu]
    under = any(
        int(trace.start_ns[e.event]) < we and int(trace.start_ns[e.event] + trace.dur_ns[e.event]) > ws for e in small
    )
    # one pair of brackets per item (extrap/con_kernel #3 read "... (a small
    # device-to-host copy ran meanwhile) (the sync cliff)")
    gpu = (
        "while a small device-to-host copy ran"
        if under
        else ("with the small device-to-host copy before it" if small else "")
    )
    cliff = in_sync_cliff(g, rows)
    # a blocking copy call's time outside its GPU copy (copy is the GPU's time only)
    blocked = (
        f"in the blocking copy call {quote_name(w.name)} outside the GPU's copies"
        if blocking_copy_calls(trace)[w.event]
        else f"blocked in {quote_name(w.name)}"
    )
    if after > 0 and cliff:
        return (
            f"{fmt_dur(sync_ns)} in the sync cliff ({fmt_dur(w_ns)} {blocked}"
            f"{' ' + gpu if gpu else ''}, then {fmt_dur(after)} of host work after it until the next launch"
            f"{_after_work(trace, w, evidence, after)}{_later_waits(trace, w, waits, after)})"
        )
    notes = [n for n in (gpu, "the sync cliff" if cliff else "") if n]
    return f"{fmt_dur(sync_ns)} {blocked}" + (f" ({'; '.join(notes)})" if notes else "")


def _sync_part(diag: Diagnosis, rows: np.ndarray, evidence: list[Evidence], sync_ns: int) -> str:
    """The sync part: the blocking wait in the gap (``_sync_wait_part``), else the
    cliff after a wait that began before the gap, else waiting for the device."""
    trace, g = diag.trace, diag.gaps
    waits = [e for e in evidence if e.cause == Cause.SYNC and e.event >= 0 and is_wait(trace, e.event)]
    if waits:
        # the wait that drained the queue leads (the cliff's), the later ones are named in
        # its host work; else the largest
        first = cliff_wait(diag, int(rows[0])) if in_sync_cliff(g, rows) else None
        lead = next((e for e in waits if e.event == first), None) or max(waits, key=lambda e: e.overlap_ns)
        return _sync_wait_part(diag, rows, evidence, sync_ns, lead, waits)
    w_ev = cliff_wait(diag, int(rows[0])) if in_sync_cliff(g, rows) else None
    if w_ev is None:
        return f"{fmt_dur(sync_ns)} waiting for the device"
    # the wait began before the GPU went idle, so little of it lies in the gap (and that
    # under a copy is the copy's): the cliff is the host work after it, which the
    # evidence lists
    after_items = [
        x
        for x in _items(diag, rows, evidence, Cause.SYNC, cap_ns=sync_ns)
        if not x.endswith(quote_name(trace.name(w_ev)))
    ]
    into = int(trace.start_ns[w_ev] + trace.dur_ns[w_ev]) - int(g.start_ns[rows[0]])
    return (
        f"{fmt_dur(sync_ns)} in the sync cliff (after {quote_name(trace.name(w_ev))}, blocking from "
        f"before the GPU went idle to {fmt_dur(into)} into the gap, the host work until the next launch"
        + (": " + ", ".join(after_items) if after_items else "")
        + ")"
    )


def _launch_path_where(diag: Diagnosis, rows: np.ndarray, evidence: list[Evidence], launch_ns: int) -> str:
    """Where the launch time of a gap that is not launch-bound lies: the next op's own
    launch path (from its launch call's start), launch calls of earlier work (one that
    returned long after its kernel ran is not the next op's), or calls that end no gap."""
    trace, g = diag.trace, diag.gaps
    if not bool((g.next_op[rows] >= 0).any()):  # launches of other work, no next op here
        return "in launch calls (none of them ends this gap)"
    own_calls = {int(x) for x in g.launch[rows] if x >= 0}
    earlier_ns = sum(
        e.overlap_ns
        for e in evidence
        if e.cause == Cause.LAUNCH
        and e.event >= 0
        and trace.kind[e.event] == int(Kind.LAUNCH)
        and e.event not in own_calls
    )
    earlier_ns = min(earlier_ns, launch_ns)
    path_ns = launch_ns - earlier_ns
    if earlier_ns < 1_000:
        return "in the launch path of the next op"
    if path_ns >= 50:
        return (
            f"in launch calls ({fmt_dur(path_ns)} of it the launch path of the next op, "
            f"{fmt_dur(earlier_ns)} in earlier ones)"
        )
    return "in launch calls of earlier work (the next op's launch path is not in this gap)"


def _launch_part(diag: Diagnosis, rows: np.ndarray, evidence: list[Evidence], cn: dict[Cause, int]) -> str:
    """The launch part: one slow launch call (a first-use cost), issuing work as fast as
    it could (picket fence or mostly launch), or the launch path of the next op."""
    trace, g = diag.trace, diag.gaps
    launch_ns = cn[Cause.LAUNCH]
    eps = {int(e) for e in g.episode[rows] if e >= 0}
    # launch calls only: in a launch-bound gap other host work counts as launch too,
    # but is no launch call (a DataLoader range is not "the launch call")
    calls = [
        e for e in evidence if e.cause == Cause.LAUNCH and e.event >= 0 and trace.kind[e.event] == int(Kind.LAUNCH)
    ]
    slow = max(calls, key=lambda e: e.overlap_ns) if calls else None
    if (
        slow is not None
        and not eps
        and slow.overlap_ns >= SLOW_LAUNCH_NS
        and slow_launch_calls(trace, SLOW_LAUNCH_NS)[slow.event]
    ):
        spans = [(int(g.start_ns[r]), int(g.end_ns[r])) for r in rows]
        inside = _inside_call(trace, slow.event, spans, slow.overlap_ns)
        return (
            f"{fmt_dur(launch_ns)} in the launch path, {fmt_dur(slow.overlap_ns)} of it in one launch "
            f"call {quote_name(slow.name)} ({slow_launch_words(diag, slow.event)}{inside})"
        )
    if eps or (launch_ns >= 0.5 * sum(cn.values()) and not cn[Cause.HOST]):
        took = (
            f" (the launch call {quote_name(calls[0].name)} took {fmt_dur(calls[0].overlap_ns)} of it)" if calls else ""
        )
        return f"{fmt_dur(launch_ns)} issuing GPU work as fast as it could" + took
    # the call is named only where launch is the story (a small launch part of a host
    # or sync gap would point the reader at the kernel it launches)
    named = calls and launch_ns >= max(cn.values())
    where = _launch_path_where(diag, rows, evidence, launch_ns)
    return f"{fmt_dur(launch_ns)} {where}" + (f" ({quote_name(calls[0].name)})" if named else "")


def _unclassified_part(diag: Diagnosis, rows: np.ndarray, none_ns: int) -> str:
    """The unclassified part: no recorded event, and why the class is unknown."""
    trace, g = diag.trace, diag.gaps
    none_cpu = not any(
        (not ln.is_gpu) and trace.lane_offsets[ln.index + 1] > trace.lane_offsets[ln.index] for ln in trace.lanes
    )
    next_ops = [int(n) for n in g.next_op[rows] if n >= 0]
    if none_cpu:
        unknown = " (the trace has no CPU activity)"
    elif not next_ops:  # the gap runs to the window's end: no op, so no launch, to read
        unknown = (
            "; no GPU op follows the gap before the analysis window ends, so no launch says whether work "
            "was waiting (unclassified)"
        )
    else:
        coll = (
            " (a collective: NCCL/RCCL launch their kernels without a runtime call the profiler links)"
            if COLLECTIVE_RE.search(trace.name(next_ops[0]))
            else ""
        )
        unknown = (
            f"; {quote_name(trace.name(next_ops[0]))} has no launch call linked to it{coll}, so whether it was "
            f"queued or launched late is unknown (unclassified)"
        )
    return f"{fmt_dur(none_ns)} with no recorded event" + unknown


def _lateness_tail(diag: Diagnosis, rows: np.ndarray, evidence: list[Evidence], dep_ns: int) -> str:
    """After the parts: when the next op reached the queue (the launch lateness; a
    step-boundary stretch counts from its trailing gap), and a late op's later wait."""
    g = diag.gaps
    has = g.launch[rows] >= 0
    tail = ""
    if has.any():
        L = int(np.median(g.lateness_ns[rows][has]))
        edge = g.edge[rows] if g.edge is not None else np.zeros(rows.size, np.int8)
        if (edge == 2).any() and (edge == 1).any():  # step-boundary stretch: idle starts at the trailing gap
            L += int(g.dur_ns[rows][edge == 2].sum())
        # with the clocks disagreeing, the call's end is not when it was queued
        if L > 0 and not trust_bits(diag, rows) & Trust.CLOCKS:
            tail = f"; the next op reached the queue {fmt_dur(L)} after the GPU went idle"
    if dep_ns:  # a late op that then waited in the queue
        tail += (
            ". After its launch call returned, "
            + _dependency_phrase(diag, int(rows[0]), dep_ns, evidence)
            + "; what the CPU did in that time is not the cause"
        )
    return tail


def why_sentence(
    diag: Diagnosis,
    rows: np.ndarray,
    class_ns: np.ndarray,
    evidence: list[Evidence],
    head: str,
    lead: str = "",
    hot: HotFrame | None = None,
) -> str:
    """One sentence on the occurrence ``rows`` (a gap, or a step-boundary pair): ``head``
    (how long), then its parts in time order, each with the ns ``class_ns`` gives its
    class, so the parts add up to the occurrence: for a queued gap, what the queued op
    waited on (and the copies; ``_queued_sentence``); for a starved one, what the
    launching thread did before the sync cliff (``_host_part``), the cliff
    (``_sync_part``), the exposed launch path (``_launch_part``) and the copies
    (``_copy_part``); then the launch lateness (``_lateness_tail``). ``hot``: the
    ``hot_frame`` of ``rows``, which then names the host work."""
    # parts that round to nothing are not named (the partition still holds their ns)
    cn = {c: (int(class_ns[int(c)]) if int(class_ns[int(c)]) >= 50 else 0) for c in Cause}
    if queued_occurrence(diag, rows):
        return _queued_sentence(diag, rows, cn, evidence, head, lead)
    parts = [_host_part(diag, rows, evidence, cn[Cause.HOST], hot)] if cn[Cause.HOST] else []
    copy_text, gpu_only = _copy_part(diag, rows, evidence, cn[Cause.COPY]) if cn[Cause.COPY] else ("", False)
    if copy_text and not gpu_only:
        parts.append(copy_text)
    if cn[Cause.SYNC]:
        parts.append(_sync_part(diag, rows, evidence, cn[Cause.SYNC]))
    if cn[Cause.LAUNCH]:
        parts.append(_launch_part(diag, rows, evidence, cn))
    if cn[Cause.UNCLASSIFIED]:
        parts.append(_unclassified_part(diag, rows, cn[Cause.UNCLASSIFIED]))
    gpu_part = "the GPU spent " + copy_text if gpu_only else ""
    if not parts:
        return head + (": " + lead + gpu_part if gpu_part else "") + "."
    # the GPU's copying leads when it is the largest part, else follows the thread's
    copy_first = bool(gpu_part) and cn[Cause.COPY] >= max(v for c, v in cn.items() if c != Cause.COPY)
    if cn[Cause.HOST] or cn[Cause.SYNC] or cn[Cause.LAUNCH]:
        thread_part = f"{_who(diag, rows, diag.gaps.thread_of(int(rows[0])))} spent " + ", ".join(parts)
        ordered = [gpu_part, thread_part] if copy_first else [thread_part] + ([gpu_part] if gpu_part else [])
    else:
        ordered = ([gpu_part] if gpu_part else []) + parts
    return head + ": " + lead + "; ".join(ordered) + _lateness_tail(diag, rows, evidence, cn[Cause.DEPENDENCY]) + "."


def cliff_wait(diag: Diagnosis, row: int) -> int | None:
    """The blocking wait of gap ``row``'s sync cliff: the longest wait (``is_wait``) on
    its thread that began at or before the gap start and ended at or after it (what
    rule 3 of docs/definitions.md found), or None."""
    trace, g = diag.trace, diag.gaps
    lane = int(g.thread_lane[row]) if g.thread_lane is not None else -1
    if lane < 0:
        return None
    sl = trace.lane_slice(lane)
    a = int(g.start_ns[row])
    s = trace.start_ns[sl]
    e = s + trace.dur_ns[sl]
    cand = (sl.start + np.flatnonzero((s <= a) & (e >= a))).tolist()
    waits = [k for k in cand if is_wait(trace, k)]
    return max(waits, key=lambda k: int(trace.dur_ns[k])) if waits else None


def is_wait(trace, ev: int) -> bool:
    """Whether event ``ev`` is itself a blocking wait (not host work after one): a sync
    call or op, or a blocking copy call (``blocking_copy_calls``)."""
    return (
        bool(BLOCKING_SYNC_RE.search(trace.name(ev)))
        or trace.name(ev) in SYNC_OP_NAMES
        or trace.kind[ev] in (int(Kind.SYNC_CALL), int(Kind.SYNC_MARKER))
        or bool(blocking_copy_calls(trace)[ev])
    )


#: Longest wait after a collective's end read as its hand-off to another stream through
#: an event (a cudaEventRecord/cudaStreamWaitEvent pair resolves in a few µs).
HANDOFF_MAX_NS = 20_000


def _wait_search(diag: Diagnosis, r: int) -> str:
    """What the stream-wait search (``waits.stream_wait_events``) could check for gap
    ``r``, in words: it runs only when the trace has stream-wait calls and both the next
    op and the op before it have linked launch calls."""
    if wait_name_ids(diag.trace).size == 0:
        return "the trace records no stream-wait calls"
    g, rows = diag.gaps, slice(r, r + 1)
    if diag._launches is None or not searchable(g.prev_op[rows], g.launch[rows], diag._launches)[0]:
        return "its launch, or the one before it, is not in the trace, so no stream wait between them was searched"
    return "no stream wait was enqueued by the thread that launched it"


#: An event record: the runtime call, or torch's Python ``Event.record`` when the
#: Python tracer recorded it.
_EVENT_RECORD_RE = re.compile(r"EventRecord|record of Event object|streams\.py\(\d+\): record(_event)?$")

#: A stream wait is unexplained when the other streams ran nothing for all but this
#: much of the time the op sat queued (a recorded op that ends inside is the producer).
UNEXPLAINED_WAIT_MIN_NS = 1_000_000


def other_streams_idle(diag: Diagnosis, r: int) -> int | None:
    """For gap ``r`` whose next op sat queued behind a stream wait: when no GPU op
    (kernel, copy, memset) on any other GPU lane of the trace, any device, ran in the
    time it sat queued (the whole gap when queued, else ``queued_until_ns`` to its
    end), no CPU thread recorded an
    event (``_EVENT_RECORD_RE``) after the wait was enqueued (a late record is what
    such a wait waits for), and
    that time is at least ``UNEXPLAINED_WAIT_MIN_NS``, how long before the gap's end (ns) the last such op
    before it ended (the whole queued time when none did): the event it waited for was
    recorded on a stream the trace shows idle, so the trace does not hold the producer
    (sglang_prefilldecode #0: 493 ms behind ``hipStreamWaitEvent``; the other stream's
    one op before it ended at 0.082 ms). None when another stream ran work then."""
    trace, g = diag.trace, diag.gaps
    b = int(g.end_ns[r])
    queued = g.queued is not None and bool(g.queued[r])
    a = int(g.queued_until_ns[r]) if g.queued_until_ns is not None and not queued else int(g.start_ns[r])
    if b - a < UNEXPLAINED_WAIT_MIN_NS:
        return None
    own = int(trace.lane[int(g.next_op[r])]) if g.next_op[r] >= 0 else -1
    work = np.array([Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET], dtype=np.int8)
    records = ids_matching(trace, _EVENT_RECORD_RE)
    w = int(g.wait_event[r]) if g.wait_event is not None and g.wait_event[r] >= 0 else -1
    since = int(trace.start_ns[w]) if w >= 0 else a  # a record made after the wait was enqueued
    last_end = int(g.start_ns[r])
    for ln in trace.lanes:
        sl = trace.lane_slice(ln.index)
        st, en = trace.start_ns[sl], trace.start_ns[sl] + trace.dur_ns[sl]
        if not ln.is_gpu:
            # an event recorded while the op waited may be the one it waited for
            if records.size and (np.isin(trace.name_id[sl], records) & (st < b) & (st >= since)).any():
                return None
            continue
        if ln.index == own:
            continue
        m = np.isin(trace.kind[sl], work)
        st, en = st[m], en[m]
        if ((st < b) & (en > a)).any():
            return None
        before = en[en <= a]
        if before.size:
            last_end = max(last_end, int(before.max()))
    return b - min(last_end, b)


def _dependency_phrase(diag: Diagnosis, r: int, dep_ns: int, evidence: list[Evidence]) -> str:
    """What the queued op of gap ``r`` waited on, in words, with its ns."""
    trace, g = diag.trace, diag.gaps
    kind = (
        WaitKind(int(g.wait_kind[r])) if g.wait_kind is not None and g.wait_kind[r] >= 0 else WaitKind.NOTHING_RECORDED
    )
    if kind == WaitKind.DISPATCH:
        return (
            f"the {fmt_dur(dep_ns)} between two queued ops is at the trace's timestamp resolution: GPU-side "
            f"dispatch, not actionable"
        )
    if kind == WaitKind.STREAM_WAIT and g.wait_event is not None:
        w = int(g.wait_event[r])
        ln = trace.lanes[int(trace.lane[w])]
        by = "" if ln.is_gpu else f" (enqueued by {thread_label(trace, ln.index)})"
        if np.isin(trace.name_id[w], device_timed_wait_ids(trace)):
            # the device timed the wait itself: it explains the idle only while it ran
            gs, dur = int(g.start_ns[r]), int(g.dur_ns[r])
            from_ns = max(0, int(trace.start_ns[w]) - gs)
            to_ns = min(dur, int(trace.start_ns[w] + trace.dur_ns[w]) - gs)
            if from_ns > 0 or to_ns < dur:
                span = f"until {fmt_dur(to_ns)}" if from_ns == 0 else f"from {fmt_dur(from_ns)} to {fmt_dur(to_ns)}"
                return (
                    f"it waited {fmt_dur(dep_ns)} on the GPU side: behind the stream wait {quote_name(trace.name(w))} "
                    f"{span} into the gap, for an event recorded on another stream or device, and otherwise on "
                    f"something the trace does not record"
                )
        text = (
            f"it sat {fmt_dur(dep_ns)} behind the stream wait {quote_name(trace.name(w))}{by}, waiting for an event "
            f"recorded on another stream or device"
        )
        last = other_streams_idle(diag, r)
        if last is not None:
            text += (
                f"; yet no other stream in the trace ran anything while it waited (the last op elsewhere ended "
                f"{fmt_dur(last)} before the wait was over), so the trace does not show what held the event back"
            )
        return text
    if kind == WaitKind.COLLECTIVE:
        # A collective kernel waits for its peers while it runs (docs/ranks-json.md: it
        # cannot end before its last peer arrives), so an idle stretch before one, or
        # after one has ended, is not that wait.
        nxt, prv = int(g.next_op[r]), int(g.prev_op[r])
        same_stream = prv >= 0 and int(trace.lane[prv]) == int(trace.lane[nxt])
        searched = _wait_search(diag, r)
        if same_stream:
            what = "the queued op, itself a collective," if COLLECTIVE_RE.search(trace.name(nxt)) else "the next op"
            return (
                f"{what} runs on the same stream as {quote_name(trace.name(prv))} before it, so it started in stream "
                f"order after it, {fmt_dur(dep_ns)} later (the spacing of two ops of one stream)"
            )
        if COLLECTIVE_RE.search(trace.name(nxt)) and dep_ns <= HANDOFF_MAX_NS:
            return (
                f"the queued op is itself a collective, and it started {fmt_dur(dep_ns)} after {quote_name(trace.name(prv))} "
                f"ended on another stream: about the time an event takes to hand one stream's work to another "
                f"({searched}); its wait for its peers is inside its own {fmt_dur(int(trace.dur_ns[nxt]))} run, not in "
                f"this gap"
            )
        if COLLECTIVE_RE.search(trace.name(nxt)):
            return (
                f"the queued op is itself a collective, and for {fmt_dur(dep_ns)} its start waited on something not "
                f"linked to it here ({searched}): an event of another stream or device, or a host callback the "
                f"communication library queued before it; its wait for its peers is inside its own "
                f"{fmt_dur(int(trace.dur_ns[nxt]))} run, not in this gap"
            )
        head = (
            f"the collective {quote_name(trace.name(prv))} before it had ended when the gap began, and for "
            f"{fmt_dur(dep_ns)} the next op waited on something not linked to it here ({searched})"
        )
        if dep_ns <= HANDOFF_MAX_NS:
            return (
                f"{head}: about the time a collective's end takes to reach a stream that waits for it through an event"
            )
        return (
            f"{head}: a collective's end reaches a stream that waits for it through an event within about "
            f"{fmt_dur(HANDOFF_MAX_NS)}, so a wait of {fmt_dur(dep_ns)} is mostly on other work: of another stream or "
            f"device, or queued ahead of it on its own stream"
        )
    if kind == WaitKind.GRAPH and in_running_graph_launch(diag, r):
        call = int(g.launch[r])
        end_ns = int(trace.start_ns[call] + trace.dur_ns[call])
        text = (
            f"it waited {fmt_dur(dep_ns)} inside the graph, on the order of its nodes or on graph work the trace "
            f"does not record"
        )
        if is_rocm(trace):
            text += (
                f", or on the runtime submitting the nodes: the thread was inside {quote_name(trace.name(call))} "
                f"until {fmt_offset(end_ns - int(trace.extent_ns[0]))}, past the gap's start, and ROCm's runtime "
                f"submits a graph's nodes from inside that call"
            )
        return text
    if kind == WaitKind.GRAPH:
        by = (
            f"launched by {quote_name(trace.name(int(g.launch[r])))}"
            if g.launch[r] >= 0
            else "(its launch is not in the trace)"
        )
        first = graph_first_node(
            trace, int(g.next_op[r]), int(trace.start_ns[g.launch[r]]) if g.launch[r] >= 0 else None
        )
        gs = int(g.start_ns[r])
        if first == int(g.next_op[r]):  # nothing of the graph ran before it
            if dep_ns <= GRAPH_START_MAX_NS:
                return (
                    f"it is the first node of the {graph_word(trace)} {by}: {fmt_dur(dep_ns)} is the GPU starting the "
                    f"queued graph after the work before it, a fixed cost per graph launch"
                )
            return (
                f"it is the first node of the {graph_word(trace)} {by}, and the graph waited {fmt_dur(dep_ns)} to "
                f"start: on a wait at its root (an event captured in the graph) or on work the trace does not record"
            )
        if first >= 0 and int(trace.start_ns[first]) > gs:  # the graph began inside the gap
            into = int(trace.start_ns[first]) - gs
            return (
                f"it waited {fmt_dur(dep_ns)} on the {graph_word(trace)} {by}: its first recorded node "
                f"{quote_name(trace.name(first))} did not start until {fmt_dur(into)} into the gap, so for that long the "
                f"queued graph had not started, then the rest in the order of its nodes"
            )
        return (
            f"it waited {fmt_dur(dep_ns)} on the ordering of the {graph_word(trace)} {by} or on graph work the trace "
            f"does not record"
        )
    return (
        f"for {fmt_dur(dep_ns)} it waited on something the trace does not record (an event from another stream "
        f"or device, a host callback, or the GPU's own scheduling)"
    )


def _step_range(diag: Diagnosis, rows: np.ndarray) -> str | None:
    """Name of the step range (``ProfilerStep#8``, ``decode_step``) enclosing the
    uninstrumented time of ``rows`` on its thread, or None."""
    g = diag.gaps
    for r in rows.tolist():
        lane = g.thread_of(r)
        ev = enclosing_step_range(diag.trace, diag._exclude, lane, int(g.start_ns[r]), int(g.end_ns[r]))
        if ev >= 0:
            return diag.trace.name(ev)
    return None


def _step_boundary(diag: Diagnosis, rows: np.ndarray) -> tuple[str, str] | None:
    """Names of the first and last step ranges on the thread of ``rows[0]`` that its gap
    overlaps, when it overlaps two or more (the gap crosses a step boundary), else None."""
    g, trace = diag.gaps, diag.trace
    r = int(rows[0])
    m = step_ranges_overlapping(trace, diag._exclude, g.thread_of(r), int(g.start_ns[r]), int(g.end_ns[r]))
    return (trace.name(int(m[0])), trace.name(int(m[-1]))) if m.size >= 2 else None


def quiet_text(diag: Diagnosis, rows: np.ndarray, quiet_ns: int) -> str:
    """ "0.200 ms inside `decode_step` with no finer event recorded (...)": the
    enclosing step range is named as where the time went, never as the work. A gap
    across a step boundary says so: its unrecorded time is the loop between two steps,
    where the profiler's own ``step()`` runs (the H200 picket-fence and decode-eager
    captures: the end of one range, time in none, the start of the next)."""
    across = _step_boundary(diag, rows)
    if across is not None:
        return (
            f"{fmt_dur(quiet_ns)} with no finer event recorded, across the boundary of {quote_name(across[0])} "
            f"and {quote_name(across[1])} (the loop between two steps, where the profiler's own step() runs, "
            "or uninstrumented Python)"
        )
    step = _step_range(diag, rows)
    # a program with no Python (a C++ or MPI code from Nsight) has no Python to blame
    code = "uninstrumented Python" if program_kind(diag.trace).python else "uninstrumented code"
    if step is not None:
        return f"{fmt_dur(quiet_ns)} inside {quote_name(step)} with no finer event recorded ({code} or untraced work)"
    return f"{fmt_dur(quiet_ns)} with no recorded events ({code} or untraced work)"


def slow_launch(diag: Diagnosis, evidence: list[Evidence], rows: np.ndarray) -> bool:
    """Whether a launch-class gap (outside picket fences) is mostly one launch call of
    at least ``SLOW_LAUNCH_NS`` that is first-use cost (``slow_launch_calls``), not the
    per-kernel dispatch tax."""
    top = [e for e in evidence if e.cause == Cause.LAUNCH and e.event >= 0]
    return (
        bool(top)
        and not (diag.gaps.episode[rows] >= 0).any()
        and diag.trace.kind[top[0].event] == int(Kind.LAUNCH)
        and top[0].overlap_ns >= SLOW_LAUNCH_NS
        and bool(slow_launch_calls(diag.trace, SLOW_LAUNCH_NS)[top[0].event])
    )


def slow_launch_words(diag: Diagnosis, call: int) -> str:
    """What a slow launch call ``call`` was: a first use when its kernel had not run
    before in the trace (``evidence_kinds.earlier_runs``), else host contention."""
    runs = int(earlier_runs(diag.trace)[call])
    if runs:
        return f"its kernel had run {runs:,} time(s) before, so no first use: the call was held up on the host"
    return "a first-use cost, not the per-kernel tax"


def in_running_graph_launch(diag: Diagnosis, r: int) -> bool:
    """Whether the next op of gap ``r`` is a later node of a graph whose launch call,
    linked to it, was still running when the gap began (``WaitKind.GRAPH`` with a
    positive lateness): the node was issued by that call, in the graph's order, so the
    call's end says nothing of when it reached the queue (``classify._graph_node_queued``)."""
    g = diag.gaps
    return (
        g.wait_kind is not None
        and int(g.wait_kind[r]) == int(WaitKind.GRAPH)
        and int(g.launch[r]) >= 0
        and int(g.lateness_ns[r]) > 0
    )


#: A queued graph's first node starting this soon after the GPU went idle is the GPU
#: starting the graph (vllm_decode_full #1: 10.1 µs after eager work; its exit gap,
#: 11.7 µs); a longer wait before it is on something else.
GRAPH_START_MAX_NS = 20_000


def queued_occurrence(diag: Diagnosis, rows: np.ndarray) -> bool:
    """True when every gap of the occurrence ``rows`` was queued (``Gaps.queued``: its
    next op's launch call had returned before the gap began)."""
    g = diag.gaps
    if g.queued is None:
        return False
    return bool(g.queued[rows].all())


def trust_bits(diag: Diagnosis, rows: np.ndarray) -> int:
    """The ``Trust`` bits of any gap of ``rows`` (``Gaps.trust``; 0 when none is kept)."""
    g = diag.gaps
    return int(np.bitwise_or.reduce(g.trust[rows])) if g.trust is not None and rows.size else 0


def trust_note(diag: Diagnosis, rows: np.ndarray, said_unlinked: bool = False) -> str:
    """A sentence on why the idle of ``rows`` may be unreliable (``Gaps.trust``), or "";
    ``said_unlinked``: the sentence already says the next op has no linked launch."""
    g = diag.gaps
    bits = trust_bits(diag, rows)
    out = []
    if bits & Trust.GRAPH_UNRECORDED:
        out.append(
            "graph nodes appear unrecorded (a CUDA graph launched shortly before has no recorded kernels, or "
            "the graph running here records nodes over under half its execution), so its nodes may have run here "
            "unseen and this idle may not be idle: re-capture with the nodes recorded (nsys --cuda-graph-trace=node)"
        )
    if bits & Trust.UNLINKED and not said_unlinked:
        out.append("the next op has no launch call linked to it, so whether it was queued or launched late is unknown")
    if bits & Trust.CLOCKS and g.trust is not None:
        r = int(rows[np.flatnonzero(g.trust[rows] & int(Trust.CLOCKS))[0]])
        op, call = int(g.next_op[r]), int(g.launch[r])
        ahead_ns = int(diag.trace.start_ns[call] - diag.trace.start_ns[op])
        out.append(
            f"the next op is recorded as starting {fmt_dur(ahead_ns)} before its launch call began, so the CPU's "
            f"and the GPU's clocks disagree here and the CPU's work in this gap may not be what held the GPU"
        )
    if bits & Trust.SAMPLED:
        present, span = operator_sample(diag.trace)
        out.append(
            f"the trace keeps {present:,} of the {span:,} operators its ids span ({present / span:.1%}: a sampled "
            f"trace), so kernels it dropped may have run in this idle"
        )
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


def is_decode_trace(diag: Diagnosis) -> bool:
    """True when a step makes one token (``gapscope.analysis.budget.is_decode``)."""
    b = getattr(diag, "budget", None)
    return bool(getattr(b, "decode", False))
