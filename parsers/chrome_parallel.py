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

import faulthandler
import math
import mmap
import os
import pickle
import select
import signal
import stat
import sys
import time
import warnings

import msgspec
import numpy as np

from .chrome_args import ArgColumns
from .chrome_columns import Interner
from .chrome_cut import BOUNDARY, find_cut
from .chrome_joined import JoinedEvents, SerialFallback
from .chrome_scan import PH_FLOW, PH_M, PH_OTHER, EventColumns, merge, scan_events

__all__ = ["MIN_BYTES", "HEAD_FRACTION", "enabled", "start", "start_file", "decode_parts", "Pending", "JoinedEvents",
           "Parts", "SerialFallback"]

#: Texts smaller than this are decoded in one piece (the fork costs tens of ms).
MIN_BYTES = 48 << 20
#: Share of the events array's bytes this process decodes (it also merges after).
HEAD_FRACTION = 0.49
#: The child may take this much longer than this process's own part (and at least
#: ``MIN_WAIT_S``) before it is killed and the text decoded in one piece.
WAIT_FACTOR = 3.0
MIN_WAIT_S = 10.0
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


class Parts:
    """What ``decode_parts`` gives: the joined events, their columns, and for the
    object form the decoded document without its events (``header``)."""

    def __init__(self, events: "JoinedEvents", scanned: EventColumns, header) -> None:
        self.events = events
        self.scanned = scanned
        self.header = header


class Pending:
    """A forked child decoding the tail of the events array (see ``start``)."""

    def __init__(self, pid: int, fd: int, shared: mmap.mmap, cut: tuple, root: int, raw_ts: bool,
                 stamp: tuple | None, t0: float) -> None:
        self.pid, self.fd, self.shared, self.cut, self.root = pid, fd, shared, cut, root
        self.raw_ts, self.stamp, self.t0 = raw_ts, stamp, t0
        self.done = False

    def close(self) -> None:
        """Kill the child if it still runs, reap it, free the pipe and shared memory
        (idempotent)."""
        if self.done:
            return
        self.done = True
        os.close(self.fd)
        _reap(self.pid)
        self.shared.close()


def _stamp(st: os.stat_result) -> tuple:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def start(data, root: int, raw_ts: bool, decoders: dict, tail_from: tuple | None = None) -> Pending | None:
    """Plan the cut in ``data`` and fork the child that decodes the tail, or None.

    ``decoders``: {raw_ts: (list decoder, ``X`` class)}. ``tail_from``: ``(fd,
    stamp)`` when ``data`` is a read-only map of the file and the child is to map its
    part of the file itself (while this process reads it); the child gives up unless
    the file's ``_stamp`` is still ``stamp`` before and after its decode (a file cut
    shorter meanwhile kills it with SIGBUS: this process then decodes in one piece).
    """
    cut = find_cut(data, root, raw_ts, HEAD_FRACTION)
    if cut is None:
        return None
    begin, brace, comma, end, header = cut
    t0 = time.perf_counter()
    try:
        shared = mmap.mmap(-1, 4 * (end - comma) + (64 << 20))
    except (OSError, ValueError):
        return None
    list_decoder, x_class = decoders[raw_ts]
    r, w = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns about fork with threads
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # child: never returns
        status = 1
        try:
            os.close(r)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            faulthandler.disable()  # a SIGBUS here (file cut short) is handled by the parent
            if tail_from is None:
                payload = _tail_payload(_frame_tail(data, comma, end), list_decoder, x_class, raw_ts)
            else:
                payload = _tail_payload(_map_tail(tail_from[0], comma, end, tail_from[1]), list_decoder, x_class,
                                        raw_ts)
                if _stamp(os.fstat(tail_from[0])) != tail_from[1]:
                    payload = pickle.dumps(None)
            _send(w, shared, payload)
            status = 0
        finally:
            os._exit(status)
    os.close(w)
    return Pending(pid, r, shared, cut, root, raw_ts, tail_from[1] if tail_from else None, t0)


