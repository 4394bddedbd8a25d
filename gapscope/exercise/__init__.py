"""Guided exercise mode, headless part: file format, judging, checking, progress.

The file format is documented in ``docs/exercises.md``; the screen is
``tui/exercise_screen.py``; the command is ``gapscope exercise`` (``exercise_cmd``).
Nothing here imports Textual or Rich.
"""

from .check import CheckReport, check_exercise
from .context import Workbook
from .facts import TraceFacts
from .judge import AnswerError, Verdict, judge, parse_number
from .load import load_exercise, parse_exercise
from .model import PROTOCOL, Exercise, ExerciseError, Task
from .progress import ProgressStore
from .registry import bundled, bundled_paths, find
from .session import Session

__all__ = [
    "AnswerError", "CheckReport", "Exercise", "ExerciseError", "PROTOCOL", "ProgressStore",
    "Session", "Task", "TraceFacts", "Verdict", "Workbook", "bundled", "bundled_paths",
    "check_exercise", "find", "judge", "load_exercise", "parse_exercise", "parse_number",
]
