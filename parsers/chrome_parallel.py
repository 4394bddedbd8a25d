"""Decode a large Chrome-trace text in two parts at once: this process and a forked child.

The events array is cut at an element boundary near ``HEAD_FRACTION`` of its bytes;
this process decodes and scans (``chrome_scan.scan_events``) the head, a forked child
the tail; the child sends back the tail's columns, and its non-``X`` events as
msgpack (or JSON when ``ts`` is kept as text), which ``JoinedEvents`` decodes only
when an event is asked for. Each part is framed as its own JSON array, so a cut
anywhere but between two elements of the events array, or a text that is not one
valid document, makes a part fail to decode; then, and on any other surprise (the
child dies, is late, or an odd case needs the whole list), ``decode_parts`` returns
None and the caller decodes the text in one piece: the result never differs.

Used only on Linux (``fork``), with two or more CPUs, for texts of at least
``MIN_BYTES``; ``GAPSCOPE_LOAD_PROCESSES=1`` turns it off.
"""

from __future__ import annotations

import math
import mmap
import os
import pickle
import re
import select
import signal
import sys
import time
import warnings
from collections.abc import Sequence

import msgspec
import numpy as np

from .chrome_args import ArgColumns
from .chrome_columns import Interner
from .chrome_lazy import EventText
from .chrome_scan import PH_FLOW, PH_M, PH_OTHER, PH_X, EventColumns, merge, scan_events
from .chrome_schema import AnyEvent, AnyEventRawTs
from .json_scan import find_events_array

__all__ = ["MIN_BYTES", "HEAD_FRACTION", "enabled", "decode_parts", "JoinedEvents", "Parts", "SerialFallback"]

#: Texts smaller than this are decoded in one piece (the fork costs tens of ms).
MIN_BYTES = 48 << 20
#: Share of the events array's bytes this process decodes (it also merges after).
HEAD_FRACTION = 0.54
#: The child may take this much longer than this process's own part (and at least
#: ``MIN_WAIT_S``) before it is killed and the text decoded in one piece.
WAIT_FACTOR = 3.0
MIN_WAIT_S = 10.0
_BOUNDARY = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")
_WS = b" \t\r\n"
_MSGPACK = msgspec.msgpack.Encoder()
_JSON = msgspec.json.Encoder()


def enabled(size_bytes: int) -> bool:
    """Whether a text of ``size_bytes`` is decoded in parts here."""
    if size_bytes < MIN_BYTES or os.environ.get("GAPSCOPE_LOAD_PROCESSES", "") == "1":
        return False
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except OSError:
        return False


class SerialFallback(Exception):
    """Input decoded in parts met a case that needs the whole event list decoded in
    one piece (raised by the loader's build and by ``JoinedEvents``; the loader then
    decodes the text again, in one piece)."""


class Parts:
    """What ``decode_parts`` gives: the joined events, their columns, and for the
    object form the decoded document without its events (``header``)."""

    def __init__(self, events: "JoinedEvents", scanned: EventColumns, header) -> None:
        self.events = events
        self.scanned = scanned
        self.header = header


def decode_parts(data: bytes, root: int, list_decoder, x_class: type, raw_ts: bool, header_decoder=None) -> Parts | None:
    """Decode ``data`` (a Chrome trace; ``root``: offset of its first ``{``/``[``) in
    two parts, or None (then decode it in one piece).

    ``list_decoder``: ``msgspec.json.Decoder`` of a list of events; ``x_class``: the
    ``X`` event class it yields; ``raw_ts``: ``ts`` kept as JSON text (the tail's
    non-``X`` events then travel as JSON, which keeps that text); ``header_decoder``:
    for the object form, a decoder of the whole document (its ``traceEvents`` comes
    back empty); ``Parts.header`` is what it gives for the document with an empty
    events array.
    """
    cut = _find_cut(data, root)
    if cut is None:
        return None
    begin, brace, comma, end = cut
    header = None
    if data[root:root + 1] == b"{":
        try:
            header = header_decoder.decode(b"".join((memoryview(data)[root:begin], b"]", memoryview(data)[end + 1:])))
            if len(header.traceEvents) != 0:
                return None
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
    t0 = time.perf_counter()
    try:
        shared = mmap.mmap(-1, 4 * (end - comma) + (64 << 20))
    except (OSError, ValueError):
        return None
    r, w = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns about fork with threads
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # child: never returns
        status = 1
        try:
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            _send(w, shared, _tail_payload(data, comma, end, list_decoder, x_class, raw_ts))
            status = 0
        finally:
            os._exit(status)
    os.close(w)
    try:
        try:
            head = _decode_head(data, begin, brace, list_decoder)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        scanned = scan_events(head, x_class)
        wait_s = max(MIN_WAIT_S, WAIT_FACTOR * (time.perf_counter() - t0))
        payload = _receive(r, shared, time.monotonic() + wait_s)
        if payload is None:
            return None
        try:
            got = _unpack(payload)
        finally:
            if isinstance(payload, memoryview):
                payload.release()
        if got is None:
            return None
        tail, blobs = got
        n_tail = tail.n
        tail_code = tail.code
        merged = merge(scanned, tail)
        if merged is None:
            return None
        return Parts(JoinedEvents(head, n_tail, tail_code, blobs, raw_ts, x_class), merged, header)
    finally:
        os.close(r)
        _reap(pid)
        shared.close()


