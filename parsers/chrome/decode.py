"""Chrome Trace Event Format JSON -> ``Trace``: the one door, and every way through it.

``decode(source, path)`` is the Chrome loader's entry (``gapscope.parsers.detect``
calls nothing else of it). Which strategy decodes the text is chosen here, and only
here:

=================================  ===================================================
source                              strategy
=================================  ===================================================
a plain file (its path) of          split over forked processes (``parallel.fork``):
``parallel.fork.MIN_BYTES`` or      children map the file and decode a run of parts
more, with 2+ CPUs                  each (C scanner, else msgspec); this process never
                                    reads the text (``decode_file``)
an open file (``fd``) a large       the same, on the file the text was inflated into;
``.gz`` was inflated into           children forked while it was being inflated
                                    (``Inflating``, ``start_growing``) decode the
                                    parts already written
text in memory of                   split in two (this process and one child,
``HELD_FACTOR * MIN_BYTES`` or      ``parallel.fork.decode_parts``)
more
other text                          the C scanner in one piece (``fastscan``), else one
                                    typed msgspec decode, else ``recover`` (damage
                                    skipped or repaired, with warnings)
=================================  ===================================================

Every strategy gives the same ``Trace`` (``tests/test_load_parallel.py``,
``tests/test_fastscan.py``, ``bench/load_equal.py``); a strategy that meets a surprise
falls back to the next. The columns become a ``Trace`` in ``chrome.loader.build``.
``GAPSCOPE_LOAD_PROCESSES=1`` turns the split off, ``GAPSCOPE_XSCAN=0`` the C scanner.
"""

from __future__ import annotations

import gc
import os
import re
import typing
from collections.abc import Callable

import msgspec
import numpy as np

from gapscope.parsers.chrome import fastscan
from gapscope.parsers.chrome.lazy_args import EventText
from gapscope.parsers.chrome.loader import Input, build, header_of
from gapscope.parsers.chrome.parallel import fork as chrome_parallel
from gapscope.parsers.chrome.parallel.cut import find_cuts
from gapscope.parsers.chrome.parallel.joined import JoinedEvents, SerialFallback
from gapscope.parsers.chrome.recover import recover
from gapscope.parsers.chrome.scan import PH_FLOW, PH_OTHER
from gapscope.parsers.chrome.schema import (
    EVENT_CLASS,
    EVENT_LIST,
    EVENT_LIST_RAW_TS,
    ObjectTrace,
    ObjectTraceRawTs,
    XEventRawTs,
)
from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.json.mapped import MappedText
from gapscope.parsers.json.scan import Text, text_start
from gapscope.parsers.model import Trace

__all__ = [
    "decode",
    "GrowingDecoders",
    "Inflating",
    "planned_size",
    "load_chrome",
    "load_chrome_file",
    "start_growing",
    "EPOCH_SAMPLE_BYTES",
]

_OBJ = msgspec.json.Decoder(ObjectTrace)
_LIST = msgspec.json.Decoder(EVENT_LIST)
_OBJ_RAW_TS = msgspec.json.Decoder(ObjectTraceRawTs)
_LIST_RAW_TS = msgspec.json.Decoder(EVENT_LIST_RAW_TS)
#: A ``ts`` of 13+ integer digits with a fraction: beyond 2**43 µs, a float64 loses the ns.
_EPOCH_TS = re.compile(rb'"ts"\s*:\s*-?\d{13,}\.\d')
#: Bytes of the text sampled for such timestamps before decoding.
EPOCH_SAMPLE_BYTES = 1 << 18
#: {ts kept as text: (decoder of an events array, its X event class)}.
_DECODERS: dict[bool, tuple[msgspec.json.Decoder, type]] = {
    False: (_LIST, EVENT_CLASS["X"]),
    True: (_LIST_RAW_TS, XEventRawTs),
}


def _raw_ts(data, i: int) -> bool:
    """Epoch-µs timestamps with a fraction in the first events: keep X ``ts`` as text
    and read it exactly, vectorised (a float64 would lose the nanoseconds)."""
    return _EPOCH_TS.search(data, i, i + EPOCH_SAMPLE_BYTES) is not None


def _root_of(data) -> int:
    """Offset of the text's first ``{``/``[`` (``text_start``), or -1 for no text."""
    return text_start(data) if len(data) else -1


def start_growing(
    fd: int,
    growing: chrome_parallel.Growing,
    planned_bytes: int,
    path: str,
    first_share: float | None = None,
    extra_children: int = 0,
) -> chrome_parallel.GrowingParts | None:
    """The children that decode the Chrome-trace text being written to ``fd`` (a
    ``.gz`` being inflated, a ``.pftrace`` being transcoded; ``path`` names it) while
    it grows, or None (``chrome_parallel.start_growing``, which says what
    ``first_share`` and ``extra_children`` do); give them to ``load_chrome_file`` once
    ``GrowingParts.finish`` said yes."""
    return chrome_parallel.start_growing(
        fd, growing, planned_bytes, _root_of, _raw_ts, _DECODERS, path, first_share, extra_children
    )


