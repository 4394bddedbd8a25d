"""Load each trace of an exercise once and diagnose it (``TraceFacts`` per trace id), and
diff its pairs (``gapscope diff`` documents per pair id)."""

from __future__ import annotations

from gapscope.exercise.facts import TraceFacts
from gapscope.exercise.model import Exercise

__all__ = ["Workbook"]


class Workbook:
    """Lazily loaded traces and diagnoses of one exercise.

    ``facts(trace_id)`` loads with ``gapscope.parsers.load`` and diagnoses with
    ``gapscope.analysis.diagnose`` on first use; raises ``gapscope.parsers.errors.TraceFormatError`` for a
    trace that cannot be read.
    """

    def __init__(self, exercise: Exercise) -> None:
        self.exercise = exercise
        self._facts: dict[str, TraceFacts] = {}
        self._diffs: dict[str, dict] = {}

    def facts(self, trace_id: str) -> TraceFacts:
        f = self._facts.get(trace_id)
        if f is None:
            from gapscope.analysis import diagnose
            from gapscope.parsers import load

            trace = load(self.exercise.trace_ref(trace_id).path)
            f = self._facts[trace_id] = TraceFacts(trace, diagnose(trace))
        return f

    def diff(self, pair_id: str) -> dict:
        """The ``gapscope diff`` document (``gapscope.diff.document``) of pair
        ``pair_id``: its before trace against its after trace, each diagnosed once."""
        d = self._diffs.get(pair_id)
        if d is None:
            from gapscope.diff.document import build_diff_document

            pair = self.exercise.pair_ref(pair_id)
            b, a = self.facts(pair.before), self.facts(pair.after)
            d = self._diffs[pair_id] = build_diff_document(b.trace, b.diag, a.trace, a.diag)
        return d