def _decode_head(data: bytes | bytearray, begin: int, brace: int, list_decoder) -> list:
    """The events before the cut, decoded as an array: in place when ``data`` is a
    ``bytearray`` (the byte after ``brace`` is a ``]`` while decoding), else from a copy."""
    if isinstance(data, bytearray):
        saved = data[brace + 1]
        data[brace + 1] = 0x5D  # "]"
        try:
            with memoryview(data) as view:
                return list_decoder.decode(view[begin - 1:brace + 2])
        finally:
            data[brace + 1] = saved
    return list_decoder.decode(b"".join((memoryview(data)[begin - 1:brace + 1], b"]")))


def _find_cut(data: bytes, root: int) -> tuple[int, int, int, int] | None:
    """(just after the events array's ``[``, the ``}`` ending the head's last event,
    the ``,`` after it, the array's ``]``), or None. The cut is only a candidate: a
    part that does not decode as an array refutes it."""
    begin = find_events_array(data, root)
    if begin < 0:
        return None
    end = len(data) - 1
    while end > begin and data[end] in _WS:
        end -= 1
    if data[root:root + 1] == b"{":
        end = data.rfind(b"]", begin, end)
    elif data[end] != ord("]"):
        return None
    if end <= begin:
        return None
    target = begin + int((end - begin) * HEAD_FRACTION)
    m = _BOUNDARY.search(data, target, min(end, target + (8 << 20)))
    if m is None:
        return None
    brace = m.start()
    comma = data.index(b",", brace)
    return begin, brace, comma, end


# ------------------------------------------------------------------ the child

def _tail_payload(data: bytes, comma: int, end: int, list_decoder, x_class: type, raw_ts: bool) -> bytes:
    """The tail's columns and non-``X`` events, pickled (plain containers only)."""
    try:
        if isinstance(data, bytearray):  # this process's copy: frame the tail in place
            data[comma] = 0x5B  # "["
            events = list_decoder.decode(memoryview(data)[comma:end + 1])
        else:
            events = list_decoder.decode(b"".join((b"[", memoryview(data)[comma + 1:end], b"]")))
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return pickle.dumps(None)
    ec = scan_events(events, x_class)
    flows = [events[k] for k in np.flatnonzero(ec.code == PH_FLOW).tolist()]
    others = [events[k] for k in np.flatnonzero((ec.code == PH_M) | (ec.code == PH_OTHER)).tolist()]
    if raw_ts and not all(map(_all_finite, others)):  # JSON would write a non-finite float as null
        return pickle.dumps(None)
    out = {
        "n": ec.n, "cats": list(ec.cats), "names": list(ec.names), "lanes": list(ec.lanes),
        "has_v2": ec.has_v2, "legacy": ec.legacy, "old_ids": ec.old_ids,
        "flows": _MSGPACK.encode(flows), "others": (_JSON if raw_ts else _MSGPACK).encode(others),
        "arrays": {name: (a.dtype.str, a.tobytes()) for name, a in _arrays(ec).items()},
    }
    return pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)


def _arrays(ec: EventColumns) -> dict[str, np.ndarray]:
    out = {f: getattr(ec, f) for f in ("code", "cat_x", "name_x", "lane_x", "start_ns", "start_status", "dur_ns",
                                       "dur_status", "kind_x", "cat_f")}
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


def _send(fd: int, shared: mmap.mmap, payload: bytes) -> None:
    """Put ``payload`` in ``shared`` and its length on the pipe (mode 0), or, when it
    does not fit, the length and then the payload itself on the pipe (mode 1)."""
    fits = len(payload) <= len(shared)
    if fits:
        shared[:len(payload)] = payload
    view = memoryview(len(payload).to_bytes(8, "little") + (b"\0" if fits else b"\1") + (b"" if fits else payload))
    while view:
        view = view[os.write(fd, view):]