def load_chrome_file(
    path: str,
    limit_bytes: int | None = None,
    fd: int | None = None,
    while_decoding: Callable[[chrome_parallel.FileParts, str], None] | None = None,
    parts: chrome_parallel.FileParts | None = None,
) -> tuple[Trace, MappedText] | None:
    """Load the plain Chrome-trace file ``path`` decoded in parts by forked children
    (``chrome_parallel.start_file``; this process never reads the text into memory,
    it maps the file for what is read back later), or None when that does not apply
    or falls back: then read the file and call ``load_chrome``. Files larger than
    ``limit_bytes`` are left to the reader (which refuses them). ``fd``: the text to
    decode, open, instead of the file at ``path`` (an inflated ``.gz``; ``path`` names
    it in warnings). ``parts``: the children already decoding ``fd`` (``start_growing``,
    finished), instead of forking them here. ``while_decoding(parts, path)``: called
    in this thread once the children run, before their results are taken (a viewer's
    device preview: ``gapscope.parsers.chrome.preview.while_decoding``); what it
    raises, but an interrupt, is ignored.
    Returns the trace and the map of the text it was decoded from (for the trace
    cache)."""
    if parts is None:
        parts = chrome_parallel.start_file(path, _root_of, _raw_ts, _DECODERS, limit_bytes, fd=fd)
    if parts is None:
        return None
    if while_decoding is not None:
        try:
            while_decoding(parts, path)
        except Exception:  # noqa: BLE001 - a preview is never worth the load; the children go on
            pass
        except BaseException:  # an interrupt: the children go with it
            parts.close()
            raise
    was = gc.isenabled()
    gc.disable()
    try:
        got = chrome_parallel.decode_file(parts, _DECODERS)
        if got is None:
            return None
        decoded, text = got
        inp = Input(
            path,
            decoded.events,
            decoded.events.text,
            header=header_of(decoded.header) if decoded.header is not None else {},
            x_class=XEventRawTs if decoded.events.raw_ts else EVENT_CLASS["X"],
            scanned=decoded.scanned,
        )
        try:
            return build(inp), text
        except SerialFallback:
            return None
    finally:
        parts.close()
        if was:
            gc.enable()


def _decode(data: Text, path: str, parts: bool = True) -> Input:
    """``data`` decoded: in two parts at once when large (``chrome_parallel``), else in
    one typed decode, else, when that fails on damage, by ``recover`` (events skipped
    or repaired with warnings). Raises ``TraceFormatError`` when nothing usable is left."""
    i = text_start(data)
    body = data if i == 0 else memoryview(data)[i:]  # no copy of a text that starts with blanks
    raw_ts = _raw_ts(data, i)
    x_class = XEventRawTs if raw_ts else EVENT_CLASS["X"]
    if parts and chrome_parallel.enabled(len(data), held=True):
        got = chrome_parallel.decode_parts(data, i, raw_ts, _DECODERS)
        if got is not None:
            return Input(
                path,
                got.events,
                got.events.text,
                header=header_of(got.header) if got.header is not None else {},
                x_class=x_class,
                scanned=got.scanned,
            )
    if parts:
        whole = _scan_whole(data, i, raw_ts, path)
        if whole is not None:
            return whole
    try:
        if data[i : i + 1] == b"{":
            obj = (_OBJ_RAW_TS if raw_ts else _OBJ).decode(body)
            events, header = obj.traceEvents, header_of(obj)
            del obj
        else:
            events, header = (_LIST_RAW_TS if raw_ts else _LIST).decode(body), {}
        return Input(path, events, EventText(data, i, len(events)), header=header, x_class=x_class)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):  # nesting too deep: per event
        pass
    if not isinstance(data, (bytes, bytearray)):
        data = data.all_bytes()  # a damaged mapped text is repaired from memory
    rec = recover(data, path, i, EventText(data, i, 0).lines)
    keep = [k for k, e in enumerate(rec.events) if e is not None]
    kk = np.array(keep, dtype=np.int64)
    text = EventText(
        rec.text,
        i,
        len(keep),
        rec.starts[kk] if keep else np.zeros(0, np.int64),
        rec.ends[kk] if keep else np.zeros(0, np.int64),
        repaired=rec.nonfinite_replaced > 0,
    )
    if not keep and rec.starts.size:
        ln = text.lines.line(int(rec.starts[0]))
        why = next(
            (w.message[len("event skipped: ") :] for w in rec.warnings if w.message.startswith("event skipped: ")), None
        )
        raise TraceFormatError(
            path,
            f"{why}; no usable trace events" if why else "no usable trace events",
            line=ln,
            column=text.lines.column(int(rec.starts[0])),
            hint='expected Chrome Trace Event Format events ({"ph": ..., "ts": ...})',
        )
    return Input(path, [rec.events[k] for k in keep], text, header=rec.header, warnings=rec.warnings)


