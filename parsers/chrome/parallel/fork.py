"""Decode a large Chrome-trace text in two parts at once: this process and a forked child.

The events array is cut at an element boundary near ``HEAD_FRACTION`` of its bytes;
this process decodes and scans (``chrome_scan.scan_events``) the head, a forked child
the tail; the child sends back (``chrome_transfer``) the tail's columns, and its
non-``X`` events as msgpack (or JSON when ``ts`` is kept as text), which
``JoinedEvents`` decodes only when an event is asked for. Each part is framed as its own JSON array, so a cut
anywhere but between two elements of the events array, or a text that is not one
valid document, makes a part fail to decode; then, and on any other surprise (the
child dies, is late, or an odd case needs the whole list), ``decode_parts`` returns
None and the caller decodes the text in one piece: the result never differs.

Used only on Linux (``fork``), with two or more CPUs, for texts of at least
``MIN_BYTES``; ``GAPSCOPE_LOAD_PROCESSES=1`` turns it off.
"""

from __future__ import annotations

import faulthandler
import mmap
import os
import pickle
import signal
import stat
import sys
import time
import warnings

import msgspec
import numpy as np

from gapscope.parsers.chrome.lazy_args import EventText
from gapscope.parsers.chrome.parallel import transfer as _tx
from gapscope.parsers.chrome.parallel.cut import find_cut
from gapscope.parsers.chrome.parallel.joined import JoinedEvents
from gapscope.parsers.chrome.scan import PH_FLOW, PH_M, PH_OTHER, EventColumns, merge, scan_events
from gapscope.parsers.chrome.schema import ObjectHeader

__all__ = ["MIN_BYTES", "HEAD_FRACTION", "enabled", "start", "start_file", "decode_parts", "Pending", "Parts"]

#: Texts smaller than this are decoded in one piece (the fork costs tens of ms).
MIN_BYTES = 48 << 20
#: Share of the events array's bytes this process decodes (it also merges after).
HEAD_FRACTION = 0.49
#: The child may take this much longer than this process's own part (and at least
#: ``MIN_WAIT_S``) before it is killed and the text decoded in one piece.
WAIT_FACTOR = 3.0
MIN_WAIT_S = 10.0


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

    def __init__(self, events: JoinedEvents, scanned: EventColumns, header: ObjectHeader | None) -> None:
        self.events = events
        self.scanned = scanned
        self.header = header


class Pending:
    """A forked child decoding the tail of the events array (see ``start``,
    ``start_file``). ``plan``: (root, raw_ts, begin, brace, comma, end) the child
    works to: known at once for ``start``; for ``start_file`` the child plans on the
    file and reports its plan with its result, checked against this process's own."""

    def __init__(
        self, pid: int, fd: int, shared: mmap.mmap, plan: tuple | None, stamp: tuple | None, t0: float
    ) -> None:
        self.pid, self.fd, self.shared, self.plan, self.stamp, self.t0 = pid, fd, shared, plan, stamp, t0
        self.header: ObjectHeader | None = None  # the object form's header, with ``plan``
        self.done = False

    def close(self) -> None:
        """Kill the child if it still runs, reap it, free the pipe and shared memory
        (idempotent; a Ctrl-C meanwhile is held back until it is done)."""
        if self.done:
            return
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            try:
                os.close(self.fd)
            except OSError:
                pass
            _reap(self.pid)
            try:
                self.shared.close()
            except BufferError:  # a view of it is still alive: the map goes with it
                pass
            self.done = True
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)

    def __del__(self) -> None:  # an interrupt between fork and use drops the object
        if not getattr(self, "done", True):
            self.close()


def _stamp(st: os.stat_result) -> tuple:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _fork(work, shared_bytes: int, plan: tuple | None, stamp: tuple | None) -> Pending | None:
    """Fork a child that runs ``work()`` (-> payload bytes) and sends its result; None
    when the pipe, the shared memory or the fork cannot be had. SIGINT is blocked
    across the fork, so the child cannot be interrupted before it has its own default
    handler; the child never returns into the caller (``os._exit``)."""
    try:
        shared = mmap.mmap(-1, shared_bytes)
    except (OSError, ValueError, OverflowError):
        return None
    try:
        r, w = os.pipe()
    except OSError:
        shared.close()
        return None
    t0 = time.perf_counter()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    pid = -1
    try:
        with warnings.catch_warnings():  # Python 3.12+ warns about fork with threads
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
            if pid == 0:
                _child(work, r, w, shared, mask)  # never returns
    except OSError:
        pid = -1
    except BaseException:
        if pid > 0:
            Pending(pid, r, shared, plan, stamp, t0).close()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        raise
    os.close(w)
    if pid < 0:
        os.close(r)
        shared.close()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return None
    pending = Pending(pid, r, shared, plan, stamp, t0)
    try:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # a Ctrl-C held back arrives here
    except BaseException:
        pending.close()
        raise
    return pending


