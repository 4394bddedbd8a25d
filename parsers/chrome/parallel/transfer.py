"""What the child of ``gapscope.parsers.chrome.parallel.fork`` sends back about its parts.

A part's columns, interned keys, flags and plan are pickled (protocol 5, the arrays
out of band: never copied into the pickle); its flow events travel as JSON (the C
scanner's texts as they are), its other non-``X`` events as msgpack, or as JSON when
``ts`` is kept as text (msgpack cannot carry ``msgspec.Raw``), one blob per part. How
the message travels (shared map or pipe): ``chrome.wire``.
"""

from __future__ import annotations

import pickle
import typing

import msgspec
import numpy as np

from gapscope.parsers.chrome.args import ArgColumns
from gapscope.parsers.chrome.fastscan import FlowTexts, read_part
from gapscope.parsers.chrome.interner import Interner
from gapscope.parsers.chrome.scan import PH_FLOW, PH_OTHER, EventColumns, PartLayout, merge_all, scan_events
from gapscope.parsers.chrome.wire import pack, unpack_message

__all__ = ["part_payload", "part_message", "unpack", "Sent"]

_MSGPACK = msgspec.msgpack.Encoder()
_JSON = msgspec.json.Encoder()


def part_payload(
    texts,
    list_decoder,
    x_class: type,
    raw_ts: bool,
    plan: tuple,
    header: dict | None = None,
    part_ids: list[int] | None = None,
) -> list[bytes | memoryview]:
    """The columns and non-``X`` events of the parts ``texts`` (``part_message``: pairs
    of the file offset of a part's first byte and its text) and the ``plan`` they
    follow, as the pieces of one message (``pack``); a message of None when a part
    does not decode. ``header``: the object form's other keys as {key: JSON text}, sent
    along (first child only). ``part_ids``: a list that ``texts`` fills with each
    part's place in the plan as it yields it (the parts a child claimed), sent along
    (``Sent.layout``); None: the parts are one run, the child's by its place."""
    message = part_message(texts, list_decoder, x_class, raw_ts)
    if message is None:
        return pack(None)
    message["plan"], message["header"] = plan, header
    if part_ids is not None:
        message["arrays"]["part_ids"] = np.asarray(part_ids, dtype=np.int64)
    return pack(message)


def part_message(texts, list_decoder, x_class: type, raw_ts: bool) -> dict | None:
    """The columns and non-``X`` events of the parts ``texts`` (an iterable of pairs:
    the offset in the file of a part's first byte, and the part, a JSON array of
    events), decoded and scanned one at a time (each keeping its old ``external id``
    column for ``merge_all``): each part's structs are freed, its flow and other
    events encoded, before the next is decoded; None when a part does not decode. A
    dict for ``pack`` once its ``plan`` and ``header`` are set. Where the C scanner
    read every part, its arrays hold ``starts`` (int64[n]: the offset in the file of
    each event's ``{``), so that the first read of an event's args needs no scan of
    the whole text (``EventText.starts``). ``part_ends`` and ``part_keys`` are the
    parts' ``PartLayout.ends`` and ``keys``."""
    cols: list[EventColumns] = []
    rows: list[tuple[int, int, int]] = []  # each part's events, X events, flow events
    flows: list[bytes | bytearray] = []
    others: list[bytes] = []
    starts: list[np.ndarray] | None = []
    other_encoder = _JSON if raw_ts else _MSGPACK
    for offset, text in texts:
        try:
            ec, flow, other, at = read_part(text, list_decoder, x_class, raw_ts)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        if starts is not None and at is not None:
            starts.append(at + offset)
        else:
            starts = None
        # JSON would write a non-finite float as null, but none can be here: msgspec
        # refuses a number beyond float range ("Number out of range"), and JSON has no
        # NaN or Infinity (tests/test_msgspec_messages.py pins both)
        # flow events as JSON: the scanner's compact texts as they are (seldom decoded)
        flows.append(flow.text if isinstance(flow, FlowTexts) else _JSON.encode(flow))
        others.append(other_encoder.encode(other))
        cols.append(ec)
        rows.append((ec.n, ec.cat_x.size, ec.cat_f.size))
        del flow, other
    if not cols:  # no part (a child that claimed none): an empty message
        cols.append(scan_events([], x_class, keep_old_ids=True))
        starts = None
    marks: list[tuple[int, int, int]] = []
    ec_all = merge_all(cols, marks)
    if ec_all is None:
        return None
    del cols
    arrays = _arrays(ec_all)
    arrays["part_ends"] = np.cumsum(np.array(rows, dtype=np.int64).reshape(-1, 3), axis=0)
    arrays["part_keys"] = np.array(marks[: len(rows)], dtype=np.int64).reshape(-1, 3)
    if starts is not None:
        arrays["starts"] = np.concatenate(starts) if len(starts) > 1 else starts[0]
    return {
        "n": ec_all.n,
        "cats": list(ec_all.cats),
        "names": list(ec_all.names),
        "lanes": list(ec_all.lanes),
        "has_v2": ec_all.has_v2,
        "legacy": ec_all.legacy,
        "old_ids": ec_all.old_ids,
        "plan": None,
        "header": None,
        "flows": [pickle.PickleBuffer(b) for b in flows],
        "others": [pickle.PickleBuffer(b) for b in others],
        "arrays": arrays,
    }


