"""``EvidenceIndex.overlapping`` keeps a lane's longest events apart (issue 45: a range
open since the lane's start made every query scan the lane up to it); its answer is
the brute-force one: the lane's events that start before ``b`` and end after ``a``."""

from __future__ import annotations

import numpy as np

from gapscope.analysis.evidence import LONG_SHARE, EvidenceIndex
from gapscope.parsers.builder import TraceBuilder
from gapscope.parsers.model import Kind


def _trace():
    b = TraceBuilder(path="long_ranges.json")
    c = b.lane("1", "1", process_name="python3", thread_name="main")
    other = b.lane("1", "2", process_name="python3", thread_name="worker")
    b.event(c, "whole run", 0, 40_000_000, Kind.ANNOTATION)  # open from the lane's start
    b.event(c, "first half", 5, 20_000_000, Kind.ANNOTATION)
    b.event(c, "ends early", 10, 1_000_000, Kind.ANNOTATION)
    b.event(c, "late long", 30_000_000, 9_000_000, Kind.ANNOTATION)
    for k in range(2000):  # 10 µs ops every 20 µs, 2000 of them
        b.event(c, f"aten::op_{k % 7}", 20 + k * 20_000, 10_000, Kind.CPU_OP)
    b.event(other, "elsewhere", 0, 40_000_000, Kind.ANNOTATION)
    return b.build(), c


def test_overlapping_equals_brute_force_with_long_ranges():
    trace, _ = _trace()
    index = EvidenceIndex.build(trace)
    lane = next(k for k, ln in enumerate(trace.lanes) if ln.thread_name == "main")
    sl = trace.lane_slice(lane)
    start = trace.start_ns[sl].astype(np.int64)
    end = index.end[sl]
    assert sl.stop - sl.start == 2004 and 0 < LONG_SHARE * 2004 < 4  # some long events, not all 4
    windows = [(0, 0), (0, 1), (5, 5), (-100, -1), (41_000_000, 42_000_000), (39_999_999, 50_000_000)]
    windows += [(a, a + w) for a in range(-7_000, 40_100_000, 333_331) for w in (0, 1, 9_999, 10_000, 2_500_000)]
    checked = 0
    for a, b in windows:
        got = index.overlapping(trace, lane, a, b)
        want = sl.start + np.flatnonzero((start < b) & (end > a))
        assert got.dtype == np.int64
        assert got.tolist() == want.tolist(), (a, b)
        checked += int(want.size > 0)
    assert checked > 500  # most windows find events: the comparison is not of empties
    # by hand: a query inside op 100 (starts at 2,000,020 ns) finds "whole run",
    # "first half" and op 100 itself; "ends early" ended at 1,000,010 ns
    names = [trace.name(int(e)) for e in index.overlapping(trace, lane, 2_000_100, 2_000_200)]
    assert names == ["whole run", "first half", "aten::op_2"]
