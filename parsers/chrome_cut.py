"""Where to cut a Chrome-trace text in two for ``parsers.chrome_parallel``.

The cut is planned on the text alone (bytes, bytearray or a read-only map of the
file): the events array's start, its end (keys may follow it), and an element
boundary near a share of its bytes. A plan is only a candidate; the parts failing
to decode refute it (see ``chrome_parallel.decode_parts``).
"""

from __future__ import annotations

import re

import msgspec

from .chrome_schema import AnyEvent, AnyEventRawTs, ObjectHeader
from .json_scan import find_events_array

__all__ = ["find_cut", "END_CANDIDATES", "END_WINDOW_BYTES", "BOUNDARY"]

#: A boundary between two elements: ``}`` , ``{``.
BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
#: Where the end of the events array is looked for: this many ``]`` from the end of
#: the text, within this many bytes (the keys after the array are small).
END_CANDIDATES = 64
END_WINDOW_BYTES = 16 << 20
_MARKER = b'"gapscope:traceEvents"'
_HEADER = msgspec.json.Decoder(ObjectHeader)
_ONE_EVENT = msgspec.json.Decoder(AnyEvent)
_ONE_EVENT_RAW_TS = msgspec.json.Decoder(AnyEventRawTs)
_WS = b" \t\r\n"


def find_cut(data, root: int, raw_ts: bool = False, head_fraction: float = 0.5) -> tuple[int, int, int, int, object] | None:
    """(just after the events array's ``[``, the ``}`` ending the head's last event,
    the ``,`` after it, the array's ``]``, the object form's ``ObjectHeader`` or None),
    or None. The boundary is the first at or after ``head_fraction`` of the array's
    bytes. The cut is only a candidate: a part that does not decode as an array
    refutes it."""
    begin = find_events_array(data, root)
    if begin < 0:
        return None
    header = None
    if data[root:root + 1] == b"{":
        found = _array_end(data, root, begin, raw_ts)
        if found is None:
            return None
        end, header = found
    else:
        end = len(data) - 1
        while end > begin and data[end] in _WS:
            end -= 1
        if data[end] != ord("]"):
            return None
    if end <= begin:
        return None
    target = begin + int((end - begin) * head_fraction)
    m = BOUNDARY.search(data, target, min(end, target + (8 << 20)))
    if m is None:
        return None
    brace = m.start()
    comma = data.find(b",", brace)
    return begin, brace, comma, end, header


def _array_end(data, root: int, begin: int, raw_ts: bool) -> tuple[int, ObjectHeader] | None:
    """The ``]`` that ends the events array of an object-form text, and the header.

    Keys may follow the array (``deviceProperties``, log lists), so the ``]`` nearest
    the end is not always it: a candidate is kept when the document with the array
    replaced by a marker decodes with that marker as ``traceEvents``, and the element
    before it is a trace event (has a known ``ph``)."""
    view = memoryview(data)
    lo = max(begin, len(data) - END_WINDOW_BYTES)
    end = len(data)
    for _ in range(END_CANDIDATES):
        end = data.rfind(b"]", lo, end)
        if end < 0:
            return None
        try:
            header = _HEADER.decode(b"".join((view[root:begin - 1], _MARKER, view[end + 1:])))
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            continue
        if bytes(header.traceEvents) == _MARKER and _event_before(data, begin, end, raw_ts):
            return end, header
    return None


def _event_before(data, begin: int, end: int, raw_ts: bool) -> bool:
    """Whether the element just before ``end`` is a trace event object."""
    close = end - 1
    while close > begin and data[close] in _WS:
        close -= 1
    if data[close] != ord("}"):
        return False
    decoder = _ONE_EVENT_RAW_TS if raw_ts else _ONE_EVENT
    lo = max(begin, close - (1 << 20))
    start = close
    for _ in range(END_CANDIDATES):
        start = data.rfind(b"{", lo, start)
        if start < 0:
            return False
        try:
            decoder.decode(memoryview(data)[start:close + 1])
            return True
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            continue
    return False


# ------------------------------------------------------------------ the child
