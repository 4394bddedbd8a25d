"""Recovery of damaged Chrome-trace JSON: element scanner, token repair, line numbers.

The fast path (one typed ``msgspec`` decode of the whole file) fails on any damage.
This module then finds the ``traceEvents`` array, splits it into its top-level
elements with a vectorised bracket scanner (numpy, chunked, linear in the file size,
never recursive), repairs the non-JSON tokens ``NaN``/``Infinity``/``-Infinity``
(replaced by same-length sentinel strings so byte offsets and line numbers stay
valid) and decodes every complete element, one bad element at a time at most.

Handles (see ``../shared/bugs``): a file cut off anywhere (B01), an array without
``]`` or with a trailing comma (B02, legal in the Trace Event Format), non-finite
number tokens (B04), and malformed single events (skipped with a warning).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import msgspec
import numpy as np

from gapscope.parsers.chrome.header import Unreadable
from gapscope.parsers.chrome.schema import EVENT_LIST, AnyEvent, Event, EventRawArgs, as_phase_event
from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.json.boundaries import ScanResult, find_events_array
from gapscope.parsers.json.resync import error_offset, scan_resync
from gapscope.parsers.json.scan import LineIndex, repair_nonfinite, repair_surrogates
from gapscope.parsers.model import TraceWarning

__all__ = [
    "decode_elements",
    "Recovered",
    "recover",
]

_EV_LIST = msgspec.json.Decoder(EVENT_LIST)
_EV_ONE = msgspec.json.Decoder(AnyEvent)
_EV_GENERIC = msgspec.json.Decoder(Event)
_EV_RAW = msgspec.json.Decoder(EventRawArgs)
_INDEX_RE = re.compile(r"\$\[(\d+)\]")


def decode_elements(text: bytes | bytearray, starts: np.ndarray, ends: np.ndarray, on_bad) -> list:
    """Decode elements ``text[starts[k]:ends[k]]`` as events (``AnyEvent``).

    Whole runs of good elements are decoded in one call, straight from ``text`` when
    only commas and blanks separate them (else from a joined copy); an element that
    fails is decoded alone, and ``on_bad(k, reason)`` is called when it cannot be used
    (its slot is then None). After 8 failures the rest is decoded one element at a
    time, so the cost stays linear however many elements are bad.
    """
    n = int(starts.size)
    out: list = []
    k0 = 0
    failures = 0
    sv = memoryview(text)
    clean = _clean_gaps(text, starts, ends)
    while k0 < n:
        if failures >= 8:
            for k in range(k0, n):
                out.append(_decode_one(sv[starts[k] : ends[k]], k, on_bad))
            break
        try:
            out.extend(_EV_LIST.decode(_joined(text, sv, starts, ends, k0, n, clean)))
            break
        except (msgspec.ValidationError, msgspec.DecodeError) as exc:
            bad = _failed_index(str(exc), k0, n, starts, ends, clean)
        except RecursionError:  # an element nested too deep: the error names no index
            out.extend(_decode_halves(text, sv, starts, ends, k0, n, clean, on_bad))
            break
        failures += 1
        if bad > k0:
            try:
                out.extend(_EV_LIST.decode(_joined(text, sv, starts, ends, k0, bad, clean)))
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
                for k in range(k0, bad):
                    out.append(_decode_one(sv[starts[k] : ends[k]], k, on_bad))
        out.append(_decode_one(sv[starts[bad] : ends[bad]], bad, on_bad))
        k0 = bad + 1
    return out


def _decode_halves(
    text: bytes | bytearray, sv: memoryview, starts, ends, k0: int, k1: int, clean: np.ndarray, on_bad
) -> list:
    """Elements k0..k1-1 when decoding them together failed on nesting depth: runs are
    halved until they decode (O(d log n) extra decodes for d deep elements); runs of up
    to 16 elements are decoded one at a time (``_decode_one``)."""
    out: list = []
    todo = [(k0, k1)]
    while todo:
        a, b = todo.pop()
        if b - a <= 16:
            out.extend(_decode_one(sv[starts[k] : ends[k]], k, on_bad) for k in range(a, b))
            continue
        try:
            out.extend(_EV_LIST.decode(_joined(text, sv, starts, ends, a, b, clean)))
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            mid = (a + b) // 2
            todo.append((mid, b))
            todo.append((a, mid))
    return out


def _clean_gaps(text: bytes | bytearray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """bool per gap between consecutive elements: only blanks and exactly one comma."""
    if starts.size < 2:
        return np.ones(0, dtype=bool)
    gaps = starts[1:] - ends[:-1]
    ok = (gaps >= 1) & (gaps <= 64)
    g = np.where(ok, gaps, 0)
    total = int(g.sum())
    a = np.frombuffer(text, dtype=np.uint8)
    first = np.repeat(ends[:-1], g)
    offs = np.arange(total) - np.repeat(np.cumsum(g) - g, g)
    ch = a[first + offs]
    comma = ch == 44
    blank = (ch == 32) | (ch == 9) | (ch == 10) | (ch == 13)
    bounds = np.cumsum(g) - g
    nz = g > 0
    n_comma = np.zeros(g.size, dtype=np.int64)
    n_bad = np.zeros(g.size, dtype=np.int64)
    if total:
        n_comma[nz] = np.add.reduceat(comma.astype(np.int64), bounds[nz])
        n_bad[nz] = np.add.reduceat((~(comma | blank)).astype(np.int64), bounds[nz])
    return ok & (n_comma == 1) & (n_bad == 0)


def _joined(text: bytes | bytearray, sv: memoryview, starts, ends, k0: int, k1: int, clean: np.ndarray) -> bytes:
    """``[`` elements k0..k1-1 ``]``: a slice of ``text`` when their gaps are clean."""
    if k1 - k0 == 1 or clean[k0 : k1 - 1].all():
        return b"".join((b"[", sv[int(starts[k0]) : int(ends[k1 - 1])], b"]"))
    return b"".join((b"[", b",".join(bytes(sv[int(starts[k]) : int(ends[k])]) for k in range(k0, k1)), b"]"))


def _failed_index(msg: str, k0: int, n: int, starts: np.ndarray, ends: np.ndarray, clean: np.ndarray) -> int:
    """Index of the element that made decoding elements k0..n-1 fail, from the
    error's ``$[i]`` path or byte offset (layout as built by ``_joined``)."""
    m = _INDEX_RE.search(msg)
    if m:
        return min(n - 1, k0 + int(m.group(1)))
    m = re.search(r"byte (\d+)", msg)
    if m:
        off = int(m.group(1))
        if n - k0 == 1 or clean[k0 : n - 1].all():
            rel = starts[k0:n] - starts[k0] + 1  # offset of each element in the buffer
        else:
            rel = 1 + np.concatenate(([0], np.cumsum(ends[k0 : n - 1] - starts[k0 : n - 1] + 1)))
        j = int(np.searchsorted(rel, off, side="right")) - 1
        return min(n - 1, k0 + max(j, 0))
    return k0


