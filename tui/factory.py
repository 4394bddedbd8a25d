"""``make_app``: the one factory that builds the viewer for the CLI, tests and benchmarks."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from gapscope.parsers.model import Trace
from gapscope.tui.app import GapscopeApp

__all__ = ["make_app", "default_diagnose"]


def default_diagnose(trace: Trace, params=None):
    """``gapscope.analysis.diagnose(trace, params)``; None when the analysis package lacks it."""
    try:
        from gapscope.analysis import diagnose
    except ImportError:
        return None
    if params is None:
        return diagnose(trace)
    return diagnose(trace, params=params)


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
    loads (``gapscope.parsers.detect.EarlyLoad.on_preview``).
    """
    if loader is None:
        from gapscope.parsers import load

        loader = load
    if diagnose is None:
        diagnose = lambda t: default_diagnose(t, params)  # noqa: E731
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
    )
    if keymap:
        app.set_keymap(keymap)
    return app
