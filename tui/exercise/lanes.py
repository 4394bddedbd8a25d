"""Swimlanes for exercises: the viewer's widget with the cause classes of the gap row
hidden until the learner has classified them (otherwise the timeline gives the answer
away). Subclasses ``gapscope.tui.swimlanes.Swimlanes`` through public surface only (its ``gaps``
attribute and the Line API ``render_line``); the viewer's file is not changed. A
``show_causes`` flag in the viewer would replace this (see the exercise report)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
from rich.segment import Segment
from textual.strip import Strip

from gapscope.analysis.types import Cause, Gaps
from gapscope.tui.swimlanes import Swimlanes

__all__ = ["ExerciseLanes"]

_HIDDEN = Cause.UNCLASSIFIED
_WORD = _HIDDEN.label  # "unclassified": 12 cells
_LABEL = re.compile(_WORD + r" (\S+ (?:ns|µs|ms|s))")  # "unclassified 0.460 ms" -> "░░░░idle 0.460 ms░░░░"
_LETTER = "░" + _HIDDEN.label[0].upper() + "░"


class ExerciseLanes(Swimlanes):
    """``Swimlanes`` with ``reveal_causes`` (bool, default False): when False every gap
    is drawn as plain idle time (one neutral colour, labelled ``idle``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.reveal_causes = True
        self._real_gaps: Gaps | None = self.gaps
        # the same gaps with every cause UNCLASSIFIED
        self._neutral: Gaps | None = (
            None
            if self.gaps is None
            else dataclasses.replace(self.gaps, cause=np.full(len(self.gaps), int(_HIDDEN), dtype=np.int8))
        )
        self.set_reveal(False)

    def set_reveal(self, reveal: bool) -> None:
        """Show (True) or hide (False) the cause classes of the gaps."""
        if reveal == self.reveal_causes:
            return
        self.reveal_causes = reveal
        self.gaps = self._real_gaps if reveal or self._neutral is None else self._neutral
        if self.is_mounted:
            self.invalidate()

    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        if self.reveal_causes:
            return strip
        segs = list(strip)
        if not any(_WORD in s.text or _LETTER in s.text for s in segs):
            return strip
        out = [
            Segment(
                _LABEL.sub(r"░░░░idle \1░░░░", s.text).replace(_WORD, "░░░░idle░░░░").replace(_LETTER, "░░░"),
                s.style,
                s.control,
            )
            for s in segs
        ]
        return Strip(out, strip.cell_length)
