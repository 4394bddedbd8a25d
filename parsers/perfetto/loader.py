"""Perfetto TrackEvent protobuf (``.pftrace``) → ``Trace``, through the Chrome loader.

The ``TracePacket`` stream (``protos/perfetto/trace/trace_packet.proto``) is written as
Chrome Trace Event Format events, one per line, and loaded by
``gapscope.parsers.chrome.decode.load_chrome``. Two decoders give the same text: the C
transcoder ``_pfscan`` (built with the package; the common subset: plain slices,
instants, interned names, scalar annotations, flows; ``_pfscan.c`` lists it), with the track descriptors decoded here; and,
for a file it does not read whole (or ``GAPSCOPE_PFSCAN=0``, or no C compiler at
install), the ``perfetto`` package's generated classes (``perfetto_trace_pb2``, parsed
by ``protobuf``'s upb backend) and ``_Decoder`` below. The C transcoder writes a large
file's text (``MAP_MIN_BYTES``) to a mapped temporary file, which the Chrome loader's
forked children decode while it grows (``_Growing``, as a ``.json.gz`` while it is
inflated), so transcoding and decoding overlap. Kinds from
the categories, lanes, ``correlation`` links, ``ac2g`` flows, checks and warnings are
the Chrome loader's, so a ``.pftrace`` and its JSON twin give one ``Trace``.

What is read (the TrackEvent model, ``docs/instrumentation/track-events`` of Perfetto):

- tracks (``TrackDescriptor``): a thread track is the lane (pid, tid) of its
  ``ThreadDescriptor``; a process track's own events go to (pid, ``0``); a custom
  track (GPU streams and devices, as PyTorch's exporter writes them) is a lane under
  its nearest ancestor: pid = that process's pid, or a custom ancestor's name's
  trailing integer (``GPU 0`` → ``0``; the name itself when it has none), tid = the
  track's own name's trailing integer (``stream 7`` → ``7``; else the name). Names
  become ``process_name``/``thread_name`` metadata, ``legacy_sort_index`` the sort
  indices. An event without a track uuid goes to the track its sequence's
  ``TrackEventDefaults`` name.
- slices: ``TYPE_SLICE_BEGIN``/``TYPE_SLICE_END`` (an end closes the innermost open
  slice of its track, in packet order) become ``X`` events; legacy complete events
  (``legacy_event.phase`` ``X`` with ``duration_us``) too; ``TYPE_INSTANT`` → ``i``;
  ``TYPE_COUNTER`` → ``C`` named after the counter track.
- interned data (event names, categories, debug-annotation names, interned string
  values), scoped to a ``trusted_packet_sequence_id`` and cleared by
  ``SEQ_INCREMENTAL_STATE_CLEARED`` (or ``incremental_state_cleared``).
- debug annotations → ``args`` (scalars, ``legacy_json_value`` as JSON, nested
  ``dict_entries``/``array_values``); flows: the first ``flow_ids`` occurrence of an id
  → an ``ac2g`` ``s`` event at the slice's start, later ones ``t``,
  ``terminating_flow_ids`` → ``f`` (binding point ``e``).
- time: ``TracePacket.timestamp`` in ns (exact), on the trace clock; a packet on
  another clock (``timestamp_clock_id``) is moved by the offset the first
  ``ClockSnapshot`` holding both clocks gives.

What the model cannot hold (other packet kinds, unclosed or unmatched slices,
``TYPE_STATE``, thread-time fields, log messages, source locations, call stacks,
incremental clocks, ...) is counted and named in one ``TraceWarning``.
Damage (a cut packet, a bad varint, a wrong wire type) raises ``TraceFormatError``
naming the packet and its byte offset; an interned id with no interned data on its
sequence is a warning per kind (the event keeps the text ``<iid N>``).
"""

from __future__ import annotations

import collections
import dataclasses
import gc
import importlib.util
import mmap
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from gapscope.parsers.cache.settings import unlinked_temporary_file
from gapscope.parsers.errors import TraceFormatError
from gapscope.parsers.json.mapped import MappedText
from gapscope.parsers.json.scan import Text
from gapscope.parsers.model import Trace, TraceWarning
from gapscope.settings import read_settings

if TYPE_CHECKING:
    from gapscope.parsers.chrome.parallel.fork import GrowingParts

try:
    from gapscope.parsers.perfetto import _pfscan
except ImportError:  # built without a C compiler: the generated classes decode every packet
    _pfscan = None  # type: ignore[assignment]

__all__ = ["load_perfetto", "looks_like_perfetto", "EXTRA_HINT"]

#: What to install when the decoder is missing.
EXTRA_HINT = "install gapscope's perfetto extra: pip install 'gapscope[perfetto]'"
_TRAILING_INT = re.compile(r"(\d+)\s*$")
#: ``TracePacket.sequence_flags`` bit: the sequence's interned data starts afresh here.
SEQ_INCREMENTAL_STATE_CLEARED = 1
#: Perfetto's built-in clocks (``BuiltinClock``); the trace clock is BOOTTIME (6) by default.
BOOTTIME = 6
_TYPE_BEGIN, _TYPE_END, _TYPE_INSTANT, _TYPE_COUNTER = 1, 2, 3, 4
#: Packet kinds that only describe the session (nothing for a timeline): not named as lost.
#: Debug annotation values that are Chrome arg values as they are.
_SCALARS = frozenset(("int_value", "uint_value", "double_value", "bool_value", "string_value", "pointer_value"))
_QUIET = frozenset(("trace_config", "trace_stats", "trace_uuid", "synchronization_marker", "clock_snapshot"))


