"""The facts a card's advice is chosen from ("Cards as facts and rules" in the design),
computed once per occurrence (a gap, or a group's representative occurrence) by
``card_facts``: the class and its evidence, the thread's stream captures, the hot frame,
the one-time flag, the slow launch call and whether its kernel ran before, the lazy
loading on the thread, the launching thread's CPU samples (its hottest frames), and the
program kind (``ProgramKind``: which vocabulary the
advice may use). The rules (``gapscope.analysis.card.rules``) read these and nothing
else of the diagnosis but the helpers that word them.
"""

from __future__ import annotations

import dataclasses
import re
import weakref
from typing import NamedTuple

import numpy as np

from gapscope.analysis.busy import union_intervals
from gapscope.analysis.card.program import ProgramKind, program_kind
from gapscope.analysis.card.samples import gap_samples
from gapscope.analysis.card.why import HotFrame, StepWait, is_wait, slow_launch
from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.evidence_kinds import (
    LAZY_LOADING_MIN_SHARE,
    GraphCapture,
    blocking_copy_calls,
    earlier_runs,
    graph_captures,
    lazy_loading_in,
)
from gapscope.analysis.types import Cause, Evidence, GapSamples
from gapscope.parsers.model import Kind

__all__ = [
    "Facts",
    "GapCapture",
    "card_facts",
    "alloc_calls",
    "ALLOC_CALL_RE",
    "ALLOC_CHURN_MIN_SHARE",
    "gap_capture",
    "enclosing_events",
    "step_waits",
]


#: A gap is told as a graph capture when captures on its thread cover this share of it.
CAPTURE_MIN_SHARE = 0.5


class GapCapture(NamedTuple):
    """The thread's stream captures in an occurrence of a gap (``gap_capture``), ns
    summed over its rows. ``capture``: the one overlapping it most (whether it is warm-up
    decides the story); ``first``: the first of them (the sentence names its begin and
    end calls); ``capturing``: how many it holds past their begin call, with
    ``capturing_ns`` of it there and their ``launches``; ``entering_ns``: its time in
    their ``torch.cuda.graph`` entries before the begin calls (``GraphCapture.enter_ns``)."""

    capture: GraphCapture
    first: GraphCapture
    capturing: int
    capturing_ns: int
    entering_ns: int
    launches: int


def gap_capture(diag: Diagnosis, rows: np.ndarray) -> GapCapture | None:
    """The stream captures (``evidence_kinds.graph_captures``, each from its
    ``enter_ns``) on the launching thread of the occurrence ``rows``, when they cover at
    least ``CAPTURE_MIN_SHARE`` of it; else None."""
    g = diag.gaps
    lane = g.thread_of(int(rows[0]))
    caps = [c for c in graph_captures(diag.trace) if c.lane == lane] if lane >= 0 else []
    if not caps:
        return None
    windows = [(int(g.start_ns[r]), int(g.end_ns[r])) for r in rows]

    def overlap(lo: int, hi: int) -> int:
        return sum(max(0, min(b, hi) - max(a, lo)) for a, b in windows)

    # disjoint on a lane (``graph_captures``), so their overlaps add up
    parts = [(c, overlap(c.start_ns, c.end_ns), overlap(c.enter_ns, c.start_ns)) for c in caps]
    parts = [p for p in parts if p[1] + p[2] > 0]
    covered = sum(inside + entering for _, inside, entering in parts)
    if not parts or covered < CAPTURE_MIN_SHARE * sum(b - a for a, b in windows):
        return None
    best = max(parts, key=lambda p: p[1] + p[2])[0]
    inside = [p for p in parts if p[1] > 0]
    return GapCapture(
        best,
        parts[0][0],
        len(inside),
        sum(p[1] for p in inside),
        sum(p[2] for p in parts),
        sum(p[0].launches for p in inside),
    )


def _lazy_loading_ns(diag: Diagnosis, rows: np.ndarray) -> tuple[int, bool]:
    """(ns, in_call) of module loading in the occurrence ``rows``
    (``evidence_kinds.lazy_loading_in``: inside the call holding it, else in it)."""
    g = diag.gaps
    return lazy_loading_in(diag.trace, g.thread_of(int(rows[0])), g.start_ns[rows], g.end_ns[rows])


#: A range on the launching thread is an enclosing framework range of an occurrence when
#: it covers at least this share of it.
ENCLOSING_MIN_SHARE = 0.5