def _decode_one(text, k: int, on_bad):
    """Element ``k`` as an event, or None after ``on_bad(k, reason)``; never raises
    (``RecursionError`` from nesting deeper than the decoders allow is a bad element)."""
    try:
        return _decode_one_inner(text, k, on_bad)
    except RecursionError:
        on_bad(k, "nesting too deep")
        return None


def _decode_one_inner(text, k: int, on_bad):
    try:
        return _EV_ONE.decode(text)
    except msgspec.ValidationError as exc:
        try:  # unknown or missing ph: the generic form
            return as_phase_event(_EV_GENERIC.decode(text))
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
        try:  # args that are not an object: keep the event, args stay in the text
            r = _EV_RAW.decode(text)
            return as_phase_event(Event(**{f: getattr(r, f) for f in Event.__struct_fields__ if f != "args"}))
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
        ev = _stdlib_event(text)  # numbers beyond float range (1e999): the stdlib reads inf
        if ev is not None:
            return ev
        on_bad(k, f"unusable event ({plain_validation(str(exc))})")
    except msgspec.DecodeError as exc:
        on_bad(k, f"malformed JSON ({exc})")
    return None


_VALIDATION = re.compile(r"Expected `([^`]*)`, got `([^`]*)`(?: - at `\$((?:\.[^`]*|\[[^`]*\])*)`)?")
_TYPE_WORDS = {
    "int": "a number",
    "float": "a number",
    "str": "a string",
    "null": "null",
    "object": "an object",
    "array": "an array",
    "bool": "true/false",
}


