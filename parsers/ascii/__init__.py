"""ASCII timelines: pick the shape (event list or lane art) by content and load it.

Grammar, defaults and every error message: ``docs/ascii-timelines.md``. Shapes follow
the two kinds of timeline in the exercises:

- event list: the first timeline line starts with a number (``0.000 ms  CPU ...``),
  loaded by ``gapscope.parsers.ascii.events.load_events``;
- lane art: the first timeline line starts with a lane label (``GPU:`` / ``CPU:``),
  loaded by ``gapscope.parsers.ascii.art.load_art``.

Blank lines and ``#`` comment lines are skipped; the ``#`` lines before the first
timeline line carry the title (first) and description (the rest). The helpers both
shapes share are in ``gapscope.parsers.ascii.common``.
"""

from __future__ import annotations

import re

from gapscope.parsers.ascii.art import load_art
from gapscope.parsers.ascii.common import split_lines
from gapscope.parsers.ascii.events import load_events
from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.model import Trace

__all__ = ["load_ascii", "timeline_shape"]

_EVENT_START = re.compile(r"^\s*(\d|\.\d)")
_ART_START = re.compile(r"^\s*(CPU|GPU)\d*\s*:", re.I)


def load_ascii(text: str, path: str = "", max_bytes: tuple[int, bool] | None = None) -> Trace:
    """Load an ASCII timeline (event list or lane art) into a ``Trace``.

    ``text``: the decoded file; ``path``: for messages and ``SourceInfo.path``;
    ``max_bytes``: the trace-size limit and whether the user set it
    (``detect.trace_limit``), which what lane art's picket fences expand into counts
    against (an event list has one event per line: its text is already counted).
    Returns a ``Trace`` with ``source.format`` ``"ascii-events"`` or ``"ascii-art"``.
    Raises ``TraceFormatError`` with line and column (1-based) when neither shape fits
    or the timeline breaks the grammar of ``docs/ascii-timelines.md``.
    """
    lines = split_lines(text)
    if timeline_shape(lines, path) == "events":
        return load_events(lines, path)
    return load_art(lines, path, max_bytes)


def timeline_shape(lines: list[str], path: str = "", complete: bool = True) -> str | None:
    """``"events"`` or ``"art"``: the shape of the first timeline line of ``lines``.

    Blank and ``#`` lines are skipped. Raises ``TraceFormatError`` (line, column) when
    the first timeline line starts neither shape, or, with ``complete`` (``lines`` is
    the whole file), when there is no timeline line; returns None when ``lines`` is
    only the head of a file and holds no timeline line yet.
    """
    for i, raw in enumerate(lines):
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        if _EVENT_START.match(raw):
            return "events"
        if _ART_START.match(raw):
            return "art"
        col = len(raw) - len(raw.lstrip()) + 1
        raise TraceFormatError(
            path,
            f"not a timeline: line starts with {s[:20]!r}",
            line=i + 1,
            column=col,
            hint="expected an event list ('0.000 ms  CPU decode_step begin') or lane art "
            "('GPU: [== matmul 4 ms ==]'); see docs/ascii-timelines.md",
        )
    if not complete:
        return None
    raise TraceFormatError(
        path,
        "no timeline in the file (only blank or # comment lines)",
        line=max(len(lines), 1),
        column=1,
        hint="see docs/ascii-timelines.md for the two shapes",
    )
