"""What the child of ``gapscope.parsers.chrome.parallel.fork`` sends back, and how.

A part's columns, interned keys, flags and plan are pickled (protocol 5, the arrays
out of band: never copied into the pickle); its flow events travel as JSON (the C
scanner's texts as they are), its other non-``X`` events as msgpack, or as JSON when
``ts`` is kept as text (msgpack cannot carry ``msgspec.Raw``), one blob per part. The message goes through an anonymous shared map when it fits, else
through the pipe; the pipe's end of file says the child is done.
"""

from __future__ import annotations

import math
import mmap
import os
import pickle
import select
import time
from collections.abc import Callable

import msgspec
import numpy as np

from gapscope.parsers.chrome.args import ArgColumns
from gapscope.parsers.chrome.columns import Interner
from gapscope.parsers.chrome.fastscan import FlowTexts, read_part
from gapscope.parsers.chrome.scan import PH_FLOW, PH_OTHER, EventColumns, merge_all

__all__ = ["part_payload", "part_message", "pack", "send", "receive", "receive_all", "unpack"]

_MSGPACK = msgspec.msgpack.Encoder()
_JSON = msgspec.json.Encoder()


def part_payload(
    texts, list_decoder, x_class: type, raw_ts: bool, plan: tuple, header: dict | None = None
) -> list[bytes | memoryview]:
    """The columns and non-``X`` events of the parts ``texts`` (``part_message``) and
    the ``plan`` they follow, as the pieces of one message (``pack``); a message of
    None when a part does not decode. ``header``: the object form's other keys as
    {key: JSON text}, sent along (first child only)."""
    message = part_message(texts, list_decoder, x_class, raw_ts)
    if message is None:
        return pack(None)
    message["plan"], message["header"] = plan, header
    return pack(message)


def part_message(texts, list_decoder, x_class: type, raw_ts: bool) -> dict | None:
    """The columns and non-``X`` events of the parts ``texts`` (an iterable of JSON
    arrays of events), decoded and scanned one at a time (each keeping its old
    ``external id`` column for ``merge_all``): each part's structs are freed, its
    flow and other events encoded, before the next is decoded; None when a part does
    not decode. A dict for ``pack`` once its ``plan`` and ``header`` are set."""
    cols: list[EventColumns] = []
    flows: list[bytes | bytearray] = []
    others: list[bytes] = []
    other_encoder = _JSON if raw_ts else _MSGPACK
    for text in texts:
        try:
            ec, flow, other = read_part(text, list_decoder, x_class, raw_ts)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        # JSON would write a non-finite float as null, but none can be here: msgspec
        # refuses a number beyond float range ("Number out of range"), and JSON has no
        # NaN or Infinity (tests/test_msgspec_messages.py pins both)
        # flow events as JSON: the scanner's compact texts as they are (seldom decoded)
        flows.append(flow.text if isinstance(flow, FlowTexts) else _JSON.encode(flow))
        others.append(other_encoder.encode(other))
        cols.append(ec)
        del flow, other
    ec_all = merge_all(cols) if cols else None
    if ec_all is None:
        return None
    del cols
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
        "arrays": _arrays(ec_all),
    }


def pack(obj) -> list[bytes | memoryview]:
    """``obj`` pickled (protocol 5) with its arrays and blobs out of band, as pieces to
    send one after another: a prefix of lengths, the pickle, the raw buffers. The
    arrays are never copied into the pickle."""
    bufs: list[pickle.PickleBuffer] = []
    head = pickle.dumps(obj, protocol=5, buffer_callback=bufs.append)
    raws = [b.raw() for b in bufs]
    sizes = [len(head)] + [r.nbytes for r in raws]
    prefix = len(raws).to_bytes(8, "little") + b"".join(n.to_bytes(8, "little") for n in sizes)
    return [prefix, head, *raws]


def _unpack_message(payload: bytes | memoryview):
    """The object ``pack`` sent, its arrays viewing ``payload`` (no copy); raises on
    a damaged message."""
    view = memoryview(payload).cast("B")
    count = int.from_bytes(view[:8], "little")
    sizes = [int.from_bytes(view[8 + 8 * i : 16 + 8 * i], "little") for i in range(count + 1)]
    at = 8 + 8 * (count + 1)
    pieces = []
    for n in sizes:
        if at + n > len(view):
            raise ValueError("message cut short")
        pieces.append(view[at : at + n])
        at += n
    return pickle.loads(pieces[0], buffers=pieces[1:])


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


