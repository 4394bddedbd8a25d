"""The trace screen: header, swimlanes, side panel, detail line, prompt and footer.

Keys are bindings with ids (``gapscope.tui.bindings``, remappable through the app's keymap) and
parameterised actions (``jump_gap(1)``, ``zoom(2)``, ``pan(-0.2)``); the header line is
built by ``gapscope.tui.header``. Layout lives in ``gapscope.tcss``; the panel is shown or
hidden with CSS classes.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Input, Static
from textual.worker import get_current_worker

from gapscope.analysis.types import Cause, Gaps
from gapscope.parsers.model import Kind, Trace
from gapscope.tui.bindings import footer_binding, trace_bindings
from gapscope.tui.cards import has_card, prefetch_cards
from gapscope.tui.findings_view import FindingsState, findings_of
from gapscope.tui.footer import KeyFooter
from gapscope.tui.header import trace_header
from gapscope.tui.help import HelpScreen
from gapscope.tui.lanes_model import sanitize
from gapscope.tui.loader_warnings import WarningsScreen
from gapscope.tui.navigation import SIZE, TIME, FlowIndex, GapNavigator, NameSearch
from gapscope.tui.panel import DetailLine, GapPanel
from gapscope.tui.ruler import parse_time_ns
from gapscope.tui.session import Phase, Reading, Session
from gapscope.tui.swimlanes import Swimlanes
from gapscope.tui.viewmodel import Viewport
from gapscope.tui.what_if import next_mark, projection_text
from gapscope.units import fmt_delta, fmt_dur, fmt_offset

__all__ = [
    "TraceScreen",
    "UserSettings",
    "Handover",
    "reading_text",
    "PANEL_CLASSES",
    "ZOOM_STEP",
    "PAN_STEP",
    "PAN_PAGE",
    "NARROW_WIDTH",
]

#: Zoom factor of one zoom key press; pan fractions of one pan key press.
ZOOM_STEP = 2.0
PAN_STEP = 0.2
PAN_PAGE = 1.0
#: Below this terminal width the panel is stacked under the lanes as a compact card.
NARROW_WIDTH = 110

_KIND_LABEL = {k: k.name.lower().replace("_", " ") for k in Kind}
#: What the status line says while the diagnosis runs, and what a gap key says then.
PENDING_MESSAGE = "finding the idle gaps and their causes… (the lanes work meanwhile)"
PENDING_KEY_MESSAGE = "still finding the gaps and their causes: a moment"
#: The same once the gaps are drawn (``early_gaps``), and what a class key says then.
EARLY_MESSAGE = "gaps drawn; finding their causes… (n, s and the lanes work meanwhile)"
EARLY_KEY_MESSAGE = "still finding the causes: a moment (n and s walk the gaps meanwhile)"
#: What ``f`` says while the findings are computed (the causes drawn).
FINDINGS_KEY_MESSAGE = "still finding the verdict and the findings: a moment (n walks the gaps meanwhile)"
#: What the status line of a device preview says ({reading}: how far the rest of the
#: file is: ``READING_RATE`` or ``READING_BUILT``).
PREVIEW_MESSAGE = "device lanes first; {reading}: CPU lanes, gaps and causes follow"
#: The same once the preview's gaps are drawn (``early_gaps``).
PREVIEW_GAPS_MESSAGE = "device lanes, gaps first; {reading}: CPU lanes, causes follow"
#: What a gap key says on a device preview (before its gaps are drawn, and a class key
#: or ``g #N`` after).
PREVIEW_KEY_MESSAGE = "gaps and causes come with the whole file ({reading}): a moment"
PREVIEW_CAUSE_KEY_MESSAGE = "causes come with the whole file ({reading}): n and s walk the gaps"
READING_RATE = "reading the rest{share}"
READING_BUILT = "building the whole trace"
#: ... once the whole trace is there, held back by an open prompt (``whole_waiting``).
READING_WAITING = "the whole trace is ready, shown when the prompt closes"
#: What the status line says when no diagnosis came (the analysis is not there).
NO_DIAGNOSIS_MESSAGE = "no diagnosis: the gaps and their causes cannot be shown"


class PromptInput(Input):
    """The ``g``/``/`` prompt. Enter hands the text to the screen at once
    (``TraceScreen.submit_prompt``) instead of posting ``Input.Submitted``: the keys
    typed after it, already queued, must reach the lanes, not a prompt that is about to
    close."""

    async def action_submit(self) -> None:
        submit = getattr(self.screen, "submit_prompt", None)
        if submit is not None:
            submit(self.value)
        else:  # pragma: no cover - only ever composed by TraceScreen
            await super().action_submit()


#: The screen classes that hold the card's state as ``p`` set it (``TraceScreen.panel_mode``).
PANEL_CLASSES = ("-panel-toggled", "-panel-hidden", "-panel-expanded")


@dataclasses.dataclass(frozen=True)
class UserSettings:
    """What the user set on a trace screen that a screen replacing it keeps (the whole
    trace replacing its device preview): the gap order (``s``: ``TIME`` or ``SIZE``),
    the protocol steps ticked, and the card's state (``p``: which of
    ``PANEL_CLASSES`` the screen has)."""

    order_mode: str
    done: frozenset[int]
    panel_classes: frozenset[str]


@dataclasses.dataclass(frozen=True)
class Handover:
    """What a trace screen takes from the device preview it replaces
    (``GapscopeApp._hand_over``): ``view`` (viewport, cursor_ns) to open at when the
    user had moved the preview's; ``select`` (device, start_ns) of the gap to select
    once drawn; ``settings`` the user left there; ``notice`` said in the status line
    on opening; ``early`` the preview's gaps, drawn at once until the diagnosis (the
    whole trace's too: the same device ops)."""

    view: tuple[Viewport, int] | None = None
    select: tuple[int, int] | None = None
    settings: UserSettings | None = None
    notice: str | None = None
    early: Gaps | None = None