# ------------------------------------------------------------------ the parent

def _receive(fd: int, shared: mmap.mmap, deadline: float) -> bytes | memoryview | None:
    """The child's payload (see ``_send``), or None (EOF early, or past ``deadline``)."""
    msg = _read_all(fd, deadline)
    if msg is None:
        return None
    size = int.from_bytes(msg[:8], "little")
    if msg[8:9] == b"\0":
        return memoryview(shared)[:size] if size <= len(shared) else None
    return msg[9:] if len(msg) - 9 == size else None


def _read_all(fd: int, deadline: float) -> bytes | None:
    """Everything the child writes on the pipe until it closes it, or None (past
    ``deadline``, or nothing)."""
    chunks: list[bytes] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            return None
        chunk = os.read(fd, 1 << 22)
        if not chunk:
            msg = b"".join(chunks)
            return msg if len(msg) >= 9 else None
        chunks.append(chunk)


def _unpack(payload: bytes) -> tuple[EventColumns, dict] | None:
    """(the tail's columns, {``PH_FLOW``: flows blob, ``PH_OTHER``: other events blob})."""
    try:
        d = pickle.loads(payload)
    except Exception:  # noqa: BLE001  (a damaged message: decode in one piece)
        return None
    if not isinstance(d, dict):
        return None
    arr = {k: np.frombuffer(b, dtype=np.dtype(t)) for k, (t, b) in d["arrays"].items()}
    interner = lambda keys: Interner(zip(keys, range(len(keys))))  # noqa: E731
    ec = EventColumns(
        n=d["n"], code=arr["code"], cats=interner(d["cats"]), names=interner(d["names"]),
        lanes=interner(d["lanes"]), cat_x=arr["cat_x"], name_x=arr["name_x"], lane_x=arr["lane_x"],
        start_ns=arr["start_ns"], start_status=arr["start_status"], dur_ns=arr["dur_ns"],
        dur_status=arr["dur_status"], kind_x=arr["kind_x"],
        args=ArgColumns(*(arr["args." + f] for f in ArgColumns.__dataclass_fields__)),
        cat_f=arr["cat_f"], has_v2=d["has_v2"], legacy=d["legacy"], old_ids=d["old_ids"])
    return ec, {PH_FLOW: d["flows"], PH_OTHER: d["others"]}


def _reap(pid: int) -> None:
    """Wait for the child; kill it first when it is still running."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        pass


class JoinedEvents(Sequence):
    """The events of both parts as one sequence: the head's decoded structs, then the
    tail's, decoded on first use: flows and other non-``X`` events from the child's
    blobs, an ``X`` event from the text (``EventText``; rare: warnings, v2 flows)."""

    def __init__(self, head: list, n_tail: int, tail_code: np.ndarray, blobs: dict, raw_ts: bool,
                 x_class: type) -> None:
        self.head = head
        self.nh = len(head)
        self.n = self.nh + n_tail
        self.code = tail_code
        self._blobs = blobs
        self._decoders = {PH_FLOW: msgspec.msgpack.Decoder(list[AnyEvent]),
                          PH_OTHER: (msgspec.json.Decoder(list[AnyEventRawTs]) if raw_ts
                                     else msgspec.msgpack.Decoder(list[AnyEvent]))}
        self._lists: dict[int, list] = {}
        self._rank: dict[int, np.ndarray] = {}
        self._x_decoder = msgspec.json.Decoder(x_class)
        self.text: EventText | None = None  # set by the loader, for ``X`` events of the tail

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(self.n))]
        if k < 0:
            k += self.n
        if not 0 <= k < self.n:
            raise IndexError(k)
        if k < self.nh:
            return self.head[k]
        j = k - self.nh
        c = int(self.code[j])
        if c == PH_X:
            e = self.text.decode_event(k, self._x_decoder) if self.text is not None else None
            if e is None:
                raise SerialFallback(f"event {k} not found in the text")
            return e
        group = PH_FLOW if c == PH_FLOW else PH_OTHER
        if group not in self._lists:
            mask = self.code == PH_FLOW if group == PH_FLOW else (self.code == PH_M) | (self.code == PH_OTHER)
            self._rank[group] = np.cumsum(mask) - 1
            try:
                self._lists[group] = self._decoders[group].decode(self._blobs.pop(group))
            except (msgspec.DecodeError, msgspec.ValidationError) as e:
                raise SerialFallback("tail events") from e
        return self._lists[group][int(self._rank[group][j])]
