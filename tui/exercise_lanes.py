"""Swimlanes for exercises: the viewer's widget with the cause classes of the gap row
hidden until the learner has classified them (otherwise the timeline gives the answer
away). Composes ``tui.swimlanes.Swimlanes`` by subclassing; the viewer's file is not
changed. Hook wanted there: a ``show_causes`` flag (see the exercise report)."""

from __future__ import annotations

import numpy as np

from analysis.types import Cause

from .swimlanes import Swimlanes

__all__ = ["ExerciseLanes"]

_HIDDEN = Cause.UNCLASSIFIED


class _NeutralGaps:
    """A view of ``Gaps`` whose ``cause`` is all ``UNCLASSIFIED``."""

    def __init__(self, gaps) -> None:
        self._gaps = gaps
        self.cause = np.full(len(gaps), int(_HIDDEN), dtype=np.int8)

    def __getattr__(self, name):
        return getattr(self._gaps, name)

    def __len__(self) -> int:
        return len(self._gaps)


class ExerciseLanes(Swimlanes):
    """``Swimlanes`` with ``reveal_causes`` (bool, default False): when False the gap
    row shows every gap as plain idle time, labelled ``idle <duration>``."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.reveal_causes = False
        self._neutral = _NeutralGaps(self.gaps) if self.gaps is not None else None

    def set_reveal(self, reveal: bool) -> None:
        if reveal != self.reveal_causes:
            self.reveal_causes = reveal
            self.invalidate()

    def _draw_gaps(self, device, vp, chars, styles, *, label: bool) -> None:
        if self.reveal_causes or self._neutral is None:
            return super()._draw_gaps(device, vp, chars, styles, label=label)
        real = self.gaps
        self.gaps = self._neutral
        try:
            super()._draw_gaps(device, vp, chars, styles, label=label)
        finally:
            self.gaps = real
        if not label:
            return
        word = _HIDDEN.label
        line = "".join(chars)
        k = line.find(word)
        while k >= 0:
            end = line.find("░", k)
            end = len(line) if end < 0 else end
            new = "idle" + line[k + len(word):end]
            pad = end - k - len(new)
            chars[k:end] = list("░" * (pad // 2) + new + "░" * (pad - pad // 2))
            line = "".join(chars)
            k = line.find(word, k + 1)
        for c, ch in enumerate(chars):
            if ch == word[0].upper() and 0 < c < len(chars) - 1 and chars[c - 1] == "░" and chars[c + 1] == "░":
                chars[c] = "░"