def plain_validation(message: str) -> str:
    """msgspec's "Expected `int | float | str | null`, got `object` - at `$.pid`" in
    the user's words: "field pid: expected a number, a string or null, got an object"."""
    m = _VALIDATION.match(message)
    if m is None:
        return message
    want = list(dict.fromkeys(_TYPE_WORDS.get(t.strip(), t.strip()) for t in m.group(1).split("|")))
    want_s = want[0] if len(want) == 1 else ", ".join(want[:-1]) + " or " + want[-1]
    got = _TYPE_WORDS.get(m.group(2), m.group(2))
    field = (m.group(3) or "").lstrip(".")
    return (f"field {field}: " if field else "") + f"expected {want_s}, got {got}"


def _stdlib_event(text):
    """The event via the stdlib ``json`` (which reads ``1e999`` as inf), keeping only
    scalar timeline fields; None when that fails too."""
    try:
        obj = json.loads(bytes(text))
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    fields: dict[str, Any] = {}  # Event's keyword arguments: a bool, a str or a number by field
    for f in ("pid", "tid"):  # an id that is not a scalar (true, {}, []): the event is invalid
        v = obj.get(f)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float, str))):
            return None
    for f in Event.__struct_fields__:
        v = obj.get(f)
        if f == "args" or v is None:
            continue
        if f in ("flow_in", "flow_out"):
            if isinstance(v, bool):
                fields[f] = v
        elif f in ("ph", "bp"):
            if isinstance(v, str):
                fields[f] = v
        elif isinstance(v, (int, float, str)) and not isinstance(v, bool):
            fields[f] = v
    return as_phase_event(Event(**fields))


@dataclasses.dataclass
class Recovered:
    """What ``recover`` found: the header, events (None = skipped), offsets and
    warnings. ``text`` is the (repaired) buffer that ``starts`` index into."""

    header: dict[str, Any]
    events: list[Event | None]
    starts: np.ndarray
    ends: np.ndarray
    text: bytes | bytearray
    warnings: list[TraceWarning]
    nonfinite_replaced: int


#: Top-level keys of JSON files that are not Chrome traces, with what they are.
_KNOWN_OTHER = {
    "rocprofiler-sdk-tool": (
        "a rocprofv3 (rocprofiler-sdk) JSON file, not a Chrome trace",
        "gapscope reads Chrome-trace JSON; on ROCm, torch.profiler writes one",
    )
}


def _other_json(data: bytes | bytearray, root: int) -> tuple[str, str]:
    """(message, hint) for a JSON object without a ``traceEvents`` array."""
    head = data[root : root + 4096]
    for key, (what, hint) in _KNOWN_OTHER.items():
        if b'"' + key.encode() + b'"' in head:
            return what, hint
    return (
        "JSON object without a traceEvents array",
        'not a Chrome Trace Event Format file: expected {"traceEvents": [...]} or a JSON array of events',
    )