def _child(work, r: int, w: int, shared: mmap.mmap, mask) -> None:
    status = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        faulthandler.disable()  # a SIGBUS (file cut short under the map) is the parent's to handle
        _die_with_parent()
        os.close(r)
        _tx.send(w, shared, work())
        status = 0
    finally:
        os._exit(status)


def _die_with_parent() -> None:
    """Linux ``PR_SET_PDEATHSIG``: the child is killed when its parent dies."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def start(data, root: int, raw_ts: bool, decoders: dict) -> Pending | None:
    """Plan the cut in ``data`` (already read) and fork the child that decodes the
    tail from its copy of ``data``, or None. ``decoders``: {raw_ts: (list decoder,
    ``X`` class)}."""
    cut = find_cut(data, root, raw_ts, HEAD_FRACTION)
    if cut is None:
        return None
    begin, brace, comma, end, _ = cut
    list_decoder, x_class = decoders[raw_ts]
    plan = (root, raw_ts, begin, brace, comma, end)
    pending = _fork(
        lambda: _tx.tail_payload(_frame_tail(data, comma, end), list_decoder, x_class, raw_ts, plan),
        4 * (end - comma) + (64 << 20),
        plan,
        None,
    )
    if pending is not None:
        pending.header = cut[4]
    return pending


def start_file(path: str, root_of, raw_ts_of, decoders: dict) -> Pending | None:
    """Fork, before the file is read, a child that maps the plain file ``path`` (of at
    least ``MIN_BYTES``), plans the cut itself and decodes the tail, so that both
    processes read at once; None when not applicable (small, not a regular file,
    gzip, not starting as JSON, cannot fork). This process opens the file only; the child's map cannot hurt it
    (a file cut short kills only the child, by SIGBUS). ``root_of(data)``: offset of
    the first ``{``/``[`` or -1; ``raw_ts_of(data, root)``: whether ``ts`` is kept as
    text. Never raises for a bad file (the loader reports those)."""
    try:
        before = os.stat(path)  # never open a FIFO or a device (opening one has effects)
        if not stat.S_ISREG(before.st_mode) or not enabled(before.st_size):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino) or not stat.S_ISREG(st.st_mode):
            return None
        head = os.pread(fd, 4096, 0)
        root = root_of(head)
        if head[:2] == b"\x1f\x8b" or root < 0 or head[root : root + 1] not in (b"{", b"["):
            return None  # gzip, or not JSON: nothing to split
        stamp = _stamp(st)
        return _fork(
            lambda: _file_tail_payload(fd, stamp, root_of, raw_ts_of, decoders),
            2 * st.st_size + (64 << 20),
            None,
            stamp,
        )
    except OSError:
        return None
    finally:
        os.close(fd)


def _file_tail_payload(fd: int, stamp: tuple, root_of, raw_ts_of, decoders: dict) -> bytes:
    """In the child of ``start_file``: plan on a private map of the file, decode the
    tail; a pickled None when the file is not what ``stamp`` says (before or after)."""
    if _stamp(os.fstat(fd)) != stamp:
        return pickle.dumps(None)
    view = mmap.mmap(fd, 0, access=mmap.ACCESS_COPY)
    if view[:2] == b"\x1f\x8b":
        return pickle.dumps(None)
    root = root_of(view)
    if root < 0 or view[root : root + 1] not in (b"{", b"["):
        return pickle.dumps(None)
    raw_ts = raw_ts_of(view, root)
    cut = find_cut(view, root, raw_ts, HEAD_FRACTION)
    if cut is None:
        return pickle.dumps(None)
    begin, brace, comma, end, _ = cut
    list_decoder, x_class = decoders[raw_ts]
    view[comma] = 0x5B  # "[": this process's private copy of the page
    payload = _tx.tail_payload(
        memoryview(view)[comma : end + 1], list_decoder, x_class, raw_ts, (root, raw_ts, begin, brace, comma, end)
    )
    return payload if _stamp(os.fstat(fd)) == stamp else pickle.dumps(None)


def decode_parts(
    data,
    root: int,
    raw_ts: bool,
    decoders: dict,
    pending: Pending | None = None,
    read_stat: os.stat_result | None = None,
) -> Parts | None:
    """Decode ``data`` (a Chrome trace; ``root``: offset of its first ``{``/``[``) in
    two parts, or None (then decode it in one piece).

    ``decoders``: {raw_ts: (``msgspec.json.Decoder`` of a list of events, the ``X``
    event class it yields)}; ``raw_ts``: ``ts`` kept as JSON text (the tail's
    non-``X`` events then travel as JSON, which keeps that text). ``pending``: a
    child already started by ``start_file``: used when the file ``data`` was read
    from (``read_stat``: ``os.fstat`` of it after the read) is the one it started on,
    unchanged (else closed, and a child forked from ``data``), and its result only
    when it cut where this process cuts ``data``. Always closes ``pending``. ``Parts.header``: for the
    object form, the document's other keys (``chrome_schema.ObjectHeader``).

    Why the result equals a one-piece decode: the head (``[`` + text up to the cut +
    ``]``) and the tail (``[`` + text after the cut's comma up to the array's end +
    ``]``) each decode as an array, and the document with the whole events array
    replaced by a marker string decodes with that marker as its top-level
    ``traceEvents``; JSON being context-free, the original text is then that document
    with the marker replaced by an array holding the head's events and the tail's.
    """
    payload = None
    try:
        if pending is not None and not _unchanged(pending, data, read_stat):
            pending.close()
            pending = None
        if pending is None:
            pending = start(data, root, raw_ts, decoders)
            if pending is None:
                return None
        list_decoder, x_class = decoders[raw_ts]
        if pending.plan is None:  # the file's child plans on its own: plan here, compare later
            cut = find_cut(data, root, raw_ts, HEAD_FRACTION)
            if cut is None:
                return None
            plan, header = (root, raw_ts) + tuple(cut[:4]), cut[4]
        else:
            plan, header = pending.plan, pending.header
        begin, brace = plan[2], plan[3]
        try:
            head = _decode_head(data, begin, brace, list_decoder)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        scanned = scan_events(head, x_class)
        code = scanned.code
        head_lists = {
            PH_FLOW: [head[k] for k in np.flatnonzero(code == PH_FLOW).tolist()],
            PH_OTHER: [head[k] for k in np.flatnonzero((code == PH_M) | (code == PH_OTHER)).tolist()],
        }
        del head  # the X events are columns now: free them while the child still works
        wait_s = max(MIN_WAIT_S, WAIT_FACTOR * (time.perf_counter() - pending.t0))
        payload = _tx.receive(pending.fd, pending.shared, time.monotonic() + wait_s)
        if payload is None:
            return None
        got = _tx.unpack(payload)
        if isinstance(payload, memoryview):
            payload.release()
        payload = None
        if got is None or got[2] != plan:  # the child cut elsewhere (the file changed): one piece
            return None
        tail, blobs, _ = got
        merged = merge(scanned, tail)
        if merged is None:
            return None
        text = EventText(data, root, int(merged.code.size))
        return Parts(JoinedEvents(merged.code, head_lists, blobs, raw_ts, x_class, text), merged, header)
    finally:
        if isinstance(payload, memoryview):
            payload.release()
        if pending is not None:
            pending.close()


def _unchanged(pending: Pending, data, read_stat: os.stat_result | None) -> bool:
    """Whether the file ``pending``'s child maps is the one ``data`` was read from,
    unchanged: the ``_stamp`` taken before the child started equals the one of the
    open file after the read (``read_stat``), and the sizes agree."""
    if pending.stamp is None or read_stat is None:
        return False
    return _stamp(read_stat) == pending.stamp and len(data) == pending.stamp[2]


def _decode_head(data: bytes | bytearray, begin: int, brace: int, list_decoder) -> list:
    """The events before the cut, decoded as an array: in place when ``data`` is a
    ``bytearray`` (the byte after ``brace`` is a ``]`` while decoding), else from a copy."""
    if isinstance(data, bytearray):
        saved = data[brace + 1]
        data[brace + 1] = 0x5D  # "]"
        try:
            with memoryview(data) as view:
                return list_decoder.decode(view[begin - 1 : brace + 2])
        finally:
            data[brace + 1] = saved
    return list_decoder.decode(b"".join((memoryview(data)[begin - 1 : brace + 1], b"]")))


def _frame_tail(data, comma: int, end: int):
    """The tail as a JSON array: ``data[comma:end + 1]`` with its comma made a ``[``
    (in place in a ``bytearray``: this process's copy), else a framed copy."""
    if isinstance(data, bytearray):
        data[comma] = 0x5B  # "["
        return memoryview(data)[comma : end + 1]
    return b"".join((b"[", memoryview(data)[comma + 1 : end], b"]"))


def _reap(pid: int) -> None:
    """Wait for the child; kill it first when it is still running."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    except (ChildProcessError, ProcessLookupError):
        pass
