"""The viewer's two pieces of background work, run in the app's thread workers
(``gapscope.tui.app.GapscopeApp``): loading the file and diagnosing the trace. Each
reports by posting a message (``gapscope.tui.messages``) through ``post`` (Textual's
``post_message``, safe from any thread); nothing polls them. The garbage collector's
handling of what they produce (a replaced preview collected, the loaded trace frozen
out of the collector's scans) is done here, where the load's memory is owned.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.worker import Worker

from gapscope.parsers.model import Trace
from gapscope.tui.findings_view import findings_of
from gapscope.tui.messages import Diagnosed, FindingsReady, GapsFound, LoadFailed, LoadProgress, TraceLoaded
from gapscope.tui.session import ViewOptions

if TYPE_CHECKING:  # the diagnosis module is imported by the worker that makes one
    from gapscope.analysis.diagnose import Diagnosis

__all__ = ["cancellable", "load", "diagnose", "forget", "FORGET_PREVIEW_S", "FREEZE_WAIT_S"]

#: Longest wait (s) for a replaced preview screen to be let go of and collected.
FORGET_PREVIEW_S = 2.0
#: Longest wait (s) of the freeze after a diagnosis for that collection.
FREEZE_WAIT_S = 5.0
#: How often (s) a worker waiting for its thread looks at whether it was cancelled
#: (and the load at how far the file is).
WAIT_STEP_S = 0.05
#: The shortest time (s) between two ``LoadProgress`` of a load: each repaints the
#: loading screen, and a repaint holds the interpreter from the load's own threads
#: (at 1M events, a figure every 0.05 s made the load ~25% slower than every 0.25 s).
PROGRESS_STEP_S = 0.25


def cancellable(
    fn: Callable, arg, worker: Worker, name: str = "gapscope-load", waiting: Callable[[], None] | None = None
):
    """Run ``fn(arg)`` in a daemon thread named ``name``, looking at ``worker.is_cancelled``
    every ``WAIT_STEP_S`` (and calling ``waiting()`` then, when given).

    Returns ``fn``'s result, re-raises its exception, or returns None as soon as the
    worker is cancelled (the daemon thread is abandoned and dies with the process, so
    Escape never waits for a long parse to finish).
    """
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn(arg)
        except BaseException as exc:  # noqa: BLE001 - handed to the worker below
            box["error"] = exc

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    while t.is_alive():
        t.join(WAIT_STEP_S)
        if worker.is_cancelled:
            return None
        if waiting is not None:
            waiting()
    if "error" in box:
        raise box["error"]
    return box["value"]


def load(path: str, options: ViewOptions, post: Callable, worker: Worker) -> None:
    """Load ``path`` with ``options.loader``; post ``LoadProgress`` when the share
    decoded (``options.progress``) or the whole seconds since the start change (at
    most every ``PROGRESS_STEP_S``), then
    ``TraceLoaded`` or ``LoadFailed`` (one line, never a traceback, a ``SystemExit``
    of the loader's included; nothing once ``worker`` is cancelled)."""
    from gapscope.parsers.detect import load_progress
    from gapscope.parsers.errors import TraceFormatError

    if options.loader is None:
        raise ValueError("ViewOptions.loader is not set (gapscope.tui.factory.make_app sets it)")
    loader, progress = options.loader, options.progress or load_progress
    t0 = time.monotonic()
    said: list = [(None, 0), t0]  # the figure last posted, and when

    def waiting() -> None:  # in this worker's thread, while the loader's runs
        t = time.monotonic()
        if t - said[1] < PROGRESS_STEP_S:
            return
        try:
            share = progress()
        except Exception:  # noqa: BLE001 - a progress figure is never worth a failed load
            share = None
        now = (None if share is None else int(100 * share), int(t - t0))
        if now != said[0]:
            said[:] = [now, t]
            post(LoadProgress(share, now[1]))

    try:
        trace = cancellable(loader, path, worker, waiting=waiting)
    except TraceFormatError as exc:
        if not worker.is_cancelled:
            post(LoadFailed(str(exc)))
        return
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a loader fault (or a library's sys.exit): one line
        if not worker.is_cancelled:
            post(LoadFailed(f"{path}: cannot load ({type(exc).__name__}: {exc})"))
        return
    if trace is not None and not worker.is_cancelled:
        post(TraceLoaded(trace))


def diagnose(
    trace: Trace,
    options: ViewOptions,
    find_early: bool,
    forgotten: threading.Event,
    post: Callable,
    worker: Worker,
) -> None:
    """Diagnose ``trace`` (``options.diagnose``; first its gaps, ``options.early_gaps``,
    when ``find_early``) and post ``GapsFound``, then ``Diagnosed`` as soon as the
    diagnosis is in (its causes are drawn then), then ``FindingsReady`` once its
    findings are computed here, off the UI thread (at 5M events they took seconds,
    which the causes waited for); abandoned, not waited for, when the app quits first.
    ``options.ready_diagnosis``, asked first: a diagnosis read beside the load (a
    cached trace's), posted at once, with no early gaps and no ``options.diagnose``.

    Everything loaded lives as long as the app: once diagnosed it is frozen out of the
    cyclic collector's scans (``gc.freeze``), so per-frame allocations do not trigger
    full-heap collections. A preview the trace replaced is garbage held by cycles (its
    widgets): the freeze waits for ``forgotten`` (``forget``; at most
    ``FREEZE_WAIT_S``), or it would keep it for good.
    """
    diagnosis, error = _ready(trace, options), None
    if diagnosis is None:
        if find_early and options.early_gaps is not None:
            try:
                early = options.early_gaps(trace)
            except Exception:  # noqa: BLE001 - the gaps come with the diagnosis then
                early = None
            if early is not None and not worker.is_cancelled:
                post(GapsFound(early))
        if options.diagnose is None:
            return
        try:
            diagnosis = cancellable(options.diagnose, trace, worker, name="gapscope-diagnose")
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - show the trace without gaps rather than nothing
            error = f"diagnosis failed: {type(exc).__name__}: {exc}"
    if worker.is_cancelled:
        return
    forgotten.wait(FREEZE_WAIT_S)
    gc.freeze()
    post(Diagnosed(diagnosis, error, findings_follow=diagnosis is not None))
    if diagnosis is not None:
        _finish(trace, diagnosis, post, worker)


def _ready(trace: Trace, options: ViewOptions) -> Diagnosis | None:
    """``options.ready_diagnosis(trace)``, or None (none given, none there, or it failed)."""
    if options.ready_diagnosis is None:
        return None
    try:
        return options.ready_diagnosis(trace)
    except Exception:  # noqa: BLE001 - it is diagnosed here then
        return None


def _finish(trace: Trace, diagnosis: Diagnosis, post: Callable, worker: Worker) -> None:
    """``diagnose``'s last steps, off the UI thread: the findings of the diagnosis
    shown (``FindingsReady``), what they allocated frozen, the file's args scanned."""
    found = cancellable(findings_of, diagnosis, worker, name="gapscope-findings")  # kept in its derived
    if worker.is_cancelled:
        return
    post(FindingsReady(diagnosis, found))
    gc.freeze()  # what the findings allocated, kept as long as the diagnosis
    # some cards read an event's args (a copied tensor's shape), and the first read
    # of a file's args scans its whole text (hta/mtia_rank_0: 0.55 s): done here,
    # off the UI thread, so the card does not wait for it
    if len(trace) and not worker.is_cancelled:
        try:
            trace.args_of(len(trace) - 1)
        except Exception:  # noqa: BLE001 - a card reads them itself then
            pass


async def forget(popped, gone: tuple[weakref.ref, ...], forgotten: threading.Event) -> None:
    """Once the preview screen is popped (``popped`` awaited), collect it and its
    trace (``gone``: weak references to them; its widgets hold them in cycles, which
    Textual lets go of over a few frames) before the diagnosis freezes what is alive
    for good; given up after ``FORGET_PREVIEW_S``. Sets ``forgotten`` either way."""
    try:
        await popped
        give_up = time.monotonic() + FORGET_PREVIEW_S
        while True:
            gc.collect()
            if all(ref() is None for ref in gone) or time.monotonic() > give_up:
                break
            await asyncio.sleep(0.05)
    finally:
        forgotten.set()