def _extra_installed() -> bool:
    """Whether the ``perfetto`` extra (``perfetto_trace_pb2`` and ``protobuf``) can be
    imported, without importing it (the C transcoder's path never needs it)."""
    try:
        return all(
            importlib.util.find_spec(m) is not None
            for m in ("google.protobuf", "perfetto.protos.perfetto.trace.perfetto_trace_pb2")
        )
    except (ImportError, ValueError):
        return False


def _pb2():
    try:
        from perfetto.protos.perfetto.trace import perfetto_trace_pb2  # type: ignore[import-untyped]
    except ImportError:
        return None
    return perfetto_trace_pb2


def looks_like_perfetto(head: bytes) -> bool:
    """Whether ``head`` (the first bytes of a file, gzip undone) starts like a Perfetto
    ``Trace``: field 1 (``packet``) as a length-delimited record whose first bytes are
    valid TracePacket fields (as far as ``head`` goes: a packet may be longer), with a
    control byte no JSON or text timeline holds."""
    if len(head) < 3 or head[0] != 0x0A:
        return False
    if not any(b < 9 or 13 < b < 32 for b in head[:4096]):
        return False
    at, size = _varint(head, 1)
    if at < 0 or size == 0:
        return False
    end = min(at + size, len(head))
    fields = 0
    while at < end:
        start = at
        at, tag = _varint(head, at)
        if at < 0:  # cut by the end of ``head``, or broken
            return fields > 0 and start + 10 > len(head)
        if tag >> 3 == 0 or (tag & 7) not in (0, 1, 2, 5):
            return False
        at = _skip(head, at, tag & 7)
        fields += 1
        if at < 0:
            return start + 20 > len(head)
    return True


def _varint(buf, at: int) -> tuple[int, int]:
    """(offset after, value) of the varint at ``at``; (-1, 0) when cut or over 10 bytes."""
    value = shift = 0
    for i in range(at, min(at + 10, len(buf))):
        b = buf[i]
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return i + 1, value
        shift += 7
    return -1, 0


def _skip(buf, at: int, wire: int) -> int:
    """Offset after a field's value of wire type ``wire`` at ``at`` (-1: cut or bad)."""
    if wire == 0:
        return _varint(buf, at)[0]
    if wire == 1:
        return at + 8
    if wire == 5:
        return at + 4
    if wire == 2:
        at, n = _varint(buf, at)
        return -1 if at < 0 else at + n
    return -1


class _Fields:
    """Fields of one message read from the wire (``_track_descriptor``): values by
    name, and ``HasField`` as the generated classes answer it for the fields read."""

    def __init__(self, **defaults: Any) -> None:
        self.__dict__.update(defaults)
        self.present: set[str] = set()

    def HasField(self, name: str) -> bool:
        return name in self.present

    def __getattr__(self, name: str) -> Any:  # the fields set in ``__init__``/``_read_fields`` only
        raise AttributeError(name)


#: (field number, wire type) → (name, kind) of the ``TrackDescriptor`` fields
#: ``_Decoder`` reads (``protos/perfetto/trace/track_event/track_descriptor.proto``);
#: kind: a varint as ``int32``/``int64``/``uint64``, ``str``, or a message.
_TRACK_FIELDS: dict[tuple[int, int], tuple[str, str]] = {
    (1, 0): ("uuid", "uint64"),
    (5, 0): ("parent_uuid", "uint64"),
    (2, 2): ("name", "str"),
    (10, 2): ("static_name", "str"),
    (13, 2): ("atrace_name", "str"),
    (3, 2): ("process", "msg"),
    (4, 2): ("thread", "msg"),
    (8, 2): ("counter", "msg"),
    (12, 0): ("sibling_order_rank", "int32"),
}
_INNER_FIELDS: dict[str, dict[tuple[int, int], tuple[str, str]]] = {
    "process": {(1, 0): ("pid", "int32"), (6, 2): ("process_name", "str"), (3, 0): ("legacy_sort_index", "int32")},
    "thread": {
        (1, 0): ("pid", "int32"),
        (2, 0): ("tid", "int64"),
        (5, 2): ("thread_name", "str"),
        (3, 0): ("legacy_sort_index", "int32"),
    },
    "counter": {},
}
#: ``TrackDescriptor``'s oneof ``static_or_dynamic_name``: setting one clears the others.
_NAME_ONEOF = frozenset(("name", "static_name", "atrace_name"))


def _track_descriptor(data, at: int, end: int) -> _Fields | None:
    """The ``TrackDescriptor`` of the packet ``data[at:end]``, with the fields
    ``_Decoder`` reads as the generated classes read them (the last value of a field
    wins, a message seen twice is merged, a field of another wire type is skipped);
    None when the packet holds no or several descriptors, or anything is odd (broken
    framing, text that is not UTF-8): the generated classes then decode it. Spares
    the C transcoder's path the import of ``perfetto_trace_pb2`` (30 ms of CPU);
    ``tests/test_perfetto.py`` holds it equal to them on generated descriptors."""
    body = None
    while at < end:
        after, tag = _varint(data, at)
        if after < 0:
            return None
        if tag == (60 << 3 | 2):
            start, size = _varint(data, after)
            if body is not None or start < 0 or start + size > end:
                return None
            body = (start, start + size)
        at = _skip(data, after, tag & 7)
        if at < 0 or at > end:
            return None
    if body is None:
        return None
    d = _Fields(
        uuid=0,
        parent_uuid=0,
        name="",
        static_name="",
        atrace_name="",
        sibling_order_rank=0,
        process=_Fields(pid=0, process_name="", legacy_sort_index=0),
        thread=_Fields(pid=0, tid=0, thread_name="", legacy_sort_index=0),
        counter=_Fields(),
    )
    return d if _read_fields(d, data, body[0], body[1], _TRACK_FIELDS) else None


