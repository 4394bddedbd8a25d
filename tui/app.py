"""The gapscope Textual app: the loading screen, then the trace screen, and the
command palette's rare actions (the help and warnings screens are pushed by the trace
screen: ``gapscope.tui.help``, ``gapscope.tui.loader_warnings``).

Build it with ``gapscope.tui.factory.make_app`` (one factory for the CLI, tests and benchmarks).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import time
import weakref
from collections.abc import Callable, Iterable

import numpy as np
from textual import events, on
from textual.app import App, SystemCommand
from textual.screen import Screen
from textual.widgets import Input

from gapscope.parsers.model import same_device_ops
from gapscope.tui.colour import no_colour
from gapscope.tui.loading import LoadScreen
from gapscope.tui.screen import TraceScreen

__all__ = ["GapscopeApp", "PREVIEW_DIFFERED"]

#: Longest wait (s) for a replaced preview screen to be let go of and collected.
FORGET_PREVIEW_S = 2.0
#: What the trace screen says when the device preview it replaces was not the whole
#: trace's device lanes (``gapscope.parsers.chrome.loader.device_preview`` says when).
PREVIEW_DIFFERED = "the lanes drawn first differed from the whole file: these are the whole file's"


class GapscopeApp(App):
    """The viewer. Construct through ``gapscope.tui.factory.make_app``.

    ``source``: a path or a ``Trace``; ``loader``/``diagnose``: callables used by the
    load worker; ``extra_screens``: name → screen factory, installed for other modes
    (e.g. the exercise screen) and reachable with ``switch_mode``-like
    ``push_screen(name)``.
    """

    CSS_PATH = "gapscope.tcss"
    TITLE = "gapscope"
    ENABLE_COMMAND_PALETTE = True

    def __init__(
        self,
        source,
        *,
        loader: Callable,
        diagnose: Callable | None,
        diagnosis=None,
        extra_screens: dict[str, Callable[[], Screen]] | None = None,
        on_ready: Callable[[GapscopeApp, TraceScreen], None] | None = None,
        preview: Callable | None = None,
        early_gaps: Callable | None = None,
        preview_drawn: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        no_colour(self)
        self.source = source
        self.loader = loader
        self.diagnose_fn = diagnose
        self.preset_diagnosis = diagnosis
        self.extra_screens = dict(extra_screens or {})
        self.on_ready = on_ready
        self.error: str | None = None
        self.cancelled = False
        self.trace_screen: TraceScreen | None = None
        #: ``preview(callback)``: hands over the load's device preview (``LoadScreen``)
        self.preview = preview
        #: ``early_gaps(trace)``: the gaps a trace screen draws before its causes
        #: (``TraceScreen``), on a preview too
        self.early_gaps = early_gaps
        #: ``preview_drawn()``: called once the preview's screen has been drawn, or at
        #: once when it is not shown (the load waits for it:
        #: ``gapscope.parsers.detect.EarlyLoad.preview_drawn``)
        self.preview_drawn = preview_drawn
        #: the device preview shown while the file is read, and a whole trace that came
        #: while another screen covered it (``take_deferred_trace``)
        self.preview_screen: TraceScreen | None = None
        self._deferred: tuple | None = None

    def on_mount(self) -> None:
        for name, factory in self.extra_screens.items():
            self.install_screen(factory(), name)
        if (
            self.preset_diagnosis is not None
            and not isinstance(self.source, (str, bytes))
            and hasattr(self.source, "start_ns")
        ):
            self.show_trace(self.source, self.preset_diagnosis, None)
        else:
            self.push_screen(
                LoadScreen(
                    self.source,
                    self.loader,
                    on_loaded=self.show_trace,
                    on_failed=self.fail,
                    on_cancel=self.cancel_load,
                    preview=self.preview,
                    on_preview=self.show_preview,
                    preview_gaps=self.early_gaps,
                )
            )

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

    # the load screen's callbacks (on the event loop, from its message handlers)
    def show_preview(self, trace, gaps=None) -> None:
        """Show the device preview ``trace`` and its ``gaps`` (``early_gaps``; None:
        not drawn) over the loading screen, whose load goes on (``show_trace``
        replaces both with the whole trace)."""
        if self.trace_screen is not None or self.preview_screen is not None or not isinstance(self.screen, LoadScreen):
            if self.preview_drawn is not None:  # not drawn at all (the palette covers the load): the load goes on
                self.preview_drawn()
            return
        from gapscope.parsers.detect import load_progress

        self.preview_screen = TraceScreen(trace, reading=load_progress, early=gaps)
        self.push_screen(self.preview_screen)
        if self.preview_drawn is not None:
            self.call_after_refresh(self.preview_drawn)

    @on(TraceScreen.Uncovered)
    def take_deferred_trace(self) -> None:
        """The whole trace that came while the preview was covered, shown now."""
        shown = self.preview_screen
        if self._deferred is not None and self.screen is shown and shown is not None and not shown.prompt_open:
            args, self._deferred = self._deferred, None
            self.show_trace(*args)

    def show_trace(self, trace, diagnosis=None, error: str | None = None) -> None:
        """Replace the loading screen (and the preview over it) with the trace screen;
        without ``diagnosis`` (and ``error``) the trace screen draws the lanes at once
        and diagnoses in a worker. Over a preview covered by another screen (help,
        warnings) it waits until the preview is back on top, and it opens at the
        preview's view when the user had moved it, with its gap selected and the gap
        order, ticked steps and card state the user left there (``UserSettings``)."""
        view = notice = select = early = settings = None
        replacing = self.preview_screen is not None
        if self.preview_screen is not None:
            if self.screen is not self.preview_screen or self.preview_screen.prompt_open:
                self._deferred = (trace, diagnosis, error)  # until it is back on top, its prompt closed
                self.preview_screen.whole_waiting = True
                return
            view = self.preview_screen.view_state()
            select = self.preview_screen.selected_gap_key()
            settings = self.preview_screen.user_settings()
            if not same_device_ops(self.preview_screen.trace, trace):
                notice = PREVIEW_DIFFERED
                select = None  # its device numbers or gaps may not be the whole trace's
            elif self.preview_screen.early is not None:
                # the same gaps (interior_gaps of the same device ops): drawn on at once,
                # until the diagnosis; their op indices are the preview's, so left out
                g = self.preview_screen.early
                none = np.full(len(g), -1, dtype=np.int64)
                early = dataclasses.replace(g, prev_op=none, next_op=none.copy(), launch=none.copy())
            # the screen and its trace: a worker of the preview may hold the trace a
            # moment after the screen is gone
            gone = (weakref.ref(self.preview_screen), weakref.ref(self.preview_screen.trace))
            self.preview_screen = None
            popped = self.pop_screen()
        pending = diagnosis is None and error is None and self.diagnose_fn is not None
        screen = TraceScreen(
            trace,
            diagnosis,
            error,
            diagnose=self.diagnose_fn if pending else None,
            view=view,
            notice=notice,
            replaces_preview=replacing,
            early_gaps=self.early_gaps if pending else None,
            early=early if pending else None,
            select=select,
            settings=settings,
        )
        self.trace_screen = screen
        if replacing:
            self.run_worker(self._forget_preview(popped, gone, screen), name="forget-preview", exit_on_error=False)
        if isinstance(self.screen, LoadScreen):
            self.switch_screen(screen)
        else:
            self.push_screen(screen)
        if self.on_ready is not None:
            self.call_after_refresh(self.on_ready, self, screen)

    async def _forget_preview(self, popped, preview: tuple[weakref.ref, ...], screen: TraceScreen) -> None:
        """Once the preview screen is gone, collect it and its trace (its widgets hold
        them in cycles; Textual lets go of them over a few frames) before ``screen``'s
        diagnosis freezes what is alive for good; given up after ``FORGET_PREVIEW_S``."""
        try:
            await popped
            give_up = time.monotonic() + FORGET_PREVIEW_S
            while True:
                gc.collect()
                if all(ref() is None for ref in preview) or time.monotonic() > give_up:
                    break
                await asyncio.sleep(0.05)
        finally:
            screen.preview_forgotten.set()

    def fail(self, error: str) -> None:
        """The trace could not be loaded: exit with status 2 (the CLI prints ``error``)."""
        self.error = error
        self.exit(return_code=2)

    def cancel_load(self) -> None:
        """Escape during loading: exit with status 1 and no trace."""
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
