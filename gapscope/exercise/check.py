"""``check_exercise``: verify an exercise file's answer keys against what the diagnosis
computes on its traces (for instructors; ``gapscope exercise --check FILE``)."""

from __future__ import annotations

import dataclasses
import os
import re

from gapscope.exercise.context import Workbook
from gapscope.exercise.facts import TraceFacts
from gapscope.exercise.judge import _fmt, _in_unit
from gapscope.exercise.load import load_exercise
from gapscope.exercise.model import Exercise, ExerciseError, Task

__all__ = ["CheckReport", "check_exercise", "check_loaded", "diff_statuses"]

#: An assumption stated in the prompt may differ from the timeline by this share before
#: ``check`` warns (numbers in prompts are rounded to about 3 digits).
ASSUMPTION_REL_TOL = 0.005


@dataclasses.dataclass
class CheckReport:
    """Outcome of a check: ``errors`` (keys that contradict the trace, unreadable
    traces, or a file that is no exercise) and ``warnings`` (stated assumptions the trace
    does not bear out, give-aways). Each is one line that starts with where it is,
    ``PATH[:LINE[:COL]]: [task 'id': ]message``, the form of ``TraceFormatError``.
    ``unloadable``: the file could not be loaded as an exercise at all (unreadable, not
    TOML, breaks the format): bad input rather than a failed check."""

    path: str
    errors: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    unloadable: bool = False

    @property
    def ok(self) -> bool:
        return not self.errors

    def lines(self) -> list[str]:
        """``gapscope: error: ...`` / ``gapscope: warning: ...`` lines (the house form of
        ``gapscope report``), then ``PATH: ok`` when there is no error."""
        out = [f"gapscope: error: {e}" for e in self.errors]
        out += [f"gapscope: warning: {w}" for w in self.warnings]
        if self.ok:
            out.append(f"{self.path}: ok" + (f" ({len(self.warnings)} warning(s))" if self.warnings else ""))
        return out


def check_exercise(path: str | os.PathLike) -> CheckReport:
    """Load the exercise at ``path`` and check every key against the diagnosis.

        Errors (the file is wrong): format errors, unreadable traces, a gap key naming no
        gap or not the gap its ``expect_*`` says, a cause key the diagnosis does not give,
        a number key outside its tolerance of the timeline's figure (naming the task and
        both values), an option of a task on a pair whose diff claim (``position`` +
        ``status``) contradicts ``gapscope diff`` of the pair. Warnings: an assumption (``[[tasks.assume]]``) that differs from the
        timeline by more than 0.5 %, naming both numbers; feedback or an option's explanation
    that states the figure a later ``number`` task asks for (a give-away), naming both
    tasks. Never raises for a bad file.
    """
    try:
        ex = load_exercise(path)
    except ExerciseError as exc:
        return CheckReport(str(path), [str(exc)], unloadable=True)
    return check_loaded(ex)


def _who(ex: Exercise, task: Task) -> str:
    """Where a finding about ``task`` is: ``PATH:LINE: task 'id'`` (no LINE when unknown)."""
    return f"{ex.path}" + (f":{task.line}" if task.line else "") + f": task {task.id!r}"


def check_loaded(ex: Exercise, workbook: Workbook | None = None) -> CheckReport:
    """Check an already loaded exercise (see ``check_exercise``)."""
    from gapscope.parsers.errors import TraceFormatError

    rep = CheckReport(str(ex.path))
    wb = workbook or Workbook(ex)
    for task in ex.tasks:
        who = _who(ex, task)
        if task.pair:
            try:
                _check_claims(task, wb.diff(task.pair), who, rep)
            except TraceFormatError as exc:
                rep.errors.append(f"{who}: pair {task.pair!r} cannot be read: {exc}")
        if task.kind == "choice":
            continue
        try:
            facts = wb.facts(task.trace)
        except TraceFormatError as exc:
            rep.errors.append(f"{who}: trace {task.trace!r} cannot be read: {exc}")
            continue
        try:
            _check_task(task, facts, who, rep)
        except ValueError as exc:
            rep.errors.append(f"{who}: {exc}")
    _check_give_aways(ex, wb, rep)
    return rep


def diff_statuses(doc: dict, position: str) -> list[str]:
    """Statuses the diff document ``doc`` gives the position named ``position``: its
    label in BEFORE or AFTER, or ``prev → next`` by op families (one per match)."""
    out = []
    for g in doc["groups"]:
        names = {g["label"]}
        for side in (g["before"], g["after"]):
            if side:
                names |= {side["label"], f"{side['prev_family']} → {side['next_family']}"}
        if position in names:
            out.append(g["status"])
    return out


