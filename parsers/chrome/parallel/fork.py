"""Decode a large Chrome-trace text in parts at once, in forked children.

Two ways in:

- ``start_file`` / ``decode_file``, for a plain file on disk: before anything reads
  it, one child per CPU (at most ``MAX_PROCESSES``) maps the file privately, plans
  the same cut of the events array into parts at element boundaries
  (``chrome_cut.find_cuts``; about ``CHUNK_BYTES`` each) and decodes the parts it
  claims, one at a time as it goes (``claim_pipe``: a child stopped or slowed by
  other work on its core takes fewer), turning each into columns
  (``chrome_scan.scan_events``) and freeing its structs before the next; it sends back
  (``chrome_transfer``) its columns and its non-``X`` events (msgpack, or JSON when
  ``ts`` is kept as text), which ``JoinedEvents`` decodes only when an event is asked
  for; this process joins them in the parts' order (``merge_ordered``). This process never
  reads the text into memory: it maps the file read-only for the few things read
  back from the text later (lines of warnings, ``args`` on demand), so the private
  memory of all processes stays near the size of the columns, and a file cut short
  under a map kills only a child (SIGBUS), which makes this process fall back.
- ``start`` / ``decode_parts``, for a text already in memory (gzip inflated): this
  process decodes the head while one forked child decodes the tail.

Each part is framed as its own JSON array, so a cut anywhere but between two
elements of the events array, or a text that is not one valid document, makes a part
fail to decode; then, and on any other surprise (a child dies, is late, plans
differently, the file changed, or an odd case needs the whole list), the caller gets
None and decodes the text in one piece: the result never differs.

Used only on Linux (``fork``), with two or more CPUs, for texts of at least
``MIN_BYTES``; ``GAPSCOPE_LOAD_PROCESSES=1`` turns it off, ``GAPSCOPE_LOAD_PROCESSES=N``
sets the number of children of a file.
"""

from __future__ import annotations

import mmap
import os
import re
import signal
import stat
import struct
import sys
import threading
import time
import weakref

import msgspec
import numpy as np

from gapscope.parsers.chrome import wire
from gapscope.parsers.chrome.child import MIN_WAIT_S, WAIT_S_PER_BYTE, Pending, fork_child
from gapscope.parsers.chrome.fastscan import read_part
from gapscope.parsers.chrome.lazy_args import EventText
from gapscope.parsers.chrome.parallel import transfer as _tx
from gapscope.parsers.chrome.parallel.cut import (
    BOUNDARY_WINDOW_BYTES,
    array_bounds,
    chunk_spans,
    find_cut,
    find_cuts,
)
from gapscope.parsers.chrome.parallel.joined import JoinedEvents
from gapscope.parsers.chrome.scan import PH_FLOW, PH_OTHER, EventColumns, PartLayout, merge_all, merge_ordered
from gapscope.parsers.chrome.schema import ObjectHeader
from gapscope.parsers.json.boundaries import find_events_array, next_boundary
from gapscope.parsers.json.mapped import MappedText, file_stamp
from gapscope.settings import read_settings

__all__ = [
    "MIN_BYTES",
    "HEAD_FRACTION",
    "CHUNK_BYTES",
    "MAX_PROCESSES",
    "enabled",
    "processes",
    "sampled",
    "start",
    "start_file",
    "claim_pipe",
    "progress",
    "decode_parts",
    "decode_file",
    "FileParts",
    "Parts",
    "GROWING_MIN_BYTES",
    "GROWING_MAX_BYTES",
    "GROWING_HEAD_BYTES",
    "Growing",
    "GrowingParts",
    "start_growing",
]

#: Plain files smaller than this are decoded in one piece (the fork costs tens of ms);
#: from this size children decode them from their own maps, so the text never enters
#: this process's memory (and a file cut short under a map kills only a child).
MIN_BYTES = 48 << 20
#: A text this process holds (read into memory, or the unlinked file a ``.gz`` was
#: inflated into, which nothing else can cut short) is decoded in parts only from
#: ``HELD_FACTOR`` times ``MIN_BYTES``: below that a split costs a third more CPU and
#: saves no time (``bench/load.py``, 2 CPUs: a 60 MB text 0.29 s either way, 0.38 s of
#: CPU split against 0.29 s whole; 120 MB: 0.46 s split against 0.61 s, 0.56 s of
#: CPU both; ``hta/df_index_resolver.json.gz``, 54 MB inflated: 0.45 s against 0.32 s
#: of CPU).
HELD_FACTOR = 2
#: Share of the events array's bytes this process decodes (it also merges after).
HEAD_FRACTION = 0.49
#: The child may take this much longer than this process's own part (and at least
#: ``MIN_WAIT_S``) before it is killed and the text decoded in one piece.
WAIT_FACTOR = 3.0
#: Bytes of text a child decodes at a time (its structs are freed after each part).
CHUNK_BYTES = 16 << 20
#: Most children decoding one file.
MAX_PROCESSES = 8


def enabled(size_bytes: int, held: bool = False) -> bool:
    """Whether a text of ``size_bytes`` is decoded in parts here: a plain file, or
    (``held``) a text this process holds (``HELD_FACTOR``)."""
    if size_bytes < MIN_BYTES * (HELD_FACTOR if held else 1):
        return False
    if read_settings().load_processes == 1:
        return False
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return False
    try:
        return len(os.sched_getaffinity(0)) >= 2
    except OSError:
        return False


#: Events whose phase this process decodes itself after a split (metadata ``M``, ``B``/
#: ``E``, instants, counters, async: all but ``X`` and flows). Above this share of the
#: sampled events a split costs more than it saves: those events are decoded twice.
METADATA_SHARE = 0.25
#: Windows of the text sampled for that share, and their size in bytes.
SAMPLE_WINDOWS = 32
SAMPLE_BYTES = 64 << 10
#: Fewest phases the windows must show for the share to count.
MIN_SAMPLED = 200
_PHASE = re.compile(rb'"ph"\s*:\s*"([^"\\])"')


