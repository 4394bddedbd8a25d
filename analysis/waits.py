"""Stream waits that explain idle time while the next GPU op was already queued.

When the next op's launch call came before the gap (launch lateness L <= 0) the GPU
did not wait for the CPU to ask: the queued op waited on something else. One thing the
trace can show is a stream wait (design: ``cudaStreamWaitEvent`` is sync evidence): a
``cudaStreamWaitEvent`` / ``hipStreamWaitEvent`` / ``cuStreamWaitEvent`` call enqueued
by the thread that launched the next op, or a Kineto ``cuda_sync`` record "Stream Wait
Event" on the next op's stream, issued after the previous op's launch call and no later
than the next op's launch call. Such a wait sits in stream order before the next op, so
the op could not start before the awaited event fired. This module finds, per gap, the
latest such wait (or -1). A record the device timed itself (MTIA's ``event_wait`` on the
next op's stream) counts instead for the time it lasted between the op being queued (the
gap's start, or the return of its late launch call) and the gap's end. It does not say which
stream was awaited: older Kineto traces do not record it (newer ones give
``wait_on_stream`` in the record's args).

Without a wait there is no evidence and the queued idle stays unclassified.
"""

from __future__ import annotations

import re
import weakref

import numpy as np

from gapscope.analysis.types import Gaps
from gapscope.parsers.model import Kind, Trace

__all__ = [
    "WAIT_NAME_RE",
    "DEVICE_TIMED_WAIT_RE",
    "device_timed_wait_ids",
    "wait_name_ids",
    "searchable",
    "stream_wait_events",
]

#: Names of stream-wait calls and of Kineto's stream-wait sync records (MTIA: the
#: stream's own ``event_wait``, which says when the wait ended; its host call
#: ``enqueueCommand waitOnEvent`` is not read: the record shows the wait was over long
#: before most gaps that follow it).
WAIT_NAME_RE = re.compile(
    r"^(cuda|hip)StreamWaitEvent|^cuStreamWaitEvent|^Stream Wait Event$|^event_wait$",
    re.IGNORECASE,
)
_WAIT_IDS: weakref.WeakKeyDictionary[Trace, np.ndarray] = weakref.WeakKeyDictionary()


#: Stream-wait records the device timed itself (MTIA's ``event_wait`` lasts as long as
#: the stream waits), unlike Kineto's "Stream Wait Event", whose time says nothing of it.
DEVICE_TIMED_WAIT_RE = re.compile(r"^event_wait$")
_TIMED_IDS: weakref.WeakKeyDictionary[Trace, np.ndarray] = weakref.WeakKeyDictionary()


def device_timed_wait_ids(trace: Trace) -> np.ndarray:
    """int32 name ids of the trace's device-timed stream-wait records
    (``DEVICE_TIMED_WAIT_RE``), found once per trace."""
    got = _TIMED_IDS.get(trace)
    if got is None:
        got = _TIMED_IDS[trace] = trace.name_ids_matching(lambda s: bool(DEVICE_TIMED_WAIT_RE.search(s)))
    return got


def wait_name_ids(trace: Trace) -> np.ndarray:
    """int32 name ids of the trace's stream-wait calls and records (``WAIT_NAME_RE``),
    found once per trace (a card asks again for each gap)."""
    got = _WAIT_IDS.get(trace)
    if got is None:
        got = _WAIT_IDS[trace] = trace.name_ids_matching(lambda s: bool(WAIT_NAME_RE.search(s)))
    return got


def searchable(prev_op: np.ndarray, next_launch: np.ndarray, launches: np.ndarray) -> np.ndarray:
    """Bool per gap (``Gaps.prev_op``, ``Gaps.launch``; ``launches``: each event's launch
    call or -1): both its next op and the op before it have linked launch calls, so
    ``stream_wait_events`` looks for a wait between the two launches (else it cannot)."""
    pl = np.where(prev_op >= 0, launches[np.maximum(prev_op, 0)], -1)
    return (next_launch >= 0) & (pl >= 0)


