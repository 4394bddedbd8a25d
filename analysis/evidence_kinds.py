"""Which events are evidence of which cause class (design: "Definitions" → cause classes).

- sync: ``Kind.SYNC_CALL`` (``cudaStreamSynchronize``, ``cudaDeviceSynchronize``,
  ``cudaEventSynchronize``, ``cudaEventQuery``, ``cudaStreamWaitEvent``, ``.item()`` in
  ASCII timelines), ``aten::item``, ``aten::_local_scalar_dense``, ``aten::is_nonzero``,
  and Kineto ``cuda_sync`` records (``Kind.SYNC_MARKER``, a CPU wait drawn on a GPU lane).
- copy: ``Kind.MEMCPY_CALL`` (``cudaMemcpy*``), ``aten::to``, ``aten::_to_copy``,
  ``aten::copy_``, and GPU memcpy/memset records overlapping the gap.
- launch: ``Kind.LAUNCH`` (``cudaLaunchKernel``, ``cuLaunchKernel[Ex]``,
  ``hipLaunchKernel``, ``cudaGraphLaunch``, ...).
- host: every other CPU event with a duration (ATen ops, Python functions, user
  annotations, other runtime calls), except the step annotations themselves.

Names are matched verbatim (case-sensitive for ATen names, case-insensitive for runtime
call names, which loaders may not have mapped to a kind).
"""

from __future__ import annotations

import re

import numpy as np

from gapscope.parsers.model import Kind, Trace

from gapscope.analysis.types import Cause

__all__ = ["SYNC_OP_NAMES", "COPY_OP_NAMES", "event_cause", "NO_CLASS"]

SYNC_OP_NAMES = frozenset({"aten::item", "aten::_local_scalar_dense", "aten::is_nonzero"})
COPY_OP_NAMES = frozenset({"aten::to", "aten::_to_copy", "aten::copy_"})
_SYNC_CALL_RE = re.compile(
    r"^(cuda|hip)(StreamSynchronize|DeviceSynchronize|EventSynchronize|EventQuery|StreamWaitEvent|StreamQuery)"
    r"|^cu(StreamSynchronize|CtxSynchronize|EventSynchronize)|\.item\(\)|^torch\.cuda\.synchronize",
    re.IGNORECASE,
)
_COPY_CALL_RE = re.compile(r"^(cuda|hip|cu)Memcpy", re.IGNORECASE)
_LAUNCH_CALL_RE = re.compile(r"^(cuda|hip)(LaunchKernel|LaunchCooperativeKernel|GraphLaunch|ExtModuleLaunchKernel)|^cuLaunch|^cudaLaunch", re.IGNORECASE)

#: Value of ``event_cause`` for events that are no evidence at all.
NO_CLASS = -1


def _name_class(name: str) -> int:
    if name in SYNC_OP_NAMES or _SYNC_CALL_RE.search(name):
        return int(Cause.SYNC)
    if name in COPY_OP_NAMES or _COPY_CALL_RE.match(name):
        return int(Cause.COPY)
    if _LAUNCH_CALL_RE.match(name):
        return int(Cause.LAUNCH)
    return NO_CLASS


def event_cause(trace: Trace, valid: np.ndarray, exclude: np.ndarray | None = None) -> np.ndarray:
    """int8 array (len n): the ``Cause`` each CPU-side event is evidence of, or
    ``NO_CLASS``. GPU work (kernels, memcpy, memset) and GPU annotations are
    ``NO_CLASS`` here (exposed copies are handled per device); ``Kind.SYNC_MARKER`` is
    SYNC wherever it is drawn. Events with no duration, invalid timing, or set in
    ``exclude`` (step annotations) are ``NO_CLASS``. Loops only over distinct names."""
    n = len(trace)
    out = np.full(n, NO_CLASS, dtype=np.int8)
    if n == 0:
        return out
    kind = trace.kind
    cpu_lane = np.array([not ln.is_gpu for ln in trace.lanes], dtype=bool)
    on_cpu = cpu_lane[trace.lane] if cpu_lane.size else np.zeros(n, bool)
    host_kinds = np.isin(kind, np.array([Kind.CPU_OP, Kind.PYTHON, Kind.ANNOTATION, Kind.RUNTIME, Kind.OTHER], dtype=np.int8))
    out[on_cpu & host_kinds] = int(Cause.HOST)
    out[on_cpu & (kind == Kind.LAUNCH)] = int(Cause.LAUNCH)
    out[on_cpu & (kind == Kind.MEMCPY_CALL)] = int(Cause.COPY)
    out[on_cpu & (kind == Kind.SYNC_CALL)] = int(Cause.SYNC)
    # names override the generic CPU kinds (ATen sync/copy ops, unmapped runtime calls)
    by_name = np.array([_name_class(s) for s in trace.names], dtype=np.int8)
    if by_name.size:
        nc = by_name[trace.name_id]
        generic = on_cpu & (host_kinds | (kind == Kind.INSTANT)) & (nc != NO_CLASS)
        out[generic] = nc[generic]
    out[kind == Kind.SYNC_MARKER] = int(Cause.SYNC)
    out[~valid | (trace.dur_ns <= 0)] = NO_CLASS
    if exclude is not None:
        out[exclude] = NO_CLASS
    return out
