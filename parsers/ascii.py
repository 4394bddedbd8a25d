"""ASCII timelines: pick the shape (event list or lane art) by content and load it.

Grammar, defaults and every error message: ``docs/ascii-timelines.md``. Shapes follow
"ASCII timelines" in the shared design (``docs/ARCHITECTURE.md``):

- event list: the first timeline line starts with a number (``0.000 ms  CPU ...``),
  loaded by ``parsers.ascii_events.load_events``;
- lane art: the first timeline line starts with a lane label (``GPU:`` / ``CPU:``),
  loaded by ``parsers.ascii_art.load_art``.

Blank lines and ``#`` comment lines are skipped; the ``#`` lines before the first
timeline line carry the title (first) and description (the rest).
"""

from __future__ import annotations

import re

from .builder import TraceBuilder
from .errors import TraceFormatError
from .model import Trace

__all__ = ["load_ascii", "timeline_shape", "split_lines", "header_comments", "cpu_lane", "gpu_lane", "lane_label"]

_EVENT_START = re.compile(r"^\s*(\d|\.\d)")
_ART_START = re.compile(r"^\s*(CPU|GPU)\d*\s*:", re.I)
#: A lane name in either shape: CPU, CPU1, GPU, GPU1 (case-insensitive).
LANE_RE = re.compile(r"^(CPU|GPU)(\d*)$", re.I)


def split_lines(text: str) -> list[str]:
    """Lines of ``text`` without line ends; a leading byte-order mark is dropped."""
    if text.startswith("\ufeff"):
        text = text[1:]
    return text.splitlines()


def load_ascii(text: str, path: str = "") -> Trace:
    """Load an ASCII timeline (event list or lane art) into a ``Trace``.

    ``text``: the decoded file; ``path``: for messages and ``SourceInfo.path``.
    Returns a ``Trace`` with ``source.format`` ``"ascii-events"`` or ``"ascii-art"``.
    Raises ``TraceFormatError`` with line and column (1-based) when neither shape fits
    or the timeline breaks the grammar of ``docs/ascii-timelines.md``.
    """
    lines = split_lines(text)
    if timeline_shape(lines, path) == "events":
        from .ascii_events import load_events

        return load_events(lines, path)
    from .ascii_art import load_art

    return load_art(lines, path)


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
    raise TraceFormatError(path, "no timeline in the file (only blank or # comment lines)",
                           line=max(len(lines), 1), column=1,
                           hint="see docs/ascii-timelines.md for the two shapes")


def header_comments(lines: list[str]) -> tuple[str | None, str | None]:
    """(title, description) from the ``#`` lines before the first timeline line.

    The first such line is the title, the following ones (joined by newlines) the
    description; ``#`` and one following space are removed. (None, None) when absent.
    """
    found: list[str] = []
    for raw in lines:
        s = raw.strip()
        if not s:
            continue
        if not s.startswith("#"):
            break
        found.append(s[1:].strip())
    found = [f for f in found if f]
    if not found:
        return None, None
    return found[0], ("\n".join(found[1:]) or None)


def new_builder(lines: list[str], path: str, fmt: str) -> TraceBuilder:
    """A ``TraceBuilder`` with ``format``, title and description filled in."""
    title, description = header_comments(lines)
    b = TraceBuilder(format=fmt, path=path, trace_name=title)
    if description:
        b.source.extra["description"] = description
    return b


def lane_label(kind: str, number: str) -> str:
    """Canonical label of a lane token: ``CPU``, ``CPU1``, ``GPU``, ``GPU1``."""
    return kind.upper() + number


def cpu_lane(b: TraceBuilder, number: str = "") -> int:
    """The CPU lane of thread ``number`` ("" = the main thread): pid ``host``."""
    tid = number or "main"
    return b.lane("host", tid, process_name="CPU", thread_name="main" if not number else f"thread {number}")


def gpu_lane(b: TraceBuilder, number: str = "") -> int:
    """The GPU lane of device ``number`` ("" = device 0), stream 0."""
    dev = int(number) if number else 0
    return b.lane(f"gpu{dev}", "stream 0", process_name=f"GPU {dev}", thread_name="stream 0",
                  is_gpu=True, device=dev, stream=0)