def _read_fields(msg: _Fields, data, at: int, end: int, fields: dict) -> bool:
    """``data[at:end]``'s fields named in ``fields`` into ``msg`` (messages into its
    sub-messages, by ``_INNER_FIELDS``); False on anything ``_track_descriptor`` leaves
    to the generated classes."""
    while at < end:
        after, tag = _varint(data, at)
        if after < 0 or tag >> 3 == 0:
            return False
        got = fields.get((tag >> 3, tag & 7))
        if got is None:
            at = _skip(data, after, tag & 7)
            if at < 0 or at > end:
                return False
            continue
        name, kind = got
        value: int | str
        at, value = _varint(data, after)
        if at < 0:
            return False
        value &= (1 << 64) - 1  # a 10-byte varint's bits past 64 are dropped, as protobuf does
        if kind == "int32":
            value = (value & 0xFFFFFFFF) - ((value & 0x80000000) << 1)
        elif kind == "int64":
            value = value - ((value & (1 << 63)) << 1)
        elif kind in ("str", "msg"):
            start, at = at, at + value
            if at > end:
                return False
            if kind == "msg":
                if not _read_fields(getattr(msg, name), data, start, at, _INNER_FIELDS[name]):
                    return False
            else:
                try:
                    value = bytes(data[start:at]).decode("utf-8")
                except UnicodeDecodeError:
                    return False
                if name in _NAME_ONEOF:  # the oneof's other members are cleared
                    msg.present -= _NAME_ONEOF
                    for other in _NAME_ONEOF:
                        setattr(msg, other, "")
        if kind != "msg":
            setattr(msg, name, value)
        msg.present.add(name)
    return True


def _damage(data, path: str) -> TraceFormatError:
    """The error for bytes the protobuf decoder refused: the first packet whose framing
    or fields are broken, by number and byte offset."""
    at = k = 0
    n = len(data)
    what = "cannot be decoded"
    while at < n:
        start = at
        after, tag = _varint(data, at)
        if after < 0:
            return _error(path, k, start, "a varint longer than 10 bytes or cut off (the record's tag)")
        field, wire = tag >> 3, tag & 7
        if wire not in (0, 1, 2, 5):
            return _error(path, k, start, f"field {field} has wire type {wire}, which no Trace field has")
        if field == 1 and wire == 2:
            body, size = _varint(data, after)
            if body < 0:
                return _error(path, k, start, "the packet's length is a broken varint")
            if body + size > n:
                return _error(path, k, start, f"the packet is cut off: {size:,} bytes announced, {n - body:,} left")
            bad = _first_bad_field(data, body, body + size)
            if bad is not None:
                return _error(path, k, bad[0], bad[1])
            at = body + size
            k += 1
            continue
        at = _skip(data, after, wire)
        if at < 0 or at > n:
            return _error(path, k, start, f"field {field} is cut off")
    return TraceFormatError(path, f"not a Perfetto trace: the protobuf data {what}", hint=_HINT)


def _first_bad_field(data, at: int, end: int, depth: int = 0) -> tuple[int, str] | None:
    """(offset, message) of the first field in ``data[at:end]`` that breaks the wire
    format, looking into nested messages (a length-delimited field that parses as
    fields) up to a few levels; None when all is well formed."""
    while at < end:
        start = at
        at, tag = _varint(data, at)
        if at < 0 or at > end:
            return start, "a varint longer than 10 bytes or cut off (a field's tag)"
        field, wire = tag >> 3, tag & 7
        if field == 0 or wire not in (0, 1, 2, 5):
            return start, f"field {field} has wire type {wire} (not a protobuf field)"
        if wire == 0:
            at, _ = _varint(data, at)
            if at < 0 or at > end:
                return start, f"field {field}: a varint longer than 10 bytes or cut off"
            continue
        if wire == 2:
            body, size = _varint(data, at)
            if body < 0 or body + size > end:
                return start, f"field {field}: its length runs past the end of the enclosing message"
            if depth < 4 and _maybe_message(data, body, body + size):
                inner = _first_bad_field(data, body, body + size, depth + 1)
                if inner is not None:
                    return inner
            at = body + size
            continue
        at += 8 if wire == 1 else 4
        if at > end:
            return start, f"field {field} is cut off"
    return None


def _maybe_message(data, at: int, end: int) -> bool:
    """Whether ``data[at:end]`` reads as text (a string field) or not: only the latter
    is looked into for damage."""
    chunk = bytes(data[at : min(end, at + 64)])
    return any(b < 9 or 13 < b < 32 or b > 126 for b in chunk)


_HINT = "is the file complete? a .pftrace is written by Perfetto, PyTorch's or Kineto's exporter"


def _error(path: str, packet: int, offset: int, message: str) -> TraceFormatError:
    return TraceFormatError(path, f"packet {packet:,} (byte {offset:,}): {message}", hint=_HINT)


