"""A guided session: one learner working through one exercise, task by task.

Headless: the TUI screen and the tests drive it the same way. Progress is saved after
every answer and hint (``ProgressStore``), so a session resumes where it stopped.
"""

from __future__ import annotations

from gapscope.exercise.context import Workbook
from gapscope.exercise.facts import TraceFacts
from gapscope.exercise.judge import Verdict, judge
from gapscope.exercise.model import Exercise, Task
from gapscope.exercise.progress import ProgressStore

__all__ = ["Session"]


class Session:
    """State of ``exercise`` for the learner of ``store``.

    ``index`` is the current task (== number of tasks once finished). ``submit`` judges
    an answer (see ``judge.judge`` for answer shapes) and records it; a correct answer
    marks the task done and moves on. ``hint`` unlocks the next hint of the current task.
    """

    def __init__(
        self, exercise: Exercise, store: ProgressStore | None = None, workbook: Workbook | None = None
    ) -> None:
        self.exercise = exercise
        self.store = store if store is not None else ProgressStore()
        self.workbook = workbook or Workbook(exercise)
        rec = self.store.exercise(exercise.id)
        n = len(exercise.tasks)
        # resume at the first task not done (the file may have changed since)
        self.index = next(
            (i for i, t in enumerate(exercise.tasks) if not self.store.task(exercise.id, t.id)["done"]), n
        )
        rec["current"] = self.index
        self.last: Verdict | None = None

    # ------------------------------------------------------------------ state
    @property
    def finished(self) -> bool:
        return self.index >= len(self.exercise.tasks)

    @property
    def task(self) -> Task | None:
        return None if self.finished else self.exercise.tasks[self.index]

    def record(self, task: Task | None = None) -> dict:
        """The progress record of ``task`` (default: the current one). Raises ValueError
        when the exercise is finished and no task is given."""
        t = task or self.task
        if t is None:
            raise ValueError("the exercise is finished: there is no current task")
        return self.store.task(self.exercise.id, t.id)

    def facts(self, task: Task | None = None) -> TraceFacts:
        t = task or self.task or self.exercise.tasks[-1]
        return self.workbook.facts(t.trace)

    def hints_shown(self) -> list[str]:
        if self.task is None:
            return []
        return list(self.task.hints[: self.record()["hints"]])

    def done_count(self) -> int:
        return sum(1 for t in self.exercise.tasks if self.record(t)["done"])

    # ---------------------------------------------------------------- actions
    def hint(self) -> str | None:
        """Unlock and return the next hint of the current task (None when none left)."""
        t = self.task
        if t is None:
            return None
        rec = self.record()
        if rec["hints"] >= len(t.hints):
            return None
        rec["hints"] += 1
        self.store.save()
        return t.hints[rec["hints"] - 1]

    def submit(self, answer, *, notes: str = "") -> Verdict:
        """Judge ``answer`` to the current task; raises ``judge.AnswerError`` for an
        unreadable answer (not counted) and ``RuntimeError`` when finished."""
        t = self.task
        if t is None:
            raise RuntimeError("the exercise is finished")
        facts = None if t.kind == "choice" and not self._has_trace(t) else self.facts(t)
        verdict = judge(self.exercise, t, facts, answer)
        rec = self.record()
        rec["attempts"] += 1
        rec["answer"] = answer if isinstance(answer, (int, str, dict, type(None))) else str(answer)
        if notes:
            rec["notes"] = notes
        if verdict.correct:
            rec["done"] = True
            self.index += 1
            ex = self.store.exercise(self.exercise.id)
            ex["current"] = self.index
            ex["finished"] = self.finished
        self.last = verdict
        self.store.save()
        return verdict

    def _has_trace(self, t: Task) -> bool:
        try:
            self.facts(t)
            return True
        except Exception:  # noqa: BLE001 - choice tasks judge without a trace when it cannot load
            return False

    def reset(self) -> None:
        """Forget this exercise's progress and start again at task 1."""
        self.store.reset(self.exercise.id)
        self.store.exercise(self.exercise.id)
        self.index = 0
        self.last = None