def recover(data: bytes | bytearray, path: str, root: int, lines: LineIndex) -> Recovered:
    """Load what can be loaded from damaged trace JSON.

    Raises ``TraceFormatError`` when there is no events array or no complete event.
    """
    begin = find_events_array(data, root)
    if begin < 0:
        what, hint = _other_json(data, root)
        raise TraceFormatError(path, what, line=lines.line(root), column=lines.column(root), hint=hint)
    scan, breaks = scan_resync(data, begin, lambda close: _tail_state(data, root, close))
    warnings: list[TraceWarning] = []
    for brk in breaks[:20]:
        off = error_offset(data, brk)
        ln, col, resume, first = lines.line(off), lines.column(off), lines.line(brk.resume), lines.line(brk.at)
        if brk.what == "never closed":
            lost = f"line {first}" if resume - 1 <= first else f"lines {first}-{resume - 1}"
            what = f"an event is never closed; {lost} skipped"
        else:
            what = brk.what
        warnings.append(
            TraceWarning(ln, None, f"malformed JSON at {ln}:{col}: {what}; reading resumed at line {resume}")
        )
    if len(breaks) > 20:
        warnings.append(
            TraceWarning(
                lines.line(breaks[20].at), None, f"{len(breaks) - 20} more stretches of malformed JSON skipped"
            )
        )
    n = int(scan.starts.size)
    if n == 0:
        if scan.close >= 0:
            if data[begin : scan.close].strip(b" \t\r\n,"):
                at = begin + len(data[begin : scan.close]) - len(data[begin : scan.close].lstrip(b" \t\r\n,"))
                first_byte = data[at : at + 1]
                what = (
                    "the events array holds no event objects"
                    if first_byte in b'{["-0123456789tfn' and first_byte
                    else "not JSON: an array starting with "
                    + repr(bytes(data[at : at + 40]).split(b"\n")[0][:20].decode("utf-8", "replace"))
                )
                raise TraceFormatError(
                    path,
                    what,
                    line=lines.line(at),
                    column=lines.column(at),
                    hint='expected Chrome Trace Event Format events ({"ph": ..., "ts": ...})',
                )
        else:
            cut = scan.partial_start if scan.partial_start >= 0 else len(data)
            raise TraceFormatError(
                path,
                "file truncated before the first complete event",
                line=lines.line(cut),
                column=lines.column(cut),
                hint="the profiler was probably killed while writing; re-capture",
            )
    a = int(scan.starts[0]) if n else begin
    z = int(scan.ends[-1]) if n else begin
    text: bytes | bytearray
    text, replaced = repair_nonfinite(data[a:z]) if n else (b"", 0)
    if replaced:
        text = data[:a] + text + data[z:]
    else:
        text = data
    text, lone = repair_surrogates(text) if n else (text, [])
    if lone:  # same length: offsets hold; the event is kept, its string gets U+FFFD
        lns = lines.lines(np.array([at for at, _, _ in lone[:20]], dtype=np.int64))
        for (_at, esc, key), ln in zip(lone[:20], lns):
            where = f"field {key}: " if key else ""
            warnings.append(
                TraceWarning(
                    int(ln),
                    key or None,
                    f"{where}lone surrogate escape \\{esc[1:]} (half of a UTF-16 pair) replaced by U+FFFD",
                )
            )
        if len(lone) > 20:
            warnings.append(
                TraceWarning(
                    int(lines.line(lone[20][0])),
                    None,
                    f"{len(lone) - 20} more lone surrogate escapes replaced by U+FFFD",
                )
            )
    bad: list[tuple[int, str]] = []
    events = decode_elements(text, scan.starts, scan.ends, lambda k, why: bad.append((k, why))) if n else []
    if bad:
        lns = lines.lines(scan.starts[[k for k, _ in bad]])
        for (_k, why), ln in zip(bad[:20], lns[:20]):
            warnings.append(TraceWarning(int(ln), None, f"event skipped: {why}"))
        if len(bad) > 20:
            warnings.append(TraceWarning(int(lns[20]), None, f"{len(bad) - 20} more malformed events skipped"))
    kept = sum(1 for e in events if e is not None and getattr(e, "ph", None) != "M")
    if scan.partial_start >= 0:
        ln = lines.line(scan.partial_start)
        warnings.append(
            TraceWarning(ln, None, f"file truncated at line {ln}: incomplete event skipped; {kept} events recovered")
        )
    elif scan.close < 0 and data[root : root + 1] == b"{":
        ln = lines.line(len(data))
        warnings.append(
            TraceWarning(
                ln,
                None,
                f"file truncated at line {ln}: traceEvents array and object not closed; {kept} events recovered",
            )
        )
    header, whole = _header(data, root, begin, scan)
    end = _tail_state(data, root, scan.close) if scan.close >= 0 and scan.partial_start < 0 else -2
    if end >= 0:  # a complete document, then more text: not a truncation
        if not whole:
            header, whole = _header(data[:end], root, begin, scan)
        extra = bytes(data[end : end + 24]).split(b"\n")[0].decode("utf-8", "replace")
        ln = lines.line(end)
        warnings.append(
            TraceWarning(
                ln,
                None,
                f"data after the end of the JSON document at line {ln}, column "
                f"{lines.column(end)} ({extra!r}...); ignored, {kept} events read",
            )
        )
    if not whole and scan.close >= 0 and scan.partial_start < 0:
        ln = lines.line(len(data))
        warnings.append(
            TraceWarning(
                ln,
                None,
                f"file truncated at line {ln}: JSON object not closed after the "
                f"traceEvents array; {kept} events recovered",
            )
        )
    return Recovered(header, events, scan.starts, scan.ends, text, warnings, replaced)