def _ns_text(v: int) -> msgspec.Raw:
    """Integer ns as exact decimal µs text (``1234567`` → ``1234.567``)."""
    sign = "-" if v < 0 else ""
    q, r = divmod(abs(v), 1000)
    return msgspec.Raw(f"{sign}{q}.{r:03d}".encode())


def _name_number(name: str) -> str:
    m = _TRAILING_INT.search(name)
    return m.group(1) if m else name


@dataclasses.dataclass
class _Sequence:
    """The incremental state of one ``trusted_packet_sequence_id``."""

    names: dict[int, str] = dataclasses.field(default_factory=dict)
    cats: dict[int, str] = dataclasses.field(default_factory=dict)
    arg_names: dict[int, str] = dataclasses.field(default_factory=dict)
    strings: dict[int, str] = dataclasses.field(default_factory=dict)
    default_track: int | None = None
    clock: int | None = None


class _Decoder:
    """One pass over the packets; ``events`` the Chrome events, ``packet_of`` each
    event's packet number, ``lost`` what the model cannot hold (name → count)."""

    def __init__(self, pb2) -> None:
        self.pb2 = pb2
        self.events: list[dict[str, Any]] = []
        self.packet_of: list[int] = []
        self.lost: collections.Counter[str] = collections.Counter()
        self.missing: collections.Counter[str] = collections.Counter()
        self.first_missing: dict[str, int] = {}
        self.seqs: dict[int, _Sequence] = {}
        self.tracks: dict[int, Any] = {}  # uuid → TrackDescriptor
        self.open: dict[int, list[int]] = {}  # track uuid → indices of open slices (events)
        self.lane_cache: dict[int, tuple[Any, Any]] = {}
        self.flow_seen: set[int] = set()
        self.snapshots: list[dict[int, int]] = []
        self.trace_clock = BOOTTIME
        self.unplaced: list[tuple[int, int]] = []  # (event index, track uuid) of tracks not yet described

    def run(self, packets) -> None:
        for k, pkt in enumerate(packets):
            seq_id = pkt.trusted_packet_sequence_id
            seq = self.seqs.get(seq_id)
            if seq is None or pkt.sequence_flags & SEQ_INCREMENTAL_STATE_CLEARED or pkt.incremental_state_cleared:
                keep = seq
                seq = self.seqs[seq_id] = _Sequence()
                if keep is not None and not pkt.HasField("trace_packet_defaults"):
                    seq.default_track, seq.clock = keep.default_track, keep.clock
            if pkt.HasField("interned_data"):
                self._intern(seq, pkt.interned_data)
            if pkt.HasField("trace_packet_defaults"):
                d = pkt.trace_packet_defaults
                seq.clock = d.timestamp_clock_id or None
                if d.track_event_defaults.HasField("track_uuid"):
                    seq.default_track = d.track_event_defaults.track_uuid
            which = pkt.WhichOneof("data")
            if which == "track_event":
                self._event(k, pkt, seq)
            elif which == "track_descriptor":
                self.tracks[pkt.track_descriptor.uuid] = pkt.track_descriptor
            elif which == "clock_snapshot":
                snap = pkt.clock_snapshot
                self.snapshots.append({c.clock_id: c.timestamp for c in snap.clocks})
                if snap.primary_trace_clock:
                    self.trace_clock = snap.primary_trace_clock
            elif which is not None and which not in _QUIET:
                self.lost[f"{which} packets"] += 1
        for stack in self.open.values():
            if stack:
                self.lost["slices begun and never ended"] += len(stack)
            for i in stack:
                self.events[i] = {}  # dropped below

    def _intern(self, seq: _Sequence, data) -> None:
        for e in data.event_names:
            seq.names[e.iid] = e.name
        for e in data.event_categories:
            seq.cats[e.iid] = e.name
        for e in data.debug_annotation_names:
            seq.arg_names[e.iid] = e.name
        for e in data.debug_annotation_string_values:
            seq.strings[e.iid] = e.str.decode("utf-8", "replace")

    def _look(self, table: dict[int, str], iid: int, what: str, k: int) -> str:
        got = table.get(iid)
        if got is None:
            self.missing[what] += 1
            self.first_missing.setdefault(what, k)
            return f"<iid {iid}>"
        return got

    def _time(self, pkt, seq: _Sequence) -> int:
        ts = pkt.timestamp
        clock = pkt.timestamp_clock_id or seq.clock
        if clock and clock != self.trace_clock:
            for snap in self.snapshots:
                if clock in snap and self.trace_clock in snap:
                    return ts + snap[self.trace_clock] - snap[clock]
            self.lost[
                f"timestamps on clock {clock} no clock snapshot relates to the trace clock (kept as they are)"
            ] += 1
        return ts

    def _event(self, k: int, pkt, seq: _Sequence) -> None:
        te = pkt.track_event
        track = te.track_uuid if te.HasField("track_uuid") else seq.default_track
        if track is None:
            self.lost["track events on no track (no track_uuid, no default)"] += 1
            return
        typ = te.type
        if typ == _TYPE_END:
            stack = self.open.get(track)
            if not stack:
                self.lost["slice ends with no open slice on their track"] += 1
                return
            i = stack.pop()
            begin = self.events[i]
            begin["dur"] = _ns_text(self._time(pkt, seq) - begin.pop("_ns"))
            return
        ts = self._time(pkt, seq)
        ev: dict[str, Any] = {}
        if typ == _TYPE_BEGIN:
            ev["ph"] = "X"
            ev["_ns"] = ts
        elif typ == _TYPE_INSTANT:
            ev["ph"] = "i"
            ev["s"] = "t"
        elif typ == _TYPE_COUNTER:
            self._counter(k, te, track, ts)
            return
        elif typ == 0 and te.HasField("legacy_event"):
            legacy = te.legacy_event
            if legacy.phase == ord("X") and legacy.HasField("duration_us"):
                ev["ph"] = "X"
                ev["dur"] = _ns_text(legacy.duration_us * 1000)
            elif legacy.phase in (ord("i"), ord("I"), ord("n")):
                ev["ph"] = "i"
                ev["s"] = "t"
            else:
                self.lost[f"legacy events of phase {chr(legacy.phase)!r}"] += 1
                return
        else:
            self.lost[f"track events of type {typ}"] += 1
            return
        iid = te.name_iid
        if iid:
            name = seq.names.get(iid)
            ev["name"] = name if name is not None else self._look(seq.names, iid, "event names", k)
        else:
            ev["name"] = te.name
        cats = te.category_iids
        if cats:
            got = [seq.cats.get(c) for c in cats]
            ev["cat"] = ",".join(
                [g if g is not None else self._look(seq.cats, c, "categories", k) for g, c in zip(got, cats)]
            )
        elif te.categories:
            ev["cat"] = ",".join(te.categories)
        ev["ts"] = _ns_text(ts)
        if te.debug_annotations:
            ev["args"] = self._args(te.debug_annotations, seq, k)
        self._rare_fields(te)
        self._place(ev, track)
        i = len(self.events)
        self.events.append(ev)
        self.packet_of.append(k)
        if typ == _TYPE_BEGIN:
            self.open.setdefault(track, []).append(i)
        self._flows(k, te, ev)

    def _flows(self, k: int, te, ev: dict) -> None:
        ids = list(te.flow_ids) + list(te.flow_ids_old)
        ends = list(te.terminating_flow_ids) + list(te.terminating_flow_ids_old)
        for fid in ids:
            ph = "t" if fid in self.flow_seen else "s"
            self.flow_seen.add(fid)
            self._flow_event(k, ph, fid, ev)
        for fid in ends:
            self._flow_event(k, "f", fid, ev)

    def _flow_event(self, k: int, ph: str, fid: int, ev: dict) -> None:
        f: dict[str, Any] = {"ph": ph, "id": fid, "cat": "ac2g", "name": "ac2g", "ts": ev["ts"]}
        if ph == "f":
            f["bp"] = "e"
        f["pid"], f["tid"] = ev.get("pid"), ev.get("tid")
        if "_track" in ev:
            f["_track"] = ev["_track"]
            self.unplaced.append((len(self.events), ev["_track"]))
        self.events.append(f)
        self.packet_of.append(k)

    def _counter(self, k: int, te, track: int, ts: int) -> None:
        d = self.tracks.get(track)
        name = d.name if d is not None and d.name else f"counter {track}"
        value: float | int = te.double_counter_value if te.HasField("double_counter_value") else te.counter_value
        ev: dict[str, Any] = {"ph": "C", "name": name, "ts": _ns_text(ts), "args": {name: value}}
        self._place(ev, d.parent_uuid if d is not None and d.parent_uuid else track)
        self.events.append(ev)
        self.packet_of.append(k)

    def _args(self, annotations, seq: _Sequence, k: int) -> dict[str, Any]:
        """The debug annotations as Chrome ``args`` (the common scalar case inline)."""
        names = seq.arg_names
        args: dict[str, Any] = {}
        for a in annotations:
            iid = a.name_iid
            key = names.get(iid) if iid else a.name
            if key is None:
                key = self._look(names, iid, "debug annotation names", k)
            which = a.WhichOneof("value")
            args[key] = getattr(a, which) if which in _SCALARS else self._value(a, seq, k)
        return args

    def _rare_fields(self, te) -> None:
        """Count the TrackEvent fields the model has no place for."""
        for oneof in ("timestamp", "source_location_field", "callstack_field"):
            which = te.WhichOneof(oneof)
            if which is not None:
                self.lost[f"track event {which} fields"] += 1
        if te.HasField("log_message"):
            self.lost["track event log messages"] += 1

    def _arg_name(self, a, seq: _Sequence, k: int) -> str:
        if a.HasField("name"):
            return a.name
        return self._look(seq.arg_names, a.name_iid, "debug annotation names", k)

    def _value(self, a, seq: _Sequence, k: int) -> Any:
        which = a.WhichOneof("value")
        if which == "legacy_json_value":
            return (
                msgspec.Raw(a.legacy_json_value.encode()) if _valid_json(a.legacy_json_value) else a.legacy_json_value
            )
        if which == "string_value_iid":
            return self._look(seq.strings, a.string_value_iid, "interned string values", k)
        if which == "nested_value":
            self.lost["nested debug annotation values (NestedValue)"] += 1
            return None
        if which in ("proto_value",):
            self.lost["debug annotations holding a protobuf message"] += 1
            return None
        if which is not None:
            return getattr(a, which)
        if a.dict_entries:
            return {self._arg_name(e, seq, k): self._value(e, seq, k) for e in a.dict_entries}
        if a.array_values:
            return [self._value(e, seq, k) for e in a.array_values]
        return None

    def _place(self, ev: dict, track: int) -> None:
        lane = self.lane_cache.get(track)
        if lane is None:
            if track not in self.tracks:
                ev["_track"] = track
                self.unplaced.append((len(self.events), track))
                return
            lane = self.lane_cache[track] = self._lane(track)
        ev["pid"], ev["tid"] = lane

    def _lane(self, uuid: int) -> tuple[Any, Any]:
        d = self.tracks[uuid]
        if d.HasField("thread"):
            return d.thread.pid, d.thread.tid
        if d.HasField("process"):
            return d.process.pid, 0
        parent = self.tracks.get(d.parent_uuid) if d.parent_uuid else None
        if parent is None:  # a top-level custom track: a group of its own
            return _number_or_text(_name_number(d.name if d.HasField("name") else str(uuid))), 0
        return self._group(parent), _number_or_text(_name_number(d.name if d.HasField("name") else str(uuid)))

    def _group(self, d) -> Any:
        seen = 0
        while d is not None and seen < 64:
            if d.HasField("process"):
                return d.process.pid
            if d.HasField("thread"):
                return d.thread.pid
            if not d.parent_uuid or d.parent_uuid not in self.tracks:
                return _number_or_text(_name_number(d.name if d.HasField("name") else str(d.uuid)))
            d = self.tracks[d.parent_uuid]
            seen += 1
        return 0

    def finish(self) -> None:
        """Lanes for events whose track was described after them; metadata events
        for the tracks' names and sort indices."""
        for i, track in self.unplaced:
            ev = self.events[i]
            if not ev:
                continue
            ev.pop("_track", None)
            if track in self.tracks:
                ev["pid"], ev["tid"] = self.lane_cache.get(track) or self._lane(track)
            else:
                self.lost["events on tracks no TrackDescriptor describes"] += 1
                self.events[i] = {}
        for uuid, d in self.tracks.items():
            self._names(uuid, d)

    def _names(self, uuid: int, d) -> None:
        meta = self._meta
        if d.HasField("process"):
            p = d.process
            if p.process_name:
                meta("process_name", p.pid, 0, {"name": p.process_name})
            if p.HasField("legacy_sort_index"):
                meta("process_sort_index", p.pid, 0, {"sort_index": p.legacy_sort_index})
        elif d.HasField("thread"):
            t = d.thread
            if t.thread_name:
                meta("thread_name", t.pid, t.tid, {"name": t.thread_name})
            if t.HasField("legacy_sort_index"):
                meta("thread_sort_index", t.pid, t.tid, {"sort_index": t.legacy_sort_index})
        elif d.HasField("counter"):
            return
        else:
            pid, tid = self._lane(uuid)
            child = bool(d.parent_uuid and d.parent_uuid in self.tracks)
            if d.name:
                meta("thread_name" if child else "process_name", pid, tid, {"name": d.name})
            if d.HasField("sibling_order_rank"):
                rank = {"sort_index": d.sibling_order_rank}
                meta("thread_sort_index" if child else "process_sort_index", pid, tid, rank)

    def _meta(self, name: str, pid: Any, tid: Any, args: dict) -> None:
        self.events.append({"ph": "M", "name": name, "pid": pid, "tid": tid, "args": args})
        self.packet_of.append(-1)


