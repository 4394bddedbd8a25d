"""Work begun in a thread beside the caller's own: ``Beside(fn, *args)``, whose call
gives ``fn(*args)``'s result.

What it is for: numpy work that lets go of the interpreter (sorts, searches, large
element-wise passes) on a second core while the caller does other work of the same
kind (``Trace.from_columns``'s nesting depth, ``analysis.diagnose``'s warm-up
evidence). Where no thread can be started (the interpreter is shutting down: a load
or a diagnosis from an ``atexit`` hook, or from a thread still running after the main
thread returned; the system refuses one), ``fn`` runs in the caller's thread when the
result is asked for: the same result, later.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["Beside"]

T = TypeVar("T")


class Beside(Generic[T]):
    """``fn(*args)`` begun in a daemon thread named ``name``; calling the object waits
    for it and returns its result, or raises what it raised (once: the exception, and
    the frames its traceback holds, are not kept after). ``fn`` runs in the caller's
    thread at the call instead when the thread cannot be started."""

    def __init__(self, fn: Callable[..., T], *args: object, name: str = "gapscope-beside") -> None:
        self._work: tuple[Callable[..., T], tuple] | None = (fn, args)
        self._box: dict = {}
        self._thread: threading.Thread | None = threading.Thread(target=self._run, name=name, daemon=True)
        try:
            self._thread.start()
        except RuntimeError:  # "can't create new thread at interpreter shutdown", or none left
            self._thread = None

    def _run(self) -> None:
        work, self._work = self._work, None
        if work is None:
            return
        try:
            self._box["result"] = work[0](*work[1])
        except BaseException as exc:  # noqa: BLE001 - raised to whoever asks for the result
            self._box["error"] = exc

    def __call__(self) -> T:
        if self._thread is None:
            self._run()
        else:
            self._thread.join()
        if "error" in self._box:
            raise self._box.pop("error")
        return self._box["result"]
