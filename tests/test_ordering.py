"""``gapscope.parsers.ordering.nesting_depth`` against its definition, by brute force."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gapscope.parsers.ordering import nesting_depth


def _brute(start: list[int], dur: list[int]) -> list[int]:
    """Depth of each event (sorted by (start, -dur)) = earlier events still open at its start."""
    ends = [s + d for s, d in zip(start, dur)]
    return [sum(1 for j in range(i) if ends[j] > start[i]) for i in range(len(start))]


events = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 15)), min_size=0, max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(events, min_size=1, max_size=4))
def test_nesting_depth_is_the_count_of_open_earlier_events(lanes):
    starts, durs, offsets, want = [], [], [0], []
    for lane in lanes:
        lane = sorted(lane, key=lambda e: (e[0], -e[1]))
        s, d = [e[0] for e in lane], [e[1] for e in lane]
        starts += s
        durs += d
        offsets.append(len(starts))
        want += _brute(s, d)
    got = nesting_depth(np.array(starts, np.int64), np.array(durs, np.int64), np.array(offsets, np.int64))
    assert got.tolist() == want


def test_back_to_back_and_nested_lanes():
    # a stream: back to back, one zero-length op at a boundary
    s = np.array([0, 10, 10, 20], np.int64)
    d = np.array([10, 0, 10, 5], np.int64)
    assert nesting_depth(s, d, np.array([0, 4])).tolist() == [0, 0, 0, 0]
    # a CPU thread: an op holding two children, the second holding a grandchild
    s = np.array([0, 1, 5, 6], np.int64)
    d = np.array([10, 3, 4, 1], np.int64)
    assert nesting_depth(s, d, np.array([0, 4])).tolist() == [0, 1, 1, 2]
