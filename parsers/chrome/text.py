"""Fast byte-level helpers on Chrome-trace JSON text (numpy, no per-byte Python).

- ``key_positions``: offsets of a top-level-looking key such as ``"ph"`` or ``"ts"``.
- ``exact_ns_near``: exact decimal text of a µs number → int64 ns (round half to
  even below 1 ns), without a float64 round trip: epoch-microsecond values such as
  ``1712345678901234.125`` keep their nanoseconds.

Used for line numbers of warnings (event ``k`` starts at the ``{`` before its
``"ph"`` key) and for exact timestamps; callers cross-check the results against the
decoded events and fall back to a slower exact path when they disagree.
"""

from __future__ import annotations

import itertools
import re

import numpy as np

from gapscope.parsers.json.scan import Text

__all__ = ["key_positions", "exact_ns_near"]

_CHUNK = 1 << 24
_WIDTH = 40


def key_positions(data: Text, key: bytes, begin: int = 0, limit: int | None = None) -> np.ndarray:
    """int64 offsets just after each ``key`` (e.g. ``b'"ts"'``) that is followed by
    optional whitespace and ``:``. Linear (one regex scan in C); a key inside a string
    value is written with escaped quotes, so it cannot match. ``limit``: stop after
    that many."""
    if limit is None and len(key) == 4:
        return _key4_positions(data, key, begin)
    pat = _PATTERNS.get(key)
    if pat is None:
        pat = _PATTERNS[key] = re.compile(re.escape(key) + rb"\s*:")
    k = len(key)
    it = pat.finditer(data, begin)
    if limit is not None:
        it = itertools.islice(it, limit)
    return np.array([m.start() + k for m in it], dtype=np.int64)


_PATTERNS: dict[bytes, re.Pattern[bytes]] = {}


def _key4_positions(data: Text, key: bytes, begin: int) -> np.ndarray:
    """``key_positions`` for a 4-byte key: compare the text viewed as little-endian
    uint32 at each of the 4 alignments (vectorised), then check the ``:``."""
    kv = np.frombuffer(key, dtype="<u4")[0]
    n = len(data)
    outs = []
    for o in range(4):
        m = (n - begin - o) // 4
        if m <= 0:
            continue
        for c0 in range(0, m, _CHUNK):
            c = min(_CHUNK, m - c0)
            a = np.frombuffer(data, dtype="<u4", count=c, offset=begin + o + 4 * c0)
            outs.append(np.flatnonzero(a == kv).astype(np.int64) * 4 + (begin + o + 4 * c0 + 4))
    pos = np.concatenate(outs) if outs else np.zeros(0, np.int64)
    pos.sort()
    if pos.size == 0:
        return pos
    b = np.frombuffer(data, dtype=np.uint8)
    idx = pos[:, None] + np.arange(4)
    np.minimum(idx, n - 1, out=idx)
    w = b[idx]
    ws = (w == 32) | (w == 9) | (w == 10) | (w == 13)
    first = np.argmin(ws, axis=1)
    return pos[w[np.arange(w.shape[0]), first] == ord(":")]


def exact_ns_near(
    data: Text, pos: np.ndarray, approx_ns: np.ndarray, chunk: int = 1 << 16
) -> tuple[np.ndarray, np.ndarray]:
    """Exact int64 ns of the µs numbers after ``:`` at offsets ``pos``, given an
    approximation ``approx_ns`` (int64) within ±400 ns of each.

    Only the fraction digits are read from the text: they fix ``ns mod 1000``, and
    the approximation fixes the whole microseconds (a float64 of ``ts`` split as
    ``floor(v)*1000 + rint(frac(v)*1000)`` is within 250 ns for |v| < 2**52 µs).
    Digits past the nanosecond round half to even. The last six integer digits of
    the text are checked against the result, so a wrong ``pos`` is caught. Returns
    (ns, ok); ``ok`` is False for an exponent, a string, or a failed check.
    """
    pos = np.asarray(pos, dtype=np.int64)
    approx_ns = np.asarray(approx_ns, dtype=np.int64)
    if pos.size > chunk:
        parts = [_near_chunk(data, pos[i : i + chunk], approx_ns[i : i + chunk]) for i in range(0, pos.size, chunk)]
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    return _near_chunk(data, pos, approx_ns)


def _near_chunk(data: Text, pos: np.ndarray, approx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.frombuffer(data, dtype=np.uint8)
    m = pos.size
    if m == 0:
        return np.zeros(0, np.int64), np.zeros(0, bool)
    width = 36
    idx = pos[:, None] + np.arange(width)
    np.minimum(idx, a.size - 1, out=idx)
    w = a[idx]
    rows = np.arange(m)
    dig = (w - np.uint8(48)) < np.uint8(10)
    lead = (w == 32) | (w == 58) | (w == 9) | (w == 10) | (w == 13) | (w == 45)
    # the integer part ends at the first character that is neither a digit nor
    # leading ':', whitespace or '-'
    int_end = np.argmax(~(dig | lead), axis=1)
    ok = ~(dig | lead).all(axis=1)
    neg = (w == 45).any(axis=1) & (np.argmax(w == 45, axis=1) < int_end)
    has_dot = w[rows, int_end] == 46
    fcol = np.minimum(int_end[:, None] + 1 + np.arange(10), width - 1)
    f = w[rows[:, None], fcol]
    fdig = (f - np.uint8(48)) < np.uint8(10)
    flen = np.where(has_dot, np.argmin(fdig, axis=1), 0)
    ok &= ~has_dot | ((flen > 0) & ~fdig.all(axis=1))
    end_ch = f[rows, np.minimum(flen, 9)]
    end_ch = np.where(has_dot, end_ch, w[rows, int_end])
    ok &= (end_ch != 101) & (end_ch != 69)  # no exponent
    fd = np.where(np.arange(10) < flen[:, None], f.astype(np.int64) - 48, 0)
    frac3 = fd[:, 0] * 100 + fd[:, 1] * 10 + fd[:, 2]
    d4 = fd[:, 3]
    rest = (fd[:, 4:] > 0).any(axis=1)
    mag = np.abs(approx)
    whole_us = (mag - frac3 + 500) // 1000
    base = whole_us * 1000 + frac3
    up = (d4 > 5) | ((d4 == 5) & (rest | ((base & 1) == 1)))
    base = base + up
    # checksum: the last (up to) six integer digits of the text must match
    tail = np.zeros(m, dtype=np.int64)
    mod = np.ones(m, dtype=np.int64)
    nint = np.zeros(m, dtype=np.int64)
    for j in range(1, 7):
        col = np.maximum(int_end - j, 0)
        dj = w[rows, col]
        has = ((dj - np.uint8(48)) < np.uint8(10)) & (int_end - j >= 0) & (nint == j - 1)
        nint += has
        tail += np.where(has, (dj.astype(np.int64) - 48) * mod, 0)
        mod = np.where(has, mod * 10, mod)
    ok &= (nint >= 1) & (tail == whole_us % mod)
    ok &= mag < (1 << 62)
    return np.where(neg, -base, base), ok
