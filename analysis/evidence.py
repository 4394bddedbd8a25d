"""Evidence lists of single gaps, computed on demand (design: "Definitions" → cause
classes: "the evidence list (names, thread, overlap in ns, bytes)").

The list follows the classification's time partition of the gap
(``gapscope.analysis.classify``), so each item's class is the class its time was given:

- a queued (blocked) gap: the GPU copies of the device in it (copy) and what the queued
  op waited on (dependency): the stream wait, the collective, the graph launch; no CPU
  activity, since none of it could be the cause;
- a starved gap: the GPU copies of the device in it, and the events of the launching
  thread T (never another thread), each split over the partition: its time before the
  sync cliff with its own class (host, a copy call included; launch; sync for a wait that began inside
  the gap; launch too for host work in a launch-bound gap),
  its time in the sync cliff as sync, its time in the exposed launch path as launch;
  plus the synthetic "(untraced time on this thread)" for uninstrumented time on T
  in each part.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from gapscope.analysis.busy import coverage, device_union, union_intervals
from gapscope.analysis.evidence_kinds import NO_CLASS, event_cause, evidence_end
from gapscope.analysis.gaps import EDGE_TRAILING
from gapscope.analysis.types import Cause, Evidence, Gaps, Params, WaitKind
from gapscope.parsers.model import CopyKind, Kind, Trace

__all__ = [
    "EvidenceIndex",
    "evidence_for_gap",
    "gpu_copies_of_gap",
    "NO_EVENTS",
    "enclosing_step_range",
    "step_ranges_overlapping",
    "CONTAINER_MIN_SHARE",
]

_E = np.zeros(0, dtype=np.int64)
#: The share of a lane's events that ``EvidenceIndex.overlapping`` keeps apart as its
#: long ones (a 1M-event trace: 0.1% left a median 3 events scanned per query).
LONG_SHARE = 0.001


@dataclasses.dataclass(eq=False)
class EvidenceIndex:
    """Per-event lookups for on-demand evidence lists, built once (O(n)):
    ``cause`` (``event_cause``), ``end`` (``evidence_end``), ``runmax`` (running max of
    ``end`` within each lane). The events overlapping [a, b) on a lane are found with
    ``searchsorted`` calls and a scan of about the overlapping ones only: a lane's
    longest events (``LONG_SHARE`` of them: the thread's whole-run ranges, steps) are
    kept apart (``_long_of``, per lane on first use), else one range open since the
    lane's start made every query scan the lane up to it (a 1M-event trace: a median
    4,126 events scanned for 4 found)."""

    cause: np.ndarray
    end: np.ndarray
    runmax: np.ndarray
    #: device -> its kernel busy union (``device_union``), built on first use
    kernels: dict = dataclasses.field(default_factory=dict)
    #: lane -> (runmax of its other events, its long events' indices (ascending),
    #: their ends' running max): ``_long_of``
    _long: dict = dataclasses.field(default_factory=dict, repr=False)

    def kernel_union(self, trace: Trace, device: int) -> tuple[np.ndarray, np.ndarray]:
        """The kernel busy union of ``device`` (cached)."""
        got = self.kernels.get(device)
        if got is None:
            got = self.kernels[device] = device_union(trace, device)
        return got

    @classmethod
    def build(cls, trace: Trace, valid: np.ndarray | None = None, exclude: np.ndarray | None = None) -> EvidenceIndex:
        if valid is None:
            valid = np.ones(len(trace), dtype=bool)
        end = evidence_end(trace)
        runmax = end.copy()
        for k in range(len(trace.lanes)):
            a, b = int(trace.lane_offsets[k]), int(trace.lane_offsets[k + 1])
            if b > a:
                np.maximum.accumulate(runmax[a:b], out=runmax[a:b])
        return cls(event_cause(trace, valid, exclude), end, runmax)

    def _long_of(self, trace: Trace, lane: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(``short_runmax``: the running max of the lane's event ends with its long
        events counted at their start, long event indices ascending (int64), the
        running max of their ends), built once per lane: long are the events
        longer than the lane's ``1 - LONG_SHARE`` quantile of (evidence) duration."""
        got = self._long.get(lane)
        if got is not None:
            return got
        sl = trace.lane_slice(lane)
        start, end = trace.start_ns[sl].astype(np.int64), self.end[sl]
        dur = end - start
        long = dur > np.quantile(dur, 1.0 - LONG_SHARE) if dur.size else np.zeros(0, dtype=bool)
        short_runmax = np.maximum.accumulate(np.where(long, start, end)) if dur.size else _E
        at = np.flatnonzero(long).astype(np.int64) + sl.start
        got = self._long[lane] = (short_runmax, at, np.maximum.accumulate(self.end[at]) if at.size else _E)
        return got

    def overlapping(self, trace: Trace, lane: int, a: int, b: int) -> np.ndarray:
        """Event indices on ``lane`` overlapping [a, b) (by evidence end): int64,
        ascending; the events of the lane that start before ``b`` and end after ``a``."""
        sl = trace.lane_slice(lane)
        hi = sl.start + int(np.searchsorted(trace.start_ns[sl], b, side="left"))
        if hi <= sl.start or int(self.runmax[hi - 1]) <= a:
            return _E
        short_runmax, at, at_runmax = self._long_of(trace, lane)
        lo = sl.start + int(np.searchsorted(short_runmax, a, side="right"))  # the other events end by a before it
        j_hi = int(np.searchsorted(at, min(lo, hi), side="left")) if at.size else 0
        before = _E
        if j_hi:
            j_lo = int(np.searchsorted(at_runmax[:j_hi], a, side="right"))  # long ones ending by a before it
            before = at[j_lo:j_hi]
            before = before[self.end[before] > a]
        if hi <= lo:
            return before
        idx = np.arange(lo, hi, dtype=np.int64)[self.end[lo:hi] > a]
        return np.concatenate((before, idx)) if before.size else idx


