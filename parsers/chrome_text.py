"""Fast byte-level helpers on Chrome-trace JSON text (numpy, no per-byte Python).

- ``key_positions``: offsets of a top-level-looking key such as ``"ph"`` or ``"ts"``.
- ``parse_us_to_ns``: exact decimal text of a µs number → int64 ns (round half to
  even below 1 ns), without a float64 round trip: epoch-microsecond values such as
  ``1712345678901234.125`` keep their nanoseconds.

Used for line numbers of warnings (event ``k`` starts at the ``{`` before its
``"ph"`` key) and for exact timestamps; callers cross-check the results against the
decoded events and fall back to a slower exact path when they disagree.
"""

from __future__ import annotations

import numpy as np

__all__ = ["key_positions", "parse_us_to_ns"]

_CHUNK = 1 << 24
_WIDTH = 40


def key_positions(data: bytes, key: bytes, begin: int = 0) -> np.ndarray:
    """int64 offsets just after each ``key`` (e.g. ``b'"ts"'``) that is followed by
    optional whitespace and ``:``. Linear, chunked; a key inside a string value is
    written with escaped quotes, so it cannot match."""
    a = np.frombuffer(data, dtype=np.uint8)
    n = a.size
    k = len(key)
    kb = np.frombuffer(key, dtype=np.uint8)
    out = []
    for c0 in range(begin, n, _CHUNK):
        c1 = min(n, c0 + _CHUNK + k - 1)
        seg = a[c0:c1]
        if seg.size < k:
            break
        m = seg[: seg.size - k + 1] == kb[0]
        for j in range(1, k):
            m &= seg[j: seg.size - k + 1 + j] == kb[j]
        pos = np.flatnonzero(m)
        pos = pos[pos < _CHUNK]
        out.append(pos.astype(np.int64) + c0 + k)
    pos = np.concatenate(out) if out else np.zeros(0, np.int64)
    if pos.size == 0:
        return pos
    # require optional whitespace then ':'
    idx = pos[:, None] + np.arange(4)
    np.minimum(idx, n - 1, out=idx)
    w = a[idx]
    ws = (w == 32) | (w == 9) | (w == 10) | (w == 13)
    first = np.argmin(ws, axis=1)
    ok = w[np.arange(w.shape[0]), first] == ord(":")
    return pos[ok]


def parse_us_to_ns(data: bytes, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parse the JSON number after ``:`` at each offset in ``pos`` (as returned by
    ``key_positions``), as µs, into int64 ns exactly.

    Returns (ns, ok): ``ok`` is False where the text is not a plain decimal number
    (exponent, string, NaN, more than 16 integer digits, ...); the caller falls back.
    """
    a = np.frombuffer(data, dtype=np.uint8)
    n = a.size
    m = pos.size
    ns = np.zeros(m, dtype=np.int64)
    if m == 0:
        return ns, np.zeros(0, bool)
    idx = pos[:, None] + np.arange(_WIDTH)
    np.minimum(idx, n - 1, out=idx)
    w = a[idx]
    rows = np.arange(m)
    # skip whitespace, ':', whitespace
    skip = (w == 32) | (w == 9) | (w == 10) | (w == 13) | (w == ord(":"))
    s = np.argmin(skip, axis=1)
    col = s[:, None] + np.arange(_WIDTH - 8)
    np.minimum(col, _WIDTH - 1, out=col)
    v = w[rows[:, None], col]
    neg = v[:, 0] == ord("-")
    col = col + neg[:, None]
    np.minimum(col, _WIDTH - 1, out=col)
    v = w[rows[:, None], col]
    dig = (v >= 48) & (v <= 57)
    int_len = np.argmin(dig, axis=1)  # first non-digit
    ok = (int_len > 0) & (int_len <= 16) & ~dig.all(axis=1)
    d = (v.astype(np.int64) - 48) * dig
    # integer part: sum d[j] * 10**(int_len-1-j) for j < int_len
    j = np.arange(v.shape[1])
    expo = int_len[:, None] - 1 - j
    in_int = expo >= 0
    pow10 = np.power(10, np.clip(expo, 0, 18), dtype=np.int64)
    ip = (d * pow10 * in_int).sum(axis=1)
    nxt = v[rows, np.minimum(int_len, v.shape[1] - 1)]
    has_frac = nxt == ord(".")
    # fraction digits start at int_len + 1
    fcol = int_len[:, None] + 1 + np.arange(12)
    np.minimum(fcol, v.shape[1] - 1, out=fcol)
    f = v[rows[:, None], fcol]
    fdig = (f >= 48) & (f <= 57)
    flen = np.where(fdig.all(axis=1), 12, np.argmin(fdig, axis=1))
    flen = np.where(has_frac, flen, 0)
    ok &= ~has_frac | (flen > 0)
    fd = (f.astype(np.int64) - 48) * fdig
    fd = fd * (np.arange(12) < flen[:, None])
    frac3 = fd[:, 0] * 100 + fd[:, 1] * 10 + fd[:, 2]
    d4 = fd[:, 3]
    rest = (fd[:, 4:] > 0).any(axis=1)
    base = ip * 1000 + frac3
    up = (d4 > 5) | ((d4 == 5) & (rest | ((base & 1) == 1)))
    base = base + up
    # the character after the number must end it (no exponent, no junk)
    end_col = np.where(has_frac, int_len + 1 + flen, int_len)
    after = v[rows, np.minimum(end_col, v.shape[1] - 1)]
    ok &= ~((after == ord("e")) | (after == ord("E")) | ((after >= 48) & (after <= 57)))
    ok &= end_col < v.shape[1] - 1
    ns = np.where(neg, -base, base)
    return ns, ok
