"""The loader's warnings (input it skipped or repaired) listed in a modal screen over
the trace screen, shown by ``w``."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gapscope.parsers.model import Trace
from gapscope.report.fmt import warning_message
from gapscope.tui.lanes_model import sanitize

__all__ = ["WarningsScreen", "warnings_text"]


def warnings_text(trace: Trace) -> Text:
    """The loader's warnings of ``trace``, one per line (``line N: message``), drawn
    literally (control characters made visible, no markup); long quoted names are
    elided in their middle so that the finding after them shows (``warning_message``)."""
    ws = trace.warnings
    t = Text()
    t.append(f"{len(ws)} loader warning" + ("" if len(ws) == 1 else "s"), style="bold")
    t.append("   (Escape, q or w closes)\n")
    t.append("Input the loader skipped or repaired; the figures exclude what was skipped.\n\n", style="dim")
    for w in ws:
        where = f"line {w.line}" if w.line is not None else "—"
        t.append(f"{where:>12}  ", style="bold")
        if w.field:
            t.append(f"[{sanitize(str(w.field), 40)}] ")
        t.append(sanitize(warning_message(str(w.message)), 400) + "\n")
    return t


class WarningsScreen(ModalScreen):
    """The loader's warnings (``Trace.warnings``) in a scrollable list."""

    BINDINGS = [Binding("escape,q,w", "close", "close", id="warnings.close")]
    DEFAULT_CSS = """
    WarningsScreen { align: center middle; }
    WarningsScreen > VerticalScroll { width: 100; max-width: 100%; height: auto; max-height: 90%; border: round $warning; background: $surface; padding: 0 1; }
    """

    def __init__(self, trace: Trace) -> None:
        super().__init__()
        self.trace = trace

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(warnings_text(self.trace), markup=False, id="warnings-text")

    def action_close(self) -> None:
        self.app.pop_screen()
