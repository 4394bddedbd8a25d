"""Chrome/Kineto JSON → Perfetto TrackEvent protobuf, for the ``.pftrace`` tests.

An encoder independent of gapscope's loader: it writes with the ``perfetto`` package's
generated classes (``perfetto_trace_pb2``, serialised by ``protobuf``), the way
PyTorch's Perfetto exporter does (pytorch/pytorch #187892): one ``TrackEvent`` slice
(``TYPE_SLICE_BEGIN``/``TYPE_SLICE_END``) per ``X`` event, every Chrome arg as a
debug annotation, event names, categories and annotation names interned per sequence,
``ac2g`` (and older ``async``/``async_gpu``) flows as ``flow_ids`` on the launch and
``terminating_flow_ids`` on the GPU op, ``i`` events as instants.

Tracks: a CPU thread is a thread track (``ThreadDescriptor`` pid/tid/name) under a
process track (``ProcessDescriptor``); a GPU device is a custom track named like
``GPU 0`` and each of its streams a custom child track named like ``stream 7`` (the
loader takes the device and stream numbers from the names' trailing integers). Slices
of one lane that overlap without nesting go on extra tracks of the same lane, as a
track's begin/end pairs must nest.

Timestamps are read from the JSON text as decimals (``parse_float=Decimal``) and
written in exact integer nanoseconds on the default clock (BOOTTIME).

Not encoded (Perfetto has no place for them): the JSON header (``deviceProperties``,
``distributedInfo``, ``baseTimeNanoseconds``), ``fwdbwd`` flows (a TrackEvent flow has
no category), ``B``/``E``, counters and any phase other than ``X``/``i``/``I``/``s``/
``t``/``f``/``M``; ``encode`` returns their count.
"""

from __future__ import annotations

import gzip
import heapq
import json
import re
from decimal import Decimal
from pathlib import Path

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

TE = pb.TrackEvent
SEQ = 7  # trusted_packet_sequence_id of every packet
GPU_CATS = {
    "kernel",
    "gpu_memcpy",
    "gpu_memset",
    "gpu_user_annotation",
    "Kernel",
    "Memcpy",
    "Memset",
    "mtia_ccp_events",
}
FLOW_CATS = {"ac2g", "async", "async_gpu", "async_cpu_to_gpu"}
_TRAILING_INT = re.compile(r"(\d+)\s*$")


