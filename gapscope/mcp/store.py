"""Loaded traces kept between tool calls, and the time limit of a call.

An agent asks several questions of one trace (``open_trace``, then ``list_gaps``,
``gap_card``, ``events_around``): the trace is loaded and diagnosed once and kept
here, with its report document (``gapscope.report.document.build_document``, exactly
what ``gapscope report --json`` prints). The store is bounded two ways: at most
``max_count`` traces, and at most ``max_bytes`` of their estimated memory; the trace
used least recently goes first. One trace larger than ``max_bytes`` alone is still
kept (it is the one being asked about) until the next one arrives.

Work runs in a thread of its own, and a call waits for it at most ``limit_s``
seconds (``run_limited``). A load that takes longer goes on to its end and is kept
when it finishes, so asking again later returns at once; two calls for one file
share one load (``get``).
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

__all__ = ["Loaded", "TraceStore", "CallTimeout", "run_limited", "estimate_bytes"]

T = TypeVar("T")


class CallTimeout(Exception):
    """A call ran past its time limit; ``str()`` is one line saying what to do."""


@dataclasses.dataclass(eq=False)
class Loaded:
    """One trace as the tools use it: ``path`` (the real path), ``mtime_ns`` and
    ``size`` of the file when it was loaded (a changed file is loaded again),
    ``trace`` (``gapscope.parsers.model.Trace``), ``diag`` (its ``Diagnosis``, default
    ``Params``), ``doc`` (the ``report --json`` document), ``nbytes`` (estimate)."""

    path: str
    mtime_ns: int
    size: int
    trace: Any
    diag: Any
    doc: dict
    nbytes: int


#: Bytes a kept trace holds beyond its arrays: the report document's fixed part, cards.
FIXED_BYTES = 2 << 20
#: Bytes per gap: the document's per-gap columns as Python lists, top-gap entries.
GAP_BYTES = 1_000


def estimate_bytes(trace, diag) -> int:
    """Memory a kept trace holds, estimated: twice its numpy arrays (the diagnosis
    derives arrays of the events' length: launches, valid masks, the evidence index),
    its names, ``GAP_BYTES`` per gap and ``FIXED_BYTES``. Against ``tracemalloc``
    after a load: 29.1 MB held for a 200,516-event trace with 4,405 gaps (estimate
    33.1 MB), 5.5 MB for the bundled H200 capture (estimate 4.1 MB; within 2x is
    what ``tests/test_mcp_parts.py`` holds it to)."""
    arrays = sum(
        a.nbytes for f in dataclasses.fields(trace) if isinstance(a := getattr(trace, f.name, None), np.ndarray)
    )
    gaps = len(diag.gaps) if diag is not None else 0
    return int(2 * arrays + sum(len(n) + 50 for n in trace.names) + GAP_BYTES * gaps + FIXED_BYTES)


def _file_stamp(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_mtime_ns, st.st_size


class TraceStore:
    """Least-recently-used store of ``Loaded`` traces keyed by real path.

    ``load_fn(path) -> Loaded`` does the work (in the caller's thread: ``get`` is
    meant to run inside ``run_limited``). Thread-safe; a file whose size or
    modification time changed since it was loaded is loaded again. At most
    ``max_loading`` loads run at once (others wait their turn): calls on many files at
    once, or retried after the time limit while their load goes on, cannot hold more
    than that many traces in memory beyond the store."""

    def __init__(
        self,
        load_fn: Callable[[str], Loaded],
        *,
        max_count: int = 4,
        max_bytes: int = 2 << 30,
        max_loading: int = 2,
    ) -> None:
        self._load_fn = load_fn
        self.max_count = max(1, int(max_count))
        self.max_bytes = max(1, int(max_bytes))
        self._items: collections.OrderedDict[str, Loaded] = collections.OrderedDict()
        self._pending: dict[str, concurrent.futures.Future] = {}
        self._lock = threading.Lock()
        self._loading = threading.BoundedSemaphore(max(1, int(max_loading)))

    def load_slot(self) -> threading.BoundedSemaphore:
        """One of the ``max_loading`` slots, as a context manager: work that loads traces
        outside the store (a rank set's files, one after another) holds one while it runs."""
        return self._loading

    def __len__(self) -> int:
        return len(self._items)

    def paths(self) -> list[str]:
        """Real paths held, least recently used first."""
        with self._lock:
            return list(self._items)

    def get(self, path: str) -> Loaded:
        """The loaded trace of ``path`` (a real path), loading it when absent or changed.
        Raises what ``load_fn`` raises (``TraceFormatError`` for a bad file)."""
        stamp = _file_stamp(path)
        with self._lock:
            hit = self._items.get(path)
            if hit is not None and (hit.mtime_ns, hit.size) == stamp:
                self._items.move_to_end(path)
                return hit
            fut = self._pending.get(path)
            owner = fut is None
            if owner:
                fut = concurrent.futures.Future()
                self._pending[path] = fut
        assert fut is not None
        if not owner:
            return fut.result()
        try:
            with self._loading:
                loaded = self._load_fn(path)
        except BaseException as exc:
            with self._lock:
                self._pending.pop(path, None)
            fut.set_exception(exc)
            raise
        with self._lock:
            self._pending.pop(path, None)
            self._items[path] = loaded
            self._items.move_to_end(path)
            self._evict()
        fut.set_result(loaded)
        return loaded

    def _evict(self) -> None:
        """Drop the least recently used until within both bounds (the newest stays)."""
        while len(self._items) > 1 and (
            len(self._items) > self.max_count or sum(x.nbytes for x in self._items.values()) > self.max_bytes
        ):
            self._items.popitem(last=False)


async def run_limited(fn: Callable[[], T], limit_s: float) -> T:
    """``fn()`` in a daemon thread of its own; its result, or ``CallTimeout`` after
    ``limit_s`` seconds (the work goes on and what it stores is kept). Exceptions of
    ``fn`` are raised here. Daemon: a load still running when the client hangs up does
    not hold the process (``gapscope.cli.run`` ends it with ``os._exit``)."""
    import anyio

    fut: concurrent.futures.Future = concurrent.futures.Future()

    def work() -> None:
        try:
            fut.set_result(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting call, which raises it
            fut.set_exception(exc)

    threading.Thread(target=work, name="gapscope-mcp-call", daemon=True).start()
    with anyio.move_on_after(limit_s):
        # the waiting thread, not the work, is what a cancelled wait abandons
        return await anyio.to_thread.run_sync(fut.result, abandon_on_cancel=True)
    raise CallTimeout(
        f"still working after the {limit_s:g} s limit of a call; the work goes on and its result is kept: "
        "call again in a while (or start the server with a larger --time-limit)"
    )