#: Name of the synthetic evidence for time on the launching thread that no finer event
#: covers (none at all, or only a range that merely contains the work).
NO_EVENTS = "(untraced time on this thread)"

#: A host range whose time in the gap is covered by deeper events on its thread for at
#: least this share merely contains the work: the deeper events are the evidence.
CONTAINER_MIN_SHARE = 0.9


def _overlap(s: np.ndarray, e: np.ndarray, a: int, b: int) -> np.ndarray:
    return np.maximum(np.minimum(e, b) - np.maximum(s, a), 0)


def _gpu_copies(trace: Trace, index: EvidenceIndex, dev: int, a: int, b: int, sync_until: int) -> list[Evidence]:
    """GPU memcpy/memset records of ``dev`` in [a, b): copy, except a small D2H copy
    (the ``.item()`` signature) before ``sync_until`` (the starved part), which is sync.
    A copy that ends while a kernel runs is left out, as the classes leave it out
    (``classify._device_copy_unions``: the kernel did not wait for it)."""
    out: list[Evidence] = []
    small_max = Params().small_copy_max_bytes
    ks, ke = index.kernel_union(trace, dev)
    for ln in trace.lanes:
        if not (ln.is_gpu and ln.device == dev):
            continue
        idx = index.overlapping(trace, ln.index, a, b)
        idx = idx[np.isin(trace.kind[idx], np.array([Kind.MEMCPY, Kind.MEMSET], dtype=np.int8))]
        if ks.size and idx.size:
            ends = trace.start_ns[idx] + trace.dur_ns[idx]
            k = np.searchsorted(ks, ends, side="left") - 1
            inside = (k >= 0) & (ends > ks[np.maximum(k, 0)]) & (ends <= ke[np.maximum(k, 0)])
            idx = idx[~inside]
        if not idx.size:
            continue
        # vectorised: a gap may hold 100k copies (the per-copy loop below only builds items)
        s_, e_ = trace.start_ns[idx], index.end[idx]
        by = trace.bytes[idx]
        small = (trace.copy_kind[idx] == int(CopyKind.D2H)) & (by >= 0) & (by <= small_max)
        sync_part = np.where(small, np.maximum(np.minimum(np.minimum(e_, sync_until), b) - np.maximum(s_, a), 0), 0)
        copy_part = np.maximum(np.minimum(e_, b) - np.maximum(s_, a), 0) - sync_part
        page = trace.pageable[idx]
        sync_c, copy_c, lane = Cause.SYNC, Cause.COPY, ln.index
        for ev, sp, cp, nb, pg in zip(idx.tolist(), sync_part.tolist(), copy_part.tolist(), by.tolist(), page.tolist()):
            name = trace.name(ev)
            if sp > 0:
                out.append(Evidence(ev, name, lane, sync_c, sp, nb, pg))
            if cp > 0:
                out.append(Evidence(ev, name, lane, copy_c, cp, nb, pg))
    return out


