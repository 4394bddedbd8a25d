"""Where the events of a Chrome-trace JSON text begin and end: the one definition.

**The rule.** The events are the elements of the events array: the array that is the
whole document (array form) or the value of its ``traceEvents`` key (object form;
``find_events_array``). An event begins at a ``{`` at bracket depth 1 of that array,
outside every string (a ``"`` not escaped by an odd run of backslashes opens or closes
one), and ends one past the ``}`` that brings the depth back to 1. Between two events
lie blanks, a ``,`` and blanks (``BOUNDARY``).

``scan_elements`` applies the rule exactly (linear, vectorised). The others are fast
candidates for the cases where a full scan costs too much, each checked afterwards by a
decode that a wrong candidate fails (the caller then falls back to the exact scan or to
a decode in one piece):

- ``next_boundary``: the first ``}`` , ``{`` at or after an offset: where to cut the
  array into parts decoded apart (``chrome.parallel.cut``, ``chrome.parallel.fork``);
  a cut inside a string makes a part fail to decode.
- ``first_key_starts``: the ``{`` before each event's first key, when every event
  begins with the same key (``chrome.lazy_args``: lines of warnings, ``args``).
- ``starts_before`` / ``ends_before``: the ``{`` (``}``) nearest before an offset,
  then the next nearest, each a candidate start (end) of the element a decode then
  tries (``chrome.parallel.cut``: the event before the array's ``]``;
  ``chrome.lazy_args``: the end of an event whose text runs to the next one's start).
- ``line_prefix`` / ``next_event_line``: the next line that opens an event at the
  indentation of the events before, to read on after damage (``json.resync``,
  ``chrome.recover``).
- The C scanner (``chrome/_xscan.c``: ``object_start``, ``object_end``) keeps its own
  inner loop for the same rule (it parses each event in place as it goes);
  ``tests/test_boundaries.py`` holds its spans equal to ``scan_elements``' on the
  corpus.

Offsets are byte offsets into the text (``bytes``, ``bytearray`` or a read-only map
of a file, ``json.mapped.MappedText``), int64 where they are arrays.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from gapscope.parsers.json.scan import Text

__all__ = [
    "BOUNDARY",
    "NEW_DOCUMENT",
    "ScanResult",
    "find_events_array",
    "scan_elements",
    "next_boundary",
    "first_key_starts",
    "line_prefix",
    "next_event_line",
    "starts_before",
    "ends_before",
]

_CHUNK = 1 << 24
_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*')
#: A boundary between two elements: ``}`` , ``{`` (JSON blanks around the comma).
BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
#: A further object-form document's start, up to its events array's ``[``.
NEW_DOCUMENT = re.compile(rb'\{\s*"traceEvents"\s*:\s*\[')
_WS = b" \t\r"


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


def next_boundary(data, lo: int, hi: int) -> tuple[int, int] | None:
    """(the ``}`` ending an element, the ``,`` after it) of the first ``BOUNDARY`` that
    begins in ``data[lo:hi]``, or None. A candidate only: a ``}`` , ``{`` inside a
    string matches too (a part cut there fails to decode)."""
    m = BOUNDARY.search(data, lo, hi)
    if m is None:
        return None
    return m.start(), data.find(b",", m.start())


def first_key_starts(data, key_at: np.ndarray) -> np.ndarray | None:
    """Offsets of the ``{`` right before each key whose opening quote is at
    ``key_at - 4`` (offsets one past a 4-byte key such as ``"ph"``, as
    ``chrome.text.key_positions`` gives them), when that key is the first of its object
    (only blanks between, at most 64) and each such ``{`` opens an element of an array
    (``[`` or ``,`` before it, past blanks); else None. A key of a nested object
    (``"args": {"ph": 1}``) or of a header object after the events fails the test."""
    if key_at.size == 0:
        return np.zeros(0, np.int64)
    a = np.frombuffer(data, dtype=np.uint8)
    at = _back_over_blanks(a, key_at - 5, (123,))  # from the byte before the key's quote
    if at is None or _back_over_blanks(a, at - 1, (44, 91)) is None:
        return None
    return at


def _back_over_blanks(a: np.ndarray, at: np.ndarray, stops: tuple[int, ...]) -> np.ndarray | None:
    """Per offset of ``at`` into the bytes ``a``: the offset of the first byte at or
    before it that is no blank (space, tab, CR, LF), at most 64 blanks back, when that
    byte is one of ``stops``; else None (for all). Steps back one byte at a time over
    the offsets still on blanks (a Kineto event's ``{`` is a newline and an indent
    before its first key: about six steps)."""
    at = at.copy()
    todo = np.arange(at.size)
    for _ in range(65):  # the byte of each of 64 blanks, then the stop
        if bool((at[todo] < 0).any()):
            return None
        c = a[at[todo]]
        ws = (c == 32) | (c == 9) | (c == 10) | (c == 13)
        if not bool((ws | np.isin(c, stops)).all()):
            return None
        todo = todo[ws]
        if todo.size == 0:
            return at
        at[todo] -= 1
    return None


def line_prefix(data: bytes | bytearray, off: int) -> bytes | None:
    """The blanks before ``off`` on its line, or None when other text precedes it."""
    ls = data.rfind(b"\n", 0, off) + 1
    pre = data[ls:off]
    return bytes(pre) if pre.strip(_WS) == b"" else None  # a few blanks: bytes for re.escape


def next_event_line(data: bytes | bytearray, after: int, prefix: bytes) -> int:
    """Offset of the ``{`` of the first line after ``after`` that is ``prefix`` + ``{``;
    -1 when none."""
    m = re.compile(rb"\n" + re.escape(prefix) + rb"\{").search(data, after)
    return -1 if m is None else m.end() - 1


def starts_before(data, lo: int, hi: int, most: int):
    """The offsets of the ``{`` in ``data[lo:hi]``, nearest ``hi`` first, ``most`` at
    most: candidate starts of the element that ends before ``hi`` (a ``{`` nested in
    it or in a string comes first: the caller's decode refutes it)."""
    at = hi
    for _ in range(most):
        at = data.rfind(b"{", lo, at)
        if at < 0:
            return
        yield at


def ends_before(data, hi: int, most: int):
    """The offsets of the ``}`` in ``data[:hi]``, nearest ``hi`` first, ``most`` at
    most: candidate ends (the closing brace) of an element that starts at offset 0 and
    whose text may run on past it."""
    at = hi
    for _ in range(most):
        at = data.rfind(b"}", 0, at)
        if at < 0:
            return
        yield at
