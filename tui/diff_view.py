"""``gapscope diff --view BEFORE AFTER``: the two traces' swimlanes one above the other on
a shared relative time axis, aligned at the step, with the diff table beside them.

``n`` / ``N`` walk the matched idle positions of the diff (``gapscope.diff.match``):
each side shows its step holding the position's gap, both from the step start with the
same ns per cell, and the gap selected; a position that died or appeared shows the
other side's step at the same scale. The side panel lists the positions (status,
class before → after, idle per step) with the current one marked, and its detail.

``DiffView`` (the aligned viewports and the walk) is pure and tested without Textual;
``DiffScreen`` / ``DiffApp`` are the Textual glue. Built by ``make_diff_app``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Static

from gapscope.tui.footer import KeyFooter
from gapscope.tui.lanes_model import sanitize
from gapscope.tui.swimlanes import Swimlanes
from gapscope.tui.viewmodel import Viewport
from gapscope.units import fmt_delta, fmt_dur

if TYPE_CHECKING:  # the command builds them; the viewer only reads them
    from gapscope.diff.match import Match
    from gapscope.diff.side import Side

__all__ = ["DiffView", "SideWindow", "DiffScreen", "DiffApp", "make_diff_app"]


@dataclasses.dataclass(frozen=True)
class SideWindow:
    """What one side shows for a position: ``gap`` (gap index to select, or None),
    ``step_start_ns`` (absolute; the left edge of the view)."""

    gap: int | None
    step_start_ns: int


@dataclasses.dataclass(frozen=True)
class DiffView:
    """The walk over the diff's matched positions. ``before`` / ``after``: the diff's
    ``Side`` objects; ``matches``: its ``Match`` rows (largest change first)."""

    before: Side
    after: Side
    matches: tuple[Match, ...]

    def window(self, k: int, after: bool) -> SideWindow:
        """The window of side ``after`` (False: BEFORE) for match ``k``: the position's
        first member gap in a steady step and that step's start; without a position on
        this side, or none of its gaps in a steady step, the first steady step."""
        side = self.after if after else self.before
        pos = self.matches[k].after if after else self.matches[k].before
        starts = np.asarray(side.step_start_ns, dtype=np.int64)
        steady = np.asarray(side.steady).astype(bool)
        first_steady = int(np.flatnonzero(steady)[0]) if steady.any() else 0
        fallback = int(starts[first_steady]) if starts.size else int(side.trace.extent_ns[0])
        if pos is None or len(pos.gap_indices) == 0:
            return SideWindow(None, fallback)
        gaps = side.diag.gaps
        members = np.asarray(pos.gap_indices, dtype=np.int64)
        members = members[np.argsort(gaps.start_ns[members], kind="stable")]
        if starts.size:
            # the first member inside a steady step: never the warm-up, prefill or an
            # edge of the capture (issue 47: the graph side showed its warm-up)
            at = np.searchsorted(starts, gaps.start_ns[members], side="right") - 1
            ok = (at >= 0) & steady[np.clip(at, 0, steady.size - 1)]
            if ok.any():
                j = int(np.flatnonzero(ok)[0])
                return SideWindow(int(members[j]), int(starts[int(at[j])]))
            return SideWindow(None, fallback)
        return SideWindow(int(members[0]), fallback)

    def span_ns(self) -> int:
        """The shared span: the longer median steady step of the two sides (ns)."""
        walls = [int(np.median(s.wall_ns)) for s in (self.before, self.after) if len(s.wall_ns)]
        return max(walls) if walls else 1

    def viewport(self, k: int, after: bool, width: int) -> Viewport:
        """The aligned viewport of one side: from its step start, the shared span over
        ``width`` cells (5% margin on the right)."""
        w = self.window(k, after)
        return Viewport(w.step_start_ns, max(self.span_ns() * 1.05 / max(width, 1), 1e-3), max(width, 1))


def _pos_text(p) -> str:
    if p is None:
        return "-"
    mix = p.cause.label + (f", {p.secondary.label} {100 * p.secondary_share:.0f}%" if p.secondary is not None else "")
    return f"{mix} {fmt_dur(p.idle_per_step_ns)}"


def table_text(view: DiffView, current: int, limit: int = 30) -> Text:
    """The side panel: the positions, ▶ on the current one, then its detail."""
    t = Text()
    t.append("Idle positions (per step)\n", style="bold")
    for k, m in enumerate(view.matches[:limit]):
        mark = "▶ " if k == current else "  "
        t.append(mark + f"{m.status:<9} ", style="bold" if k == current else "")
        t.append(sanitize(m.label, 40))
        t.append(f"\n    {_pos_text(m.before)} → {_pos_text(m.after)}\n", style="dim" if k != current else "")
    if len(view.matches) > limit:
        t.append(f"  … and {len(view.matches) - limit} more (in gapscope diff)\n", style="dim")
    if view.matches:
        m = view.matches[current]
        t.append("\n")
        t.append(f"{m.status}: ", style="bold")
        t.append(sanitize(m.label, 80))
        t.append(f"\nidle per step {_pos_text(m.before)} → {_pos_text(m.after)} ({fmt_delta(m.change_ns)})\n")
    return t


def _label(side: str, path: str) -> Text:
    """ "BEFORE worker0.pt.trace.json.gz" on one line (the file name; cut with …)."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1] or path
    t = Text(f"{side} ", style="bold", no_wrap=True, overflow="ellipsis")
    t.append(sanitize(name, 200))
    return t


