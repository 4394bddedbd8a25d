"""Picket-fence episodes: runs of short gaps between short kernels, reported as one.

Definition (launch class, "Cause classes" in ``docs/definitions.md``): short gaps
(``<= Params.launch_gap_max_ns``, 30 µs) inside a run of at least
``Params.picket_min_kernels`` (8) short kernels (``<= Params.short_kernel_max_ns``).
Consecutive gaps belong to one run when the busy stretch between them is itself one
short kernel block. The launch calls' median duration is reported beside the kernels'
(the fence exists because the CPU cannot issue kernels as fast as they finish).
Vectorised over gaps; the loop is over episodes only.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gapscope.analysis.types import Gaps, Params
from gapscope.parsers.model import Trace

__all__ = ["PicketEpisode", "find_episodes"]


@dataclasses.dataclass(frozen=True, eq=False)
class PicketEpisode:
    """One picket fence: ``device``; ``start_ns``/``end_ns`` (first gap start, last
    gap end); ``gap_indices`` (int64 rows of ``Gaps``); ``kernel_count`` (gaps + 1);
    ``median_kernel_ns``; ``median_launch_ns`` (-1 when no launch call is linked);
    ``idle_ns`` (sum of the gaps)."""

    device: int
    start_ns: int
    end_ns: int
    gap_indices: np.ndarray
    kernel_count: int
    median_kernel_ns: int
    median_launch_ns: int
    idle_ns: int


def find_episodes(
    trace: Trace, gaps: Gaps, params: Params, launches: np.ndarray
) -> tuple[list[PicketEpisode], np.ndarray]:
    """Return (episodes sorted by start, episode id per gap: int32, -1 outside)."""
    n = len(gaps)
    episode_of = np.full(n, -1, dtype=np.int32)
    if n == 0:
        return [], episode_of
    dur = gaps.dur_ns
    kdur = trace.dur_ns
    prev_ok = gaps.prev_op >= 0
    next_ok = gaps.next_op >= 0
    prev_short = prev_ok & (kdur[np.maximum(gaps.prev_op, 0)] <= params.short_kernel_max_ns)
    next_short = next_ok & (kdur[np.maximum(gaps.next_op, 0)] <= params.short_kernel_max_ns)
    fence = (dur <= params.launch_gap_max_ns) & prev_short & next_short
    link = np.zeros(n, dtype=bool)  # gap j continues the run of gap j-1
    if n > 1:
        block = gaps.start_ns[1:] - gaps.end_ns[:-1]
        link[1:] = (
            fence[1:] & fence[:-1] & (gaps.device[1:] == gaps.device[:-1]) & (block <= params.short_kernel_max_ns)
        )
    starts = np.flatnonzero(fence & ~link)
    run_len = np.zeros(starts.size, dtype=np.int64)
    if starts.size:
        # run of j: count of consecutive linked gaps after the start
        not_link = np.flatnonzero(~link)
        nxt = np.searchsorted(not_link, starts, side="right")
        ends = np.where(nxt < not_link.size, not_link[np.minimum(nxt, not_link.size - 1)], n)
        run_len = ends - starts
    min_gaps = max(params.picket_min_kernels - 1, 1)
    episodes: list[PicketEpisode] = []
    for a, ln in zip(starts[run_len >= min_gaps], run_len[run_len >= min_gaps]):
        rows = np.arange(a, a + ln, dtype=np.int64)
        kernels = np.unique(np.concatenate((gaps.prev_op[rows], gaps.next_op[rows])))
        lc = gaps.launch[rows]
        lc = lc[lc >= 0]
        eid = len(episodes)
        episode_of[rows] = eid
        episodes.append(
            PicketEpisode(
                int(gaps.device[a]),
                int(gaps.start_ns[a]),
                int(gaps.end_ns[a + ln - 1]),
                rows,
                int(ln + 1),
                int(np.median(kdur[kernels])),
                int(np.median(kdur[lc])) if lc.size else -1,
                int(dur[rows].sum()),
            )
        )
    return episodes, episode_of
