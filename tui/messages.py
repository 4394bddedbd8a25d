"""The messages the viewer's workers post to the app (``gapscope.tui.app.GapscopeApp``),
one dataclass each, in the idiom of Textual's own and toolong's ``messages.py``: a
worker thread posts one (``post_message`` is thread-safe) instead of a screen polling
it on a timer; ``can_replace`` lets a newer progress figure supersede one not yet
handled. The app takes each into its ``Session`` and sets its ``phase``
(``gapscope.tui.session``); the screens watch that.

Traces and diagnoses travel by reference: nothing here is copied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from gapscope.analysis.types import Gaps
from gapscope.parsers.model import Trace

if TYPE_CHECKING:  # the diagnosis module is imported by the worker that makes one
    from gapscope.analysis.diagnose import Diagnosis
    from gapscope.analysis.findings import Findings

__all__ = ["LoadProgress", "PreviewLoaded", "TraceLoaded", "LoadFailed", "GapsFound", "Diagnosed", "FindingsReady"]


@dataclass
class LoadProgress(Message, bubble=False):
    """How far the load of the file is: ``share`` the share of its text decoded
    (0.0-1.0; None: not known, or the decoded parts are being assembled after one was
    known: ``gapscope.parsers.detect.load_progress``), ``elapsed_s`` whole seconds
    since the load began. Posted by the load worker when either changes."""

    share: float | None
    elapsed_s: int

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LoadProgress)


@dataclass
class PreviewLoaded(Message, bubble=False):
    """The device lanes of the file, read first (``gapscope.parsers.chrome.loader.
    device_preview``), and their gaps (``ViewOptions.early_gaps``, found in the load's
    thread; None: none found)."""

    trace: Trace
    gaps: Gaps | None


@dataclass
class TraceLoaded(Message, bubble=False):
    """The whole trace."""

    trace: Trace


@dataclass
class LoadFailed(Message, bubble=False):
    """The trace could not be loaded: ``error`` is one line (``PATH[:LINE:COL]:
    message``, the form of ``gapscope report``'s errors)."""

    error: str


@dataclass
class GapsFound(Message, bubble=False):
    """The trace's gaps before their causes (``ViewOptions.early_gaps``), posted by
    the diagnosis worker before its diagnosis."""

    gaps: Gaps


@dataclass
class Diagnosed(Message, bubble=False):
    """The diagnosis worker's result: ``diagnosis`` (None: none came; with ``error``
    set: it failed, ``error`` one line saying why), posted as soon as its gaps and
    causes exist: the causes are drawn while its findings are computed.
    ``findings_follow``: a ``FindingsReady`` of this diagnosis follows (the screens
    say meanwhile that the findings are being computed)."""

    diagnosis: Diagnosis | None
    error: str | None
    findings_follow: bool = False


@dataclass
class FindingsReady(Message, bubble=False):
    """The verdict and ranked findings of ``diagnosis``
    (``gapscope.analysis.findings.findings``, kept in its ``derived``), computed by
    the diagnosis worker after its ``Diagnosed``; ``findings`` None: it has none
    (``gapscope.tui.findings_view.findings_of``)."""

    diagnosis: Diagnosis
    findings: Findings | None
