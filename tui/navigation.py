"""Navigation as plain objects, separate from drawing (uftrace's TUI does the same).

- ``GapNavigator``: next/previous gap in time order or largest first, optionally only
  gaps of one cause class; O(log g) per step with ``searchsorted`` on precomputed
  orders.
- ``NameSearch``: events whose name contains a query (case-insensitive), in time
  order, with next/previous match from a time.
- ``FlowIndex``: jump from a GPU op to its launch call and back (``Trace.flow_src`` →
  ``Trace.flow_dst``, Kineto ``correlation`` / ``ac2g`` flows).

Pure: numpy only, no Textual.
"""

from __future__ import annotations

import unicodedata

import numpy as np

from gapscope.analysis.types import Cause, Gaps
from gapscope.parsers.model import Trace

__all__ = ["GapNavigator", "NameSearch", "FlowIndex", "TIME", "SIZE"]

TIME = "time"
SIZE = "size"


class GapNavigator:
    """Walk gaps in time order (``TIME``: by start_ns across devices, ties by device)
    or largest first (``SIZE``: ``size_order``, default by duration desc, ties by start).

    ``step(current, direction, mode, cause=None, from_ns=None) -> int | None``.
    """

    def __init__(self, gaps: Gaps, size_order: np.ndarray | None = None) -> None:
        self.gaps = gaps
        n = len(gaps)
        start = np.asarray(gaps.start_ns, dtype=np.int64)
        self.time_order = np.lexsort((np.asarray(gaps.device), start)) if n else np.zeros(0, np.int64)
        if size_order is None:
            size_order = np.lexsort((start, -(np.asarray(gaps.end_ns) - start))) if n else np.zeros(0, np.int64)
        self.size_order = np.asarray(size_order, dtype=np.int64)
        self._rank = {}
        self._pos_by_cause = {}
        for mode, order in ((TIME, self.time_order), (SIZE, self.size_order)):
            rank = np.full(n, -1, dtype=np.int64)
            rank[order] = np.arange(order.size)
            self._rank[mode] = rank
            cause = np.asarray(gaps.cause)[order] if n else np.zeros(0, np.int8)
            for c in Cause:
                self._pos_by_cause[(mode, int(c))] = np.flatnonzero(cause == int(c))
        self._starts_in_time = start[self.time_order] if n else start

    def __len__(self) -> int:
        return len(self.gaps)

    def class_place(self, gap: int, mode: str) -> tuple[int, int]:
        """(k, m): ``gap`` is the k-th (from 1) of the m gaps of its cause class in
        ``mode`` order. One ``searchsorted``."""
        positions = self._pos_by_cause[(mode, int(self.gaps.cause[gap]))]
        k = int(np.searchsorted(positions, int(self._rank[mode][gap]), side="left"))
        return k + 1, int(positions.size)

    def order(self, mode: str) -> np.ndarray:
        return self.time_order if mode == TIME else self.size_order

    def step(
        self,
        current: int | None,
        direction: int,
        mode: str = TIME,
        cause: Cause | int | None = None,
        from_ns: int | None = None,
    ) -> int | None:
        """The gap after (``direction`` +1) or before (-1) ``current`` in ``mode`` order.

        With no ``current``: in TIME mode the first gap starting at or after
        ``from_ns`` (the last one before it when going back); in SIZE mode the
        largest (or smallest going back). ``cause`` restricts to one class. Returns a
        gap index, or None when there is none in that direction (no wrap-around).
        """
        n = len(self.gaps)
        if n == 0:
            return None
        order = self.order(mode)
        if cause is None:
            positions = None
        else:
            positions = self._pos_by_cause[(mode, int(cause))]
            if positions.size == 0:
                return None
        if current is not None and 0 <= current < n:
            pos = int(self._rank[mode][current])
        elif mode == TIME and from_ns is not None:
            k = int(np.searchsorted(self._starts_in_time, from_ns, side="left"))
            pos = k - 1 if direction > 0 else k  # next: first at/after; prev: last before
        else:
            pos = -1 if direction > 0 else order.size
        if positions is None:
            new = pos + (1 if direction > 0 else -1)
            if 0 <= new < order.size:
                return int(order[new])
            return None
        if direction > 0:
            k = int(np.searchsorted(positions, pos, side="right"))
            return int(order[positions[k]]) if k < positions.size else None
        k = int(np.searchsorted(positions, pos, side="left")) - 1
        return int(order[positions[k]]) if k >= 0 else None


def _fold(text: str) -> str:
    """Text for matching: composed (NFC, so ``cafe\u0301`` matches ``café``) and
    case-folded."""
    return unicodedata.normalize("NFC", text).casefold()


class NameSearch:
    """Events whose name contains ``query`` (case-insensitive, composed form, literal text).

    Builds the match list once per query: a scan of the interned names (one per
    distinct name) and one vectorised ``np.isin`` over ``name_id``; next/previous
    match is then a ``searchsorted`` on match start times. ``matches`` holds event
    indices (int64) sorted by (start_ns, index).
    """

    def __init__(self, trace: Trace, query: str) -> None:
        self.trace = trace
        self.query = query
        q = _fold(query)
        ids = trace.name_ids_matching(lambda s: q in _fold(s)) if q else np.zeros(0, np.int32)
        idx = np.flatnonzero(np.isin(trace.name_id, ids)) if ids.size else np.zeros(0, np.int64)
        starts = trace.start_ns[idx]
        o = np.lexsort((idx, starts))
        self.matches = idx[o].astype(np.int64)
        self._starts = starts[o]

    def __len__(self) -> int:
        return int(self.matches.size)

    def step(self, current: int | None, direction: int, from_ns: int = 0) -> int | None:
        """Next (+1) / previous (-1) matching event after ``current`` (an event index
        in the list), or from time ``from_ns`` when ``current`` is not a match.
        Wraps around; None when nothing matches."""
        m = self.matches.size
        if m == 0:
            return None
        pos = None
        if current is not None:
            k = int(np.searchsorted(self._starts, self.trace.start_ns[current], side="left"))
            while k < m and self._starts[k] == self.trace.start_ns[current]:
                if self.matches[k] == current:
                    pos = k
                    break
                k += 1
        if pos is None:
            if direction > 0:
                k = int(np.searchsorted(self._starts, from_ns, side="left"))
                return int(self.matches[k % m])
            k = int(np.searchsorted(self._starts, from_ns, side="left")) - 1
            return int(self.matches[k % m])
        return int(self.matches[(pos + (1 if direction > 0 else -1)) % m])


class FlowIndex:
    """Launch call ↔ GPU op partners from ``trace.flow_src`` / ``trace.flow_dst``."""

    def __init__(self, trace: Trace) -> None:
        self.src = np.asarray(trace.flow_src, dtype=np.int64)
        self.dst = np.asarray(trace.flow_dst, dtype=np.int64)
        self._o_src = np.argsort(self.src, kind="stable")
        self._o_dst = np.argsort(self.dst, kind="stable")
        self._sorted_src = self.src[self._o_src]
        self._sorted_dst = self.dst[self._o_dst]

    def partner(self, event: int) -> int | None:
        """The linked event of ``event``: its launch call when it is a GPU op, its
        first GPU op when it is a launch call; None when it has no flow."""
        for sk, order, other in ((self._sorted_dst, self._o_dst, self.src), (self._sorted_src, self._o_src, self.dst)):
            if sk.size == 0:
                continue
            k = int(np.searchsorted(sk, event, side="left"))
            if k < sk.size and sk[k] == event:
                return int(other[order[k]])
        return None
