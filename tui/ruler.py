"""The time ruler and time text: 1-2-5 tick steps, one unit per ruler (ns, µs, ms or
s), durations with three significant digits, and exact parsing of typed times.

Pure Python (no Textual, no numpy), unit-tested with exact values in
``tests/test_tui_viewmodel.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gapscope.tui.viewmodel import Viewport

__all__ = ["ruler_ticks", "format_duration_ns", "format_offset_ns", "format_time_ns", "nice_step_ns", "parse_time_ns"]

_UNITS = ((1, "ns"), (1_000, "µs"), (1_000_000, "ms"), (1_000_000_000, "s"))


def nice_step_ns(ns_per_cell: float, min_cells: int = 12) -> int:
    """Smallest 1-2-5 × 10^k ns step that spans at least ``min_cells`` cells."""
    want = ns_per_cell * min_cells
    k = 0
    while True:
        for m in (1, 2, 5):
            step = m * 10**k
            if step >= want:
                return step
        k += 1


def _unit_for(step_ns: int) -> tuple[int, str]:
    unit = _UNITS[0]
    for u in _UNITS:
        if step_ns * 10 >= u[0]:  # 500µs steps read as 0.5ms
            unit = u
    return unit


def format_time_ns(t_ns: int, step_ns: int, unit: tuple[int, str] | None = None) -> str:
    """Format a time offset with the unit and decimals that resolve ``step_ns``.

    ``format_time_ns(1_500_000, 500_000) == "1.5ms"``;
    ``format_time_ns(250_000, 50_000) == "250µs"``; ``unit`` (scale in ns, name)
    overrides the unit: ``format_time_ns(13_400_000, 10_000, (1_000_000, "ms")) ==
    "13.40ms"``.
    """
    scale, name = unit or _unit_for(step_ns)
    decimals = 0
    r = step_ns / scale
    while decimals < 9 and abs(r - round(r)) > 1e-9:
        r *= 10
        decimals += 1
    return f"{t_ns / scale:.{decimals}f}{name}"


def format_duration_ns(d_ns: int | float) -> str:
    """Human duration with 3 significant digits: ``999ns``, ``1.25µs``, ``460µs``, ``1.05ms``, ``2.00s``."""
    d = float(d_ns)
    a = abs(d)
    if a < 1_000:
        return f"{d:.0f}ns"
    for scale, name in _UNITS[1:]:
        if a < scale * 1_000 or name == "s":
            v = d / scale
            av = abs(v)
            if av >= 100:
                return f"{v:.0f}{name}"
            if av >= 10:
                return f"{v:.1f}{name}"
            return f"{v:.2f}{name}"
    raise AssertionError("unreachable")


def format_offset_ns(d_ns: int | float) -> str:
    """A signed offset from the trace start: ``+460µs``, ``-43.0µs``, ``+0ns`` (the
    sign always shown, once; ``format_duration_ns`` of the magnitude)."""
    return ("-" if d_ns < 0 else "+") + format_duration_ns(abs(d_ns))


def ruler_ticks(vp: Viewport, origin_ns: int, min_cells: int = 12) -> tuple[int, list[tuple[int, str]]]:
    """Ticks for the viewport: (step_ns, [(cell, label), ...]).

    Ticks fall at multiples of ``step_ns`` measured from ``origin_ns`` (the trace's
    first event, so labels are offsets, not epoch timestamps); ``cell`` is the cell
    whose left edge is nearest the tick, within ``[0, width)``. Ticks before
    ``origin_ns`` get no label. All labels of one ruler share one unit, chosen from the
    step and, deep inside a long trace, from the size of the offsets.
    """
    step = nice_step_ns(vp.ns_per_cell, min_cells)
    rel0 = vp.start_ns - origin_ns
    first = -(-rel0 // step) * step  # ceil to a multiple of step
    # Deep inside a long trace the labels switch to the unit of the offsets themselves
    # (13.40ms, not 13400µs) once they would need four integer digits.
    far = max(abs(first), abs(rel0 + int(vp.span_ns)))
    unit = _unit_for(step)
    if far >= 1000 * unit[0]:
        unit = max((u for u in _UNITS if u[0] <= far), key=lambda u: u[0])
    ticks: list[tuple[int, str]] = []
    t = max(first, 0)  # no labels before the trace start (offsets are never negative)
    while True:
        cell = int(round((t - rel0) / vp.ns_per_cell))
        if cell >= vp.width:
            break
        if cell >= 0:
            ticks.append((cell, format_time_ns(t, step, unit)))
        t += step
    return step, ticks


_PARSE_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


def parse_time_ns(text: str, default_unit: str = "ms") -> int:
    """Parse ``"1.5ms"``, ``"250 us"``, ``"3s"``, ``"120ns"`` or a bare number (in
    ``default_unit``) to integer ns, exactly (decimal arithmetic, no float rounding).

    Raises ``ValueError`` with a short message for anything else.
    """
    from decimal import Decimal, InvalidOperation

    s = text.strip().replace(" ", "")
    unit = default_unit
    for u in sorted(_PARSE_UNITS, key=len, reverse=True):
        if s.endswith(u) and s[: -len(u)]:
            unit, s = u, s[: -len(u)]
            break
    s = s.lstrip("+")
    try:
        v = Decimal(s)
    except InvalidOperation:
        raise ValueError(f"not a time: {text!r} (try 1.5ms, 250us, 3s)") from None
    if not v.is_finite():
        raise ValueError(f"not a time: {text!r}")
    return int(v * _PARSE_UNITS[unit])
