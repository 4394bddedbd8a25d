"""Exact conversion of Chrome-trace ``ts``/``dur`` (µs) to int64 nanoseconds.

Trace Event Format times are microseconds, often with a fraction (ns precision).
A float64 holds every decimal with at most 3 fraction digits exactly enough to
recover the nanosecond when |value| < 2**43 µs (about 102 days): its spacing there is
at most 2**-10 µs < 1 ns, so ``floor(v)*1000 + rint(frac(v)*1000)`` is exact. Larger
fractional values (epoch microseconds such as ``1712345678901234.125``, where the
float64 step is 0.25 µs) are flagged ``NEED_EXACT`` and re-read from the text as
``decimal.Decimal``. Integers are exact up to 2**63 ns.
"""

from __future__ import annotations

import decimal
import math

import numpy as np

from .json_tolerant import SENTINEL_VALUES

__all__ = ["OK", "MISSING", "NONFINITE", "INVALID", "NEED_EXACT", "to_ns", "scalar_ns", "decimal_ns", "EXACT_LIMIT_US"]

OK, MISSING, NONFINITE, INVALID, NEED_EXACT = 0, 1, 2, 3, 4
#: Below this magnitude (µs) a float64 recovers the exact nanosecond.
EXACT_LIMIT_US = float(2 ** 43)
_MAX_US = 9.2e15  # int64 ns limit


def _floats_to_ns(fa: np.ndarray) -> np.ndarray:
    fl = np.floor(fa)
    return fl.astype(np.int64) * 1000 + np.rint((fa - fl) * 1000.0).astype(np.int64)


def to_ns(values: list) -> tuple[np.ndarray, np.ndarray]:
    """Convert a list of decoded ``ts``/``dur`` values (int, float, str or None) in µs.

    Returns (int64 ns array, int8 status array: OK, MISSING, NONFINITE, INVALID,
    NEED_EXACT). Vectorised when the list holds only numbers. ``NEED_EXACT`` values
    carry the float64 approximation (within the float's spacing) for cross-checks.
    """
    n = len(values)
    ns = np.zeros(n, dtype=np.int64)
    status = np.zeros(n, dtype=np.int8)
    if n == 0:
        return ns, status
    types = set(map(type, values))
    if types <= {int}:
        try:
            ia = np.array(values, dtype=np.int64)
        except OverflowError:
            ia = None
        if ia is not None and np.abs(ia).max() < _MAX_US:
            return ia * 1000, status
    if types <= {int, float}:
        fa = np.array(values, dtype=np.float64)
        nonfinite = ~np.isfinite(fa)
        if nonfinite.any():
            status[nonfinite] = NONFINITE
            fa[nonfinite] = 0.0
        big = np.abs(fa) >= EXACT_LIMIT_US
        if not big.any():
            return _floats_to_ns(fa), status
        isf = np.fromiter(map(_is_float, values), dtype=bool, count=n)
        small = ~big
        ns[small] = _floats_to_ns(fa[small])
        bigint = big & ~isf
        ok_int = bigint & (np.abs(fa) < _MAX_US)
        if ok_int.any():
            ns[ok_int] = np.array([values[i] for i in np.flatnonzero(ok_int)], dtype=np.int64) * 1000
        status[bigint & ~ok_int] = INVALID
        need = big & isf
        status[need] = NEED_EXACT
        ns[need] = _floats_to_ns(fa[need])  # approximate (within 250 ns below 2**52 µs): the caller re-reads the text
        return ns, status
    for i, v in enumerate(values):
        ns[i], status[i] = scalar_ns(v)
    return ns, status


def _is_float(v) -> bool:
    return type(v) is float


def scalar_ns(v) -> tuple[int, int]:
    """(ns, status) of one decoded value; see ``to_ns``."""
    t = type(v)
    if t is int or t is bool:
        if abs(v) < _MAX_US:
            return int(v) * 1000, OK
        return 0, INVALID
    if t is float:
        if v != v or v in (float("inf"), float("-inf")):
            return 0, NONFINITE
        if abs(v) < EXACT_LIMIT_US:
            fl = math.floor(v)
            return fl * 1000 + round((v - fl) * 1000.0), OK
        return 0, NEED_EXACT
    if v is None:
        return 0, MISSING
    if t is str:
        if v in SENTINEL_VALUES:
            return 0, NONFINITE
        try:
            d = decimal.Decimal(v.strip())
        except (decimal.InvalidOperation, ValueError):
            return 0, INVALID
        return decimal_ns(d)
    return 0, INVALID


def decimal_ns(d: decimal.Decimal | None) -> tuple[int, int]:
    """(ns, status) of an exact decimal µs value (round half to even)."""
    if d is None:
        return 0, MISSING
    if not d.is_finite():
        return 0, NONFINITE
    if abs(d) >= decimal.Decimal(_MAX_US):
        return 0, INVALID
    return int((d * 1000).to_integral_value(rounding=decimal.ROUND_HALF_EVEN)), OK
