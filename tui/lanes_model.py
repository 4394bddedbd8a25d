"""Rows of the swimlane view: groups (process / GPU device), gap rows, lanes.

Pure (no Textual). ``build_rows`` turns ``Trace.lanes`` plus the set of collapsed
groups into the list of display rows; ``gaps_by_device`` orders each device's gaps
for its gap row (``gap_at``: the gap under a time); ``sanitize`` makes untrusted
names safe to draw (no control characters, no terminal escapes; printable text as
itself; ``gapscope.tui.cells.crop`` fits it to a number of cells).
"""

from __future__ import annotations

import dataclasses
import unicodedata
from collections.abc import Mapping

import numpy as np

from gapscope.analysis.types import Gaps
from gapscope.parsers.model import Trace
from gapscope.tui.viewmodel import KIND_TO_CLASS

__all__ = [
    "Row",
    "build_rows",
    "sanitize",
    "group_key_of",
    "default_collapsed",
    "drawn_lanes",
    "PSEUDO_PROCESSES",
    "DeviceGaps",
    "gaps_by_device",
    "gap_at",
]

#: Kineto's pseudo-processes (whole-trace and span annotations): shown collapsed.
PSEUDO_PROCESSES = frozenset({"Traces", "Spans"})


@dataclasses.dataclass(frozen=True, slots=True)
class Row:
    """One display row. ``kind``: ``"group"`` (header), ``"idle"`` (a device's gaps),
    ``"lane"`` (a trace lane). ``lane`` is the trace lane index (-1 otherwise),
    ``device`` the GPU index for idle rows and GPU groups (-1 otherwise)."""

    kind: str
    group: tuple
    label: str
    lane: int = -1
    device: int = -1


def group_key_of(trace: Trace, lane: int) -> tuple:
    ln = trace.lanes[lane]
    if ln.is_gpu:
        return ("gpu", ln.device, ln.pid)
    return ("cpu", ln.pid)


def drawn_lanes(trace: Trace) -> set[int]:
    """Indices of lanes holding at least one drawn event (a kind with a glyph class:
    not only instants, counters or metadata). One vectorised pass, O(events)."""
    if trace.lane.size == 0:
        return set()
    drawn = KIND_TO_CLASS[trace.kind.astype(np.int64)] >= 0
    return set(np.unique(trace.lane[drawn]).tolist())


def default_collapsed(trace: Trace) -> set:
    """Group keys collapsed when the view opens: Kineto's ``Traces`` and ``Spans``
    pseudo-processes (by pid or process name)."""
    out = set()
    for ln in trace.lanes:
        if not ln.is_gpu and (ln.pid in PSEUDO_PROCESSES or ln.process_name in PSEUDO_PROCESSES):
            out.add(group_key_of(trace, ln.index))
    return out


def build_rows(
    trace: Trace,
    collapsed: frozenset | set = frozenset(),
    gap_devices: set[int] | None = None,
    shown_lanes: set[int] | None = None,
) -> list[Row]:
    """Display rows: GPU groups first (by device), then CPU processes, lanes in
    ``Lane.sort_key`` order; a collapsed group shows its header only (and a GPU
    group its ``idle`` row). Each GPU device group starts with an ``idle`` row when
    ``gap_devices`` includes it.
    Lanes without drawn events (metadata-only threads and processes, lanes of
    instants only) are left out, and so are groups left empty; ``shown_lanes``
    (default ``drawn_lanes(trace)``) is the set of lane indices to keep."""
    if shown_lanes is None:
        shown_lanes = drawn_lanes(trace)
    lanes = sorted(
        (ln for ln in trace.lanes if ln.index in shown_lanes),
        key=lambda ln: (not ln.is_gpu, ln.device if ln.is_gpu else 0, ln.sort_key or (), ln.index),
    )
    groups: dict[tuple, list[int]] = {}
    for ln in lanes:
        groups.setdefault(group_key_of(trace, ln.index), []).append(ln.index)
    rows: list[Row] = []
    for key, members in groups.items():
        first = trace.lanes[members[0]]
        if key[0] == "gpu":
            pname = first.process_name or f"GPU {first.device}"
            label = pname if pname.startswith(("GPU", "gpu")) or first.device < 0 else f"GPU {first.device} {pname}"
            device = first.device
        else:
            pname = first.process_name or ""
            pid = first.pid or "?"
            if pname and pname != first.pid:
                label = f"{pname} ({pid})"
            elif str(pid).lstrip("-").isdigit():
                label = f"pid {pid}"
            else:  # a pid that is a name (Kineto's "Spans" pseudo-process) names itself
                label = str(pid)
            device = -1
        is_collapsed = key in collapsed
        mark = "▸" if is_collapsed else "▾"
        rows.append(Row("group", key, f"{mark} {label}", device=device))
        # a GPU group keeps its gap row when collapsed: the gaps are what the view is for
        if key[0] == "gpu" and gap_devices is not None and device in gap_devices:
            rows.append(Row("idle", key, "idle gaps", device=device))
        if is_collapsed:
            continue
        for k in members:
            ln = trace.lanes[k]
            label = (ln.label if ln.is_gpu else (ln.thread_name or ln.tid)).strip() or "(no tid)"
            rows.append(Row("lane", key, label, lane=k, device=ln.device))
    return rows


