"""Durations and times as text: one rule per kind of place, for every surface (the
viewer's lanes, status line and card, the report, diff and ranks, the exercise
feedback, the loader's warnings, capture's summary line).

A leaf module: the standard library only, nothing of gapscope, so every layer may
import it (``[tool.importlinter]`` in ``pyproject.toml`` says so).

The rules (values in ns, int or float; numpy scalars too):

``fmt_dur`` (a duration: a gap, a step, an evidence item), by the magnitude after
rounding:

=====================  ==================  ==============================
magnitude              written as          examples
=====================  ==================  ==============================
below 1 µs             whole ns            ``0 ns``, ``999 ns``
1 µs up to 100 µs      µs, 1 decimal       ``1.0 µs``, ``46.0 µs``, ``99.9 µs``
100 µs up to 1 s       ms, 3 decimals      ``0.100 ms``, ``0.460 ms``, ``999.999 ms``
from 1 s               s, 3 decimals       ``1.000 s``, ``59.000 s``, ``3600.000 s``
=====================  ==================  ==============================

So one gap reads the same on its lane, in the status line, on its card, in the report
and in an exercise's feedback (``0.460 ms``), and figures of one sentence add up in
their last digit (a card's parts, an exercise's ``idle = wall - busy``). No minutes
or hours: a trace is seconds long, and a longer (broken) value reads as seconds.

- Rounding: half away from zero, on the exact value (an int exactly, a float by its
  exact binary value): ``1_250`` ns reads ``1.3 µs``, ``194_500`` ns ``0.195 ms``,
  ``-1_250`` ns ``-1.3 µs``.
- The unit is chosen after rounding: ``99_950`` ns reads ``0.100 ms``, not
  ``100.0 µs``; ``999_999_500`` ns reads ``1.000 s``.
- Negative values: ``-`` then the magnitude's text (``-0.460 ms``); a value that
  rounds to zero has no sign (``0 ns``).
- None, NaN and ±inf are no duration: ``-`` (the mark tables use for "no value").

``fmt_offset`` (a position: time since the trace's first event): as ``fmt_dur`` below
1 s; from 1 s seconds with 6 decimals (``5.937269 s``), so that a gap can be found in
a long trace to the µs. ``fmt_delta`` (a signed change, a lateness): ``+``, ``−``
(U+2212) or ``±`` (zero) before ``fmt_dur`` of the magnitude.

Tables and pairs share one unit per column (``column_unit``, ``offset_column_unit``,
``fmt_in``, ``fmt_dur_pair``): the unit ``fmt_dur`` gives the column's largest value,
every value with that unit's decimals (``0.312 ms``, ``0.020 ms``), except that a
duration column reaching 1 s writes each value in its own unit (``8.987 s`` beside
``46.0 µs``: seconds with 3 decimals would read a 46 µs idle as ``0.000 s``).

The one compact form is the ruler's (``fmt_tick``): tick labels sit at least ten
cells apart, so they carry no space and only the decimals that resolve the tick step
(``1.5ms``, ``250µs``). A tick labels a round position of the axis, never the length
of a gap, so no figure on the screen reads two ways.
"""

from __future__ import annotations

import math
import operator
from fractions import Fraction
from typing import NamedTuple, SupportsFloat

__all__ = [
    "Unit",
    "NS",
    "US",
    "MS",
    "S",
    "S_AT",
    "fmt_dur",
    "fmt_offset",
    "fmt_delta",
    "column_unit",
    "offset_column_unit",
    "fmt_in",
    "fmt_dur_pair",
    "tick_unit",
    "fmt_tick",
    "fmt_bytes",
    "fmt_rate",
]


class Unit(NamedTuple):
    """A time unit as text: its ``symbol``, its size in ``ns`` and the ``decimals``
    written in it (``fmt_tick`` ignores ``decimals``: the tick step sets them)."""

    symbol: str
    ns: int
    decimals: int


NS = Unit("ns", 1, 0)
US = Unit("µs", 1_000, 1)
MS = Unit("ms", 1_000_000, 3)
S = Unit("s", 1_000_000_000, 3)
#: Positions from 1 s on: seconds to the µs.
S_AT = Unit("s", 1_000_000_000, 6)

#: (unit, magnitude in ns below which it is used); the last has no upper bound.
_DUR_TIERS = ((NS, 1_000), (US, 100_000), (MS, 1_000_000_000), (S, None))
_OFFSET_TIERS = ((NS, 1_000), (US, 100_000), (MS, 1_000_000_000), (S_AT, None))

_Exact = int | Fraction