def _check_claims(task: Task, doc: dict, who: str, rep: CheckReport) -> None:
    """Every option of ``task`` that claims a diff status: a correct option's claim must
    hold, a wrong option's claim must not (else the key contradicts the diff)."""
    for opt in task.options:
        if not opt.status:
            continue
        got = diff_statuses(doc, opt.position)
        if not got:
            known = ", ".join(sorted({g["label"] for g in doc["groups"]})[:8])
            rep.errors.append(
                f"{who}: option {opt.text!r}: the diff has no position {opt.position!r} (it has: {known})"
            )
        elif opt.correct and opt.status not in got:
            rep.errors.append(
                f"{who}: option {opt.text!r} is marked correct and claims {opt.position!r} {opt.status}, "
                f"but the diff says {' / '.join(got)}"
            )
        elif not opt.correct and opt.status in got:
            rep.errors.append(
                f"{who}: option {opt.text!r} is marked wrong, but the diff agrees that {opt.position!r} {opt.status}"
            )


def _shown_texts(task: Task) -> list[str]:
    """The author's texts a learner sees after answering ``task``."""
    out = [task.feedback, task.wrong_feedback]
    out += [o.explain for o in task.options]
    out += [o.explain for f in task.fields for o in f.options]
    return [t for t in out if t]


def _check_give_aways(ex: Exercise, wb: Workbook, rep: CheckReport) -> None:
    """Warn when a task's feedback (filled from its trace) states the figure a later
    ``number`` task asks for: the learner would read the answer before the question."""
    from gapscope.exercise.facts import fill
    from gapscope.parsers.errors import TraceFormatError

    answers: list[tuple[int, Task, str]] = []
    for j, t in enumerate(ex.tasks):
        if t.kind != "number":
            continue
        try:
            fig = wb.facts(t.trace).figure(t.number_quantity, gap=t.gap, projection=t.projection)
        except (TraceFormatError, ValueError):
            continue
        unit = t.number_key.unit
        num = _fmt(_in_unit(fig.value, fig.unit, unit), unit).split(" ")[0].rstrip("%")
        if len(num.replace(".", "").lstrip("0")) >= 2:  # a bare "1" or "0.0" is no give-away
            answers.append((j, t, num))
    for i, task in enumerate(ex.tasks):
        later = [(t, num) for j, t, num in answers if j > i]
        if not later:
            continue
        try:
            facts = wb.facts(task.trace)
            g = facts.resolve(task.gap) if task.gap is not None else None
        except TraceFormatError:
            continue
        text = " ".join(fill(x, facts, g) for x in _shown_texts(task))
        for t, num in later:
            if re.search(rf"(?<![\d.]){re.escape(num)}(?![\d])", text):
                who = _who(ex, task)
                rep.warnings.append(
                    f"{who}: its feedback states {num}, the answer of the later task {t.id!r} ({t.quantity})"
                )


def _check_task(task: Task, facts: TraceFacts, who: str, rep: CheckReport) -> None:
    g = None
    if task.gap is not None:
        g = facts.resolve(task.gap)
        if g is None:
            rep.errors.append(f"{who}: the diagnosis has no {task.gap.describe()} on device {facts.device}")
            return
        gs = (int(facts.diag.gaps.start_ns[g]) - facts.origin_ns) / 1e6
        ge = (int(facts.diag.gaps.end_ns[g]) - facts.origin_ns) / 1e6
        tol = task.gap.tol_ms
        for name, want, got in (("start", task.gap.expect_start_ms, gs), ("end", task.gap.expect_end_ms, ge)):
            if want is not None and abs(want - got) > tol:
                rep.errors.append(
                    f"{who}: key expects {task.gap.describe()} to {name} at {want:.3f} ms, the diagnosis has {got:.3f} ms ({facts.gap_text(g)})"
                )
    if task.kind in ("cause", "card"):
        from gapscope.analysis.types import Cause

        if g is None:  # the loader gives cause and card tasks a gap (the largest by default)
            raise ValueError(f"{who}: names no gap")
        label = Cause(int(facts.diag.gaps.cause[g])).label
        if label != task.cause:
            rep.errors.append(
                f"{who}: key cause is {task.cause}, the diagnosis classifies {facts.gap_text(g)} as {label}"
            )
    if task.kind == "number":
        fig = facts.figure(task.number_quantity, gap=task.gap, projection=task.projection)
        key = task.number_key
        truth = _in_unit(fig.value, fig.unit, key.unit)
        tol = key.tolerance_abs()
        if abs(key.value - truth) > tol + 1e-9 * max(1.0, abs(truth)):
            rep.errors.append(
                f"{who}: key {task.quantity} = {_fmt(key.value, key.unit)}, the timeline gives {_fmt(truth, key.unit)} (tolerance {_fmt(tol, key.unit)}; {fig.work})"
            )
    for a in task.assumptions:
        fig = facts.figure(a.quantity)
        truth = _in_unit(fig.value, fig.unit, a.unit)
        if abs(a.value - truth) > ASSUMPTION_REL_TOL * max(abs(truth), 1e-12):
            rep.warnings.append(
                f"{who}: assumes {a.quantity} = {_fmt(a.value, a.unit)}, but its own timeline gives {_fmt(truth, a.unit)} ({fig.work})"
            )
