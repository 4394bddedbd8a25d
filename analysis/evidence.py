"""Evidence lists of single gaps, computed on demand (design: "Definitions" → cause
classes: "the evidence list (names, thread, overlap in ns, bytes)").

The list follows the classification's time partition of the gap
(``gapscope.analysis.classify``), so each item's class is the class its time was given:

- a queued (blocked) gap: the GPU copies of the device in it (copy) and what the queued
  op waited on (dependency): the stream wait, the collective, the graph launch; no CPU
  activity, since none of it could be the cause;
- a starved gap: the GPU copies of the device in it, and the events of the launching
  thread T (never another thread), each split over the partition: its time before the
  sync cliff with its own class (host, copy, launch, sync for a wait that began inside
  the gap; launch too for host work in a launch-bound gap),
  its time in the sync cliff as sync, its time in the exposed launch path as launch;
  plus the synthetic "(no events recorded on this thread)" for uninstrumented time on T
  in each part.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gapscope.analysis.busy import coverage, union_intervals
from gapscope.analysis.evidence_kinds import NO_CLASS, event_cause, evidence_end
from gapscope.analysis.gaps import EDGE_TRAILING
from gapscope.analysis.types import Cause, Evidence, Gaps, Params, WaitKind
from gapscope.parsers.model import CopyKind, Kind, Trace

__all__ = ["EvidenceIndex", "evidence_for_gap", "NO_EVENTS", "enclosing_step_range", "CONTAINER_MIN_SHARE"]

_E = np.zeros(0, dtype=np.int64)


@dataclasses.dataclass(eq=False)
class EvidenceIndex:
    """Per-event lookups for on-demand evidence lists, built once (O(n)):
    ``cause`` (``event_cause``), ``end`` (``evidence_end``), ``runmax`` (running max of
    ``end`` within each lane, so the events overlapping [a, b) on a lane are found with
    two ``searchsorted`` calls and a scan of the overlapping ones only)."""

    cause: np.ndarray
    end: np.ndarray
    runmax: np.ndarray

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

    def overlapping(self, trace: Trace, lane: int, a: int, b: int) -> np.ndarray:
        """Event indices on ``lane`` overlapping [a, b) (by evidence end)."""
        sl = trace.lane_slice(lane)
        hi = sl.start + int(np.searchsorted(trace.start_ns[sl], b, side="left"))
        lo = sl.start + int(np.searchsorted(self.runmax[sl], a, side="right"))
        if hi <= lo:
            return _E
        idx = np.arange(lo, hi, dtype=np.int64)
        return idx[self.end[lo:hi] > a]


#: Name of the synthetic evidence for time with no event on the launching thread.
NO_EVENTS = "(no events recorded on this thread)"

#: A host range whose time in the gap is covered by deeper events on its thread for at
#: least this share merely contains the work: the deeper events are the evidence.
CONTAINER_MIN_SHARE = 0.9


def _overlap(s: np.ndarray, e: np.ndarray, a: int, b: int) -> np.ndarray:
    return np.maximum(np.minimum(e, b) - np.maximum(s, a), 0)


def _gpu_copies(trace: Trace, index: EvidenceIndex, dev: int, a: int, b: int, sync_until: int) -> list[Evidence]:
    """GPU memcpy/memset records of ``dev`` in [a, b): copy, except a small D2H copy
    (the ``.item()`` signature) before ``sync_until`` (the starved part), which is sync."""
    out: list[Evidence] = []
    small_max = Params().small_copy_max_bytes
    for ln in trace.lanes:
        if not (ln.is_gpu and ln.device == dev):
            continue
        idx = index.overlapping(trace, ln.index, a, b)
        idx = idx[np.isin(trace.kind[idx], np.array([Kind.MEMCPY, Kind.MEMSET], dtype=np.int8))]
        for ev in idx.tolist():
            s, e = int(trace.start_ns[ev]), int(index.end[ev])
            small = trace.copy_kind[ev] == CopyKind.D2H and 0 <= trace.bytes[ev] <= small_max
            sync_part = max(min(e, sync_until, b) - max(s, a), 0) if small else 0
            copy_part = max(min(e, b) - max(s, a), 0) - sync_part
            for c, ov in ((Cause.SYNC, sync_part), (Cause.COPY, copy_part)):
                if ov > 0:
                    out.append(
                        Evidence(ev, trace.name(ev), ln.index, c, ov, int(trace.bytes[ev]), bool(trace.pageable[ev]))
                    )
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


def evidence_for_gap(trace: Trace, gaps: Gaps, i: int, index: EvidenceIndex, limit: int = 20) -> tuple[Evidence, ...]:
    """Evidence list of gap ``i`` (see the module docstring): names verbatim, lane,
    overlap in ns, bytes, pageable; largest overlap first, at most ``limit``. Host
    ranges that merely contain listed deeper events (``CONTAINER_MIN_SHARE``) are left
    out of the list when other evidence exists (not out of the class totals)."""
    a, b = int(gaps.start_ns[i]), int(gaps.end_ns[i])
    dev = int(gaps.device[i])
    T = int(gaps.thread_lane[i]) if gaps.thread_lane is not None else int(gaps.launch_lane[i])
    queued = bool(gaps.queued[i]) if gaps.queued is not None else False
    lf = int(gaps.launch_from_ns[i]) if gaps.launch_from_ns is not None else b
    sf = int(gaps.sync_from_ns[i]) if gaps.sync_from_ns is not None else lf
    if queued:
        out = _gpu_copies(trace, index, dev, a, b, a) + _queued_evidence(trace, gaps, i)
        out.sort(key=lambda e: -e.overlap_ns)
        return tuple(out[:limit])
    out = _gpu_copies(trace, index, dev, a, b, lf)
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
    s, e = trace.start_ns[idx], index.end[idx]
    qu = int(gaps.queued_until_ns[i]) if gaps.queued_until_ns is not None else b
    parts = ((a, sf, None), (sf, lf, Cause.SYNC), (lf, qu, Cause.LAUNCH))
    listed: list[tuple[int, Cause, int]] = []
    quiet: dict[Cause, int] = {}
    for lo, hi, forced in parts:
        if hi <= lo:
            continue
        ov = _overlap(s, e, lo, hi)
        if cs_.size:
            ov = ov - coverage(cs_, ce_, np.clip(s, lo, hi), np.clip(e, lo, hi))
        keep = ov > 0
        sub, sub_ov = idx[keep], ov[keep]
        us, ue = union_intervals(np.maximum(s[keep], lo), np.minimum(e[keep], hi))
        q = (hi - lo) - int(coverage(us, ue, np.array([lo]), np.array([hi]))[0])
        qc = forced if forced is not None else head_quiet_cause
        if q > 0:
            quiet[qc] = quiet.get(qc, 0) + q
        contained = _containers(trace, sub, index, lo, hi)
        for ev, o, cont in zip(sub.tolist(), sub_ov.tolist(), contained.tolist()):
            if cont:
                continue
            own = Cause(int(index.cause[ev]))
            if forced is not None:
                c = forced
            elif bound and own == Cause.HOST:
                c = Cause.LAUNCH
            else:
                c = own
            if forced == Cause.LAUNCH and trace.kind[ev] != Kind.LAUNCH and ev != int(gaps.launch[i]):
                continue  # the launch path is the call itself; enclosing ranges add nothing
            listed.append((ev, c, o))
    for ev, c, o in listed:
        out.append(
            Evidence(ev, trace.name(ev), int(trace.lane[ev]), c, int(o), int(trace.bytes[ev]), bool(trace.pageable[ev]))
        )
    for c, q in quiet.items():
        out.append(Evidence(-1, NO_EVENTS, T, c, int(q)))
    if qu < b:  # the op then sat in the queue: what it waited on, as in a queued gap
        out.extend(_queued_evidence(trace, gaps, i))
    out.sort(key=lambda e: (-e.overlap_ns, e.event))
    return tuple(out[:limit])


def _containers(trace: Trace, idx: np.ndarray, index: EvidenceIndex, a: int, b: int) -> np.ndarray:
    """Bool mask over ``idx`` (events of one lane): host events whose overlap with
    [a, b) is covered by deeper events of ``idx`` nested in it for at least
    ``CONTAINER_MIN_SHARE`` of it (e.g. an enclosing ``## forward ##`` range around the
    ATen ops that did the work). Loop over distinct depths."""
    out = np.zeros(idx.size, dtype=bool)
    if idx.size < 2:
        return out
    host = index.cause[idx] == int(Cause.HOST)
    cs, ce = np.maximum(trace.start_ns[idx], a), np.minimum(index.end[idx], b)
    depth = trace.depth[idx].astype(np.int64)
    for d in np.unique(depth[host]).tolist():
        deeper = depth > d
        if not deeper.any():
            continue
        us, ue = union_intervals(cs[deeper], ce[deeper])
        rows = np.flatnonzero(host & (depth == d))
        cov = coverage(us, ue, cs[rows], ce[rows])
        out[rows] = cov >= CONTAINER_MIN_SHARE * (ce[rows] - cs[rows])
    return out


def enclosing_step_range(trace: Trace, exclude: np.ndarray | None, lane: int, a: int, b: int) -> int:
    """Event index of the innermost step range (``exclude``: the step-annotation mask,
    ``gapscope.analysis.steps.step_annotation_mask``) on ``lane`` overlapping [a, b) the most,
    or -1. Used to say "inside `ProfilerStep#8` with no finer event recorded"."""
    if exclude is None or lane < 0 or not exclude.any():
        return -1
    sl = trace.lane_slice(lane)
    m = np.flatnonzero(exclude[sl]) + sl.start
    if m.size == 0:
        return -1
    ov = np.minimum(trace.start_ns[m] + trace.dur_ns[m], b) - np.maximum(trace.start_ns[m], a)
    ok = ov > 0
    if not ok.any():
        return -1
    m, ov = m[ok], ov[ok]
    best = np.lexsort((-trace.depth[m], -ov))[0]
    return int(m[best])
