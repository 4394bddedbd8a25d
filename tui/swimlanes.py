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

from .lanes_model import Row, build_rows, group_key_of, sanitize
from .viewmodel import GlyphClass, LaneIndex, Viewport, format_duration_ns, ruler_ticks

__all__ = ["Swimlanes", "CLASS_GLYPH", "CAUSE_GLYPH"]

#: Full-cell glyph per class: shapes differ so kinds read without colour.
CLASS_GLYPH = {
    GlyphClass.KERNEL: "█",
    GlyphClass.MEMCPY: "▓",
    GlyphClass.MEMSET: "▒",
    GlyphClass.SYNC: "~",
    GlyphClass.RUNTIME: "^",
    GlyphClass.CPU_OP: "=",
    GlyphClass.PYTHON: "-",
    GlyphClass.ANNOTATION: "─",
    GlyphClass.OTHER: "∙",
}
CLASS_NAME = {
    GlyphClass.KERNEL: "kernel",
    GlyphClass.MEMCPY: "memcpy",
    GlyphClass.MEMSET: "memset",
    GlyphClass.SYNC: "sync",
    GlyphClass.RUNTIME: "runtime",
    GlyphClass.CPU_OP: "cpu-op",
    GlyphClass.PYTHON: "python",
    GlyphClass.ANNOTATION: "annotation",
    GlyphClass.OTHER: "other",
}
#: Gap-row glyph per cause class.
CAUSE_GLYPH = {Cause.SYNC: "░", Cause.COPY: "░", Cause.LAUNCH: "░", Cause.HOST: "░", Cause.UNCLASSIFIED: "░"}
_LEFT_EIGHTHS = "▏▎▍▌▋▊▉█"
_VERT_EIGHTHS = "▁▂▃▄▅▆▇█"
_NAME_MIN_CELLS = 6


