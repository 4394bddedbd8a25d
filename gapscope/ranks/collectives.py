"""The same collective on every rank, and who waited for whom.

**Matching.** A collective of one rank is matched with the others' by its NCCL
sequence number and process group when the trace's args carry one (``Seq``), else by
its place: the step it was launched in (by the step annotation's name, so
``ProfilerStep#12`` on every rank), its family (``AllReduce``, ``SendRecv``, …, from
the kernel name) and its ordinal among that family's collectives in the step.

**Wait.** A collective kernel cannot finish before its last peer has arrived, so every
rank's kernel ends at about the same moment and the early ranks' kernels are longer by
the time they waited. The wait of rank *r* at a matched collective is therefore
``dur_r − min(dur)``: the last rank to arrive is the one with the shortest kernel, and
the figure needs no clock agreement between hosts (kernel *starts* compare clocks of
different machines; they are reported as ``arrival_ns`` beside it, relative to the
earliest). The wait lies at the start of the early rank's kernel,
``[start_r, start_r + wait_r)``; the part of it with no other kernel running on the
rank's device is its **exposed wait**: idle in disguise, GPU "busy" only on paper.
The **cost imposed** by the last rank is the sum of the others' waits.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gapscope.analysis.busy import coverage
from gapscope.ranks.summary import Collective, RankSummary

__all__ = ["Matched", "RankWaits", "match_collectives", "collective_key"]


@dataclasses.dataclass(frozen=True)
class Matched:
    """One collective matched across ranks.

    ``key``: the matching key; ``by``: ``"seq"`` or ``"order"``; ``family``, ``name``;
    ``step_label`` ("" outside every step); ``ranks`` int64 (the ranks that have it, sorted);
    ``start_ns``/``dur_ns``/``launch_ns`` int64 per rank in ``ranks`` (launch -1 when
    unknown); ``wait_ns``/``exposed_ns`` int64 per rank; ``last``: the rank that arrived
    last (shortest kernel; ties: the latest start); ``cost_ns``: the sum of the others' waits;
    ``complete``: every rank of the set has it; ``nelems``: message elements (-1);
    ``busy_before_ns`` int64 per rank: its GPU busy from its step start to the kernel."""

    key: tuple
    by: str
    family: str
    name: str
    step_label: str
    ranks: np.ndarray
    start_ns: np.ndarray
    dur_ns: np.ndarray
    launch_ns: np.ndarray
    wait_ns: np.ndarray
    exposed_ns: np.ndarray
    last: int
    cost_ns: int
    complete: bool
    nelems: int
    busy_before_ns: np.ndarray


@dataclasses.dataclass
class RankWaits:
    """Per rank, over the matched collectives: ``wait_ns`` (its kernels' waiting time),
    ``exposed_ns`` (of which no other kernel ran), ``cost_ns`` (the waits it imposed
    on the others by arriving last), ``last_count`` (how often it was last at a
    collective someone waited at), ``cost_by_step`` ``{step label: ns}``,
    ``wait_by_step`` ``{step label: ns}``, ``unmatched`` (its collectives no other rank
    has)."""

    wait_ns: int = 0
    exposed_ns: int = 0
    cost_ns: int = 0
    last_count: int = 0
    cost_by_step: dict = dataclasses.field(default_factory=dict)
    wait_by_step: dict = dataclasses.field(default_factory=dict)
    unmatched: int = 0


def collective_key(c: Collective, labels: tuple) -> tuple:
    """The matching key of ``c`` on a rank whose steps are named ``labels``."""
    if c.seq >= 0:
        return ("seq", c.group, c.seq)
    return ("order", labels[c.step] if c.step >= 0 else "", c.family, c.ordinal)


def _keys(s: RankSummary):
    t = s.collectives
    labels = s.step_labels
    for j in range(len(t)):
        seq = int(t.seq[j])
        if seq >= 0:
            yield j, ("seq", t.group[j], seq)
        else:
            st = int(t.step[j])
            yield j, ("order", labels[st] if st >= 0 else "", t.family[j], int(t.ordinal[j]))


def match_collectives(ranks: dict[int, RankSummary]) -> tuple[list[Matched], dict[int, RankWaits]]:
    """Match the collectives of ``ranks`` (``{rank: summary}``) and measure the waits.

    Returns the matched collectives (in order of their earliest start) and the figures
    per rank (a ``RankWaits`` for every rank, zeros when it has no collective)."""
    table: dict[tuple, dict[int, int]] = {}
    for r, s in ranks.items():
        for j, key in _keys(s):
            table.setdefault(key, {}).setdefault(r, j)
    waits = {r: RankWaits() for r in ranks}
    out: list[Matched] = []
    n_ranks = len(ranks)
    for key, by_rank in table.items():
        if len(by_rank) < 2:
            for r in by_rank:
                waits[r].unmatched += 1
            continue
        rs = np.array(sorted(by_rank), dtype=np.int64)
        tabs = [(ranks[int(r)].collectives, by_rank[int(r)]) for r in rs]
        start = np.array([t.start_ns[j] for t, j in tabs], dtype=np.int64)
        dur = np.array([t.end_ns[j] for t, j in tabs], dtype=np.int64) - start
        launch = np.array([t.launch_start_ns[j] for t, j in tabs], dtype=np.int64)
        busy_before = np.array([t.busy_before_ns[j] for t, j in tabs], dtype=np.int64)
        dmin = int(dur.min())
        ties = np.flatnonzero(dur == dmin)
        last_i = int(ties[np.argmax(start[ties])])
        wait = dur - dmin
        exposed = np.zeros_like(wait)
        for j, r in enumerate(rs.tolist()):
            if wait[j] > 0:
                s = ranks[r]
                covered = int(
                    coverage(s.comp_start_ns, s.comp_end_ns, np.array([start[j]]), np.array([start[j] + wait[j]]))[0]
                )
                exposed[j] = wait[j] - covered
        last = int(rs[last_i])
        t_last, j_last = tabs[last_i]
        c0 = t_last[j_last]
        s_last = ranks[last]
        label = s_last.step_labels[c0.step] if c0.step >= 0 else ""
        cost = int(wait.sum())
        out.append(
            Matched(
                key,
                key[0],
                c0.family,
                c0.name,
                label,
                rs,
                start,
                dur,
                launch,
                wait,
                exposed,
                last,
                cost,
                len(by_rank) == n_ranks,
                c0.nelems,
                busy_before,
            )
        )
        if cost > 0:
            waits[last].cost_ns += cost
            waits[last].last_count += 1
            waits[last].cost_by_step[label] = waits[last].cost_by_step.get(label, 0) + cost
        for j, r in enumerate(rs.tolist()):
            w = waits[r]
            w.wait_ns += int(wait[j])
            w.exposed_ns += int(exposed[j])
            w.wait_by_step[label] = w.wait_by_step.get(label, 0) + int(wait[j])
    out.sort(key=lambda m: (int(m.start_ns.min()), m.key))
    return out, waits