def _number_or_text(text: str) -> Any:
    return int(text) if text.isdigit() else text


def _valid_json(text: str) -> bool:
    try:
        msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return False
    return True


def _decode_error() -> type[Exception]:
    """``protobuf``'s error for bytes that are not the message (the perfetto extra)."""
    from google.protobuf.message import DecodeError  # type: ignore[import-untyped]

    return DecodeError


def _packets(data, path: str, pb2):
    trace = pb2.Trace()
    try:
        trace.ParseFromString(data)
    except _decode_error():
        raise _damage(data, path) from None
    return trace.packet


def load_perfetto(read: Callable[[], bytes | bytearray], path: str) -> Trace:
    """Load a Perfetto protobuf trace; ``read()`` gives the file's bytes (gzip undone),
    dropped once decoded (before the Chrome loader runs).

    Returns the ``Trace`` the Chrome loader builds from the decoded events
    (``source.format`` ``"perfetto"``; warnings name packet numbers, not lines; no
    ``src_line``). Raises ``TraceFormatError`` for damaged protobuf data (the packet
    and byte offset), a trace without track events, or when the ``perfetto`` extra is
    not installed.
    """
    if not _extra_installed():
        raise _no_extra(path)
    was = gc.isenabled()
    gc.disable()  # a million event dicts: the collector's passes would cost more than the decode
    try:
        text, dec, packet_of, parts = _chrome_text(read(), path)
    finally:
        if was:
            gc.enable()
    # the Chrome loader is imported here, not with this module, which sniffing any file imports
    from gapscope.parsers.chrome.decode import load_chrome, load_chrome_file

    if not isinstance(text, int):
        return _as_perfetto(load_chrome(text, path), dec, packet_of)
    try:  # decoded in parts by forked children that read the file, as a large JSON file is
        got = load_chrome_file(path, None, fd=text, parts=parts)
        if got is None and parts is not None:  # decoded while growing failed: as if it had not
            got = load_chrome_file(path, None, fd=text)
        trace = got[0] if got is not None else load_chrome(MappedText(text, 0, access=mmap.ACCESS_READ), path)
    finally:
        if parts is not None:
            parts.close()
        os.close(text)
    return _as_perfetto(trace, dec, packet_of)


