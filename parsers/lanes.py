"""Lanes (Perfetto tracks) from Chrome-trace (pid, tid) pairs and ``M`` metadata.

A lane is one (pid, tid) pair; ids are compared as text so ``7`` and ``"7"`` are one
lane (Trace Event Format ids may be numbers or strings). Names come from the
``process_name``/``thread_name`` metadata events, order from ``process_sort_index``/
``thread_sort_index``. Kineto GPU lanes have pid = device and tid = stream (also
``args.device``/``args.stream``); they sort after the CPU lanes, by device then stream.

A GPU lane's device comes from ``args.device`` or from a pid that is a plausible
device index (an integer 0..``MAX_DEVICE_INDEX``); any other GPU lane (pid ``"abc"``,
``-1``, missing, or GPU ops split off a CPU thread by the loader) gets a pseudo-device
``PSEUDO_DEVICE_BASE + j`` of its own, one per pid in first-seen order, so its busy
time is never merged into a real device's.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from gapscope.parsers.model import Lane

__all__ = [
    "id_text",
    "LaneInfo",
    "Metadata",
    "build_lanes",
    "MAX_DEVICE_INDEX",
    "PSEUDO_DEVICE_BASE",
    "is_device_index",
]

#: Largest device index taken from a pid or ``args.device`` (no node has more GPUs).
MAX_DEVICE_INDEX = 255
#: First pseudo-device number, for GPU lanes whose pid is not a device index.
PSEUDO_DEVICE_BASE = 1000


def is_device_index(n) -> bool:
    """True for an int 0..``MAX_DEVICE_INDEX`` (not a bool)."""
    return isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_DEVICE_INDEX


def id_text(v: object) -> str:
    """Canonical text of a pid/tid: ``7``, ``7.0`` and ``"7"`` all give ``"7"``."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else repr(v)
    return str(v)


def _num(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


_STREAM_RE = re.compile(r"stream\s*(\d+)", re.IGNORECASE)


@dataclasses.dataclass
class LaneInfo:
    """What the loader learnt about one raw (pid, tid) pair from its events."""

    pid: str
    tid: str
    is_gpu: bool = False
    device: int = -1
    stream: int = -1
    split: bool = False  # GPU ops split off a CPU thread: the pid names a process, not a device


@dataclasses.dataclass
class Metadata:
    """Names and sort indices from ``M`` events, keyed by canonical id text."""

    process_name: dict[str, str] = dataclasses.field(default_factory=dict)
    thread_name: dict[tuple[str, str], str] = dataclasses.field(default_factory=dict)
    process_sort: dict[str, int] = dataclasses.field(default_factory=dict)
    thread_sort: dict[tuple[str, str], int] = dataclasses.field(default_factory=dict)
    process_labels: dict[str, str] = dataclasses.field(default_factory=dict)
    renamed_threads: int = 0  # thread_name events that changed an earlier name (the last wins)


def _idkey(text: str) -> tuple:
    n = _num(text)
    return (0, n, "") if n is not None else (1, 0, text)


def build_lanes(infos: list[LaneInfo], meta: Metadata) -> tuple[list[Lane], np.ndarray]:
    """Merge raw pairs with equal canonical ids, name and order them.

    Returns (lanes in display order with ``index`` = position, int32 array mapping
    each raw pair index to its lane index). CPU lanes come first, ordered by
    (process_sort_index, pid, thread_sort_index, tid); GPU lanes follow, ordered by
    (device, stream, pid, tid). Numeric ids compare as numbers. A GPU ``stream`` of
    -2 means "known to have no stream" (legacy autograd export) and becomes -1.
    """
    merged: dict[tuple[str, str], LaneInfo] = {}
    raw_to_key = []
    for info in infos:
        key = (info.pid, info.tid)
        raw_to_key.append(key)
        m = merged.get(key)
        if m is None:
            merged[key] = dataclasses.replace(info)
        else:
            m.is_gpu = m.is_gpu or info.is_gpu
            m.split = m.split or info.split
            if m.device < 0:
                m.device = info.device
            if m.stream < 0:
                m.stream = info.stream
    built = []
    pseudo: dict[str, int] = {}
    for (pid, tid), info in merged.items():
        if info.is_gpu:
            if not is_device_index(info.device):
                n = _num(pid)
                if n is not None and is_device_index(n) and not info.split:
                    info.device = n
                else:
                    info.device = pseudo.setdefault(pid, PSEUDO_DEVICE_BASE + len(pseudo))
            if info.stream == -1:
                n = _num(tid)
                if n is None:
                    sm = _STREAM_RE.search(tid)
                    n = int(sm.group(1)) if sm else None
                info.stream = n if n is not None else -1
        real = info.is_gpu and info.device < PSEUDO_DEVICE_BASE
        pname = meta.process_name.get(pid) or (f"GPU {info.device}" if real and _num(pid) is not None else pid)
        tname = meta.thread_name.get((pid, tid))
        if not tname:
            tname = f"stream {info.stream}" if info.is_gpu and info.stream >= 0 else tid
        sort_key: tuple
        if info.is_gpu:
            sort_key = (1, info.device, info.stream, _idkey(pid), _idkey(tid))
        else:
            sort_key = (0, meta.process_sort.get(pid, 0), _idkey(pid), meta.thread_sort.get((pid, tid), 0), _idkey(tid))
        built.append((sort_key, pid, tid, pname, tname, info))
    built.sort(key=lambda t: t[0])
    index_of = {}
    lanes = []
    for i, (sort_key, pid, tid, pname, tname, info) in enumerate(built):
        index_of[(pid, tid)] = i
        lanes.append(
            Lane(
                index=i,
                pid=pid,
                tid=tid,
                process_name=pname,
                thread_name=tname,
                is_gpu=info.is_gpu,
                device=info.device if info.is_gpu else -1,
                stream=max(info.stream, -1) if info.is_gpu else -1,
                sort_key=sort_key,
            )
        )
    remap = np.array([index_of[k] for k in raw_to_key], dtype=np.int32)
    return lanes, remap
