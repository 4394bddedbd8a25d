"""Byte-level JSON helpers for damaged Chrome-trace files (numpy, linear, no recursion).

- ``scan_elements``: split a JSON array into its top-level elements (strings with
  backslash escapes and bracket depth tracked, vectorised per 16 MiB chunk).
- ``find_events_array``: where the ``traceEvents`` array (or a bare array) starts.
- ``repair_nonfinite``: ``NaN``/``Infinity``/``-Infinity`` value tokens → same-length
  sentinel strings, so byte offsets and line numbers stay valid.
- ``LineIndex``: 1-based line and column of byte offsets.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from gapscope.parsers.json.mapped import MappedText

#: JSON text as the readers take it: in memory, or a read-only map of a file.
Text = bytes | bytearray | MappedText

__all__ = [
    "Text",
    "ScanResult",
    "scan_elements",
    "find_events_array",
    "text_start",
    "repair_nonfinite",
    "SENTINELS",
    "SENTINEL_VALUES",
    "LineIndex",
]

_CHUNK = 1 << 24

#: Same-length JSON strings that replace the non-JSON number tokens.
SENTINELS = {b"NaN": b'"N"', b"Infinity": b'"Infini"', b"-Infinity": b'"-Infini"'}
#: Sentinel string → the float it stands for (used when showing args).
SENTINEL_VALUES = {"N": float("nan"), "Infini": float("inf"), "-Infini": float("-inf")}


@dataclasses.dataclass
class ScanResult:
    """Top-level elements of a JSON array, found by ``scan_elements``.

    ``starts``/``ends`` (int64): byte offsets of each complete element
    (``data[start:end]`` is its text). ``close`` is the offset of the array's ``]``
    (-1 when the data ends first). ``partial_start`` is the offset of an element cut
    off by the end of the data (-1 when none).
    """

    starts: np.ndarray
    ends: np.ndarray
    close: int
    partial_start: int


def scan_elements(data: Text, begin: int) -> ScanResult:
    """Split the JSON array whose ``[`` is just before ``begin`` into elements.

    Tracks strings (with backslash escapes) and bracket depth, vectorised per 16 MiB
    chunk; scalar elements between brackets are not reported. Linear time, bounded
    memory. Never raises on malformed input.
    """
    n = len(data)
    depth = 1
    in_str = False
    escape_next = False  # a backslash ended the previous chunk inside a string
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    close = -1
    open_start = -1
    a = begin
    view = memoryview(data)
    while a < n and close < 0:
        b = min(n, a + _CHUNK)
        arr = np.frombuffer(view[a:b], dtype=np.uint8)
        q = np.flatnonzero(arr == 34)
        bs = np.flatnonzero(arr == 92)
        if escape_next and q.size and q[0] == 0:
            q = q[1:]
        if escape_next and bs.size and bs[0] == 0:  # an escaped backslash: no escape of its own
            bs = bs[1:]
        escape_next = False
        if bs.size:
            escaped = _escaped_positions(bs)
            if escaped.size and escaped[-1] >= b - a:
                escape_next = True
                escaped = escaped[:-1]
            if escaped.size and q.size:
                hit = np.searchsorted(escaped, q)
                hit = np.minimum(hit, escaped.size - 1)
                q = q[escaped[hit] != q]
        low = arr | np.uint8(0x20)
        is_open = low == np.uint8(0x7B)  # '{' or '['
        br = np.flatnonzero(is_open | (low == np.uint8(0x7D)))  # brackets and braces
        # brackets inside strings: an odd number of real quotes before them
        before = np.searchsorted(q, br)
        inside = ((before + (1 if in_str else 0)) & 1).astype(bool)
        br = br[~inside]
        if q.size & 1:
            in_str = not in_str
        if br.size:
            delta = np.where(is_open[br], 1, -1).astype(np.int64)
            d_after = depth + np.cumsum(delta)
            closing = np.flatnonzero(d_after <= 0)
            if closing.size:
                k = int(closing[0])
                close = a + int(br[k])
                br, delta, d_after = br[:k], delta[:k], d_after[:k]
            st = br[(delta == 1) & (d_after == 2)] + a
            en = br[(delta == -1) & (d_after == 1)] + a + 1
            if open_start >= 0:
                st = np.concatenate(([open_start], st))
            if st.size > en.size:
                open_start = int(st[-1])
                st = st[:-1]
            else:
                open_start = -1
            starts.append(st.astype(np.int64))
            ends.append(en.astype(np.int64))
            depth = int(d_after[-1]) if d_after.size else depth
        a = b
    s = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    e = np.concatenate(ends) if ends else np.zeros(0, np.int64)
    m = min(s.size, e.size)
    return ScanResult(s[:m], e[:m], close, open_start if close < 0 else -1)


def _escaped_positions(bs: np.ndarray) -> np.ndarray:
    """Positions escaped by the backslashes at sorted positions ``bs``.

    In a run of k consecutive backslashes, every second one is escaped and the
    character after the run is escaped when k is odd.
    """
    brk = np.flatnonzero(np.diff(bs) != 1) + 1
    run_start_idx = np.concatenate(([0], brk))
    run_len = np.diff(np.concatenate((run_start_idx, [bs.size])))
    idx_in_run = np.arange(bs.size) - np.repeat(run_start_idx, run_len)
    esc_bs = bs[(idx_in_run & 1) == 1]
    last = bs[run_start_idx + run_len - 1]
    after = last[(run_len & 1) == 1] + 1
    return np.union1d(esc_bs, after)


_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*')
_LEADING_BLANKS = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*")


def text_start(data) -> int:
    """Offset of the first byte after a UTF-8 BOM and JSON whitespace (``len(data)``
    when there is none)."""
    m = _LEADING_BLANKS.match(data)
    assert m is not None  # the pattern matches the empty string
    return m.end()


def find_events_array(data: Text, root: int) -> int:
    """Offset just after the ``[`` of the events array (object or array form).

    Returns -1 when an object has no ``traceEvents`` array.
    """
    if data[root : root + 1] == b"[":
        return root + 1
    m = _EVENTS_KEY.search(data, root)
    if m is None or data[m.end() : m.end() + 1] != b"[":
        return -1
    return m.end() + 1


def repair_nonfinite(text: bytes | bytearray) -> tuple[bytes | bytearray, int]:
    """Replace ``NaN``/``Infinity``/``-Infinity`` value tokens by same-length sentinel
    strings (``SENTINELS``); returns (new text, number replaced).

    A token is a value when the previous non-blank byte is ``:``, ``,`` or ``[`` and
    the next one ``,``, ``}`` or ``]``. Linear: ``bytes.find`` per token kind, Python
    work only per occurrence.
    """
    if b"NaN" not in text and b"Infinity" not in text:
        return text, 0
    out = bytearray(text)
    count = 0
    size = len(text)
    blanks = b" \t\r\n"
    for tok in (b"-Infinity", b"Infinity", b"NaN"):
        rep = SENTINELS[tok]
        i = text.find(tok)
        while i >= 0:
            j = i + len(tok)
            if not (tok == b"Infinity" and i > 0 and text[i - 1] == 45):  # part of -Infinity
                p = i - 1
                while p >= 0 and text[p] in blanks:
                    p -= 1
                q = j
                while q < size and text[q] in blanks:
                    q += 1
                if p >= 0 and q < size and text[p] in b":,[" and text[q] in b",}]":
                    out[i:j] = rep
                    count += 1
            i = text.find(tok, j)
    return (bytes(out), count) if count else (text, 0)


class LineIndex:
    """1-based line and column of byte offsets in ``data`` (counts newlines lazily)."""

    def __init__(self, data: Text) -> None:
        self._data = data

    def lines(self, offsets: np.ndarray) -> np.ndarray:
        """int64 line numbers of ``offsets`` (any order); linear in the data size."""
        offsets = np.asarray(offsets, dtype=np.int64)
        out = np.zeros(offsets.size, dtype=np.int64)
        if offsets.size == 0:
            return out
        order = np.argsort(offsets, kind="stable")
        line, prev = 1, 0
        count = self._data.count
        srt = offsets[order].tolist()
        res = []
        for off in srt:
            if off > prev:
                line += count(b"\n", prev, off)
                prev = off
            res.append(line)
        out[order] = res
        return out

    def line(self, offset: int) -> int:
        return int(self.lines(np.array([offset]))[0])

    def column(self, offset: int) -> int:
        return offset - (self._data.rfind(b"\n", 0, offset) + 1) + 1


# A backslash escape, scanned left to right so ``\\\\u...`` (an escaped backslash then
# "u") is never read as a ``\\u`` escape: a valid surrogate pair, a lone surrogate, or
# any other escape (kept).
_ESCAPE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})|\\.",
    re.S,
)
_LONE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_KEY_BEFORE = re.compile(rb'"([^"\\]{1,64})"\s*:\s*"[^"]*$')


def repair_surrogates(text: bytes | bytearray) -> tuple[bytes | bytearray, list[tuple[int, str, str]]]:
    """Replace each lone UTF-16 surrogate escape (``\\ud800`` not paired with a low
    surrogate, or a low one alone), which no JSON decoder here accepts, by
    ``\\ufffd`` (U+FFFD, the same 6 bytes, so every offset stays). Returns (the text,
    a copy when changed; [(offset, escape, key of the string it was in or "")]).
    Python work only per backslash escape, and only when a lone one is present."""
    if b"\\u" not in text or _LONE.search(text) is None:
        return text, []
    out = None
    found: list[tuple[int, str, str]] = []
    for m in _ESCAPE.finditer(text):
        if m.group(1) is None:
            continue
        if out is None:
            out = bytearray(text)
        i = m.start()
        out[i : i + 6] = b"\\ufffd"
        key = _KEY_BEFORE.search(bytes(text[max(0, i - 256) : i]))
        found.append((i, m.group(1).decode("ascii"), key.group(1).decode("utf-8", "replace") if key else ""))
    return (out if out is not None else text), found