#: Share of the ``.pftrace`` transcoded before the decoders are forked on the text
#: (``_Growing``): the text's size is planned from it. A corpus trace's text per byte
#: at 1/8 of it is 0.87x to 1.10x its text per byte in all (``tracelens/sglang_decode``,
#: ``tracelens/h100/Qwen_*``); the bench's generated trace, 1.006x.
PLAN_AFTER_SHARE = 0.125
#: The plan is this share of that estimate: a plan too long by more than one of its
#: parts (1/18 of a 260 MB text) is refused, one too short by up to a quarter is not
#: (``GROWING_OVERRUN``): 0.82x to 1.03x of the text for the traces above.
PLAN_SHARE_OF_ESTIMATE = 0.94
#: Share of the text's parts the first of the decoders takes (``chrome_parallel.growing_runs``),
#: and how many decoders more than cores (``EXTRA_CHILDREN``): the transcoder holds a
#: core until the text is complete, and writes it about twice as fast as a decoder reads
#: it, so the first decoder, alone beside it at first, can take more, and the later
#: runs, started later, are better cut finer. With two equal halves the second decoder
#: still had 0.28 s of its half to decode after the transcoder was done (1M events, 2
#: cores). ``bench/load_pftrace.py`` (1M events, load average 1.1-1.4, 5 alternating
#: rounds each, median of the rounds' pftrace/json wall ratios): two equal halves
#: 1.58x-1.68x; 0.6 and two decoders 1.50x-1.55x; 0.6 and three 1.51x; 0.5 and three
#: 1.33x, 1.39x, 1.48x. The first decoder's peak memory grows with its share (0.7 and
#: two decoders: 1.05x the JSON load's largest decoder; 0.5 and three: 0.91x).
FIRST_CHILD_SHARE = 0.5
EXTRA_CHILDREN = 1


