"""The pure view model of the swimlanes: horizontal viewport, ruler and per-cell bucketing.

No Textual or Rich here; everything is numpy and plain Python, unit-tested with exact
values (``tests/test_tui_viewmodel.py``).

- ``Viewport``: the visible time window as (``start_ns``, ``ns_per_cell``, ``width``
  cells). We own the horizontal axis (no huge virtual width), as Textual's own advice
  for zoomable axes and Perfetto's track view do.
- ``ruler_ticks`` and time formatting: in ``gapscope.tui.ruler``.
- ``LaneIndex``: per-lane arrays precomputed once (sorted starts, sorted ends, per
  glyph class the union of intervals with prefix sums, prefix max-end) so that a frame
  costs ``searchsorted`` on the cell edges: O(width · log n) per lane, independent of
  how many events the lane holds.
"""

from __future__ import annotations

import dataclasses
import enum
import math

import numpy as np

from gapscope.parsers.model import Kind, Trace

__all__ = [
    "Viewport",
    "GlyphClass",
    "KIND_TO_CLASS",
    "CLASS_PRIORITY",
    "LaneIndex",
    "CellSummary",
]

#: Smallest and largest zoom: ns per terminal cell.
MIN_NS_PER_CELL = 1.0
MAX_NS_PER_CELL = 1e13
#: ``LaneIndex.wide_events`` levels: events of at least 4**k ns, k < LEVELS (4**24 ns ≈ 3 days).
LEVELS = 24


@dataclasses.dataclass(frozen=True, slots=True)
class Viewport:
    """The visible time window: cell ``k`` covers ``[edge(k), edge(k+1))``.

    ``start_ns`` (int, absolute ns like ``Trace.start_ns``), ``ns_per_cell`` (float,
    > 0), ``width`` (cells, >= 1). Immutable: every operation returns a new viewport.
    """

    start_ns: int
    ns_per_cell: float
    width: int

    # ------------------------------------------------------------- geometry
    @property
    def span_ns(self) -> float:
        """Visible duration in ns (``width * ns_per_cell``)."""
        return self.width * self.ns_per_cell

    @property
    def end_ns(self) -> int:
        """Right edge of the last cell (ns, rounded)."""
        return self.start_ns + int(round(self.span_ns))

    def edges(self, subdivide: int = 1) -> np.ndarray:
        """int64 array of ``width * subdivide + 1`` cell edges in ns (rounded)."""
        k = np.arange(self.width * subdivide + 1, dtype=np.float64)
        return self.start_ns + np.round(k * (self.ns_per_cell / subdivide)).astype(np.int64)

    def cell_of(self, t_ns: int) -> int:
        """Cell index ``k`` with ``time_of(k) <= t_ns < time_of(k + 1)`` (may be < 0 or
        >= width when off-screen): the inverse of ``time_of``, whose edges are rounded,
        so ``cell_of(time_of(k)) == k`` for every ``k``."""
        t = int(t_ns)
        k = int(math.floor((t - self.start_ns) / self.ns_per_cell))
        # The float division may land one cell off the rounded edges: correct it.
        if self.time_of(k) > t:
            k -= 1
        elif self.time_of(k + 1) <= t:
            k += 1
        return k

    def time_of(self, cell: int) -> int:
        """Left edge of cell ``cell`` in ns."""
        return self.start_ns + int(round(cell * self.ns_per_cell))

    # ----------------------------------------------------------- operations
    def zoom(self, factor: float, anchor_ns: int) -> Viewport:
        """Zoom in by ``factor`` (> 1 in, < 1 out) keeping ``anchor_ns`` on its cell.

        The visible span becomes ``span / factor``; the anchor keeps its fractional
        position: new start = anchor - (anchor - start) / factor.
        """
        npc = min(max(self.ns_per_cell / factor, MIN_NS_PER_CELL), MAX_NS_PER_CELL)
        real = self.ns_per_cell / npc
        start = int(anchor_ns) - int(round((int(anchor_ns) - self.start_ns) / real))
        return Viewport(start, npc, self.width)

    def pan(self, fraction: float) -> Viewport:
        """Move right by ``fraction`` of the visible span (negative: left)."""
        return Viewport(self.start_ns + int(round(fraction * self.span_ns)), self.ns_per_cell, self.width)

    def centred_on(self, t_ns: int) -> Viewport:
        """Same zoom, with ``t_ns`` at the middle cell."""
        return Viewport(int(t_ns) - int(round(self.span_ns / 2)), self.ns_per_cell, self.width)

    def with_width(self, width: int) -> Viewport:
        """Same start and zoom for a new width (cells)."""
        return Viewport(self.start_ns, self.ns_per_cell, max(1, int(width)))

    def resized(self, width: int) -> Viewport:
        """The same time window (start and span) over ``width`` cells: ``ns_per_cell``
        scales with the width (within ``MIN_NS_PER_CELL``..``MAX_NS_PER_CELL``). A
        wider lanes area shows the window in finer detail instead of showing time
        past its end, as Perfetto keeps the visible window on a resize."""
        width = max(1, int(width))
        if width == self.width:
            return self
        npc = min(max(self.span_ns / width, MIN_NS_PER_CELL), MAX_NS_PER_CELL)
        return Viewport(self.start_ns, npc, width)

    def clamped(self, t0_ns: int, t1_ns: int, margin: float = 0.05) -> Viewport:
        """Same zoom, moved so the view stays over the trace extent ``[t0_ns, t1_ns]``
        with at most ``margin`` of the visible span beyond either end; a view wider than
        extent plus margins is centred on the extent. So the ruler never shows long
        stretches before the trace start or after its end."""
        span = int(round(self.span_ns))
        pad = int(round(margin * span))
        lo, hi = int(t0_ns) - pad, int(t1_ns) + pad
        if span >= hi - lo:
            start = int(t0_ns) + (int(t1_ns) - int(t0_ns)) // 2 - span // 2
        else:
            start = min(max(self.start_ns, lo), hi - span)
        return self if start == self.start_ns else Viewport(start, self.ns_per_cell, self.width)

    def contains(self, t_ns: int) -> bool:
        return self.start_ns <= t_ns < self.end_ns

    @classmethod
    def fit(cls, t0_ns: int, t1_ns: int, width: int, margin: float = 0.0) -> Viewport:
        """Viewport showing ``[t0_ns, t1_ns]`` across ``width`` cells.

        ``margin`` adds that fraction of the span on each side (0.05 = 5 %). An empty
        interval gets 1 µs of span.
        """
        width = max(1, int(width))
        span = max(int(t1_ns) - int(t0_ns), 1_000)
        pad = span * margin
        npc = min(max((span + 2 * pad) / width, MIN_NS_PER_CELL), MAX_NS_PER_CELL)
        # integer midpoint: epoch-ns timestamps (~1.7e18) do not fit a float64 exactly
        mid = int(t0_ns) + (int(t1_ns) - int(t0_ns)) // 2
        return cls(mid - int(round(npc * width / 2)), npc, width)


