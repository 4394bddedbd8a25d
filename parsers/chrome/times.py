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
from operator import itemgetter

import numpy as np

from gapscope.parsers.json.scan import SENTINEL_VALUES

__all__ = [
    "OK",
    "MISSING",
    "NONFINITE",
    "INVALID",
    "NEED_EXACT",
    "to_ns",
    "scalar_ns",
    "decimal_ns",
    "raw_to_ns",
    "raw_scalar_ns",
    "EXACT_LIMIT_US",
    "number_text",
]

OK, MISSING, NONFINITE, INVALID, NEED_EXACT = 0, 1, 2, 3, 4
#: Below this magnitude (µs) a float64 recovers the exact nanosecond.
EXACT_LIMIT_US = float(2**43)
_MAX_US = 9.2e15  # int64 ns limit
_MAX_US_INT = int(_MAX_US)


def _floats_to_ns(fa: np.ndarray) -> np.ndarray:
    """int64 ns of finite µs floats; values beyond int64 give garbage that the callers
    flag by magnitude first (no RuntimeWarning printed for them)."""
    fl = np.floor(fa)
    with np.errstate(invalid="ignore", over="ignore"):
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
        # compared as integers, as ``scalar_ns`` compares: as float64, 9199999999999999
        # rounds up to the limit itself; and ``abs`` of the lowest int64 is negative
        if ia is not None and bool(((ia > -_MAX_US_INT) & (ia < _MAX_US_INT)).all()):
            return ia * 1000, status
    if types <= {int, float}:
        try:
            fa = np.array(values, dtype=np.float64)
        except OverflowError:  # an integer beyond float range: per value (INVALID)
            fa = None
    if types <= {int, float} and fa is not None:
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
        ok_int = np.zeros(n, dtype=bool)  # exactly, as ``scalar_ns`` (few: integers of 2**43 µs or more)
        for i in np.flatnonzero(bigint).tolist():
            ok_int[i] = abs(values[i]) < _MAX_US
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


_RAW_WIDTH = 32
_RAW_CHUNK = 1 << 16
_MAX_INT_DIGITS = 16  # and below 9.2e15 µs (``_MAX_US``): the ns fit an int64


def raw_to_ns(raws: list) -> tuple[np.ndarray, np.ndarray]:
    """Exact (int64 ns, int8 status) of ``ts`` values kept as JSON text (``msgspec.Raw``).

    Plain decimal numbers (``-?digits[.digits]``, at most 16 integer digits and 32
    characters, |value| < 9.2e15 µs) are parsed with numpy, grouped by text length and
    decimal-point position (a file has a handful of such layouts): each group's texts
    are joined into one byte matrix; ns = integer part × 1000 + the first three
    fraction digits, rounded half to even on the rest (as ``decimal_ns``), so epoch-µs
    values keep their nanoseconds without a float64 round trip. Anything else
    (``null``, strings, exponents, longer text) goes through ``scalar_ns``/
    ``decimal_ns`` one by one, with the statuses of ``to_ns``.
    """
    m = len(raws)
    ns = np.zeros(m, dtype=np.int64)
    status = np.zeros(m, dtype=np.int8)
    if m == 0:
        return ns, status
    lens = np.fromiter(map(len, raws), dtype=np.int64, count=m)
    ok = np.zeros(m, dtype=bool)
    for length in np.unique(lens).tolist():
        if not 1 <= length <= _RAW_WIDTH:
            continue
        sel = np.flatnonzero(lens == length)
        if sel.size == m:
            buf = b"".join(raws)
        elif sel.size == 1:
            buf = bytes(raws[int(sel[0])])
        else:
            buf = b"".join(itemgetter(*sel.tolist())(raws))
        mat = np.frombuffer(buf, dtype=np.uint8).reshape(sel.size, length)
        for c0 in range(0, sel.size, _RAW_CHUNK):
            rows = sel[c0 : c0 + _RAW_CHUNK]
            ns[rows], ok[rows] = _parse_fixed(mat[c0 : c0 + _RAW_CHUNK])
    for j in np.flatnonzero(~ok).tolist():
        ns[j], status[j] = raw_scalar_ns(bytes(raws[j]))
    return ns, status


def _parse_fixed(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ns, ok) of rows of number texts that all have the same length."""
    k, length = mat.shape
    ns = np.zeros(k, dtype=np.int64)
    ok = np.zeros(k, dtype=bool)
    neg = mat[:, 0] == 45  # '-'
    is_dot = mat == 46
    dot = np.where(is_dot.any(axis=1), np.argmax(is_dot, axis=1), length)
    layout = dot * 2 + neg
    for lay in np.unique(layout).tolist():
        d, sign = lay // 2, lay % 2
        rows = np.flatnonzero(layout == lay)
        sub = mat[rows]
        n_int = d - sign
        n_frac = length - d - 1 if d < length else 0
        if not 1 <= n_int <= _MAX_INT_DIGITS or (d < length and n_frac < 1):
            continue
        ints = sub[:, sign:d].astype(np.int64) - 48
        good = ((ints >= 0) & (ints <= 9)).all(axis=1)
        whole = ints @ (10 ** np.arange(n_int - 1, -1, -1, dtype=np.int64))
        f3 = np.zeros(rows.size, dtype=np.int64)
        d4 = np.zeros(rows.size, dtype=np.int64)
        rest = np.zeros(rows.size, dtype=bool)
        if n_frac:
            fr = sub[:, d + 1 :].astype(np.int64) - 48
            good &= ((fr >= 0) & (fr <= 9)).all(axis=1)
            n3 = min(3, n_frac)
            f3 = fr[:, :n3] @ (10 ** np.arange(2, 2 - n3, -1, dtype=np.int64))
            if n_frac > 3:
                d4 = fr[:, 3]
            if n_frac > 4:
                rest = np.any(fr[:, 4:] > 0, axis=1)
        good &= whole < 9_200_000_000_000_000
        base = np.where(good, whole, 0) * 1000 + f3
        base += (d4 > 5) | ((d4 == 5) & (rest | ((base & 1) == 1)))
        ns[rows] = -base if sign else base
        ok[rows] = good
    return ns, ok


def raw_scalar_ns(text: bytes) -> tuple[int, int]:
    """(ns, status) of one JSON value's text (the slow path of ``raw_to_ns``)."""
    import msgspec  # local: chrome_times stays importable without the JSON stack

    try:
        v = msgspec.json.decode(text)
    except msgspec.DecodeError:
        return 0, INVALID
    if type(v) is float and math.isfinite(v) and abs(v) >= EXACT_LIMIT_US:
        try:
            return decimal_ns(decimal.Decimal(text.decode("ascii").strip()))
        except (decimal.InvalidOperation, UnicodeDecodeError):
            return 0, INVALID
    return scalar_ns(v)


def number_text(v) -> str:
    """``repr`` of a decoded value for a warning, long integers elided
    (``999999…999 (400 digits)``) so a hostile literal cannot flood the output."""
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 10**30:
        if v.bit_length() > 13000:  # str() refuses beyond 4300 digits
            return "an integer of over 4000 digits"
        s = str(abs(v))
        return f"{'-' if v < 0 else ''}{s[:6]}…{s[-3:]} ({len(s)} digits)"
    return repr(v)