def _queued_evidence(trace: Trace, gaps: Gaps, i: int) -> list[Evidence]:
    """What the queued op of gap ``i`` waited on, as one dependency item (none when
    nothing is recorded)."""
    dep = int(gaps.class_ns[i, int(Cause.DEPENDENCY)]) if gaps.class_ns is not None else int(gaps.dur_ns[i])
    kind = int(gaps.wait_kind[i]) if gaps.wait_kind is not None else -1
    ev = -1
    if kind == WaitKind.STREAM_WAIT and gaps.wait_event is not None:
        ev = int(gaps.wait_event[i])
    elif kind == WaitKind.COLLECTIVE:
        ev = int(gaps.next_op[i])
    elif kind == WaitKind.GRAPH:
        ev = int(gaps.launch[i])
    if ev < 0 or dep <= 0:
        return []
    return [Evidence(ev, trace.name(ev), int(trace.lane[ev]), Cause.DEPENDENCY, dep)]


def gpu_copies_of_gap(trace: Trace, gaps: Gaps, i: int, index: EvidenceIndex) -> list[Evidence]:
    """Every GPU memcpy/memset item of gap ``i`` as the evidence list has them
    (``_gpu_copies``: copy, or sync for a small D2H copy in the starved part), in time
    order and not cut to a limit, so a sentence can count them."""
    a, b = int(gaps.start_ns[i]), int(gaps.end_ns[i])
    queued = bool(gaps.queued[i]) if gaps.queued is not None else False
    lf = int(gaps.launch_from_ns[i]) if gaps.launch_from_ns is not None else b
    return _gpu_copies(trace, index, int(gaps.device[i]), a, b, a if queued else lf)


#: The CPU kinds of runtime calls (CUDA/HIP API), which hold the OS calls made inside them.
_API_KINDS = np.array([Kind.RUNTIME, Kind.LAUNCH, Kind.SYNC_CALL, Kind.MEMCPY_CALL], dtype=np.int8)


def _in_api_calls(trace: Trace, index: EvidenceIndex, idx: np.ndarray) -> np.ndarray:
    """Bool mask over ``idx`` (events of one lane): the other events (``Kind.OTHER``:
    Nsight's OS runtime calls, ``ioctl``, ``write``...) lying wholly inside a runtime
    call of ``idx``. O(n log n): one union of the calls, one coverage query."""
    out = np.zeros(idx.size, dtype=bool)
    kind = trace.kind[idx]
    api = np.isin(kind, _API_KINDS)
    other = kind == int(Kind.OTHER)
    if not (api.any() and other.any()):
        return out
    us, ue = union_intervals(trace.start_ns[idx[api]], index.end[idx[api]])
    o_s, o_e = trace.start_ns[idx[other]], index.end[idx[other]]
    out[other] = coverage(us, ue, o_s, o_e) >= (o_e - o_s)
    return out


