"""Where to cut a Chrome-trace text in two for ``gapscope.parsers.chrome.parallel.fork``.

The cut is planned on the text alone (bytes, bytearray or a read-only map of the
file): the events array's start, its end (keys may follow it), and an element
boundary near a share of its bytes. A plan is only a candidate; the parts failing
to decode refute it (see ``chrome_parallel.decode_parts``).
"""

from __future__ import annotations

import msgspec

from gapscope.parsers.chrome.schema import AnyEvent, AnyEventRawTs, ObjectHeader
from gapscope.parsers.json.boundaries import find_events_array, next_boundary, starts_before

__all__ = [
    "array_bounds",
    "last_non_blank",
    "find_cut",
    "find_cuts",
    "chunk_spans",
    "END_CANDIDATES",
    "END_WINDOW_BYTES",
]

#: Where the end of the events array is looked for: this many ``]`` from the end of
#: the text, within this many bytes (the keys after the array are small).
END_CANDIDATES = 4096
END_WINDOW_BYTES = 16 << 20
#: Most bytes decoded in all while trying candidates (a bound on adversarial texts).
END_DECODE_BUDGET = 64 << 20
#: Bytes after a target searched for an element boundary (``find_cut``, ``find_cuts``).
BOUNDARY_WINDOW_BYTES = 8 << 20
#: ``{`` tried when looking for the start of the event before a candidate ``]``.
_EVENT_CANDIDATES = 64
_MARKER = b'"gapscope:traceEvents"'
_ABSENT = b'"gapscope:absent"'
_OPEN = b'{"gapscope:before":0'
_HEADER = msgspec.json.Decoder(ObjectHeader)
_ONE_EVENT = msgspec.json.Decoder(AnyEvent)
_ONE_EVENT_RAW_TS = msgspec.json.Decoder(AnyEventRawTs)
_WS = b" \t\r\n"


def find_cut(
    data, root: int, raw_ts: bool = False, head_fraction: float = 0.5
) -> tuple[int, int, int, int, ObjectHeader | None] | None:
    """(just after the events array's ``[``, the ``}`` ending the head's last event,
    the ``,`` after it, the array's ``]``, the object form's ``ObjectHeader`` or None),
    or None. The boundary is the first at or after ``head_fraction`` of the array's
    bytes. The cut is only a candidate: a part that does not decode as an array
    refutes it."""
    bounds = array_bounds(data, root, raw_ts)
    if bounds is None:
        return None
    begin, end, header = bounds
    target = begin + int((end - begin) * head_fraction)
    found = next_boundary(data, target, min(end, target + BOUNDARY_WINDOW_BYTES))
    if found is None:
        return None
    brace, comma = found
    return begin, brace, comma, end, header


def array_bounds(data, root: int, raw_ts: bool) -> tuple[int, int, ObjectHeader | None] | None:
    """(just after the events array's ``[``, its ``]``, the object form's
    ``ObjectHeader`` or None), or None when no non-empty events array is found."""
    begin = find_events_array(data, root)
    if begin < 0:
        return None
    header: ObjectHeader | None = None
    if data[root : root + 1] == b"{":
        found = _array_end(data, root, begin, raw_ts)
        if found is None:
            return None
        end, header = found
    else:
        end = last_non_blank(data, begin, len(data) - 1)
        if end >= len(data) or data[end] != ord("]"):  # "[" alone: nothing after it
            return None
    if end <= begin:
        return None
    return begin, end, header


def find_cuts(
    data, root: int, raw_ts: bool, n_chunks: int
) -> tuple[int, int, tuple[tuple[int, int], ...], ObjectHeader | None] | None:
    """Plan ``n_chunks`` parts of the events array: (just after its ``[``, its ``]``,
    the ``(}, ,)`` offsets of each boundary between two parts, the object form's
    ``ObjectHeader`` or None), or None. Boundary ``i`` is the first element boundary
    at or after ``(i + 1) / n_chunks`` of the array's bytes; boundaries that coincide
    (elements longer than a part) are kept once, and a target with no boundary in the
    ``BOUNDARY_WINDOW_BYTES`` after it (inside the last element, or an element longer
    than that) is skipped, so there may be fewer parts. Like
    ``find_cut``, only a candidate: a part that does not decode refutes it."""
    bounds = array_bounds(data, root, raw_ts)
    if bounds is None:
        return None
    begin, end, header = bounds
    cuts: list[tuple[int, int]] = []
    for i in range(1, max(1, n_chunks)):
        target = max(begin + int((end - begin) * i / n_chunks), cuts[-1][1] + 1 if cuts else begin)
        if target >= end:
            break
        found = next_boundary(data, target, min(end, target + BOUNDARY_WINDOW_BYTES))
        if found is None:  # inside the last element, or one longer than the window: no cut here
            if target + BOUNDARY_WINDOW_BYTES >= end:
                break  # no boundary before the end: the parts planned so far cover it
            continue  # the part before grows past this target
        cuts.append(found)
    return begin, end, tuple(cuts), header