class _Growing:
    """The Chrome loader's decoders forked while the transcoder writes the text
    (``on_flush`` of ``_pfscan.transcode``; ``chrome.decode.GrowingDecoders``, as for a
    ``.json.gz`` being inflated), so transcoding (here) and decoding (there) overlap.
    Their plan: once ``PLAN_AFTER_SHARE`` of the ``.pftrace`` (``input_bytes``) is
    read, the text the whole file would give at the rate so far, times
    ``PLAN_SHARE_OF_ESTIMATE``."""

    def __init__(self, fd: int, path: str, input_bytes: int) -> None:
        # the Chrome loader is imported here, not with this module, which sniffing any file imports
        from gapscope.parsers.chrome.decode import GrowingDecoders

        self.fd, self.input_bytes = fd, input_bytes
        self.decoders = GrowingDecoders(path, FIRST_CHILD_SHARE, EXTRA_CHILDREN)

    def __call__(self, final_bytes: int, consumed_bytes: int) -> None:
        def plan() -> int | None:
            if consumed_bytes < PLAN_AFTER_SHARE * self.input_bytes:
                return None
            return int(final_bytes * self.input_bytes / max(1, consumed_bytes) * PLAN_SHARE_OF_ESTIMATE)

        self.decoders.wrote(self.fd, final_bytes, plan)

    def finish(self, size_bytes: int) -> GrowingParts | None:
        """``GrowingDecoders.finish``."""
        return self.decoders.finish(size_bytes)

    def close(self) -> None:
        """Kill the children still running (a transcode that failed or fell back)."""
        self.decoders.close()


#: Files from this size on are transcoded into an unlinked temporary file that the
#: Chrome loader maps (its pages the kernel's, as for a large ``.json.gz``), not memory.
MAP_MIN_BYTES = 4 << 20


def _no_extra(path: str) -> TraceFormatError:
    return TraceFormatError(path, "a Perfetto protobuf trace, and the decoder is not installed", hint=EXTRA_HINT)


def _fast_text(data, path: str) -> tuple[Text | int, _Decoder, np.ndarray, GrowingParts | None] | None:
    """``_chrome_text`` by the C transcoder (``_pfscan.c``): the track descriptors
    decoded here, every other packet there; the text written to a mapped temporary file
    for a file of ``MAP_MIN_BYTES`` or more (then its descriptor, which the caller
    closes, takes the text's place; in memory when there is no room for a file), while
    the Chrome loader's children already decode it (``_Growing``; the children, told
    it is complete, come last, for ``load_chrome_file``; None where there are none).
    None when the transcoder is not built, is turned off (``GAPSCOPE_PFSCAN=0``) or
    meets anything outside the subset it reads."""
    if _pfscan is None or not read_settings().pfscan:
        return None
    spans = _pfscan.descriptor_spans(data)
    if spans is None:
        return None
    dec = _Decoder(None)
    for start, end in spans:
        d = _track_descriptor(data, start, end)
        if d is None:
            return None  # damaged or odd: the generated classes decode it (and name the damage)
        dec.tracks[d.uuid] = d
    enc = msgspec.json.Encoder()
    tracks = {}
    for i, uuid in enumerate(dec.tracks):
        pid, tid = dec._lane(uuid)
        tracks[uuid] = (i, enc.encode({"pid": pid, "tid": tid})[1:-1])
    fd = _temporary_file(len(data)) if len(data) >= MAP_MIN_BYTES else None
    growing = None if fd is None else _Growing(fd, path, len(data))
    try:
        if fd is None:
            got = _pfscan.transcode(data, tracks, len(tracks))
        else:
            got = _pfscan.transcode(data, tracks, len(tracks), fd, growing, TEXT_FLUSH_BYTES)
        if got is None:
            return None
        text, packets = got
        dec.finish()  # the tracks' names and sort indices, as metadata events
        meta = [enc.encode(e) for e in dec.events]
        dec.events = []
        packet_of = np.concatenate([np.frombuffer(packets, dtype=np.int64), np.full(len(meta), -1, np.int64)])
        if packet_of.size == len(meta):
            return None  # no track event: the decoder below says so
        tail = b",\n".join(meta) + b"\n]}\n"
        if fd is None:
            if not meta:
                del text[-2:]  # the last event's ",\n"
            text += tail
            return text, dec, packet_of, None
        end = os.lseek(fd, 0, os.SEEK_END)
        if not meta:
            os.pwrite(fd, b" \n", end - 2)  # the last event's ",\n" made blank
        view = memoryview(tail)
        while view:
            view = view[os.write(fd, view) :]
        parts = growing.finish(os.lseek(fd, 0, os.SEEK_END)) if growing is not None else None
        kept, fd = fd, None
        return kept, dec, packet_of, parts
    finally:
        if growing is not None:
            growing.close()
        if fd is not None:
            os.close(fd)


