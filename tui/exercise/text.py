"""Text pieces of the exercise screen, as Rich ``Text`` built from literal strings
(trace names and answers are untrusted: never parsed as markup)."""

from __future__ import annotations

from rich.text import Text

from gapscope.analysis.causes import CAUSES
from gapscope.exercise import PROTOCOL, Session, Verdict

__all__ = ["CAUSE_HELP", "path_text", "verdict_text", "hints_text", "task_header"]

#: The cause classes as options of a classify question (one line each).
CAUSE_HELP = {info.label: f"{info.label}: {info.blurb}" for info in CAUSES.values()}


def path_text(session: Session) -> Text:
    """The six-step protocol as the path through the exercise: ``✓`` steps whose tasks
    are all done, ``▶`` the current task's step."""
    ex = session.exercise
    done_steps = {t.protocol_step for t in ex.tasks if session.record(t)["done"]}
    open_steps = {t.protocol_step for t in ex.tasks if not session.record(t)["done"]}
    cur = session.task.protocol_step if session.task is not None else 0
    t = Text()
    t.append("Protocol\n", style="bold underline")
    for k, title in enumerate(PROTOCOL, start=1):
        if k == cur:
            mark, style = "▶", "bold reverse"
        elif k in done_steps and k not in open_steps:
            mark, style = "✓", "bold green"
        else:
            mark, style = " ", "dim"
        t.append(f"{mark} {k}. {title}\n", style=style)
    t.append(f"\n{session.done_count()}/{len(ex.tasks)} tasks done", style="dim")
    return t


def task_header(session: Session) -> Text:
    task = session.task
    if task is None:
        return Text("All tasks done.", style="bold green")
    i = session.index + 1
    n = len(session.exercise.tasks)
    t = Text(f"Task {i}/{n}", style="bold")
    if task.protocol_step:
        t.append(f" · step {task.protocol_step}: {PROTOCOL[task.protocol_step - 1]}", style="bold")
    label = session.exercise.trace_ref(task.trace).label
    if label:
        t.append(f" · trace: {label}", style="dim")
    return t


def verdict_text(v: Verdict | None, *, error: str = "") -> Text:
    """Feedback after an answer: a ✓/✗ line, the computation, the evidence."""
    t = Text()
    if error:
        t.append("? ", style="bold yellow")
        t.append(error)
        return t
    if v is None:
        return t
    if v.correct:
        t.append("✓ Correct. ", style="bold green")
    else:
        t.append("✗ Not yet. ", style="bold red")
    t.append(v.message)
    if v.work:
        t.append("\n" + v.work, style="italic")
    for line in v.evidence:
        t.append("\n" + line, style="dim")
    return t


def hints_text(hints: list[str], total: int) -> Text:
    t = Text()
    if not total:
        return t
    for k, h in enumerate(hints, start=1):
        t.append(f"Hint {k}/{total}: ", style="bold yellow")
        t.append(h + "\n")
    if len(hints) < total:
        t.append(f"u: unlock a hint ({total - len(hints)} left)", style="dim")
    return t