def send(fd: int, shared: mmap.mmap, pieces: list[bytes | memoryview]) -> None:
    """Put the message ``pieces`` (``pack``) one after another in ``shared`` and its
    length on the pipe (mode 0), or, when it does not fit, the length and then the
    message itself on the pipe (mode 1)."""
    size = sum(memoryview(p).nbytes for p in pieces)
    fits = size <= len(shared)
    head = size.to_bytes(8, "little") + (b"\0" if fits else b"\1")
    if fits:
        at = 0
        for p in pieces:
            n = memoryview(p).nbytes
            shared[at : at + n] = p
            at += n
        pieces = []
    for p in [head, *pieces]:
        view = memoryview(p).cast("B")
        while view:
            view = view[os.write(fd, view) :]


def receive(
    fd: int, shared: mmap.mmap, deadline: float, give_up: Callable[[], bool] | None = None
) -> bytes | memoryview | None:
    """The child's payload (see ``send``), or None (EOF early, past ``deadline``, or
    ``give_up()`` true: asked every ``GIVE_UP_POLL_S`` while waiting): ``receive_all``
    of one child."""
    got = receive_all([(fd, shared)], deadline, give_up)
    return None if got is None else got[0]


def receive_all(
    children: list[tuple[int, mmap.mmap]],
    deadline: float,
    give_up: Callable[[], bool] | None = None,
    stop: Callable[[int, bytes | memoryview], bool] | None = None,
) -> list[bytes | memoryview] | None:
    """The payloads (see ``receive``) of the children (pipe fd, shared map), in their
    order, read as each comes (all pipes polled at once), or None when one fails (its
    pipe ends early), past ``deadline``, when ``give_up()`` is true (asked every
    ``GIVE_UP_POLL_S``), or when ``stop(j, payload)`` is true of child ``j``'s payload
    as soon as it comes (no waiting for the others). ``select.poll``, not a selector:
    it needs no descriptor of its own (an epoll selector does, and fails with EMFILE
    in a process at its descriptor limit) and any fd number works."""
    chunks: dict[int, list[bytes]] = {fd: [] for fd, _ in children}
    got: dict[int, bytes | memoryview] = {}
    where = {fd: j for j, (fd, _) in enumerate(children)}
    try:
        poller = select.poll()
        for fd, _ in children:
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while len(got) < len(children):
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if give_up is not None:
                if give_up():
                    return None
                left = min(left, GIVE_UP_POLL_S)
            for fd, _ in poller.poll(max(1, math.ceil(left * 1000))):
                chunk = os.read(fd, 1 << 22)
                if chunk:
                    chunks[fd].append(chunk)
                    continue
                poller.unregister(fd)
                j = where[fd]
                payload = _payload(b"".join(chunks.pop(fd)), children[j][1])
                if payload is None or (stop is not None and stop(j, payload)):
                    return None
                got[j] = payload
        return [got[j] for j in range(len(children))]
    except OSError:  # EMFILE, ENOMEM...: as a failed child
        return None


def _payload(msg: bytes, shared: mmap.mmap) -> bytes | memoryview | None:
    """The payload a child's whole pipe message ``msg`` stands for (``send``), or None."""
    if len(msg) < 9:
        return None
    size = int.from_bytes(msg[:8], "little")
    if msg[8:9] == b"\0":
        return memoryview(shared)[:size] if size <= len(shared) else None
    return msg[9:] if len(msg) - 9 == size else None


#: Seconds between two ``give_up()`` checks while waiting for a child.
GIVE_UP_POLL_S = 0.05


def unpack_object(payload: bytes | memoryview, copy: bool = True):
    """The object ``pack`` sent (any picklable value), its buffers copied out of
    ``payload`` (``copy=False``: viewing it, which they keep alive); raises on a
    damaged message."""
    return _unpack_message(bytes(memoryview(payload).cast("B")) if copy else payload)


def unpack(payload: bytes | memoryview) -> tuple[EventColumns, dict, tuple, dict | None] | None:
    """(the part's columns, {``PH_FLOW``: its flow-event blobs, ``PH_OTHER``: its other
    events' blobs (bytes, one per part)}, the plan the child followed, the header it
    sent or None). The columns' arrays view ``payload``: copy them (``merge_all``)
    before it goes."""
    try:
        d = _unpack_message(payload)
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
    return ec, blobs, tuple(d["plan"]), d.get("header")