def mostly_parent_work(read_at, size: int) -> bool:
    """Whether a text of ``size`` bytes is mostly events this process would decode
    itself after a split (``METADATA_SHARE``), from ``SAMPLE_WINDOWS`` windows spread
    over it; ``read_at(offset, n)`` gives bytes. A performance guess only: either way
    the trace is the same. ``hta/mtia_rank_0.json.gz`` (310k ``M`` of 456k events)
    loads in 0.98 s in one process, 1.38-1.66 s split."""
    phases = sampled(_PHASE, read_at, size)
    if len(phases) < MIN_SAMPLED:
        return False
    parent = sum(1 for ph in phases if ph not in (b"X", b"s", b"t", b"f"))
    return parent > METADATA_SHARE * len(phases)


def sampled(pattern: re.Pattern[bytes], read_at, size: int) -> list[bytes]:
    """The first group of every match of ``pattern`` in ``SAMPLE_WINDOWS`` windows of
    ``SAMPLE_BYTES`` spread evenly over a text of ``size`` bytes (``read_at(offset,
    n)`` gives bytes): what the guesses of a text's make-up count (``mostly_parent_work``,
    the loader's ``_mostly_device``)."""
    found: list[bytes] = []
    span = max(0, size - SAMPLE_BYTES)
    for i in range(SAMPLE_WINDOWS):
        off = span * i // max(1, SAMPLE_WINDOWS - 1)
        found += pattern.findall(read_at(off, SAMPLE_BYTES))
    return found


def processes() -> int:
    """Children that decode a file here: ``GAPSCOPE_LOAD_PROCESSES`` when it is a
    number of 2 or more, else the CPUs this process may run on, at most
    ``MAX_PROCESSES``."""
    env = read_settings().load_processes
    if env is not None and env >= 2:
        return min(env, 64)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (OSError, AttributeError):
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_PROCESSES))


class Parts:
    """What ``decode_parts`` gives: the joined events, their columns, and for the
    object form the decoded document without its events (``header``)."""

    def __init__(self, events: JoinedEvents, scanned: EventColumns, header: ObjectHeader | None) -> None:
        self.events = events
        self.scanned = scanned
        self.header = header


def start(data, root: int, raw_ts: bool, decoders: dict) -> Pending | None:
    """Plan the cut in ``data`` (already in memory) and fork the child that decodes the
    tail from its copy of ``data``, or None. ``decoders``: {raw_ts: (list decoder,
    ``X`` class)}."""
    cut = find_cut(data, root, raw_ts, HEAD_FRACTION)
    if cut is None:
        return None
    begin, brace, comma, end, _ = cut
    list_decoder, x_class = decoders[raw_ts]
    plan = (root, raw_ts, begin, brace, comma, end)
    pending = fork_child(
        lambda: _tx.part_payload(
            [(comma, _frame_tail(data, comma, end))],
            list_decoder,
            x_class,
            raw_ts,
            plan,
        ),
        4 * (end - comma) + (64 << 20),
        plan,
        None,
    )
    if pending is not None:
        pending.header = cut[4]
    return pending


#: One progress slot per child in a map shared with it: (bytes of its parts decoded,
#: bytes of its parts), two little-endian int64 (``_file_payload`` writes, ``progress`` reads).
_SLOT = struct.Struct("<qq")
#: The ``FileParts`` whose children are decoding now, for ``progress``: weak, so one
#: dropped without ``close`` (an interrupt between ``start_file`` and its use) is still
#: collected, and its ``__del__`` reaps its children.
_ACTIVE: weakref.WeakSet[FileParts] = weakref.WeakSet()
_ACTIVE_LOCK = threading.Lock()


def progress() -> float | None:
    """The share (0 to 1) of the text that the children of the split loads running
    now have decoded (bytes of their parts done over bytes of their parts), or None
    when none runs or none has planned its parts yet. Safe from any thread; for a
    progress bar (the children write their slot after each part)."""
    with _ACTIVE_LOCK:
        active = list(_ACTIVE)
    done = total = 0
    for parts in active:
        d, t = parts.progress_bytes()
        done, total = done + d, total + t
    return min(1.0, done / total) if total > 0 else None


