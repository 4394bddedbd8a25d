"""Evidence lists of single gaps, computed on demand (design: "Definitions" → cause
classes: "Keep the evidence list (names, thread, overlap in ns, bytes)").

Per gap: sync events on the CPU threads of T's process and the device's ``cuda_sync``
records, copy/launch/host events on T, GPU copies of the device inside the gap, the
stream wait behind which the queued next op waited (``gapscope.analysis.waits``), and the
synthetic "(no events recorded on this thread)" for uninstrumented time on T, each with
the class the classification gave it (``gapscope.analysis.classify``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gapscope.parsers.model import CopyKind, Kind, Trace

from gapscope.analysis.busy import coverage, union_intervals
from gapscope.analysis.evidence_kinds import NO_CLASS, event_cause
from gapscope.analysis.gaps import EDGE_TRAILING
from gapscope.analysis.types import Cause, Evidence, Gaps, Params

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
    #: Lanes holding at least one sync-class event: the only lanes other than T whose
    #: events can be evidence, so a process with 100k threads is not scanned per gap.
    sync_lanes: frozenset = frozenset()

    @classmethod
    def build(cls, trace: Trace, valid: np.ndarray | None = None, exclude: np.ndarray | None = None) -> "EvidenceIndex":
        if valid is None:
            valid = np.ones(len(trace), dtype=bool)
        from gapscope.analysis.classify import evidence_end

        end = evidence_end(trace)
        runmax = end.copy()
        for k in range(len(trace.lanes)):
            a, b = int(trace.lane_offsets[k]), int(trace.lane_offsets[k + 1])
            if b > a:
                np.maximum.accumulate(runmax[a:b], out=runmax[a:b])
        cause = event_cause(trace, valid, exclude)
        sync_lanes = frozenset(np.unique(trace.lane[cause == int(Cause.SYNC)]).tolist())
        return cls(cause, end, runmax, sync_lanes)

    def overlapping(self, trace: Trace, lane: int, a: int, b: int) -> np.ndarray:
        """Event indices on ``lane`` overlapping [a, b) (by evidence end)."""
        sl = trace.lane_slice(lane)
        hi = sl.start + int(np.searchsorted(trace.start_ns[sl], b, side="left"))
        lo = sl.start + int(np.searchsorted(self.runmax[sl], a, side="right"))
        if hi <= lo:
            return _E
        idx = np.arange(lo, hi, dtype=np.int64)
        return idx[self.end[lo:hi] > a]


def evidence_for_gap(trace: Trace, gaps: Gaps, i: int, index: EvidenceIndex, limit: int = 20) -> tuple[Evidence, ...]:
    """Evidence list of gap ``i``: sync events on the process's CPU threads and the
    device's ``cuda_sync`` records, copy/launch/host events on T, GPU copies of the
    device inside the gap; names verbatim, overlap in ns, bytes, pageable. Largest
    overlap first, at most ``limit``. Host ranges that enclose the whole gap are left
    out of the list when other evidence exists (not out of the class totals)."""
    a, b = int(gaps.start_ns[i]), int(gaps.end_ns[i])
    dev = int(gaps.device[i])
    T = int(gaps.thread_lane[i]) if gaps.thread_lane is not None else int(gaps.launch_lane[i])
    lanes = trace.lanes
    cand: list[np.ndarray] = []
    if T >= 0:
        pid = lanes[T].pid
        cand.append(index.overlapping(trace, T, a, b))
        for k in sorted(index.sync_lanes):
            ln = lanes[k]
            if k != T and not ln.is_gpu and ln.pid == pid:
                cand.append(index.overlapping(trace, k, a, b))
    for ln in lanes:
        if ln.is_gpu and ln.device == dev:
            cand.append(index.overlapping(trace, ln.index, a, b))
    idx = np.concatenate(cand) if cand else _E
    if idx.size == 0:
        return _with_quiet(gaps, i, [], b - a, T, a, b, trace)
    sub_cause = index.cause[idx]
    kind = trace.kind[idx]
    gpu_copy = np.isin(kind, np.array([Kind.MEMCPY, Kind.MEMSET], dtype=np.int8))
    on_t = trace.lane[idx] == T
    keep = gpu_copy | (sub_cause == int(Cause.SYNC)) | (on_t & (sub_cause != NO_CLASS))
    idx, sub_cause, gpu_copy = idx[keep], sub_cause[keep], gpu_copy[keep]
    s = trace.start_ns[idx]
    e = index.end[idx]
    ov = np.minimum(e, b) - np.maximum(s, a)
    pos = ov > 0
    idx, sub_cause, gpu_copy, s, e, ov = idx[pos], sub_cause[pos], gpu_copy[pos], s[pos], e[pos], ov[pos]
    quiet = _quiet_ns(trace, idx, index, a, b)
    if idx.size == 0:
        return _with_quiet(gaps, i, [], quiet, T, a, b, trace)
    enclosing = (s <= a) & (e >= b) & (sub_cause == int(Cause.HOST))
    enclosing |= _containers(trace, idx, sub_cause, gpu_copy, s, e, a, b, T)
    if idx.size > 1 and (~enclosing).any():
        keep = ~enclosing
        idx, sub_cause, gpu_copy, ov = idx[keep], sub_cause[keep], gpu_copy[keep], ov[keep]
    o = np.lexsort((trace.start_ns[idx], -ov))[:limit]
    out: list[Evidence] = []
    small_max = Params().small_copy_max_bytes
    for j in o:
        ev = int(idx[j])
        c = Cause.COPY if gpu_copy[j] else Cause(int(sub_cause[j]))
        if gpu_copy[j] and trace.copy_kind[ev] == CopyKind.D2H and 0 <= trace.bytes[ev] <= small_max:
            c = Cause.SYNC
        out.append(Evidence(ev, trace.name(ev), int(trace.lane[ev]), c, int(ov[j]),
                            int(trace.bytes[ev]), bool(trace.pageable[ev])))
    return _with_quiet(gaps, i, out, quiet, T, a, b, trace)


#: A host range whose time in the gap is covered by deeper events on its thread for at
#: least this share merely contains the work: the deeper events are the evidence (a range
#: with real time of its own, e.g. a DataLoader `__next__` whose collate Python is about
#: half uninstrumented, stays).
CONTAINER_MIN_SHARE = 0.9


def _containers(trace: Trace, idx: np.ndarray, sub_cause: np.ndarray, gpu_copy: np.ndarray,
                s: np.ndarray, e: np.ndarray, a: int, b: int, T: int) -> np.ndarray:
    """Bool mask over ``idx``: host events on T whose overlap with [a, b) is covered by
    deeper listed events on T (greater ``depth``, nested inside it) for at least
    ``CONTAINER_MIN_SHARE`` of it (e.g. an enclosing ``## forward ##`` range around the
    ATen ops that did the work). Loop over distinct depths, coverage by prefix sums."""
    out = np.zeros(idx.size, dtype=bool)
    on_t = (trace.lane[idx] == T) & ~gpu_copy
    host = on_t & (sub_cause == int(Cause.HOST))
    if not host.any() or on_t.sum() < 2:
        return out
    cs, ce = np.maximum(s, a), np.minimum(e, b)
    depth = trace.depth[idx].astype(np.int64)
    for d in np.unique(depth[host]).tolist():
        deeper = on_t & (depth > d)
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


def _with_quiet(gaps: Gaps, i: int, out: list, quiet: int, T: int, a: int, b: int, trace: Trace | None = None) -> tuple[Evidence, ...]:
    """Append the synthetic "no events" evidence (event -1) for uninstrumented time on
    T, with the class that time was given (launch in launch-bound gaps, host when the
    launch came late or at a step's trailing edge, else unclassified)."""
    if quiet > 0 and T >= 0:
        late = gaps.launch[i] >= 0 and gaps.lateness_ns[i] > 0
        trailing = gaps.edge is not None and gaps.edge[i] == EDGE_TRAILING
        launch_bound = (gaps.episode[i] >= 0) or (Cause(int(gaps.cause[i])) == Cause.LAUNCH and b - a <= Params().launch_gap_max_ns)
        c = Cause.LAUNCH if launch_bound else (Cause.HOST if (late or trailing) else Cause.UNCLASSIFIED)
        w = int(gaps.wait_event[i]) if gaps.wait_event is not None else -1
        if c == Cause.UNCLASSIFIED and w >= 0 and trace is not None:
            # the queued op waited behind this stream wait: it explains the quiet time
            out.append(Evidence(w, trace.name(w), int(trace.lane[w]), Cause.SYNC, int(quiet)))
            out.sort(key=lambda e: -e.overlap_ns)
            return tuple(out)
        out.append(Evidence(-1, NO_EVENTS, T, c, int(quiet)))
        out.sort(key=lambda e: -e.overlap_ns)
    return tuple(out)


#: Name of the synthetic evidence for time with no event on the launching thread.
NO_EVENTS = "(no events recorded on this thread)"


def _quiet_ns(trace: Trace, idx: np.ndarray, index: "EvidenceIndex", a: int, b: int) -> int:
    """ns of [a, b) not covered by any listed evidence event on the CPU (T's events and
    the process's syncs): uninstrumented time."""
    cpu = np.array([not trace.lanes[int(k)].is_gpu for k in trace.lane[idx]], dtype=bool) if idx.size else np.zeros(0, bool)
    sel = idx[cpu]
    if sel.size == 0:
        return b - a
    us, ue = union_intervals(trace.start_ns[sel], index.end[sel])
    return int((b - a) - coverage(us, ue, np.array([a]), np.array([b]))[0])