def enclosing_events(diag: Diagnosis, rows: np.ndarray) -> tuple[int, ...]:
    """The events on the launching thread of the occurrence ``rows`` that cover at
    least ``ENCLOSING_MIN_SHARE`` of it (a framework range such as the optimizer's step
    or Dynamo's cache lookup, with the ops it runs inside), outermost first.
    Vectorised over the thread's events."""
    trace, g = diag.trace, diag.gaps
    lane = g.thread_of(int(rows[0]))
    if lane < 0:
        return ()
    sl = trace.lane_slice(lane)
    st = trace.start_ns[sl]
    en = st + trace.dur_ns[sl]
    cover = np.zeros(st.size, dtype=np.int64)
    for r in rows.tolist():
        a, b = int(g.start_ns[r]), int(g.end_ns[r])
        cover += np.maximum(np.minimum(en, b) - np.maximum(st, a), 0)
    total = int(g.dur_ns[rows].sum())
    hit = np.flatnonzero(cover >= ENCLOSING_MIN_SHARE * max(total, 1))
    hit = hit[np.argsort(st[hit], kind="stable")]
    return tuple(int(sl.start + k) for k in hit.tolist())


@dataclasses.dataclass(frozen=True, eq=False)
class Facts:
    """What the advice of one occurrence is chosen from (``card_facts``).

    ``rows``: the occurrence's gap indices (int64); ``cause``: its primary class;
    ``evidence``: its evidence, largest overlap first; ``dur_txt``: the figure the proof
    quotes; ``capture``: the thread's stream captures covering it, or None; ``hot``: the
    frame holding most of its host time, or None; ``one_time``: every gap of it is
    flagged one-time (``Gaps.one_time``); ``slow_launch``: it is mostly one slow launch
    call (``why.slow_launch``), whose kernel had run ``slow_runs_before`` times before
    (0: a first use; more: contention); ``lazy_loading_ns``: module loading on its
    thread inside it; ``program``: the trace's ``ProgramKind``; ``samples``: the
    launching thread's CPU samples inside it (``samples.gap_samples``; None when the
    trace has none)."""

    diag: Diagnosis
    rows: np.ndarray
    cause: Cause
    evidence: tuple[Evidence, ...]
    dur_txt: str
    capture: GapCapture | None
    hot: HotFrame | None
    one_time: bool
    slow_launch: bool
    slow_runs_before: int
    lazy_loading_ns: int
    lazy_in_call: bool
    program: ProgramKind
    samples: GapSamples | None = None
    #: every blocking wait of the thread in the occurrence's step, by name (sync
    #: occurrences only; ``step_waits``)
    step_waits: tuple[StepWait, ...] = ()
    #: the waits are of the step (else of the occurrence alone: no steps)
    waits_in_step: bool = False
    #: the thread's allocator calls in the occurrence's gaps (``alloc_calls``)
    allocs: tuple[tuple[str, int, int], ...] = ()

    @property
    def alloc_ns(self) -> int:
        """The thread's allocator time inside the occurrence's gaps, ns."""
        return sum(ns for _n, _c, ns in self.allocs)

    @property
    def allocation_churn(self) -> bool:
        """Allocator calls hold at least ``ALLOC_CHURN_MIN_SHARE`` of the occurrence's idle."""
        return self.alloc_ns > 0 and self.alloc_ns >= ALLOC_CHURN_MIN_SHARE * self.occurrence_ns

    @property
    def top(self) -> list[Evidence]:
        """The evidence items of the primary class that are events, largest first."""
        return [e for e in self.evidence if e.cause == self.cause and e.event >= 0]

    @property
    def module_loading(self) -> bool:
        """The occurrence is module loading: the call holding it loaded GPU code (a
        function's first call), or loading covers ``LAZY_LOADING_MIN_SHARE`` of it."""
        return self.lazy_loading_ns > 0 and (
            self.lazy_in_call or self.lazy_loading_ns >= LAZY_LOADING_MIN_SHARE * self.occurrence_ns
        )

    @property
    def occurrence_ns(self) -> int:
        """The occurrence's idle, ns."""
        return int(self.diag.gaps.dur_ns[self.rows].sum())


def _step_window(diag: Diagnosis, rows: np.ndarray) -> tuple[int, int, bool]:
    """[start, end) ns of the step holding the occurrence's first gap, and True; else
    (no steps, or the gap outside them) the occurrence's own span, and False."""
    g, steps = diag.gaps, diag.steps
    a = int(g.start_ns[rows].min())
    if steps is not None and len(steps):
        k = int(steps.index_of(np.array([a]))[0])
        if k >= 0:
            return int(steps.start_ns[k]), int(steps.end_ns[k]), True
    return a, int(g.end_ns[rows].max()), False


