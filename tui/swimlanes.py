"""The swimlane widget: a Line-API widget that turns per-cell summaries into strips.

Row 0 is the time ruler; the rows below are groups, per-device gap rows and lanes
(``gapscope.tui.lanes_model``). Each lane row asks its ``LaneIndex`` for a ``CellSummary`` of
the visible window (``searchsorted`` on cell edges, cost independent of trace size)
and draws one glyph per cell: kinds differ by shape and colour, so ``NO_COLOR`` and
16-colour terminals stay readable. Strips are cached by everything that changes their
pixels plus an update counter, and finished with ``Strip.simplify()``.

The widget holds the view state (viewport, cursor, selected row, gap and event) and
posts ``Swimlanes.Changed`` when it moves; each frame it hands that state to the pure
painter as a ``gapscope.tui.lanes_draw.LaneView``. Navigation lives in
``gapscope.tui.navigation`` and viewport maths in ``gapscope.tui.viewmodel``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from rich.style import Style
from textual import events
from textual.cache import LRUCache
from textual.geometry import Region
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from gapscope.analysis.causes import CAUSES
from gapscope.analysis.types import Gaps
from gapscope.parsers.model import Trace
from gapscope.tui.lanes_draw import COMPONENT_CLASSES, LaneView, render_line, row_at
from gapscope.tui.lanes_model import (
    Row,
    build_rows,
    default_collapsed,
    drawn_lanes,
    gap_at,
    gaps_by_device,
    group_key_of,
)
from gapscope.tui.viewmodel import LaneIndex, Viewport

__all__ = ["Swimlanes", "READABLE_CELLS", "GAP_VIEW_SHARE", "WARM_MIN_EVENTS"]

#: A selected gap narrower than this many cells is zoomed to span 1/GAP_VIEW_SHARE of
#: the timeline (e.g. a 9 µs gap in the fit view of a 1.3 s trace).
READABLE_CELLS = 2
GAP_VIEW_SHARE = 4
#: Lanes with at least this many events get their zoom levels built in the background.
WARM_MIN_EVENTS = 20_000


#: The idle cells of each class, in its colours from the table of causes.
_GAP_CSS = "\n    ".join(
    f"Swimlanes > .lanes--gap-{info.label} {{ color: {info.colour}; background: {info.background}; }}"
    for info in CAUSES.values()
)


class Swimlanes(Widget, can_focus=True):
    """CPU and GPU swimlanes of one trace with its idle gaps.

    View state, navigation and mouse here; drawing in ``gapscope.tui.lanes_draw``
    (``render_line`` of the ``LaneView`` that ``lane_view()`` returns).

    ``Swimlanes(trace, diagnosis=None, pending=False)``; ``diagnosis`` follows the
    analysis API (``gaps``, ``card``...), or comes later through ``set_diagnosis``
    (``pending`` until then: idle rows say ``finding gaps…``). State: ``viewport``, ``cursor_ns``, ``selected_row``,
    ``selected_gap`` (gap index or None), ``selected_event`` (event index or None).
    """

    COMPONENT_CLASSES = COMPONENT_CLASSES
    DEFAULT_CSS = (
        """
    Swimlanes { background: $surface; color: $foreground; }
    Swimlanes > .lanes--kernel { color: #4fa3ff; }
    Swimlanes > .lanes--memcpy { color: #e0b050; }
    Swimlanes > .lanes--memset { color: #c08040; }
    Swimlanes > .lanes--sync { color: #ff5f5f; text-style: bold; }
    Swimlanes > .lanes--runtime { color: #b080ff; }
    Swimlanes > .lanes--cpu-op { color: #60c060; }
    Swimlanes > .lanes--python { color: #a0a0a0; }
    Swimlanes > .lanes--annotation { color: #40b0b0; }
    Swimlanes > .lanes--other { color: #808080; }
    """
        + _GAP_CSS
        + """
    Swimlanes > .lanes--selected-gap { text-style: reverse bold; }
    Swimlanes > .lanes--label { color: $text-muted; }
    Swimlanes > .lanes--group { color: $text; text-style: bold; }
    Swimlanes > .lanes--ruler { color: $text-muted; }
    Swimlanes > .lanes--cursor { text-style: reverse; }
    Swimlanes > .lanes--selected-row { color: $text; text-style: bold reverse; }
    Swimlanes > .lanes--selected-event { text-style: bold underline; }
    Swimlanes > .lanes--busy { color: #4fa3ff; }
    """
    )

    class Changed(Message):
        """The cursor, selection or viewport moved (the app updates its panels)."""

        def __init__(self, lanes: Swimlanes) -> None:
            super().__init__()
            self.lanes = lanes

    def __init__(
        self,
        trace: Trace,
        diagnosis=None,
        *,
        pending: bool = False,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.trace = trace
        self.diagnosis = diagnosis
        self.gaps: Gaps | None = getattr(diagnosis, "gaps", None)
        #: Draw gaps in their cause colour and label (False: one neutral "idle" look,
        #: for exercises where the class is the answer).
        self.show_causes = True
        #: the diagnosis is still running: idle rows say so, and the zoom levels
        #: (``_start_warming``) wait for ``set_diagnosis`` (the diagnosis gets the CPU)
        self.pending = pending
        self._warming_started = False
        self._indexes: dict[int, LaneIndex] = {}
        self._collapsed: set[tuple] = default_collapsed(trace)
        self._gap_dev = gaps_by_device(self.gaps)
        gap_devices = set(self._gap_dev) | set(trace.devices())
        self._gap_devices = gap_devices
        self._shown_lanes = drawn_lanes(trace)
        self.rows: list[Row] = build_rows(trace, self._collapsed, gap_devices, self._shown_lanes)
        #: the rows before folding, and the GPU lanes folded away (``_refold``)
        self._full_rows: list[Row] = self.rows
        #: (row index, row) of the gap rows (``pinned_row``)
        self._idle_rows = [(i, r) for i, r in enumerate(self.rows) if r.kind == "idle"]
        #: lane indices of the GPU lane rows of ``_full_rows``, in display order
        self._gpu_rows = [r.lane for r in self.rows if r.kind == "lane" and trace.lanes[r.lane].is_gpu]
        self._folded: frozenset[int] | None = frozenset()
        t0, t1 = trace.extent_ns
        self.origin_ns = int(t0)
        self.viewport = Viewport.fit(t0, t1, 80, margin=0.01)
        self.cursor_ns = int(t0)
        self.selected_row = self._first_lane_row()
        self.selected_gap: int | None = None
        self.selected_event: int | None = None
        self.top_row = 0
        self._update_count = 0
        self._cache: LRUCache[tuple, Strip] = LRUCache(1024)
        self._fitted = False
        self._frame_width = 0
        self._frame_styles: dict[str, Style] = {}
        self._base_style = Style()
        #: the view of the frame being drawn (``render_lines``), shared by its lines
        self._frame_view: LaneView | None = None

    def set_diagnosis(self, diagnosis) -> None:
        """Draw the gaps of ``diagnosis`` (which arrived after the first paint); the
        viewport, cursor and selected row stay (the rows are rebuilt only when the
        gaps name a device without lanes; ``_refold`` keeps the selected row)."""
        was_pending, self.pending = self.pending, False
        self.diagnosis = diagnosis
        self._take_gaps(getattr(diagnosis, "gaps", None))
        if was_pending:
            self.call_after_refresh(self._start_warming)

    def set_early_gaps(self, gaps: Gaps) -> None:
        """Draw ``gaps`` (``Gaps``) as plain idle time while the diagnosis runs (the
        trace screen's early gaps: their causes are not known yet); ``set_diagnosis``
        replaces them. The view, cursor and selected row stay."""
        if self.diagnosis is None:
            self._take_gaps(gaps)

    def _take_gaps(self, gaps: Gaps | None) -> None:
        """Draw ``gaps`` from now on, none selected (the rows are rebuilt only when
        they name a device without lanes), and tell the screen."""
        self.gaps = gaps
        self.selected_gap = None
        self._gap_dev = gaps_by_device(gaps)
        gap_devices = set(self._gap_dev) | set(self.trace.devices())
        if gap_devices != self._gap_devices:
            self._gap_devices = gap_devices
            self._rebuild_rows()
        self.invalidate()
        self.post_message(self.Changed(self))

    # ------------------------------------------------------------ helpers
    def _first_lane_row(self) -> int:
        """The first lane row with events (else the first lane row, else 0)."""
        first = None
        for i, r in enumerate(self.rows):
            if r.kind == "lane":
                if first is None:
                    first = i
                sl = self.trace.lane_slice(r.lane)
                if sl.stop > sl.start:
                    return i
        return first or 0

    def lane_index(self, lane: int) -> LaneIndex:
        li = self._indexes.get(lane)
        if li is None:
            li = self._indexes[lane] = LaneIndex(self.trace, lane)
        return li

    @property
    def label_width(self) -> int:
        w = self._frame_width or self.size.width
        return max(10, min(24, w // 5))

    @property
    def timeline_width(self) -> int:
        return max(1, (self._frame_width or self.size.width) - self.label_width)

    @property
    def visible_rows(self) -> int:
        return max(1, self.size.height - 1)

    def set_show_causes(self, show: bool) -> None:
        """Show or hide the cause classes of the gaps (colour and label)."""
        if show != self.show_causes:
            self.show_causes = show
            self.invalidate()

    def invalidate(self) -> None:
        """Forget cached strips and repaint."""
        self._update_count += 1
        self.refresh()

    def _changed(self, view: bool = False, clamp: bool = True) -> None:
        """Repaint and tell the app; ``view``: the user moved the time window (from
        then on resizes keep the zoom instead of refitting the whole trace); ``clamp``:
        keep the window over the trace (off for a window aligned with another trace's,
        which may reach past this one's end)."""
        t0, t1 = self.trace.extent_ns
        self.cursor_ns = min(max(int(self.cursor_ns), int(t0)), max(int(t0), int(t1)))
        if view:
            self._fitted = True
            if clamp:
                self.viewport = self.viewport.clamped(t0, t1)
            if not self.viewport.contains(self.cursor_ns):
                # the view follows the cursor (which is on the trace, so a clamped
                # view centred on it still shows it)
                self.viewport = self.viewport.centred_on(self.cursor_ns).clamped(t0, t1)
        # No update-count bump here: the strip cache key holds everything a view
        # change alters (viewport, cursor cell, rows, selections), so going back to a
        # view (zoom out after in, pan back) reuses its strips; ``_refold`` invalidates
        # when the rows change.
        before = self._update_count
        self._refold()
        self._keep_row_visible()
        if self._update_count == before:
            self._refresh_drawn()
        self.post_message(self.Changed(self))

    def _refresh_drawn(self) -> None:
        """Repaint the ruler and the lines that can hold a row (all of them when the
        rows do not fit): the blank lines under the last row stay as they are."""
        lines = 1 + len(self.rows)
        if lines >= self.size.height or not self.size.width:
            self.refresh()
        else:
            self.refresh(Region(0, 0, self.size.width, lines))

    def _keep_row_visible(self) -> None:
        """Scroll so that the selected row shows, and, while a gap is selected, the
        lane of its launch call too when both fit (the card talks about that thread)."""
        n = self.visible_rows
        if self.selected_row < self.top_row:
            self.top_row = self.selected_row
        elif self.selected_row >= self.top_row + n:
            self.top_row = self.selected_row - n + 1
        launch_row = self._launch_row()
        if launch_row is not None and abs(launch_row - self.selected_row) < n:
            lo, hi = min(launch_row, self.selected_row), max(launch_row, self.selected_row)
            if lo < self.top_row:
                self.top_row = lo
            elif hi >= self.top_row + n:
                self.top_row = hi - n + 1
        self.top_row = max(0, min(self.top_row, max(0, len(self.rows) - n)))
        pinned = self.pinned_row()
        if pinned is not None and self.selected_row == self.top_row and self.selected_row != pinned:
            self.top_row -= 1  # the pinned gap row covers line 1: show the selected row below it

    def pinned_row(self) -> int | None:
        """The gap row kept under the ruler while the lanes are scrolled past it: that
        of the selected gap's device, else of the selected row's GPU group, else the
        first; None when it is in view anyway (issue 18: ``j`` scrolled it away)."""
        idle = self._idle_rows
        if not idle:
            return None
        dev = None
        if self.selected_gap is not None and self.gaps is not None:
            dev = int(self.gaps.device[self.selected_gap])
        elif self.rows and self.selected_row < len(self.rows) and self.rows[self.selected_row].device >= 0:
            dev = self.rows[self.selected_row].device
        i = next((i for i, r in idle if r.device == dev), idle[0][0])
        return i if self.top_row > i else None

    def _launch_row(self) -> int | None:
        """The display row of the selected gap's launch lane (None: no gap, no launch,
        or its group collapsed)."""
        g = self.gaps
        if self.selected_gap is None or g is None:
            return None
        lane = int(g.launch_lane[self.selected_gap])
        if lane < 0:
            return None
        return next((i for i, r in enumerate(self.rows) if r.kind == "lane" and r.lane == lane), None)

    def on_mount(self) -> None:
        self.call_after_refresh(self._start_warming)

    def _start_warming(self) -> None:
        """After the first paint, build the zoom levels of big lanes in a thread worker
        (``LaneIndex.warm_levels``), so that the first jump to a deep zoom (a tiny gap)
        does not pay O(lane events) per lane on the key press."""
        if self.pending or self._warming_started:
            return  # after the diagnosis; once (the first paint and the diagnosis may both ask)
        self._warming_started = True
        big = [
            r.lane
            for r in self.rows
            if r.kind == "lane"
            and self.trace.lane_slice(r.lane).stop - self.trace.lane_slice(r.lane).start >= WARM_MIN_EVENTS
        ]
        if big:
            self.run_worker(lambda: self._warm(big), thread=True, group="warm-levels", exit_on_error=False)

    def _warm(self, lanes: list[int]) -> None:
        from textual.worker import get_current_worker

        worker = get_current_worker()
        for lane in lanes:
            if worker.is_cancelled:
                return
            self.lane_index(lane).warm_levels()

    def on_resize(self, event: events.Resize) -> None:
        self._frame_width = event.size.width
        self._sync_width()
        self._refold()
        self._keep_row_visible()
        self._update_count += 1

    def _sync_width(self) -> None:
        """Match the viewport to the timeline width: refit the whole trace until the
        user has moved the view, else keep the visible time window (and the cursor on
        screen)."""
        w = self.timeline_width
        if not self._fitted:
            t0, t1 = self.trace.extent_ns
            vp = Viewport.fit(t0, t1, w, margin=0.01)
            if vp != self.viewport:
                self.viewport = vp
                self._update_count += 1
        elif self.viewport.width != w:
            # Same time window in the new width (never time past the trace end when
            # the lanes widen, e.g. the side panel hidden), kept on the trace.
            t0, t1 = self.trace.extent_ns
            self.viewport = self.viewport.resized(w).clamped(t0, t1)
            if not self.viewport.contains(self.cursor_ns):
                self.viewport = self.viewport.centred_on(self.cursor_ns).clamped(t0, t1)
            self._update_count += 1

    # ------------------------------------------------------------ state ops
    @property
    def view_moved(self) -> bool:
        """Whether the user has moved the time window (resizes then keep it)."""
        return self._fitted

    def open_at(self, vp: Viewport, cursor_ns: int) -> None:
        """Before the first paint: show the time window ``vp`` (fitted to the
        timeline's width when it is drawn) with the cursor at ``cursor_ns``, as if the
        user had moved there (a preview's view, kept by the trace that replaces it)."""
        self.viewport = vp
        self.cursor_ns = int(cursor_ns)
        self._fitted = True
        self._changed()

    def set_viewport(self, vp: Viewport, *, clamp: bool = True) -> None:
        """Show the time window ``vp`` (at the timeline's width); ``clamp=False`` keeps
        it as given even where it reaches past the trace (the diff viewer aligns two
        traces at their step start)."""
        self.viewport = vp.with_width(self.timeline_width)
        self._changed(view=True, clamp=clamp)

    def zoom(self, factor: float) -> None:
        """Zoom by ``factor`` (> 1 in) around the cursor."""
        self.viewport = self.viewport.zoom(factor, self.cursor_ns)
        self._changed(view=True)

    def pan(self, fraction: float) -> None:
        """Pan by ``fraction`` of the visible span; the cursor keeps its cell."""
        old = self.viewport
        self.viewport = old.pan(fraction).clamped(*self.trace.extent_ns)
        self.cursor_ns += self.viewport.start_ns - old.start_ns
        self._changed(view=True)

    def fit_all(self) -> None:
        t0, t1 = self.trace.extent_ns
        self.viewport = Viewport.fit(t0, t1, self.timeline_width, margin=0.01)
        self._changed(view=True)

    def go_to(self, t_ns: int) -> None:
        """Put the cursor at absolute ``t_ns`` and centre it when off-screen."""
        self.cursor_ns = int(t_ns)
        if not self.viewport.contains(self.cursor_ns):
            self.viewport = self.viewport.centred_on(self.cursor_ns)
        self._changed(view=True)

    def move_cursor_cells(self, cells: int) -> None:
        """Move the cursor ``cells`` cells (to that cell's left edge), never off the
        trace extent; the view follows it (``_changed``)."""
        vp = self.viewport
        self.cursor_ns = vp.time_of(vp.cell_of(self.cursor_ns) + int(cells))
        self.selected_event = None
        self._changed(view=True)

    def select_row(self, delta: int) -> None:
        self.selected_row = max(0, min(len(self.rows) - 1, self.selected_row + delta))
        self.selected_event = None
        self._changed()

    def select_gap(self, gap: int | None, *, zoom: bool = False, move: bool = True) -> None:
        """Select gap ``gap``: cursor to its start, its device's gap row selected,
        and the view moved only as much as needed to show it readably
        (``bring_into_view``; zoomed to fit when ``zoom``); ``move`` False: the view
        and the cursor stay (a selection carried over from another screen)."""
        self.selected_gap = gap
        self.selected_event = None
        if gap is None or self.gaps is None:
            self._changed(view=move)
            return
        s, e = int(self.gaps.start_ns[gap]), int(self.gaps.end_ns[gap])
        dev = int(self.gaps.device[gap])
        for i, r in enumerate(self.rows):
            if r.kind == "idle" and r.device == dev:
                self.selected_row = i
                break
        if not move:
            self._changed()
            return
        self.cursor_ns = s
        self.viewport = self.bring_into_view(s, e, zoom=zoom)
        self._changed(view=True)

    def bring_into_view(self, s: int, e: int, *, zoom: bool = False) -> Viewport:
        """The viewport that shows the interval ``[s, e)`` (absolute ns) readably.

        - ``zoom``, or wider than 80 % of the view: fit it with 25 % margins;
        - narrower than ``READABLE_CELLS`` at the current zoom: zoom so it spans
          ``1 / GAP_VIEW_SHARE`` of the timeline, centred (its neighbours stay on
          screen on both sides);
        - off-screen but readable: centre it at the same zoom;
        - visible and readable: the current viewport, unchanged.
        """
        vp = self.viewport.with_width(self.timeline_width)
        length = max(int(e) - int(s), 1)
        if zoom or length > vp.span_ns * 0.8:
            return Viewport.fit(s, e, vp.width, margin=0.25)
        if length / vp.ns_per_cell < READABLE_CELLS:
            margin = (GAP_VIEW_SHARE - 1) / 2
            return Viewport.fit(s, e, vp.width, margin=margin)
        if not (vp.contains(s) and vp.contains(e - 1)):
            return vp.centred_on((s + e) // 2)
        return vp

    def select_event(self, event: int) -> None:
        """Select event ``event``: its lane row (expanding its group), cursor at its start."""
        lane = int(self.trace.lane[event])
        key = group_key_of(self.trace, lane)
        if key in self._collapsed:
            self._collapsed.discard(key)
            self._rebuild_rows()
        for i, r in enumerate(self.rows):
            if r.kind == "lane" and r.lane == lane:
                self.selected_row = i
                break
        self.selected_event = int(event)
        s = int(self.trace.start_ns[event])
        e = s + int(self.trace.dur_ns[event])
        self.cursor_ns = s
        if not (self.viewport.contains(s) and self.viewport.contains(max(s, e - 1))):
            self.viewport = self.viewport.centred_on((s + e) // 2)
        self._changed(view=True)

    def toggle_group(self) -> None:
        """Collapse or expand the group of the selected row."""
        if not self.rows:
            return
        key = self.rows[self.selected_row].group
        if key in self._collapsed:
            self._collapsed.discard(key)
        else:
            self._collapsed.add(key)
        self._rebuild_rows()
        for i, r in enumerate(self.rows):
            if r.kind == "group" and r.group == key:
                self.selected_row = i
                break
        self._changed()

    def set_all_groups(self, collapsed: bool) -> None:
        """Collapse (True) every group shown, or expand (False) all of them."""
        self._collapsed = {r.group for r in self.rows} if collapsed else set()
        self._rebuild_rows()
        self._changed()

    def _rebuild_rows(self) -> None:
        """The rows of the collapsed groups (``build_rows``, once per collapse), then
        folded (``_refold``)."""
        self._full_rows = build_rows(self.trace, self._collapsed, self._gap_devices, self._shown_lanes)
        self._gpu_rows = [r.lane for r in self._full_rows if r.kind == "lane" and self.trace.lanes[r.lane].is_gpu]
        self._folded = None
        self._refold()

    def _refold(self) -> None:
        """When the rows do not all fit, leave out the GPU streams that have nothing in
        view (``_quiet_streams``): with 13 streams at 80x24 the CPU lanes, where a
        gap's launch is, would be off screen. The group header counts what it folded
        (``GPU 0 +9 folded``); the selected row stays the same row. Rows are rebuilt
        only when the folded set changes (O(GPU lanes) per view change otherwise)."""
        full = self._full_rows
        fold = self._quiet_streams() if len(full) > self.visible_rows and self.size.height else frozenset()
        if fold == self._folded:
            return
        old = self.rows[self.selected_row] if self.rows and self.selected_row < len(self.rows) else None
        self._folded = fold
        rows = full
        if fold:
            per_dev: dict[int, int] = {}
            for k in fold:
                per_dev[self.trace.lanes[k].device] = per_dev.get(self.trace.lanes[k].device, 0) + 1
            rows = [
                dataclasses.replace(
                    r, label=r.label.replace(f"GPU {r.device}", f"GPU {r.device} +{per_dev[r.device]} folded", 1)
                )
                if r.kind == "group" and r.group[0] == "gpu" and per_dev.get(r.device)
                else r
                for r in full
                if r.lane not in fold
            ]
        self.rows = rows
        self._idle_rows = [(i, r) for i, r in enumerate(rows) if r.kind == "idle"]
        keep = None
        if old is not None:
            keep = next(
                (i for i, r in enumerate(rows) if (r.kind, r.group, r.lane) == (old.kind, old.group, old.lane)), None
            )
            if keep is None and old.kind == "lane":  # its stream folded: its group's gap row
                keep = next((i for i, r in enumerate(rows) if r.group == old.group and r.kind == "idle"), None)
        self.selected_row = keep if keep is not None else min(self.selected_row, max(0, len(self.rows) - 1))
        self.invalidate()

    def _quiet_streams(self) -> frozenset[int]:
        """GPU lanes to fold: those shown with no event overlapping the viewport (one
        ``searchsorted`` per GPU lane on its starts and the running maximum of its
        ends); when the rows still do not fit and a gap is selected, as many more
        streams as it takes (the last shown first) but those of the ops around it, so
        that its launch lane can show. The streams of the selected gap's ops and of the
        selected event always stay."""
        a, b = self.viewport.start_ns, self.viewport.end_ns
        keep = set()
        g = self.gaps
        if self.selected_gap is not None and g is not None:
            for op in (int(g.prev_op[self.selected_gap]), int(g.next_op[self.selected_gap])):
                if op >= 0:
                    keep.add(int(self.trace.lane[op]))
        if self.selected_event is not None:
            keep.add(int(self.trace.lane[self.selected_event]))
        gpu_rows = self._gpu_rows
        out = set()
        for lane in gpu_rows:
            if lane in keep:
                continue
            li = self.lane_index(lane)
            k = int(np.searchsorted(li.start, b, side="left"))
            if not (k > 0 and int(li.pmax_end[k - 1]) > a):
                out.add(lane)
        excess = len(self._full_rows) - len(out) - self.visible_rows
        if keep and excess > 0:
            more = [lane for lane in gpu_rows if lane not in keep and lane not in out]
            out |= set(more[::-1][:excess])
        return frozenset(out)

    # ------------------------------------------------------------ queries
    def current_row(self) -> Row | None:
        return self.rows[self.selected_row] if self.rows else None

    def event_at_cursor(self) -> int | None:
        """The deepest event open at the cursor on the selected lane (event index)."""
        if self.selected_event is not None:
            return self.selected_event
        row = self.current_row()
        if row is None or row.kind != "lane":
            return None
        li = self.lane_index(row.lane)
        k = li.at(self.cursor_ns)
        if k < 0:
            # nothing open at the cursor: the event starting in the cursor cell
            a = self.viewport.time_of(self.viewport.cell_of(self.cursor_ns))
            b = self.viewport.time_of(self.viewport.cell_of(self.cursor_ns) + 1)
            j = int(np.searchsorted(li.start, a, side="left"))
            if j < len(li) and li.start[j] < b:
                return li.offset + j
            return None
        return li.offset + k

    def gap_at(self, t_ns: int, device: int) -> int | None:
        """The gap of GPU ``device`` holding absolute ``t_ns`` (gap index), or None."""
        return gap_at(self._gap_dev, t_ns, device)

    # ------------------------------------------------------------ drawing
    def lane_view(self) -> LaneView:
        """The state one frame draws (``gapscope.tui.lanes_draw.LaneView``)."""
        return LaneView(
            trace=self.trace,
            rows=self.rows,
            gaps=self.gaps,
            gaps_by_device=self._gap_dev,
            viewport=self.viewport,
            origin_ns=self.origin_ns,
            cursor_ns=self.cursor_ns,
            top_row=self.top_row,
            pinned_row=self.pinned_row(),
            selected_row=self.selected_row,
            selected_gap=self.selected_gap,
            selected_event=self.selected_event,
            # early gaps (no diagnosis yet) have no cause to show
            show_causes=self.show_causes and self.diagnosis is not None,
            pending=self.pending and self.gaps is None,
            width=self._frame_width or self.size.width,
            label_width=self.label_width,
            styles=self._lane_styles(),
            base_style=self._base_style,
            lane_index=self.lane_index,
        )

    def _lane_styles(self) -> dict[str, Style]:
        """The styles of ``COMPONENT_CLASSES`` from the CSS, with the widget's own
        (``_base_style``), resolved once until the CSS changes (``notify_style_update``)."""
        if not self._frame_styles:
            self._base_style = self.rich_style
            self._frame_styles = {name: self.get_component_rich_style(name) for name in COMPONENT_CLASSES}
        return self._frame_styles

    def render_lines(self, crop: Region) -> list[Strip]:
        """Resolve sizes and styles once per frame, then draw the lines (Line API)."""
        self._lane_styles()
        self._frame_width = self.size.width
        self._sync_width()
        self._keep_row_visible()  # the height may have changed since the last key (panel, prompt)
        self._frame_view = self.lane_view()  # one per frame: its lines share it
        try:
            return super().render_lines(crop)
        finally:
            self._frame_view = None

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._frame_styles = {}
        self._update_count += 1

    def render_line(self, y: int) -> Strip:
        """Line ``y`` (0: the ruler), from the strip cache keyed by everything that
        changes its pixels plus the update counter."""
        view = self._frame_view or self.lane_view()
        width = view.width
        vp = view.viewport
        cursor_cell = vp.cell_of(self.cursor_ns)
        row_i = row_at(view.top_row, view.pinned_row, y)
        key = (
            y,
            row_i,
            vp,
            width,
            cursor_cell,
            self.selected_row == row_i,
            self.selected_gap,
            self.selected_event,
            self._update_count,
        )
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        strip = self._cache[key] = render_line(view, y)
        return strip

    # ------------------------------------------------------------ mouse
    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        """Wheel over the timeline zooms in around the pointer; over the labels it scrolls lanes."""
        if event.x >= self.label_width:
            self.cursor_ns = self.viewport.time_of(event.x - self.label_width)
            self.zoom(1.25)
        else:
            self._scroll_rows(-3)
        event.stop()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        if event.x >= self.label_width:
            self.cursor_ns = self.viewport.time_of(event.x - self.label_width)
            self.zoom(0.8)
        else:
            self._scroll_rows(3)
        event.stop()

    def _scroll_rows(self, delta: int) -> None:
        n = self.visible_rows
        self.top_row = max(0, min(self.top_row + delta, max(0, len(self.rows) - n)))
        self.selected_row = min(max(self.selected_row, self.top_row), self.top_row + n - 1, len(self.rows) - 1)
        self._changed()

    def on_click(self, event: events.Click) -> None:
        row = row_at(self.top_row, self.pinned_row(), event.y)
        if 0 <= row < len(self.rows):
            self.selected_row = row
        if event.x >= self.label_width:
            self.cursor_ns = self.viewport.time_of(event.x - self.label_width)
        self.selected_event = None
        r = self.current_row()
        if r is not None and r.kind == "idle":
            g = self.gap_at(self.cursor_ns, r.device)
            if g is not None:
                self.selected_gap = g
        self._changed()