# ------------------------------------------------------------------ glyphs
class GlyphClass(enum.IntEnum):
    """What a cell shows; several ``Kind``s share a class."""

    KERNEL = 0
    MEMCPY = 1
    MEMSET = 2
    SYNC = 3  # sync calls (cudaStreamSynchronize, aten::item) and cuda_sync waits
    RUNTIME = 4  # launch calls, memcpy calls, other runtime calls
    CPU_OP = 5
    PYTHON = 6
    ANNOTATION = 7  # CPU and GPU user annotations, ProfilerStep#N
    OTHER = 8  # generic slices


N_CLASSES = len(GlyphClass)

#: int8 lookup: ``KIND_TO_CLASS[kind]`` (-1: not drawn, e.g. instants and counters).
KIND_TO_CLASS = np.full(16, -1, dtype=np.int8)
for _k, _c in {
    Kind.KERNEL: GlyphClass.KERNEL,
    Kind.MEMCPY: GlyphClass.MEMCPY,
    Kind.MEMSET: GlyphClass.MEMSET,
    Kind.LAUNCH: GlyphClass.RUNTIME,
    Kind.SYNC_CALL: GlyphClass.SYNC,
    Kind.MEMCPY_CALL: GlyphClass.RUNTIME,
    Kind.RUNTIME: GlyphClass.RUNTIME,
    Kind.CPU_OP: GlyphClass.CPU_OP,
    Kind.PYTHON: GlyphClass.PYTHON,
    Kind.ANNOTATION: GlyphClass.ANNOTATION,
    Kind.GPU_ANNOTATION: GlyphClass.ANNOTATION,
    Kind.SYNC_MARKER: GlyphClass.SYNC,
    Kind.OTHER: GlyphClass.OTHER,
}.items():
    KIND_TO_CLASS[int(_k)] = int(_c)

#: Most specific first: a cell shows the first class whose coverage is at least half
#: of the best-covered class in that cell (so a sync wait inside a CPU op inside a
#: ProfilerStep shows as the wait once it fills the cell).
CLASS_PRIORITY = (
    GlyphClass.SYNC,
    GlyphClass.MEMCPY,
    GlyphClass.MEMSET,
    GlyphClass.RUNTIME,
    GlyphClass.KERNEL,
    GlyphClass.CPU_OP,
    GlyphClass.PYTHON,
    GlyphClass.OTHER,
    GlyphClass.ANNOTATION,
)


