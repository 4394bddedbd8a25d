"""The swimlane widget: a Line-API widget that turns per-cell summaries into strips.

Row 0 is the time ruler; the rows below are groups, per-device gap rows and lanes
(``tui.lanes_model``). Each lane row asks its ``LaneIndex`` for a ``CellSummary`` of
the visible window (``searchsorted`` on cell edges, cost independent of trace size)
and draws one glyph per cell: kinds differ by shape and colour, so ``NO_COLOR`` and
16-colour terminals stay readable. Strips are cached by everything that changes their
pixels plus an update counter, and finished with ``Strip.simplify()``.

The widget holds the view state (viewport, cursor, selected row, gap and event) and
posts ``Swimlanes.Changed`` when it moves; navigation logic lives in
``tui.navigation`` and viewport maths in ``tui.viewmodel``.
"""

from __future__ import annotations

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.cache import LRUCache
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from analysis.types import Cause
from parsers.model import Trace

from .lanes_model import Row, build_rows, default_collapsed, drawn_lanes, group_key_of, sanitize
from .cells import CAUSE_GLYPH, CLASS_GLYPH, CLASS_NAME, GLYPH_CODES, Cells, kernel_codes, sized
from .viewmodel import GlyphClass, LaneIndex, Viewport, format_duration_ns, ruler_ticks

__all__ = ["Swimlanes", "CLASS_GLYPH", "CAUSE_GLYPH", "sized", "READABLE_CELLS", "GAP_VIEW_SHARE"]

_NAME_MIN_CELLS = 6
#: A selected gap narrower than this many cells is zoomed to span 1/GAP_VIEW_SHARE of
#: the timeline (e.g. a 9 µs gap in the fit view of a 1.3 s trace).
READABLE_CELLS = 2
GAP_VIEW_SHARE = 4
#: Lanes with at least this many events get their zoom levels built in the background.
WARM_MIN_EVENTS = 20_000

