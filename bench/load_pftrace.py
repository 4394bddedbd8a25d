"""Benchmark: a Kineto trace as Perfetto protobuf (``.pftrace``) against the same trace as
JSON, both through ``gapscope.parsers.load``, alternating in one run (issue 46).

Usage (from the repository root)::

    .venv/bin/python bench/load_pftrace.py                 # 100k events, 3 rounds
    .venv/bin/python bench/load_pftrace.py --events 1M --repeat 1

Files (cached under ``bench/out/``, git-ignored): the generated Kineto JSON
(``bench/gen_kineto.generate``, seed 0) and its ``.pftrace``, written here with the
``perfetto`` package's generated classes (one ``TrackEvent`` slice begin/end pair per
``X`` event, written together; names, categories and annotation names interned on one
sequence; every arg a debug annotation; ``ac2g`` flows as ``flow_ids`` /
``terminating_flow_ids``). The generator's ``ts`` are small (µs since 5 s), so a
float64 holds each exactly to the ns.

Every load runs in a fresh subprocess with the trace cache off; the JSON and the
``.pftrace`` loads alternate within each round, so a ratio compares runs that saw the
same machine load (the load average is printed with them). Columns: wall seconds of
the ``load`` call; peak RSS of the process (``VmHWM``: ``ru_maxrss`` would carry this
script's own peak across the exec) and of its largest forked child (the Chrome
loader's decoders, ``RUSAGE_CHILDREN``); the memory ratio compares the larger of the two;
CPU seconds of the ``load`` call, its forked children's included (on a machine busy
with other work the wall ratio tends to this ratio: no core is free for the
children to overlap the transcoding with). Also: ``wire walk``, a pure-Python protobuf wire scanner that only
walks every field of every packet, its TrackEvents and their debug annotations
(varints and lengths, nothing built), against ``ParseFromString`` of the whole file by
``protobuf``'s upb backend: the floor a hand-written Python scanner could not go under.

Goal (issue 46): ``.pftrace`` wall ≤ 1.5× the JSON load's, peak memory ≤ the JSON
load's.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"

_CHILD = """
import resource, sys, time
from gapscope.parsers import load
def cpu(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime
t, c = time.perf_counter(), cpu(resource.RUSAGE_SELF)
trace = load(sys.argv[1])
wall = time.perf_counter() - t
cpu_s = cpu(resource.RUSAGE_SELF) - c + cpu(resource.RUSAGE_CHILDREN)  # the children are the load's
status = open("/proc/self/status").read().split("VmHWM:")[1].split()
me = int(status[0])  # kB, this process's own peak (reset by exec: not the bench's)
kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # kB, its largest forked decoder
print(wall, me * 1024, kids * 1024, trace.start_ns.size, cpu_s)
"""


def _size(text: str) -> int:
    text = text.strip().upper()
    mult = {"K": 1_000, "M": 1_000_000}.get(text[-1:], 1)
    return int(float(text.rstrip("KM")) * mult)


def write_pftrace(json_path: Path, out: Path) -> None:
    """``json_path`` (a generated Kineto trace) as a ``.pftrace`` at ``out``."""
    import msgspec
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    doc = msgspec.json.decode(json_path.read_bytes())
    events = doc["traceEvents"]
    del doc
    te_type = pb.TrackEvent
    tracks: dict = {}
    names: dict = {}
    cats: dict = {}
    arg_names: dict = {}
    pnames = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    tnames = {
        (e["pid"], e["tid"]): e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"
    }
    starts: dict = {}  # (pid, tid, ts ns) → the begin packet's TrackEvent, for flows
    with open(out, "wb") as fh:

        def write(p) -> None:
            body = p.SerializeToString()
            fh.write(b"\x0a" + _varint(len(body)) + body)

        def track(pid, tid) -> int:
            key = (pid, tid)
            if key not in tracks:
                u = tracks[key] = len(tracks) + 1
                p = pb.TracePacket()
                d = p.track_descriptor
                d.uuid = u
                ints = isinstance(pid, int) and isinstance(tid, int)
                if not ints or pid < 100:  # a GPU device (or text ids): custom tracks, streams as children
                    d.name = (tnames.get(key) or f"stream {tid}") if ints else str(tid)
                    if ("group", pid) not in tracks:
                        g = tracks[("group", pid)] = 10_000 + len(tracks)
                        q = pb.TracePacket()
                        q.track_descriptor.uuid = g
                        q.track_descriptor.name = (pnames.get(pid) or f"GPU {pid}") if ints else str(pid)
                        write(q)
                    d.parent_uuid = tracks[("group", pid)]
                else:
                    d.thread.pid, d.thread.tid = pid, tid
                    if key in tnames:
                        d.thread.thread_name = tnames[key]
                write(p)
            return tracks[key]

        def iid(table: dict, text: str, add) -> int:
            got = table.get(text)
            if got is None:
                got = table[text] = len(table) + 1
                add(iid=got, name=text)
            return got

        flows = [e for e in events if e.get("ph") in ("s", "f")]
        bind = {}
        for e in flows:
            bind.setdefault((e["pid"], e["tid"], round(e["ts"] * 1000)), []).append(e)
        first = True
        for e in events:
            if e.get("ph") != "X":
                continue
            start, dur = round(e["ts"] * 1000), round(e["dur"] * 1000)
            u = track(e["pid"], e["tid"])
            b = pb.TracePacket()
            b.timestamp = start
            b.trusted_packet_sequence_id = 1
            b.sequence_flags = 1 if first else 2
            first = False
            t = b.track_event
            t.type = te_type.TYPE_SLICE_BEGIN
            t.track_uuid = u
            t.name_iid = iid(names, e["name"], b.interned_data.event_names.add)
            t.category_iids.append(iid(cats, e["cat"], b.interned_data.event_categories.add))
            for key, value in (e.get("args") or {}).items():
                a = t.debug_annotations.add()
                a.name_iid = iid(arg_names, key, b.interned_data.debug_annotation_names.add)
                if isinstance(value, bool):
                    a.bool_value = value
                elif isinstance(value, int):
                    a.int_value = value
                elif isinstance(value, float):
                    a.double_value = value
                elif isinstance(value, str):
                    a.string_value = value
                else:
                    a.legacy_json_value = msgspec.json.encode(value).decode()
            for f in bind.pop((e["pid"], e["tid"], start), ()):
                (t.terminating_flow_ids if f["ph"] == "f" else t.flow_ids).append(f["id"])
            write(b)
            en = pb.TracePacket()
            en.timestamp = start + dur
            en.trusted_packet_sequence_id = 1
            en.sequence_flags = 2
            en.track_event.type = te_type.TYPE_SLICE_END
            en.track_event.track_uuid = u
            write(en)
        del starts


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def wire_walk(data: bytes) -> int:
    """Walk every field of every packet, TrackEvent and debug annotation (nothing
    built); returns the fields seen. The cost floor of a scanner written in Python."""

    def varint(at: int) -> tuple[int, int]:
        v = shift = 0
        while True:
            b = data[at]
            at += 1
            v |= (b & 0x7F) << shift
            if b < 0x80:
                return at, v
            shift += 7

    def walk(at: int, end: int, nested: frozenset) -> int:
        n = 0
        while at < end:
            at, tag = varint(at)
            field, wire = tag >> 3, tag & 7
            n += 1
            if wire == 0:
                at, _ = varint(at)
            elif wire == 2:
                at, size = varint(at)
                if field in nested:
                    n += walk(at, at + size, _INNER.get(field, frozenset()))
                at += size
            else:
                at += 8 if wire == 1 else 4
        return n

    return walk(0, len(data), frozenset((1,)))


#: Length-delimited fields walked into: packet (1) → track_event (11) → debug_annotations (4).
_INNER = {1: frozenset((11,)), 11: frozenset((4,))}


def _run(path: Path) -> tuple[float, int, int, float]:
    env = dict(os.environ, GAPSCOPE_NO_CACHE="1")
    # as the ``gapscope`` command sets it before numpy is imported (``gapscope.cli``):
    # OpenBLAS's idle threads otherwise spin beside the load's processes
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    got = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, env=env, check=True
    ).stdout.split()
    return float(got[0]), int(got[1]), int(got[2]), float(got[4])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", default="100k", help="events in the generated trace (100k, 1M, ...)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (each loads both files once)")
    args = ap.parse_args(argv)
    n = _size(args.events)
    sys.path.insert(0, str(ROOT / "bench"))
    from gen_kineto import generate

    js = OUT / f"pftrace_kineto_{args.events}.json"
    pf = js.with_suffix(".pftrace")
    if not js.exists():
        generate(js, n)
    if not pf.exists():
        t = time.perf_counter()
        part = pf.with_suffix(".part")
        write_pftrace(js, part)
        part.rename(pf)
        print(f"wrote {pf.name} in {time.perf_counter() - t:.1f} s")
    print(f"{js.name}: {js.stat().st_size / 1e6:.0f} MB; {pf.name}: {pf.stat().st_size / 1e6:.0f} MB")
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    data = pf.read_bytes()
    t = time.perf_counter()
    pb.Trace.FromString(data)
    parse_s = time.perf_counter() - t
    t = time.perf_counter()
    fields = wire_walk(data)
    walk_s = time.perf_counter() - t
    del data
    print(f"upb ParseFromString {parse_s:.2f} s; pure-Python wire walk {walk_s:.2f} s ({fields:,} fields)")
    rows: dict[str, list[tuple[float, int, int, float]]] = {"json": [], "pftrace": []}
    for _ in range(args.repeat):
        rows["json"].append(_run(js))
        rows["pftrace"].append(_run(pf))
    print(f"load average: {os.getloadavg()}")
    med = {k: statistics.median(r[0] for r in v) for k, v in rows.items()}
    cpu = {k: statistics.median(r[3] for r in v) for k, v in rows.items()}
    peak = {k: max(max(r[1], r[2]) for r in v) for k, v in rows.items()}
    for k in rows:
        walls = ", ".join(f"{r[0]:.2f}" for r in rows[k])
        own = max(r[1] for r in rows[k]) / 1e6
        kids = max(r[2] for r in rows[k]) / 1e6
        print(
            f"{k:8s} wall {med[k]:.2f} s (runs: {walls}); CPU {cpu[k]:.2f} s; "
            f"peak RSS {own:.0f} MB, its largest child {kids:.0f} MB"
        )
    pairs = sorted(p[0] / j[0] for p, j in zip(rows["pftrace"], rows["json"]))
    print(
        f"pftrace / json: wall {med['pftrace'] / med['json']:.2f}x (median of the rounds' ratios "
        f"{statistics.median(pairs):.2f}x), CPU {cpu['pftrace'] / cpu['json']:.2f}x, "
        f"peak memory {peak['pftrace'] / peak['json']:.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
