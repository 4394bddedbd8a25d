"""Small Rich helpers shared by the report renderers: untrusted strings as ``Text``,
cause labels with their colour, section headings, the report's ``Console``.

Every string from a trace goes through ``safe_text``/``name_text``: made terminal-safe
by ``safe_name`` and wrapped in ``rich.text.Text``, never parsed as markup.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from gapscope.analysis.causes import CAUSES
from gapscope.report.fmt import safe_name, short_name

__all__ = ["CAUSE_STYLE", "safe_text", "name_text", "cause_text", "heading", "make_console"]

#: Styles of the cause classes (colour only; the label is always printed).
#: Each class in its colour from the table of causes (``gapscope.analysis.causes``),
#: as the viewer draws it.
CAUSE_STYLE = {info.label: info.colour for info in CAUSES.values()}


def safe_text(s: Any, max_len: int | None = None, style: str = "") -> Text:
    """A ``Text`` of an untrusted string (made terminal-safe, never markup)."""
    return Text(safe_name("" if s is None else str(s), max_len), style=style)


def name_text(s: Any, max_len: int) -> Text:
    """A ``Text`` of a kernel/op name, shortened only when it does not fit."""
    return Text(short_name("" if s is None else str(s), max_len))


def cause_text(label: str | None, share: float | None = None) -> Text:
    if not label:
        return Text("-")
    t = Text(label, style=CAUSE_STYLE.get(label, ""))
    if share is not None:
        t.append(f" {100.0 * share:.0f}%")
    return t


def heading(console: Console, title: str) -> None:
    console.print()
    console.print(Text(title, style="bold underline"))


def make_console(file, *, width: int | None, color: bool) -> Console:
    """A Rich console for the report: no markup/emoji/highlighting of data, colour only
    when ``color``; ``width`` None lets Rich measure the terminal."""
    return Console(
        file=file,
        width=width,
        no_color=not color,
        color_system="auto" if color else None,
        force_terminal=True if color else None,
        markup=False,
        emoji=False,
        highlight=False,
        soft_wrap=False,
    )
