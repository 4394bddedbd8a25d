"""The facts a card's advice is chosen from ("Cards as facts and rules" in the design),
computed once per occurrence (a gap, or a group's representative occurrence) by
``card_facts``: the class and its evidence, the thread's stream captures, the hot frame,
the one-time flag, the slow launch call and whether its kernel ran before, the lazy
loading on the thread, and the program kind (``ProgramKind``: which vocabulary the
advice may use). The rules (``gapscope.analysis.card.rules``) read these and nothing
else of the diagnosis but the helpers that word them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import NamedTuple

import numpy as np

from gapscope.analysis.busy import coverage, union_intervals
from gapscope.analysis.card.program import ProgramKind, program_kind
from gapscope.analysis.card.why import HotFrame, slow_launch
from gapscope.analysis.diagnose import Diagnosis
from gapscope.analysis.evidence_kinds import GraphCapture, earlier_runs, graph_captures
from gapscope.analysis.types import Cause, Evidence

__all__ = ["Facts", "GapCapture", "card_facts", "gap_capture", "LAZY_LOADING_RE", "LAZY_LOADING_MIN_SHARE"]


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


#: Module loading at a function's first call: CUDA's lazy loading (Nsight's "Lazy
#: Function Loading" range, B200 GEMMs' first calls) and the driver's module loads.
LAZY_LOADING_RE = re.compile(r"Lazy Function Loading|^cuModuleLoad|^cuLibraryLoad|^hipModuleLoad", re.IGNORECASE)
#: Module loading on the thread covering this share of an occurrence makes it module loading.
LAZY_LOADING_MIN_SHARE = 0.5


def _lazy_loading_ns(diag: Diagnosis, rows: np.ndarray) -> int:
    """ns of the occurrence ``rows`` covered by module-loading events (``LAZY_LOADING_RE``)
    on its launching thread (the ranges' union, clipped to each gap)."""
    trace, g = diag.trace, diag.gaps
    lane = g.thread_of(int(rows[0]))
    if lane < 0:
        return 0
    ids = trace.name_ids_matching(lambda s: bool(LAZY_LOADING_RE.search(s)))
    if not ids.size:
        return 0
    sl = trace.lane_slice(lane)
    m = np.isin(trace.name_id[sl], ids)
    if not m.any():
        return 0
    st = trace.start_ns[sl][m]
    us, ue = union_intervals(st, st + trace.dur_ns[sl][m])
    return int(coverage(us, ue, g.start_ns[rows], g.end_ns[rows]).sum())


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
    thread inside it; ``program``: the trace's ``ProgramKind``."""

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
    program: ProgramKind

    @property
    def top(self) -> list[Evidence]:
        """The evidence items of the primary class that are events, largest first."""
        return [e for e in self.evidence if e.cause == self.cause and e.event >= 0]

    @property
    def occurrence_ns(self) -> int:
        """The occurrence's idle, ns."""
        return int(self.diag.gaps.dur_ns[self.rows].sum())


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
        lazy_loading_ns=_lazy_loading_ns(diag, rows),
        program=program_kind(diag.trace),
    )