def _union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Disjoint union of intervals given sorted by start: (u_start, u_end, cum_ns).

    ``cum_ns[j]`` is the total length of the first ``j`` union intervals (len m+1).
    Vectorised with a prefix max of ends: interval i opens a new union piece when its
    start is past every earlier end.
    """
    if start.size == 0:
        z = np.zeros(0, dtype=np.int64)
        return z, z, np.zeros(1, dtype=np.int64)
    pmax = np.maximum.accumulate(end)
    new = np.empty(start.size, dtype=bool)
    new[0] = True
    new[1:] = start[1:] > pmax[:-1]
    first = np.flatnonzero(new)
    last = np.concatenate((first[1:] - 1, [start.size - 1]))
    u_start = start[first]
    u_end = pmax[last]
    cum = np.concatenate(([0], np.cumsum(u_end - u_start))).astype(np.int64)
    return u_start, u_end, cum


def _covered_before(u_start: np.ndarray, u_end: np.ndarray, cum: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Total union length before each time in ``t`` (int64 array, ns)."""
    if u_start.size == 0:
        return np.zeros(t.shape, dtype=np.int64)
    j = np.searchsorted(u_start, t, side="right")
    over = np.where(j > 0, np.maximum(u_end[np.maximum(j - 1, 0)] - t, 0), 0)
    return cum[j] - over


@dataclasses.dataclass(frozen=True, slots=True)
class CellSummary:
    """What falls in each cell of one lane (arrays of length ``width``).

    ``cls`` int8 (``GlyphClass``, -1 empty); ``coverage`` float64 in [0, 1]: share of
    the cell covered by any event; ``left``/``right`` float64: coverage of the left
    and right half-cells (for partial-block edges); ``count`` int64: events
    intersecting the cell (density).
    """

    cls: np.ndarray
    coverage: np.ndarray
    left: np.ndarray
    right: np.ndarray
    count: np.ndarray