def _sized(coverage: float, left: float, right: float, count: int) -> str:
    """Kernel glyph for a partly covered cell: density bar when several events share
    the cell, else a left or right partial block for the sub-cell edge."""
    if coverage >= 0.999:
        return "█"
    if count >= 2:
        return _VERT_EIGHTHS[min(7, max(0, int(np.ceil(coverage * 8)) - 1))]
    if left >= right:
        return _LEFT_EIGHTHS[min(7, max(0, int(np.ceil(coverage * 8)) - 1))]
    return "▐" if coverage >= 0.375 else "▕"


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
        self._indexes: dict[int, LaneIndex] = {}
        self._collapsed: set = set()
        self._gap_dev: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        if self.gaps is not None and len(self.gaps):
            dev = np.asarray(self.gaps.device)
            for d in np.unique(dev):
                idx = np.flatnonzero(dev == d)
                o = idx[np.argsort(np.asarray(self.gaps.start_ns)[idx], kind="stable")]
                self._gap_dev[int(d)] = (o, np.asarray(self.gaps.start_ns)[o], np.asarray(self.gaps.end_ns)[o])
        gap_devices = set(self._gap_dev) | set(trace.devices())
        self._gap_devices = gap_devices
        self.rows: list[Row] = build_rows(trace, self._collapsed, gap_devices)
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
    def gutter(self) -> int:
        w = self.size.width
        return max(10, min(24, w // 5))

    @property
    def timeline_width(self) -> int:
        return max(1, self.size.width - self.gutter)

    @property
    def visible_rows(self) -> int:
        return max(1, self.size.height - 1)

    def invalidate(self) -> None:
        """Forget cached strips and repaint."""
        self._update_count += 1
        self.refresh()

    def _changed(self) -> None:
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

    def on_resize(self, event: events.Resize) -> None:
        w = self.timeline_width
        if not self._fitted:
            t0, t1 = self.trace.extent_ns
            self.viewport = Viewport.fit(t0, t1, w, margin=0.01)
            self._fitted = True
        else:
            self.viewport = self.viewport.with_width(w)
            if not self.viewport.contains(self.cursor_ns):
                self.viewport = self.viewport.centred_on(self.cursor_ns)
        self._keep_row_visible()
        self._update_count += 1

    # ------------------------------------------------------------ state ops
    def set_viewport(self, vp: Viewport) -> None:
        self.viewport = vp.with_width(self.timeline_width)
        self._changed()

    def zoom(self, factor: float) -> None:
        """Zoom by ``factor`` (> 1 in) around the cursor."""
        self.viewport = self.viewport.zoom(factor, self.cursor_ns)
        self._changed()

    def pan(self, fraction: float) -> None:
        """Pan by ``fraction`` of the visible span; the cursor keeps its cell."""
        old = self.viewport
        self.viewport = old.pan(fraction)
        self.cursor_ns += self.viewport.start_ns - old.start_ns
        self._changed()

    def fit_all(self) -> None:
        t0, t1 = self.trace.extent_ns
        self.viewport = Viewport.fit(t0, t1, self.timeline_width, margin=0.01)
        self._changed()

    def go_to(self, t_ns: int) -> None:
        """Put the cursor at absolute ``t_ns`` and centre it when off-screen."""
        self.cursor_ns = int(t_ns)
        if not self.viewport.contains(self.cursor_ns):
            self.viewport = self.viewport.centred_on(self.cursor_ns)
        self._changed()

    def move_cursor_cells(self, cells: int) -> None:
        self.cursor_ns = self.viewport.time_of(self.viewport.cell_of(self.cursor_ns) + cells)
        if not self.viewport.contains(self.cursor_ns):
            self.viewport = self.viewport.pan(0.5 if cells > 0 else -0.5)
        self.selected_event = None
        self._changed()

    def select_row(self, delta: int) -> None:
        self.selected_row = max(0, min(len(self.rows) - 1, self.selected_row + delta))
        self.selected_event = None
        self._changed()

    def select_gap(self, gap: int | None, *, zoom: bool = False) -> None:
        """Select gap ``gap``: cursor to its start, its device's gap row selected,
        centred when off-screen (or zoomed to fit when ``zoom``)."""
        self.selected_gap = gap
        self.selected_event = None
        if gap is None or self.gaps is None:
            self._changed()
            return
        s, e = int(self.gaps.start_ns[gap]), int(self.gaps.end_ns[gap])
        dev = int(self.gaps.device[gap])
        for i, r in enumerate(self.rows):
            if r.kind == "idle" and r.device == dev:
                self.selected_row = i
                break
        self.cursor_ns = s
        if zoom:
            self.viewport = Viewport.fit(s, e, self.timeline_width, margin=0.25)
        elif not (self.viewport.contains(s) and self.viewport.contains(e - 1)):
            if e - s > self.viewport.span_ns * 0.8:
                self.viewport = Viewport.fit(s, e, self.timeline_width, margin=0.25)
            else:
                self.viewport = self.viewport.centred_on((s + e) // 2)
        self._changed()

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
        self._changed()

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
        self.rows = build_rows(self.trace, self._collapsed, self._gap_devices)
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
        if event.x >= self.gutter:
            self.cursor_ns = self.viewport.time_of(event.x - self.gutter)
            self.zoom(1.25)
            event.stop()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        if event.x >= self.gutter:
            self.cursor_ns = self.viewport.time_of(event.x - self.gutter)
            self.zoom(0.8)
            event.stop()

    def on_click(self, event: events.Click) -> None:
        row = self.top_row + event.y - 1
        if 0 <= row < len(self.rows):
            self.selected_row = row
        if event.x >= self.gutter:
            self.cursor_ns = self.viewport.time_of(event.x - self.gutter)
        self.selected_event = None
        r = self.current_row()
        if r is not None and r.kind == "idle":
            g = self.gap_at(self.cursor_ns, r.device)
            if g is not None:
                self.selected_gap = g
        self._changed()

    # ------------------------------------------------------------ drawing
    def _style(self, name: str) -> Style:
        return self.get_component_rich_style(name)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        vp = self.viewport
        if vp.width != self.timeline_width:
            vp = self.viewport = vp.with_width(self.timeline_width)
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
            strip = Strip.blank(width, self.rich_style)
        strip = strip.adjust_cell_length(width, self.rich_style).simplify()
        self._cache[key] = strip
        return strip

    def _render_ruler(self, vp: Viewport, cursor_cell: int) -> Strip:
        g = self.gutter
        w = vp.width
        chars = [" "] * w
        _, ticks = ruler_ticks(vp, self.origin_ns, min_cells=10)
        for cell, label in ticks:
            text = "▏" + label
            if cell + len(text) <= w:
                for k, ch in enumerate(text):
                    chars[cell + k] = ch
        rs = self._style("lanes--ruler")
        head = ("↔" + format_duration_ns(vp.span_ns))[: g - 1].ljust(g)
        segs = [Segment(head, rs)]
        segs += self._runs(chars, [rs] * w, cursor_cell)
        return Strip(segs)

    def _runs(self, chars: list[str], styles: list[Style], cursor_cell: int) -> list[Segment]:
        if 0 <= cursor_cell < len(chars):
            styles = list(styles)
            styles[cursor_cell] = styles[cursor_cell] + self._style("lanes--cursor")
        segs: list[Segment] = []
        start = 0
        n = len(chars)
        for k in range(1, n + 1):
            if k == n or styles[k] is not styles[start]:
                segs.append(Segment("".join(chars[start:k]), styles[start]))
                start = k
        return segs

    def _label(self, row: Row, selected: bool) -> Segment:
        g = self.gutter
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
        w = vp.width
        base = self.rich_style
        chars = [" "] * w
        styles: list[Style] = [base] * w
        if row.kind == "idle":
            self._draw_gaps(row.device, vp, chars, styles, label=True)
        elif row.kind == "lane":
            if self.trace.lanes[row.lane].is_gpu:
                self._draw_gaps(self.trace.lanes[row.lane].device, vp, chars, styles, label=False)
            self._draw_lane(row.lane, vp, chars, styles)
        segs = [self._label(row, row_i == self.selected_row)]
        segs += self._runs(chars, styles, cursor_cell)
        return Strip(segs)

    def _draw_gaps(self, device: int, vp: Viewport, chars: list[str], styles: list[Style], *, label: bool) -> None:
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
        gap_styles = {
            int(c): self._style(f"lanes--gap-{c.label}") for c in Cause
        }
        sel_style = self._style("lanes--selected-gap")
        # Cells whose centre lies in a gap; gaps narrower than a cell still mark the
        # cell holding their start.
        centres = (edges[:-1] + edges[1:]) // 2
        j = np.searchsorted(s[lo:hi], centres, side="right") - 1 + lo
        jj = np.clip(j, lo, hi - 1)
        inside = (j >= lo) & (e[jj] > centres)
        cells = np.flatnonzero(inside)
        gap_of_cell = idx[jj]
        first_cells = np.clip(((s[lo:hi] - vp.start_ns) // max(vp.ns_per_cell, 1e-9)).astype(np.int64), 0, w - 1)
        marks = {int(c): int(g) for c, g in zip(first_cells, idx[lo:hi]) if not inside[int(c)]}
        for c in cells.tolist():
            g = int(gap_of_cell[c])
            st = gap_styles[int(causes[g])]
            if label and g == self.selected_gap:
                st = st + sel_style
            chars[c] = "░" if label else " "
            styles[c] = st
        if label:
            for c, g in marks.items():
                st = gap_styles[int(causes[g])]
                if g == self.selected_gap:
                    st = st + sel_style
                chars[c] = "╎"
                styles[c] = st
            # cause label inside gaps wide enough
            if cells.size:
                runs = np.split(cells, np.flatnonzero(np.diff(cells) != 1) + 1)
                for run in runs:
                    n = run.size
                    g = int(gap_of_cell[run[0]])
                    text = f"{Cause(int(causes[g])).label} {format_duration_ns(int(self.gaps.end_ns[g] - self.gaps.start_ns[g]))}"
                    if n >= len(text) + 2:
                        c0 = int(run[0]) + (n - len(text)) // 2
                        for k, ch in enumerate(text):
                            chars[c0 + k] = ch
                    elif n >= 3:
                        c0 = int(run[0]) + (n - 1) // 2
                        chars[c0] = Cause(int(causes[g])).label[0].upper()

    def _draw_lane(self, lane: int, vp: Viewport, chars: list[str], styles: list[Style]) -> None:
        li = self.lane_index(lane)
        if len(li) == 0:
            return
        summ = li.summarise(vp)
        cls_styles = {int(c): self._style(f"lanes--{CLASS_NAME[c]}") for c in GlyphClass}
        cls = summ.cls.tolist()
        cov = summ.coverage.tolist()
        left = summ.left.tolist()
        right = summ.right.tolist()
        count = summ.count.tolist()
        for c in range(vp.width):
            k = cls[c]
            if k < 0:
                continue
            if k == GlyphClass.KERNEL:
                chars[c] = _sized(cov[c], left[c], right[c], count[c])
            else:
                chars[c] = CLASS_GLYPH[GlyphClass(k)]
            styles[c] = cls_styles[k]
        # names inside wide spans (deeper events drawn last, so they win)
        wide = li.wide_events(vp, _NAME_MIN_CELLS)
        if wide.size:
            depth = self.trace.depth[li.offset + wide]
            for j in wide[np.argsort(depth, kind="stable")].tolist():
                ev = li.offset + j
                k = int(li.cls[j])
                if k < 0:
                    continue
                c0 = max(0, -int(-(int(li.start[j]) - vp.start_ns) // vp.ns_per_cell))  # first cell fully inside
                c1 = min(vp.width, vp.cell_of(int(li.end[j])))
                if c1 - c0 < 3:
                    continue
                text = sanitize(self.trace.name(ev), c1 - c0)
                st = cls_styles[k] + Style(reverse=True)
                fill = " " if k == GlyphClass.KERNEL else CLASS_GLYPH[GlyphClass(k)]
                for q in range(c0, c1):
                    chars[q] = text[q - c0] if q - c0 < len(text) else fill
                    styles[q] = st
        if self.selected_event is not None and li.offset <= self.selected_event < li.offset + len(li):
            j = self.selected_event - li.offset
            c0 = max(0, vp.cell_of(int(li.start[j])))
            c1 = min(vp.width - 1, max(c0, vp.cell_of(max(int(li.end[j]) - 1, int(li.start[j])))))
            se = self._style("lanes--selected-event")
            for c in range(c0, c1 + 1):
                styles[c] = styles[c] + se
