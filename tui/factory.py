"""``make_app``: the one factory that builds the viewer for the CLI, tests and benchmarks."""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path

from gapscope.analysis.types import Params
from gapscope.parsers.cache.store import defer_writes
from gapscope.parsers.model import Trace
from gapscope.tui.app import GapscopeApp
from gapscope.tui.findings_view import findings_of
from gapscope.tui.session import Session, ViewOptions

__all__ = [
    "make_app",
    "default_diagnose",
    "default_early_gaps",
    "default_ready_diagnosis",
    "default_has_cached",
    "DiagnosisAhead",
    "early_options",
]

#: How long the viewer's worker waits for ``DiagnosisAhead.begin`` to start once the
#: load said it would call it (it is called right after the trace is handed over).
AHEAD_START_WAIT_S = 5.0
#: The longest ``DiagnosisAhead.begin`` waits for the viewer's first frame (a preview's,
#: or the whole trace's: the worker asks for the diagnosis after it) before it begins.
AHEAD_PAINT_WAIT_S = 5.0


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


def default_has_cached(trace: Trace, params=None) -> bool:
    """Whether the diagnosis cache holds an entry for ``trace`` and ``params``
    (``gapscope.analysis.diagnosis_cache.has_entry``: one ``stat``); False when the
    analysis package lacks it."""
    try:
        from gapscope.analysis.diagnosis_cache import has_entry
    except ImportError:
        return False
    return has_entry(trace, params)


class DiagnosisAhead:
    """The viewer's default diagnosis (``default_diagnose`` with ``params``) begun by
    the load's thread as soon as the trace is loaded (``begin``, which
    ``gapscope.parsers.preview.EarlyLoad.after_load`` calls), while the viewer draws
    the whole trace; its findings follow there. The viewer's worker takes it as
    ``ViewOptions.diagnose`` (``__call__`` waits for it); as
    ``ViewOptions.ready_diagnosis`` (``ready``) it gives None for a trace it
    diagnoses, and reads a cached trace's entry itself, as ``default_ready_diagnosis``
    does (``begin`` leaves a cached trace alone).

    Why there: the diagnosis runs in the thread whose memory the trace's build has
    just freed, and begins before the whole trace's first frame rather than after it.
    At 5M events it took 1.7-1.9 s there against 2.3-2.5 s in a new thread, which
    faulted 34k pages in (0.7 s of system time), and began 0.6 s earlier.
    It begins once the viewer has painted its first frame (``painted``: a device
    preview's; else when the worker asks for it, after the whole trace's first frame),
    which it would otherwise slow: without a preview, the first lanes of a 5M-event
    trace came 13 % later with the diagnosis begun at once. A cached entry is not
    read there either: the read holds the interpreter beside the viewer's first frame
    (0.4 s later at 5M, measured before).

    A trace it was not begun on (another path; a load over before ``begin_after``)
    is diagnosed by the caller, as without it. A preview the viewer does not show (the
    load was over first, or a prompt covers the screen) counts as painted: the
    diagnosis may then run beside the whole trace's first frame."""

    def __init__(self, params: Params | None = None) -> None:
        self.params = params or Params()
        self._expected = False
        self._begun = threading.Event()  # ``begin`` has its trace
        self._painted = threading.Event()  # the viewer's first frame is drawn, or it asks
        self._done = threading.Event()  # its diagnosis is in, or failed
        self._writes = threading.Event()  # the trace cache's write may go on (``begin_after``)
        self._trace: Trace | None = None
        self._cached = False
        self._box: dict = {}

    def begin_after(self, early) -> None:
        """Have ``early`` (a ``gapscope.parsers.preview.EarlyLoad``) call ``begin`` with
        its trace once it is loaded, when its load is not over yet; the trace cache's
        write of that load waits for the diagnosis (``parsers.cache.store.defer_writes``),
        which the causes on the screen wait for."""
        defer_writes(self._writes, early.path)
        self._expected = bool(early.after_load(self.begin, or_else=self._writes.set))
        if not self._expected:
            self._writes.set()

    def begin(self, trace: Trace) -> None:
        """In the load's thread: the diagnosis of ``trace`` (``default_diagnose``), once
        the first frame is drawn (``painted``, or the worker asks; ``AHEAD_PAINT_WAIT_S``
        at most), then its findings (kept in its ``derived``); nothing for a trace whose
        diagnosis is cached. What the diagnosis raises is raised to the caller of
        ``__call__``."""
        self._trace = trace
        try:
            self._cached = default_has_cached(trace, self.params)
        except Exception:  # noqa: BLE001 - not known to be cached: diagnosed here
            self._cached = False
        finally:
            self._begun.set()
        if self._cached:
            self._writes.set()
            return
        got = None
        try:
            self._painted.wait(AHEAD_PAINT_WAIT_S)
            got = self._box["diagnosis"] = default_diagnose(trace, self.params)
        except BaseException as exc:  # noqa: BLE001 - raised to the caller of __call__
            self._box["error"] = exc
        finally:
            self._done.set()  # whatever happened: ``__call__`` never waits for ever
            self._writes.set()
        if got is not None:
            findings_of(got)  # once: the viewer's worker and the cache's writer wait for them

    def painted(self) -> None:
        """The viewer has drawn its first frame (a device preview): ``begin`` need not
        wait for it."""
        self._painted.set()

    def _diagnosing(self, trace: Trace) -> bool:
        """Whether ``begin`` diagnoses ``trace`` (waiting for it to start, when
        expected); asked by the worker, after the first frame, so ``begin`` goes on."""
        self._painted.set()
        if not (self._expected and self._begun.wait(AHEAD_START_WAIT_S)):
            return False
        return self._trace is trace and not self._cached

    def ready(self, trace: Trace):
        """``ViewOptions.ready_diagnosis``: None for the trace ``begin`` diagnoses,
        else ``default_ready_diagnosis`` (a cached trace's entry, read here)."""
        if self._diagnosing(trace):
            return None
        return default_ready_diagnosis(trace, self.params)

    def __call__(self, trace: Trace):
        """``ViewOptions.diagnose``: the diagnosis ``begin`` computes, waited for (it
        raises what that raised); else ``default_diagnose``."""
        if not self._diagnosing(trace):
            return default_diagnose(trace, self.params)
        self._done.wait()
        if "error" in self._box:
            # raised once, not kept: its traceback holds the failed diagnosis's frames
            raise self._box.pop("error")
        got = self._box.get("diagnosis")
        return got if got is not None else default_diagnose(trace, self.params)  # asked again after a failure


def early_options(early, params: Params | None = None) -> ViewOptions:
    """The viewer's options for a load begun before it (``gapscope TRACE``: ``early``, a
    ``gapscope.parsers.preview.EarlyLoad``): that load is the loader, its device preview
    is drawn first, and the default diagnosis with ``params`` is begun by its thread
    (``DiagnosisAhead``) once the first frame is drawn, its gaps drawn before their
    causes (on the preview too)."""
    params = params or Params()
    ahead = DiagnosisAhead(params)
    ahead.begin_after(early)

    def preview_drawn() -> None:  # the first frame is the preview's: the load and the diagnosis go on
        early.preview_drawn()
        ahead.painted()

    return ViewOptions(
        params=params,
        loader=early,
        diagnose=ahead,
        ready_diagnosis=ahead.ready,
        early_gaps=lambda t: default_early_gaps(t, params),
        preview=early.on_preview,
        preview_drawn=preview_drawn,
    )


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
