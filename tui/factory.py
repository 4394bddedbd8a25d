"""``make_app``: the one factory that builds the viewer for the CLI, tests and benchmarks."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from gapscope.analysis.types import Params
from gapscope.parsers.model import Trace
from gapscope.tui.app import GapscopeApp
from gapscope.tui.session import Session, ViewOptions

__all__ = ["make_app", "default_diagnose", "default_early_gaps", "default_ready_diagnosis"]


def default_diagnose(trace: Trace, params=None):
    """``gapscope.analysis.diagnose(trace, params)`` through the diagnosis cache
    (``gapscope.analysis.diagnosis_cache.diagnose_cached``: read back when the trace's
    file was diagnosed before, its findings included; else returned before its
    findings, so that its causes are drawn first: ``findings_first=False``); None when
    the analysis package lacks it."""
    try:
        from gapscope.analysis.diagnosis_cache import diagnose_cached
    except ImportError:
        return None
    return diagnose_cached(trace, params, findings_first=False)


def default_ready_diagnosis(trace: Trace, params=None):
    """The diagnosis cache's entry for ``trace`` and ``params``
    (``gapscope.analysis.diagnosis_cache.cached_diagnosis``: None when there is none,
    found without reading the trace's columns): the worker asks for it before it
    finds the early gaps, so that a cached trace's causes are drawn right after its
    first paint; None when the analysis package lacks it."""
    try:
        from gapscope.analysis.diagnosis_cache import cached_diagnosis
    except ImportError:
        return None
    return cached_diagnosis(trace, params)


def default_early_gaps(trace: Trace, params=None):
    """``gapscope.analysis.gaps.interior_gaps(trace, params.min_gap_ns)``: the gaps of
    the default diagnosis drawn before their causes."""
    from gapscope.analysis.gaps import interior_gaps

    return interior_gaps(trace, (params or Params()).min_gap_ns)


def make_app(source: str | os.PathLike | Trace, options: ViewOptions | None = None, diagnosis=None) -> GapscopeApp:
    """Build the app for ``source``: a trace path (loaded in a worker) or a ``Trace``.

    ``options``: what the caller chose (``gapscope.tui.session.ViewOptions``; the
    defaults filled in here: ``loader`` ``gapscope.parsers.load``, ``diagnose``
    ``default_diagnose`` with ``options.params``, and then ``early_gaps``
    ``default_early_gaps`` with them: the gaps between each GPU's first and last
    kernel, drawn before their causes (on the preview too); with another
    ``diagnose`` none are drawn unless given, as they must be that diagnosis's own).
    ``diagnosis``: a ready ``Diagnosis`` of a ``Trace`` source: its screen opens at
    once, with no worker.
    """
    options = options or ViewOptions()
    params = options.params or Params()
    fill: dict = {"params": params}
    if options.loader is None:
        from gapscope.parsers import load

        fill["loader"] = load
    if options.diagnose is None:  # its gaps are drawn first; another diagnosis's may differ
        fill["diagnose"] = lambda t: default_diagnose(t, params)
        if options.early_gaps is None:
            fill["early_gaps"] = lambda t: default_early_gaps(t, params)
        if options.ready_diagnosis is None:
            fill["ready_diagnosis"] = lambda t: default_ready_diagnosis(t, params)
    options = dataclasses.replace(options, **fill)
    if isinstance(source, os.PathLike):
        source = str(Path(source))
    if isinstance(source, str):
        session = Session(path=source, params=params)
    else:
        session = Session.of(source, diagnosis, params)
    app = GapscopeApp(session, options)
    if options.keymap:
        app.set_keymap(dict(options.keymap))
    return app
