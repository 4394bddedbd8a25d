"""Next/previous gap on the exercise screen, as plain state and pure functions (no
Textual; the screen's actions call them).

``TimelinePosition`` is where the learner is on the timeline: the selected gap, the
cursor and the gap holding the cursor. Its ``current`` gap is the one the status line
names ("Gap 1 of 3") and Enter picks; ``next_gap`` is where ``n``/``N`` go from
there in time order or largest first (``gapscope.tui.navigation.GapNavigator``).
"""

from __future__ import annotations

import dataclasses

from gapscope.tui.navigation import SIZE, TIME, GapNavigator

__all__ = ["TimelinePosition", "next_gap", "other_order", "order_note"]


@dataclasses.dataclass(frozen=True, slots=True)
class TimelinePosition:
    """Where the learner is: ``selected_gap`` (gap index or None), ``cursor_ns``
    (absolute ns), ``cursor_gap`` (the gap of the task's device holding the cursor,
    gap index or None)."""

    selected_gap: int | None
    cursor_ns: int
    cursor_gap: int | None

    @property
    def current(self) -> int | None:
        """The selected gap, else the one holding the cursor (gap index or None)."""
        return self.selected_gap if self.selected_gap is not None else self.cursor_gap


def next_gap(nav: GapNavigator, at: TimelinePosition, direction: int, order_mode: str) -> int | None:
    """The gap ``direction`` (+1 next, -1 previous) steps to in ``order_mode``
    (``TIME`` or ``SIZE``), or None past the last (first) one.

    In time order it steps from ``at.current``, so the first ``n`` moves past the gap
    the cursor is in instead of selecting it in place; largest first it steps from the
    selected gap only (none: the largest, or the smallest going back). Without a gap
    to step from, time order starts at the cursor."""
    current = at.current if order_mode == TIME else at.selected_gap
    return nav.step(current, direction, order_mode, from_ns=at.cursor_ns)


def other_order(order_mode: str) -> str:
    """``SIZE`` for ``TIME`` and ``TIME`` for ``SIZE`` (the ``s`` key)."""
    return SIZE if order_mode == TIME else TIME


def order_note(order_mode: str) -> str:
    """The note shown when the order changes: ``gap order: largest first`` or ``gap order: time``."""
    return f"gap order: {'largest first' if order_mode == SIZE else 'time'}"
