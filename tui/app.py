"""The gapscope Textual app: loading screen, trace screen, help, command palette.

Build it with ``tui.factory.make_app`` (one factory for the CLI, tests and benchmarks).
"""

from __future__ import annotations

from typing import Callable, Iterable

from rich.text import Text
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from .loading import LoadScreen
from .screen import TraceScreen

__all__ = ["GapscopeApp", "HelpScreen", "help_text"]


def help_text(screen: Screen) -> Text:
    """Help generated from the screen's live bindings (keymap overrides included)."""
    t = Text()
    t.append("gapscope keys\n\n", style="bold")
    seen: set[tuple[str, str]] = set()
    rows: dict[str, list[str]] = {}
    order: list[str] = []
    for key, active in screen.active_bindings.items():
        b = active.binding
        if not b.description or b.system:
            continue
        k = (b.action, b.description)
        if k not in rows:
            rows[k] = []
            order.append(k)
        rows[k].append(screen.app.get_key_display(b))
    for k in order:
        action, desc = k
        if (action, desc) in seen:
            continue
        seen.add((action, desc))
        keys = " ".join(dict.fromkeys(rows[k]))
        t.append(f"{keys:>14}  ", style="bold")
        t.append(desc + "\n")
    t.append("\nGlyphs: █ kernel  ▓ memcpy  ▒ memset  ~ sync wait  ^ runtime/launch call\n")
    t.append("        = CPU op  - Python  ─ annotation  ░ idle gap (colour = cause)\n")
    t.append("        ▁▂▃…▇ several kernels share a cell (height = busy share)\n")
    t.append("        ▏▎▍▌ / ▐ ▕ a kernel edge inside the cell\n")
    params = getattr(getattr(screen, "diagnosis", None), "params", None)
    if params is not None:
        t.append(
            f"Thresholds: gap >= {params.min_gap_ns / 1000:g} µs with no kernel on the device; launch gaps"
            f" <= {params.launch_gap_max_ns / 1000:g} µs in runs of >= {params.picket_min_kernels} kernels"
            f" <= {params.short_kernel_max_ns / 1000:g} µs; sync-signature copy <= {params.small_copy_max_bytes // 1024} KiB.\n"
        )
    t.append("Rare actions: ctrl+p (command palette).  Escape or q closes this help.\n")
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


class GapscopeApp(App):
    """The viewer. Construct through ``tui.factory.make_app``.

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
