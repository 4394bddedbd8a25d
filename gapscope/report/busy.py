"""Per-lane event counts and per-device GPU busy computed straight from a ``Trace``.

The report's trace overview (lanes, counts) comes from here; the busy figures here are
a fallback used only when ``gapscope.analysis.diagnose`` is unavailable, and an independent
check of it in the tests. Definitions from the design ("Definitions"): GPU busy is the
union over all streams of a device of kernel intervals; the "fully idle" figure also
counts memcpy and memset as busy. The window is [first GPU op start, last GPU op end].
"""

from __future__ import annotations

import numpy as np

from gapscope.parsers.model import Kind, Trace

__all__ = ["lane_kind_counts", "union_ns", "device_busy"]

_N_KINDS = max(int(k) for k in Kind) + 1


def lane_kind_counts(trace: Trace) -> np.ndarray:
    """int64 array of shape ``(len(trace.lanes), len(Kind))``: events per lane and kind."""
    nl = len(trace.lanes)
    if len(trace) == 0 or nl == 0:
        return np.zeros((nl, _N_KINDS), dtype=np.int64)
    key = trace.lane.astype(np.int64) * _N_KINDS + trace.kind.astype(np.int64)
    return np.bincount(key, minlength=nl * _N_KINDS).astype(np.int64).reshape(nl, _N_KINDS)


def union_ns(start_ns: np.ndarray, end_ns: np.ndarray) -> int:
    """Total length in ns of the union of intervals ``[start, end)`` (int64 arrays).

    Vectorised: sort by start, a running maximum of ends finds where a new merged
    interval begins. Overlaps are merged, never added (design: B200/ROCm overlap).
    """
    if start_ns.size == 0:
        return 0
    o = np.argsort(start_ns, kind="stable")
    s = start_ns[o].astype(np.int64)
    e = np.maximum(end_ns[o].astype(np.int64), s)
    run_end = np.maximum.accumulate(e)
    new = np.empty(s.size, dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    seg_end = np.append(run_end[idx[1:] - 1], run_end[-1])
    return int((seg_end - s[idx]).sum())


def device_busy(trace: Trace) -> list[dict]:
    """Per GPU device with kernels: window and busy figures (plain dict, ns).

    Keys: ``device``, ``window_start_ns``, ``window_end_ns``, ``busy_ns`` (kernel
    union), ``busy_with_copies_ns`` (kernel + memcpy + memset union),
    ``kernel_count``, ``copy_count``. Events excluded from ``trace.extent_ns`` (flagged
    absurd timings) are ignored when they lie outside it.
    """
    out: list[dict] = []
    lane_dev = np.array([ln.device if ln.is_gpu else -1 for ln in trace.lanes], dtype=np.int64)
    if len(trace) == 0 or lane_dev.size == 0:
        return out
    ev_dev = lane_dev[trace.lane]
    lo, hi = trace.extent_ns
    start, end = trace.start_ns, trace.end_ns
    in_extent = (start >= lo) & (end <= hi)
    is_kernel = trace.kind == int(Kind.KERNEL)
    is_work = is_kernel | (trace.kind == int(Kind.MEMCPY)) | (trace.kind == int(Kind.MEMSET))
    for d in sorted(set(int(x) for x in lane_dev if x >= 0)):
        k = (ev_dev == d) & is_kernel & in_extent
        if not k.any():
            continue
        w = (ev_dev == d) & is_work & in_extent
        out.append(
            dict(
                device=d,
                window_start_ns=int(start[w].min()),
                window_end_ns=int(end[w].max()),
                busy_ns=union_ns(start[k], end[k]),
                busy_with_copies_ns=union_ns(start[w], end[w]),
                kernel_count=int(k.sum()),
                copy_count=int((w & ~is_kernel).sum()),
            )
        )
    return out