def _latest_in(starts: np.ndarray, idx: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For sorted ``starts`` (event indices ``idx``): the index of the latest event with
    lo <= start <= hi per row, or -1."""
    k = np.searchsorted(starts, hi, side="right") - 1
    kc = np.maximum(k, 0)
    ok = (k >= 0) & (starts[kc] >= lo) if starts.size else np.zeros(lo.shape, bool)
    return np.where(ok, idx[kc] if starts.size else -1, -1)


def _running_in(trace: Trace, sel: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """For events ``sel`` (sorted by start): per row, the latest one starting before
    ``hi`` when some of its time lies in [lo, hi), or -1."""
    k = np.searchsorted(trace.start_ns[sel], hi, side="left") - 1
    kc = np.maximum(k, 0)
    ws, we = trace.start_ns[sel[kc]], trace.start_ns[sel[kc]] + trace.dur_ns[sel[kc]]
    return np.where((k >= 0) & (np.minimum(we, hi) > np.maximum(ws, lo)), sel[kc], -1)


def stream_wait_events(trace: Trace, gaps: Gaps, launches: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """int64 per gap: event index of the stream wait that explains its queued idle (see
    the module docstring), or -1. Only gaps whose next and previous ops both have a
    linked launch call qualify (the classifier uses the wait only for time the op spent
    queued). Loops over distinct
    lanes, not over gaps."""
    n = len(gaps)
    out = np.full(n, -1, dtype=np.int64)
    if n == 0 or len(trace) == 0:
        return out
    ids = wait_name_ids(trace)
    if ids.size == 0:
        return out
    w = np.flatnonzero(
        np.isin(trace.name_id, ids)
        & valid
        & np.isin(trace.kind, np.array([Kind.SYNC_CALL, Kind.RUNTIME, Kind.OTHER, Kind.SYNC_MARKER], np.int8))
    )
    if w.size == 0:
        return out
    pl = np.where(gaps.prev_op >= 0, launches[np.maximum(gaps.prev_op, 0)], -1)
    nl = gaps.launch
    q = searchable(gaps.prev_op, nl, launches)
    if not q.any():
        return out
    rows = np.flatnonzero(q)
    lo = trace.start_ns[pl[rows]]
    hi = trace.start_ns[nl[rows]]
    lanes = trace.lanes
    on_gpu = np.array([lanes[int(k)].is_gpu for k in trace.lane[w]], dtype=bool)
    best = np.full(rows.size, -1, dtype=np.int64)
    # CPU calls on the thread that launched the next op (stream order on one thread:
    # the wait, then the launch; a wait from another thread may be on another stream)
    calls = w[~on_gpu]
    if calls.size:
        row_lane = trace.lane[nl[rows]]
        for lane in np.unique(trace.lane[calls]):
            m = row_lane == lane
            if m.any():
                sel = calls[trace.lane[calls] == lane]  # lane-sorted by start already
                best[m] = _latest_in(trace.start_ns[sel], sel, lo[m], hi[m])
    # Kineto stream-wait records on the next op's own stream; a wait the device timed
    # itself (MTIA's event_wait) only for time it lasted between the op being queued
    # (the gap's start, or its launch's return) and the gap's end: one that had ended
    # before held nothing back (mtia_inference: waits that ended 1.3-7.4 ms before 32 µs
    # gaps), and a zero-length one holds no time
    marks = w[on_gpu]
    if marks.size:
        timed = np.isin(trace.name_id[marks], device_timed_wait_ids(trace))
        next_lane = trace.lane[gaps.next_op[rows]]
        # from when the op was queued: the gap's start, or its launch's return when late
        queued_from = gaps.start_ns[rows] + np.maximum(gaps.lateness_ns[rows], 0)
        for lane in np.unique(trace.lane[marks]):
            on = trace.lane[marks] == lane
            for sel, own_time in ((marks[on & timed], True), (marks[on & ~timed], False)):
                m = (next_lane == lane) & (best < 0)
                if sel.size == 0 or not m.any():
                    continue
                sel = sel[np.argsort(trace.start_ns[sel], kind="stable")]
                if own_time:
                    best[m] = _running_in(trace, sel, queued_from[m], gaps.end_ns[rows][m])
                else:
                    best[m] = _latest_in(trace.start_ns[sel], sel, lo[m], hi[m])
    out[rows] = best
    return out
