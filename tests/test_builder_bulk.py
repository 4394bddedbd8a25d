"""``TraceBuilder.add_events`` (many events at once) builds what ``event`` called for
each in turn builds: same name ids, order, args and flows."""

from __future__ import annotations

import dataclasses

import numpy as np

from gapscope.parsers import CopyKind, Kind
from gapscope.parsers.builder import TraceBuilder


def snapshot(t):
    """Everything a ``Trace`` holds, as plain values (arrays as dtype and bytes: nan == nan)."""
    arrays = {
        f.name: (str(v.dtype), v.shape, v.tobytes())
        for f in dataclasses.fields(t)
        if isinstance(v := getattr(t, f.name), np.ndarray)
    }
    return (arrays, t.names, t.lanes, dataclasses.asdict(t.source), t.warnings, [t.args_of(i) for i in range(len(t))])


def test_add_events_is_event_after_event():
    rows = [(0, "b", 5, 3, Kind.KERNEL, 1, CopyKind.NONE, 7), (1, "a", 2, 0, Kind.LAUNCH, 1, CopyKind.NONE, 8)]
    rows += [(0, "b", 9, 1, Kind.MEMCPY, -1, CopyKind.H2D, 9), (1, "c", 1, 4, Kind.PYTHON, -1, CopyKind.NONE, 0)]

    def lanes(b):
        b.lane("host", "main", process_name="CPU")
        b.lane("gpu0", "stream 0", is_gpu=True, device=0, stream=0)

    one = TraceBuilder(format="ascii-events")
    lanes(one)
    for lane, name, start, dur, kind, corr, ck, line in rows:
        one.event(lane, name, start, dur, kind, correlation=corr, copy_kind=ck, line=line, args={"k": line})
    bulk = TraceBuilder(format="ascii-events")
    lanes(bulk)
    bulk.event(*rows[0][:5], correlation=1, line=7, args={"k": 7})  # one by one, then in bulk
    names = ["c", "a", "b"]
    cols = list(zip(*rows[1:]))
    bulk.add_events(
        np.array(cols[0]),
        names,
        np.array([names.index(x) for x in cols[1]]),
        np.array(cols[2]),
        np.array(cols[3]),
        np.array(cols[4]),
        correlation=np.array(cols[5]),
        copy_kind=np.array(cols[6]),
        line=np.array(cols[7]),
        args={k: {"k": line} for k, line in enumerate(cols[7])},
    )
    assert snapshot(bulk.build()) == snapshot(one.build())


def test_add_events_empty_and_flows():
    b = TraceBuilder(format="ascii-events")
    lane = b.lane("host", "main")
    first = b.event(lane, "a", 0, 1, Kind.LAUNCH)
    b.add_events(np.zeros(0), [], np.zeros(0), np.zeros(0), np.zeros(0), np.zeros(0))
    b.add_events(np.array([lane]), ["k"], np.array([0]), np.array([2]), np.array([3]), np.array([Kind.PYTHON]))
    last = b.event(lane, "z", 9, 0, Kind.PYTHON)
    assert (first, last) == (0, 2)
    b.flow(first, last)
    t = b.build()
    assert t.names == ("a", "k", "z") and t.start_ns.tolist() == [0, 2, 9]
    assert [(int(s), int(d)) for s, d in zip(t.flow_src, t.flow_dst)] == [(0, 2)]