def _tail_state(data: bytes | bytearray, root: int, close: int) -> int:
    """What follows the events array's ``]`` at ``close``: -1 a proper end of the
    document (only blanks after a bare array; the rest of the root object otherwise),
    the offset of the first byte after the end of the document when other text
    follows it (a second document), -2 anything else (damage or truncation)."""
    tail = data[close + 1 :]
    if data[root : root + 1] != b"{":
        rest = len(tail) - len(tail.lstrip(b" \t\r\n"))
        return -1 if rest == len(tail) else close + 1 + rest
    head = b'{"traceEvents":[]'
    try:
        msgspec.json.decode(head + tail)
    except msgspec.DecodeError as exc:
        m = re.search(r"trailing characters \(byte (\d+)\)", str(exc))
        if not m:
            return -2
        at = max(close + 1, close + int(m.group(1)) - len(head))  # msgspec names the byte after the first
        return at + len(data[at : at + 64]) - len(data[at : at + 64].lstrip(b" \t\r\n"))
    except (msgspec.ValidationError, RecursionError):
        return -2
    return -1


def _header_int(digits: str) -> int | Unreadable:
    """A header integer as ``json.loads`` reads one, or ``Unreadable`` past
    ``HEADER_INT_MAX_DIGITS`` (Python refuses to convert 4,300 digits or more: the
    whole header would be lost for one value)."""
    if len(digits) > HEADER_INT_MAX_DIGITS:
        return Unreadable(digits[:48], f"an integer of {len(digits):,} digits")
    return int(digits)


#: Most digits of a header integer read (int64 needs 19).
HEADER_INT_MAX_DIGITS = 400


def _header(data: bytes | bytearray, root: int, begin: int, scan: ScanResult) -> tuple[dict[str, Any], bool]:
    """Top-level keys other than traceEvents, decoded leniently ({} when unreadable),
    and whether the object after the events array was complete."""
    if data[root : root + 1] != b"{":
        return {}, True
    head = data[root:begin]
    tails = [data[scan.close :]] if scan.close >= 0 else []
    tails += [b"]}"]
    for j, tail in enumerate(tails):
        try:
            obj = msgspec.json.decode(head + tail)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            try:  # NaN, Infinity, 1e999: the stdlib reads them as floats, which
                # ``chrome.header`` refuses by name (a sentinel string would pass as text)
                obj = json.loads(bytes(head + tail), parse_int=_header_int)
            except (ValueError, RecursionError):
                continue
        if isinstance(obj, dict):
            obj.pop("traceEvents", None)
            return obj, j == 0 and scan.close >= 0
    return {}, False
