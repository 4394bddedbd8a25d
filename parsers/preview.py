"""A load begun early, with a device preview: what a viewer calls to open a trace.

``EarlyLoad(path, preview=True)`` begins ``gapscope.parsers.load(path)`` in a thread
and, for a large Chrome file, hands its device lanes over first
(``gapscope.parsers.chrome.preview``) through ``on_preview``; ``load_with_preview``
is the same in the caller's thread. The loader itself knows nothing of previews: it
runs the hook ``chrome.preview.while_decoding`` gives while its children decode.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from gapscope.parsers.detect import load
from gapscope.parsers.model import Trace

__all__ = ["EarlyLoad", "load_with_preview"]


def load_with_preview(path: str | os.PathLike, on_preview: Callable[[Trace], object]) -> Trace:
    """``load(path)``, calling ``on_preview(trace)`` from this thread, before the load
    ends, with a trace of the file's device lanes alone when the file is a large Chrome
    trace loaded fresh (``chrome.preview.device_preview``), for a viewer to draw first.
    ``on_preview`` may return a ``threading.Event`` that the viewer sets once the
    preview is drawn: the load waits for it before it goes on
    (``chrome.preview.PREVIEW_DRAWN_WAIT_S`` at most). Raises what ``load`` raises."""
    from gapscope.parsers.chrome.preview import while_decoding

    return load(path, while_decoding(on_preview))


class EarlyLoad:
    """``load(path)`` begun in a daemon thread as the object is made; calling it with
    that path waits for it and returns its trace or raises its exception, so it stands
    in for ``load`` as a viewer's loader (any other path is loaded there and then).

    Why: the viewer imports Textual (about 0.4 s of one core) before it asks for the
    trace; begun first, the load's forked decoders run meanwhile. Only the load: the
    diagnosis would take the interpreter from the imports. Abandoning the object (a
    cancelled load) leaves the thread to finish or die with the process.

    ``preview=True`` (``preview_wanted``): the load makes a device preview when it can
    (``load_with_preview``); ``on_preview(callback)`` hands it over, and the load waits
    for ``preview_drawn()`` (bounded) before it goes on.

    ``after_load(then)``: work on the loaded trace done in the load's own thread, once
    its waiter has it (a viewer's diagnosis: ``gapscope.tui.factory.DiagnosisAhead``)."""

    def __init__(self, path: str | os.PathLike, preview: bool = False) -> None:
        self.path = os.fspath(path)
        self._box: dict = {}
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._preview: Trace | None = None
        self._on_preview: Callable[[Trace], None] | None = None
        self.preview_wanted = preview
        self._drawn = threading.Event()  # set by ``preview_drawn``
        self._then: Callable[[Trace], object] | None = None  # ``after_load``'s
        self._or_else: Callable[[], object] | None = None  # ``after_load``'s, for a failed load
        # the modules a load of a file needs, imported here, before the thread: in it
        # they would wait on the interpreter lock against the caller's own imports
        # (Textual's), and the decoders and the preview would fork later (at 1M events
        # on 2 cores the preview came 0.07-0.09 s earlier so)
        import gapscope.parsers.cache.store
        import gapscope.parsers.chrome.decode
        import gapscope.parsers.chrome.preview
        import gapscope.parsers.nsys.files  # noqa: F401

        self._thread = threading.Thread(target=self._run, name="gapscope-early-load", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            if self.preview_wanted:
                self._box["trace"] = load_with_preview(self.path, self._got_preview)
            else:
                self._box["trace"] = load(self.path)
        except BaseException as exc:  # noqa: BLE001 - handed to whoever calls the object
            self._box["error"] = exc
        finally:
            with self._lock:
                self._preview = None  # the whole trace is there: the preview's memory goes
                self._on_preview = None  # and whatever the callback holds (a screen)
                then, self._then = self._then, None
                or_else, self._or_else = self._or_else, None
                self._done.set()  # under the lock: ``after_load`` is either taken or refused
        try:
            if then is not None and "trace" in self._box:
                then(self._box["trace"])
            elif or_else is not None and "trace" not in self._box:
                or_else()
        except Exception:  # noqa: BLE001 - the work's own caller gets nothing from it then
            pass

    def after_load(self, then: Callable[[Trace], object], or_else: Callable[[], object] | None = None) -> bool:
        """Have ``then(trace)`` called with the loaded trace in the load's own thread,
        right after its waiter is handed the trace; False when the load is already
        over (then nothing is called: the caller does that work itself). A load that
        fails calls ``or_else()`` instead, when given. What they raise is dropped.

        Why: a thread's first large allocations fault their pages in, and the load's
        thread has the freed memory of the trace's build at hand. The diagnosis of a
        5M-event trace took 2.3-2.5 s in a new thread (34k page faults, 0.7 s of
        system time) against 1.7 s in the load's (1.7k faults), and it begins before
        the viewer has drawn the whole trace's first frame."""
        with self._lock:
            if self._done.is_set():
                return False
            self._then, self._or_else = then, or_else
            return True

    def _got_preview(self, trace: Trace) -> threading.Event:
        with self._lock:
            self._preview = trace
            callback = self._on_preview
        if callback is not None:
            callback(trace)
        return self._drawn

    def preview_drawn(self) -> None:
        """The viewer's word that it has drawn the preview: the load goes on (its
        decoders stay paused for the preview's first frame, ``load_with_preview``)."""
        self._drawn.set()

    def on_preview(self, callback: Callable[[Trace], None]) -> None:
        """Call ``callback(trace)`` with the device preview once there is one: at once
        when it is already there, else from the load's thread when it comes; never
        when there is none (a small or cached file, or the load ended first)."""
        with self._lock:
            self._on_preview = callback
            trace = self._preview
        if trace is not None and not self._done.is_set():
            callback(trace)

    def __call__(self, path: str | os.PathLike) -> Trace:
        if os.fspath(path) != self.path:
            return load(path)
        self._done.wait()
        if "error" in self._box:
            raise self._box["error"]
        return self._box["trace"]
