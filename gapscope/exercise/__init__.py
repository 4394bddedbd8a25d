"""Guided exercise mode, headless part: file format, judging, checking, progress.

The file format is documented in ``docs/exercises.md``; the screen is
``tui/exercise/screen.py``; the command is ``gapscope exercise`` (``tui/exercise/cmd.py``);
the bundled exercise files are ``content/*.toml``.
Nothing here imports Textual or Rich.
"""

from gapscope.exercise.check import CheckReport, check_exercise
from gapscope.exercise.context import Workbook
from gapscope.exercise.facts import TraceFacts
from gapscope.exercise.judge import AnswerError, Verdict, judge, parse_number
from gapscope.exercise.load import load_exercise, parse_exercise
from gapscope.exercise.model import PROTOCOL, Exercise, ExerciseError, Task
from gapscope.exercise.progress import ProgressStore
from gapscope.exercise.registry import bundled, bundled_paths, find
from gapscope.exercise.session import Session

__all__ = [
    "AnswerError",
    "CheckReport",
    "Exercise",
    "ExerciseError",
    "PROTOCOL",
    "ProgressStore",
    "Session",
    "Task",
    "TraceFacts",
    "Verdict",
    "Workbook",
    "bundled",
    "bundled_paths",
    "check_exercise",
    "find",
    "judge",
    "load_exercise",
    "parse_exercise",
    "parse_number",
]