@dataclasses.dataclass(frozen=True, slots=True)
class DeviceGaps:
    """The gaps of one device in start order (arrays of one length): ``gap`` int64
    gap indices into ``Gaps``, ``start_ns`` and ``end_ns`` int64 absolute ns."""

    gap: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray


def gaps_by_device(gaps: Gaps | None) -> dict[int, DeviceGaps]:
    """Device -> its ``DeviceGaps`` (stable sort by start); {} without gaps."""
    out: dict[int, DeviceGaps] = {}
    if gaps is None or not len(gaps):
        return out
    dev = np.asarray(gaps.device)
    start, end = np.asarray(gaps.start_ns), np.asarray(gaps.end_ns)
    for d in np.unique(dev):
        idx = np.flatnonzero(dev == d)
        o = idx[np.argsort(start[idx], kind="stable")]
        out[int(d)] = DeviceGaps(o, start[o], end[o])
    return out


def gap_at(by_device: Mapping[int, DeviceGaps], t_ns: int, device: int) -> int | None:
    """The gap of ``device`` holding absolute time ``t_ns``: the last one starting at
    or before it, when it ends after it (a gap index); else None. One ``searchsorted``."""
    got = by_device.get(device)
    if got is None:
        return None
    j = int(np.searchsorted(got.start_ns, t_ns, side="right")) - 1
    if j >= 0 and got.end_ns[j] > t_ns:
        return int(got.gap[j])
    return None


def _escape(ch: str) -> str:
    """The visible stand-in of a control or format character: ``\\x1b`` for C0, DEL
    and C1, ``⟨U+202E⟩`` for the rest (bidi overrides, zero-width, separators,
    surrogates, unassigned)."""
    o = ord(ch)
    if o < 0x20 or 0x7F <= o < 0xA0:
        return f"\\x{o:02x}"
    return f"⟨U+{o:04X}⟩"


#: Categories drawn as an escape: control, format, surrogate, unassigned, line and
#: paragraph separators (Unicode general categories).
_ESCAPED = frozenset(("Cc", "Cf", "Cs", "Cn", "Zl", "Zp"))


def sanitize(text: str, max_len: int | None = None) -> str:
    """Make an untrusted name safe and readable in a terminal.

    Every printable character stays itself, with its real cell width (CJK and emoji
    take two cells, combining accents none: Rich's ``cell_len`` measures the result);
    control and format characters (C0, C1, DEL, bidi overrides, zero-width, U+2028/9)
    become a visible escape (``\\x1b``, ``⟨U+202E⟩``), so no escape sequence and no
    reordering reaches the terminal. A combining mark with nothing before it gets
    U+25CC ``◌`` as its base. Brackets, backslashes and markup-like text stay as they
    are: callers build ``Text`` objects, never markup. The text is composed (NFC) first,
    so ``cafe\u0301`` draws as ``café``. ``max_len``: at most this many characters,
    cut with ``…`` (callers that fit cells use ``gapscope.tui.cells.crop``).
    """
    text = unicodedata.normalize("NFC", text)
    if text.isascii() and text.isprintable():
        out = text
    else:
        parts: list[str] = []
        for ch in text:
            cat = unicodedata.category(ch)
            if cat in _ESCAPED:
                parts.append(_escape(ch))
            elif cat in ("Mn", "Me") and not parts:
                parts.append("\u25cc" + ch)
            else:
                parts.append(ch)
        out = "".join(parts)
    if max_len is not None and len(out) > max_len:
        out = out[: max(0, max_len - 1)] + "…"
    return out
