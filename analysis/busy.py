"""Interval unions per device: GPU busy, busy with copies, idle intervals.

Definitions ("Busy and idle" in ``docs/definitions.md``): GPU busy is
the union over all streams of a device of kernel intervals; overlapping events on one
stream are merged, never added (B16). Copies (memcpy, memset) count as busy only for
the "fully idle" figure. GPU events without valid timing (B14: ``ts == 0, dur == 0`` in
an epoch-based trace, or outside ``Trace.extent_ns``) never enter busy/idle arithmetic.
Kineto ``cuda_sync`` records (``Kind.SYNC_MARKER``) are waits, never GPU work (B20).

Everything is vectorised: one sort per union, no Python loop over events.
"""

from __future__ import annotations

import weakref

import numpy as np

from gapscope.parsers.model import Kind, Trace

__all__ = [
    "union_intervals",
    "coverage",
    "complement",
    "valid_timing_mask",
    "device_event_mask",
    "device_union",
    "lane_devices",
    "event_devices",
]

_EMPTY = np.zeros(0, dtype=np.int64)


def union_intervals(start_ns: np.ndarray, end_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of half-open intervals ``[start_ns[i], end_ns[i])``.

    Inputs: int64 arrays of equal length, any order; intervals with ``end <= start``
    are dropped. Returns ``(starts, ends)``: int64 arrays of disjoint intervals sorted by
    start; touching intervals (``start == previous end``) are merged. O(n log n).
    """
    s = np.asarray(start_ns, dtype=np.int64)
    e = np.asarray(end_ns, dtype=np.int64)
    keep = e > s
    if not keep.all():
        s, e = s[keep], e[keep]
    n = s.shape[0]
    if n == 0:
        return _EMPTY.copy(), _EMPTY.copy()
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    run_max = np.maximum.accumulate(e)
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.greater(s[1:], run_max[:-1], out=new[1:])
    first = np.flatnonzero(new)
    last = np.empty_like(first)
    last[:-1] = first[1:] - 1
    last[-1] = n - 1
    return s[first], run_max[last]


def coverage(u_start: np.ndarray, u_end: np.ndarray, a_ns: np.ndarray, b_ns: np.ndarray) -> np.ndarray:
    """Length of ``[a_ns[i], b_ns[i])`` covered by the disjoint sorted union ``u``.

    ``u_start``/``u_end``: output of ``union_intervals``. ``a_ns``/``b_ns``: int64 arrays
    (or scalars) of query bounds, ``a <= b``. Returns int64 ns, same shape as ``a_ns``.
    Prefix sums + ``searchsorted``: O((n + q) log n).
    """
    a = np.asarray(a_ns, dtype=np.int64)
    b = np.asarray(b_ns, dtype=np.int64)
    if u_start.shape[0] == 0:
        return np.zeros(np.broadcast(a, b).shape, dtype=np.int64)
    cum = np.zeros(u_start.shape[0] + 1, dtype=np.int64)
    np.cumsum(u_end - u_start, out=cum[1:])

    def covered_until(x: np.ndarray) -> np.ndarray:
        k = np.searchsorted(u_start, x, side="right") - 1
        kc = np.maximum(k, 0)
        part = np.minimum(x, u_end[kc]) - u_start[kc]
        return np.where(k >= 0, cum[kc] + np.maximum(part, 0), 0)

    return np.maximum(covered_until(b) - covered_until(a), 0)


def complement(
    u_start: np.ndarray, u_end: np.ndarray, window_start_ns: int, window_end_ns: int
) -> tuple[np.ndarray, np.ndarray]:
    """Idle intervals: ``[window_start_ns, window_end_ns)`` minus the union ``u``.

    Returns ``(starts, ends)`` int64, sorted, non-empty intervals only.
    """
    w0, w1 = int(window_start_ns), int(window_end_ns)
    if w1 <= w0:
        return _EMPTY.copy(), _EMPTY.copy()
    s = np.clip(u_start, w0, w1)
    e = np.clip(u_end, w0, w1)
    idle_s = np.concatenate(([w0], e))
    idle_e = np.concatenate((s, [w1]))
    keep = idle_e > idle_s
    return idle_s[keep].astype(np.int64), idle_e[keep].astype(np.int64)


def valid_timing_mask(trace: Trace) -> np.ndarray:
    """Boolean mask of events whose timing may enter busy/idle arithmetic.

    Invalid (B14): ``dur_ns < 0``; ``start_ns == 0 and dur_ns == 0`` while the trace's
    extent starts later or its other timestamps are epoch-based (CUPTI wrote zeros);
    an interval outside ``trace.extent_ns`` (the loader already excluded such events
    from the extent).
    """
    s = trace.start_ns
    d = trace.dur_ns
    lo, hi = trace.extent_ns
    ok = d >= 0
    if hi > lo:
        ok &= (s >= lo) & (s + d <= hi)
    pos = s[s > 0]
    if lo > 0 or (pos.size and int(pos.min()) >= EPOCH_LIKE_NS):
        ok &= ~((s == 0) & (d == 0))
    return ok


#: Timestamps at least this large (ns, about 11.6 days) are epoch-based; a zero start
#: among them is a missing timestamp, not an event at the origin (B14).
EPOCH_LIKE_NS = 10**15


def lane_devices(trace: Trace) -> np.ndarray:
    """int64 array, one per lane: the GPU device of the lane, -1 for CPU lanes (int64:
    a damaged Nsight export's device id can be any integer). Computed once per trace
    (cached on a weak reference to it)."""
    cached = _LANE_DEVICES.get(trace)
    if cached is None:
        cached = np.array([ln.device if ln.is_gpu else -1 for ln in trace.lanes], dtype=np.int64)
        _LANE_DEVICES[trace] = cached
    return cached


_LANE_DEVICES: weakref.WeakKeyDictionary[Trace, np.ndarray] = weakref.WeakKeyDictionary()


def event_devices(trace: Trace) -> np.ndarray:
    """int32 (int64 for ids beyond it) array, one per event, read-only: the GPU device of the event's lane
    (``lane_devices``), -1 on CPU lanes. Computed once per trace (cached on a weak
    reference to it): ``device_event_mask`` is asked a dozen times per diagnosis, and
    this gather was most of each ask (at 5M events, 13 asks took 0.47 s)."""
    cached = _EVENT_DEVICES.get(trace)
    if cached is None:
        lane_dev = lane_devices(trace)
        if lane_dev.size and int(np.abs(lane_dev).max()) < 2**31:
            lane_dev = lane_dev.astype(np.int32)  # half the memory of an event column
        cached = lane_dev[trace.lane] if lane_dev.size else np.full(len(trace), -1, dtype=np.int64)
        cached.flags.writeable = False
        _EVENT_DEVICES[trace] = cached
    return cached


_EVENT_DEVICES: weakref.WeakKeyDictionary[Trace, np.ndarray] = weakref.WeakKeyDictionary()


def device_event_mask(
    trace: Trace, device: int, kinds: tuple[Kind, ...], valid: np.ndarray | None = None
) -> np.ndarray:
    """Mask of events of ``kinds`` on GPU lanes of ``device`` with valid timing.

    Vectorised over events (one lane→device lookup), so a trace with 100k streams costs
    the same as one with 10: a loop over lanes made such traces take minutes."""
    kind_codes = np.array([int(k) for k in kinds], dtype=np.int8)
    if lane_devices(trace).size == 0:
        return np.zeros(len(trace), dtype=bool)
    m = (event_devices(trace) == device) & np.isin(trace.kind, kind_codes)
    if valid is None:
        valid = valid_timing_mask(trace)
    return m & valid


def device_union(
    trace: Trace, device: int, *, with_copies: bool = False, valid: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Busy union of ``device``: kernels (and memcpy/memset when ``with_copies``).

    Returns ``(starts, ends)`` int64 ns, disjoint, sorted. ``Kind.SYNC_MARKER`` and GPU
    annotations never count.
    """
    kinds = (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET) if with_copies else (Kind.KERNEL,)
    m = device_event_mask(trace, device, kinds, valid)
    return union_intervals(trace.start_ns[m], trace.start_ns[m] + trace.dur_ns[m])
