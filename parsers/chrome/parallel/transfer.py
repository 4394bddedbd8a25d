"""What the child of ``gapscope.parsers.chrome.parallel.fork`` sends back, and how.

A part's columns (numpy arrays as bytes), interned keys, flags and plan are pickled
(plain containers only: nothing to import in the child); its non-``X`` events travel
as msgpack, or as JSON when ``ts`` is kept as text (msgpack cannot carry
``msgspec.Raw``). The message goes through an anonymous shared map when it fits,
else through the pipe; the pipe's end of file says the child is done.
"""

from __future__ import annotations

import math
import mmap
import os
import pickle
import selectors
import time

import msgspec
import numpy as np

from gapscope.parsers.chrome.args import ArgColumns
from gapscope.parsers.chrome.columns import Interner
from gapscope.parsers.chrome.scan import PH_FLOW, PH_M, PH_OTHER, EventColumns, merge_all, scan_events

__all__ = ["part_payload", "send", "receive", "unpack"]

_MSGPACK = msgspec.msgpack.Encoder()
_JSON = msgspec.json.Encoder()


def part_payload(texts, list_decoder, x_class: type, raw_ts: bool, plan: tuple, header: dict | None = None) -> bytes:
    """The columns and non-``X`` events of the parts ``texts`` (an iterable of JSON
    arrays of events, decoded and scanned one at a time, each part's structs freed
    before the next is decoded) and the ``plan`` they follow, pickled (plain
    containers only); a pickled None when a part does not decode. ``header``: the
    object form's other keys as {key: JSON text}, sent along (first part only)."""
    cols: list[EventColumns] = []
    flows: list = []
    others: list = []
    for text in texts:
        try:
            events = list_decoder.decode(text)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return pickle.dumps(None)
        ec = scan_events(events, x_class)
        flows += [events[k] for k in np.flatnonzero(ec.code == PH_FLOW).tolist()]
        others += [events[k] for k in np.flatnonzero((ec.code == PH_M) | (ec.code == PH_OTHER)).tolist()]
        cols.append(ec)
        del events
    ec_all = merge_all(cols) if cols else None
    if ec_all is None:
        return pickle.dumps(None)
    if raw_ts and not all(map(_all_finite, others)):  # JSON would write a non-finite float as null
        return pickle.dumps(None)
    out = {
        "n": ec_all.n,
        "cats": list(ec_all.cats),
        "names": list(ec_all.names),
        "lanes": list(ec_all.lanes),
        "has_v2": ec_all.has_v2,
        "legacy": ec_all.legacy,
        "old_ids": ec_all.old_ids,
        "plan": plan,
        "header": header,
        "flows": _MSGPACK.encode(flows),
        "others": (_JSON if raw_ts else _MSGPACK).encode(others),
        "arrays": {name: (a.dtype.str, a.tobytes()) for name, a in _arrays(ec_all).items()},
    }
    return pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)


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
    for f in ArgColumns.__dataclass_fields__:
        out["args." + f] = getattr(ec.args, f)
    return out


def _all_finite(e) -> bool:
    for f in e.__struct_fields__:
        v = getattr(e, f)
        if type(v) is float and not math.isfinite(v):
            return False
        if isinstance(v, msgspec.Struct) and not _all_finite(v):
            return False
    return True


def send(fd: int, shared: mmap.mmap, payload: bytes) -> None:
    """Put ``payload`` in ``shared`` and its length on the pipe (mode 0), or, when it
    does not fit, the length and then the payload itself on the pipe (mode 1)."""
    fits = len(payload) <= len(shared)
    if fits:
        shared[: len(payload)] = payload
    view = memoryview(len(payload).to_bytes(8, "little") + (b"\0" if fits else b"\1") + (b"" if fits else payload))
    while view:
        view = view[os.write(fd, view) :]


def receive(fd: int, shared: mmap.mmap, deadline: float) -> bytes | memoryview | None:
    """The child's payload (see ``send``), or None (EOF early, or past ``deadline``)."""
    msg = _read_all(fd, deadline)
    if msg is None:
        return None
    size = int.from_bytes(msg[:8], "little")
    if msg[8:9] == b"\0":
        return memoryview(shared)[:size] if size <= len(shared) else None
    return msg[9:] if len(msg) - 9 == size else None


def _read_all(fd: int, deadline: float) -> bytes | None:
    """Everything the child writes on the pipe until it closes it, or None (past
    ``deadline``, or nothing). ``poll``, not ``select``: any fd number works."""
    chunks: list[bytes] = []
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0 or not sel.select(left):
                return None
            chunk = os.read(fd, 1 << 22)
            if not chunk:
                msg = b"".join(chunks)
                return msg if len(msg) >= 9 else None
            chunks.append(chunk)


def unpack(payload: bytes | memoryview) -> tuple[EventColumns, dict, tuple, dict | None] | None:
    """(the part's columns, {``PH_FLOW``: flows blob, ``PH_OTHER``: other events blob},
    the plan the child followed, the header it sent or None)."""
    try:
        d = pickle.loads(payload)
    except Exception:  # noqa: BLE001  (a damaged message: decode in one piece)
        return None
    if not isinstance(d, dict):
        return None
    arr = {k: np.frombuffer(b, dtype=np.dtype(t)) for k, (t, b) in d["arrays"].items()}
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
        **{f: arr[f] for f in _ARRAY_FIELDS},
    )
    return ec, {PH_FLOW: d["flows"], PH_OTHER: d["others"]}, tuple(d["plan"]), d.get("header")