def _scan_whole(data: Text, root: int, raw_ts: bool, path: str) -> Input | None:
    """``data`` read as one part, in this process, by the C scanner
    (``fastscan.scan_text``): the events array's ``X`` events as columns, the others
    as structs, as the split loader gives them (``_build`` then takes the same path,
    and raises ``SerialFallback`` where that needs the whole list). None when the
    scanner is missing or refuses the text, or the events array is not found (then
    ``msgspec`` decodes it in one piece)."""
    if not fastscan.available():
        return None
    plan = find_cuts(data, root, raw_ts, 1)
    if plan is None:
        return None
    begin, end, _, header = plan
    list_decoder, x_class = _DECODERS[raw_ts]
    with memoryview(data) as view:
        got = fastscan.scan_text(view[begin - 1 : end + 1], list_decoder, raw_ts)
    if got is None:
        return None
    ec, flows, others, starts = got
    # each event's "{" as the scanner found it: lines of warnings and args need no scan
    text = EventText(data, root, int(ec.code.size), starts + (begin - 1))
    events = JoinedEvents(
        ec.code, {PH_FLOW: flows, PH_OTHER: others}, {PH_FLOW: [], PH_OTHER: []}, raw_ts, x_class, text
    )
    return Input(
        path, events, text, header=header_of(header) if header is not None else {}, x_class=x_class, scanned=ec
    )


def load_chrome(data: Text, path: str) -> Trace:
    """Load Chrome Trace Event Format JSON (object or array form; Kineto of every
    vintage; legacy autograd export) from ``data`` (gzip already undone).

    Returns a ``Trace``: times int64 ns (``ts`` × 1000 exactly; Kineto's
    ``baseTimeNanoseconds`` is kept in ``source.base_time_ns``, not added);
    ``src_line`` filled for files up to ``SRC_LINE_LIMIT_BYTES``; ``args_of(i)`` reads
    the event's args back from ``data`` (kept alive by the trace). Damaged input is
    repaired with a ``TraceWarning`` per problem (1-based line where the event
    starts). Raises ``TraceFormatError`` (path, line, column, hint) when the JSON
    holds no trace. Texts of ``chrome_parallel.HELD_FACTOR`` times
    ``chrome_parallel.MIN_BYTES`` or more are decoded in two parts at once
    (``chrome_parallel.decode_parts``).
    """
    was = gc.isenabled()
    gc.disable()
    try:
        inp = _decode(data, path)
        try:
            return build(inp)
        except SerialFallback:
            return build(_decode(data, path, parts=False))
    finally:
        if was:
            gc.enable()


class GrowingDecoders:
    """The decoders forked on a Chrome-trace text this process is still writing to a
    file (a ``.json.gz`` being inflated: ``Inflating``; a ``.pftrace`` being transcoded:
    ``perfetto.loader``): started once ``GROWING_HEAD_BYTES`` are written and the
    writer has a plan of the text's length, told as the text grows, given up (killed)
    when it grows far past the plan; the file's own children decode it then.
    ``first_share``, ``extra_children``: ``start_growing``'s."""

    def __init__(self, path: str, first_share: float | None = None, extra_children: int = 0) -> None:
        self.path, self.first_share, self.extra_children = path, first_share, extra_children
        self.parts: chrome_parallel.GrowingParts | None = None
        self.tried = False

    def wrote(self, fd: int, written: int, plan: Callable[[], int | None]) -> None:
        """The text in ``fd`` is final up to ``written`` bytes: tell the children, or
        start them when there are none yet and ``plan()`` gives the text's planned
        length (None: not yet, asked again at the next write; below 0: never)."""
        if self.parts is not None:
            if self.parts.overrun(written):  # planned for far less: the file's own children will decode it
                self.close()
            else:
                self.parts.growing.wrote(written)
            return
        if self.tried or written < chrome_parallel.GROWING_HEAD_BYTES:
            return
        planned = plan()
        if planned is None:
            return
        self.tried = True
        if planned < 0:
            return
        try:
            growing = chrome_parallel.Growing()
            growing.wrote(written)
            self.parts = start_growing(fd, growing, planned, self.path, self.first_share, self.extra_children)
        except (OSError, ValueError):  # no map or read of the text: the file's own children decode it
            self.parts = None

    def finish(self, size_bytes: int) -> chrome_parallel.GrowingParts | None:
        """The children, told the text is complete at ``size_bytes``, or None (none
        were forked, or the text is far from the size they planned for: then the
        loader forks its own on the whole file)."""
        parts, self.parts = self.parts, None
        if parts is None or not parts.finish(size_bytes):
            return None
        return parts

    def close(self) -> None:
        """Kill the children still running (a load that failed or fell back)."""
        if self.parts is not None:
            self.parts.close()
            self.parts = None