#: Bytes of text the transcoder writes to its file at a time; the decoders forked on
#: it (``_Growing``) see it grow by as much.
TEXT_FLUSH_BYTES = 8 << 20


#: The transcoded text is about 3.1x the ``.pftrace`` (1M events: 81 MB → 247 MB).
TEXT_PER_PFTRACE_BYTE = 4


def _available_bytes() -> int:
    """Free physical memory (``SC_AVPHYS_PAGES``), 0 where it cannot be read."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return 0


def _temporary_file(pftrace_bytes: int) -> int | None:
    """A file for the transcoded text of a ``.pftrace`` of ``pftrace_bytes``, open for
    writing: an anonymous in-memory file (``memfd_create``, Linux) while the text fits
    in a quarter of the free memory (1M events: 1.79x the JSON load's wall time against
    2.24x through a file on disk, peak memory 0.99x against 1.06x; ``bench/load_pftrace.py``
    at load 2), else an unlinked temporary file in gapscope's cache directory
    (``cache.settings.unlinked_temporary_file``), whose pages the kernel may evict; None where neither can be made."""
    fits = pftrace_bytes * TEXT_PER_PFTRACE_BYTE * 4 <= _available_bytes()
    if fits and hasattr(os, "memfd_create"):
        try:
            return os.memfd_create("gapscope-pftrace-text", os.MFD_CLOEXEC)
        except OSError:
            pass
    return unlinked_temporary_file()


def _chrome_text(data, path: str) -> tuple[Text | int, _Decoder, np.ndarray, GrowingParts | None]:
    """The decoded packets as a Chrome trace text (one event a line, from line 2), the
    decoder (what was lost), each event's packet number (-1: track metadata), and the
    children already decoding the text (``_fast_text``; None here)."""
    fast = _fast_text(data, path)
    if fast is not None:
        return fast
    pb2 = _pb2()
    if pb2 is None:
        raise _no_extra(path)
    packets = _packets(data, path, pb2)
    dec = _Decoder(pb2)
    dec.run(packets)
    del packets
    dec.finish()
    keep = [(e, k) for e, k in zip(dec.events, dec.packet_of) if e]
    if not any(e["ph"] != "M" for e, _ in keep):
        raise TraceFormatError(
            path,
            f"a Perfetto trace with no track events gapscope can show ({len(dec.events):,} decoded)",
            hint="gapscope reads TrackEvent slices (PyTorch/Kineto exports), not system traces (ftrace, ...)",
        )
    enc = msgspec.json.Encoder()
    text = b'{"traceEvents":[\n' + b",\n".join([enc.encode(e) for e, _ in keep]) + b"\n]}\n"
    packet_of = np.array([k for _, k in keep], dtype=np.int64)
    dec.events = []
    return text, dec, packet_of, None


def _as_perfetto(trace: Trace, dec: _Decoder, packet_of: np.ndarray) -> Trace:
    """``trace`` with its source named ``perfetto``, the Chrome loader's warning lines
    turned into packet numbers, and the one warning on what was not kept."""
    warnings = []
    for w in trace.warnings:
        k = int(packet_of[w.line - 2]) if w.line is not None and 2 <= w.line < len(packet_of) + 2 else -1
        where = f"packet {k:,}: " if k >= 0 else ""
        warnings.append(TraceWarning(None, w.field, where + w.message))
    for what, n in dec.missing.items():
        warnings.append(
            TraceWarning(
                None,
                "interned_data",
                f"{n:,} {what} refer to interned ids their sequence never defined (first at packet "
                f"{dec.first_missing[what]:,}; shown as <iid N>): a sequence without its interned data",
            )
        )
    if dec.lost:
        parts = ", ".join(f"{n:,} {what}" for what, n in sorted(dec.lost.items(), key=lambda t: -t[1]))
        warnings.append(TraceWarning(None, None, f"not kept (the trace model has no place for them): {parts}"))
    trace.source.format = "perfetto"
    return dataclasses.replace(trace, warnings=tuple(warnings), src_line=np.zeros(trace.src_line.shape, dtype=np.int32))