def reading_text(template: str, reading: Reading, waiting: bool = False) -> str:
    """``template`` with how far the load of the whole file is (``reading``): the share
    of its text decoded, or that the trace is being built from the decoded parts (all
    of it decoded, or no share known after one was: ``load_progress``); ``waiting``:
    the whole trace is there and waits for the preview's prompt to close."""
    share = reading.share
    if waiting:
        said = READING_WAITING
    elif (share is not None and share >= 1.0) or (share is None and reading.seen):
        said = READING_BUILT
    else:
        said = READING_RATE.format(share=f" {int(100 * share)}%" if share is not None else "")
    return template.format(reading=said)


class TraceScreen(Screen):
    """The main view of one trace of ``session`` and its diagnosis.

    Built while the app's phase is ``PREVIEW`` it shows ``session.preview`` (the device
    lanes read first, and their gaps) and follows the app's ``reading`` (the rest of
    the file) until the app replaces it; else ``session.trace``, with
    ``session.diagnosis`` when there is one, and otherwise the lanes drawn at once and
    browsable while the app's worker finds the gaps (``show_early_gaps``) and their
    causes: ``diagnosing`` is True until the app's phase is ``DIAGNOSED`` (watched:
    ``set_diagnosis``); gap keys say to wait meanwhile. ``handover``: what the preview
    it replaces leaves it (``Handover``).
    """

    BINDINGS = [footer_binding(b) for b in trace_bindings()]

    def __init__(self, session: Session, handover: Handover | None = None) -> None:
        super().__init__()
        self.session = session
        #: a device preview (``gapscope.parsers.chrome.preview.device_preview``) shown
        #: while the whole file is read; the app replaces the screen with the whole trace's
        self.previewing = session.trace is None
        trace = session.preview if self.previewing else session.trace
        if trace is None:
            raise ValueError("TraceScreen: the session has no trace yet")
        self.trace: Trace = trace
        self.handover = handover
        self.nav: GapNavigator | None = None
        self.error: str | None = session.error
        given = None if self.previewing else session.diagnosis
        self._take_diagnosis(given)
        #: the diagnosis has not come (on a preview: it has not begun)
        self.diagnosing = given is None
        #: what the status line last said of the load, while previewing (``show_reading``)
        self._reading_said = ""
        #: the gaps drawn before the causes (``gapscope.analysis.gaps.interior_gaps``:
        #: the diagnosis's gaps between each device's first and last kernel): a
        #: preview's, the preview's this screen replaces, or found by the app's
        #: worker, until the diagnosis comes (``n``/``s`` walk them; their card says
        #: the cause follows)
        self.early: Gaps | None = None
        if self.diagnosing:
            self.early = session.preview_gaps if self.previewing else session.early
        if self.early is not None:
            self.nav = GapNavigator(self.early)
        #: (device, start_ns) of a gap to select when it is drawn: the one selected on
        #: the preview this screen replaces, or an early gap when the diagnosis comes
        self.select_key = handover.select if handover is not None else None
        settings = handover.settings if handover is not None else None
        self.order_mode = TIME if settings is None else settings.order_mode
        self.flows = FlowIndex(self.trace)
        self.search: NameSearch | None = None
        self.prompt_mode: str | None = None
        self.done: set[int] = {2} | (set(settings.done) if settings is not None else set())
        #: evidence names marked for the what-if (``x``), in marking order
        self.what_if_marks: tuple[str, ...] = ()
        self.message = self.error or ""
        self._shown_gap: int | None = None
        self._shown_done: set[int] = set()
        self._shown_order = TIME
        self._side_drawn = False
        #: what the panel shows of the findings (the overview first: issue 47)
        self.findings_state = FindingsState()
        self._shown_findings: FindingsState | None = None

    def _take_diagnosis(self, diagnosis) -> None:
        self.diagnosis = diagnosis
        gaps = getattr(diagnosis, "gaps", None)
        size_order = diagnosis.order_by_size() if diagnosis is not None and gaps is not None and len(gaps) else None
        self.nav = GapNavigator(gaps, size_order) if gaps is not None else None

    # ------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield Static(self.header_text(), id="header", markup=False)
        with Horizontal(id="main"):
            yield Swimlanes(self.trace, self.diagnosis, pending=self.diagnosing, id="lanes")
            yield GapPanel(id="panel")
        yield DetailLine(id="detail")
        yield PromptInput(id="prompt", select_on_focus=False)
        # the keys with the first frame only where this screen replaces one that showed
        # them (a preview); a first screen draws its lanes a frame sooner without
        yield KeyFooter(at_once=self.handover is not None)

    @property
    def lanes(self) -> Swimlanes:
        return self.query_one("#lanes", Swimlanes)

    def on_mount(self) -> None:
        try:
            lanes = self.lanes
        except NoMatches:  # the app quit as this screen mounted: nothing to set up
            return
        # the layout for the terminal's width from the first frame (on_resize comes
        # after it: a screen replacing another flashed the wide layout at 80 columns)
        self.set_class(self.app.size.width < NARROW_WIDTH, "-narrow")
        for cls in self.handover.settings.panel_classes if self.handover and self.handover.settings else ():
            self.add_class(cls)
        self._sync_panel_mode()
        lanes.focus()
        if self.diagnosing and not self.previewing and self.early is None and self.session.early is not None:
            self.early = self.session.early  # found by the app's worker before this mount
        if self.early is not None:
            self._show_early(self.early)
        self._update_side()
        nw = len(self.trace.warnings)
        notice = self.handover.notice if self.handover is not None else None
        if self.previewing:
            self.show_reading(self.reading)
        elif notice:
            self._say(notice)
        elif nw and not self.message:
            # In the status line, not a toast: a toast would sit over the first card
            # for seconds, just when the user reads it; the header keeps the count.
            what = f"{nw} loader warning" + ("" if nw == 1 else "s")
            self._say(f"⚠ {what}: w lists them")
        elif self.diagnosing and not self.message:
            self._say(PENDING_MESSAGE if self.early is None else EARLY_MESSAGE)
        if self.handover is not None and self.handover.view is not None:
            lanes.open_at(*self.handover.view)
            self._update_detail()  # the cursor it opens at
        if not self.previewing:
            # the diagnosis may have come before this mount: the watcher is called at once
            self.watch(self.app, "phase", self._phase_changed)
        if self.diagnosing and not self.previewing:
            # the app's diagnosis begins after the first paint: once the diagnosis spent
            # less of its time in numpy calls that let the event loop run (np.unique at
            # 5M events), its thread made the first paint at 1M events 50-90 ms slower
            # (bench/tui.py)
            self.call_after_refresh(self.post_message, self.Shown())

    def _phase_changed(self, phase: Phase) -> None:
        """The app's phase (watched): once ``DIAGNOSED``, the session's diagnosis (or
        its error) is shown."""
        if phase is Phase.DIAGNOSED and self.diagnosing:
            self.set_diagnosis(self.session.diagnosis, self.session.error)

    def show_reading(self, reading: Reading) -> None:
        """A preview's status line follows the load (the app's ``reading``, which
        calls this when it changes), unless another message is shown: a key clears
        it, and the next figure brings it back."""
        if not self.previewing:
            return
        if not self.message or self.message == self._reading_said:
            template = PREVIEW_MESSAGE if self.early is None else PREVIEW_GAPS_MESSAGE
            self._reading_said = reading_text(template, reading, self.whole_waiting)
            self._say(self._reading_said)

    @property
    def reading(self) -> Reading:
        """How far the load of the whole file is (the app's ``reading``)."""
        return getattr(self.app, "reading", Reading())

    @property
    def whole_waiting(self) -> bool:
        """This is a preview and the whole trace has come: it waits for the preview to
        be back in the user's hands (``GapscopeApp._advance_from_preview``)."""
        return self.previewing and self.session.trace is not None

    def whole_trace_waits(self) -> None:
        """The status line says that the whole trace waits (``whole_waiting``)."""
        if self.is_mounted:
            self.show_reading(self.reading)

    def selected_gap_key(self) -> tuple[int, int] | None:
        """(device, start_ns) of the selected gap, else None: which gap a screen
        replacing this one selects (gap numbers differ between the two)."""
        try:
            lanes = self.lanes
        except NoMatches:
            return None
        g, k = lanes.gaps, lanes.selected_gap
        return None if g is None or k is None else (int(g.device[k]), int(g.start_ns[k]))

    def _select_by_key(self, key: tuple[int, int] | None) -> None:
        """Select the drawn gap of (device, start_ns) ``key``, if there is one, where
        the view and the cursor are (the user put them there)."""
        g = self.lanes.gaps
        if key is None or g is None or not len(g):
            return
        hit = np.flatnonzero((np.asarray(g.device) == key[0]) & (np.asarray(g.start_ns) == key[1]))
        if hit.size:
            self.lanes.select_gap(int(hit[0]), move=False)

    def user_settings(self) -> UserSettings:
        """The gap order, ticked steps and card state the user left here, for a
        screen replacing this one (``UserSettings``)."""
        return UserSettings(
            self.order_mode, frozenset(self.done), frozenset(c for c in PANEL_CLASSES if self.has_class(c))
        )

    def view_state(self) -> tuple[Viewport, int] | None:
        """(viewport, cursor_ns) when the user has moved the view from the fit of the
        whole trace, else None: what a screen replacing this one opens at."""
        try:
            lanes = self.lanes
        except NoMatches:  # not composed yet: nobody has moved its view
            return None
        return (lanes.viewport, lanes.cursor_ns) if lanes.view_moved else None

    def show_early_gaps(self, gaps: Gaps) -> None:
        """Draw ``gaps``, found by the app's worker before the diagnosis (not after it)."""
        if self.diagnosis is not None or not self.diagnosing:
            return  # the diagnosis came first
        if not self.query("#lanes"):
            return  # not composed yet (``on_mount`` takes ``session.early``), or the app quits
        self._show_early(gaps)
        self.query_one("#header", Static).update(self.header_text(self.size.width or 80))
        if self.message == PENDING_MESSAGE:
            self.message = EARLY_MESSAGE
        self._side_drawn = False
        self._update_side()

    def _carried_key(self) -> tuple[int, int] | None:
        """The gap to keep selected when other gaps are drawn: the early gap selected,
        else the one the preview this screen replaced had selected."""
        drawn = self.early is not None and self.lanes.gaps is self.early
        return self.selected_gap_key() if drawn else self.select_key

    def _show_early(self, gaps: Gaps) -> None:
        """Draw ``gaps``, before the causes: ``n``/``s`` walk them, and the gap that
        was selected (``_carried_key``) stays selected."""
        carried = self._carried_key()
        self.early = gaps
        self.nav = GapNavigator(gaps)
        self.lanes.set_early_gaps(gaps)
        self._select_by_key(carried)
        self.select_key = None

    def set_diagnosis(self, diagnosis, error: str | None = None) -> None:
        """Show ``diagnosis`` (gaps, causes, cards) on the lanes drawn so far; the
        view, cursor and selection stay. ``error``: why there is none."""
        self.diagnosing = False
        carried = self._carried_key()
        self.early = self.select_key = None
        self._take_diagnosis(diagnosis)
        self.error = error
        self.lanes.set_diagnosis(diagnosis)
        if diagnosis is not None:
            self._select_by_key(carried)
        self.query_one("#header", Static).update(self.header_text(self.size.width or 80))
        if error:
            self.message = error
        elif diagnosis is None:
            self.message = NO_DIAGNOSIS_MESSAGE
        elif self.message in (PENDING_MESSAGE, PENDING_KEY_MESSAGE, EARLY_MESSAGE, EARLY_KEY_MESSAGE, ""):
            self.message = self._found_message(len(diagnosis.gaps))
        self._side_drawn = False
        self._update_side()

    def _found_message(self, n: int) -> str:
        """The status once the causes of ``n`` gaps are in: what ``n`` does next, in
        the order set (``s``), from the gap selected when there is one."""
        if not n:
            return "no idle GPU gaps in this trace"
        found = f"{n:,} idle gap{'' if n == 1 else 's'} found"
        selected = self.lanes.selected_gap is not None
        if self.order_mode == SIZE:
            return f"{found}, largest first: n goes to the next" + (" smaller" if selected else " (the largest)")
        if selected:
            return f"{found}: n goes to the next in time, s orders them largest first"
        return f"{found}: n goes to the next, s then n to the largest"

    @property
    def missing_diagnosis(self) -> str | None:
        """Why there is no diagnosis once none is coming (its error, or that none came),
        else None (there is one, or it is still running)."""
        if self.diagnosing or self.nav is not None:
            return None
        return self.error or NO_DIAGNOSIS_MESSAGE

    def _waiting(self, walk: bool = False) -> bool:
        """True (and says so) while the diagnosis runs, or the file is still read;
        ``walk``: a key that only walks the gaps, which the early gaps serve."""
        if walk and self.early is not None:
            return False
        if self.previewing:
            template = PREVIEW_KEY_MESSAGE if self.early is None else PREVIEW_CAUSE_KEY_MESSAGE
            self._say(reading_text(template, self.reading, self.whole_waiting))
        elif self.diagnosing:
            self._say(PENDING_KEY_MESSAGE if self.early is None else EARLY_KEY_MESSAGE)
        return self.diagnosing

    class Shown(Message):
        """The whole trace's screen is mounted, its diagnosis not given: the app
        begins it (``GapscopeApp._begin_diagnosis``)."""

    class Uncovered(Message):
        """A preview is back in the user's hands (a screen over it or its prompt
        closed): a whole trace that came meanwhile can replace it now (the app's)."""

    def on_screen_resume(self) -> None:
        if self.previewing:
            self.post_message(self.Uncovered())

    def on_resize(self, event) -> None:
        narrow = self.size.width < NARROW_WIDTH
        self.set_class(narrow, "-narrow")
        self._sync_panel_mode()
        self.query_one("#header", Static).update(self.header_text(self.size.width))

    def header_text(self, width: int = 80) -> Text:
        """The header line for ``width`` cells (``gapscope.tui.header.trace_header``)."""
        return trace_header(
            self.trace,
            self.diagnosis,
            width,
            pending=self.diagnosing,
            failed=self.missing_diagnosis is not None,
            early_gaps=None if self.early is None else len(self.early),
            findings_pending=self.findings_pending,
        )

    # ------------------------------------------------------------- updates
    @on(Swimlanes.Changed)
    def _lanes_changed(self, message: Swimlanes.Changed) -> None:
        self._update_detail()
        if message.lanes.selected_gap != self._shown_gap:
            self.call_after_refresh(self._update_side)

    def _update_side(self) -> None:
        lanes = self.lanes
        gap = lanes.selected_gap
        if (
            gap == self._shown_gap
            and self._shown_done == self.done
            and self._side_drawn
            and self._shown_order == self.order_mode
            and self._shown_findings == self.findings_state
        ):
            self._update_detail()
            return
        self._side_drawn = True
        self._shown_findings = self.findings_state
        self._shown_done = set(self.done)
        self._shown_gap = gap
        self._shown_order = self.order_mode
        if gap is not None and self.diagnosis is not None:
            self.done |= {4, 5}
        self.query_one(GapPanel).show(
            self.diagnosis,
            gap,
            self.done,
            pending=self.diagnosing,
            failed=self.missing_diagnosis,
            early=None if self.early is None else (self.trace, self.early, self.previewing),
            largest_first=self.order_mode == SIZE,
            findings=self.findings_state,
            findings_pending=self.findings_pending,
        )
        self._update_detail()
        self._prefetch_cards(gap)

    def _prefetch_cards(self, gap: int | None) -> None:
        """Build the cards that ``n``/``N`` would show next (``gapscope.tui.cards``) in a
        thread worker, so that the key finds them built; the latest call wins."""
        d, nav = self.diagnosis, self.nav
        if d is None or nav is None or nav.gaps is not d.gaps or len(nav) == 0:
            return  # no diagnosis yet (early gaps are numbered otherwise)
        near = [nav.step(gap, k, self.order_mode, None, from_ns=self.lanes.cursor_ns) for k in (1, -1)]
        if gap is None:
            near.insert(0, self._top_finding_gap())
        todo = [g for g in near if g is not None]
        if todo:
            cancelled = lambda: get_current_worker().is_cancelled  # noqa: E731
            self.run_worker(
                lambda: prefetch_cards(d, todo, cancelled),
                thread=True,
                group="cards",
                exclusive=True,
                exit_on_error=False,
            )

    def _update_detail(self) -> None:
        self.query_one("#detail", DetailLine).show(self.detail_text())

    def detail_text(self) -> Text:
        """One line about the event or gap under the cursor, or the cursor, the gap
        number and the last message while there is one."""
        lanes = self.lanes
        t = Text()
        rel = lambda ns: fmt_offset(int(ns) - int(self.trace.extent_ns[0]))  # noqa: E731
        t.append(f"@{rel(lanes.cursor_ns)} ", style="bold")
        row = lanes.current_row()
        ev = lanes.event_at_cursor()
        gaps = lanes.gaps
        gap = None
        if row is not None and row.kind == "idle" and gaps is not None:
            gap = lanes.gap_at(lanes.cursor_ns, row.device)
            if gap is None and lanes.selected_gap is not None and int(gaps.device[lanes.selected_gap]) == row.device:
                gap = lanes.selected_gap
        early = gaps is not None and gaps is self.early  # numbered once the diagnosis comes
        if self.message:
            # The message comes first so that it fits 80 columns; a gap's summary
            # (the card shows it) shrinks to its number, an event's follows (cut with
            # ``…`` by the detail line); the next key clears it (``on_key``).
            if gap is not None:
                t.append("gap " if early else f"gap #{gap} ")
            t.append("│ " + sanitize(self.message, 120), style="italic")
            if gap is not None:
                return t
            t.append(" │ ")
        if gap is not None and gaps is not None and early:
            g = gaps
            t.append(f"gap GPU {int(g.device[gap])} {fmt_dur(int(g.end_ns[gap] - g.start_ns[gap]))} ")
            t.append("idle", style="bold")
            if int(lanes.cursor_ns) != int(g.start_ns[gap]):
                t.append(f" at {rel(g.start_ns[gap])}")
            t.append(" (its cause follows)")
        elif gap is not None and gaps is not None:
            g = gaps
            c = Cause(int(g.cause[gap]))
            t.append(f"gap #{gap} GPU {int(g.device[gap])} {fmt_dur(int(g.end_ns[gap] - g.start_ns[gap]))} ")
            t.append(c.label, style="bold")
            t.append(f" ({int(round(float(g.cause_share[gap]) * 100))}%)")
            if int(lanes.cursor_ns) != int(g.start_ns[gap]):  # at its start, "@" says where it is
                t.append(f" at {rel(g.start_ns[gap])}")
            if int(g.launch[gap]) >= 0:
                t.append(f" lateness {fmt_delta(int(g.lateness_ns[gap]))}")
        elif ev is not None:
            k = Kind(int(self.trace.kind[ev]))
            t.append(_KIND_LABEL[k] + " ", style="bold")
            t.append(sanitize(self.trace.name(ev), 200))
            t.append(f"  {rel(self.trace.start_ns[ev])} dur {fmt_dur(int(self.trace.dur_ns[ev]))}")
            if int(self.trace.correlation[ev]) >= 0:
                t.append(f" corr {int(self.trace.correlation[ev])}")
        elif row is not None:
            t.append(sanitize(row.label, 60))
        return t

    def on_key(self, event) -> None:
        """Any key clears the last message: the key event reaches the screen before
        the app runs its binding, so a message that key's action sets stays."""
        if self.message:
            self.message = ""
            self._update_detail()

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
        if self._waiting(walk=cause is None):
            return
        if self.nav is None:  # no diagnosis: say why, not that the trace has no gaps
            self._say(self.missing_diagnosis or NO_DIAGNOSIS_MESSAGE)
            return
        if len(self.nav) == 0:
            self._say("no gaps in this trace")
            return
        lanes = self.lanes
        current = lanes.selected_gap
        if cause is None and self._walk_finding(direction):
            return
        if cause is None and self.order_mode == SIZE and current is None:
            top = self._top_finding_gap()
            if top is not None:  # the largest position of the top finding, never an edge
                self.message = "the top finding's largest gap (f: the findings)"
                self._select(top)
                return
        if (
            cause is not None
            and self.order_mode == SIZE
            and (current is None or int(self.nav.gaps.cause[current]) != int(cause))
        ):
            # Largest first, a class key starts at that class's largest gap (its
            # smallest going back): continuing from the current gap's place in the
            # order would skip every larger gap of the class.
            current = None
        g = self.nav.step(current, direction, self.order_mode, cause, from_ns=lanes.cursor_ns)
        wrapped = False
        if g is None and cause is not None:
            g = self._wrap_class_step(self.nav, direction, cause)
            wrapped = g is not None
        if g is None:
            self._say(self._no_gap_message(direction, cause))
            return
        self.message = ""
        if cause is not None:
            self.message = self._class_place_message(self.nav, g, cause, direction, wrapped, current)
        self._select(g)

    def _wrap_class_step(self, nav: GapNavigator, direction: int, cause: Cause) -> int | None:
        """Wrap around: the first (last) gap of class ``cause`` in the current order."""
        return nav.step(
            None,
            direction,
            SIZE if self.order_mode == SIZE else TIME,
            cause,
            from_ns=None
            if self.order_mode == SIZE
            else (self.trace.extent_ns[0] - 1 if direction > 0 else self.trace.extent_ns[1] + 1),
        )

    def _no_gap_message(self, direction: int, cause: Cause | None) -> str:
        """What to say when there is no gap to go to (of class ``cause`` when given)."""
        what = f"{cause.label} " if cause is not None else ""
        if cause is not None:
            return f"no {what}gap in this trace"
        return f"no {'next' if direction > 0 else 'previous'} {what}gap ({self.order_mode} order)"

    def _class_place_message(
        self, nav: GapNavigator, g: int, cause: Cause, direction: int, wrapped: bool, current: int | None
    ) -> str:
        """Say which order applies: gap ``g`` is the k-th of class ``cause``, largest
        first or in time (and whether the walk wrapped to get there)."""
        k, m = nav.class_place(g, self.order_mode)
        order = "largest first" if self.order_mode == SIZE else "in time"
        if wrapped and m == 1 and current == g:  # nothing to wrap past: say so
            return f"the only {cause.label} gap (1 of 1, {order})"
        if wrapped:
            where = "first" if direction > 0 else "last"
            return f"wrapped to the {where} {cause.label} gap ({k} of {m}, {order})"
        return f"{cause.label} gap {k} of {m}, {order}"

    def _select(self, g: int) -> None:
        """Select gap ``g`` (the card replaces the findings overview)."""
        if self.order_mode == SIZE:
            self.done.add(3)
        if self.findings_state.overview:
            self.findings_state = dataclasses.replace(self.findings_state, overview=False, active=False)
        self.lanes.select_gap(g)
        self._update_detail()
        if self.diagnosis is not None and has_card(self.diagnosis, g):
            self._update_side()  # built ahead (``_prefetch_cards``): drawn with the lanes, a frame sooner
        else:  # the lanes and detail line repaint first; the card, built now, on the next frame
            self.call_after_refresh(self._update_side)

    # ------------------------------------------------------------- findings
    @property
    def findings_pending(self) -> bool:
        """The diagnosis is shown and the app's worker is computing its findings
        (``Session.findings_pending``): they are not computed here, on the UI thread."""
        return not self.previewing and self.diagnosis is not None and self.session.findings_pending

    def show_findings(self) -> None:
        """The findings of the diagnosis shown are in (the app's ``FindingsReady``):
        the header's verdict and the panel's overview replace what said they come."""
        if not self.query("#lanes"):
            return  # the app quits: its widgets are gone
        self.query_one("#header", Static).update(self.header_text(self.size.width or 80))
        if self.message == FINDINGS_KEY_MESSAGE:
            self.message = ""
        self._side_drawn = False
        self._update_side()

    @property
    def findings(self):
        """The diagnosis's ``Findings`` (None without a diagnosis, or while they are
        being computed: ``findings_pending``)."""
        if self.diagnosis is None or self.findings_pending:
            return None
        return findings_of(self.diagnosis)

    def _top_finding_gap(self) -> int | None:
        found = self.findings
        if found is None or found.top is None or found.top.positions.size == 0:
            return None
        return int(found.top.positions[0])

    def _walk_finding(self, direction: int) -> bool:
        """While a finding is walked (Enter on it), ``n``/``N`` go to its next/previous
        position (wrapping); True when that was done."""
        st = self.findings_state
        found = self.findings
        if st.walking is None or found is None or st.walking >= len(found.ranked):
            return False
        pos = found.ranked[st.walking].positions
        place = (st.place + direction) % pos.size
        self.findings_state = dataclasses.replace(st, place=place, overview=False)
        self.message = f"F{st.walking + 1}: gap {place + 1} of {pos.size} (Esc: all gaps)"
        self._select(int(pos[place]))
        return True

    def action_toggle_findings(self) -> None:
        """Show the verdict and the ranked findings in the panel, or the card again."""
        if self._waiting():
            return
        if self.findings_pending:
            self._say(FINDINGS_KEY_MESSAGE)
            return
        found = self.findings
        if found is None:
            self._say(self.missing_diagnosis or "no findings without a diagnosis")
            return
        st = self.findings_state
        if st.overview and st.active:  # back to the card
            self.findings_state = dataclasses.replace(st, overview=False, active=False)
        else:  # show the findings, and let j/k and Enter choose among them
            self.findings_state = dataclasses.replace(st, overview=True, active=True)
        if self.panel_mode == "hidden":
            self.action_toggle_panel()
        self._say(
            "findings: j/k choose, Enter walks one's gaps, f: the card"
            if self.findings_state.overview
            else "the card of the gap (f: the findings)"
        )
        self._update_side()

    def _findings_shown(self) -> bool:
        """The findings list is shown and chosen with ``f``: j/k and Enter act on it."""
        st = self.findings_state
        return st.overview and st.active and self.findings is not None and bool(self.findings.ranked)

    def _move_finding_cursor(self, delta: int) -> None:
        n = len(self.findings.ranked)
        st = self.findings_state
        self.findings_state = dataclasses.replace(st, cursor=(st.cursor + delta) % n)
        f = self.findings.ranked[self.findings_state.cursor]
        self._say(f"F{self.findings_state.cursor + 1}: {f.title} (Enter walks its {f.positions.size} gaps)")
        self._update_side()

    def _enter_finding(self) -> None:
        st = self.findings_state
        f = self.findings.ranked[st.cursor]
        if f.positions.size == 0:  # exposed communication: busy time, no gap to walk
            self._say(f"F{st.cursor + 1} is busy time, in no idle gap: nothing to walk")
            return
        self.findings_state = FindingsState(overview=False, cursor=st.cursor, walking=st.cursor, place=0)
        self.message = f"F{st.cursor + 1}: gap 1 of {f.positions.size}, n/N walk them (Esc: all gaps)"
        self._select(int(f.positions[0]))

    def action_toggle_order(self) -> None:
        """Switch between time order and largest first; the selected gap stays selected
        and the next ``n`` goes to the gap after it in the new order."""
        self.order_mode = SIZE if self.order_mode == TIME else TIME
        self._say("gaps: largest first" if self.order_mode == SIZE else "gaps: time order")
        self._update_side()  # with no gap selected, the card says what n does now

    def action_zoom(self, factor: float) -> None:
        self.lanes.zoom(float(factor))
        self._update_detail()

    def action_zoom_selected(self) -> None:
        lanes = self.lanes
        if lanes.selected_gap is not None:
            lanes.select_gap(lanes.selected_gap, zoom=True)
        elif lanes.selected_event is not None or lanes.event_at_cursor() is not None:
            ev = lanes.event_at_cursor()
            s = int(self.trace.start_ns[ev])
            lanes.set_viewport(Viewport.fit(s, s + int(self.trace.dur_ns[ev]), lanes.timeline_width, margin=0.25))

    def action_zoom_step(self) -> None:
        """Fit the step (``ProfilerStep#N``, annotation or period) holding the cursor."""
        if self._waiting():
            return
        steps = getattr(self.diagnosis, "steps", None)
        if steps is None or len(steps.start_ns) == 0:
            self._say("no steps found in this trace")
            return
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
        if self._findings_shown():  # j/k choose a finding while the findings are shown
            self._move_finding_cursor(int(delta))
            return
        self.lanes.select_row(int(delta))
        self._update_detail()

    def action_toggle_group(self) -> None:
        if self._findings_shown():  # Enter walks the chosen finding's positions
            self._enter_finding()
            return
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
        if self.panel_mode == "hidden":  # the rows it left may stay empty: say what did it
            self._say("card hidden (p shows it)")

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
        panel = self.query_one(GapPanel)
        compact = self.panel_mode == "compact"
        panel.set_compact(compact)
        # The compact card takes the rows the lanes leave empty (at least the CSS's 6),
        # so a trace with few lanes shows more of the card without a key.
        height = None
        if compact and self.size.height:
            room = self.size.height - 3  # header, detail line, footer
            need = len(self.lanes.rows) + 2  # ruler, rows, one spare
            height = max(6, min(room - 7, room - need))
        if panel.styles.height != height:
            panel.styles.height = height

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
        if ev is None:  # not with matches
            return
        k = int((self.search.matches == ev).nonzero()[0][0]) + 1
        self.message = f"match {k}/{len(self.search)} for {self.search.query!r}"
        lanes.select_event(ev)

    def action_prompt(self, mode: str) -> None:
        self.prompt_mode = mode
        inp = self.query_one("#prompt", Input)
        start = "the device lanes' first event" if self.previewing else "trace start"
        numbered = " or gap (#12)" if self.diagnosis is not None else ""  # gap numbers come with the causes
        inp.placeholder = (
            f"go to time (1.5ms, 250us from {start}){numbered}" if mode == "goto" else "search event names"
        )
        inp.value = ""
        self.add_class("-prompt")
        self.refresh_bindings()
        # Focus now, not on the next turn of the loop (``Widget.focus`` defers): keys
        # typed ahead (``g#12`` read in one go) are already queued and must reach the
        # prompt (``GapscopeApp.on_key``), not the gap bindings.
        self.set_focus(inp)

    def submit_prompt(self, text: str) -> None:
        """Enter in the prompt: close it (the focus back on the lanes at once) and go to
        the time or gap, or search the names."""
        if not self.has_class("-prompt"):
            return
        self._close_prompt()
        if self.prompt_mode == "goto":
            if text.strip().startswith("#"):
                self._go_to_gap(text.strip()[1:])
                return
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

    def _go_to_gap(self, number: str) -> None:
        """Select gap ``#number`` (the number the card, the status line and the report
        show) and zoom to it."""
        if self._waiting():
            return
        n = len(self.diagnosis.gaps) if self.diagnosis is not None else 0
        if not number.isdigit() or int(number) >= n:
            self._say(f"no gap #{number}: gaps are numbered #0 to #{n - 1}" if n else "this trace has no idle gaps")
            return
        self.message = ""
        self.lanes.select_gap(int(number), zoom=True)

    def _close_prompt(self) -> None:
        self.remove_class("-prompt")
        self.set_focus(self.lanes)  # now: keys already queued go to the lanes
        self.refresh_bindings()
        if self.previewing:  # a whole trace held back while the prompt was open
            self.post_message(self.Uncovered())

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While the ``g`` or ``/`` prompt is open the screen's keys are off and out of
        the footer: they would type into the prompt (``+``), or act behind it."""
        if self.has_class("-prompt"):
            return False
        return True

    @property
    def prompt_open(self) -> bool:
        """Whether the ``g`` or ``/`` prompt is open (the user is typing)."""
        return self.has_class("-prompt")

    def key_escape(self) -> None:
        if self.has_class("-prompt"):
            self._close_prompt()
        elif self.findings_state.walking is not None:
            self.findings_state = dataclasses.replace(self.findings_state, walking=None)
            self._say("n walks all the gaps again")
            self._update_side()

    def action_what_if_mark(self) -> None:
        """Mark the selected gap's largest CPU-side evidence item not yet marked and
        show the step projected without every marked name (``tui.what_if``)."""
        if self._waiting():
            return
        gap = self.lanes.selected_gap
        if self.diagnosis is None or gap is None:
            self._say("what-if: select a gap first (n)")
            return
        name = next_mark(self.diagnosis, gap, self.what_if_marks)
        if name is None:
            self._say(
                f"what-if: gap #{gap} has no more CPU-side evidence to mark; "
                + projection_text(self.diagnosis, self.what_if_marks)
            )
            return
        self.what_if_marks = (*self.what_if_marks, name)
        self._say(projection_text(self.diagnosis, self.what_if_marks))

    def action_what_if_clear(self) -> None:
        """Forget the what-if marks."""
        self.what_if_marks = ()
        self._say("what-if: marks cleared")

    def action_warnings(self) -> None:
        """List the loader's warnings (skipped or repaired input) in a screen."""
        if not self.trace.warnings:
            self._say("no loader warnings: nothing was skipped or repaired")
            return
        self.app.push_screen(WarningsScreen(self.trace))

    def action_help(self) -> None:
        self.app.push_screen(HelpScreen(self))

    # ------------------------------------------------------------- rare actions
    def largest_gap(self) -> None:
        if self._waiting(walk=True):
            return
        if self.nav is not None and len(self.nav):
            self.lanes.select_gap(int(self.nav.size_order[0]))
            self.done.add(3)
            self._update_side()

    def set_all_groups(self, collapsed: bool) -> None:
        self.lanes.set_all_groups(collapsed)
