"""The loading screen: the file's name and size, a bar and how far the load is.

The load itself is the app's (a thread worker, ``gapscope.tui.workers.load``), which
posts how far it is (``gapscope.tui.messages.LoadProgress``); the app keeps that as its
reactive ``reading``, and shows each change here: nothing here polls. Escape cancels
the load (``GapscopeApp.action_cancel_load``): its worker is cancelled and its result, if
any, is dropped.
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Label, ProgressBar

from gapscope.tui.lanes_model import sanitize
from gapscope.tui.session import Reading, Session
from gapscope.units import fmt_bytes

__all__ = ["LoadScreen", "stage_text"]


def file_size_text(path: str | os.PathLike) -> str:
    """`` 12.3 MiB`` (`` of gzip`` when it is one): the size of ``path`` on disk;
    empty when it cannot be read."""
    try:
        with open(path, "rb") as fh:
            gz = fh.read(2) == b"\x1f\x8b"
            return " " + fmt_bytes(os.fstat(fh.fileno()).st_size) + (" of gzip" if gz else "")
    except (OSError, ValueError):
        return ""


def stage_text(reading: Reading, size_text: str = "") -> Text:
    """``reading and parsing SIZE… P% Ns  (Escape cancels)``: the file's size
    (``size_text``), the share decoded when the loader says (a big file decoded in
    parts), the seconds since the load began from 1 s on; ``building the trace…``
    once the parts are decoded and the trace is assembled from them."""
    elapsed = f" {reading.elapsed_s} s" if reading.elapsed_s >= 1 else ""
    if reading.share is not None:
        stage = f"reading and parsing{size_text}… {int(100 * reading.share)}%"
    elif reading.seen:
        stage = "building the trace…"
    else:
        stage = f"reading and parsing{size_text}…"
    return Text(f"{stage}{elapsed}  (Escape cancels)")


class LoadScreen(Screen):
    """Shows the load of ``session.path`` (``Session``) as the app's ``reading`` says."""

    BINDINGS = [Binding("escape", "app.cancel_load", "cancel", id="load.cancel")]
    DEFAULT_CSS = """
    LoadScreen { align: center middle; }
    LoadScreen > Vertical { width: 60; height: auto; border: round $primary; padding: 1 2; }
    LoadScreen Label { width: 1fr; }
    """

    def __init__(self, session: Session) -> None:
        super().__init__()
        self.session = session
        self._size_text = file_size_text(session.path) if session.path is not None else ""

    def compose(self) -> ComposeResult:
        name = sanitize(Path(str(self.session.path or "trace")).name or "trace")
        with Vertical():
            yield Label(Text("Loading " + name), markup=False, id="load-title")
            yield ProgressBar(total=None, show_eta=False, show_percentage=False, id="load-bar")
            yield Label(stage_text(Reading(), self._size_text), markup=False, id="load-stage")

    def show_reading(self, reading: Reading) -> None:
        """The bar and the stage line for ``reading`` (the app's, which calls this when
        it changes; the bar has an end once a share was known)."""
        bar = self.query_one(ProgressBar)
        if reading.seen and bar.total is None:
            bar.update(total=100)
        if reading.share is not None:
            bar.update(progress=int(100 * reading.share))
        self.query_one("#load-stage", Label).update(stage_text(reading, self._size_text))