class Swimlanes(Widget, can_focus=True):
    """CPU and GPU swimlanes of one trace with its idle gaps.

    ``Swimlanes(trace, diagnosis=None)``; ``diagnosis`` follows the analysis API
    (``gaps``, ``card``...). State: ``viewport``, ``cursor_ns``, ``selected_row``,
    ``selected_gap`` (gap index or None), ``selected_event`` (event index or None).
    """

    COMPONENT_CLASSES = {
        "lanes--kernel", "lanes--memcpy", "lanes--memset", "lanes--sync", "lanes--runtime",
        "lanes--cpu-op", "lanes--python", "lanes--annotation", "lanes--other",
        "lanes--gap-sync", "lanes--gap-copy", "lanes--gap-launch", "lanes--gap-host",
        "lanes--gap-unclassified", "lanes--selected-gap", "lanes--label", "lanes--group",
        "lanes--ruler", "lanes--cursor", "lanes--selected-row", "lanes--selected-event",
        "lanes--busy",
    }
    DEFAULT_CSS = """
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
    Swimlanes > .lanes--gap-sync { color: #ff6060; background: #3a1414; }
    Swimlanes > .lanes--gap-copy { color: #e0b050; background: #3a2c10; }
    Swimlanes > .lanes--gap-launch { color: #b080ff; background: #281a40; }
    Swimlanes > .lanes--gap-host { color: #70d070; background: #143014; }
    Swimlanes > .lanes--gap-unclassified { color: #a0a0a0; background: #262626; }
    Swimlanes > .lanes--selected-gap { text-style: reverse bold; }
    Swimlanes > .lanes--label { color: $text-muted; }
    Swimlanes > .lanes--group { color: $text; text-style: bold; }
    Swimlanes > .lanes--ruler { color: $text-muted; }
    Swimlanes > .lanes--cursor { text-style: reverse; }
    Swimlanes > .lanes--selected-row { color: $text; text-style: bold reverse; }
    Swimlanes > .lanes--selected-event { text-style: bold underline; }
    Swimlanes > .lanes--busy { color: #4fa3ff; }
    """

    class Changed(Message):
        """The cursor, selection or viewport moved (the app updates its panels)."""

        def __init__(self, lanes: "Swimlanes") -> None:
            super().__init__()
            self.lanes = lanes

    def __init__(self, trace: Trace, diagnosis=None, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.trace = trace
        self.diagnosis = diagnosis
        self.gaps = getattr(diagnosis, "gaps", None)
        #: Draw gaps in their cause colour and label (False: one neutral "idle" look,
        #: for exercises where the class is the answer).
        self.show_causes = True
        self._indexes: dict[int, LaneIndex] = {}
        self._collapsed: set = default_collapsed(trace)
        self._gap_dev: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        if self.gaps is not None and len(self.gaps):
            dev = np.asarray(self.gaps.device)
            for d in np.unique(dev):
                idx = np.flatnonzero(dev == d)
                o = idx[np.argsort(np.asarray(self.gaps.start_ns)[idx], kind="stable")]
                self._gap_dev[int(d)] = (o, np.asarray(self.gaps.start_ns)[o], np.asarray(self.gaps.end_ns)[o])
        gap_devices = set(self._gap_dev) | set(trace.devices())
        self._gap_devices = gap_devices
        self._shown_lanes = drawn_lanes(trace)
        self.rows: list[Row] = build_rows(trace, self._collapsed, gap_devices, self._shown_lanes)
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

    def _changed(self, view: bool = False) -> None:
        """Repaint and tell the app; ``view``: the user moved the time window (from
        then on resizes keep the zoom instead of refitting the whole trace)."""
        if view:
            self._fitted = True
            self.viewport = self.viewport.clamped(*self.trace.extent_ns)
        self._update_count += 1
        self._keep_row_visible()
        self.refresh()
        self.post_message(self.Changed(self))

    def _keep_row_visible(self) -> None:
        n = self.visible_rows
        if self.selected_row < self.top_row:
            self.top_row = self.selected_row
        elif self.selected_row >= self.top_row + n:
            self.top_row = self.selected_row - n + 1
        self.top_row = max(0, min(self.top_row, max(0, len(self.rows) - n)))

    def on_mount(self) -> None:
        self.call_after_refresh(self._start_warming)

    def _start_warming(self) -> None:
        """After the first paint, build the zoom levels of big lanes in a thread worker
        (``LaneIndex.warm_levels``), so that the first jump to a deep zoom (a tiny gap)
        does not pay O(lane events) per lane on the key press."""
        big = [r.lane for r in self.rows if r.kind == "lane"
               and self.trace.lane_slice(r.lane).stop - self.trace.lane_slice(r.lane).start >= WARM_MIN_EVENTS]
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
        self._keep_row_visible()
        self._update_count += 1

    def _sync_width(self) -> None:
        """Match the viewport to the timeline width: refit the whole trace until the
        user has moved the view, else keep the zoom (and the cursor on screen)."""
        w = self.timeline_width
        if not self._fitted:
            t0, t1 = self.trace.extent_ns
            vp = Viewport.fit(t0, t1, w, margin=0.01)
            if vp != self.viewport:
                self.viewport = vp
                self._update_count += 1
        elif self.viewport.width != w:
            self.viewport = self.viewport.with_width(w)
            if not self.viewport.contains(self.cursor_ns):
                self.viewport = self.viewport.centred_on(self.cursor_ns)
            self._update_count += 1

    # ------------------------------------------------------------ state ops
    def set_viewport(self, vp: Viewport) -> None:
        self.viewport = vp.with_width(self.timeline_width)
        self._changed(view=True)

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
        self.cursor_ns = self.viewport.time_of(self.viewport.cell_of(self.cursor_ns) + cells)
        if not self.viewport.contains(self.cursor_ns):
            self.viewport = self.viewport.pan(0.5 if cells > 0 else -0.5)
        self.selected_event = None
        self._changed(view=True)

    def select_row(self, delta: int) -> None:
        self.selected_row = max(0, min(len(self.rows) - 1, self.selected_row + delta))
        self.selected_event = None
        self._changed()

    def select_gap(self, gap: int | None, *, zoom: bool = False) -> None:
        """Select gap ``gap``: cursor to its start, its device's gap row selected,
        and the view moved only as much as needed to show it readably
        (``bring_into_view``; zoomed to fit when ``zoom``)."""
        self.selected_gap = gap
        self.selected_event = None
        if gap is None or self.gaps is None:
            self._changed(view=True)
            return
        s, e = int(self.gaps.start_ns[gap]), int(self.gaps.end_ns[gap])
        dev = int(self.gaps.device[gap])
        for i, r in enumerate(self.rows):
            if r.kind == "idle" and r.device == dev:
                self.selected_row = i
                break
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

    def _rebuild_rows(self) -> None:
        self.rows = build_rows(self.trace, self._collapsed, self._gap_devices, self._shown_lanes)
        self.selected_row = min(self.selected_row, max(0, len(self.rows) - 1))

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
        got = self._gap_dev.get(device)
        if got is None:
            return None
        idx, s, e = got
        j = int(np.searchsorted(s, t_ns, side="right")) - 1
        if j >= 0 and e[j] > t_ns:
            return int(idx[j])
        return None

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
        row = self.top_row + event.y - 1
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

    # ------------------------------------------------------------ drawing
    def _style(self, name: str) -> Style:
        st = self._frame_styles.get(name)
        if st is None:
            if not self._frame_styles:
                self._base_style = self.rich_style
            st = self._frame_styles[name] = self.get_component_rich_style(name)
        return st

    def render_lines(self, crop):
        """Resolve sizes once per frame, then draw the lines (Line API). Component
        styles are cached until the CSS changes (``notify_style_update``)."""
        if not self._frame_styles:
            self._base_style = self.rich_style
        self._frame_width = self.size.width
        self._sync_width()
        return super().render_lines(crop)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._frame_styles = {}
        self._update_count += 1

    def render_line(self, y: int) -> Strip:
        width = self._frame_width or self.size.width
        vp = self.viewport
        cursor_cell = vp.cell_of(self.cursor_ns)
        row_i = self.top_row + y - 1 if y > 0 else -1
        key = (y, row_i, vp, width, cursor_cell, self.selected_row == row_i, self.selected_gap, self.selected_event, self._update_count)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if y == 0:
            strip = self._render_ruler(vp, cursor_cell)
        elif 0 <= row_i < len(self.rows):
            strip = self._render_row(self.rows[row_i], row_i, vp, cursor_cell)
        else:
            strip = Strip.blank(width, self._base_style)
        strip = strip.adjust_cell_length(width, self._base_style).simplify()
        self._cache[key] = strip
        return strip

    def _render_ruler(self, vp: Viewport, cursor_cell: int) -> Strip:
        g = self.label_width
        w = vp.width
        cells = Cells(w, self._style("lanes--ruler"))
        _, ticks = ruler_ticks(vp, self.origin_ns, min_cells=10)
        for cell, label in ticks:
            text = "▏" + label
            if cell + len(text) <= w:
                cells.text(cell, text, 0)
        head = ("↔" + format_duration_ns(vp.span_ns))[: g - 1].ljust(g)
        return Strip([Segment(head, cells.palette[0])] + cells.segments(cursor_cell, self._style("lanes--cursor")))

    def _label(self, row: Row, selected: bool) -> Segment:
        g = self.label_width
        text = sanitize(row.label)
        if row.kind == "lane":
            text = " " + text
        if len(text) > g - 1:
            text = text[: g - 2] + "…"
        style = self._style("lanes--group" if row.kind == "group" else "lanes--label")
        if selected:
            style = style + self._style("lanes--selected-row")
        return Segment(text.ljust(g - 1) + " ", style)

    def _render_row(self, row: Row, row_i: int, vp: Viewport, cursor_cell: int) -> Strip:
        cells = Cells(vp.width, self._base_style)
        if row.kind == "idle":
            self._draw_gaps(row.device, vp, cells, label=True)
        elif row.kind == "lane":
            if self.trace.lanes[row.lane].is_gpu:
                self._draw_gaps(self.trace.lanes[row.lane].device, vp, cells, label=False)
            self._draw_lane(row.lane, vp, cells)
        segs = [self._label(row, row_i == self.selected_row)]
        segs += cells.segments(cursor_cell, self._style("lanes--cursor"))
        return Strip(segs)

    def _draw_gaps(self, device: int, vp: Viewport, cells: "Cells", *, label: bool) -> None:
        got = self._gap_dev.get(device)
        if got is None:
            return
        idx, s, e = got
        edges = vp.edges()
        lo = int(np.searchsorted(e, edges[0], side="right"))
        hi = int(np.searchsorted(s, edges[-1], side="left"))
        if hi <= lo:
            return
        w = vp.width
        causes = np.asarray(self.gaps.cause)
        sel = self._style("lanes--selected-gap")
        cause_ids = {}
        for c in Cause:
            st = self._style(f"lanes--gap-{(c if self.show_causes else Cause.UNCLASSIFIED).label}")
            cause_ids[int(c)] = (cells.add(st), cells.add(st + sel))
        lut = np.zeros((len(Cause), 2), dtype=np.int32)
        for c, (a, b) in cause_ids.items():
            lut[c] = (a, b)
        # Cells whose centre lies in a gap.
        centres = (edges[:-1] + edges[1:]) // 2
        j = np.searchsorted(s[lo:hi], centres, side="right") - 1 + lo
        jj = np.clip(j, lo, hi - 1)
        inside = (j >= lo) & (e[jj] > centres)
        gap_of_cell = idx[jj]
        selected = (gap_of_cell == (-1 if self.selected_gap is None else self.selected_gap)) & label
        ids = lut[causes[gap_of_cell].astype(np.int64), selected.astype(np.int64)]
        cells.ids[inside] = ids[inside]
        cells.chars[inside] = ord("░") if label else ord(" ")
        if not label:
            return
        # Gaps narrower than a cell: a mark in the cell holding the gap's start.
        first_cells = np.clip(((s[lo:hi] - vp.start_ns) // max(vp.ns_per_cell, 1e-9)).astype(np.int64), 0, w - 1)
        uc, first_of = np.unique(first_cells, return_index=True)
        keep = ~inside[uc]
        mc = uc[keep]
        mg = idx[lo:hi][first_of[keep]]
        if mc.size:
            msel = (mg == (-1 if self.selected_gap is None else self.selected_gap))
            cells.ids[mc] = lut[causes[mg].astype(np.int64), msel.astype(np.int64)]
            cells.chars[mc] = ord("╎")
        # Cause label inside gaps wide enough.
        in_cells = np.flatnonzero(inside)
        if in_cells.size:
            breaks = np.flatnonzero((np.diff(in_cells) != 1) | (np.diff(gap_of_cell[in_cells]) != 0)) + 1
            starts = np.concatenate(([0], breaks))
            ends = np.concatenate((breaks, [in_cells.size]))
            wide = np.flatnonzero(ends - starts >= 3)
            for r in wide[:256].tolist():
                c0, n = int(in_cells[starts[r]]), int(ends[r] - starts[r])
                g = int(gap_of_cell[c0])
                word = Cause(int(causes[g])).label if self.show_causes else "idle"
                text = f"{word} {format_duration_ns(int(self.gaps.end_ns[g] - self.gaps.start_ns[g]))}"
                if n >= len(text) + 2:
                    cells.text(c0 + (n - len(text)) // 2, text, None)
                else:
                    cells.text(c0 + (n - 1) // 2, word[0].upper(), None)

    def _draw_lane(self, lane: int, vp: Viewport, cells: "Cells") -> None:
        li = self.lane_index(lane)
        if len(li) == 0:
            return
        summ = li.summarise(vp)
        cls_ids = np.zeros(len(GlyphClass) + 1, dtype=np.int32)
        cls_styles = {}
        for c in GlyphClass:
            cls_styles[int(c)] = st = self._style(f"lanes--{CLASS_NAME[c]}")
            cls_ids[int(c)] = cells.add(st)
        k = summ.cls.astype(np.int64)
        drawn = k >= 0
        if not drawn.any():
            return
        glyph = GLYPH_CODES[np.where(drawn, k, 0)]
        kern = drawn & (k == int(GlyphClass.KERNEL))
        if kern.any():
            glyph = np.where(kern, kernel_codes(summ), glyph)
        cells.chars[drawn] = glyph[drawn]
        cells.ids[drawn] = cls_ids[k[drawn]]
        # names inside wide spans (deeper events drawn last, so they win)
        wide = li.wide_events(vp, _NAME_MIN_CELLS)
        if wide.size:
            depth = self.trace.depth[li.offset + wide]
            for j in wide[np.argsort(depth, kind="stable")].tolist():
                kk = int(li.cls[j])
                if kk < 0:
                    continue
                c0 = max(0, -int(-(int(li.start[j]) - vp.start_ns) // vp.ns_per_cell))  # first cell fully inside
                c1 = min(vp.width, vp.cell_of(int(li.end[j])))
                if c1 - c0 < 3:
                    continue
                # Box only the cells this event's class shows in (inner events keep
                # their glyphs); the name goes in the leading run of those cells.
                mine = summ.cls[c0:c1] == kk
                if not mine[0]:
                    continue
                run = int(np.argmin(mine)) if not mine.all() else c1 - c0
                if run < 3:
                    continue
                sid = cells.add(cls_styles[kk] + Style(reverse=True))
                where = np.flatnonzero(mine) + c0
                cells.ids[where] = sid
                cells.chars[where] = ord(" ") if kk == GlyphClass.KERNEL else ord(CLASS_GLYPH[GlyphClass(kk)])
                cells.text(c0, sanitize(self.trace.name(li.offset + j), run), None)
        if self.selected_event is not None and li.offset <= self.selected_event < li.offset + len(li):
            j = self.selected_event - li.offset
            c0 = max(0, vp.cell_of(int(li.start[j])))
            c1 = min(vp.width - 1, max(c0, vp.cell_of(max(int(li.end[j]) - 1, int(li.start[j])))))
            if c0 <= c1:
                cells.overlay(c0, c1 + 1, self._style("lanes--selected-event"))
