"""The columns of one part of the events array read straight from its text.

``scan_text`` gives what ``msgspec`` decoding the part into structs and
``gapscope.parsers.chrome.scan.scan_events`` give: the same ``EventColumns`` (every
array, and the interned categories, names and lanes in the same order) and the same
flow and other events (the flow events as ``FlowTexts``, which decode to the same
structs when an event is asked for). The C scanner ``_xscan`` (built with the package;
``_xscan.c`` says what it reads) does the bulk, the ``X`` events, without a struct per
event, and checks the flow events' fields as msgspec would, keeping their texts. Only
the other non-``X`` events, the unique raw spellings of names and categories (flow
events' too) and lanes, and the ``args`` of copies and of events whose ids are not
plain integers go through ``msgspec``, each distinct text once (a list of events
repeats one struct for events of the same text: nothing changes an event struct once
decoded). The decoded values are interned with Python equality, so ``1`` and ``1.0``
are one key and its first-seen spelling is kept, as in ``scan_events``. It also gives
the offset of each event's ``{`` in the text.

The scanner takes a strict subset of JSON and of the ``X`` schema (``_xscan.c``). On
anything outside it, and when the extension is missing (built without a C compiler) or
``GAPSCOPE_XSCAN=0`` is set, ``scan_text`` returns None. The caller then decodes the
part with ``msgspec`` as before, so the result never depends on which path ran
(``tests/test_fastscan.py`` checks both on the corpus and on generated odd events).
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec
import numpy as np

from gapscope.parsers.chrome.args import COPY_KINDS, GPU_SIDE_KINDS, ArgColumns, extract_args, old_external_ids
from gapscope.parsers.chrome.interner import Interner
from gapscope.parsers.chrome.scan import (
    PH_FLOW,
    PH_M,
    PH_OTHER,
    PH_X,
    EventColumns,
    carried_old_ids,
    phase_codes,
    scan_events,
    x_kinds,
)
from gapscope.parsers.chrome.schema import EVENT_LIST, NO_X_ARGS, KinetoXArgs, Scalar
from gapscope.settings import read_settings

try:
    from gapscope.parsers.chrome import _xscan
except ImportError:  # built without a C compiler: msgspec decodes every part
    _xscan = None  # type: ignore[assignment]

__all__ = [
    "FlowTexts",
    "built",
    "available",
    "scan_text",
    "read_part",
    "device_events",
    "device_event_spans",
    "device_scan",
]

_SCALAR = msgspec.json.Decoder(Scalar)
_X_ARGS = msgspec.json.Decoder(KinetoXArgs)
_FLOWS = msgspec.json.Decoder(EVENT_LIST)


def built() -> bool:
    """True when the C scanner was built with the package (a C compiler was found)."""
    return _xscan is not None


def available() -> bool:
    """True when the C scanner is built and not turned off (``GAPSCOPE_XSCAN=0``)."""
    return _xscan is not None and read_settings().xscan


def scan_text(text, list_decoder, raw_ts: bool) -> tuple[EventColumns, Sequence, list, np.ndarray] | None:
    """(columns, flow events, other events, starts) of ``text``, a JSON array of trace
    events (any buffer), as ``scan_events(list_decoder.decode(text), x_class,
    keep_old_ids=True)`` and the events of its flow codes and of its ``M``/other codes
    give them, and int64[n] offsets in ``text`` of each event's ``{``; None when the
    scanner is unavailable or the text is outside what it takes. ``list_decoder``: the ``msgspec`` decoder of an event list of that
    ``raw_ts`` (``ts`` kept as JSON text) form. Never raises on bad text."""
    if not available():
        return None
    got = _xscan.scan(text, raw_ts)
    if got is None:
        return None
    with memoryview(text) as view, view.cast("B") as data:
        return _columns(got, data, list_decoder)


def device_scan(
    text, begin: int, end: int, cats: tuple[bytes, ...], list_decoder, raw_ts: bool
) -> tuple[EventColumns, Sequence, list, np.ndarray] | None:
    """``read_part`` of the JSON array ``device_event_spans(text, begin, end, cats)``
    finds, with its int64[n, 2] spans, read in one pass where the events lie in
    ``text`` (``_xscan.device_scan``) instead of copied out and read again: (columns,
    flow events, other events, spans), the same values. None where
    ``device_event_spans`` gives None, or where ``scan_text`` would give None for that
    array (an event outside the scanner's subset: ``read_part`` decodes those).
    ``text``: any buffer, e.g. a map of the file. Never raises on bad text."""
    if not available():
        return None
    got = _xscan.device_scan(text, begin, end, cats, raw_ts)
    if got is None:
        return None
    spans = np.frombuffer(got[-1], dtype=np.int64).reshape(-1, 2)
    with memoryview(text) as view, view.cast("B") as data:
        cols = _columns(got[:-1], data, list_decoder)
    return None if cols is None else (*cols[:3], spans)


def _columns(got: tuple, data: memoryview, list_decoder) -> tuple[EventColumns, Sequence, list, np.ndarray] | None:
    """``scan_text``'s result from the scanner's tuple ``got``, whose offsets are in
    ``data``; None where ``msgspec`` refuses a value the scanner passed on."""
    (isx, other_text, other_id, name_id, cat_id, lane_id, ts, ts_st, dur, dur_st) = got[:10]
    (corr, dev, stream, ext, ext_old, odd, args_sp, flow_text, flow_cat_id, starts) = got[10:20]
    (name_keys, cat_keys, lane_keys_b, has_bind, flow_cat_keys) = got[20:]
    try:
        distinct = list_decoder.decode(other_text)
        others = list(map(distinct.__getitem__, np.frombuffer(other_id, dtype=np.int32).tolist()))
        name_vals = _values(data, name_keys)
        cat_vals = _values(data, cat_keys)
        lane_vals = _values(data, lane_keys_b, pairs=True)
        flow_cat_vals = _values(data, flow_cat_keys)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    # per event: 1 an X event (columns), 2 a flow event (text kept: ``FlowTexts``),
    # 0 any other (decoded here)
    what = np.frombuffer(isx, dtype=np.uint8)
    code = np.full(what.size, PH_X, dtype=np.int8)
    code[what == 2] = PH_FLOW
    other_code = phase_codes(others)
    if bool((other_code == PH_FLOW).any()):  # never: the scanner keeps every flow event
        return None
    code[what == 0] = other_code
    flow_cat = np.frombuffer(flow_cat_id, dtype=np.int32)
    flows = FlowTexts(flow_text, int(flow_cat.size))

    cats = Interner()
    cat_x = _ids(cats, cat_vals, cat_id)
    cat_f = _ids(cats, flow_cat_vals, flow_cat_id)
    for e in others:
        cats[e.cat]
    names = Interner()
    name_x = _ids(names, name_vals, name_id)
    lanes = Interner()
    lane_x = _ids(lanes, lane_vals, lane_id)
    kind_x, old_ids, legacy = x_kinds(cats, names, lanes, cat_x, name_x, lane_x)

    col = lambda b: np.frombuffer(b, dtype=np.int64)  # noqa: E731 - writable: the buffers are bytearrays
    ext_col, old_col = col(ext), col(ext_old)
    gpu = np.isin(kind_x, GPU_SIDE_KINDS)
    nx = kind_x.size
    args = ArgColumns(
        col(corr),
        np.where(gpu, col(dev), -1),
        np.where(gpu, col(stream), -1),
        np.full(nx, -1, dtype=np.int64),
        np.where(ext_col >= 0, ext_col, old_col) if old_ids else ext_col,
        np.zeros(nx, dtype=np.int8),
        np.zeros(nx, dtype=bool),
    )
    # copies (bytes, direction, pageable) and ids that are not plain integers: as the
    # struct path reads them, from their decoded args
    rows = np.flatnonzero(np.isin(kind_x, COPY_KINDS) | np.frombuffer(odd, dtype=np.uint8).astype(bool))
    if rows.size:
        arg_sp = np.frombuffer(args_sp, dtype=np.int64).reshape(-1, 2)[rows]
        try:
            sub = [_X_ARGS.decode(data[s:e]) if s >= 0 else NO_X_ARGS for s, e in arg_sp.tolist()]
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        part = extract_args(sub, kind_x[rows], name_x[rows], list(names), old_external_id=old_ids)
        for f in ArgColumns.__dataclass_fields__:
            getattr(args, f)[rows] = getattr(part, f)
        old_col[rows] = old_external_ids(sub)
    ec = EventColumns(
        n=int(what.size),
        code=code,
        cats=cats,
        names=names,
        lanes=lanes,
        cat_x=cat_x,
        name_x=name_x,
        lane_x=lane_x,
        start_ns=col(ts),
        start_status=np.frombuffer(ts_st, dtype=np.int8),
        dur_ns=col(dur),
        dur_status=np.frombuffer(dur_st, dtype=np.int8),
        kind_x=kind_x,
        args=args,
        cat_f=cat_f,
        has_v2=bool(has_bind),
        legacy=legacy,
        old_ids=old_ids,
        external_id_old=None if old_ids else carried_old_ids(old_col),
    )
    return ec, flows, others, np.frombuffer(starts, dtype=np.int64)


def device_events(text, begin: int, end: int, cats: tuple[bytes, ...]) -> bytes | None:
    """A JSON array (bytes) of the texts of the events in ``text[begin:end]`` (the
    inside of the events array) whose ``"cat"`` holds one of ``cats`` (exact bytes),
    in text order (``[]``: none), found by searching the text for the key rather than
    reading every event (``_xscan.device_events``); None when the scanner is
    unavailable or cannot place one of them (``_xscan.c`` says when). Never raises on
    bad text."""
    if not available():
        return None
    return _xscan.device_events(text, begin, end, cats)


def device_event_spans(text, begin: int, end: int, cats: tuple[bytes, ...]) -> tuple[bytes, np.ndarray] | None:
    """``device_events`` and where its events lie in ``text``: (the JSON array,
    int64[n, 2] of each event's (offset of its ``{``, one past its ``}``) in ``text``,
    in the array's order). ``text[begin:end]`` may be any run of whole elements of the
    events array (from just after a ``[`` or ``,``, up to a ``}``). None as for
    ``device_events``."""
    if not available():
        return None
    got = _xscan.device_events(text, begin, end, cats, True)
    if got is None:
        return None
    doc, spans = got
    return doc, np.frombuffer(spans, dtype=np.int64).reshape(-1, 2)


def read_part(
    text, list_decoder, x_class: type, raw_ts: bool
) -> tuple[EventColumns, Sequence, list, np.ndarray | None]:
    """(columns, flow events, other events, starts) of ``text``, a JSON array of trace
    events: by ``scan_text`` (``starts``: int64[n] offsets in ``text`` of each event's
    ``{``), else by decoding it with ``list_decoder`` (whose ``X`` events are of
    ``x_class``) and ``scan_events`` (``starts`` None), keeping the old ``external
    id`` column for ``merge_all``. Raises what ``list_decoder.decode`` raises on a text
    it refuses (``msgspec.DecodeError``, ``msgspec.ValidationError``,
    ``RecursionError``)."""
    fast = scan_text(text, list_decoder, raw_ts)
    if fast is not None:
        return fast
    events = list_decoder.decode(text)
    ec = scan_events(events, x_class, keep_old_ids=True)
    flows = [events[k] for k in np.flatnonzero(ec.code == PH_FLOW).tolist()]
    others = [events[k] for k in np.flatnonzero((ec.code == PH_M) | (ec.code == PH_OTHER)).tolist()]
    return ec, flows, others, None


class FlowTexts(Sequence):
    """The flow events (``s``/``t``/``f``) of one part, read by the C scanner: the JSON
    array of their texts (``text``, a bytes-like object; each event as an object of the fields its
    struct reads, ``chrome_schema._FlowEvent``, the same class whether or not ``ts``
    is kept as text elsewhere), decoded on the first access to an event. The loader needs only their count and categories (the
    columns' ``cat_f``) unless some GPU op is left unlinked by ``correlation``: the
    hundreds of thousands of ``ac2g`` flows of a Kineto trace are seldom decoded.
    An access raises what ``msgspec`` raises (``msgspec.DecodeError``,
    ``msgspec.ValidationError``) on a text it refuses (none the scanner passes).
    Pickled with its text as bytes (a share of the device preview comes from a child;
    the scanner's buffer is not picklable)."""

    def __init__(self, text: bytes | bytearray, n: int) -> None:
        self.text = text
        self.n = n
        self._events: list | None = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k):
        return self.events()[k]

    def __reduce__(self):
        return (FlowTexts, (bytes(self.text), self.n))

    def events(self) -> list:
        """The decoded events, in order (decoded once)."""
        if self._events is None:
            got = _FLOWS.decode(self.text)
            if len(got) != self.n:
                raise msgspec.ValidationError(f"{len(got)} flow events decoded, {self.n} scanned")
            self._events = got
        return self._events


def _values(data: memoryview, keys: bytearray, pairs: bool = False) -> list:
    """The decoded value of each unique raw span (``(start, end, -1, -1)`` rows;
    start < 0: absent, None), or of each (pid, tid) pair of spans."""
    rows = np.frombuffer(keys, dtype=np.int64).reshape(-1, 4).tolist()

    def one(s: int, e: int):
        return None if s < 0 else _SCALAR.decode(data[s:e])

    if pairs:
        return [(one(s1, e1), one(s2, e2)) for s1, e1, s2, e2 in rows]
    return [one(s, e) for s, e, _, _ in rows]


def _ids(interner: Interner, values: list, raw_ids: bytearray) -> np.ndarray:
    """int32 id in ``interner`` of each event whose raw key id is in ``raw_ids``:
    the unique values are interned in their first-seen order (equal values of several
    spellings share the first one's id)."""
    table = np.fromiter(map(interner.__getitem__, values), dtype=np.int32, count=len(values))
    return table[np.frombuffer(raw_ids, dtype=np.int32)]
