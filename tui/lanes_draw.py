"""Drawing of the swimlanes (``LaneDrawing``, mixed into ``gapscope.tui.swimlanes.Swimlanes``).

Line API: ``render_line(y)`` draws the time ruler (row 0) or one row (group header,
per-device idle-gap row, lane) from per-cell summaries (``LaneIndex.summarise``, cost
independent of trace size) into ``gapscope.tui.cells.Cells`` and caches the strip by everything
that changes its pixels plus the widget's update counter. Kinds differ by glyph shape
and colour (``NO_COLOR`` stays readable); gaps are shaded by cause class and labelled
with the class and length, or its first letter when narrow (S C L H U). Names are drawn
literally (``sanitize``).
"""

from __future__ import annotations

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from gapscope.analysis.types import Cause

from gapscope.tui.cells import CLASS_GLYPH, CLASS_NAME, GLYPH_CODES, Cells, kernel_codes
from gapscope.tui.lanes_model import Row, sanitize
from gapscope.tui.ruler import format_duration_ns, ruler_ticks
from gapscope.tui.viewmodel import GlyphClass, Viewport

__all__ = ["LaneDrawing", "COMPONENT_CLASSES", "DEFAULT_CSS"]

#: An event's name is drawn inside its span from this many cells on.
_NAME_MIN_CELLS = 6

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


class LaneDrawing:
    """Drawing half of ``Swimlanes``: expects its state (``trace``, ``gaps``,
    ``viewport``, ``rows``, ``top_row``, ``cursor_ns``, the selections, ``show_causes``,
    ``label_width``, ``lane_index``, ``_sync_width``, ``_gap_dev``, ``_cache``,
    ``_update_count``, ``_frame_*``) and must come before ``Widget`` in the bases."""

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
        self._keep_row_visible()  # the height may have changed since the last key (panel, prompt)
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
            # owner[c]: which drawn name holds cell c (-1: none); fill[c]: the box glyph
            # under it, so a name cut by a deeper one gets its cells back.
            owner = np.full(vp.width, -1, dtype=np.int64)
            fill = cells.chars.copy()
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
                cells.chars[where] = fill[where] = ord(" ") if kk == GlyphClass.KERNEL else ord(CLASS_GLYPH[GlyphClass(kk)])
                _place_name(cells, owner, fill, j, c0, int(where[-1]) + 1, run,
                            sanitize(self.trace.name(li.offset + j), run))
        if self.selected_event is not None and li.offset <= self.selected_event < li.offset + len(li):
            j = self.selected_event - li.offset
            c0 = max(0, vp.cell_of(int(li.start[j])))
            c1 = min(vp.width - 1, max(c0, vp.cell_of(max(int(li.end[j]) - 1, int(li.start[j])))))
            if c0 <= c1:
                cells.overlay(c0, c1 + 1, self._style("lanes--selected-event"))


def _place_name(cells: Cells, owner: np.ndarray, fill: np.ndarray, j: int, c0: int, c_end: int, run: int, name: str) -> None:
    """Write event ``j``'s ``name`` from cell ``c0`` in at most ``run - 1`` cells (cut
    with ``…``), so that at least one box cell separates it from what follows. A name
    drawn earlier (a parent's) that reaches into ``[c0 - 1, c_end]`` loses its cells
    from ``c0 - 1`` on (they get their box glyph back) and ends in ``…``: two names
    never run together."""
    if len(name) > run - 1:
        name = name[: max(0, run - 2)].rstrip() + "…"
    lo, hi = max(0, c0 - 1), min(owner.size, c_end + 1)
    for other in np.unique(owner[lo:hi]).tolist():
        if other < 0:
            continue
        mine = np.flatnonzero(owner == other)
        cut = mine[mine >= lo]
        if cut.size == 0:
            continue
        cells.chars[cut] = fill[cut]
        owner[cut] = -1
        kept = mine[mine < lo]
        if kept.size:
            cells.chars[kept[-1]] = ord("…")
    n = min(len(name), owner.size - c0)
    cells.text(c0, name, None)
    owner[c0: c0 + n] = j
