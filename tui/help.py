"""The trace screen's key help, generated from its live bindings (keymap overrides
included), with the glyph legend and the diagnosis thresholds; shown over the trace
screen by ``?``."""

from __future__ import annotations

import dataclasses

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from gapscope.analysis.types import Cause
from gapscope.tui.bindings import help_key_rows

__all__ = ["HelpScreen", "help_text", "GAP_LETTERS"]


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
    t.append("Idle gaps row: ░ an idle gap with its cause and length (sync 0.258 ms),\n")
    t.append("        or, when narrow, the cause's letter:\n")
    t.append(f"        {GAP_LETTERS}\n")
    t.append("        ╎ a gap narrower than a cell; the detail line names the class.\n")
    t.append("        Before the causes come: idle 0.258 ms, or I when narrow.\n")
    t.append("Streams: when the lanes do not all fit, GPU streams with nothing in view are\n")
    t.append("        folded away; the device's header counts them (GPU 0 +9 folded).\n")
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

    BINDINGS = [Binding("escape,q,question_mark", "close", "close", id="help.close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 84; max-width: 100%; height: auto; max-height: 90%; border: round $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, owner: Screen) -> None:
        super().__init__()
        self.owner = owner

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            # the keys may not all fit: say how to see the rest (a newcomer missed half)
            box.border_subtitle = "↓/PgDn more · q closes"
            yield Static(help_text(self.owner), markup=False)

    def action_close(self) -> None:
        self.app.pop_screen()
