"""Key help of the exercise screen and the one-line "how to answer" of each task, both
generated from the screen's live bindings (keymap overrides included), like the
viewer's help (``gapscope.tui.help.help_text``)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from gapscope.tui.bindings import help_key_rows

__all__ = ["ExerciseHelpScreen", "exercise_help_text", "how_to_answer", "keys_of"]

_NAMES = {"enter": "Enter", "escape": "Esc", "up": "↑", "down": "↓", "tab": "Tab"}


def keys_of(screen: Screen, binding_id: str) -> list[str]:
    """Displays of the keys bound to ``binding_id`` on ``screen`` (its live
    ``BindingsMap``, so a keymap override shows), in binding order; [] when unbound."""
    out: list[str] = []
    for key, b in screen._bindings:
        if b.id == binding_id:
            out.append(_NAMES.get(key) or screen.app.get_key_display(b))
    return list(dict.fromkeys(out))


def _first(screen: Screen, binding_id: str, default: str) -> str:
    keys = keys_of(screen, binding_id)
    return keys[0] if keys else default


def how_to_answer(screen: Screen, mode: str, *, n_options: int = 0, unit: str = "", free_text: bool = False) -> str:
    """One line saying how to answer in ``mode`` (``pick``, ``options``, ``number``;
    anything else: ""). ``n_options``: options shown; ``unit``: the number's unit;
    ``free_text``: a card's text field rather than a number."""
    if mode == "pick":
        nxt, prv = _first(screen, "gap.next", "n"), _first(screen, "gap.prev", "N")
        pick = _first(screen, "exercise.pick", "Enter")
        return f"Pick: move with {nxt}/{prv}, confirm with {pick}"
    if mode == "options":
        digits = [k for k in range(1, 10) if keys_of(screen, f"exercise.choose{k}")][:n_options]
        direct = f"{digits[0]}–{digits[-1]}" if len(digits) > 1 else (f"{digits[0]}" if digits else "")
        return f"Choose: ↑/↓ or {direct}, Enter" if direct else "Choose: ↑/↓, Enter"
    if mode == "number":
        if free_text:
            return "Type your answer in a few words, Enter"
        return f"Type a number with its unit ({unit}), Enter" if unit else "Type a number with its unit, Enter"
    return ""


def exercise_help_text(screen: Screen) -> Text:
    """Help for ``screen`` (an ``ExerciseScreen``): how to answer each kind of task,
    then every key with a description bound on the screen or the app, grouped by
    description (digits 1-9 as one row)."""
    t = Text()
    t.append("Exercise keys\n\n", style="bold")
    how = getattr(screen, "how_to_answer", None)
    line = how() if callable(how) else ""
    if line:
        t.append("This task:  ", style="bold")
        t.append(line + "\n\n")
    t.append("Answering\n", style="bold underline")
    t.append(how_to_answer(screen, "pick") + "\n")
    t.append(how_to_answer(screen, "options", n_options=9) + "\n")
    t.append(how_to_answer(screen, "number") + "\n")
    t.append("Card: the fields are asked one by one; a wrong card asks the wrong fields again.\n")
    t.append("Tab / shift+Tab move between the timeline, the note and the answer.\n\n")
    t.append("Keys\n", style="bold underline")
    rows = help_key_rows(
        screen,
        lambda b: b.description,
        lambda b, key: _NAMES.get(key) or screen.app.get_key_display(b),
        keep=lambda active: active.node in (screen, screen.app),
    )
    for desc, keys in rows.items():
        keys = list(dict.fromkeys(keys))
        if len(keys) >= 2 and all(k.isdigit() for k in keys):
            shown = f"{keys[0]}–{keys[-1]}"
        else:
            shown = " ".join(keys)
        t.append(f"{shown:>14}  ", style="bold")
        t.append(desc + "\n")
    t.append("\nThe gap row draws every gap as plain idle (░) until you classified it.\n")
    session = getattr(screen, "session", None)
    if session is not None:  # where progress is kept, and how to start over
        t.append(
            f"Progress is saved after every answer and hint in {session.store.path}; "
            f"start over with: gapscope exercise --reset {session.exercise.id}\n"
        )
    t.append("Escape, q or ? closes this help.\n")
    return t


class ExerciseHelpScreen(ModalScreen):
    """Key help over the exercise screen ``owner``; Escape, q or ? closes it."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "close", "close", id="help.close")]
    DEFAULT_CSS = """
    ExerciseHelpScreen { align: center middle; }
    ExerciseHelpScreen > VerticalScroll { width: 84; max-width: 100%; height: auto; max-height: 90%; border: round $primary; background: $surface; padding: 0 1; }
    """

    def __init__(self, owner: Screen) -> None:
        super().__init__()
        self.owner = owner

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="exercise-help"):
            yield Static(exercise_help_text(self.owner), id="exercise-help-text", markup=False)

    def action_close(self) -> None:
        self.app.pop_screen()