def start_file(path: str, root_of, raw_ts_of, decoders: dict) -> Pending | None:
    """``start`` for a plain file of at least ``MIN_BYTES``, before it is read: the cut
    is planned on a read-only map of it (a few pages), and the child reads its part
    itself, so both processes read at once. None when not applicable (gzip, small,
    not a regular file, no cut found, ...). ``root_of(data)``: offset of the first
    ``{``/``[`` or -1; ``raw_ts_of(data, root)``: whether ``ts`` is kept as text.
    Never raises for a bad file (the loader reports those)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or not enabled(st.st_size):
            return None
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as view:
            if view[:2] == b"\x1f\x8b":
                return None
            root = root_of(view)
            if root < 0 or view[root:root + 1] not in (b"{", b"["):
                return None
            return start(view, root, raw_ts_of(view, root), decoders, (fd, _stamp(st)))
    except (OSError, ValueError, BufferError):
        return None
    finally:
        os.close(fd)


def decode_parts(data, root: int, raw_ts: bool, decoders: dict, pending: Pending | None = None,
                 path: str | None = None) -> Parts | None:
    """Decode ``data`` (a Chrome trace; ``root``: offset of its first ``{``/``[``) in
    two parts, or None (then decode it in one piece).

    ``decoders``: {raw_ts: (``msgspec.json.Decoder`` of a list of events, the ``X``
    event class it yields)}; ``raw_ts``: ``ts`` kept as JSON text (the tail's
    non-``X`` events then travel as JSON, which keeps that text). ``pending``: a
    child already started by ``start_file`` on ``path`` (used when the file is
    unchanged since and ``data`` agrees with its plan, else closed and a new child
    forked). ``Parts.header``: for the object form, the document's other keys
    (``chrome_schema.ObjectHeader``).

    Why the result equals a one-piece decode: the head (``[`` + text up to the cut +
    ``]``) and the tail (``[`` + text after the cut's comma up to the array's end +
    ``]``) each decode as an array, and the document with the whole events array
    replaced by a marker string decodes with that marker as its top-level
    ``traceEvents``; JSON being context-free, the original text is then that document
    with the marker replaced by an array holding the head's events and the tail's.
    """
    if pending is not None and not _agrees(pending, data, root, raw_ts, path):
        pending.close()
        pending = None
    if pending is None:
        pending = start(data, root, raw_ts, decoders)
        if pending is None:
            return None
    list_decoder, x_class = decoders[raw_ts]
    begin, brace, comma, end, header = pending.cut
    try:
        try:
            head = _decode_head(data, begin, brace, list_decoder)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        scanned = scan_events(head, x_class)
        code = scanned.code
        head_lists = {PH_FLOW: [head[k] for k in np.flatnonzero(code == PH_FLOW).tolist()],
                      PH_OTHER: [head[k] for k in np.flatnonzero((code == PH_M) | (code == PH_OTHER)).tolist()]}
        del head  # the X events are columns now: free them while the child still works
        wait_s = max(MIN_WAIT_S, WAIT_FACTOR * (time.perf_counter() - pending.t0))
        payload = _receive(pending.fd, pending.shared, time.monotonic() + wait_s)
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
        merged = merge(scanned, tail)
        if merged is None:
            return None
        return Parts(JoinedEvents(merged.code, head_lists, blobs, raw_ts, x_class), merged, header)
    finally:
        pending.close()


def _agrees(pending: Pending, data, root: int, raw_ts: bool, path: str | None) -> bool:
    """Whether ``data`` is the text ``pending`` planned its cut on: same file, unchanged
    (``_stamp``), and the cut's landmarks where the plan put them."""
    if pending.stamp is None or path is None or pending.root != root or pending.raw_ts != raw_ts:
        return False
    try:
        if _stamp(os.stat(path)) != pending.stamp:
            return False
    except OSError:
        return False
    begin, brace, comma, end, _ = pending.cut
    return (len(data) == pending.stamp[2] and data[begin - 1] == 0x5B and data[end] == 0x5D and data[comma] == 0x2C
            and BOUNDARY.match(data, brace) is not None)


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


def _frame_tail(data, comma: int, end: int):
    """The tail as a JSON array: ``data[comma:end + 1]`` with its comma made a ``[``
    (in place in a ``bytearray``: this process's copy), else a framed copy."""
    if isinstance(data, bytearray):
        data[comma] = 0x5B  # "["
        return memoryview(data)[comma:end + 1]
    return b"".join((b"[", memoryview(data)[comma + 1:end], b"]"))


def _map_tail(fd: int, comma: int, end: int, stamp: tuple) -> memoryview | None:
    """``_frame_tail`` of the file ``fd`` through a private map (the file's pages are
    shared with the page cache; the one byte made ``[`` is this process's copy);
    None when the file is no longer what ``stamp`` describes."""
    if _stamp(os.fstat(fd)) != stamp:
        return None
    view = mmap.mmap(fd, 0, access=mmap.ACCESS_COPY)
    if len(view) <= end or view[end] != 0x5D:
        return None
    view[comma] = 0x5B  # "["
    return memoryview(view)[comma:end + 1]


def _tail_payload(text, list_decoder, x_class: type, raw_ts: bool) -> bytes:
    """The tail's columns and non-``X`` events, pickled (plain containers only);
    ``text``: the tail framed as an array (None: the file changed)."""
    if text is None:
        return pickle.dumps(None)
    try:
        events = list_decoder.decode(text)
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


