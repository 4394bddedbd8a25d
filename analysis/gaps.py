"""Idle gaps of a device, their neighbours and the next op's launch call.

Definitions ("Busy and idle" in ``docs/definitions.md``): an idle gap is a maximal
interval of the analysis window of a device where no kernel runs, at least
``min_gap_ns`` long (default 2 µs); a kernel of no duration (a sub-µs kernel written as
``dur: 0``) ends a gap too. The window is [first GPU op, last GPU op] of the
device, widened to the known steps (idle time at a step's edge counts, since the next
step follows). Copies inside a gap do not end it: they are "exposed copy" time.

For each gap: the previous kernel (the one ending last at or before the gap start),
the next GPU op (the kernel starting at the gap end), that op's launch call (by flow /
correlation), its CPU lane *T*, and the launch lateness ``L = launch.end - gap.start``
measured from the moment the work reached the queue: the end of the launch call, or
the op's start when the op began before its call returned (``launch_queued_at``).
``L <= 0``: the op was queued before the gap began.
All of it vectorised (sorts and ``searchsorted``), no Python loop over events or gaps.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from gapscope.analysis.busy import (
    complement,
    coverage,
    device_event_mask,
    device_union,
    union_intervals,
    valid_timing_mask,
)
from gapscope.analysis.types import Cause, Gaps, Params
from gapscope.parsers.model import CPU_CALL_KINDS, Kind, Trace

__all__ = [
    "find_gaps",
    "interior_gaps",
    "launch_of",
    "launch_queued_at",
    "concat_gaps",
    "empty_gaps",
    "device_window",
]

EDGE_NONE, EDGE_LEADING, EDGE_TRAILING = 0, 1, 2


def launch_of(trace: Trace) -> np.ndarray:
    """int64 array (len n): for each GPU op, the index of the CPU runtime call that
    launched it (from ``Trace.flow_src``/``flow_dst``), else -1."""
    out = np.full(len(trace), -1, dtype=np.int64)
    if trace.flow_src.size:
        src = trace.flow_src
        is_call = np.isin(trace.kind[src], np.array([int(k) for k in CPU_CALL_KINDS], dtype=np.int8))
        cpu_lane = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
        if cpu_lane.size:
            is_call |= cpu_lane[trace.lane[src]] & (trace.kind[src] != int(Kind.SYNC_MARKER))
        out[trace.flow_dst[is_call]] = src[is_call]
        _share_graph_links(trace, out)
    return out


def _share_graph_links(trace: Trace, out: np.ndarray) -> None:
    """In place: a GPU op with no launch link gets the launch call of a linked GPU op
    with the same ``correlation`` (a CUDA graph's nodes share the id of their
    ``cudaGraphLaunch``; some Kineto versions draw a flow to the first node only)."""
    gpu = trace.mask_kind(Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET) & (trace.correlation >= 0)
    linked = gpu & (out >= 0)
    missing = gpu & (out < 0)
    if not (linked.any() and missing.any()):
        return
    li = np.flatnonzero(linked)
    o = np.argsort(trace.correlation[li], kind="stable")
    lc, li = trace.correlation[li][o], li[o]
    mi = np.flatnonzero(missing)
    pos = np.minimum(np.searchsorted(lc, trace.correlation[mi]), lc.size - 1)
    hit = lc[pos] == trace.correlation[mi]
    out[mi[hit]] = out[li[pos[hit]]]


def launch_queued_at(trace: Trace, launch: np.ndarray, op: np.ndarray) -> np.ndarray:
    """int64 ns at which the work of each ``launch`` call (event indices, -1 none)
    reached the queue: the call's end, or its op's start (``op``: event indices) when
    the op started before the call returned. An op "starting" before its launch call
    began has no usable timing (B14): then the call's end. -1 rows give 0."""
    ok = (launch >= 0) & (op >= 0)
    li, oi = np.maximum(launch, 0), np.maximum(op, 0)
    call_end = trace.start_ns[li] + trace.dur_ns[li]
    op_start = trace.start_ns[oi]
    clip = ok & (op_start >= trace.start_ns[li]) & (op_start < call_end)
    return np.where(launch >= 0, np.where(clip, op_start, call_end), 0).astype(np.int64)


def device_window(
    trace: Trace, device: int, valid: np.ndarray, steps_start_ns=None, steps_end_ns=None
) -> tuple[int, int] | None:
    """``(start_ns, end_ns)`` of the analysis window of ``device``, or None when the
    device has no valid GPU op. Widened to ``[steps_start_ns[0], steps_end_ns[-1]]``
    when steps are given (steps are clipped to the trace's extent)."""
    m = device_event_mask(trace, device, (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET), valid)
    if not m.any():
        return None
    w0 = int(trace.start_ns[m].min())
    w1 = int((trace.start_ns[m] + trace.dur_ns[m]).max())
    if steps_start_ns is not None and len(steps_start_ns):
        w0 = min(w0, int(np.min(steps_start_ns)))
        w1 = max(w1, int(np.max(steps_end_ns)))
    return w0, w1


