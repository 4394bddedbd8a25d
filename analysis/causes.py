"""The one table of cause classes ("Cards as facts and rules" in the design): for each
``Cause``, its label (the word every surface prints and the key of every JSON mapping
by class), the card's smell, its colour on a dark background (foreground and gap-cell
background, hex), a one-line blurb, its column priority in the rank table, and
whether the what-if may remove its named CPU work. The viewer's styles, the report's
styles, the rank table's columns and the exercise's options are derived from it, so a
class looks the same everywhere and a new class is one row here.
"""

from __future__ import annotations

import dataclasses

from gapscope.analysis.types import Cause

__all__ = ["CauseInfo", "CAUSES", "CAUSE_LABELS"]


@dataclasses.dataclass(frozen=True)
class CauseInfo:
    """One row of ``CAUSES``. ``colour``/``background``: ``#rrggbb``; ``rank_priority``:
    the rank table drops columns of higher priority first when narrow (lower stays);
    ``removable``: the what-if may remove its named CPU work; ``key`` / ``prev_key``:
    the viewer's keys (Textual key names) to the next / previous gap of the class, or
    "" for none."""

    cause: Cause
    smell: str
    colour: str
    background: str
    blurb: str
    rank_priority: int
    removable: bool
    key: str = ""
    prev_key: str = ""

    @property
    def label(self) -> str:
        """The class's word, as every surface prints it (``Cause.label``)."""
        return self.cause.label


#: The cause classes, in ``Cause`` order.
CAUSES: dict[Cause, CauseInfo] = {
    c.cause: c
    for c in (
        CauseInfo(
            Cause.SYNC,
            "sync cliff",
            "#ff6060",
            "#3a1414",
            "the CPU waited on the GPU (.item(), synchronize, print of a tensor)",
            11,
            True,
            "1",
            "exclamation_mark",
        ),
        CauseInfo(
            Cause.COPY,
            "copy on the path",
            "#e0b050",
            "#3a2c10",
            "a host/device transfer on the critical path",
            12,
            True,
            "2",
            "at",
        ),
        CauseInfo(
            Cause.LAUNCH,
            "launch-bound gap",
            "#b080ff",
            "#281a40",
            "many tiny kernels, the CPU cannot launch them fast enough",
            9,
            True,
            "3",
            "number_sign",
        ),
        CauseInfo(
            Cause.HOST,
            "host island",
            "#70d070",
            "#143014",
            "the launching thread was busy with Python/CPU work",
            8,
            True,
            "4",
            "dollar_sign",
        ),
        CauseInfo(
            Cause.UNCLASSIFIED,
            "unexplained white space",
            "#a0a0a0",
            "#262626",
            "no evidence either way",
            13,
            False,
        ),
        CauseInfo(
            Cause.DEPENDENCY,
            "queued, waiting on the GPU side",
            "#50b8d8",
            "#10283a",
            "the next kernel was already queued and waited on the GPU side",
            10,
            False,
            "5",
        ),
    )
}
assert list(CAUSES) == list(Cause), "CAUSES must hold every Cause, in order"

#: The labels of the classes, in ``Cause`` order (the answers a classify task accepts).
CAUSE_LABELS: tuple[str, ...] = tuple(info.label for info in CAUSES.values())