class LaneIndex:
    """Per-lane search structures, built once in O(n log n); queries cost O(width · log n).

    Events of a lane are sorted by start but may nest or overlap (CPU call stacks,
    overlapping kernels on one stream), so coverage uses the union of intervals (with
    prefix sums of union lengths) per glyph class, and "any event open before t" uses a
    prefix max of ends.
    """

    def __init__(self, trace: Trace, lane: int) -> None:
        sl = trace.lane_slice(lane)
        self.offset = sl.start
        self.start = trace.start_ns[sl]
        self.dur = trace.dur_ns[sl]
        self.end = self.start + self.dur
        self.end_sorted = np.sort(self.end)
        self.depth = trace.depth[sl]
        self.pmax_end = np.maximum.accumulate(self.end) if self.end.size else self.end
        cls = KIND_TO_CLASS[trace.kind[sl].astype(np.int64)]
        self.cls = cls
        self.classes_present = tuple(int(c) for c in np.unique(cls) if c >= 0)
        self.by_class: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        for c in self.classes_present:
            m = cls == c
            self.by_class[c] = _union(self.start[m], self.end[m])
        drawn = cls >= 0
        self.all_union = _union(self.start[drawn], self.end[drawn])
        # on a device lane a GPU annotation (a record_function range) holds the kernels
        # it spans: where GPU work runs, the cell shows the work and its density, not the
        # range around it (the H200 decode capture's stream read as one line at full zoom)
        self.work_union: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        container = int(GlyphClass.ANNOTATION)
        if trace.lanes[lane].is_gpu and container in self.by_class and len(self.classes_present) > 1:
            work = drawn & (cls != container)
            self.work_union = _union(self.start[work], self.end[work])
        self._levels: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}

    def __len__(self) -> int:
        return int(self.start.shape[0])

    def summarise(self, vp: Viewport) -> CellSummary:
        """Bucket the lane into ``vp.width`` cells (see ``CellSummary``)."""
        w = vp.width
        e2 = vp.edges(2)  # half-cell edges
        e = e2[::2]
        width_ns = np.maximum(np.diff(e), 1).astype(np.float64)
        half_ns = np.maximum(np.diff(e2), 1).astype(np.float64)
        cov_all = np.diff(_covered_before(*self.all_union, e2)).astype(np.float64) / half_ns
        left = cov_all[0::2]
        right = cov_all[1::2]
        coverage = np.diff(_covered_before(*self.all_union, e)) / width_ns
        cls = np.full(w, -1, dtype=np.int8)
        if self.classes_present:
            covs = {c: np.diff(_covered_before(*self.by_class[c], e)) for c in self.classes_present}
            best = np.max(np.stack(list(covs.values())), axis=0)
            if self.work_union is not None:  # a device lane's GPU work, not the annotation around it
                best, coverage, left, right = self._work_first(covs, best, coverage, left, right, e, e2)
            chosen = np.zeros(w, dtype=bool)
            for c in CLASS_PRIORITY:
                cv = covs.get(int(c))
                if cv is None:
                    continue
                take = (~chosen) & (cv > 0) & (2 * cv >= best)
                cls[take] = int(c)
                chosen |= take
        count = np.searchsorted(self.start, e[1:], side="left") - np.searchsorted(self.end_sorted, e[:-1], side="right")
        return CellSummary(
            cls, np.clip(coverage, 0, 1), np.clip(left, 0, 1), np.clip(right, 0, 1), np.maximum(count, 0)
        )

    def _work_first(self, covs: dict, best, coverage, left, right, e, e2) -> tuple:
        """``summarise``'s (best, coverage, left, right) where a cell of a device lane
        holds GPU work: the best and the coverage of the work alone, so that the work's
        class and density are drawn there (an annotation still fills the cells with
        none)."""
        assert self.work_union is not None
        container = int(GlyphClass.ANNOTATION)
        work = [v for c, v in covs.items() if c != container]
        best_work = np.max(np.stack(work), axis=0)
        has = best_work > 0
        half_ns = np.maximum(np.diff(e2), 1).astype(np.float64)
        width_ns = np.maximum(np.diff(e), 1).astype(np.float64)
        cov_half = np.diff(_covered_before(*self.work_union, e2)).astype(np.float64) / half_ns
        cov_work = np.diff(_covered_before(*self.work_union, e)) / width_ns
        return (
            np.where(has, best_work, best),
            np.where(has, cov_work, coverage),
            np.where(has, cov_half[0::2], left),
            np.where(has, cov_half[1::2], right),
        )

    # ------------------------------------------------------- wide events
    def wide_events(self, vp: Viewport, min_cells: int, limit: int = 256) -> np.ndarray:
        """Lane-local indices of events at least ``min_cells`` wide that intersect the view.

        Uses lazily built levels of events with ``dur >= 4**k`` ns, split by nesting
        depth (events of one depth do not overlap, so their ends are sorted too): two
        ``searchsorted`` per depth find exactly the visible ones, so the work is bounded
        by what can be drawn, not by the lane size. At most ``limit`` indices per
        depth, returned in start order.
        """
        thr = min_cells * vp.ns_per_cell
        k = max(0, int(math.floor(math.log(max(thr, 1.0), 4))))
        got = self._level(k)
        parts = []
        for sel, starts, pmax_end in got:
            hi = int(np.searchsorted(starts, vp.end_ns, side="left"))
            lo = int(np.searchsorted(pmax_end[:hi], vp.start_ns, side="right"))
            cand = sel[lo : min(hi, lo + 4 * limit)]
            cand = cand[self.dur[cand] >= thr][:limit]
            if cand.size:
                parts.append(cand)
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return np.sort(np.concatenate(parts))

    def _level(self, k: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Events with ``dur >= 4**k`` ns split by depth: [(indices, starts, prefix max end)]."""
        got = self._levels.get(k)
        if got is None:
            idx = np.flatnonzero(self.dur >= 4**k)
            got = []
            if idx.size:
                d = self.depth[idx]
                for depth in np.unique(d).tolist():
                    sel = idx[d == depth]
                    ends = self.end[sel]
                    got.append((sel, self.start[sel], np.maximum.accumulate(ends)))
            self._levels[k] = got
        return got

    def warm_levels(self, max_level: int = LEVELS) -> None:
        """Build every ``wide_events`` level now (O(n) each; a thread worker calls this
        after the first paint so that the first visit of a deep zoom does not pay it)."""
        for k in range(max_level):
            self._level(k)

    def at(self, t_ns: int) -> int:
        """Lane-local index of the deepest (latest-starting) event open at ``t_ns``, or -1."""
        hi = int(np.searchsorted(self.start, t_ns, side="right"))
        if hi == 0 or self.pmax_end[hi - 1] <= t_ns:
            return -1
        # Walk back over candidates; bounded by the nesting seen at t.
        for i in range(hi - 1, max(-1, hi - 1 - 4096), -1):
            if self.end[i] > t_ns and self.cls[i] >= 0:
                return i
            if self.pmax_end[i] <= t_ns:
                break
        return -1
