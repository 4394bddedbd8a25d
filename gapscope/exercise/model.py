"""The exercise file model: what ``load_exercise`` returns (plain frozen dataclasses).

The file format (TOML) is documented in ``docs/exercises.md``. Nothing here imports a
UI library or the diagnosis; judging lives in ``gapscope.exercise.judge``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

__all__ = [
    "ExerciseError",
    "TraceRef",
    "PairRef",
    "Constraint",
    "Option",
    "GapSelector",
    "NumberKey",
    "Projection",
    "Assumption",
    "CardField",
    "Task",
    "Exercise",
    "TASK_KINDS",
    "QUANTITIES",
    "CARD_FIELDS",
    "PROTOCOL",
    "DIFF_STATUSES",
]

#: Task kinds a file may use.
TASK_KINDS = ("pick_gap", "cause", "choice", "number", "card")

#: Numeric quantities the engine computes from a trace (name -> natural unit).
#: Definitions: "Budget and what-if" in docs/definitions.md.
QUANTITIES = {
    "wall": "ms",  # step wall time (one step; mean over steps when several)
    "gpu_busy": "ms",  # union of kernel intervals inside the step
    "idle": "ms",  # wall - gpu_busy
    "idle_share": "%",  # idle / wall
    "tokens_per_s": "tokens/s",  # 1 token per step / wall
    "projected_step": "ms",  # wall - removed idle time (see Projection)
    "projected_tokens_per_s": "tokens/s",  # 1 / projected_step
    "gap": "ms",  # length of the gap named by ``gap``
}

#: What ``gapscope diff`` says became of an idle position (``gapscope.diff.match``);
#: an option of a task on a pair may claim one of them.
DIFF_STATUSES = ("died", "shrank", "grew", "appeared", "unchanged")

#: Card fields, in the order of the card in docs/definitions.md ("The card").
CARD_FIELDS = ("smell", "cause", "why", "experiment", "forbidden")

#: The six-step protocol (docs/definitions.md, "The six-step protocol"), 1-based.
PROTOCOL = (
    "Capture",
    "Look before you guess",
    "Rank the white space",
    "Classify",
    "Predict and test",
    "Re-measure",
)


class ExerciseError(Exception):
    """An exercise file is invalid. ``str()`` is one line in the form of
    ``gapscope.parsers.errors.TraceFormatError``: ``PATH[:LINE[:COL]]: [task 'id': ]message``
    (line and column 1-based, when known)."""

    def __init__(
        self, path: str, message: str, *, line: int | None = None, task: str | None = None, column: int | None = None
    ) -> None:
        self.path = str(path)
        self.message = message
        self.line = line
        self.column = column
        self.task = task
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = (
            self.path
            + (f":{self.line}" if self.line else "")
            + (f":{self.column}" if self.line and self.column else "")
        )
        who = f" task {self.task!r}:" if self.task else ""
        return f"{where}:{who} {self.message}"


@dataclasses.dataclass(frozen=True)
class TraceRef:
    """A trace of the exercise: ``id`` and the resolved file ``path``."""

    id: str
    path: Path
    label: str = ""


@dataclasses.dataclass(frozen=True)
class PairRef:
    """Two traces of the exercise compared as BEFORE and AFTER (``gapscope diff``):
    ``before`` and ``after`` are trace ids."""

    id: str
    before: str
    after: str
    label: str = ""


@dataclasses.dataclass(frozen=True)
class Constraint:
    """A rule answers must respect. ``forbidden_keywords`` are matched (case-insensitive)
    in free-text answers; choice options name the constraints they break in ``violates``."""

    id: str
    text: str
    forbidden_keywords: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Option:
    """One option of a multiple-choice question (choice task or card field). On a task
    with a ``pair``, ``position`` and ``status`` state what the option claims the diff
    says ("``attention → matmul`` died"); ``--check`` verifies it."""

    text: str
    correct: bool = False
    explain: str = ""
    violates: tuple[str, ...] = ()
    position: str = ""  # on a pair's task: an idle position (its label in gapscope diff) …
    status: str = ""  # … and what the option claims became of it (DIFF_STATUSES)


@dataclasses.dataclass(frozen=True)
class GapSelector:
    """Names one idle gap of a trace's diagnosis.

    Exactly one of: ``rank`` (1 = largest, ties by start), or ``start_ms`` and
    ``end_ms`` (matched within ``tol_ms``), or ``contains_ms`` (the gap containing that
    time). ``expect_start_ms``/``expect_end_ms`` (with a rank) are what the author
    believes the gap is; ``--check`` verifies them. Times are relative to the trace's
    first event, in milliseconds.
    """

    rank: int | None = None
    start_ms: float | None = None
    end_ms: float | None = None
    contains_ms: float | None = None
    expect_start_ms: float | None = None
    expect_end_ms: float | None = None
    tol_ms: float = 0.001

    def describe(self) -> str:
        if self.rank is not None:
            return "the largest gap" if self.rank == 1 else f"gap of rank {self.rank} by size"
        if self.contains_ms is not None:
            return f"the gap containing {self.contains_ms:g} ms"
        return f"the gap {self.start_ms:g}-{self.end_ms:g} ms"


@dataclasses.dataclass(frozen=True)
class Projection:
    """What-if for projected quantities: remove whole gaps and the idle time covered by
    named CPU events; ``assumptions`` are printed with the result. ``label`` names this
    reading of the assumptions (``"whole gaps removed"``); ``readings``: the other
    defensible readings of the same prompt (``"named ranges removed"``, what the
    viewer's ``x`` and ``report --what-if`` give), each a ``Projection``: an answer
    matching any of them is right, and the verdict says which one it matches."""

    remove_gaps: tuple[GapSelector, ...] = ()
    remove_events: tuple[str, ...] = ()
    assumptions: tuple[str, ...] = ()
    label: str = ""
    readings: tuple[Projection, ...] = ()

    @property
    def all_readings(self) -> tuple[Projection, ...]:
        """This reading, then the others."""
        return (self, *self.readings)


@dataclasses.dataclass(frozen=True)
class Assumption:
    """A number stated in the prompt as an assumption (e.g. "GPU work stays 0.322 ms");
    ``--check`` warns when the trace says otherwise."""

    quantity: str
    value: float
    unit: str
    text: str = ""


@dataclasses.dataclass(frozen=True)
class NumberKey:
    """Answer key of a number task: ``value`` in ``unit`` within ``tolerance`` (same
    unit) or ``tolerance_pct`` (percent of the value)."""

    value: float
    unit: str
    tolerance: float | None = None
    tolerance_pct: float | None = None

    def tolerance_abs(self) -> float:
        if self.tolerance is not None:
            return float(self.tolerance)
        return abs(self.value) * float(self.tolerance_pct or 0.0) / 100.0


@dataclasses.dataclass(frozen=True)
class CardField:
    """One field of a card task: either ``options`` (multiple choice) or ``keywords``
    (free text; every group must match at least one of its words). For ``cause`` the
    key is the task's ``cause``."""

    name: str
    prompt: str = ""
    options: tuple[Option, ...] = ()
    keywords: tuple[tuple[str, ...], ...] = ()
    example: str = ""


@dataclasses.dataclass(frozen=True)
class Task:
    """One step of an exercise. Fields used depend on ``kind`` (see ``TASK_KINDS``)."""

    id: str
    kind: str
    prompt: str
    line: int | None = None
    trace: str = ""
    protocol_step: int = 0
    hints: tuple[str, ...] = ()
    gap: GapSelector | None = None  # pick_gap key; the gap of cause/card/number "gap"
    cause: str | None = None  # cause / card key (Cause label)
    options: tuple[Option, ...] = ()  # choice
    notes: bool = False  # choice: keep a free-text note
    quantity: str | None = None  # number
    key: NumberKey | None = None  # number
    projection: Projection | None = None
    assumptions: tuple[Assumption, ...] = ()
    fields: tuple[CardField, ...] = ()  # card
    feedback: str = ""  # shown after a correct answer
    wrong_feedback: str = ""  # shown after a wrong answer (placeholders allowed)
    pair: str = ""  # a PairRef id: the task compares its before and after traces (trace = after)

    # The loader guarantees the keys of each kind (load.py); these accessors state that
    # where it is relied on, with a type that is not Optional.

    @property
    def gap_key(self) -> GapSelector:
        """``gap``: the key of pick_gap, the gap of cause and card (the loader requires or
        defaults it), of number when the quantity is ``gap``. Raises ValueError if unset."""
        if self.gap is None:
            raise ValueError(f"task {self.id!r} ({self.kind}) names no gap")
        return self.gap

    @property
    def number_quantity(self) -> str:
        """``quantity`` of a number task (a key of ``QUANTITIES``). Raises ValueError if unset."""
        if self.quantity is None:
            raise ValueError(f"task {self.id!r} ({self.kind}) has no quantity")
        return self.quantity

    @property
    def number_key(self) -> NumberKey:
        """``key`` of a number task. Raises ValueError if unset."""
        if self.key is None:
            raise ValueError(f"task {self.id!r} ({self.kind}) has no number key")
        return self.key


@dataclasses.dataclass(frozen=True)
class Exercise:
    """A loaded, validated exercise file."""

    id: str
    title: str
    summary: str
    prompt: str
    debrief: str
    path: Path
    traces: tuple[TraceRef, ...]
    constraints: tuple[Constraint, ...]
    tasks: tuple[Task, ...]
    pairs: tuple[PairRef, ...] = ()

    def trace_ref(self, trace_id: str) -> TraceRef:
        for t in self.traces:
            if t.id == trace_id:
                return t
        raise KeyError(trace_id)

    def pair_ref(self, pair_id: str) -> PairRef:
        for p in self.pairs:
            if p.id == pair_id:
                return p
        raise KeyError(pair_id)

    def constraint(self, cid: str) -> Constraint:
        for c in self.constraints:
            if c.id == cid:
                return c
        raise KeyError(cid)
