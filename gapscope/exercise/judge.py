"""Judge a learner's answer to one task, with the diagnosis of the task's trace.

A picked gap is right when it is the interval the key names in ``diagnose()``'s gaps; a
cause is right when it is the key (which ``check_exercise`` verifies against the
diagnosis); a number is right within its tolerance of the figure computed from the
timeline (``facts.TraceFacts``), and the feedback writes the computation out. No UI
imports: the screen and the tests call these functions.
"""

from __future__ import annotations

import dataclasses
import re

from gapscope.analysis.card import card_for_gap
from gapscope.analysis.causes import CAUSE_LABELS
from gapscope.exercise.facts import TraceFacts, fill
from gapscope.exercise.load import UNITS
from gapscope.exercise.model import CardField, Exercise, Option, Task
from gapscope.units import fmt_dur

__all__ = ["Verdict", "judge", "parse_number", "AnswerError"]


class AnswerError(ValueError):
    """The answer cannot be read (not a number, an option out of range, ...); the
    learner should retry, it does not count as an attempt."""


@dataclasses.dataclass(frozen=True)
class Verdict:
    """Outcome of one answer: ``correct``; ``message`` (plain text, untrusted names
    included verbatim); ``evidence`` (lines pointing at the timeline); ``work`` (the
    computation, for numbers); ``fields`` (card field -> correct)."""

    correct: bool
    message: str
    evidence: tuple[str, ...] = ()
    work: str = ""
    fields: dict = dataclasses.field(default_factory=dict)

    def text(self) -> str:
        """All of it as plain text lines."""
        out = [("Correct. " if self.correct else "Not yet. ") + self.message]
        if self.work:
            out.append(self.work)
        out.extend(self.evidence)
        return "\n".join(s for s in out if s)


_NUM = re.compile(r"^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(ms|us|µs|ns|s|%|tokens/s|tok/s|t/s|/s)?\s*$")


def parse_number(text: str, unit: str) -> float:
    """Read ``text`` ("0.312", "0.312 ms", "312 us", "70.3%", "952 tokens/s") as a value
    in ``unit``. A bare number is in ``unit``; a bare fraction ≤ 1 for a ``%`` unit is
    read as a share (0.703 → 70.3 %). Raises ``AnswerError``."""
    m = _NUM.match(text or "")
    if not m:
        raise AnswerError(f"{text!r} is not a number (write e.g. 0.312 or 0.312 ms)")
    v = float(m.group(1))
    given = m.group(2)
    if given in ("tok/s", "t/s", "/s"):
        given = "tokens/s"
    if given is None:
        if unit == "%" and 0 < v <= 1:
            return v * 100.0
        return v
    if UNITS[given][0] != UNITS[unit][0]:
        raise AnswerError(f"{text!r} is in {given}, but this answer is in {unit}")
    return v * UNITS[given][1] / UNITS[unit][1]


def _in_unit(value: float, natural: str, unit: str) -> float:
    """Convert a figure (ns for times, % or tokens/s) to ``unit``."""
    if natural == "ns":
        return value / UNITS[unit][1]
    return value


def _fmt(v: float, unit: str) -> str:
    if unit == "tokens/s":
        return f"{v:.0f} tokens/s"
    if unit == "%":
        return f"{v:.1f}%"
    return f"{v:.3f} {unit}"


def _evidence(facts: TraceFacts, g: int) -> tuple[str, ...]:
    try:
        card = card_for_gap(facts.diag, g)
    except Exception:  # noqa: BLE001 - a card is optional evidence; the verdict stands without it
        return ()
    lines = [
        f"{facts.gap_name(g)[:1].upper()}{facts.gap_name(g)[1:]}: diagnosis says {card.cause.label}"
        + (f" (secondary {card.secondary.label}, {card.secondary_share:.0%})" if card.secondary is not None else "")
    ]
    for ev in sorted(card.evidence, key=lambda e: -e.overlap_ns)[:4]:
        lines.append(f"  evidence: {ev.name} ({ev.cause.label}, {fmt_dur(ev.overlap_ns)} inside the gap)")
    if card.why:
        lines.append(f"  why: {card.why}")
    return tuple(lines)


def _violations(ex: Exercise, opt: Option) -> str:
    if not opt.violates:
        return ""
    return " It breaks a constraint: " + "; ".join(ex.constraint(c).text for c in opt.violates)


def _text_violations(ex: Exercise, text: str) -> list[str]:
    low = text.casefold()
    return [c.text for c in ex.constraints if any(k.casefold() in low for k in c.forbidden_keywords)]


