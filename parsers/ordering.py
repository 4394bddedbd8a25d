"""The order of events in a ``Trace`` (``gapscope.parsers.model``), on plain arrays.

``sort_order`` gives the (lane, start_ns, -dur_ns) order of ``docs/architecture.md``;
``nesting_depth`` counts the events still open on a lane at each start. All times are
int64 nanoseconds. A leaf: numpy only, nothing of the trace model, so that
``Trace.from_columns`` and the loaders can use it without a cycle.
"""

from __future__ import annotations

import numpy as np

__all__ = ["sort_order", "nesting_depth"]


def sort_order(lane: np.ndarray, start: np.ndarray, dur: np.ndarray, nlanes: int) -> np.ndarray | None:
    """The stable order that sorts events by (lane, start, -dur): equal to
    ``np.lexsort((-dur, start, lane))``, or None when the input is already in that order.

    Cheap for traces whose lanes are each already in time order (Kineto writes them
    so): one stable radix sort of the int16 lane ids, then only lanes found out of
    order are sorted (timsort on start, a full lexsort when equal starts need the
    longer event first).
    """
    n = int(lane.shape[0])
    if n < 2:
        return None
    if nlanes < (1 << 15) and lane.min() >= 0 and lane.max() < (1 << 15):
        if bool((lane[1:] >= lane[:-1]).all()):
            order = None
        else:
            order = np.argsort(lane.astype(np.int16), kind="stable")  # radix sort
    else:
        order = np.argsort(lane, kind="stable")
    ln = lane if order is None else lane[order]
    s = start if order is None else start[order]
    d = dur if order is None else dur[order]
    same_lane = ln[1:] == ln[:-1]
    bad = same_lane & ((s[1:] < s[:-1]) | ((s[1:] == s[:-1]) & (d[1:] > d[:-1])))
    if not bad.any():
        return order
    if order is None:
        order = np.arange(n, dtype=np.int64)
    for lane_id in sorted(set(ln[1:][bad].tolist())):
        a = int(np.searchsorted(ln, lane_id, side="left"))
        b = int(np.searchsorted(ln, lane_id, side="right"))
        ss, dd = s[a:b], d[a:b]
        o = np.argsort(ss, kind="stable")  # timsort: near-linear on near-sorted lanes
        so, do = ss[o], dd[o]
        if bool(((so[1:] == so[:-1]) & (do[1:] > do[:-1])).any()):
            o = np.lexsort((-dd, ss))
        order[a:b] = order[a:b][o]
    return order


def nesting_depth(
    start: np.ndarray, dur: np.ndarray, lane_offsets: np.ndarray, apart: np.ndarray | None = None
) -> np.ndarray:
    """int16 depth of each event = number of earlier events on its lane still open at its start.

    ``start``/``dur``: int64 ns, sorted by (lane, start, -dur); ``lane_offsets`` (int64,
    lanes + 1): lane ``k`` is ``[lane_offsets[k], lane_offsets[k+1])``. An earlier
    event j is open at start_i when end_j > start_i; when end_j == start_i and both
    are zero-length at the same instant it is *not* counted. Vectorised per lane with
    ``searchsorted`` on sorted ends; depths above the int16 range are clipped.

    ``apart`` (bool, one per event): events that stay at depth 0 and out of the
    nesting of the other events of their lane (Kineto ``cuda_sync`` markers drawn on a
    stream overlap the kernels still running there: a wait is never a kernel's child).
    """
    depth = np.zeros(start.shape[0], dtype=np.int16)
    nested_of: dict[int, np.ndarray] = {}  # lane with events apart -> its other events
    if apart is not None and apart.any():
        for k in np.unique(np.searchsorted(lane_offsets, np.flatnonzero(apart), side="right") - 1).tolist():
            a, b = int(lane_offsets[k]), int(lane_offsets[k + 1])
            nested_of[k] = a + np.flatnonzero(~apart[a:b])
    for k in range(lane_offsets.shape[0] - 1):
        a, b = int(lane_offsets[k]), int(lane_offsets[k + 1])
        nested = nested_of.get(k)
        if nested is not None:
            if nested.size >= 2:
                depth[nested] = _lane_depth(start[nested], dur[nested])
        elif b - a >= 2:
            depth[a:b] = _lane_depth(start[a:b], dur[a:b])
    return depth


def _lane_depth(s: np.ndarray, d: np.ndarray) -> np.ndarray:
    """``nesting_depth`` of the events of one lane: ``s``/``d`` sorted by (start, -dur)."""
    e = s + d
    if bool((s[1:] >= e[:-1]).all()):  # each event ends before the next starts (a stream's kernels)
        return np.zeros(s.shape[0], dtype=np.int16)
    # Events before i in sort order: 0..i-1. Those closed by s_i: end <= s_i.
    # All events j < i have start_j <= s_i; events j > i have start_j >= s_i, so
    # end_j >= s_i, and they are counted by "end <= s_i" only when end_j == s_i,
    # i.e. zero-length events at s_i sorted after i.
    e_sorted = np.sort(e, kind="stable")  # timsort: ends of nested ranges are nearly in order
    closed = np.searchsorted(e_sorted, s, side="right")
    idx = np.arange(s.shape[0])
    # zero-length events at exactly s_i that sort at or after i (same start):
    # count of events with start == s_i and end == s_i at positions >= i.
    same_start_last = np.searchsorted(s, s, side="right")
    zero = (e == s).astype(np.int64)
    zc = np.concatenate(([0], np.cumsum(zero)))
    zero_after = zc[same_start_last] - zc[idx]
    depth = idx - (closed - zero_after)
    # Events j < i with start == s_i and end == s_i (zero-length) are closed already,
    # counted in `closed`; events with the same start sorted before i are longer,
    # hence enclosing: correct. Guard against negative values on pathological input.
    np.maximum(depth, 0, out=depth)
    return np.minimum(depth, np.iinfo(np.int16).max).astype(np.int16)