def empty_gaps() -> Gaps:
    """A ``Gaps`` with no rows."""
    z64 = np.zeros(0, dtype=np.int64)
    return Gaps(
        device=np.zeros(0, np.int32),
        start_ns=z64,
        end_ns=z64.copy(),
        prev_op=z64.copy(),
        next_op=z64.copy(),
        launch=z64.copy(),
        launch_lane=np.zeros(0, np.int32),
        lateness_ns=z64.copy(),
        exposed_copy_ns=z64.copy(),
        cause=np.zeros(0, np.int8),
        secondary=np.zeros(0, np.int8),
        cause_share=np.zeros(0),
        secondary_share=np.zeros(0),
        group=np.zeros(0, np.int32),
        episode=np.zeros(0, np.int32),
        edge=np.zeros(0, np.int8),
        class_ns=np.zeros((0, len(Cause)), np.int64),
        thread_lane=np.zeros(0, np.int32),
    )


def _split_at_instants(
    trace: Trace, kmask: np.ndarray, gs: np.ndarray, ge: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The idle intervals [gs, ge) cut at every kernel of ``kmask`` (the device's ops
    that end a gap) of no duration inside them: such a kernel ran (Kineto writes a
    sub-µs kernel as ``dur: 0``; resnet50_num_workers_4 has 639, a `zero_grad` launching
    one every 39 µs), so the GPU was not idle across it, though it adds nothing to busy
    time. Sorted, disjoint intervals in and out."""
    zero = kmask & (trace.dur_ns == 0)
    if not zero.any() or gs.size == 0:
        return gs, ge
    z = np.unique(trace.start_ns[zero])
    k = np.searchsorted(gs, z, side="right") - 1
    inside = (k >= 0) & (z > gs[np.maximum(k, 0)]) & (z < ge[np.maximum(k, 0)])
    z = z[inside]
    if z.size == 0:
        return gs, ge
    # every cut ends one piece and starts the next: the pieces stay disjoint, so the
    # sorted starts pair with the sorted ends
    return np.sort(np.concatenate((gs, z))), np.sort(np.concatenate((z, ge)))


def find_gaps(
    trace: Trace,
    device: int,
    min_gap_ns: int = 2_000,
    *,
    steps_start_ns: np.ndarray | None = None,
    steps_end_ns: np.ndarray | None = None,
    valid: np.ndarray | None = None,
    launches: np.ndarray | None = None,
    with_copies: bool = False,
) -> Gaps:
    """Idle gaps of one device (see the module docstring for the definitions).

    ``trace``: a ``Trace``; ``device``: GPU index (``Lane.device``); ``min_gap_ns``:
    shortest gap kept (int ns, >= 1). ``steps_*``: int64 step bounds (ns) that widen the
    window. ``valid``/``launches``: precomputed ``valid_timing_mask`` / ``launch_of``.
    ``with_copies``: the "fully idle" variant, where memcpy/memset also end a gap (then
    ``exposed_copy_ns`` is 0 and the neighbours may be copies).

    Returns ``Gaps`` sorted by start, with ``cause`` = UNCLASSIFIED and shares 0 until
    ``classify`` fills them; ``edge`` marks idle at a step edge outside the GPU ops;
    ``class_ns`` is None. Never raises on a valid ``Trace``.
    """
    if valid is None:
        valid = valid_timing_mask(trace)
    if launches is None:
        launches = launch_of(trace)
    win = device_window(trace, device, valid, steps_start_ns, steps_end_ns)
    if win is None:
        return empty_gaps()
    ks, ke = device_union(trace, device, with_copies=with_copies, valid=valid)
    gs, ge = complement(ks, ke, win[0], win[1])
    kmask = device_event_mask(
        trace, device, (Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET) if with_copies else (Kind.KERNEL,), valid
    )
    gs, ge = _split_at_instants(trace, kmask, gs, ge)
    keep = (ge - gs) >= max(int(min_gap_ns), 1)
    gs, ge = gs[keep], ge[keep]
    n = gs.shape[0]
    if n == 0:
        return empty_gaps()

    kidx = np.flatnonzero(kmask).astype(np.int64)
    kstart = trace.start_ns[kidx]
    kend = kstart + trace.dur_ns[kidx]

    prev_op = np.full(n, -1, dtype=np.int64)
    next_op = np.full(n, -1, dtype=np.int64)
    if kidx.size:
        o_end = np.argsort(kend, kind="stable")
        pos = np.searchsorted(kend[o_end], gs, side="right") - 1
        ok = pos >= 0
        prev_op[ok] = kidx[o_end[pos[ok]]]
        o_start = np.lexsort((launches[kidx] < 0, kstart))  # ties: a launched op first
        ss = kstart[o_start]
        pos = np.searchsorted(ss, ge, side="left")
        ok = pos < ss.shape[0]
        posc = np.minimum(pos, ss.shape[0] - 1)
        ok &= ss[posc] == ge
        next_op[ok] = kidx[o_start[posc[ok]]]

    launch = np.where(next_op >= 0, launches[np.maximum(next_op, 0)], -1)
    launch_lane = np.where(launch >= 0, trace.lane[np.maximum(launch, 0)], -1).astype(np.int32)
    lateness = np.where(launch >= 0, launch_queued_at(trace, launch, next_op) - gs, 0).astype(np.int64)

    cs, ce = device_union_copies(trace, device, valid)
    exposed = coverage(cs, ce, gs, ge)

    edge = np.zeros(n, dtype=np.int8)
    if kidx.size:
        edge[ge <= kstart.min()] = EDGE_LEADING
        edge[gs >= kend.max()] = EDGE_TRAILING

    return Gaps(
        device=np.full(n, device, dtype=np.int32),
        start_ns=gs.astype(np.int64),
        end_ns=ge.astype(np.int64),
        prev_op=prev_op,
        next_op=next_op,
        launch=launch.astype(np.int64),
        launch_lane=launch_lane,
        lateness_ns=lateness,
        exposed_copy_ns=exposed.astype(np.int64),
        cause=np.full(n, int(Cause.UNCLASSIFIED), dtype=np.int8),
        secondary=np.full(n, -1, dtype=np.int8),
        cause_share=np.zeros(n),
        secondary_share=np.zeros(n),
        group=np.full(n, -1, dtype=np.int32),
        episode=np.full(n, -1, dtype=np.int32),
        edge=edge,
    )


def interior_gaps(trace: Trace, min_gap_ns: int = Params.min_gap_ns) -> Gaps:
    """The gaps of every device of ``trace`` between its first and last kernel: the
    rows of ``find_gaps`` (no steps) with ``edge`` EDGE_NONE and a kernel on both
    sides (``prev_op`` and ``next_op`` set: a device without a valid kernel has none),
    sorted by device, then start, their causes UNCLASSIFIED (``Gaps``; ``min_gap_ns``:
    int ns, >= 1, by default the diagnosis's own: ``Params.min_gap_ns``).

    They depend on the device's GPU ops alone, not on steps or CPU events (only the
    idle time before a device's first kernel and after its last does, through the
    window): so they are the diagnosis's gaps with a kernel on both sides, whole, and
    the same when ``trace`` holds only the device lanes of a file, where those are the
    whole trace's (a device preview: ``gapscope.parsers.chrome.preview.device_preview``
    says when they can differ; equal on every corpus trace,
    ``tests/test_device_preview.py``). Their ``next_op`` can differ there when two
    ops start at a gap's end: the tie goes to a launched op, and a preview has no
    launch links. A viewer draws them before the causes. Never raises on a valid
    ``Trace``."""
    valid = valid_timing_mask(trace)
    launches = launch_of(trace)
    parts = []
    for dev in trace.devices():
        g = find_gaps(trace, dev, min_gap_ns, valid=valid, launches=launches)
        keep = np.flatnonzero((g.edge == EDGE_NONE) & (g.prev_op >= 0) & (g.next_op >= 0))
        if keep.size < len(g):
            cut: dict[str, Any] = {}
            for f in dataclasses.fields(g):
                a = getattr(g, f.name)
                cut[f.name] = None if a is None else a[keep]
            g = Gaps(**cut)
        parts.append(g)
    return concat_gaps(parts)


def device_union_copies(trace: Trace, device: int, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Union of the device's memcpy and memset intervals (int64 ns, sorted)."""
    m = device_event_mask(trace, device, (Kind.MEMCPY, Kind.MEMSET), valid)
    return union_intervals(trace.start_ns[m], trace.start_ns[m] + trace.dur_ns[m])


def concat_gaps(parts: list[Gaps]) -> Gaps:
    """Concatenate per-device ``Gaps`` (already sorted by device, then start)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return empty_gaps()
    if len(parts) == 1:
        return parts[0]
    fields: dict[str, Any] = {}
    for name in (
        "device",
        "start_ns",
        "end_ns",
        "prev_op",
        "next_op",
        "launch",
        "launch_lane",
        "lateness_ns",
        "exposed_copy_ns",
        "cause",
        "secondary",
        "cause_share",
        "secondary_share",
        "group",
        "episode",
        "edge",
    ):
        fields[name] = np.concatenate([getattr(p, name) for p in parts])
    cls = [p.class_ns for p in parts if p.class_ns is not None]
    fields["class_ns"] = np.concatenate(cls) if len(cls) == len(parts) else None
    tl = [p.thread_lane for p in parts if p.thread_lane is not None]
    fields["thread_lane"] = np.concatenate(tl) if len(tl) == len(parts) else None
    return Gaps(**fields)
