"""Ordering and linking helpers for the columnar ``Trace`` (``gapscope.parsers.model``).

``sort_order`` gives the (lane, start_ns, -dur_ns) order of ``docs/ARCHITECTURE.md``;
``_nesting_depth`` counts the events still open on a lane at each start;
``link_by_correlation`` and ``repeated_correlations`` pair CPU runtime calls with GPU
ops by CUDA/CUPTI ``correlation`` id. All times are int64 nanoseconds. Re-exported
from ``gapscope.parsers.model``, where ``Trace.from_columns`` uses them.

Nothing here imports a UI library.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "link_by_correlation",
    "repeated_correlations",
    "sort_order",
]


def link_by_correlation(kind: np.ndarray, correlation: np.ndarray,
                        start_ns: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pair CPU runtime calls with GPU ops sharing a ``correlation`` id (CUDA/CUPTI).

    Returns (src, dst) int64 index arrays (indices into the given arrays). A
    correlation id names one runtime call (CUPTI), which may launch several GPU ops
    (a CUDA graph): each GPU op gets the call with its id. When several calls share
    an id (a broken or merged trace) and ``start_ns`` (int64 ns) is given, a GPU op
    gets the latest of them that starts at or before it (else the earliest one, for
    clock skew), so a reused id never links every op to the first call; without
    ``start_ns`` it gets the first call in array order. Calls or ops without a partner
    are left out. See ``repeated_correlations`` for the count to warn about.
    """
    from gapscope.parsers.model import CPU_CALL_KINDS, GPU_KINDS  # model imports this module

    cpu = np.isin(kind, np.array([int(k) for k in CPU_CALL_KINDS], dtype=np.int8)) & (correlation >= 0)
    gpu = np.isin(kind, np.array([int(k) for k in GPU_KINDS], dtype=np.int8)) & (correlation >= 0)
    ci = np.flatnonzero(cpu)
    gi = np.flatnonzero(gpu)
    if ci.size == 0 or gi.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty
    c_corr = correlation[ci]
    o = np.argsort(c_corr, kind="stable")
    c_sorted = c_corr[o]
    g_corr = correlation[gi]
    pos = np.searchsorted(c_sorted, g_corr, side="left")
    pos_c = np.minimum(pos, c_sorted.size - 1)
    hit = c_sorted[pos_c] == g_corr
    if start_ns is not None and c_sorted.size > 1 and bool((c_sorted[1:] == c_sorted[:-1]).any()):
        # rank all start times together, then search on (correlation rank, start rank)
        c_start, g_start = start_ns[ci], start_ns[gi]
        _, inv = np.unique(np.concatenate((c_start, g_start)), return_inverse=True)
        width = np.int64(inv.max() + 2)
        _, cinv = np.unique(np.concatenate((c_corr, g_corr)), return_inverse=True)
        c_key = cinv[: ci.size].astype(np.int64) * width + inv[: ci.size]
        g_key = cinv[ci.size:].astype(np.int64) * width + inv[ci.size:]
        o = np.argsort(c_key, kind="stable")
        ck = c_key[o]
        before = np.searchsorted(ck, g_key, side="right") - 1
        c_corr_o = c_corr[o]
        ok_before = (before >= 0) & (c_corr_o[np.maximum(before, 0)] == g_corr)
        first = np.minimum(np.searchsorted(c_corr_o, g_corr, side="left"), ck.size - 1)
        pos_c = np.where(ok_before, before, first)
        hit = c_corr_o[pos_c] == g_corr
    return ci[o[pos_c[hit]]].astype(np.int64), gi[hit].astype(np.int64)


def repeated_correlations(kind: np.ndarray, correlation: np.ndarray) -> tuple[int, int, int]:
    """(ids shared by more than one CPU runtime call and carried by a GPU op, calls
    carrying them, one such id or -1): a correlation id should name one call (CUPTI);
    ids that no GPU op carries link nothing and are not counted."""
    from gapscope.parsers.model import CPU_CALL_KINDS, GPU_KINDS  # model imports this module

    cpu = np.isin(kind, np.array([int(k) for k in CPU_CALL_KINDS], dtype=np.int8)) & (correlation >= 0)
    c = np.sort(correlation[cpu])
    if c.size < 2:
        return 0, 0, -1
    dup = c[1:] == c[:-1]
    if not dup.any():
        return 0, 0, -1
    ids, counts = np.unique(c, return_counts=True)
    gpu = np.isin(kind, np.array([int(k) for k in GPU_KINDS], dtype=np.int8))
    many = (counts > 1) & np.isin(ids, correlation[gpu])
    if not many.any():
        return 0, 0, -1
    return int(many.sum()), int(counts[many].sum()), int(ids[many][0])


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


def _nesting_depth(start: np.ndarray, dur: np.ndarray, lane_offsets: np.ndarray) -> np.ndarray:
    """Depth of each event = number of earlier events on its lane still open at its start.

    Input sorted by (lane, start, -dur). An earlier event j is open at start_i when
    end_j > start_i, or when end_j == start_i and both are zero-length at the same
    instant is *not* counted. Vectorised per lane with ``searchsorted`` on sorted ends.
    """
    n = start.shape[0]
    depth = np.zeros(n, dtype=np.int16)
    end = start + dur
    for k in range(lane_offsets.shape[0] - 1):
        a, b = int(lane_offsets[k]), int(lane_offsets[k + 1])
        if b - a < 2:
            continue
        s = start[a:b]
        e = end[a:b]
        # Events before i in sort order: a..i-1. Those closed by s_i: end <= s_i.
        # All events j < i have start_j <= s_i; events j > i have start_j >= s_i, so
        # end_j >= s_i, and they are counted by "end <= s_i" only when end_j == s_i,
        # i.e. zero-length events at s_i sorted after i.
        e_sorted = np.sort(e)
        closed = np.searchsorted(e_sorted, s, side="right")
        idx = np.arange(b - a)
        # zero-length events at exactly s_i that sort at or after i (same start):
        # count of events with start == s_i and end == s_i at positions >= i.
        same_start_last = np.searchsorted(s, s, side="right")
        zero = (e == s).astype(np.int64)
        zc = np.concatenate(([0], np.cumsum(zero)))
        zero_after = zc[same_start_last] - zc[idx]
        d = idx - (closed - zero_after)
        # Events j < i with start == s_i and end == s_i (zero-length) are closed already,
        # counted in `closed`; events with the same start sorted before i are longer,
        # hence enclosing: correct. Guard against negative values on pathological input.
        np.maximum(d, 0, out=d)
        depth[a:b] = np.minimum(d, np.iinfo(np.int16).max).astype(np.int16)
    return depth