def chunk_spans(begin: int, end: int, cuts: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    """(offset of the byte to make ``[``, offset of the byte to make ``]``) of each part
    planned by ``find_cuts``: the part is ``data[lo : hi + 1]`` with those two bytes
    set (the first part's ``[`` and the last part's ``]`` are already there)."""
    los = [begin - 1] + [comma for _, comma in cuts]
    his = [brace + 1 for brace, _ in cuts] + [end]
    return list(zip(los, his))


class _Rest(msgspec.Struct):
    """The keys after the events array (only whether ``traceEvents`` is among them)."""

    traceEvents: msgspec.Raw = msgspec.Raw(_ABSENT)


_REST = msgspec.json.Decoder(_Rest)


def _array_end(data, root: int, begin: int, raw_ts: bool) -> tuple[int, ObjectHeader] | None:
    """The ``]`` that ends the events array of an object-form text, and the header.

    Keys may follow the array (``deviceProperties``, log lists), so the ``]`` nearest
    the end is not always it. The text before the array is checked once (it opens
    the top object up to ``"traceEvents":``); a candidate ``]`` is kept when what
    follows it closes that object without another ``traceEvents`` key, the element
    before it is a trace event (has a known ``ph``), and the document with the array
    replaced by a marker decodes with that marker as ``traceEvents``. Each candidate
    costs a decode of the text after it only (at most ``END_WINDOW_BYTES``; all
    candidates together at most ``END_DECODE_BUDGET``)."""
    view = memoryview(data)
    prefix = bytes(view[root : begin - 1])
    try:
        if bytes(_HEADER.decode(prefix + _MARKER + b"}").traceEvents) != _MARKER:
            return None
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    lo = max(begin, len(data) - END_WINDOW_BYTES)
    end = len(data)
    spent = 0
    for _ in range(END_CANDIDATES):
        end = data.rfind(b"]", lo, end)
        spent += len(data) - end
        if end < 0 or spent > END_DECODE_BUDGET:
            return None
        suffix = view[end + 1 :]
        try:
            if bytes(_REST.decode(b"".join((_OPEN, suffix))).traceEvents) != _ABSENT:
                continue  # a later traceEvents key would be the one a decoder keeps
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            continue
        if not _event_before(data, begin, end, raw_ts):
            continue
        try:
            header = _HEADER.decode(b"".join((prefix, _MARKER, suffix)))
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            continue
        if bytes(header.traceEvents) == _MARKER:
            return end, header
    return None


#: Bytes looked at a time by ``last_non_blank`` (a step of ``bytes.rstrip``, not of Python).
_BLANK_STEP_BYTES = 1 << 16


def last_non_blank(data, lo: int, hi: int) -> int:
    """The offset of the last byte at or before ``hi`` that is not JSON whitespace, or
    ``lo`` when ``data[lo + 1 : hi + 1]`` is all whitespace. Steps of
    ``_BLANK_STEP_BYTES``: a byte at a time in Python, 3 GB of trailing blanks took
    minutes."""
    view = memoryview(data)
    while hi > lo:
        a = max(lo + 1, hi + 1 - _BLANK_STEP_BYTES)
        kept = len(bytes(view[a : hi + 1]).rstrip(_WS))
        if kept:
            return a + kept - 1
        hi = a - 1
    return lo


def _event_before(data, begin: int, end: int, raw_ts: bool) -> bool:
    """Whether the element just before ``end`` is a trace event object."""
    close = last_non_blank(data, begin, end - 1)
    if data[close] != ord("}"):
        return False
    decoder = _ONE_EVENT_RAW_TS if raw_ts else _ONE_EVENT
    lo = max(begin, close - (1 << 20))
    for start in starts_before(data, lo, close, _EVENT_CANDIDATES):
        try:
            decoder.decode(memoryview(data)[start : close + 1])
            return True
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            continue
    return False


# ------------------------------------------------------------------ the child