def _part_items(
    trace: Trace,
    index: EvidenceIndex,
    idx: np.ndarray,
    copies: tuple[np.ndarray, np.ndarray],
    span: tuple[int, int],
    forced: Cause | None,
    bound: bool,
    launch: int,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], int]:
    """((events, classes, overlap ns), untraced ns) of the thread's events ``idx`` in
    one part ``span`` of a gap: the part before the sync (``forced`` None: each event's
    own class, host as launch in a launch-bound gap), the sync cliff or the launch path
    (``forced``). ``copies``: the union of the gap's GPU copies, whose time is theirs."""
    lo, hi = span
    cs_, ce_ = copies
    s, e = trace.start_ns[idx], index.end[idx]
    ov0 = _overlap(s, e, lo, hi)
    ov = ov0 - coverage(cs_, ce_, np.clip(s, lo, hi), np.clip(e, lo, hi)) if cs_.size else ov0
    if forced is None:
        # a host range's time is its own: without the copy, sync and launch calls in
        # it (listed with their own class) as without the GPU's copies
        host = index.cause[idx] == int(Cause.HOST)
        calls = ~host & (ov0 > 0)
        if calls.any() and host.any():
            xs, xe = union_intervals(
                np.concatenate((np.maximum(s[calls], lo), np.clip(cs_, lo, hi))),
                np.concatenate((np.minimum(e[calls], hi), np.clip(ce_, lo, hi))),
            )
            ov = np.where(host, ov0 - coverage(xs, xe, np.clip(s, lo, hi), np.clip(e, lo, hi)), ov)
    # an OS call inside a runtime call is that call's time: the card names the cudaMalloc,
    # not the ioctl inside it (issue 43, Nsight exports of C++ programs)
    keep = (ov > 0) & ~_in_api_calls(trace, index, idx)
    sub, sub_ov = idx[keep], ov[keep]
    # untraced: covered by none of T's events (those under a GPU copy too) and no copy
    on = _overlap(s, e, lo, hi) > 0
    us, ue = union_intervals(
        np.concatenate((np.maximum(s[on], lo), np.clip(cs_, lo, hi))),
        np.concatenate((np.minimum(e[on], hi), np.clip(ce_, lo, hi))),
    )
    q = (hi - lo) - int(coverage(us, ue, np.array([lo]), np.array([hi]))[0])
    take = ~_containers(trace, sub, index, lo, hi)
    if forced == Cause.LAUNCH:  # the launch path is the call itself; enclosing ranges add nothing
        take &= (trace.kind[sub] == Kind.LAUNCH) | (sub == launch)
    own = index.cause[sub[take]].astype(np.int64)
    if forced is not None:
        classes = np.full(own.size, int(forced), dtype=np.int64)
    elif bound:
        classes = np.where(own == int(Cause.HOST), int(Cause.LAUNCH), own)
    else:
        classes = own
    return (sub[take], classes, sub_ov[take]), q


def _top_evidence(trace: Trace, listed: list[tuple[np.ndarray, np.ndarray, np.ndarray]], limit: int) -> list[Evidence]:
    """Evidence for the ``limit`` largest of the parts' items alone (every event of a
    lane may overlap every gap: 150k identical calls x 49 gaps). Ties keep the order
    the parts were walked in, as the stable sort of the caller expects."""
    evs = np.concatenate([x[0] for x in listed]) if listed else _E
    if not evs.size:
        return []
    causes = np.concatenate([x[1] for x in listed])
    ovs = np.concatenate([x[2] for x in listed]).astype(np.int64)
    top = np.lexsort((np.arange(evs.size), evs, -ovs))[:limit]
    return [
        Evidence(
            ev, trace.name(ev), int(trace.lane[ev]), Cause(c), int(o), int(trace.bytes[ev]), bool(trace.pageable[ev])
        )
        for ev, c, o in zip(evs[top].tolist(), causes[top].tolist(), ovs[top].tolist())
    ]


