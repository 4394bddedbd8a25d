"""Match the idle positions of two traces and say what became of each.

A position (``side.Position``: a recurring group, or a gap of a one-step trace) is
identified by the GPU ops around it, with kernel names normalised (``names.family``:
template arguments, parameter lists, addresses and numbers may differ), by whether it
wraps the step boundary, and by where in the step it starts:

1. **names**: same previous and next op family and the same boundary flag; among
   several such positions (the same pair of kernels recurs within a step) the nearest
   in the step are paired first (which pairs them in order when both traces have as
   many).
2. **one neighbour**: left over after 1, the same previous *or* next family, the same
   boundary flag, and starts within ``POSITION_TOL`` of the step of each other (a
   kernel next to the gap was renamed or fused).

Each match is then ``unchanged`` when its idle per step moved by at most
``UNCHANGED_SHARE`` of the larger of the two, or by less than the minimum gap
(``Params.min_gap_ns``: a change the diagnosis could not even call a gap), else
``shrank`` or ``grew``; a position of BEFORE without a match **died**, one of AFTER
without a match **appeared**.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gapscope.diff.side import Position

__all__ = ["Match", "match_positions", "STATUSES", "POSITION_TOL", "UNCHANGED_SHARE", "NOISE_K"]

#: Status words, in the order the report counts them.
STATUSES = ("died", "shrank", "grew", "appeared", "unchanged")
#: How far apart in the step (fraction of the step) a one-neighbour match may start.
POSITION_TOL = 0.05
#: A matched position whose idle per step moved by at most this share is unchanged.
UNCHANGED_SHARE = 0.10
#: The step-time noise is this many times a spread (median absolute deviation over the
#: steps; used by the verdict).
NOISE_K = 3.0
#: Candidate pairs examined per name key before falling back to pairing in order.
_MAX_PAIRS = 250_000


@dataclasses.dataclass(frozen=True, eq=False)
class Match:
    """One row of the diff: ``before`` and/or ``after`` position, ``status`` (one of
    ``STATUSES``), ``how`` (``"names"``, ``"one neighbour"`` or None when unmatched)
    and ``change_ns`` (after − before idle per step, a missing side counting 0)."""

    before: Position | None
    after: Position | None
    status: str
    how: str | None

    @property
    def change_ns(self) -> int:
        b = self.before.idle_per_step_ns if self.before else 0
        a = self.after.idle_per_step_ns if self.after else 0
        return a - b

    @property
    def label(self) -> str:
        return (self.after or self.before).label  # type: ignore[union-attr]


def status_of(b: Position, a: Position, min_gap_ns: int) -> str:
    """``unchanged``, ``shrank`` or ``grew`` for a matched pair (see the module)."""
    tol = max(UNCHANGED_SHARE * max(b.idle_per_step_ns, a.idle_per_step_ns), min_gap_ns)
    d = a.idle_per_step_ns - b.idle_per_step_ns
    if d < -tol:
        return "shrank"
    if d > tol:
        return "grew"
    return "unchanged"


def _greedy(cost: np.ndarray, allowed: np.ndarray, weight: np.ndarray) -> list[tuple[int, int]]:
    """Pairs (i, j) of a cost matrix, cheapest first (ties: larger ``weight[i]``),
    each row and column at most once, only where ``allowed``."""
    ii, jj = np.nonzero(allowed)
    if ii.size == 0:
        return []
    order = np.lexsort((-weight[ii], cost[ii, jj]))
    used_i, used_j, out = set(), set(), []
    for k in order.tolist():
        i, j = int(ii[k]), int(jj[k])
        if i in used_i or j in used_j:
            continue
        used_i.add(i)
        used_j.add(j)
        out.append((i, j))
    return out


def match_positions(before: tuple[Position, ...], after: tuple[Position, ...], min_gap_ns: int = 2_000) -> list[Match]:
    """Match ``before`` and ``after`` (see the module); ``min_gap_ns``: the diagnosis's
    minimum gap (``Params.min_gap_ns``). Returns every position once:
    matched pairs, then the died and the appeared, in no particular order (the
    document sorts them)."""
    pairs: list[tuple[int, int, str]] = []
    free_b = set(range(len(before)))
    free_a = set(range(len(after)))
    by_key: dict[tuple, tuple[list[int], list[int]]] = {}
    for i, p in enumerate(before):
        by_key.setdefault((p.prev_family, p.next_family, p.boundary), ([], []))[0].append(i)
    for j, p in enumerate(after):
        by_key.setdefault((p.prev_family, p.next_family, p.boundary), ([], []))[1].append(j)
    for bi, aj in by_key.values():
        if not bi or not aj:
            continue
        bi = sorted(bi, key=lambda i: before[i].rel_pos)
        aj = sorted(aj, key=lambda j: after[j].rel_pos)
        if len(bi) == len(aj) or len(bi) * len(aj) > _MAX_PAIRS:
            got = list(zip(bi, aj))
        else:
            rb = np.array([before[i].rel_pos for i in bi])
            ra = np.array([after[j].rel_pos for j in aj])
            w = np.array([before[i].idle_per_step_ns for i in bi], dtype=np.float64)
            cost = np.abs(rb[:, None] - ra[None, :])
            got = [(bi[x], aj[y]) for x, y in _greedy(cost, np.ones_like(cost, dtype=bool), w)]
        for i, j in got:
            pairs.append((i, j, "names"))
            free_b.discard(i)
            free_a.discard(j)
    if free_b and free_a:
        bi, aj = sorted(free_b), sorted(free_a)
        pb = [before[i] for i in bi]
        pa = [after[j] for j in aj]
        rb = np.array([p.rel_pos for p in pb])
        ra = np.array([p.rel_pos for p in pa])
        cost = np.abs(rb[:, None] - ra[None, :])
        same_prev = (
            np.array([p.prev_family for p in pb], dtype=object)[:, None]
            == np.array([p.prev_family for p in pa], dtype=object)[None, :]
        )
        same_next = (
            np.array([p.next_family for p in pb], dtype=object)[:, None]
            == np.array([p.next_family for p in pa], dtype=object)[None, :]
        )
        same_edge = np.array([p.boundary for p in pb])[:, None] == np.array([p.boundary for p in pa])[None, :]
        allowed = (same_prev | same_next) & same_edge & (cost <= POSITION_TOL)
        w = np.array([p.idle_per_step_ns for p in pb], dtype=np.float64)
        for x, y in _greedy(cost, allowed, w):
            pairs.append((bi[x], aj[y], "one neighbour"))
            free_b.discard(bi[x])
            free_a.discard(aj[y])
    out = [Match(before[i], after[j], status_of(before[i], after[j], min_gap_ns), how) for i, j, how in pairs]
    out += [Match(before[i], None, "died", None) for i in sorted(free_b)]
    out += [Match(None, after[j], "appeared", None) for j in sorted(free_a)]
    return out