#: The array fields of ``EventColumns`` (``args`` travels field by field too).
_ARRAY_FIELDS = (
    "code",
    "cat_x",
    "name_x",
    "lane_x",
    "start_ns",
    "start_status",
    "dur_ns",
    "dur_status",
    "kind_x",
    "cat_f",
)


def _arrays(ec: EventColumns) -> dict[str, np.ndarray]:
    out = {f: getattr(ec, f) for f in _ARRAY_FIELDS}
    if ec.external_id_old is not None:
        out["external_id_old"] = ec.external_id_old
    for f in ArgColumns.__dataclass_fields__:
        out["args." + f] = getattr(ec.args, f)
    return out


class Sent(typing.NamedTuple):
    """What ``unpack`` reads from one child's message: its parts' ``columns`` (merged in
    the child), ``blobs`` ({``PH_FLOW``: its flow-event blobs, ``PH_OTHER``: its other
    events' blobs; bytes, one per part}), the ``plan`` it followed, the ``header`` it
    sent or None, its events' ``starts`` in the file or None, and ``layout``: its
    parts' places when it claimed them (``part_payload``'s ``part_ids``), else None."""

    columns: EventColumns
    blobs: dict
    plan: tuple
    header: dict | None
    starts: np.ndarray | None
    layout: PartLayout | None


def unpack(payload: bytes | memoryview) -> Sent | None:
    """``Sent`` of a child's message (``part_payload``), or None for a damaged one. The
    columns' arrays and the starts view ``payload``: copy them (``merge_all``,
    ``merge_ordered``) before it goes."""
    try:
        d = unpack_message(payload)
    except Exception:  # noqa: BLE001  (a damaged message: decode in one piece)
        return None
    if not isinstance(d, dict):
        return None
    arr = d["arrays"]
    interner = lambda keys: Interner(zip(keys, range(len(keys))))  # noqa: E731
    ec = EventColumns(
        n=d["n"],
        cats=interner(d["cats"]),
        names=interner(d["names"]),
        lanes=interner(d["lanes"]),
        args=ArgColumns(*(arr["args." + f] for f in ArgColumns.__dataclass_fields__)),
        has_v2=d["has_v2"],
        legacy=d["legacy"],
        old_ids=d["old_ids"],
        external_id_old=arr.get("external_id_old"),
        **{f: arr[f] for f in _ARRAY_FIELDS},
    )
    blobs = {PH_FLOW: [bytes(b) for b in d["flows"]], PH_OTHER: [bytes(b) for b in d["others"]]}
    starts = arr.get("starts")
    if starts is not None and (starts.dtype != np.int64 or starts.shape != (d["n"],)):
        starts = None  # not this part's: its args are found by a scan then
    layout = None
    if "part_ids" in arr:
        layout = PartLayout(arr["part_ids"], arr["part_ends"], arr["part_keys"])
    return Sent(ec, blobs, tuple(d["plan"]), d.get("header"), starts, layout)