def evidence_for_gap(
    trace: Trace, gaps: Gaps, i: int, index: EvidenceIndex, limit: int = 20, copies: Sequence[Evidence] | None = None
) -> tuple[Evidence, ...]:
    """Evidence list of gap ``i`` (see the module docstring): names verbatim, lane,
    overlap in ns, bytes, pageable; largest overlap first, at most ``limit``. Host
    ranges that merely contain listed deeper events (``CONTAINER_MIN_SHARE``) are left
    out of the list when other evidence exists (not out of the class totals).
    ``copies``: ``gpu_copies_of_gap`` of the gap, when already computed."""
    a, b = int(gaps.start_ns[i]), int(gaps.end_ns[i])
    T = gaps.thread_of(i)
    queued = bool(gaps.queued[i]) if gaps.queued is not None else False
    lf = int(gaps.launch_from_ns[i]) if gaps.launch_from_ns is not None else b
    sf = int(gaps.sync_from_ns[i]) if gaps.sync_from_ns is not None else lf
    own_copies = list(copies) if copies is not None else gpu_copies_of_gap(trace, gaps, i, index)
    if queued:
        out = own_copies + _queued_evidence(trace, gaps, i)
        out.sort(key=lambda e: -e.overlap_ns)
        return tuple(out[:limit])
    out = own_copies
    # GPU copy time is the copy's, not the thread's (the partition puts copies first)
    cs_, ce_ = (
        union_intervals(
            np.array([trace.start_ns[e.event] for e in out], dtype=np.int64),
            np.array([index.end[e.event] for e in out], dtype=np.int64),
        )
        if out
        else (_E, _E)
    )
    if T < 0:
        out.sort(key=lambda e: -e.overlap_ns)
        return tuple(out[:limit])
    cn = gaps.class_ns[i] if gaps.class_ns is not None else None
    bound = (
        cn is not None
        and gaps.cause[i] == Cause.LAUNCH
        and int(cn[int(Cause.HOST)]) == 0
        and (gaps.episode[i] >= 0 or (b - a) <= Params().launch_gap_max_ns)
    )
    late = gaps.launch[i] >= 0 and gaps.lateness_ns[i] > 0
    trailing = gaps.edge is not None and gaps.edge[i] == EDGE_TRAILING
    head_quiet_cause = Cause.LAUNCH if bound else (Cause.HOST if (late or trailing) else Cause.UNCLASSIFIED)
    idx = index.overlapping(trace, T, a, b)
    idx = idx[index.cause[idx] != NO_CLASS]
    qu = int(gaps.queued_until_ns[i]) if gaps.queued_until_ns is not None else b
    parts = ((a, sf, None), (sf, lf, Cause.SYNC), (lf, qu, Cause.LAUNCH))
    listed: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    quiet: dict[Cause, int] = {}
    for lo, hi, forced in parts:
        if hi <= lo:
            continue
        got, q = _part_items(trace, index, idx, (cs_, ce_), (lo, hi), forced, bound, int(gaps.launch[i]))
        listed.append(got)
        qc = forced if forced is not None else head_quiet_cause
        if q > 0:
            quiet[qc] = quiet.get(qc, 0) + q
    out.extend(_top_evidence(trace, listed, limit))
    for c, q in quiet.items():
        out.append(Evidence(-1, NO_EVENTS, T, c, int(q)))
    if qu < b:  # the op then sat in the queue: what it waited on, as in a queued gap
        out.extend(_queued_evidence(trace, gaps, i))
    out.sort(key=lambda e: (-e.overlap_ns, e.event))
    return tuple(out[:limit])


#: Up to this many distinct host depths ``_containers`` loops over depths (a few numpy
#: calls each); above it, one sweep over the nesting (30k identical nested ops made the
#: loop O(depths x events) per gap: 55 s for one report).
CONTAINER_DEPTH_LOOP_MAX = 16


