"""The viewer's what-if: mark evidence items of gaps and project the step without them
(design: "Budget and what-if"; the same projection as ``gapscope report --what-if``).

Pure: no Textual. ``next_mark`` picks the next CPU-side evidence name of the selected gap
to mark; ``projection_text`` words ``Diagnosis.what_if(names=...)`` for the status line.
"""

from __future__ import annotations

from gapscope.analysis.causes import CAUSES
from gapscope.units import fmt_dur

__all__ = ["next_mark", "projection_text"]

#: Evidence classes a user can remove by changing their code (not dependency: the GPU
#: was blocked; not the synthetic "no events" item: it has no name to remove).
_REMOVABLE = tuple(c for c, info in CAUSES.items() if info.removable)


def next_mark(diagnosis, gap: int, marked: tuple[str, ...]) -> str | None:
    """The largest CPU-side evidence name of ``gap`` not yet in ``marked``, or None."""
    trace = diagnosis.trace
    for e in diagnosis.evidence(int(gap)):
        if e.event >= 0 and e.cause in _REMOVABLE and not trace.lanes[e.lane].is_gpu and e.name not in marked:
            return e.name
    return None


def projection_text(diagnosis, marked: tuple[str, ...]) -> str:
    """ "without `tensor.item()`, `logging callback`: 0.600 ms per step (was 1.050 ms),
    1,667 tokens/s"; or why there is no projection."""
    if not marked:
        return "what-if: nothing marked (x: mark the gap's evidence)"
    if diagnosis.budget is None:
        return "what-if: no GPU ops, nothing to project"
    w = diagnosis.what_if(names=marked)
    names = ", ".join("`" + n + "`" for n in marked)
    per_s = w.tokens_per_s if w.decode else w.steps_per_s
    unit = "tok/s" if w.decode else "steps/s"
    rate = f"{unit} n/a" if per_s is None else f"{per_s:,.0f} {unit}" if w.decode else f"{per_s:,.2f} {unit}"
    # the figures first: the status line is cut at the terminal's width
    return f"what-if: {fmt_dur(w.projected_step_ns)}/step ({w.speedup:.2f}x), {rate} without {names}"
