"""The loading screen: load + diagnose in a thread worker that only posts messages.

The worker never touches widgets: it posts ``LoadScreen.Progress``, ``Loaded`` or
``Failed``; the screen updates its progress bar and hands the result to the app
through the callbacks it was given.
Escape cancels: the worker is cancelled and its result, if any, is dropped.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Label, ProgressBar
from textual.worker import Worker, get_current_worker

from gapscope.parsers.model import Trace
from gapscope.tui.lanes_model import sanitize

__all__ = ["LoadScreen", "STAGES"]

#: Stages shown by the progress bar.
STAGES = ("reading and parsing", "diagnosing", "drawing")


def _cancellable(fn: Callable, arg, worker):
    """Run ``fn(arg)`` in a daemon thread, polling ``worker.is_cancelled``.

    Returns ``fn``'s result, re-raises its exception, or returns None as soon as the
    worker is cancelled (the daemon thread is abandoned and dies with the process, so
    Escape never waits for a long parse to finish).
    """
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn(arg)
        except BaseException as exc:  # noqa: BLE001 - handed to the worker below
            box["error"] = exc

    t = threading.Thread(target=run, name="gapscope-load", daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.05)
        if worker.is_cancelled:
            return None
    if "error" in box:
        raise box["error"]
    return box["value"]


class LoadScreen(Screen):
    """Loads ``source`` (a path, or an already loaded ``Trace``) and diagnoses it.

    ``loader(path) -> Trace`` and ``diagnose(trace) -> Diagnosis | None`` are injected
    by the factory (tests pass slow or failing ones). The outcome goes to the app, on
    the event loop: ``on_loaded(trace, diagnosis, error)`` (``error``: why the
    diagnosis failed, or None), ``on_failed(error)`` (the trace could not be loaded)
    or ``on_cancel()`` (Escape).
    """

    BINDINGS = [Binding("escape", "cancel_load", "cancel", id="load.cancel")]
    DEFAULT_CSS = """
    LoadScreen { align: center middle; }
    LoadScreen > Vertical { width: 60; height: auto; border: round $primary; padding: 1 2; }
    LoadScreen Label { width: 1fr; }
    """

    class Progress(Message):
        def __init__(self, stage: int) -> None:
            super().__init__()
            self.stage = stage

    class Loaded(Message):
        def __init__(self, trace, diagnosis, error: str | None) -> None:
            super().__init__()
            self.trace = trace
            self.diagnosis = diagnosis
            self.error = error

    class Failed(Message):
        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(
        self,
        source,
        loader: Callable,
        diagnose: Callable | None,
        *,
        on_loaded: Callable[[Trace, Any, str | None], None],
        on_failed: Callable[[str], None],
        on_cancel: Callable[[], None],
    ) -> None:
        super().__init__()
        self.source = source
        self.loader = loader
        self.diagnose_fn = diagnose
        self.on_loaded = on_loaded
        self.on_failed = on_failed
        self.on_cancel = on_cancel
        self.worker: Worker[None] | None = None

    def compose(self) -> ComposeResult:
        name = self.source if isinstance(self.source, (str, Path)) else getattr(self.source.source, "path", "trace")
        with Vertical():
            yield Label(Text("Loading " + sanitize(Path(str(name)).name or "trace")), markup=False, id="load-title")
            yield ProgressBar(total=len(STAGES), show_eta=False, id="load-bar")
            yield Label(Text(STAGES[0] + "…  (Escape cancels)"), markup=False, id="load-stage")

    def on_mount(self) -> None:
        self.worker = self._load()

    @work(thread=True, exclusive=True, exit_on_error=False, name="load")
    def _load(self) -> None:
        from gapscope.parsers.errors import TraceFormatError

        worker = get_current_worker()
        source = self.source
        try:
            if isinstance(source, (str, Path)):
                trace = _cancellable(self.loader, source, worker)
                if trace is None:
                    return
            else:
                trace = source
        except TraceFormatError as exc:
            if not worker.is_cancelled:
                self.post_message(self.Failed(str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - a loader fault: one line, never a traceback on screen
            if not worker.is_cancelled:
                self.post_message(self.Failed(f"{source}: cannot load ({type(exc).__name__}: {exc})"))
            return
        if worker.is_cancelled:
            return
        self.post_message(self.Progress(1))
        diagnosis, error = None, None
        if self.diagnose_fn is not None:
            try:
                diagnosis = self.diagnose_fn(trace)
            except Exception as exc:  # noqa: BLE001 - show the trace without gaps rather than nothing
                error = f"diagnosis failed: {type(exc).__name__}: {exc}"
        if worker.is_cancelled:
            return
        # Everything loaded lives as long as the app: keep it out of the cyclic GC's
        # scans, so per-frame allocations do not trigger full-heap collections.
        gc.freeze()
        self.post_message(self.Progress(2))
        self.post_message(self.Loaded(trace, diagnosis, error))

    def on_load_screen_progress(self, message: Progress) -> None:
        self.query_one(ProgressBar).update(progress=message.stage)
        self.query_one("#load-stage", Label).update(
            Text(STAGES[min(message.stage, len(STAGES) - 1)] + "…  (Escape cancels)")
        )

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        if self.worker is not None and self.worker.is_cancelled:
            return
        self.on_loaded(message.trace, message.diagnosis, message.error)

    @on(Failed)
    def _failed(self, message: Failed) -> None:
        self.on_failed(message.error)

    def action_cancel_load(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
        self.on_cancel()