def _containers(trace: Trace, idx: np.ndarray, index: EvidenceIndex, a: int, b: int) -> np.ndarray:
    """Bool mask over ``idx`` (events of one lane): host events whose overlap with
    [a, b) is covered by deeper events of ``idx`` nested in it for at least
    ``CONTAINER_MIN_SHARE`` of it (e.g. an enclosing ``## forward ##`` range around the
    ATen ops that did the work). Loop over distinct depths when few
    (``CONTAINER_DEPTH_LOOP_MAX``), else ``_nested_cover`` (O(n log n)), which gives
    the same coverage when the events nest properly; the loop otherwise."""
    out = np.zeros(idx.size, dtype=bool)
    if idx.size < 2:
        return out
    host = index.cause[idx] == int(Cause.HOST)
    cs, ce = np.maximum(trace.start_ns[idx], a), np.minimum(index.end[idx], b)
    depth = trace.depth[idx].astype(np.int64)
    levels = np.unique(depth[host])
    if levels.size > CONTAINER_DEPTH_LOOP_MAX:
        cov = _nested_cover(cs, ce, depth)
        if cov is not None:
            return host & (cov >= CONTAINER_MIN_SHARE * (ce - cs))
    for d in levels.tolist():
        rows = np.flatnonzero(host & (depth == d))
        rows = rows[np.argsort(cs[rows], kind="stable")]
        # a deeper event counts only inside a row of this depth: one that encloses the
        # row is deeper by the trace's depths only where the nesting is not proper
        # (bs_32_rank0's `capture_32_DECODE` at depth 25 around calls at depth 23)
        deeper = np.flatnonzero(depth > d)
        k = np.searchsorted(cs[rows], cs[deeper], side="right") - 1
        ok = k >= 0
        ok[ok] = ce[deeper[ok]] <= ce[rows[k[ok]]]
        deeper = deeper[ok]
        if not deeper.size:
            continue
        us, ue = union_intervals(cs[deeper], ce[deeper])
        cov = coverage(us, ue, cs[rows], ce[rows])
        out[rows] = cov >= CONTAINER_MIN_SHARE * (ce[rows] - cs[rows])
    return out


def _nested_cover(cs: np.ndarray, ce: np.ndarray, depth: np.ndarray) -> np.ndarray | None:
    """Per interval [cs, ce) (int64 ns, non-empty), the length of it covered by the
    intervals of greater ``depth``: one sweep in start order with a stack of the open
    intervals, each interval's length added to its innermost enclosing one when deeper
    (properly nested siblings are disjoint, so the sum is the union). A nested interval
    of the same depth adds nothing (depths saturate, ``Trace.depth``, so 50k identical
    nested ops end in one depth). None when two intervals overlap without nesting, a
    nested one is shallower, or a deeper one sits under a chain of equal depths (the
    caller then takes the union per depth). O(n log n) for the sort, O(n) the sweep."""
    order = np.lexsort((depth, -ce, cs))  # start, then the longer (outer) one first
    s_l, e_l, d_l = cs.tolist(), ce.tolist(), depth.tolist()
    cov = [0] * len(s_l)
    parent = [-1] * len(s_l)
    stack: list[int] = []
    for i in order.tolist():
        s, e, d = s_l[i], e_l[i], d_l[i]
        while stack and e_l[stack[-1]] <= s:
            stack.pop()
        if stack:
            p = stack[-1]
            dp = d_l[p]
            if e > e_l[p] or d < dp:
                return None
            if d > dp:
                if parent[p] >= 0 and d_l[parent[p]] == dp:
                    return None
                cov[p] += e - s
            parent[i] = p
        stack.append(i)
    return np.asarray(cov, dtype=np.int64)


def step_ranges_overlapping(trace: Trace, exclude: np.ndarray | None, lane: int, a: int, b: int) -> np.ndarray:
    """int64 event indices, in start order, of the step ranges (``exclude``: the
    step-annotation mask, ``gapscope.analysis.steps.step_annotation_mask``) on ``lane``
    that overlap [a, b); empty without any."""
    if exclude is None or lane < 0 or not exclude.any():
        return np.zeros(0, dtype=np.int64)
    sl = trace.lane_slice(lane)
    m = np.flatnonzero(exclude[sl]) + sl.start  # the lane is in start order
    return m[(trace.start_ns[m] < b) & (trace.start_ns[m] + trace.dur_ns[m] > a)].astype(np.int64)


def enclosing_step_range(trace: Trace, exclude: np.ndarray | None, lane: int, a: int, b: int) -> int:
    """Event index of the innermost step range (see ``step_ranges_overlapping``) on
    ``lane`` overlapping [a, b) the most, or -1. Used to say "inside `ProfilerStep#8`
    with no finer event recorded"."""
    m = step_ranges_overlapping(trace, exclude, lane, a, b)
    if m.size == 0:
        return -1
    ov = np.minimum(trace.start_ns[m] + trace.dur_ns[m], b) - np.maximum(trace.start_ns[m], a)
    best = np.lexsort((-trace.depth[m], -ov))[0]
    return int(m[best])
