"""The trace screen's key bindings (ids such as ``gap.next``, remappable through the
app's keymap) and their short footer labels. Shared with the exercise screen through
``trace_bindings(ids)`` so that the keys stay the same everywhere."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from textual.binding import Binding

from gapscope.analysis.causes import CAUSES

__all__ = ["trace_bindings", "FOOTER_LABELS", "footer_binding", "help_key_rows"]


def trace_bindings(ids: set[str] | None = None) -> list[Binding]:
    """The trace screen's key bindings (fresh ``Binding`` objects, ids such as
    ``gap.next``, ``view.zoom_in``), or only those whose id is in ``ids``, in the same
    order. Other screens (the exercise screen) build their bindings from these so
    that the keys stay the same everywhere."""
    return [b for b in _bindings() if ids is None or b.id in ids]


def _bindings() -> list[Binding]:
    B = Binding
    return [
        B("n,right_square_bracket", "jump_gap(1)", "next gap", id="gap.next"),
        B("N,left_square_bracket", "jump_gap(-1)", "prev gap", id="gap.prev"),
        B("s", "toggle_order", "largest/time", id="gap.order"),
        # the keys per cause class, from the table of causes
        *(
            B(i.key, f"jump_class({int(c)})", f"next {i.label} gap (wraps)", show=False, id=f"gap.{i.label}")
            for c, i in CAUSES.items()
            if i.key
        ),
        *(
            B(i.prev_key, f"jump_class({int(c)},-1)", f"prev {i.label} gap", show=False, id=f"gap.{i.label}_prev")
            for c, i in CAUSES.items()
            if i.prev_key
        ),
        B("plus,i,equals_sign", "zoom(2.0)", "zoom in", key_display="+", id="view.zoom_in"),
        B("minus,o", "zoom(0.5)", "zoom out", key_display="-", show=False, id="view.zoom_out"),
        B("z", "zoom_selected", "zoom to gap", show=False, id="view.zoom_gap"),
        B("Z", "zoom_step", "zoom to step", show=False, id="view.zoom_step"),
        B("h,left", "pan(-0.2)", "pan left", show=False, id="view.pan_left"),
        B("l,right", "pan(0.2)", "pan right", show=False, id="view.pan_right"),
        B("H,shift+left", "pan(-1.0)", "page left", show=False, id="view.page_left"),
        B("L,shift+right", "pan(1.0)", "page right", show=False, id="view.page_right"),
        B("comma", "cursor(-1)", "cursor left", show=False, id="view.cursor_left"),
        B("full_stop", "cursor(1)", "cursor right", show=False, id="view.cursor_right"),
        B("j,down", "row(1)", "lane down", show=False, id="view.down"),
        B("k,up", "row(-1)", "lane up", show=False, id="view.up"),
        B("enter,space", "toggle_group", "collapse/expand group", show=False, id="view.collapse"),
        B("0", "fit", "fit all", show=False, id="view.fit"),
        B(
            "f",
            "toggle_findings",
            "findings: choose one (j/k, Enter walks its gaps), again: the card",
            show=False,
            id="findings.toggle",
        ),
        B("g", "prompt('goto')", "go to time or gap #N", show=False, id="view.goto"),
        B("slash", "prompt('search')", "search", key_display="/", id="search.start"),
        B("m", "match(1)", "next match", show=False, id="search.next"),
        B("M", "match(-1)", "prev match", show=False, id="search.prev"),
        B("percent_sign,J", "jump_flow", "kernel↔launch", show=False, id="flow.jump"),
        B("p", "toggle_panel", "card panel", id="panel.toggle"),
        B("pagedown,ctrl+d", "panel_scroll(1)", "card page down", show=False, id="panel.page_down"),
        B("pageup,ctrl+u", "panel_scroll(-1)", "card page up", show=False, id="panel.page_up"),
        B("x", "what_if_mark", "what-if: mark the gap's evidence", show=False, id="whatif.mark"),
        B("X", "what_if_clear", "what-if: clear the marks", show=False, id="whatif.clear"),
        B("w", "warnings", "loader warnings", show=False, id="app.warnings"),
        B("question_mark", "help", "help", key_display="?", id="app.help"),
        B("q", "app.quit", "quit", id="app.quit"),
    ]


#: Footer labels of the trace screen (binding id → (key shown, short label)): short
#: enough that every core key fits 80 columns; the help keeps the long description.
FOOTER_LABELS = {
    "gap.next": ("n", "next"),
    "gap.prev": ("N", "prev"),
    "gap.order": ("s", "order"),
    "view.zoom_in": ("+/-", "zoom"),
    "search.start": ("/", "find"),
    "panel.toggle": ("p", "card"),
    "app.help": ("?", "help"),
    "app.quit": ("q", "quit"),
}


def footer_binding(b: Binding) -> Binding:
    """``b`` with its footer label (``FOOTER_LABELS``); the long description moves to
    ``tooltip``, which the help screen shows."""
    if b.id not in FOOTER_LABELS:
        return b
    key, label = FOOTER_LABELS[b.id]
    return dataclasses.replace(b, description=label, key_display=key, tooltip=b.description)


def help_key_rows(
    screen,
    group: Callable[[Binding], Any],
    key_name: Callable[[Binding, str], str],
    keep: Callable[[Any], bool] = lambda active: True,
) -> dict[Any, list[str]]:
    """The rows of a key help: ``screen.active_bindings`` (the live map, keymap
    overrides included) without bindings lacking a description or marked ``system``
    or refused by ``keep(active_binding)``, grouped by ``group(binding)`` in binding
    order; each row lists ``key_name(binding, key)`` of its keys (duplicates kept)."""
    rows: dict[Any, list[str]] = {}
    for key, active in screen.active_bindings.items():
        b: Binding = active.binding
        if not b.description or b.system or not keep(active):
            continue
        rows.setdefault(group(b), []).append(key_name(b, key))
    return rows
