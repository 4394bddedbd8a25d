"""Drawing of the swimlanes: a pure function of an explicit state object.

``LaneView`` holds everything one frame depends on: the trace, its display rows, the
gaps by device, the viewport, cursor, selections, label width and the resolved styles
of the component classes. ``render_line(view, y)`` draws the time ruler (``y == 0``)
or one row (group header, per-device idle-gap row, lane) from per-cell summaries
(``LaneIndex.summarise``, cost independent of trace size) into
``gapscope.tui.cells.Cells`` and returns it as a ``Strip`` finished with
``simplify()``. No widget and no App: the ``Swimlanes`` widget builds the view from
its state, resolves the styles from its CSS and caches the strips by everything that
changes their pixels.

Kinds differ by glyph shape and colour (``NO_COLOR`` stays readable); gaps are shaded
by cause class and labelled with the class and length, or its first letter when
narrow (S C L H U D). Names are drawn literally (``sanitize``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from gapscope.analysis.causes import CAUSES
from gapscope.analysis.types import Cause, Gaps
from gapscope.parsers.model import Trace
from gapscope.tui.cells import CLASS_GLYPH, CLASS_NAME, GLYPH_CODES, Cells, crop, kernel_codes, pad
from gapscope.tui.lanes_model import DeviceGaps, Row, sanitize
from gapscope.tui.ruler import ruler_ticks
from gapscope.tui.viewmodel import GlyphClass, LaneIndex, Viewport
from gapscope.units import fmt_dur

__all__ = ["LaneView", "COMPONENT_CLASSES", "PENDING_TEXT", "render_line", "render_ruler", "render_row", "row_at"]

#: An event's name is drawn inside its span from this many cells on.
_NAME_MIN_CELLS = 6

#: The component classes whose styles the drawing reads (the keys of ``LaneView.styles``).
COMPONENT_CLASSES = {
    "lanes--kernel",
    "lanes--memcpy",
    "lanes--memset",
    "lanes--sync",
    "lanes--runtime",
    "lanes--cpu-op",
    "lanes--python",
    "lanes--annotation",
    "lanes--other",
    *(f"lanes--gap-{info.label}" for info in CAUSES.values()),
    "lanes--selected-gap",
    "lanes--label",
    "lanes--group",
    "lanes--ruler",
    "lanes--cursor",
    "lanes--selected-row",
    "lanes--selected-event",
    "lanes--busy",
}


@dataclasses.dataclass(frozen=True, slots=True)
class LaneView:
    """What one frame of the swimlanes shows (immutable; the widget builds one per frame).

    - ``trace``; ``rows``: the display rows (``gapscope.tui.lanes_model.build_rows``);
      ``gaps`` (``Gaps`` or None) and ``gaps_by_device`` (device -> ``DeviceGaps``,
      ``gapscope.tui.lanes_model.gaps_by_device(gaps)``): the gaps' causes and
      lengths, and their start order per device.
    - ``viewport``: the timeline's cells (``viewport.width`` cells right of the
      labels); ``origin_ns``: absolute ns the ruler counts from (the trace start);
      ``cursor_ns``: absolute ns of the cursor (its cell is drawn in the cursor style).
    - ``top_row``: the display row drawn at ``y == 1``, unless ``pinned_row`` (a gap
      row scrolled above the view) is drawn there instead; ``selected_row`` (row index),
      ``selected_gap`` (gap index or None), ``selected_event`` (event index or None).
    - ``show_causes``: gaps in their cause colour and label (False: one neutral
      ``idle`` look); ``pending``: the diagnosis is still running (idle rows say
      ``finding gaps…`` instead of showing none).
    - ``width``: cells of a whole line (labels + timeline); ``label_width``: cells of
      the label column.
    - ``styles``: component class name (every one of ``COMPONENT_CLASSES``) -> Rich
      style; ``base_style``: the widget's own style (blank cells).
    - ``lane_index(lane) -> LaneIndex``: the lane's search structures (the caller
      builds each once and keeps it).
    """

    trace: Trace
    rows: Sequence[Row]
    gaps: Gaps | None
    gaps_by_device: Mapping[int, DeviceGaps]
    viewport: Viewport
    origin_ns: int
    cursor_ns: int
    top_row: int
    selected_row: int
    selected_gap: int | None
    selected_event: int | None
    show_causes: bool
    width: int
    label_width: int
    styles: Mapping[str, Style]
    base_style: Style
    lane_index: Callable[[int], LaneIndex]
    pinned_row: int | None = None
    pending: bool = False


#: What an idle row shows while the diagnosis runs.
PENDING_TEXT = "finding gaps…"


def row_at(top_row: int, pinned_row: int | None, y: int) -> int:
    """The display row drawn at line ``y`` (-1 for the ruler): ``top_row + y - 1``,
    except that a ``pinned_row`` takes line 1 (the row it covers is scrolled on)."""
    if y <= 0:
        return -1
    if pinned_row is not None and y == 1:
        return pinned_row
    return top_row + y - 1


def render_line(view: LaneView, y: int) -> Strip:
    """Line ``y`` of the widget: the ruler at ``y == 0``, else display row
    ``row_at(view.top_row, view.pinned_row, y)`` (blank past the last row); exactly
    ``view.width`` cells, equal-style runs merged (``Strip.simplify``)."""
    row_i = row_at(view.top_row, view.pinned_row, y)
    if y == 0:
        strip = render_ruler(view)
    elif 0 <= row_i < len(view.rows):
        strip = render_row(view, row_i)
    else:
        strip = Strip.blank(view.width, view.base_style)
    return strip.adjust_cell_length(view.width, view.base_style).simplify()


def render_ruler(view: LaneView) -> Strip:
    """The time ruler: ``↔`` and the visible span in the label column, then a tick
    ``▏`` with its offset from ``origin_ns`` at every 1-2-5 step (at least 10 cells
    apart) whose label fits."""
    vp = view.viewport
    g = view.label_width
    w = vp.width
    cells = Cells(w, view.styles["lanes--ruler"])
    _, ticks = ruler_ticks(vp, view.origin_ns, min_cells=10)
    for cell, label in ticks:
        text = "▏" + label
        if cell + len(text) <= w:
            cells.text(cell, text, 0)
    head = ("↔" + fmt_dur(vp.span_ns))[: g - 1].ljust(g)
    cursor = cells.segments(vp.cell_of(view.cursor_ns), view.styles["lanes--cursor"])
    return Strip([Segment(head, cells.palette[0])] + cursor)


def render_row(view: LaneView, row_i: int) -> Strip:
    """Display row ``row_i``: its label, then the timeline (empty for a group header,
    its device's gaps for an idle row, its events over its device's gaps for a lane)."""
    vp = view.viewport
    row = view.rows[row_i]
    cells = Cells(vp.width, view.base_style)
    if row.kind == "idle":
        if view.pending:
            cells.text(1, PENDING_TEXT[: max(0, vp.width - 1)], cells.add(view.styles["lanes--label"]))
        else:
            _draw_gaps(view, row.device, cells, label=True)
    elif row.kind == "lane":
        if view.trace.lanes[row.lane].is_gpu:
            _draw_gaps(view, view.trace.lanes[row.lane].device, cells, label=False)
        _draw_lane(view, row.lane, cells)
    segs = [_label(view, row, row_i == view.selected_row)]
    segs += cells.segments(vp.cell_of(view.cursor_ns), view.styles["lanes--cursor"])
    return Strip(segs)


def _label(view: LaneView, row: Row, selected: bool) -> Segment:
    """The label column of ``row``: its sanitised label (a lane's indented one cell),
    cut with ``…`` so that one blank cell stays before the timeline."""
    g = view.label_width
    text = sanitize(row.label)
    if row.kind == "lane":
        text = " " + text
    style = view.styles["lanes--group" if row.kind == "group" else "lanes--label"]
    if selected:
        style = style + view.styles["lanes--selected-row"]
    return Segment(pad(text, g - 1) + " ", style)


def _draw_gaps(view: LaneView, device: int, cells: Cells, *, label: bool) -> None:
    """Shade the cells of ``device``'s gaps: ``░`` by cause class with the class and
    length inside gaps wide enough (its first letter when narrow), ``╎`` for a gap
    narrower than a cell (``label``: the gap row); without ``label`` (a GPU lane)
    only the gaps' background, blank."""
    got = view.gaps_by_device.get(device)
    gaps = view.gaps
    if got is None or gaps is None:
        return
    vp = view.viewport
    idx, s, e = got.gap, got.start_ns, got.end_ns
    edges = vp.edges()
    lo = int(np.searchsorted(e, edges[0], side="right"))
    hi = int(np.searchsorted(s, edges[-1], side="left"))
    if hi <= lo:
        return
    w = vp.width
    causes = np.asarray(gaps.cause)
    sel = view.styles["lanes--selected-gap"]
    cause_ids: dict[int, tuple[int, int]] = {}
    for c in Cause:
        st = view.styles[f"lanes--gap-{(c if view.show_causes else Cause.UNCLASSIFIED).label}"]
        cause_ids[int(c)] = (cells.add(st), cells.add(st + sel))
    lut = np.zeros((len(Cause), 2), dtype=np.int32)
    for cause_id, (a, b) in cause_ids.items():
        lut[cause_id] = (a, b)
    # Cells whose centre lies in a gap.
    centres = (edges[:-1] + edges[1:]) // 2
    j = np.searchsorted(s[lo:hi], centres, side="right") - 1 + lo
    jj = np.clip(j, lo, hi - 1)
    inside = (j >= lo) & (e[jj] > centres)
    gap_of_cell = idx[jj]
    selected = (gap_of_cell == (-1 if view.selected_gap is None else view.selected_gap)) & label
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
        msel = mg == (-1 if view.selected_gap is None else view.selected_gap)
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
            word = Cause(int(causes[g])).label if view.show_causes else "idle"
            text = f"{word} {fmt_dur(int(gaps.end_ns[g] - gaps.start_ns[g]))}"
            if n >= len(text) + 2:
                cells.text(c0 + (n - len(text)) // 2, text, None)
            else:
                cells.text(c0 + (n - 1) // 2, word[0].upper(), None)


def _draw_lane(view: LaneView, lane: int, cells: Cells) -> None:
    """Draw lane ``lane``'s events into ``cells``: one glyph per cell from the lane's
    ``CellSummary`` (partial blocks for kernels), names boxed inside spans of at least
    ``_NAME_MIN_CELLS`` cells, the selected event underlined."""
    vp = view.viewport
    li = view.lane_index(lane)
    if len(li) == 0:
        return
    summ = li.summarise(vp)
    cls_ids = np.zeros(len(GlyphClass) + 1, dtype=np.int32)
    cls_styles: dict[int, Style] = {}
    for c in GlyphClass:
        cls_styles[int(c)] = st = view.styles[f"lanes--{CLASS_NAME[c]}"]
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
        depth = view.trace.depth[li.offset + wide]
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
            _place_name(
                cells, owner, fill, j, c0, int(where[-1]) + 1, run, sanitize(view.trace.name(li.offset + j), run)
            )
    if view.selected_event is not None and li.offset <= view.selected_event < li.offset + len(li):
        j = view.selected_event - li.offset
        c0 = max(0, vp.cell_of(int(li.start[j])))
        c1 = min(vp.width - 1, max(c0, vp.cell_of(max(int(li.end[j]) - 1, int(li.start[j])))))
        if c0 <= c1:
            cells.overlay(c0, c1 + 1, view.styles["lanes--selected-event"])


def _place_name(
    cells: Cells, owner: np.ndarray, fill: np.ndarray, j: int, c0: int, c_end: int, run: int, name: str
) -> None:
    """Write event ``j``'s ``name`` from cell ``c0`` in at most ``run - 1`` cells (cut
    with ``…``), so that at least one box cell separates it from what follows. A name
    drawn earlier (a parent's) that reaches into ``[c0 - 1, c_end]`` loses its cells
    from ``c0 - 1`` on (they get their box glyph back) and ends in ``…``: two names
    never run together."""
    if cell_len(name) > run - 1:
        name = crop(name, max(1, run - 1))
        if name[:-1].endswith(" "):
            name = name[:-1].rstrip() + "…"
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
    n = min(cell_len(name), owner.size - c0)
    cells.text(c0, name, None)
    owner[c0 : c0 + n] = j
