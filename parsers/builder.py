"""A small list-based builder of ``Trace`` objects.

For loaders of small inputs (ASCII timelines) and for tests that construct traces by
hand. Large files go through the vectorised Chrome/Kineto loader instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from gapscope.parsers.model import CopyKind, Kind, Lane, SourceInfo, Trace, TraceWarning

__all__ = ["TraceBuilder", "ListArgs"]


class ListArgs:
    """``args_of`` of a built trace: ``args[i]`` (a dict, or None for none), by input
    index. An object, not a closure, so the cache (``gapscope.parsers.cache``) can
    store the list."""

    __slots__ = ("args",)

    def __init__(self, args: list[dict | None]) -> None:
        self.args = args

    def __call__(self, i: int) -> dict:
        return self.args[i] or {}


#: dtypes of an event's fields, in the order of the row tuples ``TraceBuilder.event`` keeps.
_COLUMNS = (
    np.int64,  # start_ns
    np.int64,  # dur_ns
    np.int32,  # lane
    np.int32,  # name id
    np.int8,  # kind
    np.int64,  # correlation
    np.int64,  # bytes
    np.int8,  # copy kind
    bool,  # pageable
    np.float64,  # value
    np.int32,  # line
    np.int64,  # external id
)


class TraceBuilder:
    """Collect lanes and events, then ``build()`` an immutable ``Trace``.

    Times are int nanoseconds. Example::

        b = TraceBuilder(format="ascii-events", path="x.txt")
        cpu = b.lane("1", "1", process_name="host", thread_name="main")
        gpu = b.lane("0", "7", process_name="GPU 0", thread_name="stream 7",
                     is_gpu=True, device=0, stream=7)
        launch = b.event(cpu, "cudaLaunchKernel", 0, 5_000, Kind.LAUNCH, correlation=1)
        b.event(gpu, "gemm", 8_000, 100_000, Kind.KERNEL, correlation=1)
        trace = b.build()
    """

    def __init__(self, *, format: str = "chrome", path: str = "", **source_fields: Any) -> None:
        self.source = SourceInfo(path=path, format=format, **source_fields)
        self._lanes: list[dict] = []
        self._lane_index: dict[tuple[str, str], int] = {}
        self._names: list[str] = []
        self._name_index: dict[str, int] = {}
        self._rows: list[tuple] = []  # events added one by one, not yet in ``_chunks``
        self._chunks: list[list[np.ndarray]] = []  # columns of earlier events, in the order of _COLUMNS
        self._chunked = 0  # events in ``_chunks``
        self._args: list[dict | None] = []
        self._flows: list[tuple[int, int]] = []
        self.warnings: list[TraceWarning] = []

    def lane(
        self,
        pid: str,
        tid: str,
        *,
        process_name: str = "",
        thread_name: str = "",
        is_gpu: bool = False,
        device: int = -1,
        stream: int = -1,
    ) -> int:
        """Return the lane index of (pid, tid), creating it on first use."""
        key = (str(pid), str(tid))
        if key in self._lane_index:
            return self._lane_index[key]
        k = len(self._lanes)
        self._lane_index[key] = k
        self._lanes.append(
            dict(
                pid=key[0],
                tid=key[1],
                process_name=process_name or key[0],
                thread_name=thread_name or key[1],
                is_gpu=is_gpu,
                device=device,
                stream=stream,
            )
        )
        return k

    def intern(self, name: str) -> int:
        """Return the name id of ``name``."""
        k = self._name_index.get(name)
        if k is None:
            k = self._name_index[name] = len(self._names)
            self._names.append(name)
        return k

    def event(
        self,
        lane: int,
        name: str,
        start_ns: int,
        dur_ns: int,
        kind: Kind,
        *,
        correlation: int = -1,
        bytes: int = -1,
        copy_kind: CopyKind = CopyKind.NONE,
        pageable: bool = False,
        value: float = float("nan"),
        line: int = 0,
        external_id: int = -1,
        args: dict | None = None,
    ) -> int:
        """Add one event; returns its builder index (usable in ``flow``)."""
        self._rows.append(
            (
                int(start_ns),
                int(dur_ns),
                lane,
                self.intern(name),
                int(kind),
                int(correlation),
                int(bytes),
                int(copy_kind),
                bool(pageable),
                float(value),
                int(line),
                int(external_id),
            )
        )
        self._args.append(args)
        return self._chunked + len(self._rows) - 1

    def add_events(
        self,
        lane: np.ndarray,
        names: Sequence[str],
        name_index: np.ndarray,
        start_ns: np.ndarray,
        dur_ns: np.ndarray,
        kind: np.ndarray,
        *,
        correlation: np.ndarray | None = None,
        copy_kind: np.ndarray | None = None,
        line: np.ndarray | None = None,
        args: dict[int, dict] | None = None,
    ) -> None:
        """Add many events at once, as ``event`` called for each in turn would (same name
        ids, same order, same indices for ``flow``).

        Columns of one length ``n``: ``lane`` (lane indices), ``name_index`` (index into
        ``names``, the distinct names), ``start_ns``/``dur_ns`` (int ns), ``kind``
        (``Kind`` values); optional ``correlation`` (-1 = none), ``copy_kind``
        (``CopyKind``), ``line`` (1-based, 0 = unknown). ``args``: event position in the
        batch → its args dict. Raises ``ValueError`` when column lengths differ.
        """
        n = int(np.asarray(start_ns).shape[0])

        def col(a, dtype, fill):
            a = np.full(n, fill, dtype=dtype) if a is None else np.asarray(a, dtype=dtype)
            if a.shape != (n,):
                raise ValueError(f"column shape {a.shape} != ({n},)")
            return a

        index = col(name_index, np.int64, 0)
        ids = np.zeros(len(names), dtype=np.int32)
        if n:  # names interned in order of first use, as one ``event`` call at a time does
            used, first = np.unique(index, return_index=True)
            for k in used[np.argsort(first, kind="stable")].tolist():
                ids[k] = self.intern(names[k])
        self._flush_rows()
        self._chunks.append(
            [
                col(start_ns, np.int64, 0),
                col(dur_ns, np.int64, 0),
                col(lane, np.int32, 0),
                ids[index],
                col(kind, np.int8, 0),
                col(correlation, np.int64, -1),
                np.full(n, -1, dtype=np.int64),
                col(copy_kind, np.int8, 0),
                np.zeros(n, dtype=bool),
                np.full(n, np.nan, dtype=np.float64),
                col(line, np.int32, 0),
                np.full(n, -1, dtype=np.int64),
            ]
        )
        self._chunked += n
        base = len(self._args)
        self._args.extend([None] * n)
        for k, a in (args or {}).items():
            self._args[base + k] = a

    def _flush_rows(self) -> None:
        """Move the events added one by one into ``_chunks`` (as columns)."""
        if not self._rows:
            return
        cols = list(zip(*self._rows))
        self._chunks.append([np.array(cols[i], dtype=dt) for i, dt in enumerate(_COLUMNS)])
        self._chunked += len(self._rows)
        self._rows = []

    def flow(self, src: int, dst: int) -> None:
        """Link two events (builder indices), e.g. a launch call and its kernel."""
        self._flows.append((src, dst))

    def warn(self, line: int | None, field: str | None, message: str) -> None:
        self.warnings.append(TraceWarning(line, field, message))

    def build(self) -> Trace:
        """Sort and freeze. Flows default to links by ``correlation`` when none were added."""
        lanes = _ordered_lanes(self._lanes)
        remap = np.zeros(len(self._lanes), dtype=np.int32)
        for old, new in lanes:
            remap[old] = new
        lane_objs: list[Lane] = []
        for old, new in lanes:  # in new-index order, each lane once (_ordered_lanes)
            d = self._lanes[old]
            lane_objs.append(Lane(index=new, sort_key=(not d["is_gpu"], d["device"], d["stream"], new), **d))
        self._flush_rows()
        chunks = self._chunks

        def arr(i, dt):
            if not chunks:
                return np.zeros(0, dtype=dt)
            return chunks[0][i] if len(chunks) == 1 else np.concatenate([c[i] for c in chunks])

        lane_col = arr(2, np.int32)
        if lane_col.size:
            lane_col = remap[lane_col]
        args = self._args
        flows = None
        if self._flows:
            f = np.array(self._flows, dtype=np.int64)
            flows = (f[:, 0], f[:, 1])
        return Trace.from_columns(
            start_ns=arr(0, np.int64),
            dur_ns=arr(1, np.int64),
            lane=lane_col,
            name_id=arr(3, np.int32),
            kind=arr(4, np.int8),
            correlation=arr(5, np.int64),
            bytes_=arr(6, np.int64),
            copy_kind=arr(7, np.int8),
            pageable=arr(8, bool),
            value=arr(9, np.float64),
            src_line=arr(10, np.int32),
            external_id=arr(11, np.int64),
            names=self._names,
            lanes=lane_objs,
            source=self.source,
            warnings=self.warnings,
            flows=flows,
            args_loader=ListArgs(args),
        )


def _ordered_lanes(lanes: list[dict]) -> list[tuple[int, int]]:
    """(old index, new index) pairs: CPU lanes first in creation order, then GPU lanes
    by (device, stream)."""
    keyed = sorted(
        range(len(lanes)),
        key=lambda i: (
            lanes[i]["is_gpu"],
            lanes[i]["device"] if lanes[i]["is_gpu"] else 0,
            lanes[i]["stream"] if lanes[i]["is_gpu"] else 0,
            i,
        ),
    )
    return [(old, new) for new, old in enumerate(keyed)]
