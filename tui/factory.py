"""``make_app``: the one factory that builds the viewer for the CLI, tests and benchmarks."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from gapscope.parsers.model import Trace
from gapscope.tui.app import GapscopeApp

__all__ = ["make_app", "default_diagnose", "default_early_gaps"]


def default_diagnose(trace: Trace, params=None):
    """``gapscope.analysis.diagnose(trace, params)`` through the diagnosis cache
    (``gapscope.analysis.diagnosis_cache.diagnose_cached``: read back when the trace's
    file was diagnosed before, its findings included); None when the analysis package
    lacks it."""
    try:
        from gapscope.analysis.diagnosis_cache import diagnose_cached
    except ImportError:
        return None
    return diagnose_cached(trace, params)


def default_early_gaps(trace: Trace, params=None):
    """``gapscope.analysis.gaps.interior_gaps(trace, params.min_gap_ns)``: the gaps of
    the default diagnosis drawn before their causes."""
    from gapscope.analysis.gaps import interior_gaps
    from gapscope.analysis.types import Params

    return interior_gaps(trace, (params or Params()).min_gap_ns)


def make_app(
    source: str | os.PathLike | Trace,
    *,
    params=None,
    diagnosis=None,
    loader: Callable | None = None,
    diagnose: Callable | None = None,
    extra_screens: dict | None = None,
    on_ready: Callable | None = None,
    keymap: dict[str, str] | None = None,
    preview: Callable | None = None,
    early_gaps: Callable | None = None,
    preview_drawn: Callable[[], None] | None = None,
) -> GapscopeApp:
    """Build the app for ``source``: a trace path (loaded in a worker) or a ``Trace``.

    ``params``: ``gapscope.analysis.types.Params`` for the diagnosis; ``diagnosis``: a ready
    ``Diagnosis`` (with a ``Trace`` source the trace screen then opens at once, with
    no worker); ``loader(path) -> Trace`` (default ``gapscope.parsers.load``) and
    ``diagnose(trace) -> Diagnosis`` (default ``gapscope.analysis.diagnose``) can be replaced
    (tests inject slow or failing ones); ``extra_screens``: name → screen factory,
    installed on the app (hook for the exercise mode); ``on_ready(app, screen)``: called
    after the trace screen's first refresh (benchmarks time first paint with it);
    ``keymap``: binding id → keys (e.g. ``{"gap.next": "n,j"}``), Textual's keymap;
    ``preview(callback)``: hands over a device preview of the trace to draw while it
    loads (``gapscope.parsers.detect.EarlyLoad.on_preview``), and ``preview_drawn()`` is
    called once it is drawn (``EarlyLoad.preview_drawn``: the load waits for it). With the default
    ``diagnose`` the trace screen draws the gaps between each GPU's first and last
    kernel before their causes (``default_early_gaps``; on the preview too);
    ``early_gaps(trace) -> Gaps`` replaces them (with another ``diagnose``, none are
    drawn unless given: they must be that diagnosis's own gaps).
    """
    if loader is None:
        from gapscope.parsers import load

        loader = load
    if diagnose is None:  # its gaps are drawn first; another diagnosis's may differ
        diagnose = lambda t: default_diagnose(t, params)  # noqa: E731
        if early_gaps is None:
            early_gaps = lambda t: default_early_gaps(t, params)  # noqa: E731
    if isinstance(source, os.PathLike):
        source = str(Path(source))
    app = GapscopeApp(
        source,
        loader=loader,
        diagnose=diagnose,
        diagnosis=diagnosis,
        extra_screens=extra_screens,
        on_ready=on_ready,
        preview=preview,
        early_gaps=early_gaps,
        preview_drawn=preview_drawn,
    )
    if keymap:
        app.set_keymap(keymap)
    return app
