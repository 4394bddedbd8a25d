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
    def __init__(self, clear_every: int) -> None:
        self.packets: list[tuple[int, int, pb.TracePacket]] = []  # (ts, order, packet)
        self.order = 0
        self.clear_every = clear_every
        self.uuid = 100
        self.track_of: dict[tuple, int] = {}

    def new_uuid(self) -> int:
        self.uuid += 1
        return self.uuid

    def add(self, ts: int, packet: pb.TracePacket) -> None:
        self.packets.append((ts, self.order, packet))
        self.order += 1


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


def encode(events: list[dict], clear_every: int = 0) -> tuple[bytes, int]:
    """``events`` (Chrome trace events) as the bytes of a ``.pftrace``, and how many
    events were not encoded. ``clear_every`` > 0: the sequence's incremental state is
    cleared (``SEQ_INCREMENTAL_STATE_CLEARED``) and names interned again every that
    many packets."""
    enc = _Encoder(clear_every)
    pnames: dict = {}
    tnames: dict = {}
    psort: dict = {}
    tsort: dict = {}
    for e in events:
        if e.get("ph") != "M":
            continue
        a = e.get("args") or {}
        if e.get("name") == "process_name":
            pnames[e.get("pid")] = a.get("name")
        elif e.get("name") == "thread_name":
            tnames[(e.get("pid"), e.get("tid"))] = a.get("name")
        elif e.get("name") == "process_sort_index":
            psort[e.get("pid")] = a.get("sort_index")
        elif e.get("name") == "thread_sort_index":
            tsort[(e.get("pid"), e.get("tid"))] = a.get("sort_index")
    gpu_lanes = {(e.get("pid"), e.get("tid")) for e in events if e.get("cat") in GPU_CATS}
    skipped = 0
    descriptors: list[pb.TracePacket] = []
    processes: dict = {}

    def process_track(pid) -> int:
        if pid not in processes:
            u = processes[pid] = enc.new_uuid()
            p = pb.TracePacket()
            p.track_descriptor.uuid = u
            p.track_descriptor.process.pid = int(pid)
            if pnames.get(pid) is not None:
                p.track_descriptor.process.process_name = str(pnames[pid])
            if isinstance(psort.get(pid), int):
                p.track_descriptor.process.legacy_sort_index = psort[pid]
            descriptors.append(p)
        return processes[pid]

    devices: dict = {}

    def lane_track(pid, tid, extra: int) -> int | None:
        key = (pid, tid, extra)
        if key in enc.track_of:
            return enc.track_of[key]
        if pid is None or tid is None:
            return None
        u = enc.new_uuid()
        p = pb.TracePacket()
        d = p.track_descriptor
        d.uuid = u
        pname = pnames.get(pid) or f"GPU {pid}"
        tname = tnames.get((pid, tid)) or f"stream {tid}"
        ints = isinstance(pid, int) and isinstance(tid, int)
        gpu = ints and (pid, tid) in gpu_lanes and _ends_with(pname, pid) and _ends_with(tname, tid) and pid >= 0
        if gpu or not ints:  # a device (or a lane named by text): custom tracks
            if pid not in devices:
                devices[pid] = enc.new_uuid()
                q = pb.TracePacket()
                q.track_descriptor.uuid = devices[pid]
                q.track_descriptor.name = pname if gpu else str(pid)
                if isinstance(psort.get(pid), int):
                    q.track_descriptor.sibling_order_rank = psort[pid]
                descriptors.append(q)
            d.parent_uuid = devices[pid]
            d.name = tname if gpu else str(tid)
            if isinstance(tsort.get((pid, tid)), int):
                d.sibling_order_rank = tsort[(pid, tid)]
        else:
            d.parent_uuid = process_track(pid)
            d.thread.pid = pid
            d.thread.tid = tid
            if tnames.get((pid, tid)) is not None:
                d.thread.thread_name = str(tnames[(pid, tid)])
            if isinstance(tsort.get((pid, tid)), int):
                d.thread.legacy_sort_index = tsort[(pid, tid)]
        descriptors.append(p)
        enc.track_of[key] = u
        return u

    # slices: per lane, nested stacks on as many tracks as overlaps need
    xs = [e for e in events if e.get("ph") == "X" and "ts" in e and "dur" in e]
    by_lane: dict = {}
    for k, e in enumerate(xs):
        by_lane.setdefault((e.get("pid"), e.get("tid")), []).append((ns(e["ts"]), ns(e["dur"]), k, e))
    begin_packet: dict[int, pb.TracePacket] = {}
    where: dict[tuple, list[tuple[int, int, int]]] = {}  # lane → (start_ns, dur_ns, k) for flows
    for (pid, tid), items in by_lane.items():
        items.sort(key=lambda t: (t[0], -t[1], t[2]))
        stacks: list[list[int]] = []  # per extra track: end times of open slices
        for start, dur, k, e in items:
            end = start + dur
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
            track = lane_track(pid, tid, slot)
            if track is None:
                skipped += 1
                continue
            b = pb.TracePacket()
            b.timestamp = start
            b.trusted_packet_sequence_id = SEQ
            b.track_event.type = TE.TYPE_SLICE_BEGIN
            b.track_event.track_uuid = track
            b.track_event.name = str(e.get("name", ""))
            if e.get("cat") is not None:
                b.track_event.categories.append(str(e["cat"]))
            _args_to_annotations(b.track_event, e.get("args") or {})
            enc.add(start, b)
            begin_packet[k] = b
            en = pb.TracePacket()
            en.timestamp = end
            en.trusted_packet_sequence_id = SEQ
            en.track_event.type = TE.TYPE_SLICE_END
            en.track_event.track_uuid = track
            enc.add(end, en)
            where.setdefault((pid, tid), []).append((start, dur, k))
    for lane, items in where.items():
        items.sort()
    # flows: bound to the slice of their lane that starts at their ts (the deepest)
    seen_flow: set = set()
    for e in events:
        ph = e.get("ph")
        if ph in ("s", "t", "f") and e.get("cat") in FLOW_CATS:
            at = ns(e.get("ts", 0))
            cands = [(d, k) for s, d, k in where.get((e.get("pid"), e.get("tid")), ()) if s == at]
            if not cands:
                skipped += 1
                continue
            k = min(cands)[1]
            fid = int(e.get("id"))
            te = begin_packet[k].track_event
            if ph == "f":
                te.terminating_flow_ids.append(fid)
            elif fid not in seen_flow or ph == "t":
                te.flow_ids.append(fid)
            seen_flow.add(fid)
        elif ph in ("i", "I"):
            track = lane_track(e.get("pid"), e.get("tid"), 0)
            if track is None or "ts" not in e:
                skipped += 1
                continue
            p = pb.TracePacket()
            p.timestamp = ns(e["ts"])
            p.trusted_packet_sequence_id = SEQ
            p.track_event.type = TE.TYPE_INSTANT
            p.track_event.track_uuid = track
            p.track_event.name = str(e.get("name", ""))
            if e.get("cat") is not None:
                p.track_event.categories.append(str(e["cat"]))
            _args_to_annotations(p.track_event, e.get("args") or {})
            enc.add(p.timestamp, p)
        elif ph not in ("X", "M"):
            skipped += 1
    return _serialise(enc, descriptors), skipped


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
