"""How a capture reacts to the signals that stop it, the same for a script
(``gapscope.capture.runner``) and a built-in scenario (``gapscope.capture.scenarios``).

- Ctrl-C (SIGINT) raises ``KeyboardInterrupt`` (Python's own handler);
- a stop signal (``STOP_SIGNALS``: SIGTERM from a job scheduler or ``kill``, SIGHUP from
  a closed terminal or SSH session) raises ``Stopped`` while ``stop_on_signals`` is in
  force;

both in the main thread, where the profiled code runs, so the profiler's exit path
writes the trace; ``signals_deferred`` holds any of them back while a trace is being
written and delivers it afterwards. SIGKILL cannot be caught (docs/capture.md).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["STOP_SIGNALS", "Stopped", "stop_on_signals", "signals_deferred", "stop_signal_of"]

#: Signals that stop the capture with its trace written: a job scheduler's stop
#: (SIGTERM), a closed terminal or SSH session (SIGHUP). SIGKILL and ``os._exit``
#: cannot be caught: see docs/capture.md.
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


class Stopped(BaseException):
    """Raised in the main thread by a stop signal (``STOP_SIGNALS``); a
    ``BaseException`` so the profiled code's ``except Exception`` does not swallow it.
    ``signum``: the signal's number."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by signal {signum}")
        self.signum = signum


def stop_signal_of(exc: BaseException | None) -> int | None:
    """The signal that ended a capture with ``exc``: SIGINT for ``KeyboardInterrupt``,
    the stop signal of ``Stopped``; None for any other exception or none."""
    if isinstance(exc, KeyboardInterrupt):
        return int(signal.SIGINT)
    if isinstance(exc, Stopped):
        return exc.signum
    return None


def stop_on_signals() -> Callable[[], None]:
    """Make ``STOP_SIGNALS`` raise ``Stopped`` (main thread only; once: a second
    signal while the trace is written is ignored); returns the undo."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    fired: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        if not fired:
            fired.append(signum)
            raise Stopped(signum)
        fired.append(signum)  # again while writing: ignored, the trace is on its way

    previous = {}
    for sig in STOP_SIGNALS:
        try:
            previous[sig] = signal.signal(sig, on_signal)
        except (ValueError, OSError):
            pass

    def restore() -> None:
        for sig, old in previous.items():
            try:
                signal.signal(sig, old)
            except (ValueError, OSError):
                pass

    return restore


@contextlib.contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold back SIGINT (Ctrl-C) and the ``STOP_SIGNALS`` whose handler raises in
    Python (``stop_on_signals``, a script's own) while the body runs, then deliver the
    first one held, once, to the handler it had. A signal left to the system (its
    default action, or ignored) is not touched.

    Only in the main thread (elsewhere signal handlers cannot be set; the body runs
    unprotected). Used around trace export so an impatient signal cannot cut the file."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed: list[int] = []
    previous: dict[int, Any] = {}
    for sig in (signal.SIGINT, *STOP_SIGNALS):
        try:
            handler = signal.getsignal(sig)
            if callable(handler):  # Python's: not SIG_DFL / SIG_IGN / None
                previous[sig] = signal.signal(sig, lambda signum, frame: pressed.append(signum))
        except (ValueError, OSError):  # pragma: no cover - no signal support
            pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
        if pressed:
            signal.raise_signal(pressed[0])