def _exact(value_ns: SupportsFloat | None) -> _Exact | None:
    """The exact value of an int or float (numpy scalars too); None for None, NaN, ±inf."""
    if value_ns is None:
        return None
    try:
        return operator.index(value_ns)  # type: ignore[arg-type]  # int, numpy integer
    except TypeError:
        pass
    f = float(value_ns)
    if not math.isfinite(f):
        return None
    return int(f) if f.is_integer() else Fraction(f)


def _count(x: _Exact, unit: Unit) -> int:
    """``x`` ns as a whole number of the last written digit of ``unit``, rounded half
    away from zero (exactly: ``x`` is an int or a Fraction)."""
    step = unit.ns // 10**unit.decimals
    q, r = divmod(-x if x < 0 else x, step)  # Fraction // int is an int
    q = int(q) + (1 if 2 * r >= step else 0)
    return -q if x < 0 else q


def _digits(q: int, decimals: int) -> str:
    whole, frac = divmod(abs(q), 10**decimals)
    text = f"{whole}.{frac:0{decimals}d}" if decimals else f"{whole}"
    return "-" + text if q < 0 else text


def _abs(x: _Exact) -> _Exact:
    return -x if x < 0 else x


def _pick(x: _Exact, tiers) -> tuple[Unit, int]:
    """The unit of the first tier whose bound the rounded magnitude stays below, and the count in it."""
    for unit, below_ns in tiers:
        q = _count(x, unit)
        if below_ns is None or abs(q) * (unit.ns // 10**unit.decimals) < below_ns:
            return unit, q
    raise AssertionError("unreachable")  # pragma: no cover - the last tier has no bound


def _fmt_tiered(value_ns: SupportsFloat | None, tiers) -> str:
    """``value_ns`` in the unit of the first of ``tiers`` it rounds below, or ``-``."""
    x = _exact(value_ns)
    if x is None:
        return "-"
    unit, q = _pick(x, tiers)
    return f"{_digits(q, unit.decimals)} {unit.symbol}"


def fmt_dur(dur_ns: SupportsFloat | None) -> str:
    """A duration in ns as text, by the module's rule: whole ns below 1 µs, µs with 1
    decimal below 100 µs, ms with 3 decimals below 1 s, else s with 3 decimals
    (``999 ns``, ``46.0 µs``, ``0.460 ms``, ``1.000 s``); the unit after rounding
    half away from zero; ``-`` for None, NaN and ±inf."""
    return _fmt_tiered(dur_ns, _DUR_TIERS)


def fmt_offset(t_ns: SupportsFloat | None) -> str:
    """A position in ns since the trace's first event: as ``fmt_dur`` below 1 s, from
    1 s seconds with 6 decimals (``52.067 ms``, ``5.937269 s``); negative with ``-``;
    ``-`` for None, NaN and ±inf."""
    return _fmt_tiered(t_ns, _OFFSET_TIERS)


def fmt_delta(delta_ns: SupportsFloat | None) -> str:
    """A signed change in ns: ``+`` (longer, later), ``−`` (U+2212: shorter, earlier) or
    ``±`` (rounds to zero) before ``fmt_dur`` of the magnitude (``+12.0 µs``,
    ``−0.460 ms``, ``±0 ns``); ``-`` for None, NaN and ±inf."""
    x = _exact(delta_ns)
    if x is None:
        return "-"
    unit, q = _pick(_abs(x), _DUR_TIERS)
    sign = "±" if q == 0 else "+" if x > 0 else "−"
    return f"{sign}{_digits(q, unit.decimals)} {unit.symbol}"


def column_unit(max_abs_ns: SupportsFloat) -> Unit | None:
    """The one unit of a column (or a sentence) of durations whose largest magnitude is
    ``max_abs_ns``: the unit ``fmt_dur`` writes that value in; None from 1 s on, where
    ``fmt_in`` writes each value in its own unit (seconds with 3 decimals would lose
    the small ones). Raises ``ValueError`` for NaN or ±inf."""
    x = _exact(max_abs_ns)
    if x is None:
        raise ValueError(f"no column unit for {max_abs_ns!r}")
    unit, _ = _pick(_abs(x), _DUR_TIERS)
    return None if unit is S else unit


def offset_column_unit(max_abs_ns: SupportsFloat) -> Unit:
    """The one unit of a column of positions whose largest magnitude is ``max_abs_ns``:
    the unit ``fmt_offset`` writes that value in (from 1 s seconds with 6 decimals,
    which keep every position to the µs). Raises ``ValueError`` for NaN or ±inf."""
    x = _exact(max_abs_ns)
    if x is None:
        raise ValueError(f"no column unit for {max_abs_ns!r}")
    unit, _ = _pick(_abs(x), _OFFSET_TIERS)
    return unit


def fmt_in(value_ns: SupportsFloat | None, unit: Unit | None, *, symbol: bool = True) -> str:
    """``value_ns`` in ``unit`` with its decimals, rounded half away from zero (``0.020 ms`` in
    ``MS``), with the symbol unless ``symbol`` is false (``0.020``); ``unit`` None:
    ``fmt_dur(value_ns)`` (a ``column_unit`` from 1 s on). ``-`` for None, NaN and ±inf."""
    if unit is None:
        return fmt_dur(value_ns)
    x = _exact(value_ns)
    if x is None:
        return "-"
    number = _digits(_count(x, unit), unit.decimals)
    return f"{number} {unit.symbol}" if symbol else number


def fmt_dur_pair(a_ns: SupportsFloat, b_ns: SupportsFloat, sep: str = " → ") -> str:
    """Two durations in the ``column_unit`` of the larger, the symbol once
    (``0.312 → 0.328 ms``); each in its own unit from 1 s on (``1.200 s → 0.600 ms``)."""
    u = column_unit(max(abs(float(a_ns)), abs(float(b_ns))))
    if u is None:
        return f"{fmt_dur(a_ns)}{sep}{fmt_dur(b_ns)}"
    return f"{fmt_in(a_ns, u, symbol=False)}{sep}{fmt_in(b_ns, u)}"


_TICK_UNITS = (NS, US, MS, S)


def tick_unit(step_ns: int, far_ns: float = 0) -> Unit:
    """The unit of a ruler whose ticks are ``step_ns`` apart: the largest in which the
    step is at least 0.1 (500 µs steps read as ``0.5ms``), or, where the positions
    reach ``far_ns``, the unit of ``far_ns`` itself once the step's unit would need four
    integer digits (``13.40ms``, not ``13400µs``)."""
    unit = NS
    for u in _TICK_UNITS:
        if step_ns * 10 >= u.ns:
            unit = u
    if abs(far_ns) >= 1000 * unit.ns:
        unit = max((u for u in _TICK_UNITS if u.ns <= abs(far_ns)), key=lambda u: u.ns)
    return unit


def fmt_tick(t_ns: SupportsFloat, step_ns: int, unit: Unit | None = None) -> str:
    """A ruler tick label: ``t_ns`` in ``unit`` (default ``tick_unit(step_ns)``) with
    the decimals that resolve ``step_ns``, no space before the symbol (the compact
    form, for labels ten cells apart): ``fmt_tick(1_500_000, 500_000) == "1.5ms"``,
    ``fmt_tick(250_000, 50_000) == "250µs"``, ``fmt_tick(13_400_000, 10_000, MS) ==
    "13.40ms"``."""
    x = _exact(t_ns)
    if x is None:
        return "-"
    step = operator.index(step_ns)
    u = unit or tick_unit(step)
    decimals = 0
    r = Fraction(step, u.ns)
    while r.denominator != 1:  # u.ns is a power of ten: at most log10(u.ns) rounds
        r *= 10
        decimals += 1
    return _digits(_count(x, Unit(u.symbol, u.ns, decimals)), decimals) + u.symbol


def fmt_bytes(n: int) -> str:
    """A byte count with binary prefixes, 1 decimal from 1 KiB on (``100 B``, ``64.0
    KiB``, ``3.0 GiB``, up to TiB); ``?`` when negative (unknown): memcpy sizes on
    cards and reports, device memory, file sizes."""
    n = int(n)
    if n < 0:
        return "?"
    if n < 1024:
        return f"{n} B"
    x = float(n)
    for unit in ("KiB", "MiB", "GiB"):
        x /= 1024.0
        if x < 1024:
            return f"{x:.1f} {unit}"
    return f"{x / 1024.0:.1f} TiB"


def fmt_rate(per_s: float | None) -> str:
    """A rate (steps/s, tokens/s): whole numbers from 100 up (``2,874``), two decimals
    from 1 up (``4.72``), two significant digits below 1 (``0.075``, ``0.50``: a rate
    of a step longer than a second never reads ``0``); ``-`` when None. The budget, the
    what-if rows and the findings use it alike, so a projection reads with the
    precision of the baseline it is compared with."""
    if per_s is None:
        return "-"
    if abs(per_s) >= 100:
        return f"{per_s:,.0f}"
    if abs(per_s) >= 1 or per_s == 0:
        return f"{per_s:,.2f}"
    return f"{per_s:#.2g}"
