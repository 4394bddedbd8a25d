"""The time ruler and typed times: 1-2-5 tick steps, one unit per ruler (ns, µs, ms or
s; the labels are ``gapscope.units.fmt_tick``'s), and exact parsing of typed times.

Pure Python (no Textual, no numpy), unit-tested with exact values in
``tests/test_tui_viewmodel.py``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gapscope.units import fmt_tick, tick_unit

if TYPE_CHECKING:
    from gapscope.tui.viewmodel import Viewport

__all__ = ["ruler_ticks", "nice_step_ns", "parse_time_ns"]


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
    unit = tick_unit(step, max(abs(first), abs(rel0 + int(vp.span_ns))))
    ticks: list[tuple[int, str]] = []
    t = max(first, 0)  # no labels before the trace start (offsets are never negative)
    while True:
        cell = int(round((t - rel0) / vp.ns_per_cell))
        if cell >= vp.width:
            break
        if cell >= 0:
            ticks.append((cell, fmt_tick(t, step, unit)))
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