def read_events(path: Path) -> list[dict]:
    """The events of a Chrome JSON file (gzip or not), numbers as ``Decimal``."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    doc = json.loads(raw, parse_float=Decimal)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def ns(v) -> int:
    """µs (int, float or Decimal) → integer ns, exact for Decimal."""
    return int((Decimal(v) * 1000).to_integral_value())


def _ends_with(name: str, number) -> bool:
    m = _TRAILING_INT.search(name or "")
    return m is not None and int(m.group(1)) == int(number)


class _Encoder:
    """The packets and track descriptors of one trace, and the lanes' tracks.

    ``pnames``/``psort``: process names and sort indices by pid, ``tnames``/``tsort``:
    thread names and sort indices by (pid, tid), from the ``M`` events; ``gpu_lanes``:
    the (pid, tid) pairs with GPU events."""

    def __init__(self, clear_every: int, events: list[dict]) -> None:
        self.packets: list[tuple[int, int, pb.TracePacket]] = []  # (ts, order, packet)
        self.order = 0
        self.clear_every = clear_every
        self.uuid = 100
        self.track_of: dict[tuple, int] = {}
        self.descriptors: list[pb.TracePacket] = []
        self.processes: dict = {}
        self.devices: dict = {}
        self.pnames: dict = {}
        self.tnames: dict = {}
        self.psort: dict = {}
        self.tsort: dict = {}
        for e in events:
            if e.get("ph") == "M":
                self._metadata(e)
        self.gpu_lanes = {(e.get("pid"), e.get("tid")) for e in events if e.get("cat") in GPU_CATS}

    def _metadata(self, e: dict) -> None:
        a = e.get("args") or {}
        if e.get("name") == "process_name":
            self.pnames[e.get("pid")] = a.get("name")
        elif e.get("name") == "thread_name":
            self.tnames[(e.get("pid"), e.get("tid"))] = a.get("name")
        elif e.get("name") == "process_sort_index":
            self.psort[e.get("pid")] = a.get("sort_index")
        elif e.get("name") == "thread_sort_index":
            self.tsort[(e.get("pid"), e.get("tid"))] = a.get("sort_index")

    def new_uuid(self) -> int:
        self.uuid += 1
        return self.uuid

    def add(self, ts: int, packet: pb.TracePacket) -> None:
        self.packets.append((ts, self.order, packet))
        self.order += 1

    def process_track(self, pid) -> int:
        """The process track of ``pid`` (described on first use)."""
        if pid not in self.processes:
            u = self.processes[pid] = self.new_uuid()
            p = pb.TracePacket()
            p.track_descriptor.uuid = u
            p.track_descriptor.process.pid = int(pid)
            if self.pnames.get(pid) is not None:
                p.track_descriptor.process.process_name = str(self.pnames[pid])
            if isinstance(self.psort.get(pid), int):
                p.track_descriptor.process.legacy_sort_index = self.psort[pid]
            self.descriptors.append(p)
        return self.processes[pid]

    def device_track(self, pid, name: str) -> int:
        """The custom parent track of device (or text-named process) ``pid``, named
        ``name`` on first use."""
        if pid not in self.devices:
            self.devices[pid] = self.new_uuid()
            q = pb.TracePacket()
            q.track_descriptor.uuid = self.devices[pid]
            q.track_descriptor.name = name
            if isinstance(self.psort.get(pid), int):
                q.track_descriptor.sibling_order_rank = self.psort[pid]
            self.descriptors.append(q)
        return self.devices[pid]

    def _is_gpu(self, pid, tid, pname: str, tname: str) -> bool:
        """A GPU stream: integer ids, GPU events, and names ending in those ids."""
        return (pid, tid) in self.gpu_lanes and _ends_with(pname, pid) and _ends_with(tname, tid) and pid >= 0

    def lane_track(self, pid, tid, extra: int) -> int | None:
        """The track of lane (pid, tid), ``extra``-th of its overlap tracks (described on
        first use); None for a lane without pid or tid."""
        key = (pid, tid, extra)
        if key in self.track_of:
            return self.track_of[key]
        if pid is None or tid is None:
            return None
        u = self.new_uuid()
        p = pb.TracePacket()
        d = p.track_descriptor
        d.uuid = u
        pname = self.pnames.get(pid) or f"GPU {pid}"
        tname = self.tnames.get((pid, tid)) or f"stream {tid}"
        ints = isinstance(pid, int) and isinstance(tid, int)
        gpu = ints and self._is_gpu(pid, tid, pname, tname)
        if gpu or not ints:  # a device (or a lane named by text): custom tracks
            d.parent_uuid = self.device_track(pid, pname if gpu else str(pid))
            d.name = tname if gpu else str(tid)
            if isinstance(self.tsort.get((pid, tid)), int):
                d.sibling_order_rank = self.tsort[(pid, tid)]
        else:
            d.parent_uuid = self.process_track(pid)
            d.thread.pid = pid
            d.thread.tid = tid
            if self.tnames.get((pid, tid)) is not None:
                d.thread.thread_name = str(self.tnames[(pid, tid)])
            if isinstance(self.tsort.get((pid, tid)), int):
                d.thread.legacy_sort_index = self.tsort[(pid, tid)]
        self.descriptors.append(p)
        self.track_of[key] = u
        return u


def _args_to_annotations(te, args: dict) -> None:
    for key, value in args.items():
        da = te.debug_annotations.add()
        da.name = str(key)  # interned below
        if isinstance(value, bool):
            da.bool_value = value
        elif isinstance(value, int) and -(2**63) <= value < 2**63:
            da.int_value = value
        elif isinstance(value, Decimal):
            da.double_value = float(value)
        elif isinstance(value, str):
            da.string_value = value
        else:  # lists, dicts, null: as JSON text
            da.legacy_json_value = json.dumps(value, default=float)


def _event_packet(ts: int, type_, track: int, e: dict | None) -> pb.TracePacket:
    """A ``TrackEvent`` packet at ``ts`` ns on ``track``; with Chrome event ``e``: its
    name, category and args."""
    p = pb.TracePacket()
    p.timestamp = ts
    p.trusted_packet_sequence_id = SEQ
    p.track_event.type = type_
    p.track_event.track_uuid = track
    if e is not None:
        p.track_event.name = str(e.get("name", ""))
        if e.get("cat") is not None:
            p.track_event.categories.append(str(e["cat"]))
        _args_to_annotations(p.track_event, e.get("args") or {})
    return p


def _slot(stacks: list[list[int]], start: int, end: int) -> int:
    """The first of a lane's tracks (``stacks``: per track, end ns of its open slices)
    where [start, end) nests, a new one if none; the slice is pushed on it."""
    slot = None
    for j, st in enumerate(stacks):
        while st and st[-1] <= start:
            st.pop()
        if slot is None and (not st or st[-1] >= end):
            slot = j
    if slot is None:
        stacks.append([])
        slot = len(stacks) - 1
    stacks[slot].append(end)
    return slot


def _encode_slices(enc: _Encoder, events: list[dict]) -> tuple[dict[int, pb.TracePacket], dict[tuple, list], int]:
    """The ``X`` events as begin/end pairs, per lane on nested stacks on as many tracks
    as overlaps need. Returns the begin packet of each slice (by its index among the
    ``X`` events), per lane the (start_ns, dur_ns, index) of its slices sorted (for the
    flows), and how many slices had no track."""
    xs = [e for e in events if e.get("ph") == "X" and "ts" in e and "dur" in e]
    by_lane: dict = {}
    for k, e in enumerate(xs):
        by_lane.setdefault((e.get("pid"), e.get("tid")), []).append((ns(e["ts"]), ns(e["dur"]), k, e))
    begin_packet: dict[int, pb.TracePacket] = {}
    where: dict[tuple, list[tuple[int, int, int]]] = {}  # lane → (start_ns, dur_ns, k) for flows
    skipped = 0
    for (pid, tid), items in by_lane.items():
        items.sort(key=lambda t: (t[0], -t[1], t[2]))
        stacks: list[list[int]] = []  # per extra track: end times of open slices
        for start, dur, k, e in items:
            end = start + dur
            track = enc.lane_track(pid, tid, _slot(stacks, start, end))
            if track is None:
                skipped += 1
                continue
            begin_packet[k] = b = _event_packet(start, TE.TYPE_SLICE_BEGIN, track, e)
            enc.add(start, b)
            enc.add(end, _event_packet(end, TE.TYPE_SLICE_END, track, None))
            where.setdefault((pid, tid), []).append((start, dur, k))
    for items in where.values():
        items.sort()
    return begin_packet, where, skipped


def _bind_flow(e: dict, where: dict, begin_packet: dict, seen_flow: set) -> bool:
    """Put flow event ``e``'s id on the slice of its lane that starts at its ts (the
    deepest); False when there is none."""
    at = ns(e.get("ts", 0))
    cands = [(d, k) for s, d, k in where.get((e.get("pid"), e.get("tid")), ()) if s == at]
    if not cands:
        return False
    k = min(cands)[1]
    fid = int(e.get("id"))
    te = begin_packet[k].track_event
    if e.get("ph") == "f":
        te.terminating_flow_ids.append(fid)
    elif fid not in seen_flow or e.get("ph") == "t":
        te.flow_ids.append(fid)
    seen_flow.add(fid)
    return True


def _add_instant(enc: _Encoder, e: dict) -> bool:
    """Instant event ``e`` on its lane's first track; False when it has no lane or ts."""
    track = enc.lane_track(e.get("pid"), e.get("tid"), 0)
    if track is None or "ts" not in e:
        return False
    p = _event_packet(ns(e["ts"]), TE.TYPE_INSTANT, track, e)
    enc.add(p.timestamp, p)
    return True


