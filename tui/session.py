"""What the viewer has loaded and diagnosed (``Session``), how far it is (``Phase``,
held by the app as a Textual reactive that the screens watch:
``gapscope.tui.app.GapscopeApp.phase``), how far the file's load is (``Reading``) and
what the caller chose (``ViewOptions``: the loader, the diagnosis, its thresholds).

The app is the one writer: it takes each worker's message (``gapscope.tui.messages``)
into its session, then sets its phase; a screen reads the session when the phase it
watches changes.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from gapscope.analysis.types import Gaps, Params
from gapscope.parsers.model import Trace

if TYPE_CHECKING:  # the diagnosis module is imported by the worker that makes one
    from textual.screen import Screen

    from gapscope.analysis.diagnose import Diagnosis

__all__ = ["Phase", "Reading", "ViewOptions", "Session"]


class Phase(enum.Enum):
    """How far the viewer is with its trace; each phase shows a screen of its own.

    ``LOADING``: the file is read (the loading screen). ``PREVIEW``: its device lanes,
    read first, are drawn (and their gaps, without causes) while the rest is read.
    ``DIAGNOSING``: the whole trace is drawn; its gaps, then their causes, are found.
    ``DIAGNOSED``: the diagnosis is in, or it failed or none came (``Session.error``;
    the lanes stay). ``FAILED``: the trace could not be loaded (``Session.error``, one
    line; the app exits with status 2 and the command prints it).
    """

    LOADING = "loading"
    PREVIEW = "preview"
    DIAGNOSING = "diagnosing"
    DIAGNOSED = "diagnosed"
    FAILED = "failed"


@dataclasses.dataclass(frozen=True)
class Reading:
    """How far the load of the file is (``gapscope.tui.messages.LoadProgress`` as the
    app keeps it): ``share`` of its text decoded (0.0-1.0, None: not known),
    ``seen`` whether a share was ever known (None after one: the decoded parts are
    being assembled into the trace), ``elapsed_s`` whole seconds since the load began."""

    share: float | None = None
    seen: bool = False
    elapsed_s: int = 0


@dataclasses.dataclass(frozen=True)
class ViewOptions:
    """What the caller chose for the viewer (``gapscope.tui.factory.make_app``).

    ``params``: the diagnosis's thresholds (``gapscope.analysis.types.Params``; None:
    its defaults), the same options ``gapscope report`` takes; ``loader(path) ->
    Trace`` (default ``gapscope.parsers.load``) and ``diagnose(trace) -> Diagnosis |
    None`` (default ``gapscope.analysis.diagnose`` with ``params``): tests inject slow
    or failing ones; ``early_gaps(trace) -> Gaps``: the gaps drawn before their causes
    (the default diagnosis's: ``gapscope.tui.factory.default_early_gaps``; None with
    another ``diagnose``, whose gaps may differ); ``ready_diagnosis(trace) ->
    Diagnosis | None``: asked first by the diagnosis worker, off the UI thread: a
    diagnosis there is no need to compute (the diagnosis cache's entry:
    ``gapscope.tui.factory.default_ready_diagnosis``, the default with the default
    ``diagnose``), taken in place of the early gaps and ``diagnose``; ``preview(callback)``: hands a device
    preview of the file over to draw while the rest is read (from any thread:
    ``gapscope.parsers.preview.EarlyLoad.on_preview``), and ``preview_drawn()`` is
    called once it is drawn, or at once when it is not shown (the load waits for it);
    ``progress() -> float | None``: the share of the file decoded (default
    ``gapscope.parsers.detect.load_progress``); ``on_ready(app, screen)``: called after
    the whole trace's screen first refreshes (benchmarks time first paint with it);
    ``extra_screens``: name -> screen factory, installed on the app (the exercise
    mode's hook); ``keymap``: binding id -> keys (``{"gap.next": "n,j"}``, Textual's
    keymap).
    """

    params: Params | None = None
    loader: Callable[[str], Trace] | None = None
    diagnose: Callable[[Trace], Diagnosis | None] | None = None
    early_gaps: Callable[[Trace], Any] | None = None
    ready_diagnosis: Callable[[Trace], Diagnosis | None] | None = None
    preview: Callable[[Callable[[Trace], None]], None] | None = None
    preview_drawn: Callable[[], None] | None = None
    progress: Callable[[], float | None] | None = None
    on_ready: Callable | None = None
    extra_screens: Mapping[str, Callable[[], Screen]] = dataclasses.field(default_factory=dict)
    keymap: Mapping[str, str] | None = None


@dataclasses.dataclass(eq=False)
class Session:
    """What the viewer has of its trace, written by the app as its workers report.

    ``path``: the file's path (None: a ``Trace`` was given); ``params``: the
    thresholds the diagnosis runs with; ``preview``: the device lanes read first, and
    ``preview_gaps`` theirs; ``trace``: the whole trace; ``early``: its gaps before
    their causes (the preview's, carried over when they are the same); ``diagnosis``:
    its ``Diagnosis``; ``error``: why the load failed (phase ``FAILED``) or why there is
    no diagnosis (phase ``DIAGNOSED``), one line; ``findings_pending``: the diagnosis
    is in (phase ``DIAGNOSED``, its causes drawn) and its findings are being computed
    (``gapscope.tui.messages.FindingsReady`` clears it).
    """

    path: str | None
    params: Params
    preview: Trace | None = None
    preview_gaps: Gaps | None = None
    trace: Trace | None = None
    early: Gaps | None = None
    diagnosis: Diagnosis | None = None
    error: str | None = None
    findings_pending: bool = False

    @classmethod
    def of(cls, trace: Trace, diagnosis: Diagnosis | None = None, params: Params | None = None) -> Session:
        """A session of an already loaded ``trace`` (and its ``diagnosis``)."""
        path = getattr(trace.source, "path", None)
        return cls(path=path, params=params or Params(), trace=trace, diagnosis=diagnosis)

    @property
    def warnings(self) -> tuple:
        """The loader's warnings of the whole trace (of the preview before it)."""
        shown = self.trace if self.trace is not None else self.preview
        return tuple(shown.warnings) if shown is not None else ()
