"""The trace screen: header, swimlanes, side panel, detail line, prompt and footer.

Keys are bindings with ids (remappable through the app's keymap) and parameterised
actions (``jump_gap(1)``, ``zoom(2)``, ``pan(-0.2)``). Layout lives in
``gapscope.tcss``; the panel is shown or hidden with CSS classes.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from analysis.types import Cause
from parsers.model import Kind, Trace

from .lanes_model import sanitize
from .navigation import SIZE, TIME, FlowIndex, GapNavigator, NameSearch
from .panel import DetailLine, GapPanel
from .swimlanes import Swimlanes
from .viewmodel import format_duration_ns, parse_time_ns

__all__ = ["TraceScreen", "trace_bindings", "elide_title", "ZOOM_STEP", "PAN_STEP", "PAN_PAGE", "NARROW_WIDTH"]

#: Zoom factor of one zoom key press; pan fractions of one pan key press.
ZOOM_STEP = 2.0
PAN_STEP = 0.2
PAN_PAGE = 1.0
#: Below this terminal width the panel is stacked under the lanes as a compact card.
NARROW_WIDTH = 110

_KIND_LABEL = {k: k.name.lower().replace("_", " ") for k in Kind}


def elide_title(title: str, max_cells: int) -> str:
    """``title`` cut to ``max_cells`` characters: a parenthesised tail goes first
    (``"Decode step: one token (detective, part A)"`` → ``"Decode step: one token"``),
    then words from the end, with ``…`` marking the cut."""
    title = " ".join(title.split())
    if len(title) <= max_cells:
        return title
    k = title.find(" (")
    if k >= 8:
        title = title[:k]
        if len(title) <= max_cells:
            return title
    cut = title[: max(1, max_cells - 1)]
    sp = cut.rfind(" ")
    if sp >= max_cells // 2:
        cut = cut[:sp]
    return cut.rstrip(" :,;-") + "…"


def trace_bindings(ids: "set[str] | None" = None) -> list[Binding]:
    """The trace screen's key bindings (fresh ``Binding`` objects, ids such as
    ``gap.next``, ``view.zoom_in``), or only those whose id is in ``ids``, in the same
    order. Other screens (the exercise screen) build their bindings from these so
    that the keys stay the same everywhere."""
    return [b for b in _bindings() if ids is None or b.id in ids]


def _bindings() -> list[Binding]:
    B = Binding
    return [
        B("n,right_square_bracket", "jump_gap(1)", "next gap", id="gap.next"),
        B("N,left_square_bracket", "jump_gap(-1)", "prev gap", id="gap.prev"),
        B("s", "toggle_order", "largest/time", id="gap.order"),
        B("1", "jump_class(0)", "next sync gap (wraps)", show=False, id="gap.sync"),
        B("2", "jump_class(1)", "next copy gap (wraps)", show=False, id="gap.copy"),
        B("3", "jump_class(2)", "next launch gap (wraps)", show=False, id="gap.launch"),
        B("4", "jump_class(3)", "next host gap (wraps)", show=False, id="gap.host"),
        B("exclamation_mark", "jump_class(0,-1)", "prev sync gap", show=False, id="gap.sync_prev"),
        B("at", "jump_class(1,-1)", "prev copy gap", show=False, id="gap.copy_prev"),
        B("number_sign", "jump_class(2,-1)", "prev launch gap", show=False, id="gap.launch_prev"),
        B("dollar_sign", "jump_class(3,-1)", "prev host gap", show=False, id="gap.host_prev"),
        B("plus,i,equals_sign", "zoom(2.0)", "zoom in", key_display="+", id="view.zoom_in"),
        B("minus,o", "zoom(0.5)", "zoom out", key_display="-", show=False, id="view.zoom_out"),
        B("z", "zoom_selected", "zoom to gap", show=False, id="view.zoom_gap"),
        B("Z", "zoom_step", "zoom to step", show=False, id="view.zoom_step"),
        B("h,left", "pan(-0.2)", "pan left", show=False, id="view.pan_left"),
        B("l,right", "pan(0.2)", "pan right", show=False, id="view.pan_right"),
        B("H,shift+left", "pan(-1.0)", "page left", show=False, id="view.page_left"),
        B("L,shift+right", "pan(1.0)", "page right", show=False, id="view.page_right"),
        B("comma", "cursor(-1)", "cursor left", show=False, id="view.cursor_left"),
        B("full_stop", "cursor(1)", "cursor right", show=False, id="view.cursor_right"),
        B("j,down", "row(1)", "lane down", show=False, id="view.down"),
        B("k,up", "row(-1)", "lane up", show=False, id="view.up"),
        B("enter,space", "toggle_group", "collapse/expand group", show=False, id="view.collapse"),
        B("f,0", "fit", "fit all", show=False, id="view.fit"),
        B("g", "prompt('goto')", "go to time", show=False, id="view.goto"),
        B("slash", "prompt('search')", "search", key_display="/", id="search.start"),
        B("m", "match(1)", "next match", show=False, id="search.next"),
        B("M", "match(-1)", "prev match", show=False, id="search.prev"),
        B("percent_sign,J", "jump_flow", "kernel↔launch", show=False, id="flow.jump"),
        B("p", "toggle_panel", "card panel", id="panel.toggle"),
        B("pagedown,ctrl+d", "panel_scroll(1)", "card page down", show=False, id="panel.page_down"),
        B("pageup,ctrl+u", "panel_scroll(-1)", "card page up", show=False, id="panel.page_up"),
        B("w", "warnings", "loader warnings", show=False, id="app.warnings"),
        B("question_mark", "help", "help", key_display="?", id="app.help"),
        B("q", "app.quit", "quit", id="app.quit"),
    ]


#: Footer labels of the trace screen (binding id → (key shown, short label)): short
#: enough that every core key fits 80 columns; the help keeps the long description.
FOOTER_LABELS = {
    "gap.next": ("n", "next"), "gap.prev": ("N", "prev"), "gap.order": ("s", "order"),
    "view.zoom_in": ("+/-", "zoom"), "search.start": ("/", "find"), "panel.toggle": ("p", "card"),
    "app.help": ("?", "help"), "app.quit": ("q", "quit"),
}


def _footer_binding(b: Binding) -> Binding:
    """``b`` with its footer label (``FOOTER_LABELS``); the long description moves to
    ``tooltip``, which the help screen shows."""
    if b.id not in FOOTER_LABELS:
        return b
    key, label = FOOTER_LABELS[b.id]
    return dataclasses.replace(b, description=label, key_display=key, tooltip=b.description)


class TraceScreen(Screen):
    """The main view of one trace and its diagnosis (``diagnosis`` may be None)."""

    BINDINGS = [_footer_binding(b) for b in trace_bindings()]

    def __init__(self, trace: Trace, diagnosis=None, error: str | None = None) -> None:
        super().__init__()
        self.trace = trace
        self.diagnosis = diagnosis
        self.error = error
        gaps = getattr(diagnosis, "gaps", None)
        size_order = diagnosis.order_by_size() if diagnosis is not None and gaps is not None and len(gaps) else None
        self.nav = GapNavigator(gaps, size_order) if gaps is not None else None
        self.order_mode = TIME
        self.flows = FlowIndex(trace)
        self.search: NameSearch | None = None
        self.prompt_mode: str | None = None
        self.done: set[int] = {2}
        self.message = error or ""
        self._shown_gap: int | None = None
        self._shown_done: set[int] = set()
        self._side_drawn = False

    # ------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield Static(self.header_text(), id="header", markup=False)
        with Horizontal(id="main"):
            yield Swimlanes(self.trace, self.diagnosis, id="lanes")
            yield GapPanel(id="panel")
        yield DetailLine(id="detail")
        yield Input(id="prompt")
        yield Footer()

    @property
    def lanes(self) -> Swimlanes:
        return self.query_one("#lanes", Swimlanes)

    def on_mount(self) -> None:
        self.lanes.focus()
        self._update_side()
        nw = len(self.trace.warnings)
        if nw:
            first = sanitize(str(self.trace.warnings[0]), 200)
            if len(first) > 64:
                first = first[:63] + "…"
            more = f" (+{nw - 1} more)" if nw > 1 else ""
            self.notify(f"{first}{more}\nw lists them",
                        title=f"{nw} loader warning" + ("" if nw == 1 else "s"), severity="warning",
                        timeout=8, markup=False)

    def on_resize(self, event) -> None:
        narrow = self.size.width < NARROW_WIDTH
        self.set_class(narrow, "-narrow")
        footer = self.query_one(Footer)
        footer.show_command_palette = not narrow  # ctrl+p stays listed in the help
        self._sync_panel_mode()
        self.query_one("#header", Static).update(self.header_text(self.size.width))

    def header_text(self, width: int = 80) -> Text:
        """``gapscope NAME │ GPU busy P% │ N gaps │ span │ k GPUs │ device``: the
        figures first so that they survive an 80-column terminal; the trace name is
        elided to what is left of ``width`` (cells), the device name comes last."""
        src = self.trace.source
        name = src.trace_name or Path(src.path).name or "trace"
        if "/" in name and " " not in name.strip():  # a path recorded as the name: its file name
            name = Path(name.strip()).name or name
        t0, t1 = self.trace.extent_ns
        figures = []
        d = self.diagnosis
        if d is not None and getattr(d, "devices", None):
            win = sum(x.window_ns for x in d.devices)
            busy = sum(x.busy_ns for x in d.devices)
            if win > 0:
                figures.append(f"GPU busy {100 * busy / win:.0f}%")
        if d is not None:
            figures.append(f"{len(d.gaps)} gap" + ("" if len(d.gaps) == 1 else "s"))
        nw = len(self.trace.warnings)
        if nw:
            figures.append(f"⚠ {nw} warning" + ("" if nw == 1 else "s"))
        figures.append("span " + format_duration_ns(t1 - t0))
        devs = self.trace.devices()
        figures.append(f"{len(devs)} GPU" + ("s" if len(devs) != 1 else "") if devs else "CPU only")
        props = src.device_properties or []
        device = ""
        if props and isinstance(props[0], dict) and props[0].get("name"):
            device = sanitize(str(props[0]["name"]), 30)
        rest = " │ " + " │ ".join(figures)
        budget = max(12, min(60, width - len("gapscope ") - len(rest)))
        t = Text("gapscope ", style="bold")
        t.append(elide_title(sanitize(name, 200), budget))
        t.append(rest)
        if device:
            t.append(" │ " + device, style="dim")
        return t

    # ------------------------------------------------------------- updates
    @on(Swimlanes.Changed)
    def _lanes_changed(self, message: Swimlanes.Changed) -> None:
        self._update_detail()
        if message.lanes.selected_gap != self._shown_gap:
            self.call_after_refresh(self._update_side)

    def _update_side(self) -> None:
        lanes = self.lanes
        gap = lanes.selected_gap
        if gap == self._shown_gap and self._shown_done == self.done and self._side_drawn:
            self._update_detail()
            return
        self._side_drawn = True
        self._shown_done = set(self.done)
        self._shown_gap = gap
        if gap is not None and self.diagnosis is not None:
            self.done |= {4, 5}
        self.query_one(GapPanel).show(self.diagnosis, gap, self.done)
        self._update_detail()

    def _update_detail(self) -> None:
        self.query_one("#detail", DetailLine).show(self.detail_text())

    def detail_text(self) -> Text:
        """One line about the event or gap under the cursor (or the last message)."""
        lanes = self.lanes
        t = Text()
        rel = lambda ns: "+" + format_duration_ns(int(ns) - self.trace.extent_ns[0])  # noqa: E731
        t.append(f"@{rel(lanes.cursor_ns)} ", style="bold")
        row = lanes.current_row()
        ev = lanes.event_at_cursor()
        gap = None
        if row is not None and row.kind == "idle":
            gap = lanes.gap_at(lanes.cursor_ns, row.device)
            if gap is None and lanes.selected_gap is not None and int(lanes.gaps.device[lanes.selected_gap]) == row.device:
                gap = lanes.selected_gap
        if gap is not None:
            g = lanes.gaps
            c = Cause(int(g.cause[gap]))
            t.append(f"gap #{gap} GPU {int(g.device[gap])} {format_duration_ns(int(g.end_ns[gap] - g.start_ns[gap]))} ")
            t.append(c.label, style="bold")
            t.append(f" ({int(round(float(g.cause_share[gap]) * 100))}%) at {rel(g.start_ns[gap])}")
            if int(g.launch[gap]) >= 0:
                t.append(f" lateness {format_duration_ns(int(g.lateness_ns[gap]))}")
        elif ev is not None:
            k = Kind(int(self.trace.kind[ev]))
            t.append(_KIND_LABEL[k] + " ", style="bold")
            t.append(sanitize(self.trace.name(ev), 200))
            t.append(f"  {rel(self.trace.start_ns[ev])} dur {format_duration_ns(int(self.trace.dur_ns[ev]))}")
            if int(self.trace.correlation[ev]) >= 0:
                t.append(f" corr {int(self.trace.correlation[ev])}")
        elif row is not None:
            t.append(sanitize(row.label, 60))
        if self.message:
            t.append("  │ " + sanitize(self.message, 120), style="italic")
        return t

    def _say(self, text: str) -> None:
        self.message = text
        self._update_detail()

    # ------------------------------------------------------------- actions
    def action_jump_gap(self, direction: int) -> None:
        """Next (+1) or previous (-1) gap in the current order."""
        self._jump(direction, None)

    def action_jump_class(self, cause: int, direction: int = 1) -> None:
        """Next (+1) or previous (-1) gap of cause class ``cause`` (``Cause`` value) in
        the current order; past the last (first) one it wraps around and says so."""
        self._jump(int(direction), Cause(cause))

    def _jump(self, direction: int, cause: Cause | None) -> None:
        if self.nav is None or len(self.nav) == 0:
            self._say("no gaps in this trace")
            return
        lanes = self.lanes
        current = lanes.selected_gap
        g = self.nav.step(current, direction, self.order_mode, cause, from_ns=lanes.cursor_ns)
        wrapped = False
        if g is None and cause is not None:
            # wrap around: the first (last) gap of the class in this order
            g = self.nav.step(None, direction, SIZE if self.order_mode == SIZE else TIME, cause,
                              from_ns=None if self.order_mode == SIZE else (
                                  self.trace.extent_ns[0] - 1 if direction > 0 else self.trace.extent_ns[1] + 1))
            wrapped = g is not None
        if g is None:
            what = f"{cause.label} " if cause is not None else ""
            if cause is not None:
                self._say(f"no {what}gap in this trace")
            else:
                self._say(f"no {'next' if direction > 0 else 'previous'} {what}gap ({self.order_mode} order)")
            return
        self.message = ""
        if wrapped:
            where = "first" if direction > 0 else "last"
            self.message = f"wrapped to the {where} {cause.label} gap ({self.order_mode} order)"
        if self.order_mode == SIZE:
            self.done.add(3)
        lanes.select_gap(g)
        self._update_detail()
        # The lanes and detail line repaint first; the card follows on the next frame.
        self.call_after_refresh(self._update_side)

    def action_toggle_order(self) -> None:
        """Switch between time order and largest first; the selected gap stays selected
        and the next ``n`` goes to the gap after it in the new order."""
        self.order_mode = SIZE if self.order_mode == TIME else TIME
        self._say("gaps: largest first" if self.order_mode == SIZE else "gaps: time order")

    def action_zoom(self, factor: float) -> None:
        self.lanes.zoom(float(factor))
        self._update_detail()

    def action_zoom_selected(self) -> None:
        lanes = self.lanes
        if lanes.selected_gap is not None:
            lanes.select_gap(lanes.selected_gap, zoom=True)
        elif lanes.selected_event is not None or lanes.event_at_cursor() is not None:
            ev = lanes.event_at_cursor()
            from .viewmodel import Viewport

            s = int(self.trace.start_ns[ev])
            lanes.set_viewport(Viewport.fit(s, s + int(self.trace.dur_ns[ev]), lanes.timeline_width, margin=0.25))

    def action_zoom_step(self) -> None:
        """Fit the step (``ProfilerStep#N``, annotation or period) holding the cursor."""
        steps = getattr(self.diagnosis, "steps", None)
        if steps is None or len(steps.start_ns) == 0:
            self._say("no steps found in this trace")
            return
        import numpy as np

        from .viewmodel import Viewport

        lanes = self.lanes
        k = int(np.searchsorted(np.asarray(steps.start_ns), lanes.cursor_ns, side="right")) - 1
        k = min(max(k, 0), len(steps.start_ns) - 1)
        s, e = int(steps.start_ns[k]), int(steps.end_ns[k])
        self.message = f"step {k + 1} of {len(steps.start_ns)} ({steps.source})"
        lanes.set_viewport(Viewport.fit(s, e, lanes.timeline_width, margin=0.02))
        self._update_detail()

    def action_pan(self, fraction: float) -> None:
        self.lanes.pan(float(fraction))
        self._update_detail()

    def action_cursor(self, cells: int) -> None:
        self.lanes.move_cursor_cells(int(cells))
        self._update_detail()

    def action_row(self, delta: int) -> None:
        self.lanes.select_row(int(delta))
        self._update_detail()

    def action_toggle_group(self) -> None:
        self.lanes.toggle_group()

    def action_fit(self) -> None:
        self.lanes.fit_all()
        self._update_detail()

    def action_toggle_panel(self) -> None:
        """Wide: show/hide the side panel. Narrow: compact card → full panel → hidden."""
        if not self.has_class("-narrow"):
            self.toggle_class("-panel-toggled")
        elif self.has_class("-panel-hidden"):
            self.remove_class("-panel-hidden")
        elif self.has_class("-panel-expanded"):
            self.remove_class("-panel-expanded")
            self.add_class("-panel-hidden")
        else:
            self.add_class("-panel-expanded")
        self._sync_panel_mode()

    def action_panel_scroll(self, direction: int) -> None:
        """Scroll the card one page; a compact (narrow) card is expanded first."""
        if self.panel_mode == "compact":
            self.add_class("-panel-expanded")
            self._sync_panel_mode()
            return
        if self.panel_mode == "hidden":
            self._say("card hidden (p shows it)")
            return
        self.query_one(GapPanel).scroll_page(int(direction))

    @property
    def panel_mode(self) -> str:
        """``"side"``, ``"compact"``, ``"expanded"`` or ``"hidden"``."""
        if not self.has_class("-narrow"):
            return "hidden" if self.has_class("-panel-toggled") else "side"
        if self.has_class("-panel-hidden"):
            return "hidden"
        return "expanded" if self.has_class("-panel-expanded") else "compact"

    def _sync_panel_mode(self) -> None:
        self.query_one(GapPanel).set_compact(self.panel_mode == "compact")

    def action_jump_flow(self) -> None:
        lanes = self.lanes
        ev = lanes.event_at_cursor()
        if ev is None:
            self._say("no event under the cursor (select a lane with j/k)")
            return
        other = self.flows.partner(ev)
        if other is None:
            self._say("this event has no launch/kernel link")
            return
        self.message = ""
        lanes.select_event(other)

    def action_match(self, direction: int) -> None:
        if self.search is None or len(self.search) == 0:
            self._say("no search (press /)")
            return
        lanes = self.lanes
        ev = self.search.step(lanes.selected_event, int(direction), lanes.cursor_ns)
        k = int((self.search.matches == ev).nonzero()[0][0]) + 1
        self.message = f"match {k}/{len(self.search)} for {self.search.query!r}"
        lanes.select_event(ev)

    def action_prompt(self, mode: str) -> None:
        self.prompt_mode = mode
        inp = self.query_one("#prompt", Input)
        inp.placeholder = "go to time, e.g. 1.5ms, 250us (from trace start)" if mode == "goto" else "search event names"
        inp.value = ""
        self.add_class("-prompt")
        inp.focus()

    @on(Input.Submitted, "#prompt")
    def _prompt_submitted(self, event: Input.Submitted) -> None:
        text = event.value
        self._close_prompt()
        if self.prompt_mode == "goto":
            try:
                t = parse_time_ns(text)
            except ValueError as exc:
                self._say(str(exc))
                return
            self.message = ""
            self.lanes.go_to(self.trace.extent_ns[0] + t)
        elif self.prompt_mode == "search":
            self.search = NameSearch(self.trace, text) if text else None
            if self.search is None or len(self.search) == 0:
                self._say(f"no event name contains {text!r}")
                return
            self.lanes.selected_event = None
            self.action_match(1)

    def _close_prompt(self) -> None:
        self.remove_class("-prompt")
        self.lanes.focus()

    def key_escape(self) -> None:
        if self.has_class("-prompt"):
            self._close_prompt()

    def action_warnings(self) -> None:
        """List the loader's warnings (skipped or repaired input) in a screen."""
        if not self.trace.warnings:
            self._say("no loader warnings: nothing was skipped or repaired")
            return
        from .app import WarningsScreen

        self.app.push_screen(WarningsScreen(self.trace))

    def action_help(self) -> None:
        from .app import HelpScreen

        self.app.push_screen(HelpScreen(self))

    # ------------------------------------------------------------- rare actions
    def largest_gap(self) -> None:
        if self.nav is not None and len(self.nav):
            self.lanes.select_gap(int(self.nav.size_order[0]))
            self.done.add(3)
            self._update_side()

    def set_all_groups(self, collapsed: bool) -> None:
        lanes = self.lanes
        keys = {r.group for r in lanes.rows}
        lanes._collapsed = set(keys) if collapsed else set()
        lanes._rebuild_rows()
        lanes._changed()
