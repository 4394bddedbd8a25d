"""The gapscope Textual app: the loading screen, then the trace screen, and the
command palette's rare actions (the help and warnings screens are pushed by the trace
screen: ``gapscope.tui.help``, ``gapscope.tui.loader_warnings``).

Build it with ``gapscope.tui.factory.make_app`` (one factory for the CLI, tests and benchmarks).
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Iterable

import numpy as np
from textual import events, on, work
from textual.app import App, SystemCommand
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Input
from textual.worker import Worker, get_current_worker

from gapscope.parsers.model import Trace, same_device_ops
from gapscope.tui import workers
from gapscope.tui.colour import no_colour
from gapscope.tui.loading import LoadScreen
from gapscope.tui.messages import (
    Diagnosed,
    FindingsReady,
    GapsFound,
    LoadFailed,
    LoadProgress,
    PreviewLoaded,
    TraceLoaded,
)
from gapscope.tui.screen import Handover, TraceScreen
from gapscope.tui.session import Phase, Reading, Session, ViewOptions

__all__ = ["GapscopeApp", "PREVIEW_DIFFERED"]

#: What the trace screen says when the device preview it replaces was not the whole
#: trace's device lanes (``gapscope.parsers.chrome.preview.device_preview`` says when).
PREVIEW_DIFFERED = "the lanes drawn first differed from the whole file: these are the whole file's"


class GapscopeApp(App):
    """The viewer. Construct through ``gapscope.tui.factory.make_app``.

    ``session``: what is loaded and diagnosed (``gapscope.tui.session.Session``; its
    ``trace`` set: shown at once, with its ``diagnosis`` when set, else diagnosed);
    ``options``: the loader, the diagnosis and the rest the caller chose
    (``ViewOptions``, complete: the factory fills in the defaults).

    The app owns the work: a thread worker loads the file, another diagnoses the
    trace (``gapscope.tui.workers``); each posts messages (``gapscope.tui.messages``)
    that the app takes into the session before it sets ``phase``, the reactive that
    decides what is shown (``watch_phase``; the trace screen watches it too).
    """

    CSS_PATH = "gapscope.tcss"
    TITLE = "gapscope"
    ENABLE_COMMAND_PALETTE = True

    #: how far the viewer is (``Phase``); set only on the event loop, by the app
    phase: reactive[Phase] = reactive(Phase.LOADING, init=False)
    #: how far the load of the file is (``LoadProgress`` as kept; ``watch_reading``
    #: hands it to the screens that show it)
    reading: reactive[Reading] = reactive(Reading, init=False)

    def __init__(self, session: Session, options: ViewOptions) -> None:
        super().__init__()
        no_colour(self)
        self.session = session
        self.options = options
        #: why the trace could not be loaded (``Session.error`` once ``FAILED``), and
        #: whether the load was cancelled (Escape): the command prints and exits by them
        self.error: str | None = None
        self.cancelled = False
        #: the whole trace's screen, the preview's (while it is shown), and the workers
        self.trace_screen: TraceScreen | None = None
        self.preview_screen: TraceScreen | None = None
        self.load_worker: Worker | None = None
        self.diagnose_worker: Worker | None = None
        #: set once a replaced preview screen is collected (at once when there was
        #: none): the diagnosis's freeze waits for it (``workers.diagnose``)
        self.preview_forgotten = threading.Event()
        self.preview_forgotten.set()

    def on_mount(self) -> None:
        for name, factory in self.options.extra_screens.items():
            self.install_screen(factory(), name)
        if self.session.trace is not None:  # given loaded: no load
            self.phase = Phase.DIAGNOSED if self.session.diagnosis is not None else Phase.DIAGNOSING
            return
        if self.session.path is None:
            raise ValueError("GapscopeApp: the session has neither a trace nor a path")
        self.push_screen(LoadScreen(self.session))
        self.load_worker = self._load(self.session.path)
        if self.options.preview is not None:
            self.options.preview(self._preview_handed)

    def _preview_handed(self, trace: Trace) -> None:
        """The load's device preview (from the load's thread): its gaps are found there,
        then it is posted (``post_message`` is thread-safe)."""
        gaps = None
        if self.options.early_gaps is not None:
            try:
                gaps = self.options.early_gaps(trace)
            except Exception:  # noqa: BLE001 - the preview is drawn without its gaps then
                gaps = None
        self.post_message(PreviewLoaded(trace, gaps))

    @work(thread=True, exclusive=True, exit_on_error=False, name="load", group="load")
    def _load(self, path: str) -> None:
        workers.load(path, self.options, self.post_message, get_current_worker())

    @work(thread=True, exclusive=True, exit_on_error=False, name="diagnose", group="diagnose")
    def _diagnose(self, trace: Trace, find_early: bool) -> None:
        workers.diagnose(
            trace, self.options, find_early, self.preview_forgotten, self.post_message, get_current_worker()
        )

    # ------------------------------------------------------------- the workers' messages
    @on(LoadProgress)
    def _load_progress(self, message: LoadProgress) -> None:
        if self.phase in (Phase.LOADING, Phase.PREVIEW):
            seen = self.reading.seen or message.share is not None
            self.reading = Reading(message.share, seen, message.elapsed_s)

    @on(PreviewLoaded)
    def _preview_loaded(self, message: PreviewLoaded) -> None:
        """Show the device preview over the loading screen, whose load goes on; not
        when the load is done or another screen covers it (the palette): then the
        load is told at once that it need not wait for it."""
        cancelled = self.load_worker is not None and self.load_worker.is_cancelled
        if self.phase is not Phase.LOADING or cancelled or not isinstance(self.screen, LoadScreen):
            if self.options.preview_drawn is not None:
                self.options.preview_drawn()
            return
        self.session.preview, self.session.preview_gaps = message.trace, message.gaps
        self.phase = Phase.PREVIEW

    @on(TraceLoaded)
    def _trace_loaded(self, message: TraceLoaded) -> None:
        if self.load_worker is not None and self.load_worker.is_cancelled:
            return
        self.session.trace = message.trace
        self._advance_from_preview()

    @on(LoadFailed)
    def _load_failed(self, message: LoadFailed) -> None:
        self.session.error = message.error
        self.phase = Phase.FAILED

    @on(GapsFound)
    def _gaps_found(self, message: GapsFound) -> None:
        if self.phase is not Phase.DIAGNOSING:
            return  # the diagnosis came first
        self.session.early = message.gaps
        if self.trace_screen is not None and self.trace_screen.is_mounted:
            self.trace_screen.show_early_gaps(message.gaps)  # else it takes them at its mount

    @on(Diagnosed)
    def _diagnosed(self, message: Diagnosed) -> None:
        self.session.diagnosis, self.session.error = message.diagnosis, message.error
        self.session.findings_pending = message.findings_follow
        self.phase = Phase.DIAGNOSED

    @on(FindingsReady)
    def _findings_ready(self, message: FindingsReady) -> None:
        """The diagnosis's findings are in (kept in its ``derived``): the trace screen
        shows the verdict and the findings in place of saying they are computed."""
        if message.diagnosis is not self.session.diagnosis:
            return  # of a diagnosis no longer shown
        self.session.findings_pending = False
        if self.trace_screen is not None and self.trace_screen.is_mounted:
            self.trace_screen.show_findings()  # else it reads the session at its mount

    @on(TraceScreen.Shown)
    def _begin_diagnosis(self) -> None:
        """The whole trace's screen is up: its diagnosis begins (once), after its gaps
        when the preview did not bring them."""
        trace = self.session.trace
        if self.phase is Phase.DIAGNOSING and trace is not None and self.diagnose_worker is None:
            self.diagnose_worker = self._diagnose(trace, self.session.early is None)

    @on(TraceScreen.Uncovered)
    def _advance_from_preview(self) -> None:
        """The whole trace replaces the preview once it is there and the preview is in
        the user's hands: on top (not under help or warnings), its prompt closed (what
        they type is not thrown away); meanwhile the preview says it waits."""
        if self.session.trace is None or self.phase not in (Phase.LOADING, Phase.PREVIEW):
            return
        shown = self.preview_screen
        if shown is not None and (self.screen is not shown or shown.prompt_open):
            shown.whole_trace_waits()
            return
        self.phase = Phase.DIAGNOSING

    # ------------------------------------------------------------- what each phase shows
    def watch_reading(self, reading: Reading) -> None:
        """The screens that show how far the load is follow it (the loading screen, a
        preview). Called here rather than watched by them: a screen's watcher of the
        app would hold it, and its trace, until the next change after it is closed."""
        for screen in self.screen_stack:
            if isinstance(screen, (LoadScreen, TraceScreen)) and screen.is_mounted:
                screen.show_reading(reading)

    def watch_phase(self, old: Phase, new: Phase) -> None:
        if new is Phase.PREVIEW:
            self.preview_screen = TraceScreen(self.session)
            self.push_screen(self.preview_screen)
            if self.options.preview_drawn is not None:
                self.call_after_refresh(self.options.preview_drawn)
        elif new is Phase.DIAGNOSING or (new is Phase.DIAGNOSED and old is Phase.LOADING):
            self._show_trace()
        elif new is Phase.FAILED:
            self.error = self.session.error
            self.exit(return_code=2)

    def _show_trace(self) -> None:
        """Replace the loading screen (and the preview over it) with the whole trace's
        screen; without a diagnosis it is diagnosed in a worker. Over a preview it
        opens where the user left it (``Handover``)."""
        trace = self.session.trace
        if trace is None:  # not loaded: nothing to show
            return
        handover = None
        if self.preview_screen is not None:
            handover = self._hand_over(self.preview_screen, trace)
            self.session.early = handover.early
            # the screen and its trace: a worker of the preview may hold them a moment
            gone = (weakref.ref(self.preview_screen), weakref.ref(self.preview_screen.trace))
            self.preview_screen = None
            self.session.preview = self.session.preview_gaps = None
            self.preview_forgotten.clear()
            self.run_worker(
                workers.forget(self.pop_screen(), gone, self.preview_forgotten),
                name="forget-preview",
                exit_on_error=False,
            )
        screen = TraceScreen(self.session, handover)
        self.trace_screen = screen
        if isinstance(self.screen, LoadScreen):
            self.switch_screen(screen)
        else:
            self.push_screen(screen)
        if self.options.on_ready is not None:
            self.call_after_refresh(self.options.on_ready, self, screen)

    def _hand_over(self, preview: TraceScreen, trace: Trace) -> Handover:
        """What the whole trace's screen takes from the ``preview`` it replaces: the
        view when the user moved it, the gap selected, the gap order, ticked steps and
        card state (``UserSettings``), and the preview's gaps when they are the whole
        trace's (the same device ops: drawn on at once, until the diagnosis; their op
        indices are the preview's, so left out); else a notice that they differed."""
        view, select, settings = preview.view_state(), preview.selected_gap_key(), preview.user_settings()
        if not same_device_ops(preview.trace, trace):
            # its device numbers or gaps may not be the whole trace's
            return Handover(view=view, settings=settings, notice=PREVIEW_DIFFERED)
        early = None
        if preview.early is not None:
            g = preview.early
            none = np.full(len(g), -1, dtype=np.int64)
            early = dataclasses.replace(g, prev_op=none, next_op=none.copy(), launch=none.copy())
        return Handover(view=view, select=select, settings=settings, early=early)

    def on_key(self, event: events.Key) -> None:
        """A printable key that reaches the app while a text field has the focus was
        typed ahead of the focus change (``g#12`` read in one go: every key was queued
        to the lanes before ``g`` opened the prompt; a field stops the keys it gets
        itself): it goes into the field, where the user meant it, in order; an Escape
        typed ahead closes the prompt (``TraceScreen.key_escape``)."""
        field = self.focused
        if not isinstance(field, Input):
            return
        if event.is_printable and event.character:
            event.stop()
            field.insert_text_at_cursor(event.character)
        elif event.key == "escape":  # typed ahead too: it closes the field's prompt
            close = getattr(self.screen, "key_escape", None)
            if close is not None:
                event.stop()
                close()

    def action_cancel_load(self) -> None:
        """Escape during loading: exit with status 1 and no trace."""
        if self.load_worker is not None:
            self.load_worker.cancel()
        self.cancelled = True
        self.exit(return_code=1)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if isinstance(screen, TraceScreen):
            yield SystemCommand("Largest gap", "Select the largest idle gap", screen.largest_gap)
            yield SystemCommand(
                "Gap order: largest first / time", "Toggle the order of next/previous gap", screen.action_toggle_order
            )
            yield SystemCommand(
                "Collapse all groups", "Show only process and device headers", lambda: screen.set_all_groups(True)
            )
            yield SystemCommand("Expand all groups", "Show every lane", lambda: screen.set_all_groups(False))
            yield SystemCommand("Fit all", "Show the whole trace", screen.action_fit)
            yield SystemCommand(
                "Next sync gap", "Jump to the next gap caused by a sync", lambda: screen.action_jump_class(0)
            )
            yield SystemCommand(
                "Next copy gap", "Jump to the next gap caused by a copy", lambda: screen.action_jump_class(1)
            )
            yield SystemCommand(
                "Next launch gap", "Jump to the next launch-overhead gap", lambda: screen.action_jump_class(2)
            )
            yield SystemCommand("Next host gap", "Jump to the next host-bound gap", lambda: screen.action_jump_class(3))
            yield SystemCommand(
                "Next dependency gap",
                "Jump to the next gap whose op was queued and waited GPU-side",
                lambda: screen.action_jump_class(5),
            )