class Inflating(GrowingDecoders):
    """The decoders of a ``.json.gz`` forked while it is inflated (``on_write`` of
    ``inflate_to_file``), so inflating (in this process) and decoding overlap; the
    text's planned length is the gzip trailer's ``size_field`` (ISIZE: the last
    member's size mod 2**32, ``planned_size``), not believed beyond
    ``PLAUSIBLE_INFLATE_RATIO`` times the file."""

    def __init__(self, path: str, size_field: int) -> None:
        super().__init__(path)
        self.size_field = size_field

    def __call__(self, fd: int, written: int, consumed: int, compressed: int) -> None:
        def plan() -> int:
            planned = planned_size(self.size_field, written, consumed, compressed)
            # a size field no trace's gzip has (junk after the data?): inflated first
            return -1 if planned > PLAUSIBLE_INFLATE_RATIO * compressed else planned

        self.wrote(fd, written, plan)


#: Most a trace's gzip is taken to inflate (real traces: 10-50x) when its size field
#: is read for the decoders' plan (``planned_size``): a plan beyond it is not believed.
PLAUSIBLE_INFLATE_RATIO = 64


def planned_size(size_field: int, written: int, consumed: int, compressed: int) -> int:
    """The inflated size a gzip file is expected to have: its ISIZE field
    (``size_field``, RFC 1952: the size mod 2**32), plus the multiple of 2**32 that
    brings it nearest to the size its inflating so far suggests (``written`` bytes of
    text from ``consumed`` of its ``compressed`` bytes), but never past
    ``PLAUSIBLE_INFLATE_RATIO`` times ``compressed`` (a head of repeated events
    inflates far more than the rest: a 290 MB text was planned as 4.4 GB)."""
    guess = written * compressed / max(1, consumed)
    wraps = max(0, round((guess - size_field) / (1 << 32)))
    while wraps and size_field + wraps * (1 << 32) > PLAUSIBLE_INFLATE_RATIO * compressed:
        wraps -= 1
    return size_field + wraps * (1 << 32)


@typing.overload
def decode(source: Text, path: str) -> tuple[Trace, Text]: ...
@typing.overload
def decode(
    source: str | int,
    path: str,
    limit_bytes: int | None = None,
    while_decoding: Callable[[chrome_parallel.FileParts, str], None] | None = None,
    inflating: Inflating | None = None,
) -> tuple[Trace, Text] | None: ...
def decode(
    source: Text | str | int,
    path: str,
    limit_bytes: int | None = None,
    while_decoding: Callable[[chrome_parallel.FileParts, str], None] | None = None,
    inflating: Inflating | None = None,
) -> tuple[Trace, Text] | None:
    """The Chrome trace in ``source`` and the text it was decoded from (kept for the
    trace cache and for ``args`` read back later), by the strategy the table of this
    module gives. ``source``: the text in memory (gzip undone), or a plain file (its
    path, ``str``) or an open file holding the text (``int``: an inflated ``.gz``);
    ``path`` names the trace in warnings and errors.

    For text in memory: always a trace, or ``TraceFormatError`` (path, line, column,
    hint) when it holds none. For a file: the trace when it is decoded split over
    processes, or None when that does not apply or falls back (too small, one CPU,
    not one events array, a child failed): the caller then reads the text and calls
    ``decode`` with it. ``limit_bytes``: a file larger is left to the reader (which
    refuses it); ``while_decoding(parts, path)``: run while a file's children decode
    (a device preview, ``chrome.preview.while_decoding``); ``inflating``: the
    ``on_write`` hook that inflated the file ``source`` names, whose children may
    already have decoded it while it grew (tried first; on any failure the file is
    decoded as if they had not been)."""
    if isinstance(source, str):
        return load_chrome_file(source, limit_bytes, while_decoding=while_decoding)
    if isinstance(source, int):
        parts = inflating.finish(os.fstat(source).st_size) if inflating is not None else None
        got = load_chrome_file(path, limit_bytes, fd=source, while_decoding=while_decoding, parts=parts)
        if got is None and parts is not None:  # decoded while growing failed: as if it had not
            got = load_chrome_file(path, limit_bytes, fd=source, while_decoding=while_decoding)
        return got
    return load_chrome(source, path), source