class FileParts:
    """The children ``start_file`` forked on one file, in the order of their parts.
    ``stamp``: the file's (device, inode, size, mtime, ctime) when they started;
    ``size``: its size in bytes; ``fd``: the file, open (closed by ``close``);
    ``slots``: the children's progress slots (``_SLOT`` each, in child order)."""

    def __init__(
        self, path: str, children: list[Pending], stamp: tuple, fd: int, slots: mmap.mmap, claimed: bool = False
    ) -> None:
        self.path, self.children, self.stamp, self.size, self.fd = path, children, stamp, stamp[2], fd
        self.slots = slots
        self.claimed = claimed  # the children claim their parts (each slot's total: all parts)
        with _ACTIVE_LOCK:
            _ACTIVE.add(self)

    def agree(self, plans: list[tuple], complete: bool = False) -> bool:
        """Whether the plans the first children sent (in child order) are one cut of
        one events array: here, the same plan from every child (each plans every cut);
        ``complete``: ``plans`` are all the children's. ``GrowingParts`` checks a chain."""
        return all(p == plans[0] for p in plans) and (not complete or len(plans) == len(self.children))

    def progress_bytes(self) -> tuple[int, int]:
        """(bytes decoded, bytes to decode) of all the children, once every one has
        planned its parts (so the share only grows); (0, 0) before, and once closed.
        Children that claim their parts each write the bytes of all parts as their
        total (``claimed``)."""
        done = total = 0
        try:
            for j in range(len(self.children)):
                d, t = _SLOT.unpack_from(self.slots, _SLOT.size * j)
                if t <= 0:
                    return 0, 0
                done, total = done + max(0, min(d, t)), (max(total, t) if self.claimed else total + t)
        except (ValueError, struct.error):  # closed meanwhile
            return 0, 0
        return min(done, total), total

    def pause(self) -> None:
        """Stop every child still running (SIGSTOP), until ``resume``; a child stopped
        still dies with this process (``PR_SET_PDEATHSIG``'s SIGKILL) and with
        ``close``."""
        self._signal(signal.SIGSTOP)

    def resume(self, children: int | None = None) -> None:
        """Continue every child ``pause`` stopped (SIGCONT; idempotent, from any
        thread), or the first ``children`` of them: children that claim their parts
        (``claimed``) then take the parts the others would have."""
        self._signal(signal.SIGCONT, children)

    def _signal(self, sig: int, children: int | None = None) -> None:
        for c in self.children[:children]:
            if not c.done:
                try:
                    os.kill(c.pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass

    def close(self) -> None:
        """Kill and reap every child still running, close the file (idempotent)."""
        with _ACTIVE_LOCK:
            _ACTIVE.discard(self)
        for c in self.children:
            c.close()
        try:
            self.slots.close()
        except (BufferError, ValueError):
            pass
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1

    def __del__(self) -> None:
        if getattr(self, "children", None) is not None:
            self.close()


def start_file(
    path: str,
    root_of,
    raw_ts_of,
    decoders: dict,
    limit_bytes: int | None = None,
    fd: int | None = None,
) -> FileParts | None:
    """Fork the children that decode the plain file ``path`` (of at least
    ``MIN_BYTES``, at most ``limit_bytes``) in parts, before anything reads it; None
    when not applicable (small or too large, not a regular file, gzip, not starting
    as JSON, one CPU, cannot fork). This process opens the file only; a child's map
    cannot hurt it (a file cut short kills only the child, by SIGBUS). ``root_of(data)``:
    offset of the first ``{``/``[`` or -1; ``raw_ts_of(data, root)``: whether ``ts`` is
    kept as text. ``fd``: an open file to use instead of opening ``path`` (an inflated
    ``.gz`` in an unlinked temporary file, of at least ``HELD_FACTOR`` times
    ``MIN_BYTES``; not closed here). Never raises for a bad
    file (the loader reports those)."""
    nproc = processes()
    own = fd is None
    try:
        if fd is None:
            before = os.stat(path)  # never open a FIFO or a device (opening one has effects)
            if not stat.S_ISREG(before.st_mode) or not enabled(before.st_size) or nproc < 2:
                return None
            if limit_bytes is not None and before.st_size > limit_bytes:
                return None
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        else:
            before = os.fstat(fd)
            if not enabled(before.st_size, held=True) or nproc < 2:
                return None
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
        if mostly_parent_work(lambda off, n: os.pread(fd, n, off), st.st_size):
            return None
        stamp = file_stamp(st)
        n_chunks = nproc * max(1, -(-st.st_size // (nproc * CHUNK_BYTES)))
        claims = claim_pipe(n_chunks)
        try:
            return _fork_children(
                nproc,
                lambda j, slots: _file_payload(
                    fd, stamp, j, nproc, n_chunks, root_of, raw_ts_of, decoders, slots, claims
                ),
                # each child's answer: its columns are about 0.3 of its text's bytes (5M
                # events: 426 MB for 1.49 GB), so this holds even one that claimed most
                # of the file; a larger answer goes through its pipe (``wire.send``)
                2 * st.st_size // nproc + (64 << 20),
                stamp,
                lambda children, slots: FileParts(path, children, stamp, os.dup(fd), slots, claims is not None),
            )
        finally:
            if claims is not None:
                os.close(claims)  # the children hold their own
    finally:
        if own:
            os.close(fd)


#: Bytes of one part's place in ``claim_pipe``.
_CLAIM = struct.Struct("<I")


def claim_pipe(n_parts: int) -> int | None:
    """The read end (non-blocking) of a pipe holding the places 0 .. ``n_parts`` - 1,
    in order, its write end closed: each read of ``_CLAIM.size`` bytes by a child
    takes the next place (a pipe read of a few bytes is atomic, and every place is in
    before the children are forked, so an empty pipe is the end), so the children of
    ``start_file`` share the parts as each goes, with no lock a stopped or killed
    child could hold. None when the places do not fit in the pipe at once (then each
    child decodes its run)."""
    try:
        r, w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    except (OSError, AttributeError):
        return None
    data = b"".join(_CLAIM.pack(k) for k in range(n_parts))
    try:
        written = os.write(w, data)
    except OSError:
        written = -1
    finally:
        os.close(w)
    if written != len(data):
        os.close(r)
        return None
    return r  # non-blocking: empty is the end, even with a write end another thread's fork kept open


def _claimed(claims: int, n_parts: int):
    """The places a child takes from ``claim_pipe``, one at a time as asked for, until
    the pipe is empty (a read that would wait, or its end) or a place is beyond the
    ``n_parts`` the child planned (the places rise: so are all the rest)."""
    while True:
        try:
            got = os.read(claims, _CLAIM.size)
        except OSError:
            return
        if len(got) != _CLAIM.size:
            return
        (k,) = _CLAIM.unpack(got)
        if k >= n_parts:
            return
        yield k


def _fork_children(nproc: int, work_of, shared_bytes: int, stamp: tuple | None, make):
    """``make(children, slots)`` of ``nproc`` forked children, child ``j`` running
    ``work_of(j, slots)`` (its payload) with ``shared_bytes`` of shared memory for its
    answer and ``slots`` their progress map (``_SLOT`` each); None when the map or a
    fork cannot be had. Whatever fails or is interrupted on the way leaves no child."""
    try:
        slots = mmap.mmap(-1, _SLOT.size * nproc)
    except (OSError, ValueError):
        return None
    children: list[Pending] = []
    made = None
    try:
        for j in range(nproc):
            child = fork_child(lambda j=j: work_of(j, slots), shared_bytes, None, stamp)
            if child is None:
                return None
            children.append(child)
        made = make(children, slots)
        return made
    finally:
        if made is None:
            for c in children:
                c.close()
            slots.close()


def _write_slot(slots: mmap.mmap, j: int, done: int, total: int) -> None:
    """Child ``j``'s progress into its slot; a slot that cannot be written (a map too
    small) only leaves the share unknown: progress never fails a load."""
    try:
        _SLOT.pack_into(slots, _SLOT.size * j, done, total)
    except (struct.error, ValueError, TypeError):
        pass


def _file_payload(
    fd: int,
    stamp: tuple,
    j: int,
    nproc: int,
    n_chunks: int,
    root_of,
    raw_ts_of,
    decoders: dict,
    slots: mmap.mmap,
    claims: int | None = None,
) -> list[bytes | memoryview]:
    """In child ``j`` of ``nproc`` of ``start_file``: plan ``n_chunks`` parts on a
    private map of the file and decode the parts it takes from ``claims``
    (``claim_pipe``; their places sent along), or, without one, the ``j``-th run of
    them, writing its progress slot (``_SLOT`` at ``j`` in ``slots``: bytes decoded,
    bytes of its run or of all parts) after each part; a message of None when the
    file is not what ``stamp`` says (before or after) or is not one to split."""
    if file_stamp(os.fstat(fd)) != stamp:
        return wire.pack(None)
    view = mmap.mmap(fd, 0, access=mmap.ACCESS_COPY)
    if view[:2] == b"\x1f\x8b":
        return wire.pack(None)
    root = root_of(view)
    if root < 0 or view[root : root + 1] not in (b"{", b"["):
        return wire.pack(None)
    raw_ts = raw_ts_of(view, root)
    planned = find_cuts(view, root, raw_ts, n_chunks)
    if planned is None:
        return wire.pack(None)
    begin, end, cuts, header = planned
    spans = chunk_spans(begin, end, cuts)
    list_decoder, x_class = decoders[raw_ts]
    if claims is None:
        places = range(len(spans) * j // nproc, len(spans) * (j + 1) // nproc)
        total = sum(spans[k][1] - spans[k][0] + 1 for k in places)
    else:
        places = _claimed(claims, len(spans))
        total = sum(hi - lo + 1 for lo, hi in spans)
    taken: list[int] | None = None if claims is None else []
    _write_slot(slots, j, 0, total)

    def texts():  # each part framed in this child's private copy of its pages
        done = 0
        for k in places:
            lo, hi = spans[k]
            view[lo] = 0x5B  # "["
            view[hi] = 0x5D  # "]"
            if taken is not None:
                taken.append(k)
            yield lo, memoryview(view)[lo : hi + 1]
            done += hi - lo + 1  # resumed: that part is decoded and scanned
            _write_slot(slots, j, done, total)

    head = None
    if j == 0 and header is not None:
        head = {f: bytes(getattr(header, f)) for f in header.__struct_fields__ if f != "traceEvents"}
    payload = _tx.part_payload(
        texts(), list_decoder, x_class, raw_ts, (root, raw_ts, begin, end, cuts), head, part_ids=taken
    )
    return payload if file_stamp(os.fstat(fd)) == stamp else wire.pack(None)


def decode_file(parts: FileParts, decoders: dict) -> tuple[Parts, MappedText] | None:
    """The result of the children of ``start_file`` joined, with a read-only map of
    the file (for what is read back from the text later), or None (then read the
    file and decode it in one piece). Always closes ``parts``' children (their
    shared maps go once the columns are copied out of them). None when a
    child fails, is late (``MIN_WAIT_S`` plus ``WAIT_S_PER_BYTE`` per byte), the
    children planned differently, or the file is not the one they started on."""
    text: MappedText | None = None
    try:
        try:
            if file_stamp(os.fstat(parts.fd)) != parts.stamp or parts.size == 0:
                return None
            text = MappedText(parts.fd, 0, access=mmap.ACCESS_READ)  # keeps its own copy of the fd
        except (OSError, ValueError):
            return None
        deadline = time.monotonic() + MIN_WAIT_S + WAIT_S_PER_BYTE * parts.size
        sent: list[_tx.Sent] = []
        for child in parts.children:
            payload = wire.receive(child.fd, child.shared, deadline)
            if payload is None:
                return None
            got = _tx.unpack(payload)  # its arrays view the child's shared map
            if got is None or not parts.agree([s.plan for s in sent] + [got.plan]):
                return None
            sent.append(got)
            del got, payload
        plans = [s.plan for s in sent]
        if not plans or not parts.agree(plans, complete=True):
            return None
        header = next((s.header for s in sent if s.header is not None), None)
        joined = _joined(sent, len(plans[0][4]) + 1 if parts.claimed else None)  # copies out of the maps
        sent.clear()
        if joined is None:
            return None
        merged, blobs, at_all = joined
        root, raw_ts = plans[0][0], plans[0][1]
        if text[root : root + 1] == b"{" and header is None:
            return None
        head_obj = None
        if header is not None:
            head_obj = ObjectHeader(traceEvents=msgspec.Raw(b"[]"), **{k: msgspec.Raw(v) for k, v in header.items()})
        _, x_class = decoders[raw_ts]
        events = JoinedEvents(
            merged.code,
            {PH_FLOW: [], PH_OTHER: []},
            blobs,
            raw_ts,
            x_class,
            EventText(text, root, int(merged.code.size), _starts_of(at_all, int(merged.code.size))),
        )
        result = Parts(events, merged, head_obj), text
        text = None
        return result
    finally:
        parts.close()
        if text is not None:
            try:
                text.close()
            except BufferError:
                pass


#: A ``.json.gz`` expected to inflate to this much or more is decoded while it is
#: inflated (``start_growing``); a smaller one is inflated first (its inflating is a
#: few tens of ms, less than the children's start-up).
GROWING_MIN_BYTES = 128 << 20
#: ... and one expected to inflate to more than this is inflated first, then split
#: (``bench/load.py --gzip-only``, 2 shared cores, load average 4-6, medians of 3
#: alternating rounds: a 1M-event trace, 298 MB of text, loaded in 2.48 s decoded
#: while inflating against 2.82 s inflated first; a 5M-event one, 1.49 GB, in 11.44 s
#: against 8.74 s, and 29.9 s against 15.3 s at load average 8: the children waiting
#: on the text lose more than the overlap gains once the text is large).
GROWING_MAX_BYTES = 768 << 20
#: Bytes of a growing text written before its children are forked: what they all read
#: the same way first (the events array's start, the ``ts`` sample, the make-up sample).
GROWING_HEAD_BYTES = 4 << 20
#: Seconds between a waiting child's looks at how far the text has grown.
GROWING_POLL_S = 0.002
#: A growing text that ends up this much larger than its children planned for (a gzip
#: size field that wrapped, several members) is decoded again from the whole file:
#: their last part would hold the rest in one piece.
GROWING_OVERRUN = 1.25
#: Bytes read at a time while looking for an element boundary in a growing text.
_BOUNDARY_READ_BYTES = 64 << 10


def growing_target(begin: int, planned_bytes: int, i: int, n_chunks: int) -> int:
    """Where the ``i``-th cut of a growing text is looked for: ``i / n_chunks`` of the
    way from the events array's start (``begin``) to the text's planned end."""
    return begin + (max(begin + 1, planned_bytes - 1) - begin) * i // n_chunks


class Growing:
    """How far this process has written a text that forked children decode while it
    grows (``start_growing``): a map shared with them holding two native int64, the
    bytes written and the final size (-1 while writing, -2 when given up). Each is
    stored and loaded in one aligned 8-byte access (a ``memoryview`` cast): ``struct``
    writes a field a byte at a time, and a child once read a final size of 0 from a
    half-written -1. The writer writes the text with ``os.write`` first, then says
    so here (``wrote``)."""

    def __init__(self) -> None:
        self.map = mmap.mmap(-1, mmap.PAGESIZE)
        self._fields = memoryview(self.map).cast("q")
        self._fields[0], self._fields[1] = 0, -1

    def wrote(self, written_bytes: int) -> None:
        """The text now has ``written_bytes`` bytes (only ever more)."""
        self._fields[0] = written_bytes

    def finish(self, size_bytes: int) -> None:
        """The text is complete, ``size_bytes`` long."""
        self._fields[0] = size_bytes
        self._fields[1] = size_bytes

    def abandon(self) -> None:
        """The text will not be completed: the children give up."""
        self._fields[1] = -2

    def state(self) -> tuple[int, int]:
        """(bytes written, final size or -1 while writing, -2 when given up); the
        final size is read first, so a complete text is never seen short."""
        final = self._fields[1]
        return self._fields[0], final

    def wait_for(self, need_bytes: int) -> tuple[int, bool] | None:
        """(bytes written, complete) once ``need_bytes`` are written or the text is
        complete; None when it was given up. In a child: the parent kills it, or it
        dies with the parent (``PR_SET_PDEATHSIG``), if the text never comes."""
        while True:
            written, final = self.state()
            if final == -2:
                return None
            if final >= 0:
                return final, True
            if written >= need_bytes:
                return written, False
            time.sleep(GROWING_POLL_S)


class GrowingParts(FileParts):
    """The children ``start_growing`` forked on a text still being written. Each child
    plans only its own parts' cuts, so the plans it sends are checked as a chain
    (``agree``): the same start of the events array, the cut that ends one child's run
    the one that starts the next's, and every cut before the array's end, which the
    last child finds once the text is complete. ``finish`` when the text is complete,
    before ``decode_file``."""

    def __init__(
        self,
        path: str,
        children: list[Pending],
        fd: int,
        slots: mmap.mmap,
        growing: Growing,
        planned_bytes: int,
        plan: tuple[int, bool, int, int],
    ) -> None:
        super().__init__(path, children, file_stamp(os.fstat(fd)), fd, slots)
        self.growing = growing
        self.planned_bytes = planned_bytes
        self.plan = plan  # (root, raw_ts, events array start, parts), as the children read the head

    def overrun(self, written_bytes: int) -> bool:
        """Whether a text ``written_bytes`` long is too far past what the children
        planned for (``GROWING_OVERRUN``): their last part would hold the rest."""
        return written_bytes > GROWING_OVERRUN * self.planned_bytes + CHUNK_BYTES

    def finish(self, size_bytes: int) -> bool:
        """Tell the children the text is complete at ``size_bytes``; False (and the
        children killed) when their plan cannot hold: the text is too far from the
        size they planned for (``GROWING_OVERRUN``, either way), or the events array
        ends before their last cut is looked for (large keys after it, as Chrome's
        ``systemTraceEvents``; found here from the tail, in milliseconds, instead of
        by the last child after all the decoding). Then decode the whole file with
        ``start_file``."""
        root, raw_ts, begin, n_chunks = self.plan
        fits = not self.overrun(size_bytes) and size_bytes * GROWING_OVERRUN + CHUNK_BYTES >= self.planned_bytes
        if fits:
            try:
                with mmap.mmap(self.fd, size_bytes, access=mmap.ACCESS_READ) as whole:
                    bounds = array_bounds(whole, root, raw_ts)
            except (OSError, ValueError):
                bounds = None
            last = growing_target(begin, self.planned_bytes, n_chunks - 1, n_chunks)
            fits = bounds is not None and bounds[0] == begin and (n_chunks == 1 or bounds[1] > last)
        if not fits:
            self.close()
            return False
        self.growing.finish(size_bytes)
        self.stamp, self.size = file_stamp(os.fstat(self.fd)), size_bytes
        return True

    def agree(self, plans: list[tuple], complete: bool = False) -> bool:
        """Plans are (root, raw_ts, events array start, the run's first cut, its last
        cut, the array's end): a cut is the (``}``, ``,``) offsets of a boundary
        between two elements, None at the array's start (first child) and end (last
        child, which alone gives the end; the others give None)."""
        for j, plan in enumerate(plans):
            if plan[:3] != plans[0][:3] or (plan[3] is None) != (j == 0):
                return False
            if j > 0 and plan[3] != plans[j - 1][4]:
                return False
            last = j == len(self.children) - 1
            if (plan[4] is None) != last or (plan[5] is None) == last:
                return False
        if not complete:
            return True
        if len(plans) != len(self.children):
            return False
        end = plans[-1][5]
        return all(p[4] is None or p[4][1] < end for p in plans)

    def close(self) -> None:
        """Give the text up for the children (they stop waiting), then ``FileParts.close``."""
        growing = getattr(self, "growing", None)
        if growing is not None and growing.state()[1] == -1:
            growing.abandon()
        super().close()


def growing_runs(n_chunks: int, nproc: int, first_share: float | None = None) -> list[tuple[int, int]]:
    """Each child's run of the ``n_chunks`` parts of a growing text, as (first part,
    part after its last): equal runs, or, with ``first_share``, about that share of
    the parts for child 0 and equal runs of the rest for the others (at least one part
    each; ``n_chunks >= nproc``). A child can decode a part only once the writer has
    passed it: while the writer holds a core, child 0 runs beside it alone, the later
    children start later and share the cores with it, so equal runs leave the last
    child most of its run to decode after the text is complete. A single child takes
    every part; raises ``ValueError`` for a ``first_share`` outside [0, 1] (NaN too)."""
    if first_share is not None and not 0.0 <= first_share <= 1.0:
        raise ValueError(f"first_share {first_share!r} is not a share in [0, 1]")
    if first_share is None or nproc == 1:
        return [(n_chunks * j // nproc, n_chunks * (j + 1) // nproc) for j in range(nproc)]
    first = min(n_chunks - (nproc - 1), max(1, round(n_chunks * first_share)))
    rest = n_chunks - first
    return [(0, first)] + [
        (first + rest * j // (nproc - 1), first + rest * (j + 1) // (nproc - 1)) for j in range(nproc - 1)
    ]


def start_growing(
    fd: int,
    growing: Growing,
    planned_bytes: int,
    root_of,
    raw_ts_of,
    decoders: dict,
    path: str,
    first_share: float | None = None,
    extra_children: int = 0,
) -> GrowingParts | None:
    """Fork the children that decode the text this process is writing to ``fd`` (an
    unlinked temporary file: a ``.gz`` being inflated) while it grows: at least
    ``GROWING_HEAD_BYTES`` are written (``growing`` says how far), and it is expected
    to be ``planned_bytes`` long (a gzip size field; ``GrowingParts.finish`` refuses a
    text far longer). None when not applicable (expected below ``GROWING_MIN_BYTES`` or above ``GROWING_MAX_BYTES``,
    one CPU, not JSON, no events array in the head, a head of mostly events this
    process decodes itself, cannot fork): then write the text out and ``start_file``
    on it. ``root_of``, ``raw_ts_of``, ``decoders``: as ``start_file``'s, but
    ``raw_ts_of(head, root)`` is given the head only, so it must read no more than
    ``GROWING_HEAD_BYTES - 4096`` bytes after a root in the first 4096 (the loader's
    reads 256 KiB) to decide as it would on the whole text. Each child
    ``j`` of ``n`` takes the ``j``-th run of ``n_chunks`` parts, cut at the first
    element boundary after equal shares of ``planned_bytes``, and decodes each part
    once the text has reached its end (``_growing_payload``); ``first_share``: child 0
    takes that share of the parts (``growing_runs``), where the writer needs a core of
    its own while it writes; ``extra_children``: that many more children than
    ``processes()`` (the runs after the first are shorter, so the work left when the
    text is complete is spread finer over the cores), not when the user set their
    number (``GAPSCOPE_LOAD_PROCESSES``)."""
    nproc = processes()
    if nproc >= 2 and read_settings().load_processes is None:
        nproc += extra_children
    if (
        not GROWING_MIN_BYTES <= planned_bytes <= GROWING_MAX_BYTES
        or not enabled(planned_bytes, held=True)
        or nproc < 2
    ):
        return None
    written, final = growing.state()
    if final != -1 or written < GROWING_HEAD_BYTES:
        return None
    head = os.pread(fd, GROWING_HEAD_BYTES, 0)
    root = root_of(head)
    if not 0 <= root < 4096 or head[root : root + 1] not in (b"{", b"["):
        return None
    begin = find_events_array(head, root)
    if begin < 0:
        return None
    if mostly_parent_work(lambda off, n: head[off : off + n], len(head)):
        return None
    n_chunks = nproc * max(1, -(-planned_bytes // (nproc * CHUNK_BYTES)))
    plan = (root, raw_ts_of(head, root), begin, n_chunks)
    runs = growing_runs(n_chunks, nproc, first_share)
    longest = max(hi - lo for lo, hi in runs)
    return _fork_children(
        nproc,
        lambda j, slots: _growing_payload(
            fd, growing, j, runs[j], n_chunks, planned_bytes, root_of, raw_ts_of, decoders, slots
        ),
        2 * planned_bytes * longest // n_chunks + (64 << 20),
        None,
        lambda children, slots: GrowingParts(path, children, os.dup(fd), slots, growing, planned_bytes, plan),
    )


def _growing_payload(
    fd: int,
    growing: Growing,
    j: int,
    run: tuple[int, int],
    n_chunks: int,
    planned_bytes: int,
    root_of,
    raw_ts_of,
    decoders: dict,
    slots: mmap.mmap,
) -> list[bytes | memoryview]:
    """In child ``j`` of ``start_growing``: decode the parts of its ``run`` (``growing_runs``)
    of the ``n_chunks``, each once the text has grown past
    it, and send them with the plan ``GrowingParts.agree`` checks; a message of None
    when a boundary is missing, the text is given up or is not one to split."""
    with MappedText(fd, GROWING_HEAD_BYTES, access=mmap.ACCESS_READ) as head:  # the page cache's, not a copy
        root = root_of(head)
        raw_ts = raw_ts_of(head, root)
        begin = find_events_array(head, root)
    if begin < 0:
        return wire.pack(None)
    lo_i, hi_i = run

    def cut(i: int) -> tuple[int, int] | None:
        """The first element boundary at or after share ``i`` of the planned text
        (within ``BOUNDARY_WINDOW_BYTES``), read as the text comes: the leftmost
        match in what is there is the leftmost in the whole window, since a match
        still growing at the text's end holds no ``}`` after its first byte."""
        target = growing_target(begin, planned_bytes, i, n_chunks)
        stop = target + BOUNDARY_WINDOW_BYTES
        need = target + _BOUNDARY_READ_BYTES
        while True:
            got = growing.wait_for(min(need, stop))
            if got is None:
                return None
            avail, complete = got
            upto = min(avail, stop)
            chunk = os.pread(fd, upto - target, target) if upto > target else b""
            edge = next_boundary(chunk, 0, len(chunk))
            if edge is not None:
                return target + edge[0], target + edge[1]
            if complete or upto >= stop:
                return None
            need = min(stop, upto + _BOUNDARY_READ_BYTES)

    first = cut(lo_i) if lo_i > 0 else None
    if lo_i > 0 and first is None:
        return wire.pack(None)
    found: dict = {"parts": 0, "last": None, "end": None, "header": None}
    maps: list[mmap.mmap] = []  # the parts' maps a decoded value still views, until the message is sent

    def frame(lo: int, hi: int):
        """The part ``[lo, hi]`` as a JSON array in a private map of its pages, the map
        closed once the part is read (kept when a decoded value still views it)."""
        off = lo - lo % mmap.ALLOCATIONGRANULARITY
        view = mmap.mmap(fd, hi + 1 - off, access=mmap.ACCESS_COPY, offset=off)
        view[lo - off] = 0x5B  # "["
        view[hi - off] = 0x5D  # "]"
        part = memoryview(view)[lo - off : hi + 1 - off]
        yield lo, part
        try:
            part.release()
            view.close()
        except BufferError:
            maps.append(view)

    def texts():  # each part once it is written
        lo = begin - 1 if first is None else first[1]
        planned = max(1, growing_target(begin, planned_bytes, hi_i, n_chunks) - lo)
        done = 0
        _write_slot(slots, j, 0, planned)
        for i in range(lo_i, hi_i):
            nxt = None
            if i + 1 < n_chunks:
                nxt = cut(i + 1)
                if nxt is None or nxt[0] <= lo:
                    return
                yield from frame(lo, nxt[0] + 1)
                done += nxt[0] + 2 - lo
            else:  # the last part ends at the array's end: the text must be complete
                got = growing.wait_for(1 << 62)
                if got is None or got[0] <= lo:
                    return
                with mmap.mmap(fd, got[0], access=mmap.ACCESS_READ) as whole:
                    bounds = array_bounds(whole, root, raw_ts)
                    if bounds is None or bounds[0] != begin or bounds[1] <= lo:
                        return
                    found["end"], found["header"] = bounds[1], bounds[2]
                    # a text longer than planned is cut further here, where only this
                    # child reads it: its parts stay about as long as the others
                    step = max(CHUNK_BYTES, (planned_bytes - begin) // n_chunks)
                    los, his = [lo], []
                    while bounds[1] - los[-1] > step + step // 2:
                        edge = next_boundary(
                            whole, los[-1] + step, min(bounds[1], los[-1] + step + BOUNDARY_WINDOW_BYTES)
                        )
                        if edge is None:
                            break
                        his.append(edge[0] + 1)
                        los.append(edge[1])
                his.append(bounds[1])
                for a, b in zip(los, his):
                    yield from frame(a, b)
                    done += b + 1 - a
                    _write_slot(slots, j, done, max(done, planned))
            found["parts"] += 1
            _write_slot(slots, j, done, max(done, planned))
            if nxt is not None:
                lo, found["last"] = nxt[1], nxt
        _write_slot(slots, j, done, done)  # all its parts: complete, whatever was planned

    list_decoder, x_class = decoders[raw_ts]
    message = _tx.part_message(texts(), list_decoder, x_class, raw_ts)
    if message is None or found["parts"] != hi_i - lo_i:
        return wire.pack(None)
    header = found["header"]
    last = found["last"] if hi_i < n_chunks else None
    message["plan"] = (root, raw_ts, begin, first, last, found["end"])
    if header is not None:
        message["header"] = {f: bytes(getattr(header, f)) for f in header.__struct_fields__ if f != "traceEvents"}
    return wire.pack(message)


def decode_parts(data, root: int, raw_ts: bool, decoders: dict) -> Parts | None:
    """Decode ``data`` (a Chrome trace already in memory; ``root``: offset of its
    first ``{``/``[``) in two parts, or None (then decode it in one piece).

    ``decoders``: {raw_ts: (``msgspec.json.Decoder`` of a list of events, the ``X``
    event class it yields)}; ``raw_ts``: ``ts`` kept as JSON text (the tail's
    non-``X`` events then travel as JSON, which keeps that text). ``Parts.header``:
    for the object form, the document's other keys (``chrome_schema.ObjectHeader``).

    Why the result equals a one-piece decode: the head (``[`` + text up to the cut +
    ``]``) and the tail (``[`` + text after the cut's comma up to the array's end +
    ``]``) each decode as an array, and the document with the whole events array
    replaced by a marker string decodes with that marker as its top-level
    ``traceEvents``; JSON being context-free, the original text is then that document
    with the marker replaced by an array holding the head's events and the tail's.
    The same holds for any number of parts (``decode_file``).
    """
    payload = None
    pending = None
    try:
        if mostly_parent_work(lambda off, n: bytes(memoryview(data)[off : off + n]), len(data)):
            return None
        pending = start(data, root, raw_ts, decoders)
        if pending is None:
            return None
        list_decoder, x_class = decoders[raw_ts]
        plan, header = pending.plan, pending.header
        assert plan is not None
        begin, brace = plan[2], plan[3]
        try:
            scanned, head_flows, head_others, head_at = _read_head(data, begin, brace, list_decoder, x_class, raw_ts)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return None
        head_lists = {PH_FLOW: head_flows, PH_OTHER: head_others}
        wait_s = max(MIN_WAIT_S, WAIT_FACTOR * (time.perf_counter() - pending.t0))
        payload = wire.receive(pending.fd, pending.shared, time.monotonic() + wait_s)
        if payload is None:
            return None
        got = _tx.unpack(payload)
        if isinstance(payload, memoryview):
            payload.release()
        payload = None
        if got is None or got.plan != plan:
            return None
        tail, blobs, tail_at = got.columns, got.blobs, got.starts
        merged = merge_all([scanned, tail])
        if merged is None:
            return None
        # the head was read from ``begin - 1`` (its ``[``); the tail's offsets are the file's
        at = None if head_at is None or tail_at is None else np.concatenate((head_at + (begin - 1), tail_at))
        text = EventText(data, root, int(merged.code.size), _starts_of(at, int(merged.code.size)))
        events = JoinedEvents(merged.code, head_lists, blobs, raw_ts, x_class, text)
        return Parts(events, merged, header)
    finally:
        if isinstance(payload, memoryview):
            payload.release()
        if pending is not None:
            pending.close()


def _joined(
    sent: list[_tx.Sent], n_parts: int | None
) -> tuple[EventColumns, dict[int, list[bytes]], np.ndarray | None] | None:
    """The columns, blobs ({``PH_FLOW``/``PH_OTHER``: one per part}) and starts (or
    None) of the children's messages ``sent`` (in child order) joined in the parts'
    order, copied out of the children's maps: ``n_parts`` parts the children claimed
    (``merge_ordered``; a child that claimed none adds nothing), or, for None, one run
    per child in child order (``merge_all``). None when they do not join (then decode
    in one piece)."""
    if n_parts is None:
        if len(sent) < 2:
            return None
        merged = merge_all([s.columns for s in sent])
        if merged is None:
            return None
        blobs = {g: [b for s in sent for b in s.blobs[g]] for g in (PH_FLOW, PH_OTHER)}
        at = [s.starts for s in sent if s.starts is not None]
        return merged, blobs, (np.concatenate(at) if len(at) == len(sent) else None)
    some: list[tuple[_tx.Sent, PartLayout]] = []
    for s in sent:
        if s.layout is None:
            return None
        if s.layout.ids.size == 0:
            continue
        if any(len(s.blobs[g]) != s.layout.ids.size for g in (PH_FLOW, PH_OTHER)):
            return None
        some.append((s, s.layout))
    got = merge_ordered([s.columns for s, _ in some], [lay for _, lay in some])
    if got is None or len(got[1]) != n_parts:
        return None
    merged, order = got
    blobs = {g: [some[c][0].blobs[g][i] for c, i in order] for g in (PH_FLOW, PH_OTHER)}
    starts = [s.starts for s, _ in some if s.starts is not None]
    if len(starts) != len(some):
        return merged, blobs, None
    pieces = []
    for c, i in order:
        ends = some[c][1].ends
        pieces.append(starts[c][(int(ends[i - 1, 0]) if i else 0) : int(ends[i, 0])])
    return merged, blobs, np.concatenate(pieces)


def _starts_of(at: np.ndarray | None, n: int) -> np.ndarray | None:
    """``at``, the offsets of the ``n`` events' ``{`` the children's scanners found
    (``transfer.part_message``), when there is one per event and they rise; else None
    (``EventText`` finds them by a scan of the text when an event's args are first read)."""
    if at is None or at.shape != (n,):
        return None
    if n > 1 and not bool((at[1:] > at[:-1]).all()):
        return None
    return at


def _read_head(data: bytes | bytearray, begin: int, brace: int, list_decoder, x_class: type, raw_ts: bool):
    """(columns, flow events, other events, starts: offsets from ``begin - 1`` or None)
    of the events before the cut, read as an array (``fastscan.read_part``): in place
    when ``data`` is a ``bytearray`` (the byte after ``brace`` is a ``]`` while
    reading), else from a copy. Raises what ``list_decoder.decode`` raises."""
    if isinstance(data, bytearray):
        saved = data[brace + 1]
        data[brace + 1] = 0x5D  # "]"
        try:
            with memoryview(data) as view:
                return read_part(view[begin - 1 : brace + 2], list_decoder, x_class, raw_ts)
        finally:
            data[brace + 1] = saved
    return read_part(b"".join((memoryview(data)[begin - 1 : brace + 1], b"]")), list_decoder, x_class, raw_ts)


def _frame_tail(data, comma: int, end: int):
    """The tail as a JSON array: ``data[comma:end + 1]`` with its comma made a ``[``
    (in place in a ``bytearray``: this process's copy), else a framed copy."""
    if isinstance(data, bytearray):
        data[comma] = 0x5B  # "["
        return memoryview(data)[comma : end + 1]
    return b"".join((b"[", memoryview(data)[comma + 1 : end], b"]"))
