"""The gapscope Textual app: loading screen, trace screen, help, command palette.

Build it with ``gapscope.tui.factory.make_app`` (one factory for the CLI, tests and benchmarks).
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Iterable

from rich.text import Text
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from gapscope.analysis.types import Cause

from gapscope.tui.bindings import help_key_rows
from gapscope.tui.loading import LoadScreen
from gapscope.tui.screen import TraceScreen

__all__ = ["GapscopeApp", "HelpScreen", "WarningsScreen", "help_text", "warnings_text", "GAP_LETTERS"]


def _key_name(screen: Screen, b: Binding, key: str) -> str:
    """Display of one key of ``b`` (its own key, not the binding's ``key_display``, so
    that aliases such as ``i``/``o`` for zoom show)."""
    return screen.app.get_key_display(dataclasses.replace(b, key=key, key_display=None))


#: First letters drawn in narrow idle gaps (the gap row), by cause class.
GAP_LETTERS = "  ".join(f"{c.label[0].upper()} {c.label}" for c in Cause)


def help_text(screen: Screen) -> Text:
    """Help generated from the screen's live bindings (keymap overrides included): the
    screen's keys with every alias and their long description, then the keys Textual
    adds (focus, copy, ...), then the glyph legend and thresholds."""
    t = Text()
    t.append("gapscope keys", style="bold")
    t.append("   (Escape or q closes this help)\n\n")
    own_ids = {b.id for b in type(screen).BINDINGS if isinstance(b, Binding)}
    rows = help_key_rows(
        screen,
        lambda b: (b.id in own_ids if b.id else False, b.action, b.tooltip or b.description),
        lambda b, key: _key_name(screen, b, key),
    )
    others = []
    for (own, _action, desc), keys in rows.items():
        line = Text(f"{' '.join(dict.fromkeys(keys)):>14}  ", style="bold")
        line.append(desc + "\n")
        if own:
            t.append_text(line)
        else:
            others.append(line)
    if others:
        t.append("\nAlso (Textual):\n", style="dim")
        for line in others:
            t.append_text(line)
    t.append("\nGlyphs: █ kernel  ▓ memcpy  ▒ memset  ~ sync wait  ^ runtime/launch call\n")
    t.append("        = CPU op  - Python  ─ annotation\n")
    t.append("        ▁▂▃…▇ several kernels share a cell (height = busy share)\n")
    t.append("        ▏▎▍▌ / ▐ ▕ a kernel edge inside the cell\n")
    t.append("Idle gaps row: ░ an idle gap with its cause and length (sync 258µs),\n")
    t.append("        or, when narrow, the cause's letter:\n")
    t.append(f"        {GAP_LETTERS}\n")
    t.append("        ╎ a gap narrower than a cell; the detail line names the class.\n")
    params = getattr(getattr(screen, "diagnosis", None), "params", None)
    if params is not None:
        t.append(
            f"Thresholds: gap >= {params.min_gap_ns / 1000:g} µs with no kernel on the device; launch gaps"
            f" <= {params.launch_gap_max_ns / 1000:g} µs in runs of >= {params.picket_min_kernels} kernels"
            f" <= {params.short_kernel_max_ns / 1000:g} µs; sync-signature copy <= {params.small_copy_max_bytes // 1024} KiB.\n"
        )
    t.append("Rare actions: ctrl+p (command palette).\n")
    return t


class HelpScreen(ModalScreen):
    """Key help generated from the bindings of ``owner`` (the trace screen)."""

    BINDINGS = [Binding("escape,q,question_mark", "dismiss", "close", id="help.close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 84; max-width: 100%; height: auto; max-height: 90%; border: round $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, owner: Screen) -> None:
        super().__init__()
        self.owner = owner

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(help_text(self.owner), markup=False)

    def action_dismiss(self) -> None:
        self.app.pop_screen()


def warnings_text(trace) -> Text:
    """The loader's warnings of ``trace``, one per line (``line N: message``), drawn
    literally (control characters made visible, no markup)."""
    from gapscope.tui.lanes_model import sanitize

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
        t.append(sanitize(str(w.message), 400) + "\n")
    return t


class WarningsScreen(ModalScreen):
    """The loader's warnings (``Trace.warnings``) in a scrollable list."""

    BINDINGS = [Binding("escape,q,w", "dismiss", "close", id="warnings.close")]
    DEFAULT_CSS = """
    WarningsScreen { align: center middle; }
    WarningsScreen > VerticalScroll { width: 100; max-width: 100%; height: auto; max-height: 90%; border: round $warning; background: $surface; padding: 0 1; }
    """

    def __init__(self, trace) -> None:
        super().__init__()
        self.trace = trace

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(warnings_text(self.trace), markup=False, id="warnings-text")

    def action_dismiss(self) -> None:
        self.app.pop_screen()


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
        on_ready: Callable[["GapscopeApp", TraceScreen], None] | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.loader = loader
        self.diagnose_fn = diagnose
        self.preset_diagnosis = diagnosis
        self.extra_screens = dict(extra_screens or {})
        self.on_ready = on_ready
        self.error: str | None = None
        self.cancelled = False
        self.trace_screen: TraceScreen | None = None

    def on_mount(self) -> None:
        for name, factory in self.extra_screens.items():
            self.install_screen(factory, name)
        if self.preset_diagnosis is not None and not isinstance(self.source, (str, bytes)) and hasattr(self.source, "start_ns"):
            self.show_trace(self.source, self.preset_diagnosis, None)
        else:
            self.push_screen(LoadScreen(self.source, self.loader, self.diagnose_fn))

    # called by the load screen (on the event loop, from its message handlers)
    def show_trace(self, trace, diagnosis, error: str | None) -> None:
        """Replace the loading screen with the trace screen."""
        screen = TraceScreen(trace, diagnosis, error)
        self.trace_screen = screen
        if isinstance(self.screen, LoadScreen):
            self.switch_screen(screen)
        else:
            self.push_screen(screen)
        if self.on_ready is not None:
            self.call_after_refresh(self.on_ready, self, screen)

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
            yield SystemCommand("Gap order: largest first / time", "Toggle the order of next/previous gap", screen.action_toggle_order)
            yield SystemCommand("Collapse all groups", "Show only process and device headers", lambda: screen.set_all_groups(True))
            yield SystemCommand("Expand all groups", "Show every lane", lambda: screen.set_all_groups(False))
            yield SystemCommand("Fit all", "Show the whole trace", screen.action_fit)
            yield SystemCommand("Next sync gap", "Jump to the next gap caused by a sync", lambda: screen.action_jump_class(0))
            yield SystemCommand("Next copy gap", "Jump to the next gap caused by a copy", lambda: screen.action_jump_class(1))
            yield SystemCommand("Next launch gap", "Jump to the next launch-overhead gap", lambda: screen.action_jump_class(2))
            yield SystemCommand("Next host gap", "Jump to the next host-bound gap", lambda: screen.action_jump_class(3))
