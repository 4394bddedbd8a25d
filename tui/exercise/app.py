"""App factory for the exercise mode (CLI, tests and snapshots build the app here)."""

from __future__ import annotations

from textual.app import App

from gapscope.exercise import Exercise, ProgressStore, Session, Workbook
from gapscope.tui.colour import no_colour
from gapscope.tui.exercise.screen import ExerciseScreen

__all__ = ["ExerciseApp", "make_exercise_app"]


class ExerciseApp(App):
    """Runs one ``ExerciseScreen``; ``session`` is the headless state it drives."""

    TITLE = "gapscope exercise"

    def __init__(self, session: Session) -> None:
        super().__init__()
        no_colour(self)
        self.session = session

    def on_mount(self) -> None:
        self.push_screen(ExerciseScreen(self.session))


def make_exercise_app(
    exercise: Exercise, *, store: ProgressStore | None = None, workbook: Workbook | None = None
) -> ExerciseApp:
    """Build the app for ``exercise`` with the learner's progress ``store`` (default:
    the XDG state directory); traces load and diagnose on first use."""
    return ExerciseApp(Session(exercise, store=store, workbook=workbook))