def _user_range(diag: Diagnosis, ev: int) -> str:
    """Name of the innermost user range (``Kind.ANNOTATION``, not a step range) around
    event ``ev`` on its lane, or "". Searches the lane's user ranges only
    (``_lane_ranges``): a scan of the whole lane per call was 8 s of a 5M-event
    trace's findings (4,673 calls from ``step_waits``)."""
    trace = diag.trace
    s, e = int(trace.start_ns[ev]), int(trace.start_ns[ev] + trace.dur_ns[ev])
    ranges, starts, ends = _lane_ranges(diag, int(trace.lane[ev]))
    hi = int(np.searchsorted(starts, s, side="right"))
    cand = ranges[:hi][ends[:hi] >= e]
    cand = cand[cand != ev]
    return trace.name(int(cand[np.argmax(trace.depth[cand])])) if cand.size else ""


def _lane_ranges(diag: Diagnosis, lane: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The user ranges of ``lane`` (event indices, int64, in start order, excluded
    events left out) with their start and end ns (int64); computed once per lane and
    kept in ``diag.derived["user_ranges"]``."""
    kept = diag.derived.setdefault("user_ranges", {})
    assert isinstance(kept, dict)
    got = kept.get(lane)
    if got is None:
        trace = diag.trace
        sl = trace.lane_slice(lane)
        idx = sl.start + np.flatnonzero(trace.kind[sl] == int(Kind.ANNOTATION))
        if diag._exclude is not None:
            idx = idx[~diag._exclude[idx]]
        st = trace.start_ns[idx]
        got = kept[lane] = (idx, st, st + trace.dur_ns[idx])
    return got


def step_waits(diag: Diagnosis, rows: np.ndarray) -> tuple[StepWait, ...]:
    """Every blocking wait of the occurrence's thread in its step (``_step_window``:
    the step holding its first gap, else the occurrence itself), by name and user range
    (``StepWait``), in the order of their first call: the waits of class sync
    (``event_cause``) that are waits themselves (``why.is_wait``) and the blocking copy
    calls, outermost only (a ``cudaStreamSynchronize`` inside ``aten::item`` is that
    read, not a second one), each counted by its overlap with the GPU's idle in the
    window (``_idle_intervals``): a wait while the GPU is busy costs no idle, and one
    that began after the next launch counts only until that kernel starts (audit 3: a
    139 ms ``cudaEventSynchronize`` overlapping a gap by 0.36 ms was named as 139 ms).
    Waits with no overlap are left out. Design: "The card" (every blocking sync of the
    step named; issue 43)."""
    g, trace = diag.gaps, diag.trace
    lane = int(g.thread_lane[int(rows[0])]) if g.thread_lane is not None else -1
    if lane < 0:
        return ()
    lo, hi, _ = _step_window(diag, rows)
    idle = _idle_intervals(diag, rows, lo, hi)
    sl = trace.lane_slice(lane)
    st = trace.start_ns[sl]
    en = st + trace.dur_ns[sl]
    idx = sl.start + np.flatnonzero((st < hi) & (en > lo))
    cause = diag.evidence_index().cause
    idx = idx[(cause[idx] == int(Cause.SYNC)) | blocking_copy_calls(trace)[idx]]
    idx = np.array([k for k in idx.tolist() if is_wait(trace, k)], dtype=np.int64)
    if idx.size == 0:
        return ()
    s, e = trace.start_ns[idx], trace.start_ns[idx] + trace.dur_ns[idx]
    outer = e > np.concatenate(([np.iinfo(np.int64).min], np.maximum.accumulate(e)[:-1]))  # not inside an earlier one
    idx, s, e = idx[outer], s[outer], e[outer]
    idle_ns = _overlap_ns(s, e, idle)
    gaps = [(int(g.start_ns[r]), int(g.end_ns[r])) for r in rows.tolist()]
    by: dict[tuple[int, str], StepWait] = {}
    for k, a, b, ns in zip(idx.tolist(), s.tolist(), e.tolist(), idle_ns.tolist()):
        if ns <= 0:
            continue
        key = (int(trace.name_id[k]), _user_range(diag, k))
        w = by.get(key, StepWait(k, key[1], 0, 0, False))
        here = w.in_gap or any(a < gb and b > ga for ga, gb in gaps)
        by[key] = w._replace(calls=w.calls + 1, ns=w.ns + ns, in_gap=here)
    return tuple(by.values())


def _idle_intervals(diag: Diagnosis, rows: np.ndarray, lo: int, hi: int) -> list[tuple[int, int]]:
    """The GPU's idle in [lo, hi) ns (the step window of ``_step_window``): the gaps of
    the occurrence's device that overlap it, clipped to it; the occurrence's own gaps
    always (a gap may run past a step's end)."""
    g = diag.gaps
    dev = int(g.device[int(rows[0])])
    near = np.flatnonzero((g.device == dev) & (g.start_ns < hi) & (g.end_ns > lo))
    out = {(max(int(g.start_ns[r]), lo), min(int(g.end_ns[r]), hi)) for r in near.tolist()}
    out |= {(int(g.start_ns[r]), int(g.end_ns[r])) for r in rows.tolist()}
    return sorted(out)


def _overlap_ns(s: np.ndarray, e: np.ndarray, intervals) -> np.ndarray:
    """Per call [s, e) ns (int64 arrays), its overlap in ns with the union of
    ``intervals`` ([start, end) ns pairs, possibly overlapping)."""
    st = np.array([a for a, _b in intervals], dtype=np.int64)
    en = np.array([b for _a, b in intervals], dtype=np.int64)
    st, en = union_intervals(st, en) if st.size else (st, en)
    out = np.zeros(s.size, dtype=np.int64)
    for a, b in zip(st.tolist(), en.tolist()):
        out += np.maximum(np.minimum(e, b) - np.maximum(s, a), 0)
    return out


#: Allocator calls (pinned host and device memory): host allocation work that holds the
#: thread, never a wait on the device (audit 3: ``cudaHostAlloc`` was shown as sync).
ALLOC_CALL_RE = re.compile(
    r"^(cuda|hip)(Malloc|Free|HostAlloc|HostMalloc|MallocHost|FreeHost|HostFree|HostRegister|HostUnregister)"
    r"(?!Async)|^cuMem(Alloc|Free|HostAlloc|FreeHost)(?!Async)",
    re.IGNORECASE,
)
#: Allocator calls holding at least this share of an occurrence's idle lead its card
#: (``rules``: "allocation churn"): a majority is necessarily the largest share.
ALLOC_CHURN_MIN_SHARE = 0.5


_ALLOC_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def alloc_calls(diag: Diagnosis, rows: np.ndarray) -> tuple[tuple[str, int, int], ...]:
    """The allocator calls (``ALLOC_CALL_RE``) of the occurrence's thread that overlap
    its gaps, by name: (name, calls, overlap with the gaps in ns), largest first; the
    overlap only (a call that began before the gap counts from its start). Empty when
    the gap has no measured thread. The allocator names are found once per trace."""
    g, trace = diag.gaps, diag.trace
    lane = int(g.thread_lane[int(rows[0])]) if g.thread_lane is not None else -1
    if lane < 0:
        return ()
    ids = _ALLOC_IDS.get(trace)
    if ids is None:
        ids = _ALLOC_IDS[trace] = trace.name_ids_matching(lambda n: bool(ALLOC_CALL_RE.match(n)))
    if not ids.size:
        return ()
    sl = trace.lane_slice(lane)
    st = trace.start_ns[sl]
    en = st + trace.dur_ns[sl]
    lo, hi = int(g.start_ns[rows].min()), int(g.end_ns[rows].max())
    idx = sl.start + np.flatnonzero((st < hi) & (en > lo) & np.isin(trace.name_id[sl], ids))
    if not idx.size:
        return ()
    s, e = trace.start_ns[idx], trace.start_ns[idx] + trace.dur_ns[idx]
    ns = _overlap_ns(s, e, [(int(g.start_ns[r]), int(g.end_ns[r])) for r in rows.tolist()])
    by: dict[str, tuple[int, int]] = {}
    for k, x in zip(idx.tolist(), ns.tolist()):
        if x > 0:
            n = trace.name(k)
            c, t = by.get(n, (0, 0))
            by[n] = (c + 1, t + x)
    return tuple(sorted(((n, c, t) for n, (c, t) in by.items()), key=lambda x: -x[2]))


def card_facts(
    diag: Diagnosis,
    rows: np.ndarray,
    cause: Cause,
    evidence: list[Evidence],
    dur_txt: str,
    capture: GapCapture | None = None,
    hot: HotFrame | None = None,
) -> Facts:
    """The ``Facts`` of the occurrence ``rows`` of primary class ``cause``."""
    g = diag.gaps
    slow = cause == Cause.LAUNCH and slow_launch(diag, evidence, rows)
    runs = 0
    if slow:
        call = next(e.event for e in evidence if e.cause == Cause.LAUNCH and e.event >= 0)
        runs = int(earlier_runs(diag.trace)[call])
    lazy = _lazy_loading_ns(diag, rows)
    return Facts(
        diag=diag,
        rows=rows,
        cause=cause,
        evidence=tuple(evidence),
        dur_txt=dur_txt,
        capture=capture,
        hot=hot,
        one_time=g.one_time is not None and bool(g.one_time[rows].all()),
        slow_launch=slow,
        slow_runs_before=runs,
        lazy_loading_ns=lazy[0],
        lazy_in_call=lazy[1],
        program=program_kind(diag.trace),
        samples=gap_samples(diag, rows),
        step_waits=step_waits(diag, rows) if cause == Cause.SYNC else (),
        waits_in_step=_step_window(diag, rows)[2],
        allocs=alloc_calls(diag, rows),
    )