def judge(ex: Exercise, task: Task, facts: TraceFacts | None, answer) -> Verdict:
    """Judge ``answer`` to ``task``.

    Answer per kind: ``pick_gap`` gap index (int) in ``facts.diag.gaps`` (or None:
    no gap under the cursor); ``cause`` a cause label; ``choice`` option index;
    ``number`` text; ``card`` dict field name -> option index (options fields), cause
    label (``cause``) or text (keyword fields). ``facts`` is required for every kind
    but ``choice``. Raises ``AnswerError`` for an unreadable answer.
    """
    if task.kind == "choice":
        return _choice(ex, task, facts, answer)
    assert facts is not None, "this task kind needs its trace"
    if task.kind == "pick_gap":
        return _pick(task, facts, answer)
    if task.kind == "cause":
        return _cause(task, facts, answer)
    if task.kind == "number":
        return _number(task, facts, answer)
    if task.kind == "card":
        return _card(ex, task, facts, answer)
    raise AnswerError(f"unknown task kind {task.kind!r}")


def _key_gap(task: Task, facts: TraceFacts) -> int:
    g = facts.resolve(task.gap_key)
    if g is None:
        raise AnswerError(f"the trace has no {task.gap_key.describe()}; run gapscope exercise --check on this file")
    return g


def _pick(task: Task, facts: TraceFacts, answer) -> Verdict:
    key = _key_gap(task, facts)
    if answer is None:
        return Verdict(
            False, "The cursor is not on an idle gap. Move to a stretch of white space on the GPU lane and press Enter."
        )
    g = int(answer)
    if g == key:
        # the interval only: the diagnosis's class and evidence answer later tasks
        msg = fill(task.feedback, facts, g) or f"That is {task.gap_key.describe()}: {facts.gap_name(g)}."
        return Verdict(True, msg)
    order = [int(x) for x in facts.gap_indices()]
    rank = order.index(g) + 1 if g in order else 0
    msg = (
        f"You picked {facts.gap_name(g)}: number {rank} of {len(order)} by size; the key is {task.gap_key.describe()}."
    )
    if task.gap_key.rank == 1:
        msg += " There is a wider stretch of white space on the GPU lane: rank the gaps by length (protocol step 3)."
    if task.wrong_feedback:
        msg += " " + fill(task.wrong_feedback, facts, g)
    return Verdict(False, msg)


def _cause(task: Task, facts: TraceFacts, answer) -> Verdict:
    label = str(answer).strip().lower()
    if label not in CAUSE_LABELS:
        raise AnswerError(f"{answer!r} is not a cause class ({', '.join(CAUSE_LABELS)})")
    g = _key_gap(task, facts)
    ev = _evidence(facts, g)
    if label == task.cause:
        return Verdict(
            True, fill(task.feedback, facts, g) or f"{label}: the CPU-side evidence during the gap says so.", ev
        )
    msg = f"{label} does not fit what the CPU did during {facts.gap_text(g)}; read the evidence of the gap (protocol step 4)."
    if task.wrong_feedback:
        msg += " " + fill(task.wrong_feedback, facts, g)
    return Verdict(False, msg)


def _choice(ex: Exercise, task: Task, facts: TraceFacts | None, answer) -> Verdict:
    try:
        i = int(answer)
        opt = task.options[i]
        if i < 0:
            raise IndexError
    except (TypeError, ValueError, IndexError):
        raise AnswerError(f"choose an option 1-{len(task.options)}") from None
    explain = fill(opt.explain, facts) if facts is not None else opt.explain
    if opt.correct and not opt.violates:
        return Verdict(True, explain or "Right.")
    msg = (explain or "That is not the best answer.") + _violations(ex, opt)
    if task.wrong_feedback:
        msg += " " + (fill(task.wrong_feedback, facts) if facts is not None else task.wrong_feedback)
    return Verdict(False, msg.strip())


def _decimals(text: str) -> int:
    """Decimal places the learner typed (``"70 %"`` → 0, ``"70.3%"`` → 1)."""
    m = _NUM.match(text or "")
    num = m.group(1) if m else ""
    mant = re.split(r"[eE]", num)[0]
    return len(mant.split(".", 1)[1]) if "." in mant else 0


def _close(v: float, truth: float, tol: float, unit: str, typed: str) -> bool:
    """``v`` is right for ``truth``: within the tolerance, or, for a percentage, equal
    to it at the decimals the learner typed (the rounding the screen shows: ``70 %``
    for 70.3%)."""
    if abs(v - truth) <= tol + 1e-12 * max(1.0, abs(truth)):
        return True
    if unit == "%":
        d = _decimals(typed)
        return abs(v - truth) <= 0.5 * 10.0**-d + 1e-9
    return False