def encode(events: list[dict], clear_every: int = 0) -> tuple[bytes, int]:
    """``events`` (Chrome trace events) as the bytes of a ``.pftrace``, and how many
    events were not encoded. ``clear_every`` > 0: the sequence's incremental state is
    cleared (``SEQ_INCREMENTAL_STATE_CLEARED``) and names interned again every that
    many packets."""
    enc = _Encoder(clear_every, events)
    begin_packet, where, skipped = _encode_slices(enc, events)
    seen_flow: set = set()
    for e in events:
        ph = e.get("ph")
        if ph in ("s", "t", "f") and e.get("cat") in FLOW_CATS:
            if not _bind_flow(e, where, begin_packet, seen_flow):
                skipped += 1
        elif ph in ("i", "I"):
            if not _add_instant(enc, e):
                skipped += 1
        elif ph not in ("X", "M"):
            skipped += 1
    return _serialise(enc, enc.descriptors), skipped


def _serialise(enc: _Encoder, descriptors: list[pb.TracePacket]) -> bytes:
    """Descriptors first, then the events in time order (stable), with names,
    categories and annotation names interned on the sequence."""
    trace = pb.Trace()
    for d in descriptors:
        trace.packet.append(d)
    state: dict[str, dict[str, int]] = {}
    since_clear = None
    ordered = heapq.nsmallest(len(enc.packets), enc.packets, key=lambda t: (t[0], t[1]))
    for n, (_, _, p) in enumerate(ordered):
        if since_clear is None or (enc.clear_every and since_clear >= enc.clear_every):
            p.sequence_flags = pb.TracePacket.SEQ_INCREMENTAL_STATE_CLEARED
            state = {"names": {}, "cats": {}, "args": {}}
            since_clear = 0
        else:
            p.sequence_flags = pb.TracePacket.SEQ_NEEDS_INCREMENTAL_STATE
        since_clear += 1
        te = p.track_event

        def iid(table: str, text: str, _p=p, state=state) -> int:
            got = state[table].get(text)
            if got is None:
                got = state[table][text] = len(state[table]) + 1
                interned = _p.interned_data
                if table == "names":
                    interned.event_names.add(iid=got, name=text)
                elif table == "cats":
                    interned.event_categories.add(iid=got, name=text)
                else:
                    interned.debug_annotation_names.add(iid=got, name=text)
            return got

        if te.HasField("name"):
            te.name_iid = iid("names", te.name)  # the oneof: name cleared
        if te.categories:
            cats = list(te.categories)
            del te.categories[:]
            te.category_iids.extend(iid("cats", c) for c in cats)
        for da in te.debug_annotations:
            da.name_iid = iid("args", da.name)
        trace.packet.append(p)
    return trace.SerializeToString()