class DiffScreen(Screen):
    """BEFORE above AFTER, aligned at the step; the diff table on the right."""

    BINDINGS = [
        Binding("n,right_square_bracket", "walk(1)", "next position", id="diff.next"),
        Binding("N,left_square_bracket", "walk(-1)", "prev position", id="diff.prev"),
        Binding("plus,i", "zoom(2.0)", "zoom in", key_display="+", id="diff.zoom_in"),
        Binding("minus,o", "zoom(0.5)", "zoom out", key_display="-", show=False, id="diff.zoom_out"),
        Binding("h,left", "pan(-0.2)", "pan left", show=False, id="diff.pan_left"),
        Binding("l,right", "pan(0.2)", "pan right", show=False, id="diff.pan_right"),
        Binding("q", "app.quit", "quit", id="diff.quit"),
    ]

    DEFAULT_CSS = """
    DiffScreen #diff-verdict { height: auto; max-height: 3; }
    DiffScreen #diff-main { height: 1fr; }
    DiffScreen #diff-lanes { width: 1fr; }
    DiffScreen .diff-label { height: 1; text-style: bold; }
    DiffScreen Swimlanes { height: 1fr; }
    DiffScreen #diff-table { width: 35%; min-width: 28; max-width: 48; height: 1fr; overflow-y: auto;
                             border-left: vkey $panel; padding: 0 1; }
    """

    def __init__(self, view: DiffView, verdict: str, labels: tuple[str, str]) -> None:
        super().__init__()
        self.view = view
        self.verdict = verdict
        self.labels = labels
        self.current = 0

    def compose(self) -> ComposeResult:
        yield Static(Text(self.verdict), id="diff-verdict")
        with Horizontal(id="diff-main"):
            with Vertical(id="diff-lanes"):
                yield Static(_label("BEFORE", self.labels[0]), classes="diff-label")
                yield Swimlanes(self.view.before.trace, self.view.before.diag, id="before")
                yield Static(_label("AFTER", self.labels[1]), classes="diff-label")
                yield Swimlanes(self.view.after.trace, self.view.after.diag, id="after")
            yield Static(id="diff-table")
        yield KeyFooter()

    def _sides(self) -> tuple[Swimlanes, Swimlanes]:
        return self.query_one("#before", Swimlanes), self.query_one("#after", Swimlanes)

    def on_mount(self) -> None:
        self._show()

    def on_resize(self, event) -> None:
        self.call_after_refresh(self._show)

    def _show(self) -> None:
        """Select the current position's gap on each side and align both views."""
        table = self.query_one("#diff-table", Static)
        table.update(table_text(self.view, self.current))
        if not self.view.matches:
            return
        for lanes, after in zip(self._sides(), (False, True)):
            w = self.view.window(self.current, after)
            if w.gap is not None:
                lanes.select_gap(w.gap)
            lanes.set_viewport(self.view.viewport(self.current, after, lanes.timeline_width), clamp=False)

    def action_walk(self, direction: int) -> None:
        """Next (+1) / previous (-1) matched position (wraps)."""
        if self.view.matches:
            self.current = (self.current + int(direction)) % len(self.view.matches)
            self._show()

    def action_zoom(self, factor: float) -> None:
        for lanes in self._sides():
            lanes.zoom(factor)

    def action_pan(self, fraction: float) -> None:
        for lanes in self._sides():
            lanes.pan(fraction)


class DiffApp(App):
    """The diff viewer (one screen)."""

    TITLE = "gapscope diff"

    def __init__(self, view: DiffView, verdict: str, labels: tuple[str, str]) -> None:
        super().__init__()
        self._screen_args = (view, verdict, labels)

    def on_mount(self) -> None:
        self.push_screen(DiffScreen(*self._screen_args))


def make_diff_app(b, a, matches, *, verdict: str, labels: tuple[str, str]) -> DiffApp:
    """Build the diff viewer from the diff's two ``Side`` objects and its ``Match`` rows
    (``gapscope.diff.document.diff_sides``; the command passes them, so the viewer does
    not import the headless commands); ``verdict``: the one-line verdict; ``labels``:
    how to name the two sides (their paths). Positions are walked largest change first."""
    order = sorted(range(len(matches)), key=lambda k: -abs(matches[k].change_ns))
    return DiffApp(DiffView(b, a, tuple(matches[k] for k in order)), verdict, labels)