def _short(pr) -> str:
    """A reading's label without its parenthesised detail."""
    return ((pr.label if pr is not None else "") or "as stated").split(" (", 1)[0]


def _number(task: Task, facts: TraceFacts, answer) -> Verdict:
    key = task.number_key
    v = parse_number(str(answer), key.unit)
    readings = task.projection.all_readings if task.projection is not None else (None,)
    figs = []
    for pr in readings:
        try:
            fig = facts.figure(task.number_quantity, gap=task.gap, projection=pr)
        except ValueError as exc:
            raise AnswerError(f"cannot compute {task.quantity} from the trace: {exc}") from None
        work = fig.work
        if pr is not None and pr.assumptions:
            work += "\nAssumptions: " + "; ".join(pr.assumptions)
        figs.append((pr, _in_unit(fig.value, fig.unit, key.unit), work))
    tol = key.tolerance_abs()
    for k, (pr, truth, work) in enumerate(figs):
        if not _close(v, truth, tol, key.unit, str(answer)):
            continue
        msg = (
            fill(task.feedback, facts)
            or f"{_fmt(v, key.unit)} is within {_fmt(tol, key.unit)} of the timeline's {_fmt(truth, key.unit)}."
        )
        if len(figs) > 1:  # say which reading of the assumptions it matches, and the other
            msg += f" It matches the reading '{pr.label if pr is not None and pr.label else 'as stated'}'" + (
                "; "
                + "; ".join(f"'{_short(o)}' gives {_fmt(t, key.unit)}" for j, (o, t, _w) in enumerate(figs) if j != k)
                + "."
            )
        return Verdict(True, msg, work=work)
    pr0, truth, work = figs[0]
    side = "high" if v > truth else "low"
    msg = f"{_fmt(v, key.unit)} is too {side}: the timeline gives {_fmt(truth, key.unit)} (tolerance {_fmt(tol, key.unit)})."
    if len(figs) > 1:
        msg = (
            f"{_fmt(v, key.unit)} matches no reading of the assumptions: the timeline gives "
            + "; ".join(f"{_fmt(t, key.unit)} with '{_short(p)}'" for p, t, _w in figs)
            + f" (tolerance {_fmt(tol, key.unit)})."
        )
    if task.wrong_feedback:
        msg += " " + fill(task.wrong_feedback, facts)
    return Verdict(False, msg, work="\n".join(w for _p, _t, w in figs))


def _keywords_ok(fld: CardField, text: str) -> list[tuple[str, ...]]:
    low = (text or "").casefold()
    return [g for g in fld.keywords if not any(w in low for w in g)]


def _option_at(options: tuple[Option, ...], answer: object) -> Option | None:
    """The option ``answer`` names (a 0-based index, as int or digit string), or None
    for anything else, a negative index included (which would wrap to the last)."""
    if not isinstance(answer, (int, str)):
        return None
    try:
        i = int(answer)
    except ValueError:
        return None
    return options[i] if 0 <= i < len(options) else None


def _card(ex: Exercise, task: Task, facts: TraceFacts, answer) -> Verdict:
    if not isinstance(answer, dict):
        raise AnswerError("a card answer is a mapping of field -> answer")
    results: dict[str, bool] = {}
    notes: list[str] = []
    g = _key_gap(task, facts)
    for fld in task.fields:
        a = answer.get(fld.name)
        if fld.name == "cause":
            ok = str(a or "").strip().lower() == task.cause
            results["cause"] = ok
            if not ok:
                notes.append(f"cause: {a or '(empty)'} does not fit the evidence during {facts.gap_text(g)}.")
        elif fld.options:
            opt = _option_at(fld.options, a)
            if opt is None:
                results[fld.name] = False
                notes.append(f"{fld.name}: choose one of the options.")
                continue
            ok = opt.correct and not opt.violates
            results[fld.name] = ok
            if not ok:
                notes.append(f"{fld.name}: " + (fill(opt.explain, facts, g) or "not this one.") + _violations(ex, opt))
        else:
            missing = _keywords_ok(fld, str(a or ""))
            broken = _text_violations(ex, str(a or ""))
            ok = not missing and not broken
            results[fld.name] = ok
            if missing:
                notes.append(f"{fld.name}: say something about " + " and ".join("/".join(m) for m in missing) + ".")
            for b in broken:
                notes.append(f"{fld.name}: breaks a constraint: {b}")
    ev = _evidence(facts, g)
    if all(results.values()):
        return Verdict(True, fill(task.feedback, facts, g) or "The card holds.", ev, fields=results)
    bad = [k for k, v in results.items() if not v]
    return Verdict(False, f"{len(bad)} of {len(results)} fields need work. " + " ".join(notes), fields=results)
