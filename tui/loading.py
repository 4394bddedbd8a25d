"""The loading screen: the load in a thread worker that only posts messages.

The worker never touches widgets: it posts ``LoadScreen.Loaded`` or ``Failed``; the
screen hands the result to the app through the callbacks it was given. The diagnosis
(gaps and causes) is not waited for here: the trace screen draws the lanes at once and
runs it in its own worker (``gapscope.tui.screen.TraceScreen``).
Escape cancels: the worker is cancelled and its result, if any, is dropped.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Label, ProgressBar
from textual.worker import Worker, get_current_worker

from gapscope.analysis.types import Gaps
from gapscope.parsers.model import Trace
from gapscope.tui.lanes_model import sanitize
from gapscope.units import fmt_bytes

__all__ = ["LoadScreen", "cancellable"]


def cancellable(fn: Callable, arg, worker, name: str = "gapscope-load"):
    """Run ``fn(arg)`` in a daemon thread named ``name``, polling ``worker.is_cancelled``.

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

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.05)
        if worker.is_cancelled:
            return None
    if "error" in box:
        raise box["error"]
    return box["value"]


class LoadScreen(Screen):
    """Loads ``source`` (a path, or an already loaded ``Trace``).

    ``loader(path) -> Trace`` is injected by the factory (tests pass slow or failing
    ones); ``progress() -> float | None``: the share of the text decoded so far, polled
    for the bar (default ``gapscope.parsers.detect.load_progress``). The outcome goes
    to the app, on the event loop: ``on_loaded(trace)``, ``on_failed(error)`` (the
    trace could not be loaded) or ``on_cancel()`` (Escape); before it, maybe
    ``on_preview(trace, gaps)`` with the device preview that ``preview`` hands over
    and its ``preview_gaps`` (None without).
    """

    BINDINGS = [Binding("escape", "cancel_load", "cancel", id="load.cancel")]
    DEFAULT_CSS = """
    LoadScreen { align: center middle; }
    LoadScreen > Vertical { width: 60; height: auto; border: round $primary; padding: 1 2; }
    LoadScreen Label { width: 1fr; }
    """

    class Loaded(Message):
        def __init__(self, trace: Trace) -> None:
            super().__init__()
            self.trace = trace

    class Preview(Message):
        def __init__(self, trace: Trace, gaps) -> None:
            super().__init__()
            self.trace = trace
            self.gaps = gaps

    class Failed(Message):
        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(
        self,
        source,
        loader: Callable,
        *,
        on_loaded: Callable[[Trace], None],
        on_failed: Callable[[str], None],
        on_cancel: Callable[[], None],
        progress: Callable[[], float | None] | None = None,
        preview: Callable[[Callable[[Trace], None]], None] | None = None,
        on_preview: Callable[..., None] | None = None,
        preview_gaps: Callable[[Trace], Gaps] | None = None,
    ) -> None:
        super().__init__()
        from gapscope.parsers.detect import load_progress

        self.progress_fn: Callable[[], float | None] = progress or load_progress
        #: the last share decoded (None: not known), and whether one was ever known
        self._fraction: float | None = None
        self._seen_fraction = False
        self.source = source
        self.loader = loader
        self.on_loaded = on_loaded
        self.on_failed = on_failed
        self.on_cancel = on_cancel
        #: ``preview(callback)`` hands the load's device preview over, from any
        #: thread (``gapscope.parsers.detect.EarlyLoad.on_preview``); ``on_preview``
        #: shows it while this screen's load goes on under it
        self.preview = preview
        self.on_preview = on_preview
        #: ``preview_gaps(trace)``: the preview's gaps, found in the load's thread
        #: before it is handed on (``on_preview(trace, gaps)``; gaps None: none found)
        self.preview_gaps = preview_gaps
        self.loaded = False
        self.worker: Worker[None] | None = None
        self._t0 = time.monotonic()
        self._file_size_text = ""
        if isinstance(source, (str, Path)):
            try:
                with open(source, "rb") as fh:  # the size on disk; a .gz says so
                    gz = fh.read(2) == b"\x1f\x8b"
                    self._file_size_text = " " + fmt_bytes(os.fstat(fh.fileno()).st_size) + (" of gzip" if gz else "")
            except (OSError, ValueError):
                pass

    def stage_text(self) -> Text:
        """``reading and parsing SIZE… P% Ns  (Escape cancels)``: the file's size, the
        share decoded when the loader says (a big file decoded in parts), the seconds
        since the load began from 1 s on; ``building the trace…`` once the parts are
        decoded and the trace is assembled from them."""
        took_s = int(time.monotonic() - self._t0)
        elapsed = f" {took_s} s" if took_s >= 1 else ""
        if self._fraction is not None:
            stage = f"reading and parsing{self._file_size_text}… {int(100 * self._fraction)}%"
        elif self._seen_fraction:
            stage = "building the trace…"
        else:
            stage = f"reading and parsing{self._file_size_text}…"
        return Text(f"{stage}{elapsed}  (Escape cancels)")

    def compose(self) -> ComposeResult:
        name = self.source if isinstance(self.source, (str, Path)) else getattr(self.source.source, "path", "trace")
        with Vertical():
            yield Label(Text("Loading " + sanitize(Path(str(name)).name or "trace")), markup=False, id="load-title")
            yield ProgressBar(total=None, show_eta=False, show_percentage=False, id="load-bar")
            yield Label(self.stage_text(), markup=False, id="load-stage")

    def on_mount(self) -> None:
        self.worker = self._load()
        self.set_interval(0.25, self._tick)
        if self.preview is not None and self.on_preview is not None:

            def handed(trace: Trace) -> None:  # from the load's thread: post_message is thread-safe
                gaps = None
                if self.preview_gaps is not None:
                    try:
                        gaps = self.preview_gaps(trace)
                    except Exception:  # noqa: BLE001 - the preview is drawn without its gaps then
                        gaps = None
                self.post_message(self.Preview(trace, gaps))

            self.preview(handed)

    def _tick(self) -> None:
        try:
            fraction = self.progress_fn()
        except Exception:  # noqa: BLE001 - a progress figure is never worth a failed load
            fraction = None
        if fraction is not None and not self._seen_fraction:
            self.query_one(ProgressBar).update(total=100)  # from now on the bar has an end
        self._fraction = fraction
        self._seen_fraction = self._seen_fraction or fraction is not None
        if fraction is not None:
            self.query_one(ProgressBar).update(progress=int(100 * fraction))
        self.query_one("#load-stage", Label).update(self.stage_text())

    @work(thread=True, exclusive=True, exit_on_error=False, name="load")
    def _load(self) -> None:
        from gapscope.parsers.errors import TraceFormatError

        worker = get_current_worker()
        source = self.source
        try:
            if isinstance(source, (str, Path)):
                trace = cancellable(self.loader, source, worker)
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
        if not worker.is_cancelled:
            self.post_message(self.Loaded(trace))

    @on(Loaded)
    def _loaded(self, message: Loaded) -> None:
        if self.worker is not None and self.worker.is_cancelled:
            return
        self.loaded = True
        self.on_loaded(message.trace)

    @on(Preview)
    def _preview(self, message: Preview) -> None:
        if self.loaded or self.on_preview is None or (self.worker is not None and self.worker.is_cancelled):
            return
        self.on_preview(message.trace, message.gaps)

    @on(Failed)
    def _failed(self, message: Failed) -> None:
        self.on_failed(message.error)

    def action_cancel_load(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
        self.on_cancel()
